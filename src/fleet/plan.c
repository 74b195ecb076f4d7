/* plan.c: what converging does next, as a pure function of what etcd wants and what the daemon holds.
 *
 * Each pending change has a revision: a put, its key's mod_revision; a removal, the revision that deleted
 * the key or stopped it selecting this node (after a list, the list's). What one etcd transaction wrote
 * has one revision, so the changes of the lowest pending revision go to the daemon together, as one
 * transaction: all applied, or none. A group held back by a retry delay (a put that failed, or the last
 * failed revision) is passed over until then, so that it does not hold up the groups after it. */
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "fleet-plan.h"

static int pending_compare(const void *a, const void *b) {
        const Pending *x = a, *y = b;
        return x->revision < y->revision ? -1 : x->revision > y->revision;
}

static const FleetHeld *held_find(const FleetHeld *held, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(held[i].name, name))
                        return &held[i];
        return NULL;
}

/* What the node is to hold of w: 1 (a put of *body at *revision), 0 (none), -1 (whatever it holds). */
static int desired(const Wanted *w, uint64_t *revision, json_t **body) {
        if (!w)
                return 0;
        switch (w->desire) {
        case DESIRE_KEEP:
                return -1;
        case DESIRE_BODY:
                *revision = w->desire_revision;
                *body = w->desire_body;
                return w->desire_body ? 1 : 0;
        default:
                if (!w->selected || w->invalid || w->gone)
                        return 0;
                if (w->refused) /* not this revision: what it holds stays */
                        return -1;
                *revision = w->revision;
                *body = w->fp.policy;
                return 1;
        }
}

/* What differs between what the node is to hold and the daemon, by revision. */
static int pending_list(const WantedSet *wanted, const FleetHeld *held, size_t n_held, uint64_t revision,
                        Pending **ret, size_t *ret_n) {
        Pending *v = calloc(wanted->n + n_held + 1, sizeof(Pending));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < wanted->n; i++) {
                const Wanted *w = &wanted->v[i];
                const FleetHeld *h = held_find(held, n_held, w->name);
                uint64_t rev = 0;
                json_t *body = NULL;
                if (desired(w, &rev, &body) > 0 && !(h && h->revision == rev))
                        v[n++] = (Pending){ .name = w->name,
                                            .revision = rev,
                                            .body = body,
                                            .put = w->desire == DESIRE_ETCD ? w : NULL };
        }
        for (size_t i = 0; i < n_held; i++) {
                const Wanted *w = wanted_find(wanted, held[i].name);
                uint64_t rev = 0;
                json_t *body = NULL;
                if (desired(w, &rev, &body) == 0)
                        v[n++] = (Pending){ .name = held[i].name,
                                            .revision = !w                         ? revision
                                                        : w->desire == DESIRE_BODY ? w->desire_revision
                                                                                   : w->revision };
        }
        qsort(v, n, sizeof(Pending), pending_compare);
        *ret = v;
        *ret_n = n;
        return 0;
}

int fleet_plan(const WantedSet *wanted, const FleetHeld *held, size_t n_held, uint64_t revision,
               uint64_t failed_revision, uint64_t failed_retry_usec, uint64_t now, FleetStep *ret) {
        Pending *v = NULL;
        size_t n = 0, i, k;
        uint64_t retry = UINT64_MAX;
        int r;

        r = pending_list(wanted, held, n_held, revision, &v, &n);
        if (r < 0)
                return r;
        for (i = 0; i < n; i = k) {
                bool blocked = false;
                for (k = i; k < n && v[k].revision == v[i].revision; k++)
                        if (v[k].put && v[k].put->error_revision == v[k].put->revision &&
                            now < v[k].put->retry_usec) {
                                blocked = true;
                                retry = MIN(retry, v[k].put->retry_usec);
                        }
                if (v[i].revision == failed_revision && now < failed_retry_usec) {
                        blocked = true;
                        retry = MIN(retry, failed_retry_usec);
                }
                if (blocked)
                        continue;
                memmove(v, v + i, (k - i) * sizeof(Pending));
                *ret = (FleetStep){ .changes = v, .n_changes = k - i, .retry_usec = retry };
                return 0;
        }
        free(v);
        *ret = (FleetStep){ .retry_usec = retry };
        return 0;
}

void fleet_step_done(FleetStep *s) {
        free(s->changes);
        *s = (FleetStep){ 0 };
}
