/* resolve.h: a document's "object" and "program" of each filter and action, resolved to an object clsd
 * knows and one of its programs that tc can run as that use. An object named by path is read; one clsd
 * has not seen yet must be inspected first (by a worker): resolution stops and says which. */
#pragma once

#include "object-cache.h"
#include "oci.h"
#include "daemon-objects.h"
#include "nl-bpf.h"

typedef struct PendingObject {
        char digest[SHA256_DIGEST_STRING_MAX];
        char *data;
        size_t size;
        char *sig; /* its signature file's text (--trusted-keys), stored with it; else NULL */
        size_t sig_size;
} PendingObject;

/* An image pulled for a resolution: its object, the reference pinned to the manifest digest, the cosign
 * material to verify. */
typedef struct PulledImage {
        char *ref; /* as the document names it */
        char *pinned;
        char digest[SHA256_DIGEST_STRING_MAX];
        char *data; /* handed to the pending objects once */
        size_t size;
        char *sig;
        size_t sig_size;
} PulledImage;

typedef struct Resolver {
        const ObjectCache *cache;
        size_t object_size_max;
        const char *const *object_dirs; /* NULL: any path (a hog's); else objects by path only there */
        /* A request's new document: its paths are read (and checked against a pinned digest) even when
         * the object is known; otherwise a known object's file is not read again. */
        bool fresh;
        bool act_bpf; /* the kernel has act_bpf: "actions" can run */
        bool tcx; /* the kernel has tcx */
        /* Set: an object file read by path must have a signature file beside it (SIGNATURE_SUFFIXES)
         * by one of these keys. */
        const TrustedKeys *trusted;
        /* Stored objects no trusted key verifies any more (registry_revoked()); NULL: none. */
        const struct Registry *registry;
        /* Objects inspected for this resolution that are not in the cache (a dry run stores nothing). */
        DaemonObject *extra;
        size_t n_extra;
        /* Objects to inspect before resolution can go on (-EAGAIN). */
        PendingObject *pending;
        size_t n_pending;
        /* Images to pull before resolution can go on (-EAGAIN; oci:// references as named), and those
         * pulled (resolve-image.c). */
        char **pulls;
        size_t n_pulls;
        PulledImage *pulled;
        size_t n_pulled;
} Resolver;

void resolver_done(Resolver *rs);
/* Resolves every filter of doc (filling digest and program): 0, -EAGAIN with rs->pending to inspect, or
 * the reason it cannot (in reterr). tcx filters must be runnable: the kernel has tcx, no program twice
 * on a hook. */
int resolver_document(Resolver *rs, Document *doc, Error *reterr);
/* An object of rs->pending was inspected, not stored: it counts for this resolution only. Takes info. */
int resolver_add_extra(Resolver *rs, const char *digest, size_t size, NlObjectInfo *info);
/* The description of digest: in the cache or among the extra ones. */
const NlObjectInfo *resolver_info(const Resolver *rs, const char *digest);
void pending_objects_free(PendingObject *v, size_t n);
/* Whether digest waits among the pending objects; adds one (taking data and sig). */
bool resolver_pending_has(const Resolver *rs, const char *digest);
int resolver_pending_add(Resolver *rs, const char *digest, char **data, size_t size, char **sig,
                         size_t sig_size);

/* resolve-image.c: an "object" that is an OCI reference. Known (the document pins a digest clsd has):
 * 0; pulled for this resolution: *object becomes the pinned reference, *digest the object's, and the
 * object is pending (1) unless known; else it is added to rs->pulls (1). */
int resolve_image(Resolver *rs, char **object, char **digest, const char *who, Error *reterr);
/* A pull's image, its object, pinned reference and signature envelope taken: ref is the reference as
 * the document named it. */
int resolver_add_pulled(Resolver *rs, const char *ref, OciImage *img);
void resolver_pulls_clear(Resolver *rs);
/* The image pulled for ref (as named, or pinned), or NULL; ref added to the pulls (once). */
PulledImage *resolver_pulled_find(Resolver *rs, const char *ref);
int resolver_pull_add(Resolver *rs, const char *ref);
void resolver_pulled_free(Resolver *rs);
