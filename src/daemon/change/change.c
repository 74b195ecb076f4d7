/* change.c: running a change when its interface's turn comes, phase by phase (change.h). It may wait
 * for workers (an object to inspect, a program to load) while the loop goes on, and runs again from the
 * phase that waited; the kernel and the store change only once every program is loaded and verified,
 * in one turn of the loop, and a failure after that puts the kernel back as it was. */
#include <stdio.h>
#include <string.h>

#include "change.h"
#include "loads.h"
#include "reconcile.h"
#include "log.h"
#include "daemon-changes.h"
#include "daemon-metrics.h"
#include "store-policy.h"

void change_free(Operation *op) {
        Change *c = (Change *) op;

        if (c->candidate) {
                loads_forget(c->m, c->candidate);
                iface_free(c->candidate, c->m->registry);
        }
        change_look_done(&c->look);
        resolution_done(&c->res);
        document_unref(c->doc);
        for (size_t i = 0; i < c->n_policies; i++)
                policy_unref(c->policies[i]);
        free(c->policies);
        free(c->hog_path);
        free(c->expect_text);
        dry_run_done(&c->dry_run);
        free(c);
}

/* ---- the phases ---- */

static int phase_check(Change *c, Iface *it, Error *reterr) {
        return c->type->check ? c->type->check(c, it, reterr) : 0;
}

static void on_resolved(ObjectResolution *res) {
        Change *c = (Change *) ((char *) res - offsetof(Change, res));
        request_queue_resume(c->m->queue, c->op.iface);
}

static int phase_resolve(Change *c, Iface *it, Error *reterr) {
        (void) it;
        if (!c->doc || c->shared_resolver)
                return 0;
        return resolution_run(&c->res, c->doc, reterr);
}

static int phase_candidate(Change *c, Iface *it, Error *reterr) {
        return change_make_candidate(c, it, reterr);
}

/* A dry run ends with the look: its plan is the answer. */
static int phase_look(Change *c, Iface *it, Error *reterr) {
        int r = change_look(c, it, reterr);

        if (r < 0 || !c->type->dry_run)
                return r;
        r = dry_run_apply(c, it, &c->look, reterr);
        if (r < 0)
                return r;
        change_finish(c, it, NULL);
        return CHANGE_ANSWERED;
}

static int phase_acquire(Change *c, Iface *it, Error *reterr) {
        if (c->candidate->programs_held)
                return 0;
        return iface_acquire_programs(c->m, c->candidate, it, reterr);
}

const ChangePhaseFunc change_phases[_PHASE_MAX] = {
        [PHASE_CHECK] = phase_check,    [PHASE_RESOLVE] = phase_resolve, [PHASE_CANDIDATE] = phase_candidate,
        [PHASE_LOOK] = phase_look,      [PHASE_ACQUIRE] = phase_acquire, [PHASE_APPLY] = change_apply,
        [PHASE_COMMIT] = change_commit,
};

/* The operation's run: as far as the change can go now (0 done, OPERATION_RETRY done and failed but
 * held, -EAGAIN waiting for a worker, -ESRCH the interface went with it). */
static int change_run(Manager *m, Operation *op) {
        Change *c = (Change *) op;
        Iface *it = op->iface;
        _cleanup_error_ Error e = ERROR_NULL;
        int r = 0;

        for (; c->phase < _PHASE_MAX; c->phase++) {
                r = c->phases[c->phase](c, it, &e);
                if (r != 0)
                        break;
        }
        if (r < 0 && r != -EAGAIN && c->type->intent && !c->type->dry_run && c->phase > PHASE_CANDIDATE) {
                /* the policies stand; the kernel's refusal is the interface's state, tried again */
                daemon_count_error(m, e.code);
                change_hold_failed(c, it, &e);
                change_look_done(&c->look);
                return OPERATION_RETRY;
        }
        /* What the kernel had is read again by a run that goes on later. */
        change_look_done(&c->look);
        if (r == -EAGAIN)
                return -EAGAIN;
        if (r < 0) {
                if (!c->type->dry_run)
                        daemon_count_error(m, e.code);
                change_finish(c, it, &e);
        }
        /* A new interface whose change stored nothing (a dry run, a failure) or removed everything
         * leaves nothing behind: not in the table, and its namespace not followed for it. */
        return manager_forget_unused(m, it) ? -ESRCH : 0;
}

Change *change_new(Manager *m, ChangeKind kind, const DaemonExpect *expect) {
        Change *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->m = m;
        c->kind = kind;
        c->type = &change_types[kind];
        c->phases = change_phases;
        c->op.run = change_run;
        c->op.free = change_free;
        resolution_init(&c->res, m, c->type->dry_run, on_resolved);
        c->res.resolver.fresh = c->type->fresh_paths;
        if (expect) {
                c->expect = *expect;
                if (expect->as_given && !(c->expect_text = strdup(expect->as_given))) {
                        free(c);
                        return NULL;
                }
                c->expect.as_given = c->expect_text;
        }
        return c;
}

int change_set_policies(Change *c, Policy *const *v, size_t n) {
        if (n > 0 && !(c->policies = calloc(n, sizeof(Policy *))))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                c->policies[i] = policy_ref(v[i]);
        c->n_policies = n;
        return 0;
}

void change_queue(Manager *m, Change *c, const char *netns, const char *ifname) {
        Iface *it = NULL;

        if (iface_table_ensure(m->ifaces, netns, ifname, &it) < 0) {
                _cleanup_error_ Error e = ERROR_NULL;
                error_oom(&e);
                change_finish(c, NULL, &e);
                change_free(&c->op);
                return;
        }
        c->op.iface = it;
        request_queue_operation(m->queue, &c->op);
}
