/* test-basic.c: the hash table (the interface table, the object cache and the registry stand on it),
 * greedy_realloc(), OCI references and the error codes (each with its one string and HTTP status). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "backoff.h"
#include "error.h"
#include "hashmap.h"
#include "oci-ref.h"

static uint64_t str_hash(const void *key, uint64_t seed) {
        return hash_bytes(key, strlen(key), seed);
}

static bool str_equal(const void *a, const void *b) {
        return streq(a, b);
}

static const HashmapOps str_ops = { .hash = str_hash, .equal = str_equal };

#define N 10000

static char keys[N][16];

static void test_put_get_remove(void **state) {
        _cleanup_(hashmap_freep) Hashmap *h = NULL;

        (void) state;
        assert_int_equal(hashmap_new(&str_ops, &h), 0);
        assert_null(hashmap_get(h, "missing"));
        assert_null(hashmap_remove(h, "missing"));
        for (size_t i = 0; i < N; i++) {
                snprintf(keys[i], sizeof(keys[i]), "eth%zu", i);
                assert_int_equal(hashmap_put(h, keys[i], keys[i]), 0);
        }
        assert_int_equal(hashmap_size(h), N);
        assert_int_equal(hashmap_put(h, "eth7", keys[0]), -EEXIST); /* equal, not the same pointer */
        /* every other one goes; the rest are still found past the tombstones */
        for (size_t i = 0; i < N; i += 2)
                assert_ptr_equal(hashmap_remove(h, keys[i]), keys[i]);
        assert_int_equal(hashmap_size(h), N / 2);
        for (size_t i = 0; i < N; i++) {
                char k[16];
                snprintf(k, sizeof(k), "eth%zu", i);
                if (i % 2)
                        assert_ptr_equal(hashmap_get(h, k), keys[i]);
                else
                        assert_null(hashmap_get(h, k));
        }
        /* and come back */
        for (size_t i = 0; i < N; i += 2)
                assert_int_equal(hashmap_put(h, keys[i], keys[i]), 0);
        for (size_t i = 0; i < N; i++)
                assert_ptr_equal(hashmap_get(h, keys[i]), keys[i]);
        /* at most 70% full */
        assert_true(hashmap_size(h) * 10 < hashmap_capacity(h) * 7);
}

/* Interfaces come and go for ever on a fleet host: the table follows how many there are, not how
 * many there were. */
static void test_churn_does_not_grow(void **state) {
        _cleanup_(hashmap_freep) Hashmap *h = NULL;

        (void) state;
        assert_int_equal(hashmap_new(&str_ops, &h), 0);
        for (size_t round = 0; round < 100000; round++) {
                const char *k = keys[round % 8];
                snprintf(keys[round % 8], sizeof(keys[0]), "veth%zu", round % 8);
                if (hashmap_get(h, k))
                        assert_non_null(hashmap_remove(h, k));
                else
                        assert_int_equal(hashmap_put(h, k, (void *) k), 0);
        }
        assert_true(hashmap_capacity(h) <= 32);
}

/* After hashmap_reserve(n), n puts of new keys do not allocate: they cannot fail. */
static void test_reserve(void **state) {
        _cleanup_(hashmap_freep) Hashmap *h = NULL;
        size_t cap;

        (void) state;
        assert_int_equal(hashmap_new(&str_ops, &h), 0);
        assert_int_equal(hashmap_reserve(h, 100), 0);
        cap = hashmap_capacity(h);
        for (size_t i = 0; i < 100; i++) {
                snprintf(keys[i], sizeof(keys[i]), "k%zu", i);
                assert_int_equal(hashmap_put(h, keys[i], keys[i]), 0);
        }
        assert_int_equal(hashmap_capacity(h), cap);
}

static void test_greedy_realloc(void **state) {
        _cleanup_free_ int *v = NULL;
        size_t allocated = 0, grows = 0, last = 0;

        (void) state;
        for (size_t n = 0; n < 100000; n++) {
                assert_int_equal(greedy_realloc((void **) &v, &allocated, n + 1, sizeof(int)), 0);
                if (allocated != last)
                        grows++, last = allocated;
                v[n] = (int) n;
        }
        assert_true(grows < 20); /* doubling: a logarithmic number of reallocations */
        for (size_t n = 0; n < 100000; n++)
                assert_int_equal(v[n], (int) n);
        assert_int_equal(greedy_realloc((void **) &v, &allocated, SIZE_MAX / 2, sizeof(int)), -ENOMEM);
        assert_int_equal(v[99999], 99999); /* kept */
}

static void expect_ref(const char *s, const char *registry, const char *repository, const char *tag,
                       const char *digest) {
        OciRef r;
        Error e = ERROR_NULL;

        assert_int_equal(oci_ref_parse(s, &r, &e), 0);
        assert_string_equal(r.registry, registry);
        assert_string_equal(r.repository, repository);
        assert_string_equal(r.tag, tag);
        assert_string_equal(r.digest, digest);
}

static void expect_bad_ref(const char *s, const char *why) {
        OciRef r;
        Error e = ERROR_NULL;

        assert_int_equal(oci_ref_parse(s, &r, &e), -EINVAL);
        assert_int_equal(e.code, ERROR_INVALID_VALUE);
        assert_non_null(strstr(e.message, why));
        error_done(&e);
}

#define D "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_oci_references(void **state) {
        char *pinned = NULL;
        OciRef r;

        (void) state;
        expect_ref("oci://198.18.0.2:5443/ebpf/count:v1", "198.18.0.2:5443", "ebpf/count", "v1", "");
        expect_ref("oci://quay.io/bpfman-bytecode/go-tc-counter:latest", "quay.io",
                   "bpfman-bytecode/go-tc-counter", "latest", "");
        expect_ref("oci://r.example/a/b__c.d-e@" D, "r.example", "a/b__c.d-e", "", D);
        expect_ref("oci://[2001:db8::1]:5000/x:t@" D, "[2001:db8::1]:5000", "x", "t", D);
        expect_bad_ref("sha256:00", "expected oci://");
        expect_bad_ref("oci://registry", "expected a registry");
        expect_bad_ref("oci://r:99999999/x:t", "expected a registry");
        expect_bad_ref("oci://r/x", "name a tag");
        expect_bad_ref("oci://r/UPPER:t", "a repository is");
        expect_bad_ref("oci://r/a//b:t", "a repository is");
        expect_bad_ref("oci://r/a-:t", "a repository is");
        expect_bad_ref("oci://r/x:.t", "a tag is");
        expect_bad_ref("oci://r/x@sha256:12", "expected @sha256");
        assert_int_equal(oci_ref_parse("oci://r/x:t", &r, NULL), 0);
        assert_int_equal(oci_ref_pinned(&r, D, &pinned), 0);
        assert_string_equal(pinned, "oci://r/x:t@" D);
        free(pinned);
}

/* Every code has a string the API can show, which names it alone and reads back as it, and an error
 * status: the tables are made from one list, and this walks all of it. */
static void test_error_codes(void **state) {
        (void) state;
        for (ErrorCode c = ERROR_CODE_NONE + 1; c < _ERROR_CODE_MAX; c++) {
                const char *s = error_code_to_string(c);
                unsigned status = error_code_status(c);

                assert_non_null(s);
                assert_true(s[0] != 0);
                assert_int_equal(strspn(s, "abcdefghijklmnopqrstuvwxyz_"), strlen(s));
                for (ErrorCode d = ERROR_CODE_NONE + 1; d < c; d++)
                        if (streq(error_code_to_string(d), s))
                                fail_msg("codes %d and %d are both \"%s\"", d, c, s);
                assert_int_equal(error_code_from_string(s), c);
                if (status < 400 || status > 599)
                        fail_msg("%s: HTTP status %u is not an error's", s, status);
        }
        /* outside the list: no string, a defined fallback */
        assert_null(error_code_to_string(ERROR_CODE_NONE));
        assert_null(error_code_to_string(_ERROR_CODE_MAX));
        assert_int_equal(error_code_status(ERROR_CODE_NONE), 500);
        assert_int_equal(error_code_from_string("no_such_code"), ERROR_INTERNAL_ERROR);
        assert_int_equal(error_code_from_string(NULL), ERROR_INTERNAL_ERROR);
        /* strings and statuses clients see: never changed */
        assert_string_equal(error_code_to_string(ERROR_INVALID_VALUE), "invalid_value");
        assert_int_equal(error_code_status(ERROR_PRIORITY_TAKEN), 409);
        assert_int_equal(error_code_status(ERROR_VERIFIER_REJECTED), 422);
        assert_int_equal(error_code_status(ERROR_QUOTA_EXCEEDED), 507);
        assert_string_equal(error_code_to_string(ERROR_ETCD_OVERLOADED), "etcd_overloaded");
        assert_int_equal(error_code_status(ERROR_ETCD_OVERLOADED), 503);
}

static void test_error_set(void **state) {
        Error e = ERROR_NULL;

        (void) state;
        assert_false(error_is_set(&e));
        assert_int_equal(error_set(&e, EINVAL, ERROR_INVALID_VALUE, "first %d", 1), -EINVAL);
        assert_int_equal(error_set(&e, -ENOENT, ERROR_DOCUMENT_NOT_FOUND, "second"), -ENOENT);
        assert_true(error_is_set(&e));
        assert_int_equal(e.code, ERROR_INVALID_VALUE); /* the first, innermost explanation stays */
        assert_string_equal(e.message, "first 1");
        error_done(&e);
        assert_false(error_is_set(&e));
        /* no code is still an error: an internal one */
        assert_int_equal(error_set(&e, 0, ERROR_CODE_NONE, "x"), -EIO);
        assert_int_equal(e.code, ERROR_INTERNAL_ERROR);
        error_done(&e);
}

/* The one backoff: doubling from min to max, reset, eased under load, jitter within its upper half. */
static void test_backoff(void **state) {
        Backoff b = { 0 };

        (void) state;
        assert_int_equal(backoff_next(&b, 1000, 5000), 1000);
        assert_int_equal(backoff_next(&b, 1000, 5000), 2000);
        assert_int_equal(backoff_next(&b, 1000, 5000), 4000);
        assert_int_equal(backoff_next(&b, 1000, 5000), 5000);
        assert_int_equal(backoff_next(&b, 1000, 5000), 5000);
        /* a max that grew (a fleet's size) lets it double again; one under min is min */
        assert_int_equal(backoff_next(&b, 1000, 20000), 10000);
        backoff_reset(&b);
        assert_int_equal(backoff_next(&b, 1000, 500), 1000);
        /* eased: halved, and gone under min */
        b.usec = 8000;
        backoff_ease(&b, 1000);
        assert_int_equal(b.usec, 4000);
        b.usec = 1500;
        backoff_ease(&b, 1000);
        assert_int_equal(b.usec, 0);
        for (int i = 0; i < 1000; i++) {
                Backoff j = { .usec = 4000 };
                uint64_t d = backoff_next_jittered(&j, 1000, 100000);
                assert_int_equal(j.usec, 8000);
                assert_true(d >= 4000 && d <= 8000);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_put_get_remove), cmocka_unit_test(test_churn_does_not_grow),
                cmocka_unit_test(test_reserve),        cmocka_unit_test(test_greedy_realloc),
                cmocka_unit_test(test_oci_references), cmocka_unit_test(test_error_codes),
                cmocka_unit_test(test_error_set),      cmocka_unit_test(test_backoff),
        };
        return cmocka_run_group_tests_name("basic", tests, NULL, NULL);
}
