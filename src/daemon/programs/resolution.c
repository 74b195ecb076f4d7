/* resolution.c: a document's objects resolved for a change; an image named by OCI reference is pulled
 * first (on a thread: oci.h), and an object clsd has not seen is inspected by a worker (libbpf parses
 * it there, unprivileged), then stored. */
#include <string.h>

#include "log.h"
#include "oci.h"
#include "resolution.h"
#include "daemon-objects.h"
#include "nl-bpf.h"
#include "store-policy.h"

void resolution_init(ObjectResolution *res, Manager *m, bool keep_only,
                     void (*on_inspected)(ObjectResolution *res)) {
        *res = (ObjectResolution){ .m = m, .keep_only = keep_only, .on_inspected = on_inspected };
        res->resolver = (Resolver){ .cache = m->objects,
                                    .object_size_max = m->config.object_size_max,
                                    .object_dirs = m->config.object_dirs,
                                    .trusted = m->trust.keys,
                                    .registry = m->registry,
                                    .act_bpf = m->kernel.act_bpf,
                                    .tcx = m->kernel.tcx };
}

static void pulls_cancel(ObjectResolution *res) {
        for (size_t i = 0; i < res->n_pulls; i++)
                oci_pull_cancel(res->pulls[i]);
        free(res->pulls);
        res->pulls = NULL;
        res->n_pulls = 0;
}

void resolution_done(ObjectResolution *res) {
        pulls_cancel(res);
        for (size_t i = 0; i < res->n_jobs; i++)
                worker_job_cancel(res->jobs[i]);
        free(res->jobs);
        res->jobs = NULL;
        res->n_jobs = 0;
        resolver_done(&res->resolver);
        error_done(&res->error);
}

static void on_inspected(WorkerResult *result, ObjectResolution *c) {
        c->inspecting--;
        if (result->r < 0 && !c->error.code) {
                c->error = result->error;
                result->error = (Error){ 0 };
        }
        if (c->inspecting == 0)
                c->on_inspected(c);
}

/* The objects of the resolver's pending list were inspected: stored (a PUT) or kept for this change
 * only (a dry run). results: each pending object's description, in order. */
typedef struct Inspected {
        ObjectResolution *c;
        size_t index;
} Inspected;

static void on_one_inspected(WorkerResult *result, void *userdata) {
        Inspected *in = userdata;
        ObjectResolution *c = in->c;
        Manager *m = c->m;
        PendingObject *p = &c->resolver.pending[in->index];

        c->jobs[in->index] = NULL; /* the worker is done with it */
        free(in);
        if (result->r >= 0) {
                Error e = ERROR_NULL;
                bool any = false;
                for (size_t i = 0; i < result->info->n_programs; i++)
                        any = any || nl_program_tc_rank(&result->info->programs[i], NL_PROG_CLASSIFIER) >= 0;
                if (!any) {
                        error_set(&result->error, EINVAL, ERROR_INVALID_OBJECT,
                                  "object %s has no program tc can run (sched_cls, sched_act, or in a "
                                  "section of "
                                  "its own)",
                                  p->digest);
                        result->r = -EINVAL;
                } else if (!c->keep_only) {
                        const char *digest = p->digest; /* of these bytes: hashed when they were read */
                        if (daemon_object_quota_check(m, p->digest, p->size, &e) < 0) {
                                result->r = -ENOSPC;
                                result->error = e;
                        } else if (store_object_put_hashed(m->store, p->data, p->size, digest, NULL, &e) <
                                           0 ||
                                   (p->sig && store_object_signature_put(m->store, digest, p->sig,
                                                                         p->sig_size, &e) < 0)) {
                                result->r = -EIO;
                                result->error = e;
                        } else if (!object_cache_get(m->objects, digest) &&
                                   object_cache_add(m->objects, digest, p->size, TAKE_PTR(result->info),
                                                    NULL) >= 0)
                                log_info("stored object %s (%zu bytes)", digest, p->size);
                } else if (resolver_add_extra(&c->resolver, p->digest, p->size, TAKE_PTR(result->info)) <
                           0) {
                        result->r = -ENOMEM;
                        error_oom(&result->error);
                }
        }
        on_inspected(result, c);
}

static int start_inspections(ObjectResolution *c, Error *reterr) {
        Manager *m = c->m;

        c->jobs = calloc(c->resolver.n_pending + 1, sizeof(WorkerJob *));
        if (!c->jobs)
                return error_oom(reterr);
        c->n_jobs = c->resolver.n_pending;
        for (size_t i = 0; i < c->resolver.n_pending; i++) {
                Inspected *in = calloc(1, sizeof(*in));
                int r;
                if (!in)
                        return error_oom(reterr);
                *in = (Inspected){ .c = c, .index = i };
                r = worker_inspect(m->workers, c->resolver.pending[i].data, c->resolver.pending[i].size,
                                   on_one_inspected, in, &c->jobs[i]);
                if (r < 0) {
                        free(in);
                        return error_set(reterr, -r, ERROR_INTERNAL_ERROR, "cannot start a worker: %s",
                                         strerror(-r));
                }
                m->counters.worker_jobs++;
                c->inspecting++;
        }
        return 0;
}

void resolution_pull_options(Manager *m, const char *ref, OciPullOptions *ret) {
        OciRef parsed;

        (void) oci_ref_parse(ref, &parsed, NULL); /* the document's parser checked it */
        *ret = (OciPullOptions){ .registry = oci_registries_find(m->config.registries, parsed.registry),
                                 .size_max = m->config.object_size_max,
                                 .signature = m->trust.keys != NULL };
}

typedef struct Pulling {
        ObjectResolution *c;
        size_t index;
} Pulling;

static void on_pulled(int r, OciImage *img, Error *error, void *userdata) {
        Pulling *p = userdata;
        ObjectResolution *c = p->c;
        const char *ref = c->resolver.pulls[p->index];

        c->pulls[p->index] = NULL; /* ended */
        free(p);
        c->m->counters.pulls++;
        if (r < 0) {
                c->m->counters.pull_failures++;
                log_warning("pull %s: %s", ref, strna(error->message));
                if (!c->error.code) {
                        c->error = *error;
                        *error = (Error){ 0 };
                }
        } else {
                log_info("pulled %s: object %s (%zu bytes, %s image, %u requests)", img->pinned, img->digest,
                         img->size, img->format, img->requests);
                if (resolver_add_pulled(&c->resolver, ref, img) < 0 && !c->error.code)
                        error_oom(&c->error);
        }
        c->inspecting--;
        if (c->inspecting == 0)
                c->on_inspected(c);
}

static int start_pulls(ObjectResolution *c, Error *reterr) {
        Manager *m = c->m;
        Resolver *rs = &c->resolver;

        c->pulls = calloc(rs->n_pulls + 1, sizeof(OciPullJob *));
        if (!c->pulls)
                return error_oom(reterr);
        c->n_pulls = rs->n_pulls;
        for (size_t i = 0; i < rs->n_pulls; i++) {
                Pulling *p = calloc(1, sizeof(*p));
                OciPullOptions o;
                int r;
                if (!p)
                        return error_oom(reterr);
                *p = (Pulling){ .c = c, .index = i };
                resolution_pull_options(m, rs->pulls[i], &o);
                o.jitter_msec = c->pull_nodes ? oci_pull_spread_msec(o.registry, c->pull_nodes) : 0;
                r = oci_pull_start(m->event, rs->pulls[i], &o, on_pulled, p, &c->pulls[i]);
                if (r < 0) {
                        free(p);
                        return error_set(reterr, -r, ERROR_INTERNAL_ERROR, "cannot start a pull: %s",
                                         strerror(-r));
                }
                c->inspecting++;
        }
        return 0;
}

int resolution_run(ObjectResolution *c, Document *doc, Error *reterr) {
        int r;

        if (c->error.code) {
                error_set(reterr, c->error.error, c->error.code, "%s", strna(c->error.message));
                return -c->error.error ?: -EINVAL;
        }
        if (c->inspecting > 0)
                return -EAGAIN;
        if (c->pulls) {
                /* The pulls of the last round are in. */
                free(c->pulls);
                c->pulls = NULL;
                c->n_pulls = 0;
                resolver_pulls_clear(&c->resolver);
        }
        if (c->n_jobs > 0) {
                /* The inspections of the last round are in: resolve again from scratch. */
                free(c->jobs);
                c->jobs = NULL;
                c->n_jobs = 0;
                pending_objects_free(c->resolver.pending, c->resolver.n_pending);
                c->resolver.pending = NULL;
                c->resolver.n_pending = 0;
        }
        c->resolver.cache = c->m->objects;
        r = resolver_document(&c->resolver, doc, reterr);
        if (r != -EAGAIN)
                return r;
        /* Images first: what they hold may be known already, or pending with other objects. */
        if (c->resolver.n_pulls > 0) {
                /* (the pending objects wait for the next round: they are not added twice) */
                r = start_pulls(c, reterr);
                return r < 0 ? r : -EAGAIN;
        }
        r = start_inspections(c, reterr);
        return r < 0 ? r : -EAGAIN;
}
