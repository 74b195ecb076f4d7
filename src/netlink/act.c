/* act.c: probing for act_bpf, the tc action that runs eBPF. Kernels built without
 * CONFIG_NET_ACT_BPF have no such action kind; clsd asks once at start. */
#include <linux/pkt_cls.h>
#include <linux/rtnetlink.h>
#include <string.h>

#include "log.h"
#include "nl-internal.h"

/* An RTM_NEWACTION of kind "bpf" with empty options: act_bpf, where it exists, refuses it (EINVAL,
 * no parameters) without creating anything; without act_bpf the kind is unknown (ENOENT). */
struct nlmsghdr *nl_msg_act_bpf_probe(void *buf, uint32_t seq) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        struct nlattr *tab, *act, *opts;
        struct tcamsg *t;

        nlh->nlmsg_type = RTM_NEWACTION;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
        nlh->nlmsg_seq = seq;
        t = mnl_nlmsg_put_extra_header(nlh, sizeof(*t));
        t->tca_family = AF_UNSPEC;
        tab = mnl_attr_nest_start(nlh, TCA_ACT_TAB);
        act = mnl_attr_nest_start(nlh, 1); /* the first action of the list */
        mnl_attr_put_strz(nlh, TCA_ACT_KIND, "bpf");
        opts = mnl_attr_nest_start(nlh, TCA_ACT_OPTIONS);
        mnl_attr_nest_end(nlh, opts);
        mnl_attr_nest_end(nlh, act);
        mnl_attr_nest_end(nlh, tab);
        return nlh;
}

int nl_act_bpf_probe(NlSocket *s, bool *ret_available) {
        char buf[NL_MSG_BUFFER_SIZE];
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        r = nl_request(s, nl_msg_act_bpf_probe(buf, nl_socket_next_seq(s)), NULL, NULL, "probe act_bpf", &e);
        log_debug("act_bpf probe: %s", r >= 0 ? "accepted" : strna(e.message));
        /* ENOENT (and EOPNOTSUPP) say the kind is unknown; any other answer came from act_bpf itself. */
        *ret_available = !(r == -ENOENT || r == -EOPNOTSUPP);
        return 0;
}
