/* resolution.c: a document's objects resolved for a change; a path object clsd has not seen is
 * inspected by a worker first (libbpf parses it there, unprivileged), then stored. */
#include <string.h>

#include "log.h"
#include "resolution.h"

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

void resolution_done(ObjectResolution *res) {
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
                        error_set(&result->error, EINVAL, "invalid_object",
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
                        error_set(&result->error, ENOMEM, "internal_error", "out of memory");
                }
        }
        on_inspected(result, c);
}

static int start_inspections(ObjectResolution *c, Error *reterr) {
        Manager *m = c->m;

        c->jobs = calloc(c->resolver.n_pending + 1, sizeof(WorkerJob *));
        if (!c->jobs)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        c->n_jobs = c->resolver.n_pending;
        for (size_t i = 0; i < c->resolver.n_pending; i++) {
                Inspected *in = calloc(1, sizeof(*in));
                int r;
                if (!in)
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                *in = (Inspected){ .c = c, .index = i };
                r = worker_inspect(m->workers, c->resolver.pending[i].data, c->resolver.pending[i].size,
                                   on_one_inspected, in, &c->jobs[i]);
                if (r < 0) {
                        free(in);
                        return error_set(reterr, -r, "internal_error", "cannot start a worker: %s",
                                         strerror(-r));
                }
                m->counters.worker_jobs++;
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
        r = start_inspections(c, reterr);
        return r < 0 ? r : -EAGAIN;
}
