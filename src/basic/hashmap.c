/* hashmap.c: open addressing with linear probing and tombstones; a capacity that is a power of two,
 * at most 70% used; a seed per map from getrandom(), so that chosen keys cannot line up. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "hashmap.h"

#define HASHMAP_MIN_CAPACITY 16u

typedef struct Slot {
        const void *key; /* NULL: empty */
        void *value;
        bool tombstone;
} Slot;

struct Hashmap {
        const HashmapOps *ops;
        uint64_t seed;
        Slot *slots;
        size_t capacity;
        size_t n; /* live entries */
        size_t used; /* live entries and tombstones */
};

uint64_t hash_bytes(const void *data, size_t size, uint64_t seed) {
        const uint8_t *p = data;
        uint64_t h = UINT64_C(0xcbf29ce484222325) ^ seed;

        for (size_t i = 0; i < size; i++)
                h = (h ^ p[i]) * UINT64_C(0x100000001b3);
        return h;
}

int hashmap_new(const HashmapOps *ops, Hashmap **ret) {
        Hashmap *h = calloc(1, sizeof(*h));

        if (!h)
                return -ENOMEM;
        h->ops = ops;
        if (getrandom(&h->seed, sizeof(h->seed), GRND_NONBLOCK) != sizeof(h->seed))
                h->seed = (uint64_t) (uintptr_t) h;
        *ret = h;
        return 0;
}

Hashmap *hashmap_free(Hashmap *h) {
        if (!h)
                return NULL;
        free(h->slots);
        free(h);
        return NULL;
}

size_t hashmap_size(const Hashmap *h) {
        return h ? h->n : 0;
}

/* The slot of key, or where it would go (the first tombstone on its way, else the empty slot). */
static Slot *find(const Hashmap *h, const void *key, bool *ret_found) {
        size_t mask = h->capacity - 1, i = h->ops->hash(key, h->seed) & mask;
        Slot *first_free = NULL;

        for (size_t probes = 0; probes < h->capacity; probes++, i = (i + 1) & mask) {
                Slot *s = &h->slots[i];
                if (!s->key && !s->tombstone) {
                        *ret_found = false;
                        return first_free ?: s;
                }
                if (s->tombstone) {
                        if (!first_free)
                                first_free = s;
                        continue;
                }
                if (h->ops->equal(s->key, key)) {
                        *ret_found = true;
                        return s;
                }
        }
        *ret_found = false;
        return first_free;
}

static int resize(Hashmap *h, size_t capacity) {
        Slot *old = h->slots;
        size_t old_capacity = h->capacity;

        h->slots = calloc(capacity, sizeof(Slot));
        if (!h->slots) {
                h->slots = old;
                return -ENOMEM;
        }
        h->capacity = capacity;
        h->used = h->n;
        for (size_t i = 0; i < old_capacity; i++) {
                bool found;
                if (!old[i].key)
                        continue;
                *find(h, old[i].key, &found) = old[i];
        }
        free(old);
        return 0;
}

int hashmap_reserve(Hashmap *h, size_t n) {
        size_t want = HASHMAP_MIN_CAPACITY;

        if (h->capacity && (h->used + n) * 10 < h->capacity * 7)
                return 0;
        /* Sized for the live entries: a table full of tombstones is rehashed at its size, so that
         * churn (adding and removing the same few keys) does not grow it. */
        while ((h->n + n) * 10 >= want * 7)
                want *= 2;
        return resize(h, MAX(want, h->capacity));
}

size_t hashmap_capacity(const Hashmap *h) {
        return h ? h->capacity : 0;
}

int hashmap_put(Hashmap *h, const void *key, void *value) {
        bool found;
        Slot *s;
        int r;

        r = hashmap_reserve(h, 1);
        if (r < 0)
                return r;
        s = find(h, key, &found);
        if (found)
                return -EEXIST;
        if (!s->tombstone)
                h->used++;
        *s = (Slot){ .key = key, .value = value };
        h->n++;
        return 0;
}

void *hashmap_get(const Hashmap *h, const void *key) {
        bool found;
        Slot *s;

        if (!h || h->n == 0)
                return NULL;
        s = find(h, key, &found);
        return found ? s->value : NULL;
}

void *hashmap_remove(Hashmap *h, const void *key) {
        bool found;
        void *value;
        Slot *s;

        if (!h || h->n == 0)
                return NULL;
        s = find(h, key, &found);
        if (!found)
                return NULL;
        value = s->value;
        *s = (Slot){ .tombstone = true };
        h->n--;
        return value;
}

static uint64_t string_hash(const void *key, uint64_t seed) {
        return hash_bytes(key, strlen(key), seed);
}

static bool string_equal(const void *a, const void *b) {
        return streq(a, b);
}

const HashmapOps hashmap_string_ops = { .hash = string_hash, .equal = string_equal };
