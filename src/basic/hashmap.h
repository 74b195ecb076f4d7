/* hashmap.h: a small hash table of pointers, keyed by what the caller's hash and equal functions say
 * (the key usually lives in the value). Open addressing; grows, never shrinks. Not thread-safe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macros.h"

typedef struct HashmapOps {
        uint64_t (*hash)(const void *key, uint64_t seed);
        bool (*equal)(const void *a, const void *b);
} HashmapOps;

typedef struct Hashmap Hashmap;

int hashmap_new(const HashmapOps *ops, Hashmap **ret);
Hashmap *hashmap_free(Hashmap *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(Hashmap *, hashmap_free);
/* -EEXIST when the key is there already; -ENOMEM. */
int hashmap_put(Hashmap *h, const void *key, void *value);
/* Room for n more entries, so that as many hashmap_put() of new keys cannot fail. */
int hashmap_reserve(Hashmap *h, size_t n);
void *hashmap_get(const Hashmap *h, const void *key);
/* The value removed, or NULL. */
void *hashmap_remove(Hashmap *h, const void *key);
size_t hashmap_size(const Hashmap *h);
/* Slots allocated (for tests: it follows the live entries, not how many came and went). */
size_t hashmap_capacity(const Hashmap *h);

/* FNV-1a over bytes, from seed: for the ops' hash functions. */
uint64_t hash_bytes(const void *data, size_t size, uint64_t seed);

/* Keys that are NUL-terminated strings. */
extern const HashmapOps hashmap_string_ops;
