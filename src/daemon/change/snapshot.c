/* snapshot.c: what clsd's filters on one interface were before a change, with a reference to each
 * program, so that a change that fails half-way can put exactly that back. */
#include <linux/if_ether.h>
#include <string.h>

#include "clsact.h"
#include "log.h"
#include "snapshot.h"
#include "nl-bpf.h"
#include "nl-map.h"

void snapshot_done(Snapshot *s) {
        for (size_t i = 0; i < s->n_filters; i++) {
                nl_program_free(s->programs[i]);
                for (size_t k = 0; s->action_programs && k < NL_ACTIONS_MAX; k++)
                        nl_program_free(s->action_programs[i * NL_ACTIONS_MAX + k]);
        }
        free(s->action_programs);
        free(s->programs);
        free(s->filters);
        *s = (Snapshot){ 0 };
}

int snapshot_take(NlSocket *rtnl, int ifindex, const NlFilter *all, size_t n_all, Snapshot *ret,
                  Error *reterr) {
        Snapshot s = { .ifindex = ifindex };
        int r = 0;

        s.rtnl = rtnl;
        /* The change itself tells whether it created clsact (its exclusive add succeeded): no qdisc
         * dump, which walks every interface of the namespace. */
        s.had_clsact = true;
        s.filters = calloc(n_all + 1, sizeof(NlFilter));
        s.programs = calloc(n_all + 1, sizeof(NlProgram *));
        s.action_programs = calloc((n_all + 1) * NL_ACTIONS_MAX, sizeof(NlProgram *));
        if (!s.filters || !s.programs || !s.action_programs) {
                snapshot_done(&s);
                return error_oom(reterr);
        }
        for (size_t i = 0; i < n_all; i++) {
                if (!all[i].clsd_owned)
                        continue;
                /* Hold the program: once replaced, nothing else may keep it alive. */
                r = nl_program_open_id(all[i].prog_id, &s.programs[s.n_filters], reterr);
                for (size_t k = 0; r >= 0 && k < all[i].n_actions; k++)
                        if (streq(all[i].actions[k].kind, "bpf"))
                                r = nl_program_open_id(all[i].actions[k].prog_id,
                                                       &s.action_programs[s.n_filters * NL_ACTIONS_MAX + k],
                                                       reterr);
                s.filters[s.n_filters++] = all[i];
                if (r < 0) {
                        snapshot_done(&s);
                        return r;
                }
        }
        *ret = s;
        return 0;
}

static const NlFilter *find_at(const NlFilter *v, size_t n, const NlFilter *f) {
        for (size_t i = 0; i < n; i++)
                if (v[i].clsd_owned && v[i].parent == f->parent && v[i].pref == f->pref &&
                    v[i].handle == f->handle && v[i].protocol == f->protocol)
                        return &v[i];
        return NULL;
}

int snapshot_restore(const Snapshot *s, const char *ifname, Error *reterr) {
        _cleanup_free_ NlFilter *now = NULL;
        size_t n_now = 0;
        int r;

        r = nl_filter_dump(s->rtnl, s->ifindex, &now, &n_now, reterr);
        if (r < 0)
                return r;
        /* What this change added goes. */
        for (size_t i = 0; i < n_now; i++)
                if (now[i].clsd_owned && !find_at(s->filters, s->n_filters, &now[i])) {
                        r = nl_filter_del(s->rtnl, s->ifindex, now[i].parent, now[i].pref, now[i].protocol,
                                          now[i].handle, reterr);
                        if (r < 0 && r != -ENOENT)
                                return r;
                }
        /* What it replaced or removed comes back, with the very program that was there. */
        for (size_t i = 0; i < s->n_filters; i++) {
                const NlFilter *was = &s->filters[i], *is = find_at(now, n_now, was);
                NlProgram *const *acts = &s->action_programs[i * NL_ACTIONS_MAX];
                NlActionSpec actions[NL_ACTIONS_MAX];
                size_t n_actions = 0;
                bool same = is && is->prog_id == was->prog_id && streq(is->name, was->name) &&
                            is->flags == was->flags && is->classid == was->classid &&
                            is->n_actions == was->n_actions;

                /* Its act_bpf actions come back with it (an action of another kind is not ours to rebuild).
                 */
                for (size_t k = 0; k < was->n_actions; k++) {
                        if (!acts[k])
                                continue;
                        actions[n_actions++] = (NlActionSpec){ .prog_fd = nl_program_fd(acts[k]),
                                                               .name = was->actions[k].name };
                        same = same && is->actions[k].prog_id == was->actions[k].prog_id;
                }
                NlBpfFilterSpec spec = {
                        .ifindex = s->ifindex,
                        .hook = was->hook,
                        .parent = was->parent,
                        .pref = was->pref,
                        .handle = was->handle,
                        .prog_fd = nl_program_fd(s->programs[i]),
                        .name = was->name,
                        .direct_action = was->direct_action,
                        .classid = was->classid,
                        .actions = actions,
                        .n_actions = n_actions,
                };
                if (same)
                        continue;
                if (was->protocol != ETH_P_ALL)
                        continue; /* clsd only makes ETH_P_ALL filters; not ours to rebuild */
                r = nl_bpf_filter_set(s->rtnl, &spec, is != NULL, reterr);
                if (r < 0)
                        return r;
        }
        if (s->had_clsact)
                return 0;
        return clsact_remove_if_unused(s->rtnl, s->ifindex, ifname, reterr);
}
