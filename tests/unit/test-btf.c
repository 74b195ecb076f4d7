/* test-btf.c: map keys and values decoded through BTF (btf-json.c) and single fields read for metrics
 * (btf-field.c), on BTF built here with libbpf's writer: integers of each sign and size, bitfields,
 * anonymous members, enums, char arrays, per-CPU sums, and the hex of a map without BTF. */
#include <bpf/btf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "btf.h"

/* struct flow { enum fam family; __u8 proto; char name[6]; struct { __u16 port; }; unsigned hi:3, lo:5;
 *               __s32 delta; _Bool up; } */
typedef struct Types {
        struct btf *btf;
        int u8, u16, u32, s32, u64, boolean, chr, fam, name_arr, anon, flow, percpu_value;
} Types;

static void types_build(Types *t) {
        struct btf *b = btf__new_empty();

        assert_non_null(b);
        t->btf = b;
        t->u8 = btf__add_int(b, "unsigned char", 1, 0);
        t->u16 = btf__add_int(b, "unsigned short", 2, 0);
        t->u32 = btf__add_int(b, "unsigned int", 4, 0);
        t->s32 = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
        t->u64 = btf__add_int(b, "unsigned long long", 8, 0);
        t->boolean = btf__add_int(b, "_Bool", 1, BTF_INT_BOOL);
        t->chr = btf__add_int(b, "char", 1, BTF_INT_CHAR | BTF_INT_SIGNED);
        t->fam = btf__add_enum(b, "fam", 4);
        assert_int_equal(btf__add_enum_value(b, "FAMILY_IPV4", 4), 0);
        assert_int_equal(btf__add_enum_value(b, "FAMILY_IPV6", 6), 0);
        t->name_arr = btf__add_array(b, t->u32, t->chr, 6);
        t->anon = btf__add_struct(b, NULL, 2);
        assert_int_equal(btf__add_field(b, "port", t->u16, 0, 0), 0);
        /* offsets in bits */
        t->flow = btf__add_struct(b, "flow", 24);
        assert_int_equal(btf__add_field(b, "family", t->fam, 0, 0), 0);
        assert_int_equal(btf__add_field(b, "proto", t->u8, 32, 0), 0);
        assert_int_equal(btf__add_field(b, "name", t->name_arr, 40, 0), 0);
        assert_int_equal(btf__add_field(b, NULL, t->anon, 88, 0), 0);
        assert_int_equal(btf__add_field(b, "hi", t->u32, 104, 3), 0);
        assert_int_equal(btf__add_field(b, "lo", t->u32, 107, 5), 0);
        assert_int_equal(btf__add_field(b, "delta", t->s32, 128, 0), 0);
        assert_int_equal(btf__add_field(b, "up", t->boolean, 160, 0), 0);
        t->percpu_value = btf__add_struct(b, "counter", 16);
        assert_int_equal(btf__add_field(b, "packets", t->u64, 0, 0), 0);
        assert_int_equal(btf__add_field(b, "bytes", t->u64, 64, 0), 0);
}

static void flow_bytes(uint8_t v[24]) {
        int32_t delta = -7;

        memset(v, 0, 24);
        v[0] = 6; /* FAMILY_IPV6 */
        v[4] = 17;
        memcpy(v + 5, "eth0", 5);
        v[11] = 0x35, v[12] = 0x14; /* port 5173, little-endian */
        v[13] = 0x05 | (0x11 << 3); /* hi = 5, lo = 17 */
        memcpy(v + 16, &delta, 4);
        v[20] = 1;
}

static char *dump(json_t *j) {
        char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
        json_decref(j);
        return s;
}

static void test_struct_decode(void **state) {
        Types t;
        uint8_t v[24];
        char *s;

        (void) state;
        types_build(&t);
        flow_bytes(v);
        s = dump(btf_json_decode(t.btf, t.flow, v, sizeof(v)));
        assert_string_equal(
                s, "{\"family\":\"FAMILY_IPV6\",\"proto\":17,\"name\":\"eth0\",\"port\":5173,\"hi\":5,"
                   "\"lo\":17,\"delta\":-7,\"up\":true}");
        free(s);
        /* An enum value the enum does not name is its number. */
        v[0] = 9;
        s = dump(btf_json_decode(t.btf, t.fam, v, 4));
        assert_string_equal(s, "9");
        free(s);
        /* A size that disagrees with the type, or no BTF at all: the bytes in hex. */
        s = dump(btf_json_decode(t.btf, t.flow, v, 8));
        assert_string_equal(s, "\"0900000011657468\"");
        free(s);
        s = dump(btf_json_decode(NULL, 0, (const uint8_t *) "\x01\xab", 2));
        assert_string_equal(s, "\"01ab\"");
        free(s);
        btf__free(t.btf);
}

static void test_percpu_sum(void **state) {
        uint64_t slots[3][2] = { { 1, 100 }, { 2, 200 }, { 4, 400 } };
        json_t *sum = NULL, *list;
        char *s;
        Types t;

        (void) state;
        types_build(&t);
        list = btf_json_percpu(t.btf, t.percpu_value, (const uint8_t *) slots, 16, 3, &sum);
        s = dump(list);
        assert_string_equal(s, "[{\"packets\":1,\"bytes\":100},{\"packets\":2,\"bytes\":200},{\"packets\":4,"
                               "\"bytes\":400}]");
        free(s);
        s = dump(sum);
        assert_string_equal(s, "{\"packets\":7,\"bytes\":700}");
        free(s);
        /* A struct with an enum in it has no meaningful sum. */
        list = btf_json_percpu(t.btf, t.flow, (const uint8_t *) slots, 24, 1, &sum);
        json_decref(list);
        assert_null(sum);
        btf__free(t.btf);
}

static void test_fields(void **state) {
        char buf[64], why[128];
        uint8_t v[24];
        BtfField f;
        Types t;

        (void) state;
        types_build(&t);
        flow_bytes(v);
        assert_int_equal(btf_field_resolve(t.btf, t.flow, 24, "family", &f, why, sizeof(why)), 0);
        btf_field_format(&f, v, buf, sizeof(buf));
        assert_string_equal(buf, "FAMILY_IPV6");
        assert_int_equal(btf_field_resolve(t.btf, t.flow, 24, "port", &f, why, sizeof(why)),
                         0); /* anonymous */
        assert_true(btf_field_is_number(&f));
        assert_true(btf_field_number(&f, v) == 5173);
        assert_int_equal(btf_field_resolve(t.btf, t.flow, 24, "lo", &f, why, sizeof(why)), 0);
        assert_true(btf_field_number(&f, v) == 17);
        assert_int_equal(btf_field_resolve(t.btf, t.flow, 24, "delta", &f, why, sizeof(why)), 0);
        btf_field_format(&f, v, buf, sizeof(buf));
        assert_string_equal(buf, "-7");
        assert_int_equal(btf_field_resolve(t.btf, t.flow, 24, "name", &f, why, sizeof(why)), 0);
        assert_false(btf_field_is_number(&f));
        btf_field_format(&f, v, buf, sizeof(buf));
        assert_string_equal(buf, "eth0");
        assert_int_equal(btf_field_resolve(t.btf, t.flow, 24, "nope", &f, why, sizeof(why)), -ENOENT);
        assert_non_null(strstr(why, "flow has no field \"nope\""));
        assert_int_equal(btf_field_resolve(t.btf, t.flow, 24, "proto.x", &f, why, sizeof(why)), -EINVAL);
        /* A u8 array is bytes, not text, whatever they hold. */
        {
                int u8arr = btf__add_array(t.btf, t.u32, t.u8, 2);
                assert_int_equal(btf_field_resolve(t.btf, u8arr, 2, NULL, &f, why, sizeof(why)), 0);
                btf_field_format(&f, (const uint8_t *) "ab", buf, sizeof(buf));
                assert_string_equal(buf, "6162");
        }
        /* A signed enum in 4 bits holding -1. */
        {
                int senum = btf__add_enum(t.btf, "s", 4), holder;
                uint8_t b = 0x0f;
                assert_int_equal(btf__add_enum_value(t.btf, "MINUS_ONE", -1), 0);
                holder = btf__add_struct(t.btf, "h", 4);
                assert_int_equal(btf__add_field(t.btf, "x", senum, 0, 4), 0);
                /* libbpf marks an enum with a negative value signed */
                assert_int_equal(btf_field_resolve(t.btf, holder, 4, "x", &f, why, sizeof(why)), 0);
                btf_field_format(&f, &b, buf, sizeof(buf));
                assert_string_equal(buf, "MINUS_ONE");
        }
        /* Without BTF: the whole key or value, 8 bytes at most, and no fields. */
        assert_int_equal(btf_field_resolve(NULL, 0, 2, NULL, &f, why, sizeof(why)), 0);
        assert_true(btf_field_number(&f, (const uint8_t *) "\x35\x14") == 5173);
        assert_int_equal(btf_field_resolve(NULL, 0, 16, NULL, &f, why, sizeof(why)), -EINVAL);
        assert_int_equal(btf_field_resolve(NULL, 0, 4, "x", &f, why, sizeof(why)), -ENOENT);
        btf__free(t.btf);
}

static void test_type_names(void **state) {
        char buf[64];
        Types t;

        (void) state;
        types_build(&t);
        btf_json_type_name(t.btf, t.flow, buf, sizeof(buf));
        assert_string_equal(buf, "struct flow");
        btf_json_type_name(t.btf, t.name_arr, buf, sizeof(buf));
        assert_string_equal(buf, "char[6]");
        btf_json_type_name(t.btf, t.fam, buf, sizeof(buf));
        assert_string_equal(buf, "enum fam");
        btf__free(t.btf);
}

/* Writes that would not read back as written are refused: a string with no room for its NUL, an enum
 * value wider than its bitfield, two members of a union. */
static void encode_fails(const struct btf *btf, int id, size_t size, const char *json, const char *words) {
        json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
        uint8_t buf[64];
        Error e = ERROR_NULL;

        assert_non_null(v);
        assert_true(btf_json_encode(btf, (uint32_t) id, v, buf, size, "value", &e) < 0);
        if (!strstr(e.message, words))
                fail_msg("%s: \"%s\" does not say \"%s\"", json, e.message, words);
        error_done(&e);
        json_decref(v);
}

static void encode_ok(const struct btf *btf, int id, size_t size, const char *json) {
        json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
        uint8_t buf[64];
        Error e = ERROR_NULL;

        assert_non_null(v);
        if (btf_json_encode(btf, (uint32_t) id, v, buf, size, "value", &e) < 0)
                fail_msg("%s: %s", json, e.message);
        json_decref(v);
}

static void test_encode_refusals(void **state) {
        int holder, u, anon;
        Types t;

        (void) state;
        types_build(&t);
        /* a char array as reads show it: a string, every byte of it filled when it has no NUL */
        encode_ok(t.btf, t.name_arr, 6, "\"abcde\"");
        encode_ok(t.btf, t.name_arr, 6, "\"abcdef\"");
        encode_fails(t.btf, t.name_arr, 6, "\"abcdefg\"", "at most 6 characters");
        encode_ok(t.btf, t.name_arr, 6, "[97, 98, 99, 100, 101, 102]");
        /* an unsigned enum with its high bit set, and a negative value in an enum clang 14 leaves
         * unsigned, in whole fields: written as read */
        {
                int big = btf__add_enum(t.btf, "big", 4);
                assert_int_equal(btf__add_enum_value(t.btf, "HIGH", (int64_t) 0x80000000u), 0);
                assert_int_equal(btf__add_enum_value(t.btf, "LOW", 1), 0);
                encode_ok(t.btf, big, 4, "\"HIGH\"");
        }
        /* enum fam in 2 bits: FAMILY_IPV4 (4) does not fit */
        holder = btf__add_struct(t.btf, "narrow", 4);
        assert_int_equal(btf__add_field(t.btf, "f", t.fam, 0, 2), 0);
        encode_fails(t.btf, holder, 4, "{\"f\": \"FAMILY_IPV4\"}",
                     "FAMILY_IPV4 (4) does not fit the field's 2 bits");
        encode_fails(t.btf, holder, 4, "{\"f\": 4}", "expected an integer from 0 to 3");
        /* union { __u32 a; __u32 b; struct { __u16 c; __u16 d; }; } */
        anon = btf__add_struct(t.btf, NULL, 4);
        assert_int_equal(btf__add_field(t.btf, "c", t.u16, 0, 0), 0);
        assert_int_equal(btf__add_field(t.btf, "d", t.u16, 16, 0), 0);
        u = btf__add_union(t.btf, "u", 4);
        assert_int_equal(btf__add_field(t.btf, "a", t.u32, 0, 0), 0);
        assert_int_equal(btf__add_field(t.btf, "b", t.u32, 0, 0), 0);
        assert_int_equal(btf__add_field(t.btf, NULL, anon, 0, 0), 0);
        encode_ok(t.btf, u, 4, "{\"a\": 1}");
        encode_ok(t.btf, u, 4, "{\"c\": 1, \"d\": 2}"); /* one member: the anonymous struct */
        encode_fails(t.btf, u, 4, "{\"a\": 1, \"b\": 2}", "a union holds one of its members; a and b given");
        encode_fails(t.btf, u, 4, "{\"b\": 1, \"c\": 2}", "a union holds one of its members; b and c given");
        /* struct { __u8 fam; union { __u32 v4; __u32 alt; }; }: the anonymous union counts too */
        {
                int au = btf__add_union(t.btf, NULL, 4), st;
                assert_int_equal(btf__add_field(t.btf, "v4", t.u32, 0, 0), 0);
                assert_int_equal(btf__add_field(t.btf, "alt", t.u32, 0, 0), 0);
                st = btf__add_struct(t.btf, "addr", 8);
                assert_int_equal(btf__add_field(t.btf, "fam", t.u8, 0, 0), 0);
                assert_int_equal(btf__add_field(t.btf, NULL, au, 32, 0), 0);
                encode_ok(t.btf, st, 8, "{\"fam\": 2, \"v4\": 1}");
                encode_fails(t.btf, st, 8, "{\"fam\": 2, \"v4\": 1, \"alt\": 2}",
                             "a union holds one of its members; v4 and alt given");
        }
        btf__free(t.btf);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_encode_refusals), cmocka_unit_test(test_struct_decode),
                cmocka_unit_test(test_percpu_sum),      cmocka_unit_test(test_fields),
                cmocka_unit_test(test_type_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
