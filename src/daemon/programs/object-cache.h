/* object-cache.h: what each stored object holds (its programs and maps), as a worker described it when
 * it was stored; by digest, in the order they came. */
#pragma once

#include "daemon.h"
#include "daemon-objects.h"
#include "nl-bpf.h"

typedef struct ObjectCache ObjectCache;

int object_cache_new(ObjectCache **ret);
ObjectCache *object_cache_free(ObjectCache *c);
const DaemonObject *object_cache_get(const ObjectCache *c, const char *digest);
/* Takes info; -EEXIST when the digest is there. */
int object_cache_add(ObjectCache *c, const char *digest, size_t size, NlObjectInfo *info,
                     const DaemonObject **ret);
void object_cache_remove(ObjectCache *c, const char *digest);
size_t object_cache_size(const ObjectCache *c);
const DaemonObject *object_cache_at(const ObjectCache *c, size_t i);
