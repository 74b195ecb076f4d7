/* object-trust.c: which stored objects a trusted key still verifies (--trusted-keys). A key removed is every
 * signature it made revoked: at start, and on SIGHUP with the keys read again, an object no key verifies
 * is revoked in the registry (none of its programs is adopted, loaded or repaired), its filters leave
 * their interfaces' compositions (removed from the kernel, the interface failed "object_untrusted"), and
 * it all comes back when a key that signed it returns, or when the same bytes are uploaded again signed by
 * a key still trusted. */
#include <string.h>

#include "log.h"
#include "object-trust.h"
#include "nl-bpf.h"
#include "store-policy.h"

/* Whether a trusted key verifies the stored object (data, its bytes) with the signature stored beside
 * it: 0, or -EPERM with why in reterr. */
static int stored_object_verify(Manager *m, const char *digest, const void *data, size_t size,
                                Error *reterr) {
        _cleanup_free_ char *sig = NULL;
        size_t sig_size = 0;
        int k;

        if (!m->trust.keys)
                return 0;
        k = store_object_signature_read(m->store, digest, &sig, &sig_size);
        if (k < 0 && k != -ENOENT)
                return error_set(reterr, -k, ERROR_OBJECT_UNTRUSTED, "its signature cannot be read: %s",
                                 strerror(-k));
        return trusted_keys_verify(m->trust.keys, data, size, k < 0 ? NULL : sig, sig_size, digest, reterr);
}

int trust_object_check(Manager *m, const char *digest, const void *data, size_t size) {
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        r = stored_object_verify(m, digest, data, size, &e);
        if (r < 0) {
                /* a key removed since is a signature revoked: kept on disk, not loaded */
                if (registry_revoke(m->registry, digest, e.message ?: "not signed by a trusted key") > 0)
                        log_error("object %s revoked: %s; none of its programs runs, and the filters that "
                                  "use it are removed",
                                  digest, strna(e.message));
                return 0;
        }
        return 1;
}

int trust_upload_signature(Manager *m, const char *digest, const void *data, size_t size, const char *sig,
                           size_t sig_size, Error *reterr) {
        int r;

        /* the stored signature stays while it verifies: a working one is never traded for another */
        if (stored_object_verify(m, digest, data, size, NULL) >= 0)
                return 0;
        /* verified when it came, and again: the keys may have been read again (SIGHUP) since */
        r = trusted_keys_verify(m->trust.keys, data, size, sig, sig_size, digest, reterr);
        return r < 0 ? r : 1;
}

void trust_object_signed(Manager *m, const char *digest) {
        if (!registry_unrevoke(m->registry, digest))
                return;
        log_info("object %s: uploaded again signed by a trusted key; its filters come back", digest);
        if (m->trust.on_trusted_again)
                m->trust.on_trusted_again(m);
}

/* The object's trust as the keys say now: 1 if it changed (revoked, or trusted again). */
static int object_recheck(Manager *m, const char *digest) {
        _cleanup_free_ char *data = NULL;
        NlObjectInfo *info = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        size_t size;
        int r;

        r = store_object_read(m->store, digest, m->config.object_size_max, &data, &size);
        if (r < 0)
                return 0; /* set aside at start, or gone: nothing of it runs either way */
        if (!trust_object_check(m, digest, data, size)) {
                if (!object_cache_get(m->objects, digest))
                        return 0;
                object_cache_remove(m->objects, digest);
                return 1;
        }
        if (!registry_unrevoke(m->registry, digest))
                return 0;
        log_info("object %s: signed by a trusted key again; its filters come back", digest);
        if (!object_cache_get(m->objects, digest)) {
                /* inspected by a worker when it was stored */
                if (nl_object_inspect(data, size, &info, &e) < 0 ||
                    object_cache_add(m->objects, digest, size, info, NULL) < 0) {
                        log_error("object %s cannot be used: %s", digest, strna(e.message));
                        nl_object_info_free(info);
                }
        }
        return 1;
}

int trust_reload(Manager *m) {
        TrustedKeys *keys = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        char **digests = NULL;
        size_t n = 0, changed = 0;

        if (!m->config.trusted_keys_dir)
                return 0;
        if (trusted_keys_load(m->config.trusted_keys_dir, &keys, &e) < 0) {
                log_error("--trusted-keys %s: %s; the keys in use stay", m->config.trusted_keys_dir,
                          strna(e.message));
                return -EINVAL;
        }
        trusted_keys_free(m->trust.owned);
        m->trust.keys = m->trust.owned = keys;
        log_info("trusted keys: %zu read from %s", trusted_keys_count(keys), m->config.trusted_keys_dir);
        if (store_object_list(m->store, &digests, &n) < 0)
                return -EIO;
        for (size_t i = 0; i < n; i++)
                changed += object_recheck(m, digests[i]) > 0;
        strv_free_n(digests, n);
        return (int) MIN(changed, (size_t) INT32_MAX);
}
