/* attach.c: the table of attach kinds and what runs over all of them (observe, check, apply and
 * verify, describe, snapshot and restore, remove, counters). */
#include <stdio.h>
#include <string.h>

#include "attach.h"
#include "daemon-changes.h"

const AttachKind *const attach_kinds[_ATTACH_KIND_MAX] = {
        [ATTACH_KIND_CLS] = &attach_kind_cls,
        [ATTACH_KIND_TCX] = &attach_kind_tcx,
};

void attach_context_done(AttachContext *c) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++) {
                if (c->kind_state[i] && attach_kinds[i]->state_free)
                        attach_kinds[i]->state_free(c->kind_state[i]);
                c->kind_state[i] = NULL;
        }
}

int attach_observe_all(AttachContext *c, AttachObserved *ret, Error *reterr) {
        AttachObserved o = { 0 };

        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++) {
                int r = attach_kinds[i]->observe(c, &o.of[i], reterr);
                if (r < 0) {
                        attach_observed_free(&o);
                        return r;
                }
        }
        *ret = o;
        return 0;
}

bool attach_observed_any(const AttachObserved *o) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++)
                if (o->of[i])
                        return true;
        return false;
}

void attach_observed_free(AttachObserved *o) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++)
                attach_kinds[i]->observed_free(o->of[i]);
        *o = (AttachObserved){ 0 };
}

void attach_settle_all(AttachContext *c, const AttachObserved *o) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++)
                attach_kinds[i]->settle(c, o->of[i]);
}

int attach_check_all(AttachContext *c, const AttachObserved *o, Error *reterr) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++) {
                int r = attach_kinds[i]->check(c, o->of[i], reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The kind's plan from what it observed, applied: the changes made (0: none), or a failure. */
static int kind_apply(AttachContext *c, const AttachKind *k, const AttachObservation *observed,
                      Error *reterr) {
        AttachPlan *plan = NULL;
        int r;

        r = k->plan(c, observed, &plan, reterr);
        if (r < 0)
                return r;
        r = k->apply(c, observed, plan, reterr);
        k->plan_free(plan);
        return r;
}

int attach_apply_all(AttachContext *c, const AttachObserved *o, Error *reterr) {
        int changes = 0;

        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++) {
                const AttachKind *k = attach_kinds[i];
                int r = kind_apply(c, k, o->of[i], reterr);

                if (r == 0)
                        /* nothing changed: what was just observed stands */
                        k->settle(c, o->of[i]);
                else if (r > 0) {
                        changes += r;
                        r = k->verify(c, reterr);
                }
                if (r < 0)
                        return r;
        }
        return changes;
}

int attach_describe_all(AttachContext *c, const AttachObserved *o, DryRunStep **steps, size_t *n,
                        Error *reterr) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++) {
                const AttachKind *k = attach_kinds[i];
                AttachPlan *plan = NULL;
                int r;

                r = k->plan(c, o->of[i], &plan, reterr);
                if (r >= 0 && k->describe(c, o->of[i], plan, steps, n) < 0)
                        r = error_oom(reterr);
                k->plan_free(plan);
                if (r < 0)
                        return r;
        }
        return 0;
}

int attach_snapshot_all(AttachContext *c, const AttachObserved *o, AttachSnapshot *ret, Error *reterr) {
        AttachSnapshot s = { 0 };

        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++) {
                int r = attach_kinds[i]->snapshot(c, o->of[i], &s.of[i], reterr);
                if (r < 0) {
                        attach_snapshot_free(&s);
                        return r;
                }
        }
        *ret = s;
        return 0;
}

int attach_restore_all(AttachContext *c, const AttachSnapshot *s, Iface *before, Error *reterr) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++) {
                int r = attach_kinds[i]->restore(c, s->of[i], before, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

void attach_snapshot_free(AttachSnapshot *s) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++)
                attach_kinds[i]->snapshot_free(s->of[i]);
        *s = (AttachSnapshot){ 0 };
}

int attach_remove_all(AttachContext *c, Error *reterr) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++) {
                int r = attach_kinds[i]->remove_all(c, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int attach_counters_all(const AttachContext *c, FilterStatus *status, Error *reterr) {
        for (size_t i = 0; i < _ATTACH_KIND_MAX; i++) {
                int r = attach_kinds[i]->counters ? attach_kinds[i]->counters(c, status, reterr) : 0;
                if (r < 0)
                        return r;
        }
        return 0;
}
