/* clsact.c: the clsact qdisc clsd created for its filters goes when no filter uses it any more (its own
 * or another program's): what a DELETE or a rolled-back change leaves behind. */
#include "clsact.h"
#include "log.h"

int clsact_remove_unless_used(NlSocket *rtnl, int ifindex, const char *ifname, const NlFilter *left,
                              size_t n_left, Error *reterr) {
        size_t on_clsact = 0;
        int r;

        /* Filters under a classful root qdisc do not use clsact. */
        for (size_t i = 0; i < n_left; i++)
                on_clsact += left[i].parent == nl_hook_parent(left[i].hook);
        if (on_clsact > 0) {
                log_info("%s: keeping clsact qdisc, %zu other filter(s) still use it", ifname, on_clsact);
                return 0;
        }
        r = nl_clsact_del(rtnl, ifindex, reterr);
        if (r == -ENOENT || r == -EINVAL || r == -ENODEV) {
                /* gone already: taken by another program, or with its device */
                error_done(reterr);
                return 0;
        }
        if (r < 0)
                return r;
        log_info("%s: removed the clsact qdisc clsd had created", ifname);
        return 0;
}

int clsact_remove_if_unused(NlSocket *rtnl, int ifindex, const char *ifname, Error *reterr) {
        _cleanup_free_ NlFilter *left = NULL;
        size_t n_left = 0;
        int r;

        r = nl_filter_dump(rtnl, ifindex, &left, &n_left, reterr);
        if (r < 0)
                return r;
        return clsact_remove_unless_used(rtnl, ifindex, ifname, left, n_left, reterr);
}
