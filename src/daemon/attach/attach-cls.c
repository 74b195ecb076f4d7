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

#include "attach-cls.h"
#include "clsact.h"
#include "log.h"
#include "reconcile-diff.h"
#include "snapshot.h"

const char *cls_hook_name(NlHook h) {
        return h == NL_HOOK_INGRESS ? "ingress" : "egress";
}

static void cls_observed_free(AttachObservation *p) {
        ClsObserved *o = (ClsObserved *) cls_observed(p);
        if (!o)
                return;
        free(o->filters);
        free(o);
}

static void cls_plan_free(AttachPlan *p) {
        ClsPlan *pl = (ClsPlan *) cls_plan_of(p);
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

static int cls_observe(AttachContext *c, AttachObservation **ret, Error *reterr) {
        ClsObserved *o = calloc(1, sizeof(*o));
        int r;

        if (!o)
                return error_oom(reterr);
        o->meta.kind = ATTACH_KIND_CLS;
        unsigned what = NL_DUMP_INGRESS | NL_DUMP_EGRESS | NL_DUMP_ROOT;
        if (c->fresh) {
                what = 0;
                for (size_t i = 0; i < c->it->n_filters; i++) {
                        const Filter *f = &c->it->filters[i];
                        if (f->kind != ATTACH_KIND_CLS)
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
                if (c->it->filters[i].kind == ATTACH_KIND_CLS)
                        observe_filter(&c->it->filters[i], o->filters, o->n);
        *ret = &o->meta;
        return 0;
}

static void cls_settle(AttachContext *c, const AttachObservation *observed) {
        const ClsObserved *o = cls_observed(observed);
        for (size_t i = 0; i < c->it->n_filters; i++)
                if (c->it->filters[i].kind == ATTACH_KIND_CLS)
                        observe_filter(&c->it->filters[i], o->filters, o->n);
}

static int conflict_error(const Iface *it, const NlFilter *have, Error *reterr) {
        return error_set(reterr, EBUSY, ERROR_PRIORITY_TAKEN,
                         "%s: %s priority %u is held by a foreign filter (%s%s%s, handle 0x%" PRIx32
                         "); clsd never changes filters it does not own",
                         it->ifname, cls_hook_name(have->hook), have->pref, have->kind,
                         have->name[0] ? " " : "", have->name, have->handle);
}

static int cls_check(AttachContext *c, const AttachObservation *observed, Error *reterr) {
        const ClsObserved *o = cls_observed(observed);

        for (size_t i = 0; i < c->it->n_filters; i++) {
                const Filter *f = &c->it->filters[i];
                if (f->kind != ATTACH_KIND_CLS)
                        continue;
                for (size_t k = 0; k < o->n; k++)
                        if (o->filters[k].parent == filter_parent(f->spec, f->dir) &&
                            o->filters[k].chain == 0 && o->filters[k].pref == f->spec->priority &&
                            !o->filters[k].clsd_owned)
                                return conflict_error(c->it, &o->filters[k], reterr);
        }
        /* a "parent" the interface has no qdisc or class of: the document's to mend (one dump each) */
        for (size_t i = 0; i < c->it->n_filters; i++) {
                const Filter *f = &c->it->filters[i];
                int r;
                if (f->kind != ATTACH_KIND_CLS || !f->spec->has_parent)
                        continue;
                r = nl_tc_parent_exists(c->rtnl, c->it->ifindex, f->spec->parent, reterr);
                if (r < 0)
                        return r;
                if (r == 0)
                        return error_set(reterr, EINVAL, ERROR_PARENT_NOT_FOUND,
                                         "%s pref %u: parent %x:%x is not a qdisc or class of %s",
                                         direction_to_string(f->dir), f->spec->priority,
                                         f->spec->parent >> 16, f->spec->parent & 0xffff, c->it->ifname);
        }
        return 0;
}

static int cls_plan(AttachContext *c, const AttachObservation *observed, AttachPlan **ret, Error *reterr) {
        const ClsObserved *o = cls_observed(observed);
        ClsPlan *pl = calloc(1, sizeof(*pl));
        size_t k = 0;

        if (!pl || !(pl->desired = calloc(c->it->n_filters + 1, sizeof(DesiredFilter)))) {
                free(pl);
                return error_oom(reterr);
        }
        pl->meta.kind = ATTACH_KIND_CLS;
        for (size_t i = 0; i < c->it->n_filters; i++) {
                const Filter *f = &c->it->filters[i];
                DesiredFilter *w;
                if (f->kind != ATTACH_KIND_CLS)
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
                cls_plan_free(&pl->meta);
                return error_oom(reterr);
        }
        *ret = &pl->meta;
        return 0;
}

/* What applying leaves in the context (kind_state[ATTACH_KIND_CLS]) for its verify and for a rollback. */
typedef struct ClsState {
        AttachState meta;
        /* What the kernel has after an apply: what was observed, with each filter made as the kernel
         * echoed it and without those removed; verify reads it instead of dumping again (NULL: dump). */
        NlFilter *after;
        size_t n_after;
        bool clsact_added; /* this context created the clsact qdisc (a rollback removes it) */
} ClsState;

DEFINE_ATTACH_CAST(cls_state_of, ClsState, AttachState, ATTACH_KIND_CLS, );

static ClsState *cls_state(AttachContext *c) {
        if (!c->kind_state[ATTACH_KIND_CLS]) {
                ClsState *st = calloc(1, sizeof(ClsState));
                if (!st)
                        return NULL;
                st->meta.kind = ATTACH_KIND_CLS;
                c->kind_state[ATTACH_KIND_CLS] = &st->meta;
        }
        return cls_state_of(c->kind_state[ATTACH_KIND_CLS]);
}

static void cls_state_free(AttachState *p) {
        ClsState *st = cls_state_of(p);
        if (!st)
                return;
        free(st->after);
        free(st);
}

/* One apply: the plan's steps as they go, and the clsact qdisc's add that may ride with the first. */
typedef struct ClsApply {
        AttachContext *c;
        const ClsObserved *o;
        const ClsPlan *pl;
        ClsState *st;
        bool clsact_deferred; /* sent with the first filter made: its answer is clsact_r, clsact_e */
        int clsact_r;
        Error clsact_e;
        int changes;
} ClsApply;

/* clsd's clsact is clsd's to remove later, whichever document asks for the interface. */
static void clsact_created(Iface *it) {
        for (DocumentSource s = 0; s < _SOURCE_MAX; s++)
                it->facts[s].clsact_created = true;
}

/* The answer to the exclusive clsact add: 1 if it made one, 0 if one was there; -ESTALE if one was there
 * although the links' view said there was none (nothing was read: the caller reads and tries again). */
static int clsact_answer(ClsApply *a, int r, Error *e, Error *reterr) {
        AttachContext *c = a->c;

        if (r == -EEXIST && c->hooks_absent) {
                error_done(e);
                return error_set(reterr, ESTALE, ERROR_INTERNAL_ERROR,
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
        a->st->clsact_added = true;
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

/* Only a filter to add or replace on a clsact hook needs clsact (one that is there has it). It is added
 * exclusively: EEXIST says it is there, without a qdisc dump (which walks every interface) and without a
 * change the kernel would report; it goes out in one sendmsg with the first filter made, when that is
 * the first request. */
static int apply_clsact(ClsApply *a, Error *reterr) {
        const ClsPlan *pl = a->pl;
        bool on_clsact = false;
        int r;

        for (size_t i = 0; i < pl->plan.n_steps; i++) {
                const PlanStep *s = &pl->plan.steps[i];
                on_clsact = on_clsact || ((s->action == PLAN_ADD || s->action == PLAN_REPLACE) &&
                                          s->parent == nl_hook_parent(s->hook));
        }
        if (!on_clsact)
                return 0;
        a->clsact_deferred =
                first_step_makes(a->o, pl) &&
                nl_clsact_add_deferred(a->c->rtnl, a->c->it->ifindex, &a->clsact_r, &a->clsact_e) >= 0;
        if (a->clsact_deferred)
                return 0;
        r = clsact_answer(a, nl_clsact_add(a->c->rtnl, a->c->it->ifindex, &a->clsact_e), &a->clsact_e,
                          reterr);
        if (r > 0)
                a->changes += r;
        return r;
}

/* The deferred clsact's answer, once the request it rode with is answered (made: that filter, to be
 * undone if the clsact's answer says nothing may be trusted). */
static int clsact_deferred_answer(ClsApply *a, const NlFilter *made, Error *reterr) {
        int k;

        if (!a->clsact_deferred)
                return 0;
        a->clsact_deferred = false;
        k = clsact_answer(a, a->clsact_r, &a->clsact_e, reterr);
        if (k == -ESTALE && made)
                /* made beside filters nobody read: undone, and read first */
                (void) nl_filter_del(a->c->rtnl, a->c->it->ifindex, made->parent, made->pref, made->protocol,
                                     made->handle, NULL);
        if (k > 0)
                a->changes += k;
        return k;
}

/* A "parent" the interface has no qdisc or class of: the document's to mend, not the kernel's failure. */
static int parent_not_found(AttachContext *c, const NlBpfFilterSpec *spec, const char *hook, Error *reterr) {
        char why[256];

        snprintf(why, sizeof(why), "%s", strna(reterr->message));
        error_done(reterr);
        return error_set(
                reterr, EINVAL, ERROR_PARENT_NOT_FOUND,
                "%s pref %u: parent %x:%x is not a qdisc or class of %s, or cannot hold a filter (%s)", hook,
                spec->pref, spec->parent >> 16, spec->parent & 0xffff, c->it->ifname, why);
}

/* A filter added, or replaced in place (one of another protocol than ours, ETH_P_ALL, by delete and add:
 * the kernel replaces only within a protocol). */
static int apply_make(ClsApply *a, const PlanStep *s, Error *reterr) {
        AttachContext *c = a->c;
        const DesiredFilter *w = &a->pl->desired[s->desired];
        const char *hook = cls_hook_name(s->hook);
        NlActionSpec acts[NL_ACTIONS_MAX];
        bool replace = s->action == PLAN_REPLACE;
        NlFilter made;
        int r, k;

        for (size_t i = 0; i < w->n_actions; i++)
                acts[i] = (NlActionSpec){ .prog_fd = w->actions[i].prog_fd, .name = w->actions[i].name };
        NlBpfFilterSpec spec = {
                .ifindex = c->it->ifindex,
                .hook = w->hook,
                .parent = w->parent,
                .pref = w->pref,
                .handle = replace ? s->handle : 1,
                .prog_fd = w->prog_fd,
                .name = w->name,
                .direct_action = w->direct_action,
                .classid = w->classid,
                .actions = acts,
                .n_actions = w->n_actions,
        };
        if (replace && a->o->filters[s->observed].protocol != ETH_P_ALL) {
                r = nl_filter_del(c->rtnl, c->it->ifindex, s->parent, s->pref,
                                  a->o->filters[s->observed].protocol, s->handle, reterr);
                if (r < 0 && r != -ENOENT)
                        return r;
                replace = false;
        }
        r = nl_bpf_filter_set_echo(c->rtnl, &spec, replace, &made, reterr);
        k = clsact_deferred_answer(a, r >= 0 ? &made : NULL, reterr);
        if (k < 0)
                return k;
        if ((r == -EINVAL || r == -ENOENT || r == -EOPNOTSUPP) &&
            spec.parent != nl_hook_parent(NL_HOOK_INGRESS) && spec.parent != nl_hook_parent(NL_HOOK_EGRESS))
                return parent_not_found(c, &spec, hook, reterr);
        if (r < 0)
                return r;
        if (a->st->after) {
                if (s->action == PLAN_REPLACE)
                        a->st->after[s->observed] = made;
                else
                        a->st->after[a->st->n_after++] = made;
        }
        a->changes++;
        attach_what(c, "%s pref %u %s", hook, w->pref,
                    s->action == PLAN_ADD ? "missing" : "not as declared");
        log_info("%s: %s %s pref %u: %s (tag %s)", c->it->ifname,
                 s->action == PLAN_ADD ? "added" : "replaced", hook, w->pref, w->name, w->tag);
        return 0;
}

static int apply_remove(ClsApply *a, const PlanStep *s, Error *reterr) {
        AttachContext *c = a->c;
        const NlFilter *have = &a->o->filters[s->observed];
        int r;

        r = nl_filter_del(c->rtnl, c->it->ifindex, s->parent, s->pref, have->protocol, have->handle, reterr);
        if (r < 0 && r != -ENOENT)
                return r;
        if (a->st->after)
                a->st->after[s->observed].pref = 0; /* gone */
        a->changes++;
        attach_what(c, "%s pref %u not declared", cls_hook_name(s->hook), s->pref);
        log_info("%s: removed %s pref %u (%s)", c->it->ifname, cls_hook_name(s->hook), s->pref, have->name);
        return 0;
}

static int cls_apply(AttachContext *c, const AttachObservation *observed, const AttachPlan *plan,
                     Error *reterr) {
        const ClsPlan *pl = cls_plan_of(plan);
        ClsApply a = {
                .c = c, .o = cls_observed(observed), .pl = pl, .st = cls_state(c), .clsact_e = ERROR_NULL
        };
        int r;

        if (!a.st)
                return error_oom(reterr);
        for (size_t i = 0; i < pl->plan.n_steps; i++)
                if (pl->plan.steps[i].action == PLAN_CONFLICT)
                        return conflict_error(c->it, &a.o->filters[pl->plan.steps[i].observed], reterr);
        /* What the kernel will have: what was observed, with each filter made as the kernel echoes it. */
        free(a.st->after);
        a.st->after = calloc(a.o->n + pl->plan.n_steps + 1, sizeof(NlFilter));
        a.st->n_after = a.o->n;
        if (a.st->after && a.o->n > 0)
                memcpy(a.st->after, a.o->filters, a.o->n * sizeof(NlFilter));
        r = apply_clsact(&a, reterr);
        for (size_t i = 0; i < pl->plan.n_steps && r >= 0; i++) {
                const PlanStep *s = &pl->plan.steps[i];
                if (s->action == PLAN_ADD || s->action == PLAN_REPLACE)
                        r = apply_make(&a, s, reterr);
                else if (s->action == PLAN_REMOVE)
                        r = apply_remove(&a, s, reterr);
        }
        if (r >= 0 && a.clsact_deferred) {
                /* not taken along by a filter (the plan had none to make first, after all) */
                (void) nl_flush(c->rtnl);
                r = clsact_deferred_answer(&a, NULL, reterr);
        } else if (a.clsact_deferred)
                error_done(&a.clsact_e);
        if (r < 0)
                return r;
        if (a.st->after) {
                size_t k = 0;
                for (size_t i = 0; i < a.st->n_after; i++)
                        if (a.st->after[i].pref != 0)
                                a.st->after[k++] = a.st->after[i];
                a.st->n_after = k;
        }
        return a.changes;
}

/* The kernel is the source of truth: after applying, read back and check each filter. */
static int cls_verify(AttachContext *c, Error *reterr) {
        ClsState *st = cls_state_of(c->kind_state[ATTACH_KIND_CLS]);
        _cleanup_free_ NlFilter *all = st ? TAKE_PTR(st->after) : NULL;
        size_t n = st ? st->n_after : 0;
        int r;

        /* Read back in the apply's own round trips (each filter made was echoed): no dump. */
        if (!all) {
                r = nl_filter_dump(c->rtnl, c->it->ifindex, &all, &n, reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < c->it->n_filters; i++) {
                Filter *f = &c->it->filters[i];
                if (f->kind != ATTACH_KIND_CLS)
                        continue;
                observe_filter(f, all, n);
                if (!f->observed.attached)
                        return error_set(reterr, EIO, ERROR_KERNEL_ERROR,
                                         "%s: %s pref %u is not attached as requested after applying",
                                         c->it->ifname, direction_to_string(f->dir), f->spec->priority);
        }
        return 0;
}

/* ---- snapshot, restore, removal ---- */

typedef struct ClsSnapshot {
        AttachHeld meta;
        Snapshot s;
} ClsSnapshot;

DEFINE_ATTACH_CAST(cls_snapshot_of, ClsSnapshot, AttachHeld, ATTACH_KIND_CLS, const);

static int cls_snapshot(AttachContext *c, const AttachObservation *observed, AttachHeld **ret,
                        Error *reterr) {
        const ClsObserved *o = cls_observed(observed);
        ClsSnapshot *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return error_oom(reterr);
        s->meta.kind = ATTACH_KIND_CLS;
        r = snapshot_take(c->rtnl, c->it->ifindex, o->filters, o->n, &s->s, reterr);
        if (r < 0) {
                free(s);
                return r;
        }
        *ret = &s->meta;
        return 0;
}

static int cls_restore(AttachContext *c, const AttachHeld *snapshot, Iface *before, Error *reterr) {
        const ClsState *st = cls_state_of(c->kind_state[ATTACH_KIND_CLS]);
        Snapshot s = cls_snapshot_of(snapshot)->s;

        (void) before; /* the snapshot is exactly what was clsd's */
        s.had_clsact = !(st && st->clsact_added);
        return snapshot_restore(&s, c->it->ifname, reterr);
}

static void cls_snapshot_free(AttachHeld *p) {
        ClsSnapshot *s = (ClsSnapshot *) cls_snapshot_of(p);
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
                return error_oom(reterr);
        for (size_t i = 0; i < plan.n_steps && r >= 0; i++) {
                const PlanStep *s = &plan.steps[i];
                if (s->action != PLAN_REMOVE)
                        continue;
                r = nl_filter_del(c->rtnl, c->it->ifindex, s->parent, s->pref, all[s->observed].protocol,
                                  all[s->observed].handle, reterr);
                if (r == -ENODEV) {
                        /* the device went, and its filters and clsact with it */
                        log_info("%s: the link went during the removal, clsd's filters with it",
                                 c->it->ifname);
                        error_done(reterr);
                        plan_done(&plan);
                        return 0;
                }
                if (r == -ENOENT || r == -EINVAL) {
                        /* gone already: the filter, or the qdisc it was under (a clsact deleted) */
                        error_done(reterr);
                        r = 0;
                }
                if (r >= 0)
                        log_info("%s: removed %s pref %u (%s)", c->it->ifname, cls_hook_name(s->hook),
                                 s->pref, all[s->observed].name);
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
        .counters = cls_counters,
        .observed_free = cls_observed_free,
        .plan_free = cls_plan_free,
        .state_free = cls_state_free,
};
