/* btf-encode.c: JSON to a map key's or value's bytes through BTF: what a map write takes, in the shapes
 * btf_json_decode() gives (numbers or decimal strings past 2^63, enum names, strings for char arrays,
 * objects for structs, one member of a union), each value checked against its type's range. */
#include <bpf/btf.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "btf.h"

/* Types nest no deeper than this in anything a C compiler emits for a map; a deeper (or looping) chain is
 * cut off rather than followed. */
#define BTF_DEPTH_MAX 32

static void store_bits(uint8_t *data, uint32_t off, uint32_t bits, uint64_t v) {
        for (uint32_t i = 0; i < bits; i++) {
                uint32_t b = off + i;
                if ((v >> i) & 1)
                        data[b / 8] |= (uint8_t) (1u << (b % 8));
                else
                        data[b / 8] &= (uint8_t) ~(1u << (b % 8));
        }
}

static int hex_bytes(const json_t *v, uint8_t *out, size_t size, const char *path, Error *reterr) {
        const char *s = json_string_value(v);

        if (!s || strlen(s) != size * 2)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: expected %zu bytes in hex (%zu digits)", path, size, size * 2);
        for (size_t i = 0; i < size; i++) {
                unsigned x;
                if (sscanf(s + 2 * i, "%2x", &x) != 1 || !isxdigit((unsigned char) s[2 * i]) ||
                    !isxdigit((unsigned char) s[2 * i + 1]))
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: not hex", path);
                out[i] = (uint8_t) x;
        }
        return 0;
}

/* An integer of bits bits from a JSON integer, or a decimal string (how values past 2^63 are shown). */
static int int_value(const json_t *v, uint32_t bits, bool is_signed, uint64_t *ret, const char *path,
                     Error *reterr) {
        int64_t lo = is_signed ? (bits >= 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1))) : 0;
        uint64_t hi = is_signed ? (bits >= 64 ? (uint64_t) INT64_MAX : (UINT64_C(1) << (bits - 1)) - 1)
                                : (bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1);
        const char *s = json_string_value(v);

        if (json_is_integer(v)) {
                json_int_t x = json_integer_value(v);
                if ((x < 0 && x < lo) || (x >= 0 && (uint64_t) x > hi))
                        goto range;
                *ret = (uint64_t) x;
                return 0;
        }
        if (s && !is_signed && s[0] >= '0' && s[0] <= '9') {
                char *end;
                errno = 0;
                unsigned long long x = strtoull(s, &end, 10);
                if (errno || *end || x > hi)
                        goto range;
                *ret = x;
                return 0;
        }
range:
        if (is_signed)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: expected an integer from %" PRId64 " to %" PRIu64, path, lo, hi);
        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: expected an integer from 0 to %" PRIu64,
                         path, hi);
}

static int encode(const struct btf *btf, uint32_t id, const json_t *v, uint8_t *data, uint32_t bit_off,
                  uint32_t bitfield_size, const char *path, int depth, Error *reterr);

/* Whether name is a member of t, looking into anonymous members as decode_members() shows them. */
static bool has_member(const struct btf *btf, const struct btf_type *t, const char *name, int depth) {
        const struct btf_member *m = btf_members(t);

        for (uint16_t i = 0; depth < BTF_DEPTH_MAX && i < btf_vlen(t); i++, m++) {
                const char *n = btf__name_by_offset(btf, m->name_off);
                uint32_t mid = m->type;
                const struct btf_type *mt = btf_skip_mods(btf, &mid);
                if (n && n[0] ? streq(n, name)
                              : mt && btf_is_composite(mt) && has_member(btf, mt, name, depth + 1))
                        return true;
        }
        return false;
}

/* The union's members obj gives (an anonymous struct member counts once, whichever of its fields): the
 * first two found. */
static void union_members_given(const struct btf *btf, const struct btf_type *t, const json_t *obj,
                                int depth, const char **first, const char **second) {
        const struct btf_member *m = btf_members(t);

        for (uint16_t i = 0; i < btf_vlen(t) && !*second; i++, m++) {
                const char *n = btf__name_by_offset(btf, m->name_off), *hit = NULL, *key;
                uint32_t mid = m->type;
                const struct btf_type *mt = btf_skip_mods(btf, &mid);
                json_t *x;

                if (n && n[0])
                        hit = json_object_get(obj, n) ? n : NULL;
                else if (mt && btf_is_composite(mt))
                        json_object_foreach ((json_t *) obj, key, x)
                                if (!hit && has_member(btf, mt, key, depth + 1))
                                        hit = key;
                if (hit)
                        *(*first ? second : first) = hit;
        }
}

static int encode_members(const struct btf *btf, const struct btf_type *t, const json_t *obj, uint8_t *data,
                          uint32_t bit_off, const char *path, int depth, Error *reterr) {
        const struct btf_member *m = btf_members(t);

        for (uint16_t i = 0; i < btf_vlen(t); i++, m++) {
                const char *name = btf__name_by_offset(btf, m->name_off);
                uint32_t off = bit_off + btf_member_bit_offset(t, i), mid = m->type;
                const struct btf_type *mt = btf_skip_mods(btf, &mid);
                char sub[256];
                const json_t *x;
                int r;

                if (!name || !name[0]) {
                        if (mt && btf_is_union(mt)) {
                                /* an anonymous union's members are the parent's: one of them, too */
                                const char *first = NULL, *second = NULL;
                                union_members_given(btf, mt, obj, depth + 1, &first, &second);
                                if (second)
                                        return error_set(
                                                reterr, EINVAL, ERROR_INVALID_VALUE,
                                                "%s: a union holds one of its members; %s and %s given",
                                                path, first, second);
                        }
                        if (mt && btf_is_composite(mt)) {
                                r = encode_members(btf, mt, obj, data, off, path, depth + 1, reterr);
                                if (r < 0)
                                        return r;
                        }
                        continue;
                }
                x = json_object_get(obj, name);
                if (!x)
                        continue; /* a field not given is zero */
                snprintf(sub, sizeof(sub), "%s.%s", path, name);
                r = encode(btf, m->type, x, data, off, btf_member_bitfield_size(t, i), sub, depth + 1,
                           reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int encode_int(const struct btf_type *t, const json_t *v, uint8_t *data, uint32_t bit_off,
                      uint32_t bitfield_size, const char *path, Error *reterr) {
        uint32_t bits = bitfield_size ? bitfield_size : btf_int_bits(t);
        uint8_t enc = btf_int_encoding(t);
        uint64_t x;
        int r;

        bit_off += btf_int_offset(t);
        if (enc & BTF_INT_BOOL) {
                if (!json_is_boolean(v))
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: expected true or false",
                                         path);
                store_bits(data, bit_off, 1, json_is_true(v));
                return 0;
        }
        if (bits > 64)
                return hex_bytes(v, data + bit_off / 8, bits / 8, path, reterr);
        r = int_value(v, bits, enc & BTF_INT_SIGNED, &x, path, reterr);
        if (r >= 0)
                store_bits(data, bit_off, bits, x);
        return r;
}

/* The value of the enum's name s (-EINVAL said if it has none). */
static int enum_value(const struct btf *btf, const struct btf_type *t, const char *s, uint64_t *ret,
                      const char *path, Error *reterr) {
        for (uint16_t i = 0; i < btf_vlen(t); i++) {
                const char *n = btf__name_by_offset(btf, btf_is_enum(t) ? btf_enum(t)[i].name_off
                                                                        : btf_enum64(t)[i].name_off);
                if (n && streq(n, s)) {
                        *ret = btf_is_enum(t) ? (uint64_t) (int64_t) btf_enum(t)[i].val
                                              : btf_enum64_value(&btf_enum64(t)[i]);
                        return 0;
                }
        }
        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: %s is not a name of the enum", path, s);
}

static int encode_enum(const struct btf *btf, const struct btf_type *t, const json_t *v, uint8_t *data,
                       uint32_t bit_off, uint32_t bitfield_size, const char *path, Error *reterr) {
        uint32_t bits = bitfield_size ? bitfield_size : t->size * 8;
        const char *s = json_string_value(v);
        uint64_t x = 0;
        int r;

        if (s) {
                r = enum_value(btf, t, s, &x, path, reterr);
                if (r < 0)
                        return r;
                /* a bitfield narrower than the enum holds only some of its values; a whole field holds
                 * them all (a 32-bit enum's value is its low 32 bits, whatever its sign: clang 14 marks
                 * no enum signed) */
                if (bitfield_size && bits < t->size * 8 && bits < 64) {
                        uint64_t u = btf_is_enum(t) && !btf_kflag(t) ? (uint32_t) x : x;
                        bool fits = btf_kflag(t) ? (int64_t) x >= -(INT64_C(1) << (bits - 1)) &&
                                                           (int64_t) x < (INT64_C(1) << (bits - 1))
                                                 : u < (UINT64_C(1) << bits);
                        if (!fits)
                                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                 "%s: %s (%" PRId64 ") does not fit the field's %u bits",
                                                 path, s, (int64_t) x, bits);
                }
        } else if ((r = int_value(v, bits, btf_kflag(t), &x, path, reterr)) < 0)
                return r;
        store_bits(data, bit_off, bits, x);
        return 0;
}

static int encode_float(const struct btf_type *t, const json_t *v, uint8_t *data, uint32_t bit_off,
                        const char *path, Error *reterr) {
        if (!json_is_number(v))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: expected a number", path);
        if (t->size == 4) {
                float f = (float) json_number_value(v);
                memcpy(data + bit_off / 8, &f, sizeof(f));
                return 0;
        }
        if (t->size == 8) {
                double f = json_number_value(v);
                memcpy(data + bit_off / 8, &f, sizeof(f));
                return 0;
        }
        return hex_bytes(v, data + bit_off / 8, t->size, path, reterr);
}

static int encode_array(const struct btf *btf, const struct btf_type *t, const json_t *v, uint8_t *data,
                        uint32_t bit_off, const char *path, int depth, Error *reterr) {
        const struct btf_array *a = btf_array(t);
        int64_t esize = btf__resolve_size(btf, a->type);
        const char *s = json_string_value(v);
        char sub[256];
        int r;

        if (esize <= 0)
                return error_set(reterr, EINVAL, ERROR_MAP_UNWRITABLE, "%s: an array of unsized elements",
                                 path);
        if (s && btf_is_char(btf, a->type)) {
                size_t len = strlen(s);
                /* as reads show it: a string that fills every byte has no NUL (a fixed field, not a C
                 * string), as the decoder reads such an array back */
                if (len > a->nelems)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: at most %u characters",
                                         path, a->nelems);
                memset(data + bit_off / 8, 0, a->nelems);
                memcpy(data + bit_off / 8, s, len);
                return 0;
        }
        if (!json_is_array(v) || json_array_size(v) != a->nelems)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: expected a list of %u elements%s",
                                 path, a->nelems, btf_is_char(btf, a->type) ? " or a string" : "");
        for (uint32_t i = 0; i < a->nelems; i++) {
                snprintf(sub, sizeof(sub), "%s[%u]", path, i);
                r = encode(btf, a->type, json_array_get(v, i), data, bit_off + (uint32_t) (i * esize * 8), 0,
                           sub, depth + 1, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int encode_composite(const struct btf *btf, const struct btf_type *t, const json_t *v, uint8_t *data,
                            uint32_t bit_off, const char *path, int depth, Error *reterr) {
        const char *key;
        json_t *x;

        if (!json_is_object(v))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: expected an object (the fields of %s)", path,
                                 btf__name_by_offset(btf, t->name_off) ?: "the struct");
        json_object_foreach ((json_t *) v, key, x)
                if (!has_member(btf, t, key, depth))
                        return error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD, "%s: no field %s", path, key);
        if (btf_is_union(t)) {
                /* its members share the bytes: two given would overwrite each other */
                const char *first = NULL, *second = NULL;
                union_members_given(btf, t, v, depth, &first, &second);
                if (second)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "%s: a union holds one of its members; %s and %s given", path,
                                         first, second);
        }
        return encode_members(btf, t, v, data, bit_off, path, depth, reterr);
}

static int encode(const struct btf *btf, uint32_t id, const json_t *v, uint8_t *data, uint32_t bit_off,
                  uint32_t bitfield_size, const char *path, int depth, Error *reterr) {
        const struct btf_type *t;

        if (depth > BTF_DEPTH_MAX || !(t = btf_skip_mods(btf, &id)))
                return error_set(reterr, EINVAL, ERROR_MAP_UNWRITABLE, "%s: a type clsd cannot follow",
                                 path);
        switch (btf_kind(t)) {
        case BTF_KIND_INT:
                return encode_int(t, v, data, bit_off, bitfield_size, path, reterr);
        case BTF_KIND_ENUM:
        case BTF_KIND_ENUM64:
                return encode_enum(btf, t, v, data, bit_off, bitfield_size, path, reterr);
        case BTF_KIND_FLOAT:
                return encode_float(t, v, data, bit_off, path, reterr);
        case BTF_KIND_ARRAY:
                return encode_array(btf, t, v, data, bit_off, path, depth, reterr);
        case BTF_KIND_STRUCT:
        case BTF_KIND_UNION:
                return encode_composite(btf, t, v, data, bit_off, path, depth, reterr);
        default:
                return error_set(reterr, EINVAL, ERROR_MAP_UNWRITABLE,
                                 "%s: a %s is not written through the API", path,
                                 btf_kind(t) == BTF_KIND_PTR ? "pointer" : "value of this kind");
        }
}

int btf_json_encode(const struct btf *btf, uint32_t type_id, const json_t *v, uint8_t *out, size_t size,
                    const char *what, Error *reterr) {
        memset(out, 0, size);
        if (!btf || !type_id || btf__resolve_size(btf, type_id) != (int64_t) size)
                return hex_bytes(v, out, size, what, reterr);
        return encode(btf, type_id, v, out, 0, 0, what, 0, reterr);
}
