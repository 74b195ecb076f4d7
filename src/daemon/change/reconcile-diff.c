/* reconcile-diff.c: plan = reconcile_diff(desired, observed): the reconciler's pure core. Marks every
 * filter of ours, unmarks what the desired state still wants, and removes what stays marked. */
#include <linux/pkt_cls.h>
#include <string.h>

#include "reconcile-diff.h"

const char *plan_action_to_string(PlanAction a) {
        static const char *const names[] = {
                [PLAN_KEEP] = "keep",     [PLAN_ADD] = "add",           [PLAN_REPLACE] = "replace",
                [PLAN_REMOVE] = "remove", [PLAN_CONFLICT] = "conflict",
        };
        return a < ELEMENTSOF(names) ? names[a] : "unknown";
}

const NlFilter *find_ours(const NlFilter *observed, size_t n, uint32_t parent, uint16_t pref,
                          const char *name) {
        for (size_t i = 0; i < n; i++)
                if (observed[i].parent == parent && observed[i].pref == pref && observed[i].chain == 0 &&
                    observed[i].clsd_owned && streq(observed[i].name, name))
                        return &observed[i];
        return NULL;
}

void plan_done(Plan *p) {
        free(p->steps);
        *p = (Plan){ 0 };
}

/* Each action at its place: act_bpf, clsd's name, the program, and "pipe" for TC_ACT_UNSPEC. */
static bool actions_match(const DesiredFilter *want, const NlFilter *have) {
        if (have->n_actions != want->n_actions || have->actions_truncated)
                return false;
        for (size_t k = 0; k < want->n_actions; k++) {
                const NlAction *a = &have->actions[k];
                const DesiredAction *w = &want->actions[k];
                if (!streq(a->kind, "bpf") || !streq(a->name, w->name) || a->prog_id != w->prog_id ||
                    !streq(a->tag, w->tag) || a->control != TC_ACT_PIPE)
                        return false;
        }
        return true;
}

static bool filter_matches(const DesiredFilter *want, const NlFilter *have) {
        return streq(have->kind, "bpf") && streq(have->name, want->name) && streq(have->tag, want->tag) &&
               have->prog_id == want->prog_id && have->direct_action == want->direct_action &&
               have->classid == want->classid && actions_match(want, have);
}

int reconcile_diff(const DesiredFilter *desired, size_t n_desired, const NlFilter *observed,
                   size_t n_observed, Plan *ret) {
        _cleanup_free_ bool *marked = calloc(n_observed + 1, sizeof(bool));
        _cleanup_free_ PlanStep *steps = calloc(n_desired + n_observed + 1, sizeof(PlanStep));
        size_t n = 0;

        if (!marked || !steps)
                return -ENOMEM;

        /* Only chain 0 is clsd's: a pref in another chain is another filter list altogether. */
        for (size_t i = 0; i < n_observed; i++)
                marked[i] = observed[i].clsd_owned && observed[i].chain == 0;

        for (size_t k = 0; k < n_desired; k++) {
                const DesiredFilter *want = &desired[k];
                PlanStep s = { .action = PLAN_ADD,
                               .hook = want->hook,
                               .parent = want->parent,
                               .pref = want->pref,
                               .desired = (int) k,
                               .observed = -1 };

                /* Several filters can share a pref (other handles, other protocols): one foreign one is
                 * enough to make the pref not ours. */
                for (size_t i = 0; i < n_observed; i++) {
                        const NlFilter *have = &observed[i];
                        if (have->parent != want->parent || have->pref != want->pref || have->chain != 0)
                                continue;
                        if (!have->clsd_owned) {
                                s.action = PLAN_CONFLICT;
                                s.observed = (int) i;
                                s.handle = have->handle;
                                break;
                        }
                        marked[i] = false;
                        if (s.observed >= 0)
                                continue; /* a second handle of ours at the pref: the first one decides */
                        s.observed = (int) i;
                        s.handle = have->handle;
                        s.action = filter_matches(want, have) ? PLAN_KEEP : PLAN_REPLACE;
                }
                if (s.action == PLAN_CONFLICT)
                        /* leave ours at that pref alone too: nothing changes there */
                        for (size_t i = 0; i < n_observed; i++)
                                if (observed[i].parent == want->parent && observed[i].pref == want->pref)
                                        marked[i] = false;
                steps[n++] = s;
        }

        for (size_t i = 0; i < n_observed; i++) {
                if (!marked[i])
                        continue;
                /* One step per filter of ours, removed by (pref, protocol, handle): never the whole pref. */
                steps[n++] = (PlanStep){ .action = PLAN_REMOVE,
                                         .hook = observed[i].hook,
                                         .parent = observed[i].parent,
                                         .pref = observed[i].pref,
                                         .handle = observed[i].handle,
                                         .desired = -1,
                                         .observed = (int) i };
        }

        ret->steps = TAKE_PTR(steps);
        ret->n_steps = n;
        return 0;
}
