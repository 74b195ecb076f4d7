/* resolver.c: a resolution's state: the objects it knows (the cache, and those inspected for it
 * alone), those pending inspection, and the images to pull and pulled. Below resolve.c (documents) and
 * resolve-image.c (images), which both fill it. */
#include <stdio.h>
#include <string.h>

#include "oci.h"
#include "resolve.h"
#include "daemon-objects.h"
#include "nl-bpf.h"

void pending_objects_free(PendingObject *v, size_t n) {
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].data);
                free(v[i].sig);
        }
        free(v);
}

void resolver_done(Resolver *rs) {
        for (size_t i = 0; i < rs->n_extra; i++)
                nl_object_info_free(rs->extra[i].info);
        free(rs->extra);
        resolver_pulls_clear(rs);
        resolver_pulled_free(rs);
        pending_objects_free(rs->pending, rs->n_pending);
        rs->extra = NULL;
        rs->n_extra = 0;
        rs->pending = NULL;
        rs->n_pending = 0;
}

const NlObjectInfo *resolver_info(const Resolver *rs, const char *digest) {
        const DaemonObject *o = object_cache_get(rs->cache, digest);

        if (o)
                return o->info;
        for (size_t i = 0; digest && i < rs->n_extra; i++)
                if (streq(rs->extra[i].digest, digest))
                        return rs->extra[i].info;
        return NULL;
}

int resolver_add_extra(Resolver *rs, const char *digest, size_t size, NlObjectInfo *info) {
        DaemonObject *v = realloc(rs->extra, (rs->n_extra + 1) * sizeof(DaemonObject));

        if (!v) {
                nl_object_info_free(info);
                return -ENOMEM;
        }
        rs->extra = v;
        rs->extra[rs->n_extra] = (DaemonObject){ .size = size, .info = info };
        snprintf(rs->extra[rs->n_extra].digest, sizeof(rs->extra[0].digest), "%s", digest);
        rs->n_extra++;
        return 0;
}

bool resolver_pending_has(const Resolver *rs, const char *digest) {
        for (size_t i = 0; i < rs->n_pending; i++)
                if (streq(rs->pending[i].digest, digest))
                        return true;
        return false;
}

int resolver_pending_add(Resolver *rs, const char *digest, char **data, size_t size, char **sig,
                         size_t sig_size) {
        PendingObject *v = realloc(rs->pending, (rs->n_pending + 1) * sizeof(PendingObject));

        if (!v)
                return -ENOMEM;
        rs->pending = v;
        rs->pending[rs->n_pending] = (PendingObject){
                .data = TAKE_PTR(*data), .size = size, .sig = TAKE_PTR(*sig), .sig_size = sig_size
        };
        snprintf(rs->pending[rs->n_pending].digest, sizeof(v->digest), "%s", digest);
        rs->n_pending++;
        return 0;
}

PulledImage *resolver_pulled_find(Resolver *rs, const char *ref) {
        for (size_t i = 0; i < rs->n_pulled; i++)
                if (streq(rs->pulled[i].ref, ref) || streq(rs->pulled[i].pinned, ref))
                        return &rs->pulled[i];
        return NULL;
}

int resolver_pull_add(Resolver *rs, const char *ref) {
        char **v;

        for (size_t i = 0; i < rs->n_pulls; i++)
                if (streq(rs->pulls[i], ref))
                        return 0;
        v = realloc(rs->pulls, (rs->n_pulls + 1) * sizeof(char *));
        if (!v)
                return -ENOMEM;
        rs->pulls = v;
        if (!(v[rs->n_pulls] = strdup(ref)))
                return -ENOMEM;
        rs->n_pulls++;
        return 0;
}

void resolver_pulls_clear(Resolver *rs) {
        for (size_t i = 0; i < rs->n_pulls; i++)
                free(rs->pulls[i]);
        free(rs->pulls);
        rs->pulls = NULL;
        rs->n_pulls = 0;
}

void resolver_pulled_free(Resolver *rs) {
        for (size_t i = 0; i < rs->n_pulled; i++) {
                free(rs->pulled[i].ref);
                free(rs->pulled[i].pinned);
                free(rs->pulled[i].data);
                free(rs->pulled[i].sig);
        }
        free(rs->pulled);
        rs->pulled = NULL;
        rs->n_pulled = 0;
}

int resolver_add_pulled(Resolver *rs, const char *ref, OciImage *img) {
        PulledImage *v = realloc(rs->pulled, (rs->n_pulled + 1) * sizeof(PulledImage));

        if (!v)
                return -ENOMEM;
        rs->pulled = v;
        v[rs->n_pulled] = (PulledImage){ .ref = strdup(ref),
                                         .pinned = TAKE_PTR(img->pinned),
                                         .data = TAKE_PTR(img->data),
                                         .size = img->size,
                                         .sig = TAKE_PTR(img->envelope),
                                         .sig_size = img->envelope_size };
        snprintf(v[rs->n_pulled].digest, sizeof(v->digest), "%s", img->digest);
        rs->n_pulled++;
        return v[rs->n_pulled - 1].ref ? 0 : -ENOMEM;
}
