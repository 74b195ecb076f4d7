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

#include "btf-field.h"

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

/* ---- JSON to bytes: what a map write takes, the same shapes btf_json_decode() gives ---- */

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
                return error_set(reterr, EINVAL, "invalid_value",
                                 "%s: expected %zu bytes in hex (%zu digits)", path, size, size * 2);
        for (size_t i = 0; i < size; i++) {
                unsigned x;
                if (sscanf(s + 2 * i, "%2x", &x) != 1 || !isxdigit((unsigned char) s[2 * i]) ||
                    !isxdigit((unsigned char) s[2 * i + 1]))
                        return error_set(reterr, EINVAL, "invalid_value", "%s: not hex", path);
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
                return error_set(reterr, EINVAL, "invalid_value",
                                 "%s: expected an integer from %" PRId64 " to %" PRIu64, path, lo, hi);
        return error_set(reterr, EINVAL, "invalid_value", "%s: expected an integer from 0 to %" PRIu64, path,
                         hi);
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
                                                reterr, EINVAL, "invalid_value",
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

static int encode(const struct btf *btf, uint32_t id, const json_t *v, uint8_t *data, uint32_t bit_off,
                  uint32_t bitfield_size, const char *path, int depth, Error *reterr) {
        const struct btf_type *t;
        char sub[256];
        int r;

        if (depth > BTF_DEPTH_MAX || !(t = btf_skip_mods(btf, &id)))
                return error_set(reterr, EINVAL, "map_unwritable", "%s: a type clsd cannot follow", path);
        switch (btf_kind(t)) {
        case BTF_KIND_INT: {
                uint32_t bits = bitfield_size ? bitfield_size : btf_int_bits(t);
                uint8_t enc = btf_int_encoding(t);
                uint64_t x;

                bit_off += btf_int_offset(t);
                if (enc & BTF_INT_BOOL) {
                        if (!json_is_boolean(v))
                                return error_set(reterr, EINVAL, "invalid_value",
                                                 "%s: expected true or false", path);
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
        case BTF_KIND_ENUM:
        case BTF_KIND_ENUM64: {
                uint32_t bits = bitfield_size ? bitfield_size : t->size * 8;
                const char *s = json_string_value(v);
                uint64_t x = 0;
                bool found = false;

                if (s) {
                        for (uint16_t i = 0; i < btf_vlen(t) && !found; i++) {
                                const char *n;
                                uint64_t val;
                                if (btf_is_enum(t)) {
                                        n = btf__name_by_offset(btf, btf_enum(t)[i].name_off);
                                        val = (uint64_t) (int64_t) btf_enum(t)[i].val;
                                } else {
                                        n = btf__name_by_offset(btf, btf_enum64(t)[i].name_off);
                                        val = btf_enum64_value(&btf_enum64(t)[i]);
                                }
                                if (n && streq(n, s))
                                        x = val, found = true;
                        }
                        if (!found)
                                return error_set(reterr, EINVAL, "invalid_value",
                                                 "%s: %s is not a name of the enum", path, s);
                        /* a bitfield narrower than the enum holds only some of its values; a whole
                         * field holds them all (a 32-bit enum's value is its low 32 bits, whatever its
                         * sign: clang 14 marks no enum signed) */
                        if (bitfield_size && bits < t->size * 8 && bits < 64) {
                                uint64_t u = btf_is_enum(t) && !btf_kflag(t) ? (uint32_t) x : x;
                                bool fits = btf_kflag(t) ? (int64_t) x >= -(INT64_C(1) << (bits - 1)) &&
                                                                   (int64_t) x < (INT64_C(1) << (bits - 1))
                                                         : u < (UINT64_C(1) << bits);
                                if (!fits)
                                        return error_set(reterr, EINVAL, "invalid_value",
                                                         "%s: %s (%" PRId64
                                                         ") does not fit the field's %u bits",
                                                         path, s, (int64_t) x, bits);
                        }
                } else if ((r = int_value(v, bits, btf_kflag(t), &x, path, reterr)) < 0)
                        return r;
                store_bits(data, bit_off, bits, x);
                return 0;
        }
        case BTF_KIND_FLOAT:
                if (!json_is_number(v))
                        return error_set(reterr, EINVAL, "invalid_value", "%s: expected a number", path);
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
        case BTF_KIND_ARRAY: {
                const struct btf_array *a = btf_array(t);
                int64_t esize = btf__resolve_size(btf, a->type);
                const char *s = json_string_value(v);

                if (esize <= 0)
                        return error_set(reterr, EINVAL, "map_unwritable",
                                         "%s: an array of unsized elements", path);
                if (s && btf_is_char(btf, a->type)) {
                        size_t len = strlen(s);
                        /* as reads show it: a string that fills every byte has no NUL (a fixed field,
                         * not a C string), as the decoder reads such an array back */
                        if (len > a->nelems)
                                return error_set(reterr, EINVAL, "invalid_value",
                                                 "%s: at most %u characters", path, a->nelems);
                        memset(data + bit_off / 8, 0, a->nelems);
                        memcpy(data + bit_off / 8, s, len);
                        return 0;
                }
                if (!json_is_array(v) || json_array_size(v) != a->nelems)
                        return error_set(reterr, EINVAL, "invalid_value",
                                         "%s: expected a list of %u elements%s", path, a->nelems,
                                         btf_is_char(btf, a->type) ? " or a string" : "");
                for (uint32_t i = 0; i < a->nelems; i++) {
                        snprintf(sub, sizeof(sub), "%s[%u]", path, i);
                        r = encode(btf, a->type, json_array_get(v, i), data,
                                   bit_off + (uint32_t) (i * esize * 8), 0, sub, depth + 1, reterr);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case BTF_KIND_STRUCT:
        case BTF_KIND_UNION: {
                const char *key;
                json_t *x;

                if (!json_is_object(v))
                        return error_set(reterr, EINVAL, "invalid_value",
                                         "%s: expected an object (the fields of %s)", path,
                                         btf__name_by_offset(btf, t->name_off) ?: "the struct");
                json_object_foreach ((json_t *) v, key, x)
                        if (!has_member(btf, t, key, depth))
                                return error_set(reterr, EINVAL, "unknown_field", "%s: no field %s", path,
                                                 key);
                if (btf_is_union(t)) {
                        /* its members share the bytes: two given would overwrite each other */
                        const char *first = NULL, *second = NULL;
                        union_members_given(btf, t, v, depth, &first, &second);
                        if (second)
                                return error_set(reterr, EINVAL, "invalid_value",
                                                 "%s: a union holds one of its members; %s and %s given",
                                                 path, first, second);
                }
                return encode_members(btf, t, v, data, bit_off, path, depth, reterr);
        }
        default:
                return error_set(reterr, EINVAL, "map_unwritable", "%s: a %s is not written through the API",
                                 path, btf_kind(t) == BTF_KIND_PTR ? "pointer" : "value of this kind");
        }
}

int btf_json_encode(const struct btf *btf, uint32_t type_id, const json_t *v, uint8_t *out, size_t size,
                    const char *what, Error *reterr) {
        memset(out, 0, size);
        if (!btf || !type_id || btf__resolve_size(btf, type_id) != (int64_t) size)
                return hex_bytes(v, out, size, what, reterr);
        return encode(btf, type_id, v, out, 0, 0, what, 0, reterr);
}
