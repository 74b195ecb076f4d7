/* uploads.c: the objects the faces upload and list. An upload is inspected by a worker without
 * privileges before it is stored: a parser that crashes on it costs that worker and one 422. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "uploads.h"
#include "object-trust.h"
#include "daemon-metrics.h"
#include "daemon-objects.h"
#include "nl-bpf.h"
#include "store-policy.h"

/* Objects in the store were inspected by a worker when they were stored (or by the clsd before, in its
 * own process, which survived them): read at start in this process. */
int objects_load(Manager *m) {
        char **digests = NULL;
        size_t n = 0;
        int r;

        r = store_object_list(m->store, &digests, &n);
        if (r < 0)
                return log_error_errno(r, "cannot list objects in %s: %m", store_dir(m->store));
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *data = NULL, *moved = NULL;
                _cleanup_error_ Error e = ERROR_NULL;
                NlObjectInfo *info = NULL;
                size_t size;

                r = store_object_read(m->store, digests[i], m->config.object_size_max, &data, &size);
                if (r >= 0) {
                        /* a key removed since is a signature revoked (object-trust.c): kept on disk, not
                         * loaded */
                        if (!trust_object_check(m, digests[i], data, size))
                                continue;
                        r = nl_object_inspect(data, size, &info, &e);
                }
                if (r < 0) {
                        /* One bad file must not keep clsd from starting: set it aside and go on. */
                        const char *why = r == -EBADMSG ? "its bytes do not match its sha256 name"
                                          : e.message   ? e.message
                                                        : strerror(-r);
                        if (r != -ENOMEM && store_object_quarantine(m->store, digests[i], &moved) >= 0)
                                log_error("object %s set aside: %s; moved to %s", digests[i], why,
                                          strna(moved));
                        else
                                log_error("object %s cannot be used: %s", digests[i], why);
                        continue;
                }
                r = object_cache_add(m->objects, digests[i], size, info, NULL);
                if (r < 0) {
                        nl_object_info_free(info);
                        strv_free_n(digests, n);
                        return log_error_errno(r, "out of memory");
                }
        }
        strv_free_n(digests, n);
        return 0;
}

const DaemonObject *daemon_object_get(Manager *m, const char *digest) {
        return object_cache_get(m->objects, digest);
}

size_t daemon_object_count(Manager *m) {
        return object_cache_size(m->objects);
}

const DaemonObject *daemon_object_at(Manager *m, size_t i) {
        return object_cache_at(m->objects, i);
}

int daemon_object_quota_check(Manager *m, const char *digest, size_t size, Error *reterr) {
        size_t n = object_cache_size(m->objects);
        uint64_t bytes = size;

        if (object_cache_get(m->objects, digest))
                return 0; /* stored already: nothing more */
        for (size_t i = 0; i < n; i++)
                bytes += object_cache_at(m->objects, i)->size;
        if (m->config.objects_max && n >= m->config.objects_max)
                return error_set(
                        reterr, ENOSPC, ERROR_QUOTA_EXCEEDED,
                        "%zu objects are stored, the most --max-objects allows; remove one no document "
                        "uses (DELETE /objects/DIGEST) first",
                        n);
        if (m->config.objects_bytes_max && bytes > m->config.objects_bytes_max)
                return error_set(reterr, ENOSPC, ERROR_QUOTA_EXCEEDED,
                                 "this object (%zu bytes) would bring the objects stored to %" PRIu64
                                 " bytes, over --max-objects-size %zu",
                                 size, bytes, m->config.objects_bytes_max);
        return 0;
}

typedef struct Upload {
        Manager *m;
        char *data;
        size_t size;
        char *sig;
        size_t sig_size;
        char digest[SHA256_DIGEST_STRING_MAX];
        DaemonObjectDoneFunc done;
        void *userdata;
} Upload;

static void upload_finish(Upload *u, const DaemonObject *o, bool created, const Error *e) {
        u->done(u->m, o, created, e, u->userdata);
        free(u->data);
        free(u->sig);
        free(u);
}

/* The upload stored, with its signature (unless the one stored verifies: an object stored unsigned, before
 * --trusted-keys, or signed by a key removed since, is signed by uploading it again); checked again
 * against the quota, as uploads inspected side by side were each checked before the others were stored. */
static int upload_store(Manager *m, Upload *u, bool *ret_created, Error *reterr) {
        bool sign = false;
        int r;

        r = daemon_object_quota_check(m, u->digest, u->size, reterr);
        if (r < 0)
                return r;
        if (u->sig) {
                r = trust_upload_signature(m, u->digest, u->data, u->size, u->sig, u->sig_size, reterr);
                if (r < 0)
                        return r;
                sign = r > 0;
        }
        r = store_object_put_hashed(m->store, u->data, u->size, u->digest, ret_created, reterr);
        if (r < 0 || !sign)
                return r;
        return store_object_signature_put(m->store, u->digest, u->sig, u->sig_size, reterr);
}

static void on_upload_inspected(WorkerResult *result, void *userdata) {
        Upload *u = userdata;
        Manager *m = u->m;
        const DaemonObject *o;
        _cleanup_error_ Error e = ERROR_NULL;
        bool any = false, created = false;
        int r;

        if (result->r < 0) {
                daemon_count_error(m, result->error.code);
                upload_finish(u, NULL, false, &result->error);
                return;
        }
        for (size_t i = 0; i < result->info->n_programs; i++)
                any = any || nl_program_tc_rank(&result->info->programs[i], NL_PROG_CLASSIFIER) >= 0;
        if (!any) {
                char list[512] = "";
                size_t l = 0;
                for (size_t i = 0; i < result->info->n_programs && l + 1 < sizeof(list); i++) {
                        int n = snprintf(list + l, sizeof(list) - l, "%s%s (%s, section %s)", i ? ", " : "",
                                         result->info->programs[i].name, result->info->programs[i].type,
                                         result->info->programs[i].section);
                        if (n < 0)
                                break;
                        l += (size_t) n;
                }
                error_set(&e, EINVAL, ERROR_INVALID_OBJECT,
                          "the object has no program tc can run (sched_cls, sched_act, or in a section of "
                          "its own): %s",
                          result->info->n_programs ? list : "no programs at all");
                upload_finish(u, NULL, false, &e);
                return;
        }
        if (upload_store(m, u, &created, &e) < 0) {
                upload_finish(u, NULL, false, &e);
                return;
        }
        o = object_cache_get(m->objects, u->digest);
        if (!o) {
                r = object_cache_add(m->objects, u->digest, u->size, TAKE_PTR(result->info), &o);
                if (r < 0) {
                        error_oom(&e);
                        upload_finish(u, NULL, false, &e);
                        return;
                }
                log_info("stored object %s (%zu bytes)", u->digest, u->size);
        }
        if (u->sig)
                trust_object_signed(m, u->digest);
        upload_finish(u, o, created, NULL);
}

void daemon_object_add(Manager *m, const void *data, size_t size, const char *sig, size_t sig_size,
                       DaemonObjectDoneFunc done, void *userdata) {
        Upload *u = calloc(1, sizeof(*u));
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        if (size == 0) {
                error_set(&e, EINVAL, ERROR_INVALID_OBJECT,
                          "the body is empty; send the object's ELF bytes");
                done(m, NULL, false, &e, userdata);
                free(u);
                return;
        }
        if (!u || !(u->data = malloc(size))) {
                free(u);
                error_oom(&e);
                done(m, NULL, false, &e, userdata);
                return;
        }
        memcpy(u->data, data, size);
        *u = (Upload){ .m = m, .data = u->data, .size = size, .done = done, .userdata = userdata };
        sha256_digest_string(data, size, u->digest);
        if (m->trust.keys) {
                if (trusted_keys_verify(m->trust.keys, data, size, sig, sig_size, u->digest, &e) < 0) {
                        daemon_count_error(m, e.code);
                        upload_finish(u, NULL, false, &e);
                        return;
                }
                if (sig && !(u->sig = strndup(sig, sig_size))) {
                        error_oom(&e);
                        upload_finish(u, NULL, false, &e);
                        return;
                }
                u->sig_size = sig ? strlen(u->sig) : 0;
        }
        if (daemon_object_quota_check(m, u->digest, size, &e) < 0) {
                daemon_count_error(m, e.code);
                upload_finish(u, NULL, false, &e);
                return;
        }
        r = worker_inspect(m->workers, u->data, size, on_upload_inspected, u, NULL);
        if (r < 0) {
                error_set(&e, -r, ERROR_INTERNAL_ERROR, "cannot start a worker: %s", strerror(-r));
                upload_finish(u, NULL, false, &e);
                return;
        }
        m->counters.worker_jobs++;
}

static bool document_uses(const Document *doc, const char *digest) {
        for (Direction dir = 0; doc && dir < _DIRECTION_MAX; dir++)
                for (size_t k = 0; k < doc->n_filters[dir]; k++) {
                        const FilterSpec *f = &doc->filters[dir][k];
                        if (streq_ptr(f->digest, digest))
                                return true;
                        for (size_t a = 0; a < f->n_actions; a++)
                                if (streq_ptr(f->actions[a].digest, digest))
                                        return true;
                }
        return false;
}

int daemon_object_users(Manager *m, const char *digest, const char ***ret) {
        const char **v = calloc(iface_table_size(m->ifaces) + 1, sizeof(char *));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                const Iface *it = iface_table_at(m->ifaces, i);
                /* An API document a hog overrides still names its objects: it applies again once the hog
                 * goes. A change in flight names them too. */
                if (document_uses(it->api, digest) || document_uses(it->hog, digest))
                        v[n++] = it->ifname;
        }
        *ret = v;
        return 0;
}

int daemon_object_remove(Manager *m, const char *digest, Error *reterr) {
        _cleanup_free_ const char **users = NULL;
        int r;

        if (!object_cache_get(m->objects, digest))
                return error_set(reterr, ENOENT, ERROR_OBJECT_NOT_FOUND, "no object %s", digest);
        r = daemon_object_users(m, digest, &users);
        if (r < 0)
                return error_oom(reterr);
        if (users[0])
                return error_set(reterr, EBUSY, ERROR_OBJECT_IN_USE,
                                 "object %s is used by the document of %s%s", digest, users[0],
                                 users[1] ? " and others" : "");
        for (size_t i = 0; i < m->policies.n; i++)
                if (document_uses(m->policies.v[i]->doc, digest))
                        return error_set(reterr, EBUSY, ERROR_OBJECT_IN_USE,
                                         "object %s is used by the policy %s", digest,
                                         m->policies.v[i]->name);
        r = store_object_remove(m->store, digest, reterr);
        if (r < 0)
                return r;
        object_cache_remove(m->objects, digest);
        log_info("removed object %s", digest);
        return 0;
}
