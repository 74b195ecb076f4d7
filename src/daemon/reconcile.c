/* reconcile.c: making one interface's kernel state match its document: acquire the programs (adopting
 * what is attached), diff against a fresh dump, apply the plan, read the result back. */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <time.h>
#include <linux/if_ether.h>
#include <stdio.h>
#include <string.h>

#include "daemon-internal.h"
#include "log.h"

const char *iface_state_to_string(IfaceState s) {
        static const char *const names[_IFACE_STATE_MAX] = {
                [IFACE_PENDING] = "pending",
                [IFACE_CONFIGURED] = "configured",
                [IFACE_FAILED] = "failed",
        };
        return s < _IFACE_STATE_MAX ? names[s] : "unknown";
}

static uint64_t now(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

NlHook hook_of(Direction dir) {
        return dir == DIRECTION_INGRESS ? NL_HOOK_INGRESS : NL_HOOK_EGRESS;
}

void filter_kernel_name(const FilterSpec *f, char buf[256]) {
        snprintf(buf, 256, NL_FILTER_NAME_PREFIX "%s", f->name);
}

void action_kernel_name(const FilterSpec *f, size_t k, char buf[NL_ACTION_NAME_MAX]) {
        snprintf(buf, NL_ACTION_NAME_MAX, NL_FILTER_NAME_PREFIX "%s/%zu", f->name, k + 1);
}

int document_compose(const Document *api, const Document *hog, Document **ret,
                     DocumentSource ret_hook_source[_DIRECTION_MAX]) {
        _cleanup_(document_freep) Document *c = NULL;
        int r;

        assert(api || hog);
        r = document_copy(api ?: hog, &c);
        if (r < 0)
                return r;
        c->source = hog ? SOURCE_HOG : SOURCE_API;
        c->generation = api ? api->generation : 0;
        c->clsact_created = (api && api->clsact_created) || (hog && hog->clsact_created);
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                bool from_hog = hog && (!api || hog->n_filters[dir] > 0);
                if (from_hog && api) {
                        r = document_copy_hook(c, hog, dir);
                        if (r < 0)
                                return r;
                }
                if (ret_hook_source)
                        ret_hook_source[dir] = from_hog ? SOURCE_HOG : SOURCE_API;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

bool hog_holds(const Document *hog, Direction dir) {
        return hog && hog->n_filters[dir] > 0;
}

int iface_new(const Document *api, const Document *hog, const char *hog_path, Iface **ret) {
        Iface *it = calloc(1, sizeof(*it));

        if (!it)
                return -ENOMEM;
        if ((api && document_copy(api, &it->api) < 0) || (hog && document_copy(hog, &it->hog) < 0) ||
            (hog_path && !(it->hog_path = strdup(hog_path))) ||
            document_compose(api, hog, &it->doc, it->hook_source) < 0) {
                iface_free(NULL, it); /* no program acquired yet */
                return -ENOMEM;
        }
        *ret = it;
        return 0;
}

void iface_carry_over(Iface *it, const Iface *old) {
        it->doc->clsact_created = it->doc->clsact_created || old->doc->clsact_created;
        it->repairs = old->repairs;
        it->last_repair_usec = old->last_repair_usec;
        memcpy(it->last_repair_what, old->last_repair_what, sizeof(it->last_repair_what));
}

/* What the reconciler learnt in it->doc (program ids and tags, clsact ownership) goes back to the
 * document each hook came from. Returns whether anything changed. */
bool iface_facts_sync(Iface *it) {
        bool changed = false;

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                Document *src = it->hook_source[dir] == SOURCE_HOG ? it->hog : it->api;
                for (size_t i = 0; src && i < it->doc->n_filters[dir] && i < src->n_filters[dir]; i++) {
                        FilterSpec *f = &src->filters[dir][i], *g = &it->doc->filters[dir][i];
                        for (size_t k = 0; k < f->n_actions && k < g->n_actions; k++) {
                                ActionSpec *a = &f->actions[k], *b = &g->actions[k];
                                if (streq(a->tag, b->tag) && a->prog_id == b->prog_id)
                                        continue;
                                memcpy(a->tag, b->tag, sizeof(a->tag));
                                a->prog_id = b->prog_id;
                                changed = true;
                        }
                        if (streq(f->tag, g->tag) && f->prog_id == g->prog_id)
                                continue;
                        memcpy(f->tag, g->tag, sizeof(f->tag));
                        f->prog_id = g->prog_id;
                        changed = true;
                }
        }
        if (it->api && it->api->clsact_created != it->doc->clsact_created) {
                it->api->clsact_created = it->doc->clsact_created;
                changed = true;
        }
        if (it->hog && it->hog->clsact_created != it->doc->clsact_created) {
                it->hog->clsact_created = it->doc->clsact_created;
                changed = true;
        }
        return changed;
}

/* Keeps what old attached for the filters of doc that old declares alike (same hook, name, object
 * and program), so that what is attached can be adopted. */
void document_keep_facts(Document *doc, const Document *old) {
        for (Direction dir = 0; old && dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < doc->n_filters[dir]; i++) {
                        FilterSpec *f = &doc->filters[dir][i];
                        for (size_t k = 0; k < old->n_filters[dir]; k++) {
                                const FilterSpec *of = &old->filters[dir][k];
                                if (!streq(of->name, f->name))
                                        continue;
                                if (streq_ptr(of->digest, f->digest) && streq_ptr(of->program, f->program)) {
                                        memcpy(f->tag, of->tag, sizeof(f->tag));
                                        f->prog_id = of->prog_id;
                                }
                                /* An action at the same place, of the same program, is the same. */
                                for (size_t a = 0; a < f->n_actions && a < of->n_actions; a++)
                                        if (streq_ptr(of->actions[a].digest, f->actions[a].digest) &&
                                            streq_ptr(of->actions[a].program, f->actions[a].program)) {
                                                memcpy(f->actions[a].tag, of->actions[a].tag, 17);
                                                f->actions[a].prog_id = of->actions[a].prog_id;
                                        }
                        }
                }
}

void iface_release_programs(Daemon *d, Iface *it) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                for (size_t i = 0; it->action_programs[dir] && i < it->doc->n_filters[dir]; i++) {
                        for (size_t k = 0;
                             it->action_programs[dir][i] && k < it->doc->filters[dir][i].n_actions; k++)
                                registry_release(d, it->action_programs[dir][i][k]);
                        free(it->action_programs[dir][i]);
                }
                free(it->action_programs[dir]);
                it->action_programs[dir] = NULL;
                if (!it->programs[dir])
                        continue;
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++)
                        registry_release(d, it->programs[dir][i]);
                free(it->programs[dir]);
                it->programs[dir] = NULL;
        }
}

Iface *iface_free(Daemon *d, Iface *it) {
        if (!it)
                return NULL;
        iface_release_programs(d, it);
        sd_event_source_disable_unref(it->retry_source);
        document_free(it->doc);
        document_free(it->api);
        document_free(it->hog);
        free(it->hog_path);
        error_done(&it->error);
        free(it);
        return NULL;
}

NlSocket *iface_rtnl(Daemon *d, const Iface *it) {
        if (!it->doc->netns)
                return d->own.rtnl;
        for (size_t i = 0; i < d->n_netns; i++)
                if (streq(d->netns[i]->name, it->doc->netns))
                        return d->netns[i]->rtnl;
        return NULL;
}

uint32_t filter_parent(const FilterSpec *f, Direction dir) {
        return f->has_parent ? f->parent : nl_hook_parent(hook_of(dir));
}

const NlFilter *find_ours(const NlFilter *observed, size_t n, uint32_t parent, uint16_t pref,
                          const char *name) {
        for (size_t i = 0; i < n; i++)
                if (observed[i].parent == parent && observed[i].pref == pref && observed[i].chain == 0 &&
                    observed[i].clsd_owned && streq(observed[i].name, name))
                        return &observed[i];
        return NULL;
}

/* The actions of filter f (at index i of dir): each adopts the very program clsd attached last at its
 * place, or a new load takes over the maps of the program there. */
static int acquire_actions(Daemon *d, Iface *it, Direction dir, size_t i, const NlFilter *have,
                           Error *reterr) {
        const FilterSpec *f = &it->doc->filters[dir][i];
        int r;

        it->action_programs[dir][i] = calloc(f->n_actions + 1, sizeof(Program *));
        if (!it->action_programs[dir][i])
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        for (size_t k = 0; k < f->n_actions; k++) {
                const NlAction *a = have && k < have->n_actions && streq(have->actions[k].kind, "bpf")
                                            ? &have->actions[k]
                                            : NULL;
                const ActionSpec *as = &f->actions[k];
                uint32_t adopt = 0, reuse = a ? a->prog_id : 0;
                ProgramRef ref = program_ref(f, (int) k);

                if (a && as->tag[0] && streq(a->tag, as->tag) && a->prog_id == as->prog_id)
                        adopt = a->prog_id;
                r = registry_acquire(d, &ref, adopt, reuse, &it->action_programs[dir][i][k], reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int iface_acquire_programs(Daemon *d, Iface *it, const NlFilter *observed, size_t n_observed,
                           Error *reterr) {
        int r;

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                it->programs[dir] = calloc(it->doc->n_filters[dir] + 1, sizeof(Program *));
                it->action_programs[dir] = calloc(it->doc->n_filters[dir] + 1, sizeof(Program **));
                if (!it->programs[dir] || !it->action_programs[dir]) {
                        iface_release_programs(d, it);
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                }
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                        const FilterSpec *f = &it->doc->filters[dir][i];
                        ProgramRef ref = program_ref(f, -1);
                        const NlFilter *have = NULL;
                        char name[256];

                        NlTcxLink link;
                        uint32_t adopt = 0, reuse = 0;

                        filter_kernel_name(f, name);
                        if (filter_uses_tcx(d, f)) {
                                if (it->ifindex > 0 &&
                                    iface_tcx_find(d, it->doc->netns, it->ifindex, dir, f, &link) >= 0) {
                                        reuse = link.prog_id;
                                        if (f->tag[0] && link.prog_id == f->prog_id)
                                                adopt = link.prog_id; /* registry_acquire() checks the tag */
                                }
                        } else {
                                have = find_ours(observed, n_observed, filter_parent(f, dir),
                                                 (uint16_t) f->priority, name);
                                if (have)
                                        reuse = have->prog_id;
                                if (have && f->tag[0] && streq(have->tag, f->tag) &&
                                    have->prog_id == f->prog_id)
                                        adopt = have->prog_id;
                        }
                        /* Adopt only the very program clsd attached last (id and tag), never a look-alike;
                         * a new program takes over the maps of the one it replaces. */
                        r = registry_acquire(d, &ref, adopt, reuse, &it->programs[dir][i], reterr);
                        if (r >= 0)
                                r = acquire_actions(d, it, dir, i, have, reterr);
                        if (r < 0) {
                                iface_release_programs(d, it);
                                return r;
                        }
                }
        }
        return 0;
}

/* The cls_bpf filters the document wants (its tcx ones are iface_tcx_apply()'s). */
static int build_desired(const Daemon *d, const Iface *it, DesiredFilter **ret, size_t *ret_n) {
        size_t n = it->doc->n_filters[DIRECTION_INGRESS] + it->doc->n_filters[DIRECTION_EGRESS], k = 0;
        DesiredFilter *v = calloc(n + 1, sizeof(DesiredFilter));

        if (!v)
                return -ENOMEM;
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                        const FilterSpec *f = &it->doc->filters[dir][i];
                        const Program *p = it->programs[dir][i];
                        if (filter_uses_tcx(d, f))
                                continue;
                        DesiredFilter *w = &v[k++];
                        w->hook = hook_of(dir);
                        w->parent = filter_parent(f, dir);
                        w->pref = (uint16_t) f->priority;
                        filter_kernel_name(f, w->name);
                        snprintf(w->tag, sizeof(w->tag), "%s", program_tag(p));
                        w->prog_id = program_id(p);
                        w->direct_action = f->direct_action;
                        w->classid = f->has_classid ? f->classid : 0;
                        w->prog_fd = program_fd(p);
                        w->n_actions = f->n_actions;
                        for (size_t a = 0; a < f->n_actions; a++) {
                                const Program *ap = it->action_programs[dir][i][a];
                                action_kernel_name(f, a, w->actions[a].name);
                                snprintf(w->actions[a].tag, sizeof(w->actions[a].tag), "%s",
                                         program_tag(ap));
                                w->actions[a].prog_id = program_id(ap);
                                w->actions[a].prog_fd = program_fd(ap);
                        }
                }
        *ret = v;
        *ret_n = k;
        return 0;
}

static int conflict_error(const Iface *it, const NlFilter *have, Error *reterr) {
        return error_set(reterr, EBUSY, "priority_taken",
                         "%s: %s priority %u is held by a foreign filter (%s%s%s, handle 0x%" PRIx32
                         "); clsd never changes filters it does not own",
                         it->doc->ifname, have->hook == NL_HOOK_INGRESS ? "ingress" : "egress", have->pref,
                         have->kind, have->name[0] ? " " : "", have->name, have->handle);
}

/* Runs the diff only, to find a conflict before anything changes. */
int iface_check_conflicts(const Daemon *d, const Iface *it, const NlFilter *observed, size_t n_observed,
                          Error *reterr) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++)
                        for (size_t k = 0; !filter_uses_tcx(d, &it->doc->filters[dir][i]) && k < n_observed;
                             k++)
                                if (observed[k].parent == filter_parent(&it->doc->filters[dir][i], dir) &&
                                    observed[k].chain == 0 &&
                                    observed[k].pref == it->doc->filters[dir][i].priority &&
                                    !observed[k].clsd_owned)
                                        return conflict_error(it, &observed[k], reterr);
        return 0;
}

void what_add(char *what, size_t size, const char *fmt, ...) {
        size_t l;
        va_list ap;

        if (!what || size == 0)
                return;
        l = strlen(what);
        if (l > 0 && l + 2 < size) {
                strcpy(what + l, "; ");
                l += 2;
        }
        va_start(ap, fmt);
        vsnprintf(what + l, size - l, fmt, ap);
        va_end(ap);
}

/* Returns how many changes it made; what says which. */
static int apply_plan(Daemon *d, Iface *it, const DesiredFilter *desired, size_t n_desired,
                      const NlFilter *observed, const Plan *plan, char *what, size_t what_size,
                      Error *reterr) {
        int r, changes = 0;

        for (size_t i = 0; i < plan->n_steps; i++) {
                const PlanStep *s = &plan->steps[i];
                if (s->action == PLAN_CONFLICT)
                        return conflict_error(it, &observed[s->observed], reterr);
        }
        bool on_clsact = false;
        for (size_t i = 0; i < n_desired; i++)
                on_clsact = on_clsact || desired[i].parent == nl_hook_parent(desired[i].hook);
        if (on_clsact) {
                /* Added exclusively: EEXIST says it is there, without a qdisc dump (which walks every
                 * interface) and without a change the kernel would report. */
                Error e = ERROR_NULL;
                r = nl_clsact_add(iface_rtnl(d, it), it->ifindex, &e);
                if (r < 0 && r != -EEXIST) {
                        if (reterr && !reterr->code)
                                *reterr = e;
                        else
                                error_done(&e);
                        return r;
                }
                error_done(&e);
                if (r >= 0) {
                        it->doc->clsact_created = true;
                        changes++;
                        what_add(what, what_size, "clsact qdisc missing");
                        log_info("%s: created clsact qdisc", it->doc->ifname);
                }
        }
        for (size_t i = 0; i < plan->n_steps; i++) {
                const PlanStep *s = &plan->steps[i];
                const char *hook = s->hook == NL_HOOK_INGRESS ? "ingress" : "egress";

                if (s->action == PLAN_ADD || s->action == PLAN_REPLACE) {
                        const DesiredFilter *w = &desired[s->desired];
                        NlActionSpec acts[NL_ACTIONS_MAX];
                        for (size_t k = 0; k < w->n_actions; k++)
                                acts[k] = (NlActionSpec){ .prog_fd = w->actions[k].prog_fd,
                                                          .name = w->actions[k].name };
                        NlBpfFilterSpec spec = {
                                .ifindex = it->ifindex,
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
                        if (replace && observed[s->observed].protocol != ETH_P_ALL) {
                                r = nl_filter_del(iface_rtnl(d, it), it->ifindex, s->parent, s->pref,
                                                  observed[s->observed].protocol, s->handle, reterr);
                                if (r < 0 && r != -ENOENT)
                                        return r;
                                replace = false;
                        }
                        r = nl_bpf_filter_set(iface_rtnl(d, it), &spec, replace, reterr);
                        if (r < 0)
                                return r;
                        changes++;
                        what_add(what, what_size, "%s pref %u %s", hook, w->pref,
                                 s->action == PLAN_ADD ? "missing" : "not as declared");
                        log_info("%s: %s %s pref %u: %s (tag %s)", it->doc->ifname,
                                 s->action == PLAN_ADD ? "added" : "replaced", hook, w->pref, w->name,
                                 w->tag);
                } else if (s->action == PLAN_REMOVE) {
                        const NlFilter *o = &observed[s->observed];
                        r = nl_filter_del(iface_rtnl(d, it), it->ifindex, s->parent, s->pref, o->protocol,
                                          o->handle, reterr);
                        if (r < 0 && r != -ENOENT)
                                return r;
                        changes++;
                        what_add(what, what_size, "%s pref %u not declared", hook, s->pref);
                        log_info("%s: removed %s pref %u (%s)", it->doc->ifname, hook, s->pref,
                                 observed[s->observed].name);
                }
        }
        return changes;
}

/* The kernel is the source of truth: after applying, read back and check each filter. */
static int verify(Daemon *d, Iface *it, const DesiredFilter *desired, size_t n_desired, Error *reterr) {
        _cleanup_free_ NlFilter *observed = NULL;
        size_t n_observed = 0;
        int r;

        r = nl_filter_dump(iface_rtnl(d, it), it->ifindex, &observed, &n_observed, reterr);
        if (r < 0)
                return r;
        for (size_t k = 0; k < n_desired; k++) {
                const NlFilter *have =
                        find_ours(observed, n_observed, desired[k].parent, desired[k].pref, desired[k].name);
                bool actions_ok = have && have->n_actions == desired[k].n_actions;
                for (size_t j = 0; actions_ok && j < desired[k].n_actions; j++)
                        actions_ok = have->actions[j].prog_id == desired[k].actions[j].prog_id;
                if (!have || have->prog_id != desired[k].prog_id || !actions_ok)
                        return error_set(reterr, EIO, "kernel_error",
                                         "%s: %s pref %u is not attached as requested after applying",
                                         it->doc->ifname,
                                         desired[k].hook == NL_HOOK_INGRESS ? "ingress" : "egress",
                                         desired[k].pref);
        }
        return 0;
}

int iface_apply(Daemon *d, Iface *it, char *what, size_t what_size, Error *reterr) {
        _cleanup_free_ NlFilter *observed = NULL;
        _cleanup_free_ DesiredFilter *desired = NULL;
        size_t n_observed = 0, n_desired = 0;
        Plan plan = { 0 };
        int r, changes;

        d->counters.reconciles++; /* a PUT's, an event's, a resync's: every pass that diffs and applies */
        r = nl_filter_dump(iface_rtnl(d, it), it->ifindex, &observed, &n_observed, reterr);
        if (r < 0)
                return r;
        r = build_desired(d, it, &desired, &n_desired);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "out of memory");
        r = reconcile_diff(desired, n_desired, observed, n_observed, &plan);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "out of memory");
        if (what && what_size > 0)
                what[0] = 0;
        changes = apply_plan(d, it, desired, n_desired, observed, &plan, what, what_size, reterr);
        plan_done(&plan);
        if (changes < 0)
                return changes;
        r = verify(d, it, desired, n_desired, reterr);
        if (r < 0)
                return r;
        r = iface_tcx_apply(d, it, what, what_size, reterr);
        if (r < 0)
                return r;
        changes += r;
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                        FilterSpec *f = &it->doc->filters[dir][i];
                        snprintf(f->tag, NL_TAG_STRING_MAX, "%s", program_tag(it->programs[dir][i]));
                        f->prog_id = program_id(it->programs[dir][i]);
                        for (size_t k = 0; k < f->n_actions; k++) {
                                const Program *ap = it->action_programs[dir][i][k];
                                snprintf(f->actions[k].tag, NL_TAG_STRING_MAX, "%s", program_tag(ap));
                                f->actions[k].prog_id = program_id(ap);
                        }
                }
        return changes;
}

int iface_remove_all(Daemon *d, Iface *it, Error *reterr) {
        _cleanup_free_ NlFilter *observed = NULL;
        size_t n_observed = 0;
        Plan plan = { 0 };
        int r;

        r = nl_filter_dump(iface_rtnl(d, it), it->ifindex, &observed, &n_observed, reterr);
        if (r < 0)
                return r;
        r = reconcile_diff(NULL, 0, observed, n_observed, &plan);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "out of memory");
        r = apply_plan(d, it, NULL, 0, observed, &plan, NULL, 0, reterr);
        plan_done(&plan);
        if (r < 0)
                return r;
        r = iface_tcx_remove_all(d, it->doc->netns, it->ifindex, it->doc->ifname, reterr);
        if (r < 0)
                return r;
        if (!it->doc->clsact_created)
                return 0;
        return clsact_remove_if_unused(iface_rtnl(d, it), it->ifindex, it->doc->ifname, reterr);
}

int clsact_remove_if_unused(NlSocket *rtnl, int ifindex, const char *ifname, Error *reterr) {
        _cleanup_free_ NlFilter *left = NULL;
        size_t n_left = 0, on_clsact = 0;
        int r;

        r = nl_filter_dump(rtnl, ifindex, &left, &n_left, reterr);
        if (r < 0)
                return r;
        /* Filters under a classful root qdisc do not use clsact. */
        for (size_t i = 0; i < n_left; i++)
                on_clsact += left[i].parent == nl_hook_parent(left[i].hook);
        if (on_clsact > 0) {
                log_info("%s: keeping clsact qdisc, %zu other filter(s) still use it", ifname, on_clsact);
                return 0;
        }
        r = nl_clsact_del(rtnl, ifindex, reterr);
        if (r < 0 && r != -ENOENT && r != -EINVAL)
                return r;
        log_info("%s: removed the clsact qdisc clsd had created", ifname);
        return 0;
}

static void iface_set_failed(Iface *it, const Error *e) {
        error_done(&it->error);
        it->state = IFACE_FAILED;
        error_set(&it->error, e->error, e->code, "%s", strna(e->message));
}

/* Full reconcile of an interface from its document: used at start, on link events and on SIGHUP. */
int iface_reconcile(Daemon *d, Iface *it, Error *reterr) {
        _cleanup_free_ NlFilter *observed = NULL;
        char what[sizeof(it->last_repair_what)];
        size_t n_observed = 0;
        Error e = ERROR_NULL;
        NlLink link;
        int r;

        NlSocket *rtnl;
        r = daemon_link_by_name(d, it->doc->netns, it->doc->ifname, &rtnl, &link, &e);
        if (r == -ENODEV) {
                it->state = IFACE_PENDING;
                it->ifindex = 0;
                error_done(&it->error);
                return 0;
        }
        if (r >= 0) {
                it->ifindex = link.ifindex;
                r = nl_filter_dump(rtnl, it->ifindex, &observed, &n_observed, &e);
        }
        if (r >= 0 && !it->programs[DIRECTION_INGRESS])
                r = iface_acquire_programs(d, it, observed, n_observed, &e);
        if (r >= 0)
                r = iface_apply(d, it, what, sizeof(what), &e);
        if (r > 0 && it->state == IFACE_CONFIGURED) {
                /* The kernel had drifted from a document it matched: that is a repair. */
                it->repairs++;
                d->counters.repairs++;
                it->last_repair_usec = now(CLOCK_REALTIME);
                snprintf(it->last_repair_what, sizeof(it->last_repair_what), "%s", what);
                log_notice("%s: repaired (%u so far): %s", it->doc->ifname, it->repairs, what);
        }
        if (r < 0) {
                log_error("%s: reconcile failed: %s", it->doc->ifname, strna(e.message));
                daemon_count_error(d, e.code);
                iface_set_failed(it, &e);
                if (reterr && !reterr->code)
                        *reterr = e;
                else
                        error_done(&e);
                return r;
        }
        it->state = IFACE_CONFIGURED;
        error_done(&it->error);
        return 0;
}
