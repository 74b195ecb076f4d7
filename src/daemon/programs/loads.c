/* loads.c: program loads in flight, one per (object, program, kind, instance) however many interfaces
 * wait for it; a worker loads, the registry takes the program, those that waited (an interface, a
 * change, a transaction's program set: LoadWaiter) get it and go on. A load that failed is remembered
 * until each that waited has been told. The first load of a program
 * makes the maps its instances share: while it runs, a load of another instance waits for it. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "loads.h"
#include "nl-bpf.h"
#include "nl-worker.h"
#include "store-policy.h"

/* Who waits (LoadWaiter), and whether for another instance's load (its shared maps), not for this
 * program. */
typedef struct Waiter {
        LoadWaiter w;
        bool sibling;
} Waiter;

typedef struct Load {
        Manager *m;
        char *digest;
        char *program;
        NlProgKind kind;
        char *instance; /* NULL: the shared program */
        const FilterSpec *filter; /* of the first who asked: whose "maps" say what is taken over */
        WorkerJob *job; /* NULL once done */
        bool failed;
        Error error;
        Waiter *waiters;
        size_t n_waiters;
        struct Load *next;
} Load;

struct Loads {
        Load *loads;
};

int loads_new(Loads **ret) {
        Loads *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        *ret = l;
        return 0;
}

static void load_free(Loads *l, Load *x) {
        for (Load **p = &l->loads; *p; p = &(*p)->next)
                if (*p == x) {
                        *p = x->next;
                        break;
                }
        worker_job_cancel(x->job);
        error_done(&x->error);
        free(x->waiters);
        free(x->digest);
        free(x->program);
        free(x->instance);
        free(x);
}

Loads *loads_free(Loads *l) {
        if (!l)
                return NULL;
        while (l->loads)
                load_free(l, l->loads);
        free(l);
        return NULL;
}

static bool load_of(const Load *x, const ProgramRef *ref) {
        return streq(x->digest, ref->digest) && streq(x->program, ref->program) && x->kind == ref->kind;
}

static Load *load_find(Loads *l, const ProgramRef *ref) {
        for (Load *x = l->loads; x; x = x->next)
                if (load_of(x, ref) && streq_ptr(x->instance, ref->instance))
                        return x;
        return NULL;
}

/* A load of another instance of ref's program, running. */
static Load *load_find_sibling(Loads *l, const ProgramRef *ref) {
        for (Load *x = l->loads; x; x = x->next)
                if (load_of(x, ref) && !streq_ptr(x->instance, ref->instance) && !x->failed)
                        return x;
        return NULL;
}

static bool waiting(const Load *x, const void *target) {
        for (size_t i = 0; i < x->n_waiters; i++)
                if (x->waiters[i].w.target == target)
                        return true;
        return false;
}

static int add_waiter(Load *x, const LoadWaiter *w, bool sibling) {
        Waiter *v;

        if (waiting(x, w->target))
                return 0;
        v = realloc(x->waiters, (x->n_waiters + 1) * sizeof(Waiter));
        if (!v)
                return -ENOMEM;
        x->waiters = v;
        x->waiters[x->n_waiters++] = (Waiter){ .w = *w, .sibling = sibling };
        return 0;
}

/* Forgets the waiters whose target or resume is it. */
static void remove_waiter(Load *x, const void *it) {
        for (size_t i = 0; i < x->n_waiters;)
                if (x->waiters[i].w.target == it || x->waiters[i].w.resume == it)
                        x->waiters[i] = x->waiters[--x->n_waiters];
                else
                        i++;
}

static void on_loaded(WorkerResult *result, void *userdata) {
        Load *x = userdata;
        Manager *m = x->m;
        ProgramRef ref = { .digest = x->digest,
                           .program = x->program,
                           .kind = x->kind,
                           .instance = x->instance,
                           .filter = x->filter };
        Waiter *waiters;
        size_t n;

        x->job = NULL;
        if (result->r >= 0) {
                Program *p;
                /* The load's reference keeps it until every waiting filter holds one of its own. */
                if (registry_add(m->registry, &ref, TAKE_PTR(result->program), &p, &x->error) >= 0) {
                        for (size_t i = 0; i < x->n_waiters; i++)
                                if (!x->waiters[i].sibling)
                                        x->waiters[i].w.hand_over(x->waiters[i].w.target, &ref, p);
                        waiters = TAKE_PTR(x->waiters);
                        n = x->n_waiters;
                        x->n_waiters = 0;
                        load_free(m->loads, x);
                        registry_release(m->registry, p);
                        for (size_t i = 0; i < n; i++)
                                waiters[i].w.on_loaded(m, waiters[i].w.resume);
                        free(waiters);
                        return;
                }
        } else
                x->error = result->error, result->error = (Error){ 0 };
        x->failed = true;
        log_warning("loading %s of %s failed: %s", x->program, x->digest, strna(x->error.message));
        waiters = x->waiters;
        n = x->n_waiters;
        x->waiters = NULL;
        x->n_waiters = 0;
        /* Those that waited for this very program are told when they ask again; the others load their
         * own. */
        for (size_t i = 0; i < n; i++)
                if (!waiters[i].sibling)
                        (void) add_waiter(x, &waiters[i].w, false);
        if (x->n_waiters == 0)
                load_free(m->loads, x);
        for (size_t i = 0; i < n; i++)
                waiters[i].w.on_loaded(m, waiters[i].w.resume);
        free(waiters);
}

int loads_request(Manager *m, const ProgramRef *ref, uint32_t reuse_id, const LoadWaiter *w, Error *reterr) {
        Load *x = load_find(m->loads, ref);
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -1;
        NlMap *reuse = NULL;
        size_t n_reuse = 0;
        char object_name[20];
        int r;

        if (x && x->failed) {
                /* Told once: the next time it asks, it loads again (its retry backs off). */
                bool told = waiting(x, w->target);
                remove_waiter(x, w->target);
                if (told) {
                        r = -x->error.error ?: -EINVAL;
                        if (reterr && !reterr->code) {
                                error_set(reterr, x->error.error, x->error.code, "%s",
                                          strna(x->error.message));
                                if (x->error.detail)
                                        error_set_detail(reterr, strdup(x->error.detail));
                        }
                        if (x->n_waiters == 0)
                                load_free(m->loads, x);
                        return r;
                }
                if (x->n_waiters == 0)
                        load_free(m->loads, x);
                x = NULL;
        }
        if (!x && !registry_has_sibling(m->registry, ref))
                x = load_find_sibling(m->loads, ref);
        if (x) {
                if (add_waiter(x, w, !streq_ptr(x->instance, ref->instance)) < 0)
                        return error_oom(reterr);
                return -EAGAIN;
        }

        if (store_object_path(m->store, ref->digest, &path) < 0)
                return error_oom(reterr);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return error_set(reterr, errno, errno == ENOENT ? ERROR_OBJECT_NOT_FOUND : ERROR_STORE_ERROR,
                                 "cannot read object %s: %m", ref->digest);
        x = calloc(1, sizeof(*x));
        if (!x || !(x->digest = strdup(ref->digest)) || !(x->program = strdup(ref->program)) ||
            (ref->instance && !(x->instance = strdup(ref->instance)))) {
                if (x) {
                        free(x->digest);
                        free(x->program);
                }
                free(x);
                return error_oom(reterr);
        }
        x->m = m;
        x->kind = ref->kind;
        x->filter = ref->filter;
        x->next = m->loads->loads;
        m->loads->loads = x;
        if (add_waiter(x, w, false) < 0) {
                load_free(m->loads, x);
                return error_oom(reterr);
        }
        if (registry_reuse_candidates(m->registry, ref, reuse_id, true, &reuse, &n_reuse) < 0) {
                load_free(m->loads, x);
                return error_oom(reterr);
        }
        /* libbpf names maps after the object: a short digest keeps them recognisable in bpftool. */
        snprintf(object_name, sizeof(object_name), "clsd_%.8s", ref->digest + strlen("sha256:"));
        r = worker_load(m->workers, ref->digest,
                        &(NlLoadSpec){ .object_fd = fd,
                                       .object_name = object_name,
                                       .program = ref->program,
                                       .kind = ref->kind,
                                       .reuse = reuse,
                                       .n_reuse = n_reuse },
                        on_loaded, x, &x->job);
        nl_maps_free(reuse, n_reuse);
        if (r < 0) {
                load_free(m->loads, x);
                return error_set(reterr, -r, ERROR_INTERNAL_ERROR, "cannot start a worker: %s",
                                 strerror(-r));
        }
        m->counters.worker_jobs++;
        log_debug("loading %s%s of %s in worker", ref->program,
                  ref->kind == NL_PROG_ACTION ? " as an action" : "", ref->digest);
        return -EAGAIN;
}

int loads_acquire(Manager *m, const ProgramRef *ref, uint32_t adopt_id, uint32_t reuse_id, Program **slot,
                  const LoadWaiter *w, Error *reterr) {
        int r = registry_acquire(m->registry, ref, adopt_id, slot, reterr);

        if (r != -EAGAIN)
                return r;
        return loads_request(m, ref, reuse_id, w, reterr);
}

void loads_forget(Manager *m, const void *waiter) {
        for (Load *x = m->loads->loads, *next; x; x = next) {
                next = x->next;
                remove_waiter(x, waiter);
                if (x->failed && x->n_waiters == 0)
                        load_free(m->loads, x);
        }
}
