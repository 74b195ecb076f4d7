/* attach-cls.c: the cls_bpf attach kind: filters named clsd:<name> at their priority under the clsact
 * hook (or under a classful qdisc the operator made, in classic mode), with their act_bpf actions.
 * Observed by dumping the interface's filters; planned by reconcile_diff(); applied in place
 * (NLM_F_REPLACE); verified by dumping again. */
#include <inttypes.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "attach.h"
#include "clsact.h"
#include "log.h"
#include "reconcile-diff.h"
#include "snapshot.h"

typedef struct ClsObserved {
        NlFilter *filters; /* every filter of the interface, clsd's and foreign */
        size_t n;
} ClsObserved;

typedef struct ClsPlan {
        DesiredFilter *desired;
        size_t n_desired;
        Plan plan;
} ClsPlan;

uint32_t filter_want_id(const Filter *f, int action) {
        if (action < 0)
                return f->program ? program_id(f->program) : f->planned.prog_id;
        return f->actions[action] ? program_id(f->actions[action]) : f->planned_actions[action].prog_id;
}

const char *filter_want_tag(const Filter *f, int action) {
        if (action < 0)
                return f->program ? program_tag(f->program) : f->planned.tag;
        return f->actions[action] ? program_tag(f->actions[action]) : f->planned_actions[action].tag;
}

int filter_want_fd(const Filter *f, int action) {
        const Program *p = action < 0 ? f->program : f->actions[action];
        return p ? program_fd(p) : -1;
}

void attach_what(AttachContext *c, const char *fmt, ...) {
        size_t l;
        va_list ap;

        if (!c->what || c->what_size == 0)
                return;
        l = strlen(c->what);
        if (l > 0 && l + 2 < c->what_size) {
                strcpy(c->what + l, "; ");
                l += 2;
        }
        va_start(ap, fmt);
        vsnprintf(c->what + l, c->what_size - l, fmt, ap);
        va_end(ap);
}

static const char *hook_name(NlHook h) {
        return h == NL_HOOK_INGRESS ? "ingress" : "egress";
}

static void cls_observed_free(void *p) {
        ClsObserved *o = p;
        if (!o)
                return;
        free(o->filters);
        free(o);
}

static void cls_plan_free(void *p) {
        ClsPlan *pl = p;
        if (!pl)
                return;
        free(pl->desired);
        plan_done(&pl->plan);
        free(pl);
}

/* What the kernel has at f's place, as FilterObserved (attached: with f's programs, where held). */
static void observe_filter(Filter *f, const NlFilter *all, size_t n) {
        const FilterSpec *s = f->spec;
        char name[256];
        const NlFilter *o;

        filter_kernel_name(s, name);
        f->observed = (FilterObserved){ 0 };
        o = find_ours(all, n, filter_parent(s, f->dir), (uint16_t) s->priority, name);
        if (!o)
                return;
        f->observed.handle = o->handle;
        f->observed.prog_id = o->prog_id;
        memcpy(f->observed.tag, o->tag, sizeof(f->observed.tag));
        f->observed.classifier_attached = f->program && o->prog_id == program_id(f->program);
        f->observed.attached =
                f->observed.classifier_attached && o->n_actions == s->n_actions && !o->actions_truncated;
        for (size_t k = 0; k < s->n_actions && k < o->n_actions; k++) {
                const NlAction *a = &o->actions[k];
                ActionObserved *ao = &f->observed.actions[k];
                char want[NL_ACTION_NAME_MAX];

                action_kernel_name(s, k, want);
                *ao = (ActionObserved){ .index = a->index,
                                        .prog_id = a->prog_id,
                                        .packets = a->packets,
                                        .bytes = a->bytes,
                                        .drops = a->drops };
                memcpy(ao->tag, a->tag, sizeof(ao->tag));
                ao->attached = streq(a->kind, "bpf") && streq(a->name, want) && f->actions[k] &&
                               a->prog_id == program_id(f->actions[k]);
                f->observed.attached = f->observed.attached && ao->attached;
        }
}

static int cls_observe(AttachContext *c, void **ret, Error *reterr) {
        ClsObserved *o = calloc(1, sizeof(*o));
        int r;

        if (!o)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        unsigned what = NL_DUMP_INGRESS | NL_DUMP_EGRESS | NL_DUMP_ROOT;
        if (c->fresh) {
                what = 0;
                for (size_t i = 0; i < c->it->n_filters; i++) {
                        const Filter *f = &c->it->filters[i];
                        if (f->tcx)
                                continue;
                        what |= f->spec->has_parent           ? NL_DUMP_ROOT
                                : f->dir == DIRECTION_INGRESS ? NL_DUMP_INGRESS
                                                              : NL_DUMP_EGRESS;
                }
        }
        if (c->fresh && c->hooks_absent && !(what & NL_DUMP_ROOT))
                what = 0; /* no clsact: nothing on its hooks */
        r = nl_filter_dump_some(c->rtnl, c->it->ifindex, what, &o->filters, &o->n, reterr);
        if (r < 0) {
                free(o);
                return r;
        }
        for (size_t i = 0; i < c->it->n_filters; i++)
                if (!c->it->filters[i].tcx)
                        observe_filter(&c->it->filters[i], o->filters, o->n);
        *ret = o;
        return 0;
}

static void cls_settle(AttachContext *c, const void *observed) {
        const ClsObserved *o = observed;
        for (size_t i = 0; i < c->it->n_filters; i++)
                if (!c->it->filters[i].tcx)
                        observe_filter(&c->it->filters[i], o->filters, o->n);
}

static int conflict_error(const Iface *it, const NlFilter *have, Error *reterr) {
        return error_set(reterr, EBUSY, "priority_taken",
                         "%s: %s priority %u is held by a foreign filter (%s%s%s, handle 0x%" PRIx32
                         "); clsd never changes filters it does not own",
                         it->ifname, hook_name(have->hook), have->pref, have->kind, have->name[0] ? " " : "",
                         have->name, have->handle);
}

static int cls_check(AttachContext *c, const void *observed, Error *reterr) {
        const ClsObserved *o = observed;

        for (size_t i = 0; i < c->it->n_filters; i++) {
                const Filter *f = &c->it->filters[i];
                if (f->tcx)
                        continue;
                for (size_t k = 0; k < o->n; k++)
                        if (o->filters[k].parent == filter_parent(f->spec, f->dir) &&
                            o->filters[k].chain == 0 && o->filters[k].pref == f->spec->priority &&
                            !o->filters[k].clsd_owned)
                                return conflict_error(c->it, &o->filters[k], reterr);
        }
        return 0;
}

static int cls_plan(AttachContext *c, const void *observed, void **ret, Error *reterr) {
        const ClsObserved *o = observed;
        ClsPlan *pl = calloc(1, sizeof(*pl));
        size_t k = 0;

        if (!pl || !(pl->desired = calloc(c->it->n_filters + 1, sizeof(DesiredFilter)))) {
                free(pl);
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        }
        for (size_t i = 0; i < c->it->n_filters; i++) {
                const Filter *f = &c->it->filters[i];
                DesiredFilter *w;
                if (f->tcx)
                        continue;
                w = &pl->desired[k++];
                w->hook = hook_of(f->dir);
                w->parent = filter_parent(f->spec, f->dir);
                w->pref = (uint16_t) f->spec->priority;
                filter_kernel_name(f->spec, w->name);
                snprintf(w->tag, sizeof(w->tag), "%s", filter_want_tag(f, -1));
                w->prog_id = filter_want_id(f, -1);
                w->prog_fd = filter_want_fd(f, -1);
                w->direct_action = f->spec->direct_action;
                w->classid = f->spec->has_classid ? f->spec->classid : 0;
                w->n_actions = f->spec->n_actions;
                for (size_t a = 0; a < f->spec->n_actions; a++) {
                        action_kernel_name(f->spec, a, w->actions[a].name);
                        snprintf(w->actions[a].tag, sizeof(w->actions[a].tag), "%s",
                                 filter_want_tag(f, (int) a));
                        w->actions[a].prog_id = filter_want_id(f, (int) a);
                        w->actions[a].prog_fd = filter_want_fd(f, (int) a);
                }
        }
        pl->n_desired = k;
        if (reconcile_diff(pl->desired, pl->n_desired, o->filters, o->n, &pl->plan) < 0) {
                cls_plan_free(pl);
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        }
        *ret = pl;
        return 0;
}

/* clsd's clsact is clsd's to remove later, whichever document asks for the interface. */
static void clsact_created(Iface *it) {
        for (DocumentSource s = 0; s < _SOURCE_MAX; s++)
                it->facts[s].clsact_created = true;
}

/* The answer to the exclusive clsact add: 1 if it made one, 0 if one was there; -ESTALE if one was there
 * although the links' view said there was none (nothing was read: the caller reads and tries again). */
static int clsact_answer(AttachContext *c, int r, Error *e, Error *reterr) {
        if (r == -EEXIST && c->hooks_absent) {
                error_done(e);
                return error_set(reterr, ESTALE, "internal_error",
                                 "%s: a clsact qdisc appeared before its event", c->it->ifname);
        }
        if (r < 0 && r != -EEXIST) {
                if (reterr && !reterr->code)
                        *reterr = *e;
                else
                        error_done(e);
                return r;
        }
        error_done(e);
        if (r < 0)
                return 0;
        clsact_created(c->it);
        c->clsact_added = true;
        attach_what(c, "clsact qdisc missing");
        log_info("%s: created clsact qdisc", c->it->ifname);
        return 1;
}

/* Whether the plan's first kernel request is a filter made in one request (add, or replace in place). */
static bool first_step_makes(const ClsObserved *o, const ClsPlan *pl) {
        for (size_t i = 0; i < pl->plan.n_steps; i++) {
                const PlanStep *s = &pl->plan.steps[i];
                if (s->action == PLAN_ADD)
                        return true;
                if (s->action == PLAN_REPLACE)
                        return o->filters[s->observed].protocol == ETH_P_ALL;
                if (s->action == PLAN_REMOVE)
                        return false;
        }
        return false;
}

static int cls_apply(AttachContext *c, const void *observed, const void *plan, Error *reterr) {
        const ClsObserved *o = observed;
        const ClsPlan *pl = plan;
        bool on_clsact = false, clsact_deferred = false;
        Error clsact_e = ERROR_NULL;
        int clsact_r = 0;
        NlFilter *after;
        size_t n_after;
        int r, changes = 0;

        for (size_t i = 0; i < pl->plan.n_steps; i++)
                if (pl->plan.steps[i].action == PLAN_CONFLICT)
                        return conflict_error(c->it, &o->filters[pl->plan.steps[i].observed], reterr);
        /* What the kernel will have: what was observed, with each filter made as the kernel echoes it. */
        free(c->cls_after);
        c->cls_after = after = calloc(o->n + pl->plan.n_steps + 1, sizeof(NlFilter));
        c->n_cls_after = 0;
        if (after && o->n > 0)
                memcpy(after, o->filters, o->n * sizeof(NlFilter));
        n_after = o->n;
        /* Only a filter to add or replace on a clsact hook needs clsact (one that is there has it). */
        for (size_t i = 0; i < pl->plan.n_steps; i++) {
                const PlanStep *s = &pl->plan.steps[i];
                on_clsact = on_clsact || ((s->action == PLAN_ADD || s->action == PLAN_REPLACE) &&
                                          s->parent == nl_hook_parent(s->hook));
        }
        if (on_clsact) {
                /* Added exclusively: EEXIST says it is there, without a qdisc dump (which walks every
                 * interface) and without a change the kernel would report. It goes out in one sendmsg
                 * with the first filter made, when that is the first request. */
                clsact_deferred = first_step_makes(o, pl) &&
                                  nl_clsact_add_deferred(c->rtnl, c->it->ifindex, &clsact_r, &clsact_e) >= 0;
                if (!clsact_deferred) {
                        r = clsact_answer(c, nl_clsact_add(c->rtnl, c->it->ifindex, &clsact_e), &clsact_e,
                                          reterr);
                        if (r < 0)
                                return r;
                        changes += r;
                }
        }
        for (size_t i = 0; i < pl->plan.n_steps; i++) {
                const PlanStep *s = &pl->plan.steps[i];
                const char *hook = hook_name(s->hook);

                if (s->action == PLAN_ADD || s->action == PLAN_REPLACE) {
                        const DesiredFilter *w = &pl->desired[s->desired];
                        NlActionSpec acts[NL_ACTIONS_MAX];
                        for (size_t k = 0; k < w->n_actions; k++)
                                acts[k] = (NlActionSpec){ .prog_fd = w->actions[k].prog_fd,
                                                          .name = w->actions[k].name };
                        NlBpfFilterSpec spec = {
                                .ifindex = c->it->ifindex,
                                .hook = w->hook,
                                .parent = w->parent,
                                .pref = w->pref,
                                .handle = s->action == PLAN_REPLACE ? s->handle : 1,
                                .prog_fd = w->prog_fd,
                                .name = w->name,
                                .direct_action = w->direct_action,
                                .classid = w->classid,
                                .actions = acts,
                                .n_actions = w->n_actions,
                        };
                        bool replace = s->action == PLAN_REPLACE;
                        /* The kernel replaces only within a protocol: ours always are ETH_P_ALL, but one
                         * of another protocol can only be swapped by delete and add. */
                        if (replace && o->filters[s->observed].protocol != ETH_P_ALL) {
                                r = nl_filter_del(c->rtnl, c->it->ifindex, s->parent, s->pref,
                                                  o->filters[s->observed].protocol, s->handle, reterr);
                                if (r < 0 && r != -ENOENT)
                                        return r;
                                replace = false;
                        }
                        NlFilter made;
                        r = nl_bpf_filter_set_echo(c->rtnl, &spec, replace, &made, reterr);
                        if (clsact_deferred) {
                                int k = clsact_answer(c, clsact_r, &clsact_e, reterr);
                                clsact_deferred = false;
                                if (k == -ESTALE && r >= 0)
                                        /* made beside filters nobody read: undone, and read first */
                                        (void) nl_filter_del(c->rtnl, c->it->ifindex, made.parent, made.pref,
                                                             made.protocol, made.handle, NULL);
                                if (k < 0)
                                        return k;
                                changes += k;
                        }
                        if ((r == -EINVAL || r == -ENOENT || r == -EOPNOTSUPP) &&
                            spec.parent != nl_hook_parent(NL_HOOK_INGRESS) &&
                            spec.parent != nl_hook_parent(NL_HOOK_EGRESS)) {
                                /* a "parent" the interface has no qdisc or class of: the document's
                                 * to mend, not the kernel's failure */
                                char why[256];
                                snprintf(why, sizeof(why), "%s", strna(reterr->message));
                                error_done(reterr);
                                return error_set(
                                        reterr, EINVAL, "parent_not_found",
                                        "%s pref %u: parent %x:%x is not a qdisc or class of %s, or cannot "
                                        "hold a filter (%s)",
                                        hook, w->pref, spec.parent >> 16, spec.parent & 0xffff,
                                        c->it->ifname, why);
                        }
                        if (r < 0)
                                return r;
                        if (after) {
                                if (s->action == PLAN_REPLACE)
                                        after[s->observed] = made;
                                else
                                        after[n_after++] = made;
                        }
                        changes++;
                        attach_what(c, "%s pref %u %s", hook, w->pref,
                                    s->action == PLAN_ADD ? "missing" : "not as declared");
                        log_info("%s: %s %s pref %u: %s (tag %s)", c->it->ifname,
                                 s->action == PLAN_ADD ? "added" : "replaced", hook, w->pref, w->name,
                                 w->tag);
                } else if (s->action == PLAN_REMOVE) {
                        const NlFilter *have = &o->filters[s->observed];
                        r = nl_filter_del(c->rtnl, c->it->ifindex, s->parent, s->pref, have->protocol,
                                          have->handle, reterr);
                        if (r < 0 && r != -ENOENT)
                                return r;
                        if (after)
                                after[s->observed].pref = 0; /* gone */
                        changes++;
                        attach_what(c, "%s pref %u not declared", hook, s->pref);
                        log_info("%s: removed %s pref %u (%s)", c->it->ifname, hook, s->pref, have->name);
                }
        }
        if (clsact_deferred) {
                /* not taken along by a filter (the plan had none to make first, after all) */
                (void) nl_flush(c->rtnl);
                r = clsact_answer(c, clsact_r, &clsact_e, reterr);
                if (r < 0)
                        return r;
                changes += r;
        }
        if (after) {
                size_t k = 0;
                for (size_t i = 0; i < n_after; i++)
                        if (after[i].pref != 0)
                                after[k++] = after[i];
                c->n_cls_after = k;
        }
        return changes;
}

/* The kernel is the source of truth: after applying, read back and check each filter. */
static int cls_verify(AttachContext *c, Error *reterr) {
        _cleanup_free_ NlFilter *dumped = NULL;
        const NlFilter *all = c->cls_after;
        size_t n = c->n_cls_after;
        int r;

        /* Read back in the apply's own round trips (each filter made was echoed): no dump. */
        if (!all) {
                r = nl_filter_dump(c->rtnl, c->it->ifindex, &dumped, &n, reterr);
                if (r < 0)
                        return r;
                all = dumped;
        }
        for (size_t i = 0; i < c->it->n_filters; i++) {
                Filter *f = &c->it->filters[i];
                if (f->tcx)
                        continue;
                observe_filter(f, all, n);
                if (!f->observed.attached)
                        return error_set(reterr, EIO, "kernel_error",
                                         "%s: %s pref %u is not attached as requested after applying",
                                         c->it->ifname, direction_to_string(f->dir), f->spec->priority);
        }
        return 0;
}

/* ---- the dry run's words for a plan ---- */

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

static int cls_describe(AttachContext *c, const void *observed, const void *plan, DryRunStep **steps,
                        size_t *n) {
        const ClsObserved *o = observed;
        const ClsPlan *pl = plan;
        DryRunStep *v = realloc(*steps, (*n + pl->plan.n_steps + 1) * sizeof(DryRunStep));

        (void) c;
        if (!v)
                return -ENOMEM;
        *steps = v;
        for (size_t i = 0; i < pl->plan.n_steps; i++)
                describe_step(&v[(*n)++], &pl->plan.steps[i], pl->desired, o->filters);
        return 0;
}

/* ---- snapshot, restore, removal ---- */

typedef struct ClsSnapshot {
        Snapshot s;
} ClsSnapshot;

static int cls_snapshot(AttachContext *c, const void *observed, void **ret, Error *reterr) {
        const ClsObserved *o = observed;
        ClsSnapshot *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        r = snapshot_take(c->rtnl, c->it->ifindex, o->filters, o->n, &s->s, reterr);
        if (r < 0) {
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

static int cls_restore(AttachContext *c, const void *snapshot, Error *reterr) {
        Snapshot s = ((const ClsSnapshot *) snapshot)->s;
        s.had_clsact = !c->clsact_added;
        return snapshot_restore(&s, c->it->ifname, reterr);
}

static void cls_snapshot_free(void *p) {
        ClsSnapshot *s = p;
        if (!s)
                return;
        snapshot_done(&s->s);
        free(s);
}

static int cls_remove_all(AttachContext *c, Error *reterr) {
        _cleanup_free_ NlFilter *all = NULL;
        size_t n = 0;
        Plan plan = { 0 };
        int r;

        r = nl_filter_dump(c->rtnl, c->it->ifindex, &all, &n, reterr);
        if (r < 0)
                return r;
        r = reconcile_diff(NULL, 0, all, n, &plan);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "out of memory");
        for (size_t i = 0; i < plan.n_steps && r >= 0; i++) {
                const PlanStep *s = &plan.steps[i];
                if (s->action != PLAN_REMOVE)
                        continue;
                r = nl_filter_del(c->rtnl, c->it->ifindex, s->parent, s->pref, all[s->observed].protocol,
                                  all[s->observed].handle, reterr);
                if (r == -ENOENT)
                        r = 0;
                if (r >= 0)
                        log_info("%s: removed %s pref %u (%s)", c->it->ifname, hook_name(s->hook), s->pref,
                                 all[s->observed].name);
                all[s->observed].pref = 0; /* gone */
        }
        plan_done(&plan);
        if (r < 0)
                return r;
        if (!iface_clsact_created(c->it))
                return 0;
        /* what is left: the dump above without what was just deleted (each delete acked) */
        size_t n_left = 0;
        for (size_t i = 0; i < n; i++)
                if (all[i].pref != 0)
                        all[n_left++] = all[i];
        return clsact_remove_unless_used(c->rtnl, c->it->ifindex, c->it->ifname, all, n_left, reterr);
}

const AttachKind attach_kind_cls = {
        .name = "cls_bpf",
        .observe = cls_observe,
        .settle = cls_settle,
        .check = cls_check,
        .plan = cls_plan,
        .apply = cls_apply,
        .verify = cls_verify,
        .describe = cls_describe,
        .snapshot = cls_snapshot,
        .restore = cls_restore,
        .snapshot_free = cls_snapshot_free,
        .remove_all = cls_remove_all,
        .observed_free = cls_observed_free,
        .plan_free = cls_plan_free,
};
