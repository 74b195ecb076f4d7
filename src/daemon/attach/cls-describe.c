/* cls-describe.c: a dry run's words for a cls_bpf plan: each step (keep, add, replace, remove,
 * conflict) with why, from what was observed and what is wanted. */
#include <inttypes.h>
#include <linux/pkt_cls.h>
#include <stdio.h>
#include <string.h>

#include "attach-cls.h"
#include "daemon-changes.h"

static void describe_actions(DryRunStep *s, const NlFilter *have, const DesiredFilter *want) {
        for (size_t k = 0; k < want->n_actions; k++) {
                const NlAction *a = &have->actions[k];
                const DesiredAction *w = &want->actions[k];
                if (!streq(a->kind, "bpf") || !streq(a->name, w->name))
                        snprintf(s->reason, sizeof(s->reason), "action %zu is %s %s, not clsd's %s", k + 1,
                                 a->kind, a->name, w->name);
                else if (w->prog_id == 0)
                        snprintf(s->reason, sizeof(s->reason),
                                 "action %zu: its program would be loaded anew", k + 1);
                else if (a->prog_id != w->prog_id)
                        snprintf(s->reason, sizeof(s->reason),
                                 "action %zu: attached program id %" PRIu32 ", declared %" PRIu32, k + 1,
                                 a->prog_id, w->prog_id);
                else if (a->control != TC_ACT_PIPE)
                        snprintf(s->reason, sizeof(s->reason),
                                 "action %zu: its verdict for TC_ACT_UNSPEC is %d, not pipe", k + 1,
                                 a->control);
                else
                        continue;
                return;
        }
        snprintf(s->reason, sizeof(s->reason), "the actions differ");
}

static void describe_step(DryRunStep *s, const PlanStep *p, const DesiredFilter *desired,
                          const NlFilter *observed) {
        const NlFilter *have = p->observed >= 0 ? &observed[p->observed] : NULL;
        const DesiredFilter *want = p->desired >= 0 ? &desired[p->desired] : NULL;

        *s = (DryRunStep){ .action = plan_action_to_string(p->action),
                           .direction = p->hook == NL_HOOK_INGRESS ? DIRECTION_INGRESS : DIRECTION_EGRESS,
                           .pref = p->pref };
        snprintf(s->name, sizeof(s->name), "%s", want ? want->name : have->name);
        switch (p->action) {
        case PLAN_KEEP:
                snprintf(s->reason, sizeof(s->reason), "attached as declared (program id %" PRIu32 ")",
                         have->prog_id);
                break;
        case PLAN_ADD:
                snprintf(s->reason, sizeof(s->reason), "nothing at this pref");
                break;
        case PLAN_REPLACE:
                if (!streq(have->name, want->name))
                        snprintf(s->reason, sizeof(s->reason), "clsd's filter %s is at this pref",
                                 have->name);
                else if (want->prog_id == 0)
                        snprintf(s->reason, sizeof(s->reason), "the program would be loaded anew");
                else if (have->prog_id != want->prog_id)
                        snprintf(s->reason, sizeof(s->reason),
                                 "attached program id %" PRIu32 ", declared %" PRIu32, have->prog_id,
                                 want->prog_id);
                else if (have->n_actions != want->n_actions)
                        snprintf(s->reason, sizeof(s->reason), "%zu action(s) attached, %zu declared",
                                 have->n_actions, want->n_actions);
                else if (have->direct_action != want->direct_action || have->classid != want->classid)
                        snprintf(s->reason, sizeof(s->reason), "flags or classid differ");
                else
                        describe_actions(s, have, want);
                break;
        case PLAN_REMOVE:
                snprintf(s->reason, sizeof(s->reason), "clsd's, and not in the document");
                break;
        case PLAN_CONFLICT:
                snprintf(s->reason, sizeof(s->reason),
                         "held by a foreign filter (%s %s): the PUT would be refused", have->kind,
                         have->name);
                break;
        }
}

int cls_describe(AttachContext *c, const AttachObservation *observed, const AttachPlan *plan,
                 DryRunStep **steps, size_t *n) {
        const ClsObserved *o = cls_observed(observed);
        const ClsPlan *pl = cls_plan_of(plan);
        DryRunStep *v = realloc(*steps, (*n + pl->plan.n_steps + 1) * sizeof(DryRunStep));

        (void) c;
        if (!v)
                return -ENOMEM;
        *steps = v;
        for (size_t i = 0; i < pl->plan.n_steps; i++)
                describe_step(&v[(*n)++], &pl->plan.steps[i], pl->desired, o->filters);
        return 0;
}
