/* dry-run.c: what a PUT would do (programs to load, filters to add, replace, remove, and why) from the
 * same diff the reconciler applies; nothing is loaded, stored or changed. The verifier does not run. */
#include <inttypes.h>
#include <linux/pkt_cls.h>
#include <stdio.h>
#include <string.h>

#include "daemon-internal.h"

void dry_run_done(DryRun *r) {
        document_free(r->doc);
        document_free(r->plan_doc);
        free(r->programs);
        free(r->steps);
        *r = (DryRun){ 0 };
}

static Direction direction_of(NlHook h) {
        return h == NL_HOOK_INGRESS ? DIRECTION_INGRESS : DIRECTION_EGRESS;
}

/* What a PUT would do for one program (the filter's classifier, action -1, or its action number action):
 * share one already loaded, adopt the one attached, or load anew (after checking that it could take
 * over the maps of the one it replaces, as the PUT would). attached_id/attached_tag: what is at its
 * place now (0: nothing); ret_id/ret_tag: the program it would use where that is known. */
static int plan_program(Daemon *d, const FilterSpec *f, const FilterSpec *of, int action,
                        uint32_t attached_id, const char *attached_tag, DryRunLoad *ret_load,
                        uint32_t *ret_id, char ret_tag[NL_TAG_STRING_MAX], Error *reterr) {
        ProgramRef ref = program_ref(f, action), old = of ? program_ref(of, action) : (ProgramRef){ 0 };
        Program *p = registry_find(d, ref.digest, ref.program, ref.kind);

        *ret_load = DRY_RUN_LOAD;
        if (p) {
                *ret_load = DRY_RUN_SHARED;
                *ret_id = program_id(p);
                snprintf(ret_tag, NL_TAG_STRING_MAX, "%s", program_tag(p));
                return 0;
        }
        /* What the PUT would adopt: the very program the old document attached there. */
        if (!of || (action >= 0 && (size_t) action >= of->n_actions) || !streq_ptr(old.digest, ref.digest) ||
            !streq_ptr(old.program, ref.program))
                /* A new load takes over the maps of the program it replaces: the PUT would refuse an
                 * incompatible one, and so does the dry run. */
                return registry_check_reuse(d, &ref, attached_id, reterr);
        uint32_t old_id = action < 0 ? of->prog_id : of->actions[action].prog_id;
        if (attached_id && attached_id == old_id && (!attached_tag || streq(attached_tag, old.tag))) {
                *ret_load = DRY_RUN_ADOPT;
                *ret_id = old_id;
                snprintf(ret_tag, NL_TAG_STRING_MAX, "%s", old.tag);
        }
        return 0;
}

/* Which program each filter and action would use, and its id where one exists already. */
static int plan_programs(Daemon *d, const Iface *old, DryRun *dr, int ifindex, const NlFilter *observed,
                         size_t n_observed, DesiredFilter *desired, Error *reterr) {
        size_t k = 0;
        int r;

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < dr->plan_doc->n_filters[dir]; i++, k++) {
                        const FilterSpec *f = &dr->plan_doc->filters[dir][i];
                        const FilterSpec *of = old ? document_find_filter(old->doc, f->name, NULL) : NULL;
                        DesiredFilter *w = &desired[k];
                        DryRunProgram *dp = &dr->programs[dr->n_programs++];
                        uint32_t attached = 0;
                        const char *attached_tag = NULL;
                        NlTcxLink l;

                        *dp = (DryRunProgram){ .filter = f, .direction = dir, .action = -1 };
                        w->hook = hook_of(dir);
                        w->parent = filter_parent(f, dir);
                        w->pref = (uint16_t) f->priority;
                        filter_kernel_name(f, w->name);
                        w->direct_action = f->direct_action;
                        w->classid = f->has_classid ? f->classid : 0;
                        const NlFilter *have = find_ours(observed, n_observed, w->parent, w->pref, w->name);
                        if (filter_uses_tcx(d, f)) {
                                if (ifindex > 0 &&
                                    iface_tcx_find(d, dr->plan_doc->netns, ifindex, dir, f, &l) >= 0)
                                        attached = l.prog_id;
                        } else if (have) {
                                attached = have->prog_id;
                                attached_tag = have->tag;
                        }
                        r = plan_program(d, f, of, -1, attached, attached_tag, &dp->load, &w->prog_id,
                                         w->tag, reterr);
                        if (r < 0)
                                return r;
                        w->n_actions = f->n_actions;
                        for (size_t a = 0; a < f->n_actions; a++) {
                                const NlAction *ha = have && a < have->n_actions ? &have->actions[a] : NULL;
                                DryRunProgram *ap = &dr->programs[dr->n_programs++];

                                *ap = (DryRunProgram){ .filter = f, .direction = dir, .action = (int) a };
                                action_kernel_name(f, a, w->actions[a].name);
                                r = plan_program(d, f, of, (int) a, ha ? ha->prog_id : 0,
                                                 ha ? ha->tag : NULL, &ap->load, &w->actions[a].prog_id,
                                                 w->actions[a].tag, reterr);
                                if (r < 0)
                                        return r;
                        }
                }
        return 0;
}

/* Which action differs, and how (the classifier itself is as declared). */
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

static void describe(DryRunStep *s, const PlanStep *p, const DesiredFilter *desired,
                     const NlFilter *observed) {
        const NlFilter *have = p->observed >= 0 ? &observed[p->observed] : NULL;
        const DesiredFilter *want = p->desired >= 0 ? &desired[p->desired] : NULL;

        s->action = plan_action_to_string(p->action);
        s->direction = direction_of(p->hook);
        s->pref = p->pref;
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

static void tcx_step(DryRunStep *s, const char *action, Direction dir, uint16_t pref, const char *name,
                     const char *fmt, uint32_t id) {
        *s = (DryRunStep){ .action = action, .direction = dir, .pref = pref };
        snprintf(s->name, sizeof(s->name), NL_FILTER_NAME_PREFIX "%s", name);
        snprintf(s->reason, sizeof(s->reason), fmt, id);
}

/* The cls_bpf filters through the reconciler's diff; the tcx ones against clsd's pinned links. */
static int plan_steps(Daemon *d, DryRun *dr, int ifindex, const DesiredFilter *desired, size_t n,
                      const NlFilter *observed, size_t n_observed, Error *reterr) {
        _cleanup_free_ DesiredFilter *cls = calloc(n + 1, sizeof(DesiredFilter));
        TcxOurs *ours = NULL;
        size_t n_cls = 0, n_ours = 0, k = 0;
        Plan plan = { 0 };
        int r;

        if (!cls)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < dr->plan_doc->n_filters[dir]; i++, k++)
                        if (!filter_uses_tcx(d, &dr->plan_doc->filters[dir][i]))
                                cls[n_cls++] = desired[k];
        if (d->tcx) {
                r = tcx_ours(d, dr->plan_doc->netns, ifindex, &ours, &n_ours, reterr);
                if (r < 0)
                        return r;
        }
        r = reconcile_diff(cls, n_cls, observed, n_observed, &plan);
        dr->steps = calloc(plan.n_steps + n + n_ours + 1, sizeof(DryRunStep));
        if (r < 0 || !dr->steps) {
                plan_done(&plan);
                tcx_ours_free(ours, n_ours);
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        }
        for (size_t i = 0; i < plan.n_steps; i++)
                describe(&dr->steps[dr->n_steps++], &plan.steps[i], cls, observed);
        plan_done(&plan);

        k = 0;
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < dr->plan_doc->n_filters[dir]; i++, k++) {
                        const FilterSpec *f = &dr->plan_doc->filters[dir][i];
                        uint16_t pref = (uint16_t) f->priority;
                        TcxOurs *have = NULL;

                        if (!filter_uses_tcx(d, f))
                                continue;
                        for (size_t j = 0; j < n_ours; j++)
                                if (ours[j].dir == dir && ours[j].pref == pref &&
                                    streq(ours[j].name, f->name) && ours[j].link.ifindex > 0)
                                        have = &ours[j];
                        if (have)
                                have->wanted = true;
                        if (!have)
                                tcx_step(&dr->steps[dr->n_steps++], "add", dir, pref, f->name,
                                         "tcx: no link of clsd's for it%.0u", 0);
                        else if (desired[k].prog_id && desired[k].prog_id == have->link.prog_id)
                                tcx_step(&dr->steps[dr->n_steps++], "keep", dir, pref, f->name,
                                         "tcx link %u runs the declared program", have->link.link_id);
                        else
                                tcx_step(&dr->steps[dr->n_steps++], "replace", dir, pref, f->name,
                                         "tcx link %u: its program would be replaced in place",
                                         have->link.link_id);
                }
        for (size_t j = 0; j < n_ours; j++)
                if (!ours[j].wanted && ours[j].link.ifindex > 0)
                        tcx_step(&dr->steps[dr->n_steps++], "remove", ours[j].dir, ours[j].pref,
                                 ours[j].name, "tcx link %u of clsd's, not in the document",
                                 ours[j].link.link_id);
        tcx_ours_free(ours, n_ours);
        return 0;
}

static int dry_run_of(Daemon *d, const char *netns, const char *ifname, json_t *body, const char *if_match,
                      DryRun *ret, Error *reterr) {
        _cleanup_free_ NlFilter *observed = NULL;
        _cleanup_free_ DesiredFilter *desired = NULL;
        Iface *old = daemon_iface_get(d, netns, ifname);
        NlSocket *rtnl = NULL;
        DryRun dr = { 0 };
        size_t n_observed = 0, n;
        NlLink link;
        int r;

        /* The same checks as a PUT, in the same order, but a path object is only read. */
        r = iface_document_prepare(d, netns, ifname, body, if_match, false, &dr.doc, reterr);
        if (r < 0)
                return r;
        /* A hog's hooks stay as they are: the plan is over the documents composed. */
        if (document_compose(dr.doc, old ? old->hog : NULL, &dr.plan_doc, NULL) < 0) {
                r = error_set(reterr, ENOMEM, "internal_error", "out of memory");
                goto fail;
        }

        n = dr.plan_doc->n_filters[DIRECTION_INGRESS] + dr.plan_doc->n_filters[DIRECTION_EGRESS];
        dr.programs = calloc(n * (1 + ACTIONS_PER_FILTER_MAX) + 1, sizeof(DryRunProgram));
        desired = calloc(n + 1, sizeof(DesiredFilter));
        if (!dr.programs || !desired) {
                r = error_set(reterr, ENOMEM, "internal_error", "out of memory");
                goto fail;
        }
        r = daemon_link_by_name(d, netns, ifname, &rtnl, &link, reterr);
        if (r == -ENODEV)
                dr.pending = true;
        else if (r >= 0)
                r = nl_filter_dump(rtnl, link.ifindex, &observed, &n_observed, reterr);
        if (r < 0 && r != -ENODEV)
                goto fail;
        r = plan_programs(d, old, &dr, dr.pending ? 0 : link.ifindex, observed, n_observed, desired, reterr);
        if (r < 0)
                goto fail;
        if (!dr.pending) {
                r = plan_steps(d, &dr, link.ifindex, desired, n, observed, n_observed, reterr);
                if (r < 0)
                        goto fail;
        }
        *ret = dr;
        return 0;
fail:
        dry_run_done(&dr);
        return r;
}

int daemon_iface_dry_run(Daemon *d, const char *netns, const char *ifname, json_t *body,
                         const char *if_match, DryRun *ret, Error *reterr) {
        int r = dry_run_of(d, netns, ifname, body, if_match, ret, reterr);
        netns_release_if_unused(d, netns); /* a dry run follows nothing */
        return r;
}
