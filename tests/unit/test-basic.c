/* test-basic.c: the hash table (the interface table, the object cache and the registry stand on it)
 * and greedy_realloc(). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "hashmap.h"

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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_put_get_remove),
                cmocka_unit_test(test_churn_does_not_grow),
                cmocka_unit_test(test_reserve),
                cmocka_unit_test(test_greedy_realloc),
        };
        return cmocka_run_group_tests_name("basic", tests, NULL, NULL);
}
