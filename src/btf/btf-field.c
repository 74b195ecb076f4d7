/* btf-field.c: one field of a map's key or value, found by path ("key.proto", "bytes") through BTF once
 * per scrape, then read from each entry's bytes without decoding the rest: what /metrics needs to
 * turn 10,000 entries into label values and numbers quickly. */
#include <bpf/btf.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "btf.h"

/* Types nest no deeper than this in anything a C compiler emits for a map; a deeper (or looping) chain
 * is cut off rather than followed. */
#define BTF_MODS_MAX 32

const struct btf_type *btf_skip_mods(const struct btf *btf, uint32_t *id) {
        const struct btf_type *t = btf__type_by_id(btf, *id);

        for (int i = 0; t && i < BTF_MODS_MAX &&
                        (btf_is_typedef(t) || btf_is_mod(t) || btf_kind(t) == BTF_KIND_TYPE_TAG);
             i++) {
                *id = t->type;
                t = btf__type_by_id(btf, *id);
        }
        return t;
}

const char *btf_enum_name(const struct btf *btf, const struct btf_type *t, uint64_t v, bool is_signed) {
        if (btf_is_enum(t)) {
                const struct btf_enum *e = btf_enum(t);
                for (uint16_t i = 0; i < btf_vlen(t); i++, e++)
                        if ((uint32_t) e->val == (uint32_t) v && (is_signed || (v >> 32) == 0))
                                return btf__name_by_offset(btf, e->name_off);
        } else {
                const struct btf_enum64 *e = btf_enum64(t);
                for (uint16_t i = 0; i < btf_vlen(t); i++, e++)
                        if (btf_enum64_value(e) == v)
                                return btf__name_by_offset(btf, e->name_off);
        }
        return NULL;
}

/* The member named name of the struct or union t, looking into anonymous members too. */
static bool find_member(const struct btf *btf, const struct btf_type *t, const char *name, size_t len,
                        uint32_t *ret_bit_off, uint32_t *ret_bitfield, uint32_t *ret_type) {
        const struct btf_member *m = btf_members(t);

        for (uint16_t i = 0; i < btf_vlen(t); i++, m++) {
                const char *n = btf__name_by_offset(btf, m->name_off);
                if (n && strlen(n) == len && strncmp(n, name, len) == 0) {
                        *ret_bit_off = btf_member_bit_offset(t, i);
                        *ret_bitfield = btf_member_bitfield_size(t, i);
                        *ret_type = m->type;
                        return true;
                }
                if (!n || !n[0]) {
                        uint32_t id = m->type, off;
                        const struct btf_type *mt = btf_skip_mods(btf, &id);
                        if (mt && btf_is_composite(mt) &&
                            find_member(btf, mt, name, len, &off, ret_bitfield, ret_type)) {
                                *ret_bit_off = btf_member_bit_offset(t, i) + off;
                                return true;
                        }
                }
        }
        return false;
}

int btf_field_resolve(const struct btf *btf, uint32_t type_id, size_t size, const char *path, BtfField *ret,
                      char *why, size_t why_size) {
        BtfField f = { .type_id = type_id, .size_bits = (uint32_t) size * 8 };
        const char *p = path;

        if (!btf || !type_id) {
                /* no BTF: the whole key or value, as a little-endian integer of 8 bytes at most */
                if (path && path[0]) {
                        snprintf(why, why_size, "the map has no BTF, so it has no field \"%s\"", path);
                        return -ENOENT;
                }
                if (size > 8) {
                        snprintf(why, why_size, "the map has no BTF and is %zu bytes wide: not a number",
                                 size);
                        return -EINVAL;
                }
                f.raw = true;
                *ret = f;
                return 0;
        }
        while (p && *p) {
                const char *dot = strchr(p, '.');
                size_t len = dot ? (size_t) (dot - p) : strlen(p);
                uint32_t id = f.type_id, off, bitfield;
                const struct btf_type *t = btf_skip_mods(btf, &id);

                if (!t || !btf_is_composite(t)) {
                        snprintf(why, why_size, "\"%.*s\" is asked of a type that is not a struct",
                                 (int) len, p);
                        return -EINVAL;
                }
                if (!find_member(btf, t, p, len, &off, &bitfield, &f.type_id)) {
                        snprintf(why, why_size, "%s has no field \"%.*s\"",
                                 btf__name_by_offset(btf, t->name_off)[0]
                                         ? btf__name_by_offset(btf, t->name_off)
                                         : "the struct",
                                 (int) len, p);
                        return -ENOENT;
                }
                f.bit_off += off;
                f.bitfield = bitfield;
                p = dot ? dot + 1 : NULL;
        }
        {
                uint32_t id = f.type_id;
                const struct btf_type *t = btf_skip_mods(btf, &id);
                int64_t sz;

                if (!t) {
                        snprintf(why, why_size, "broken BTF");
                        return -EINVAL;
                }
                f.type_id = id;
                f.btf = btf;
                if (btf_is_int(t)) {
                        f.kind = BTF_FIELD_INT;
                        f.is_signed = btf_int_encoding(t) & BTF_INT_SIGNED;
                        f.size_bits = f.bitfield ? f.bitfield : btf_int_bits(t);
                        f.bit_off += btf_int_offset(t);
                        if (f.size_bits > 64) {
                                snprintf(why, why_size, "a %u-bit integer is wider than a metric takes",
                                         f.size_bits);
                                return -EINVAL;
                        }
                } else if (btf_is_any_enum(t)) {
                        f.kind = BTF_FIELD_ENUM;
                        f.is_signed = btf_kflag(t);
                        f.size_bits = f.bitfield ? f.bitfield : t->size * 8;
                } else if (btf_is_array(t)) {
                        sz = btf__resolve_size(btf, id);
                        f.kind = BTF_FIELD_BYTES;
                        f.size_bits = sz > 0 ? (uint32_t) sz * 8 : 0;
                } else {
                        sz = btf__resolve_size(btf, id);
                        f.kind = BTF_FIELD_BYTES;
                        f.size_bits = sz > 0 ? (uint32_t) sz * 8 : 0;
                }
        }
        *ret = f;
        return 0;
}

bool btf_field_is_number(const BtfField *f) {
        return f->raw || f->kind == BTF_FIELD_INT || f->kind == BTF_FIELD_ENUM;
}

uint64_t btf_load_bits(const uint8_t *data, uint32_t off, uint32_t bits) {
        uint64_t v = 0;
        uint32_t bytes = (off % 8 + bits + 7) / 8;

        for (uint32_t i = 0; i < bytes && i < 9; i++) {
                uint64_t b = data[off / 8 + i];
                int shift = 8 * (int) i - (int) (off % 8);
                v |= shift >= 0 ? (shift < 64 ? b << shift : 0) : b >> -shift;
        }
        if (bits < 64)
                v &= (UINT64_C(1) << bits) - 1;
        return v;
}

int64_t btf_field_signed(const BtfField *f, uint64_t v) {
        if (f->size_bits > 0 && f->size_bits < 64 && (v & (UINT64_C(1) << (f->size_bits - 1))))
                v |= ~((UINT64_C(1) << f->size_bits) - 1);
        return (int64_t) v;
}

uint64_t btf_field_load(const BtfField *f, const uint8_t *data) {
        return btf_load_bits(data, f->bit_off, f->size_bits);
}

double btf_field_number(const BtfField *f, const uint8_t *data) {
        uint64_t v = btf_field_load(f, data);
        return f->is_signed ? (double) btf_field_signed(f, v) : (double) v;
}

void btf_field_format(const BtfField *f, const uint8_t *data, char *buf, size_t size) {
        uint64_t v;

        if (f->kind == BTF_FIELD_BYTES) {
                const uint8_t *b = data + f->bit_off / 8;
                size_t n = f->size_bits / 8, len = 0;
                bool text = n > 0;
                uint32_t id = f->type_id;
                const struct btf_type *t = btf__type_by_id(f->btf, id);

                /* a char array holding a C string is its text; anything else (a u8 array too), hex */
                if (t && btf_is_array(t) && btf_is_char(f->btf, btf_array(t)->type)) {
                        while (len < n && b[len])
                                len++;
                        for (size_t i = 0; i < n && text; i++)
                                text = i < len ? (b[i] >= 0x20 && b[i] < 0x7f) : b[i] == 0;
                } else
                        text = false;
                if (text) {
                        snprintf(buf, size, "%.*s", (int) len, (const char *) b);
                        return;
                }
                for (size_t i = 0, o = 0; i < n && o + 3 <= size; i++, o += 2)
                        snprintf(buf + o, size - o, "%02x", b[i]);
                if (n == 0 && size)
                        buf[0] = 0;
                return;
        }
        v = btf_field_load(f, data);
        if (f->kind == BTF_FIELD_ENUM && f->is_signed)
                v = (uint64_t) btf_field_signed(f, v);
        if (f->kind == BTF_FIELD_ENUM) {
                const char *name =
                        btf_enum_name(f->btf, btf__type_by_id(f->btf, f->type_id), v, f->is_signed);
                if (name) {
                        snprintf(buf, size, "%s", name);
                        return;
                }
        }
        if (f->is_signed)
                snprintf(buf, size, "%" PRId64, btf_field_signed(f, v));
        else
                snprintf(buf, size, "%" PRIu64, v);
}

bool btf_is_char(const struct btf *btf, uint32_t id) {
        const struct btf_type *t = btf_skip_mods(btf, &id);
        return t && btf_is_int(t) && t->size == 1 &&
               ((btf_int_encoding(t) & BTF_INT_CHAR) ||
                streq(btf__name_by_offset(btf, t->name_off), "char"));
}
