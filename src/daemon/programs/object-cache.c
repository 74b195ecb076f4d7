/* object-cache.c: the stored objects' descriptions, hashed by digest. */
#include <stdio.h>
#include <string.h>

#include "hashmap.h"
#include "object-cache.h"
#include "daemon-objects.h"
#include "nl-bpf.h"

struct ObjectCache {
        Hashmap *by_digest; /* DaemonObject.digest -> DaemonObject */
        DaemonObject **list;
        size_t n;
};

static uint64_t digest_hash(const void *key, uint64_t seed) {
        return hash_bytes(key, strlen(key), seed);
}

static bool digest_equal(const void *a, const void *b) {
        return streq(a, b);
}

static const HashmapOps digest_ops = { .hash = digest_hash, .equal = digest_equal };

int object_cache_new(ObjectCache **ret) {
        ObjectCache *c = calloc(1, sizeof(*c));

        if (!c || hashmap_new(&digest_ops, &c->by_digest) < 0) {
                free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

ObjectCache *object_cache_free(ObjectCache *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n; i++) {
                nl_object_info_free(c->list[i]->info);
                free(c->list[i]);
        }
        free(c->list);
        hashmap_free(c->by_digest);
        free(c);
        return NULL;
}

const DaemonObject *object_cache_get(const ObjectCache *c, const char *digest) {
        return digest ? hashmap_get(c->by_digest, digest) : NULL;
}

int object_cache_add(ObjectCache *c, const char *digest, size_t size, NlObjectInfo *info,
                     const DaemonObject **ret) {
        DaemonObject *o, **v;
        int r;

        if (hashmap_get(c->by_digest, digest))
                return -EEXIST;
        o = calloc(1, sizeof(*o));
        v = realloc(c->list, (c->n + 1) * sizeof(*v));
        if (v)
                c->list = v;
        if (!o || !v) {
                free(o);
                return -ENOMEM;
        }
        snprintf(o->digest, sizeof(o->digest), "%s", digest);
        o->size = size;
        o->info = info;
        r = hashmap_put(c->by_digest, o->digest, o);
        if (r < 0) {
                free(o);
                return r;
        }
        c->list[c->n++] = o;
        if (ret)
                *ret = o;
        return 0;
}

void object_cache_remove(ObjectCache *c, const char *digest) {
        DaemonObject *o = hashmap_remove(c->by_digest, digest);

        if (!o)
                return;
        for (size_t i = 0; i < c->n; i++)
                if (c->list[i] == o) {
                        memmove(c->list + i, c->list + i + 1, (c->n - i - 1) * sizeof(*c->list));
                        c->n--;
                        break;
                }
        nl_object_info_free(o->info);
        free(o);
}

size_t object_cache_size(const ObjectCache *c) {
        return c->n;
}

const DaemonObject *object_cache_at(const ObjectCache *c, size_t i) {
        return i < c->n ? c->list[i] : NULL;
}
