/* recompose.c: a policy came, changed or went for an interface (or an object it uses was revoked or came
 * back): its filters are composed again from its documents and policies, and it is reconciled as any
 * interface is. The composition happens when the interface's turn comes in the queue, once; the
 * reconcile may wait for loads and go on. An interface nothing declares any more loses clsd's filters
 * and is forgotten. */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "recompose.h"
#include "reconcile.h"
#include "daemon-changes.h"
#include "store-policy.h"

typedef struct Recompose {
        Operation op; /* first: the queue's view */
        Manager *m;
        Policy **policies; /* references */
        size_t n_policies;
        bool composed; /* the interface has them; its reconcile runs */
        DaemonDoneFunc done;
        void *userdata;
} Recompose;

static void recompose_free(Operation *op) {
        Recompose *rc = (Recompose *) op;

        for (size_t i = 0; i < rc->n_policies; i++)
                policy_unref(rc->policies[i]);
        free(rc->policies);
        free(rc);
}

static void recompose_finish(Recompose *rc, Iface *it, const Error *e) {
        if (rc->done)
                rc->done(rc->m, e ? NULL : it, e, rc->userdata);
        rc->done = NULL;
}

/* The policies become the interface's and its filters are composed again: -ENOMEM, or 1 when nothing
 * declares anything for the interface any more. */
static int compose(Recompose *rc, Iface *it) {
        Manager *m = rc->m;
        int r;

        /* The old policies stay alive until the filters are composed again: the filters point into
         * their documents. */
        _cleanup_free_ Policy **old = calloc(it->n_policies + 1, sizeof(Policy *));
        size_t n_old = old ? it->n_policies : 0;
        for (size_t i = 0; i < n_old; i++)
                old[i] = policy_ref(it->policies[i]);
        r = !old ? -ENOMEM : iface_set_policies(it, rc->policies, rc->n_policies);
        if (r >= 0)
                r = iface_set_documents(it, it->api, &it->facts[SOURCE_API], it->hog, it->hog_path,
                                        &it->facts[SOURCE_HOG], m->kernel.tcx, m->registry);
        for (size_t i = 0; i < n_old; i++)
                policy_unref(old[i]);
        if (r < 0)
                return r;
        return !it->api && !it->hog && it->n_policies == 0;
}

/* No policy is for it any more, and nothing else is: clsd's filters go, and the interface with them. */
static void remove_everything(Recompose *rc, Iface *it) {
        Manager *m = rc->m;
        NlSocket *rtnl = it->ifindex > 0 ? netns_set_rtnl_followed(m->netns, it->netns) : NULL;
        _cleanup_error_ Error e = ERROR_NULL;

        if (rtnl && iface_remove_all(m, it, rtnl, &e) < 0)
                log_warning("%s: cannot remove clsd's filters: %s", it->ifname, strna(e.message));
        iface_release_programs(it, m->registry);
        recompose_finish(rc, NULL, NULL);
}

static int recompose_run(Manager *m, Operation *op) {
        Recompose *rc = (Recompose *) op;
        Iface *it = op->iface;
        int r;

        if (!rc->composed) {
                bool was_visible = it->visible;
                r = compose(rc, it);
                if (r < 0) {
                        _cleanup_error_ Error e = ERROR_NULL;
                        error_oom(&e);
                        recompose_finish(rc, it, &e);
                        return manager_forget_unused(m, it) ? -ESRCH : 0;
                }
                if (r > 0) {
                        remove_everything(rc, it);
                        return manager_forget_unused(m, it) ? -ESRCH : 0;
                }
                rc->composed = true;
                it->visible = true;
                iface_table_touch(m->ifaces);
                if (!was_visible) {
                        it->fresh = !it->api && !it->hog;
                        manager_changed(m, it, IFACE_ADDED);
                }
        }
        it->changing = true;
        r = iface_reconcile_and_report(m, it);
        it->changing = false;
        if (r == -EAGAIN)
                return -EAGAIN;
        if (r < 0)
                request_queue_reconcile(m->queue, it, REASON_RETRY);
        manager_changed(m, it, IFACE_CHANGED_DOCUMENT | IFACE_CHANGED_FILTERS);
        recompose_finish(rc, it, NULL);
        return 0;
}

int recompose_queue(Manager *m, const char *netns, const char *ifname, Policy *const *v, size_t n,
                    DaemonDoneFunc done, void *userdata) {
        Recompose *rc = calloc(1, sizeof(*rc));
        Iface *it = NULL;

        if (!rc || (n > 0 && !(rc->policies = calloc(n, sizeof(Policy *)))) ||
            iface_table_ensure(m->ifaces, netns, ifname, &it) < 0) {
                if (rc)
                        free(rc->policies);
                free(rc);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                rc->policies[i] = policy_ref(v[i]);
        rc->n_policies = n;
        rc->m = m;
        rc->done = done;
        rc->userdata = userdata;
        rc->op = (Operation){ .iface = it, .run = recompose_run, .free = recompose_free };
        request_queue_operation(m->queue, &rc->op);
        return 0;
}

void iface_recompose(Manager *m, Iface *it) {
        if (recompose_queue(m, it->netns, it->ifname, it->policies, it->n_policies, NULL, NULL) < 0)
                log_error("%s: cannot queue a change: out of memory", it->ifname);
}
