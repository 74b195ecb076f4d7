/* btf-json.c: map keys and values as typed JSON through the map's BTF, as bpftool's dumper does:
 * integers, structs as objects by field name, arrays as lists (char arrays as strings), enums by name,
 * and, for per-CPU values, their sum. Without BTF, the bytes in hex. */
#include <bpf/btf.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "btf.h"

/* Types nest no deeper than this in anything a C compiler emits for a map; a deeper (or looping)
 * chain is cut off rather than followed. */
#define BTF_DEPTH_MAX 32

json_t *btf_json_hex(const uint8_t *data, size_t size) {
        static const char digits[] = "0123456789abcdef";
        _cleanup_free_ char *s = malloc(size * 2 + 1);

        if (!s)
                return NULL;
        for (size_t i = 0; i < size; i++) {
                s[2 * i] = digits[data[i] >> 4];
                s[2 * i + 1] = digits[data[i] & 0xf];
        }
        s[size * 2] = 0;
        return json_string(s);
}

static json_t *json_u64(uint64_t v) {
        char buf[24];

        if (v <= INT64_MAX)
                return json_integer((json_int_t) v);
        /* JSON numbers beyond 2^63 lose precision in most readers: a decimal string keeps it */
        snprintf(buf, sizeof(buf), "%" PRIu64, v);
        return json_string(buf);
}

static json_t *json_int_bits(uint64_t v, uint32_t bits, bool is_signed) {
        if (is_signed && bits < 64 && bits > 0 && (v & (UINT64_C(1) << (bits - 1))))
                v |= ~((UINT64_C(1) << bits) - 1);
        return is_signed ? json_integer((json_int_t) (int64_t) v) : json_u64(v);
}

static json_t *char_array(const uint8_t *data, uint32_t n) {
        uint32_t len = 0;

        while (len < n && data[len])
                len++;
        for (uint32_t i = len; i < n; i++)
                if (data[i])
                        return NULL; /* bytes after the NUL: not a C string */
        for (uint32_t i = 0; i < len; i++)
                if (data[i] < 0x20 || data[i] > 0x7e)
                        return NULL;
        return json_stringn((const char *) data, len);
}

static json_t *decode(const struct btf *btf, uint32_t id, const uint8_t *data, uint32_t bit_off,
                      uint32_t bitfield_size, int depth);

static json_t *decode_members(const struct btf *btf, const struct btf_type *t, const uint8_t *data,
                              uint32_t bit_off, int depth, json_t *obj) {
        const struct btf_member *m = btf_members(t);

        for (uint16_t i = 0; i < btf_vlen(t); i++, m++) {
                const char *name = btf__name_by_offset(btf, m->name_off);
                uint32_t off = bit_off + btf_member_bit_offset(t, i);
                json_t *v;

                if (!name || !name[0]) {
                        /* an anonymous struct or union: its fields are the parent's */
                        uint32_t mid = m->type;
                        const struct btf_type *mt = btf_skip_mods(btf, &mid);
                        if (mt && btf_is_composite(mt)) {
                                decode_members(btf, mt, data, off, depth + 1, obj);
                                continue;
                        }
                        name = "";
                }
                v = decode(btf, m->type, data, off, btf_member_bitfield_size(t, i), depth + 1);
                json_object_set_new(obj, name, v ? v : json_null());
        }
        return obj;
}

static json_t *decode_enum(const struct btf *btf, const struct btf_type *t, uint64_t v, uint32_t bits) {
        bool is_signed = btf_kflag(t);
        const char *name;

        /* a signed enum narrower than 64 bits (a bitfield, a packed enum) holding -1 is -1 */
        if (is_signed && bits > 0 && bits < 64 && (v & (UINT64_C(1) << (bits - 1))))
                v |= ~((UINT64_C(1) << bits) - 1);

        name = btf_enum_name(btf, t, v, is_signed);
        if (name)
                return json_string(name);
        /* a value the enum does not name: the number */
        return json_int_bits(v, bits, is_signed);
}

static json_t *decode(const struct btf *btf, uint32_t id, const uint8_t *data, uint32_t bit_off,
                      uint32_t bitfield_size, int depth) {
        const struct btf_type *t;

        if (depth > BTF_DEPTH_MAX)
                return NULL;
        t = btf_skip_mods(btf, &id);
        if (!t)
                return NULL;
        switch (btf_kind(t)) {
        case BTF_KIND_INT: {
                uint32_t bits = bitfield_size ? bitfield_size : btf_int_bits(t);
                uint8_t enc = btf_int_encoding(t);

                bit_off += btf_int_offset(t);
                if (enc & BTF_INT_BOOL)
                        return json_boolean(btf_load_bits(data, bit_off, 1));
                if (bits > 64) /* __int128 and the like */
                        return btf_json_hex(data + bit_off / 8, bits / 8);
                return json_int_bits(btf_load_bits(data, bit_off, bits), bits, enc & BTF_INT_SIGNED);
        }
        case BTF_KIND_PTR:
                return json_u64(btf_load_bits(data, bit_off, 64));
        case BTF_KIND_ENUM:
        case BTF_KIND_ENUM64: {
                uint32_t bits = bitfield_size ? bitfield_size : t->size * 8;
                return decode_enum(btf, t, btf_load_bits(data, bit_off, bits), bits);
        }
        case BTF_KIND_FLOAT:
                if (t->size == 4) {
                        float f;
                        memcpy(&f, data + bit_off / 8, sizeof(f));
                        return json_real(f);
                }
                if (t->size == 8) {
                        double f;
                        memcpy(&f, data + bit_off / 8, sizeof(f));
                        return json_real(f);
                }
                return btf_json_hex(data + bit_off / 8, t->size);
        case BTF_KIND_ARRAY: {
                const struct btf_array *a = btf_array(t);
                int64_t esize = btf__resolve_size(btf, a->type);
                json_t *list, *s;

                if (esize <= 0)
                        return NULL;
                if (btf_is_char(btf, a->type) && (s = char_array(data + bit_off / 8, a->nelems)))
                        return s;
                list = json_array();
                for (uint32_t i = 0; i < a->nelems; i++) {
                        json_t *v = decode(btf, a->type, data, bit_off + (uint32_t) (i * esize * 8), 0,
                                           depth + 1);
                        json_array_append_new(list, v ? v : json_null());
                }
                return list;
        }
        case BTF_KIND_STRUCT:
        case BTF_KIND_UNION:
                return decode_members(btf, t, data, bit_off, depth, json_object());
        case BTF_KIND_DATASEC: {
                /* .bss, .data, .rodata: the section's variables by name */
                const struct btf_var_secinfo *v = btf_var_secinfos(t);
                json_t *obj = json_object();
                for (uint16_t i = 0; i < btf_vlen(t); i++, v++) {
                        const struct btf_type *var = btf__type_by_id(btf, v->type);
                        json_t *x;
                        if (!var || !btf_is_var(var))
                                continue;
                        x = decode(btf, var->type, data, bit_off + v->offset * 8, 0, depth + 1);
                        json_object_set_new(obj, btf__name_by_offset(btf, var->name_off),
                                            x ? x : json_null());
                }
                return obj;
        }
        default: {
                int64_t size = btf__resolve_size(btf, id);
                return size > 0 ? btf_json_hex(data + bit_off / 8, (size_t) size) : NULL;
        }
        }
}

json_t *btf_json_decode(const struct btf *btf, uint32_t type_id, const uint8_t *data, size_t size) {
        json_t *v = NULL;

        if (btf && type_id && btf__resolve_size(btf, type_id) == (int64_t) size)
                v = decode(btf, type_id, data, 0, 0, 0);
        return v ? v : btf_json_hex(data, size);
}

/* Whether every leaf of the type is an integer (not a bool, char string, enum or pointer): such a
 * value summed across CPUs field by field means something. */
static bool summable(const struct btf *btf, uint32_t id, int depth) {
        const struct btf_type *t = btf_skip_mods(btf, &id);

        if (!t || depth > BTF_DEPTH_MAX)
                return false;
        if (btf_is_int(t))
                return !(btf_int_encoding(t) & (BTF_INT_BOOL | BTF_INT_CHAR)) && btf_int_bits(t) <= 64;
        if (btf_is_array(t))
                return !btf_is_char(btf, btf_array(t)->type) && summable(btf, btf_array(t)->type, depth + 1);
        if (btf_is_struct(t)) {
                const struct btf_member *m = btf_members(t);
                for (uint16_t i = 0; i < btf_vlen(t); i++, m++)
                        if (!summable(btf, m->type, depth + 1))
                                return false;
                return true;
        }
        return false;
}

/* Adds v into acc leaf by leaf (the decoded values of each CPU have one shape). */
static void sum_into(json_t *acc, const json_t *v) {
        if (json_is_object(acc)) {
                const char *k;
                json_t *a;
                json_object_foreach (acc, k, a) {
                        json_t *b = json_object_get(v, k);
                        if (json_is_integer(a) && json_is_integer(b))
                                json_integer_set(a, (json_int_t) ((uint64_t) json_integer_value(a) +
                                                                  (uint64_t) json_integer_value(b)));
                        else
                                sum_into(a, b);
                }
        } else if (json_is_array(acc)) {
                for (size_t i = 0; i < json_array_size(acc); i++) {
                        json_t *a = json_array_get(acc, i), *b = json_array_get(v, i);
                        if (json_is_integer(a) && json_is_integer(b))
                                json_integer_set(a, (json_int_t) ((uint64_t) json_integer_value(a) +
                                                                  (uint64_t) json_integer_value(b)));
                        else
                                sum_into(a, b);
                }
        }
}

json_t *btf_json_percpu(const struct btf *btf, uint32_t type_id, const uint8_t *data, size_t value_size,
                        unsigned n_cpus, json_t **ret_sum) {
        size_t stride = (value_size + 7) / 8 * 8;
        bool can_sum = btf && type_id && summable(btf, type_id, 0);
        json_t *list = json_array(), *sum = NULL;

        for (unsigned c = 0; c < n_cpus; c++) {
                json_t *v = btf_json_decode(btf, type_id, data + c * stride, value_size);
                if (can_sum) {
                        if (!sum)
                                sum = json_deep_copy(v);
                        else if (json_is_integer(sum) && json_is_integer(v))
                                json_integer_set(sum, (json_int_t) ((uint64_t) json_integer_value(sum) +
                                                                    (uint64_t) json_integer_value(v)));
                        else
                                sum_into(sum, v);
                }
                json_array_append_new(list, v);
        }
        *ret_sum = sum;
        return list;
}

/* "struct flow_key", "__u32", "char[16]", "unsigned int *": how C would name the type. */
void btf_json_type_name(const struct btf *btf, uint32_t id, char *buf, size_t size) {
        const struct btf_type *t = btf ? btf__type_by_id(btf, id) : NULL;
        const char *name;
        char inner[128];

        if (!t || id == 0) {
                snprintf(buf, size, "%s", id == 0 && btf ? "void" : "?");
                return;
        }
        name = btf__name_by_offset(btf, t->name_off);
        switch (btf_kind(t)) {
        case BTF_KIND_STRUCT:
        case BTF_KIND_UNION:
        case BTF_KIND_ENUM:
        case BTF_KIND_ENUM64:
                snprintf(buf, size, "%s %s",
                         btf_is_struct(t)  ? "struct"
                         : btf_is_union(t) ? "union"
                                           : "enum",
                         name && name[0] ? name : "(anon)");
                return;
        case BTF_KIND_PTR:
                btf_json_type_name(btf, t->type, inner, sizeof(inner));
                snprintf(buf, size, "%s *", inner);
                return;
        case BTF_KIND_ARRAY:
                btf_json_type_name(btf, btf_array(t)->type, inner, sizeof(inner));
                snprintf(buf, size, "%s[%u]", inner, btf_array(t)->nelems);
                return;
        case BTF_KIND_CONST:
        case BTF_KIND_VOLATILE:
        case BTF_KIND_RESTRICT:
                btf_json_type_name(btf, t->type, inner, sizeof(inner));
                snprintf(buf, size, "%s %s",
                         btf_is_const(t)      ? "const"
                         : btf_is_volatile(t) ? "volatile"
                                              : "restrict",
                         inner);
                return;
        case BTF_KIND_DATASEC:
                snprintf(buf, size, "section %s", name);
                return;
        default:
                snprintf(buf, size, "%s", name && name[0] ? name : "?");
        }
}
