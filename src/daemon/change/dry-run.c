/* dry-run.c: a PUT's dry run: the same change, run as far as its plan (the programs it would use, the
 * steps it would take and why), with nothing loaded, attached or stored. */
#include <stdio.h>
#include <string.h>

#include "change.h"
#include "daemon-changes.h"
#include "store-policy.h"

void dry_run_done(DryRun *r) {
        document_unref(r->doc);
        document_unref(r->plan_doc);
        free(r->programs);
        free(r->steps);
        error_done(&r->refused);
        free(r->policy_by);
        *r = (DryRun){ 0 };
}

/* A policy's dry run: what the policy (the one whose document the change carries) would be on the
 * interface, from the candidate's composition and what the apply would refuse. */
static void plan_policy(Change *c, DryRun *dr) {
        const Policy *p = NULL;
        const char *by = NULL;

        for (size_t i = 0; i < c->n_policies && !p; i++)
                if (c->policies[i]->doc == c->doc)
                        p = c->policies[i];
        if (!p)
                return;
        dr->policy_state = iface_policy_composed(c->candidate, p, &by);
        if (dr->policy_state == POLICY_IFACE_CONFIGURED && dr->refused.code)
                dr->policy_state = POLICY_IFACE_FAILED;
        else if (dr->policy_state == POLICY_IFACE_CONFIGURED && dr->pending)
                dr->policy_state = POLICY_IFACE_PENDING;
        dr->policy_by = by ? strdup(by) : NULL;
}

static void plan_programs(Change *c, Iface *it, Error *reterr, int *ret) {
        Manager *m = c->m;
        Iface *cand = c->candidate;
        DryRun *dr = &c->dry_run;
        size_t n = 0;
        int r = 0;

        for (size_t i = 0; i < cand->n_filters; i++)
                n += 1 + cand->filters[i].spec->n_actions;
        dr->programs = calloc(n + 1, sizeof(DryRunProgram));
        if (!dr->programs) {
                *ret = error_oom(reterr);
                return;
        }
        for (size_t i = 0; i < cand->n_filters && r >= 0; i++) {
                Filter *f = &cand->filters[i];
                const FilterSpec *old = it->api ? document_find_filter(it->api, f->spec->name, NULL) : NULL;
                for (int a = -1; a < (int) f->spec->n_actions && r >= 0; a++) {
                        ProgramRef ref = program_ref(f->spec, a, &f->fact, f->instance);
                        DryRunProgram *dp = &dr->programs[dr->n_programs++];
                        Program *p = a < 0 ? f->program : f->actions[a];
                        AttachedFact *planned = a < 0 ? &f->planned : &f->planned_actions[a];
                        uint32_t observed = a < 0 ? f->observed.prog_id : f->observed.actions[a].prog_id;
                        const char *observed_tag = a < 0 ? f->observed.tag : f->observed.actions[a].tag;

                        *dp = (DryRunProgram){
                                .filter = f->spec, .direction = f->dir, .action = a, .load = DRY_RUN_LOAD
                        };
                        if (!p)
                                p = registry_find(m->registry, &ref);
                        if (p) {
                                dp->load = DRY_RUN_SHARED;
                                planned->prog_id = program_id(p);
                                snprintf(planned->tag, sizeof(planned->tag), "%s", program_tag(p));
                                continue;
                        }
                        /* What the PUT would adopt: the very program the old document attached (its
                         * tag too, where the kind reads one back). */
                        if (old && ref.fact && ref.fact->prog_id && observed == ref.fact->prog_id &&
                            (!observed_tag[0] || streq(observed_tag, ref.fact->tag))) {
                                dp->load = DRY_RUN_ADOPT;
                                *planned = *ref.fact;
                                continue;
                        }
                        /* A new load takes over the maps of the program it replaces: the PUT would
                         * refuse an incompatible one, and so does the dry run. */
                        r = registry_check_reuse(
                                m->registry, &ref,
                                resolver_info(c->shared_resolver ?: &c->res.resolver, ref.digest), observed,
                                reterr);
                }
        }
        *ret = r;
}

int dry_run_apply(Change *c, Iface *it, ChangeLook *look, Error *reterr) {
        Manager *m = c->m;
        DryRun *dr = &c->dry_run;
        _cleanup_(attach_context_done) AttachContext ctx = { 0 };
        int r = 0;

        dr->doc = document_ref(c->doc);
        dr->pending = !look->present;
        /* as the apply decides it (change_apply): nothing declared, the interface goes */
        dr->dropped = !c->candidate->api && !c->candidate->hog && c->candidate->n_policies == 0;
        dr->document_changed = !(it && it->visible && it->api && document_spec_equal(it->api, c->doc));
        attach_context_init(m, c->candidate, look->rtnl, &ctx);
        /* what the look saw (it reads nothing for a candidate of no filters: what would go is read now) */
        if (look->present && !attach_observed_any(&look->observed) &&
            (r = attach_observe_all(&ctx, &look->observed, reterr)) < 0)
                return r;
        plan_programs(c, it, reterr, &r);
        if (r < 0)
                return r;
        if (look->present) {
                r = attach_describe_all(&ctx, &look->observed, &dr->steps, &dr->n_steps, reterr);
                if (r < 0)
                        return r;
                /* what the apply's look would refuse (a conflict step, a parent missing): the answer says
                 * it */
                if (c->candidate->n_filters > 0)
                        (void) attach_check_all(&ctx, &look->observed, &dr->refused);
        }
        plan_policy(c, dr);
        return 0;
}
