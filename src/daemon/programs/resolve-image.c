/* resolve-image.c: objects named by OCI reference. A reference is pulled once per resolution (by the
 * caller: resolution.c on a thread, hogs.c in place), and what was pulled is what runs: the document
 * keeps the reference pinned to the manifest digest its tag named then, and the object's digest, so
 * that a tag moved later changes nothing until the document is applied again. The image's cosign
 * material is verified like a file's signature: by the trusted keys, before the object is inspected. */
#include <string.h>

#include "registry.h"
#include "resolve.h"

int resolve_image(Resolver *rs, char **object, char **digest, const char *who, Error *reterr) {
        PulledImage *p = resolver_pulled_find(rs, *object);
        int r;

        if (!p) {
                /* pinned by the document (as stored, or a GET's answer put back) to an object clsd has */
                if (*digest && resolver_info(rs, *digest)) {
                        const char *why = registry_revoked(rs->registry, *digest);
                        if (why)
                                return error_set(reterr, EPERM, ERROR_OBJECT_UNTRUSTED,
                                                 "%s: object %s (%s): %s", who, *digest, *object, why);
                        return 0;
                }
                return resolver_pull_add(rs, *object) < 0 ? error_oom(reterr) : 1;
        }
        if (*digest && !streq(*digest, p->digest))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: %s holds object %s, the document pins %s", who, p->pinned, p->digest,
                                 *digest);
        if (!streq(*object, p->pinned)) {
                char *pinned = strdup(p->pinned);
                if (!pinned)
                        return error_oom(reterr);
                free(*object);
                *object = pinned;
        }
        if (!*digest && !(*digest = strdup(p->digest)))
                return error_oom(reterr);
        if (resolver_info(rs, p->digest))
                return 0;
        if (resolver_pending_has(rs, p->digest))
                return 1;
        if (!p->data) /* handed on before, and not stored since: inspected and refused */
                return error_set(reterr, EINVAL, ERROR_INVALID_OBJECT, "%s: object %s of %s was refused",
                                 who, p->digest, p->pinned);
        if (rs->trusted) {
                r = trusted_keys_verify(rs->trusted, p->data, p->size, p->sig, p->sig_size, p->pinned,
                                        reterr);
                if (r < 0)
                        return r;
        }
        if (resolver_pending_add(rs, p->digest, &p->data, p->size, &p->sig, p->sig_size) < 0)
                return error_oom(reterr);
        return 1;
}
