/* cls-counters.c: the cls_bpf kind's counters (AttachKind.counters): act_bpf's per-packet counts, which
 * no event reports, read from the kernel at each request for the filters clsd's view says are attached. */
#include "attach-cls.h"

/* act_bpf's counters: read from a dump of the hooks the interface's filters use, for the filters whose
 * classifier is the one clsd's view says is attached; nothing of clsd's view changes. */
int cls_counters(const AttachContext *c, FilterStatus *status, Error *reterr) {
        _cleanup_free_ NlFilter *all = NULL;
        unsigned what = 0;
        size_t n = 0;
        int r;

        for (size_t i = 0; i < c->it->n_filters; i++) {
                const Filter *f = &c->it->filters[i];
                if (f->kind == ATTACH_KIND_CLS && f->spec->n_actions > 0)
                        what |= f->spec->has_parent           ? NL_DUMP_ROOT
                                : f->dir == DIRECTION_INGRESS ? NL_DUMP_INGRESS
                                                              : NL_DUMP_EGRESS;
        }
        if (what == 0)
                return 0;
        r = nl_filter_dump_some(c->rtnl, c->it->ifindex, what, &all, &n, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->it->n_filters; i++) {
                const Filter *f = &c->it->filters[i];
                FilterObserved *fo = &status[i].observed;
                char name[256];
                const NlFilter *o;

                if (f->kind != ATTACH_KIND_CLS || f->spec->n_actions == 0)
                        continue;
                filter_kernel_name(f->spec, name);
                o = find_ours(all, n, filter_parent(f->spec, f->dir), (uint16_t) f->spec->priority, name);
                if (!o || o->handle != fo->handle || o->prog_id != fo->prog_id)
                        continue;
                for (size_t k = 0; k < f->spec->n_actions && k < o->n_actions; k++)
                        if (o->actions[k].index == fo->actions[k].index &&
                            o->actions[k].prog_id == fo->actions[k].prog_id) {
                                fo->actions[k].packets = o->actions[k].packets;
                                fo->actions[k].bytes = o->actions[k].bytes;
                                fo->actions[k].drops = o->actions[k].drops;
                        }
        }
        return 0;
}
