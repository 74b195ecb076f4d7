/* tc-msg.c: building and parsing tc messages (clsact, cls_bpf filters): pure, no I/O, so the tests can
 * feed it bytes captured from the kernel. */
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/gen_stats.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_bpf.h>
#include <stdio.h>
#include <string.h>

#include "nl-internal.h"

uint32_t nl_hook_parent(NlHook h) {
        return TC_H_MAKE(TC_H_CLSACT, h == NL_HOOK_INGRESS ? TC_H_MIN_INGRESS : TC_H_MIN_EGRESS);
}

static struct nlmsghdr *put_tcmsg(void *buf, uint16_t type, uint16_t flags, uint32_t seq, int ifindex,
                                  uint32_t parent, uint32_t handle, uint32_t info) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        struct tcmsg *tcm;

        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        nlh->nlmsg_seq = seq;
        tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
        tcm->tcm_family = AF_UNSPEC;
        tcm->tcm_ifindex = ifindex;
        tcm->tcm_parent = parent;
        tcm->tcm_handle = handle;
        tcm->tcm_info = info;
        return nlh;
}

struct nlmsghdr *nl_msg_clsact(void *buf, int ifindex, bool add, uint32_t seq) {
        struct nlmsghdr *nlh =
                put_tcmsg(buf, add ? RTM_NEWQDISC : RTM_DELQDISC, add ? NLM_F_CREATE | NLM_F_EXCL : 0, seq,
                          ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0), 0);
        mnl_attr_put_strz(nlh, TCA_KIND, "clsact");
        return nlh;
}

struct nlmsghdr *nl_msg_bpf_filter(void *buf, const NlBpfFilterSpec *f, bool replace, uint32_t seq) {
        /* All protocols (ETH_P_ALL); one filter per pref, at handle f->handle. */
        struct nlmsghdr *nlh =
                put_tcmsg(buf, RTM_NEWTFILTER, NLM_F_CREATE | (replace ? NLM_F_REPLACE : NLM_F_EXCL), seq,
                          f->ifindex, f->parent ? f->parent : nl_hook_parent(f->hook), f->handle,
                          TC_H_MAKE((uint32_t) f->pref << 16, htons(ETH_P_ALL)));
        struct nlattr *opts;

        mnl_attr_put_strz(nlh, TCA_KIND, "bpf");
        opts = mnl_attr_nest_start(nlh, TCA_OPTIONS);
        mnl_attr_put_u32(nlh, TCA_BPF_FD, (uint32_t) f->prog_fd);
        mnl_attr_put_strz(nlh, TCA_BPF_NAME, f->name);
        mnl_attr_put_u32(nlh, TCA_BPF_FLAGS, f->direct_action ? TCA_BPF_FLAG_ACT_DIRECT : 0);
        if (f->classid)
                mnl_attr_put_u32(nlh, TCA_BPF_CLASSID, f->classid);
        if (f->n_actions > 0) {
                /* Each action nested under its place in the list (1, 2, …), as tc sends them; index 0
                 * lets the kernel number it, and the filter binds it, so it goes with the filter. */
                struct nlattr *acts = mnl_attr_nest_start(nlh, TCA_BPF_ACT);
                for (size_t i = 0; i < f->n_actions; i++) {
                        struct tc_act_bpf parms = { .action = TC_ACT_PIPE };
                        struct nlattr *act = mnl_attr_nest_start(nlh, (uint16_t) (i + 1)), *aopts;
                        mnl_attr_put_strz(nlh, TCA_ACT_KIND, "bpf");
                        aopts = mnl_attr_nest_start(nlh, TCA_ACT_OPTIONS);
                        mnl_attr_put(nlh, TCA_ACT_BPF_PARMS, sizeof(parms), &parms);
                        mnl_attr_put_u32(nlh, TCA_ACT_BPF_FD, (uint32_t) f->actions[i].prog_fd);
                        mnl_attr_put_strz(nlh, TCA_ACT_BPF_NAME, f->actions[i].name);
                        mnl_attr_nest_end(nlh, aopts);
                        mnl_attr_nest_end(nlh, act);
                }
                mnl_attr_nest_end(nlh, acts);
        }
        mnl_attr_nest_end(nlh, opts);
        return nlh;
}

struct nlmsghdr *nl_msg_filter_del(void *buf, int ifindex, uint32_t parent, uint16_t pref, uint16_t protocol,
                                   uint32_t handle, uint32_t seq) {
        /* Protocol 0 and handle 0 would remove every filter at the pref, foreign ones included. */
        struct nlmsghdr *nlh = put_tcmsg(buf, RTM_DELTFILTER, 0, seq, ifindex, parent, handle,
                                         TC_H_MAKE((uint32_t) pref << 16, htons(protocol)));
        mnl_attr_put_strz(nlh, TCA_KIND, "bpf");
        return nlh;
}

struct nlmsghdr *nl_msg_filter_dump(void *buf, int ifindex, uint32_t parent, uint32_t seq) {
        return put_tcmsg(buf, RTM_GETTFILTER, NLM_F_DUMP, seq, ifindex, parent, 0, 0);
}

static void tag_format(const struct nlattr *a, char tag[NL_TAG_STRING_MAX]) {
        const uint8_t *t = mnl_attr_get_payload(a);
        for (int i = 0; i < 8; i++)
                snprintf(tag + 2 * i, 3, "%02x", t[i]);
}

static void parse_act_bpf_options(const struct nlattr *opts, NlAction *act) {
        const struct nlattr *a;

        mnl_attr_for_each_nested (a, opts) {
                switch (mnl_attr_get_type(a)) {
                case TCA_ACT_BPF_PARMS:
                        if (mnl_attr_get_payload_len(a) >= sizeof(struct tc_act_bpf)) {
                                struct tc_act_bpf parms;
                                memcpy(&parms, mnl_attr_get_payload(a), sizeof(parms));
                                act->index = parms.index;
                                act->control = parms.action;
                        }
                        break;
                case TCA_ACT_BPF_NAME:
                        if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
                                snprintf(act->name, sizeof(act->name), "%s", mnl_attr_get_str(a));
                        break;
                case TCA_ACT_BPF_ID:
                        if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                                act->prog_id = mnl_attr_get_u32(a);
                        break;
                case TCA_ACT_BPF_TAG:
                        if (mnl_attr_get_payload_len(a) == 8)
                                tag_format(a, act->tag);
                        break;
                }
        }
}

static void parse_act_stats(const struct nlattr *stats, NlAction *act) {
        const struct nlattr *a;

        mnl_attr_for_each_nested (a, stats) {
                switch (mnl_attr_get_type(a)) {
                case TCA_STATS_BASIC:
                        if (mnl_attr_get_payload_len(a) >= sizeof(struct gnet_stats_basic)) {
                                struct gnet_stats_basic b;
                                memcpy(&b, mnl_attr_get_payload(a), sizeof(b));
                                act->bytes = b.bytes;
                                if (act->packets < b.packets)
                                        act->packets = b.packets;
                        }
                        break;
                case TCA_STATS_PKT64: /* the 64-bit packet count, where the kernel sends it */
                        if (mnl_attr_validate(a, MNL_TYPE_U64) >= 0)
                                act->packets = mnl_attr_get_u64(a);
                        break;
                case TCA_STATS_QUEUE:
                        if (mnl_attr_get_payload_len(a) >= sizeof(struct gnet_stats_queue)) {
                                struct gnet_stats_queue q;
                                memcpy(&q, mnl_attr_get_payload(a), sizeof(q));
                                act->drops = q.drops;
                        }
                        break;
                }
        }
}

/* TCA_BPF_ACT: the actions nested under their place in the list (1, 2, …). */
static void parse_actions(const struct nlattr *list, NlFilter *f) {
        const struct nlattr *a, *x;

        mnl_attr_for_each_nested (a, list) {
                NlAction act = { 0 };
                if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
                        continue;
                if (f->n_actions == NL_ACTIONS_MAX) {
                        f->actions_truncated = true;
                        return;
                }
                mnl_attr_for_each_nested (x, a) {
                        switch (mnl_attr_get_type(x)) {
                        case TCA_ACT_KIND:
                                if (mnl_attr_validate(x, MNL_TYPE_NUL_STRING) >= 0)
                                        snprintf(act.kind, sizeof(act.kind), "%s", mnl_attr_get_str(x));
                                break;
                        case TCA_ACT_INDEX:
                                if (mnl_attr_validate(x, MNL_TYPE_U32) >= 0)
                                        act.index = mnl_attr_get_u32(x);
                                break;
                        case TCA_ACT_STATS:
                                if (mnl_attr_validate(x, MNL_TYPE_NESTED) >= 0)
                                        parse_act_stats(x, &act);
                                break;
                        }
                }
                /* The options are the kind's own: read them once the kind is known. */
                mnl_attr_for_each_nested (x, a)
                        if (mnl_attr_get_type(x) == TCA_ACT_OPTIONS && streq(act.kind, "bpf") &&
                            mnl_attr_validate(x, MNL_TYPE_NESTED) >= 0)
                                parse_act_bpf_options(x, &act);
                act.clsd_owned = startswith(act.name, NL_FILTER_NAME_PREFIX) != NULL;
                f->actions[f->n_actions++] = act;
        }
}

static void parse_bpf_options(const struct nlattr *opts, NlFilter *f) {
        const struct nlattr *a;

        mnl_attr_for_each_nested (a, opts) {
                switch (mnl_attr_get_type(a)) {
                case TCA_BPF_NAME:
                        if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
                                snprintf(f->name, sizeof(f->name), "%s", mnl_attr_get_str(a));
                        break;
                case TCA_BPF_ID:
                        if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                                f->prog_id = mnl_attr_get_u32(a);
                        break;
                case TCA_BPF_TAG:
                        if (mnl_attr_get_payload_len(a) == 8)
                                tag_format(a, f->tag);
                        break;
                case TCA_BPF_FLAGS:
                        if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                                f->flags = mnl_attr_get_u32(a);
                        break;
                case TCA_BPF_CLASSID:
                        if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                                f->classid = mnl_attr_get_u32(a);
                        break;
                case TCA_BPF_ACT:
                        if (mnl_attr_validate(a, MNL_TYPE_NESTED) >= 0)
                                parse_actions(a, f);
                        break;
                }
        }
        f->direct_action = f->flags & TCA_BPF_FLAG_ACT_DIRECT;
        f->clsd_owned = startswith(f->name, NL_FILTER_NAME_PREFIX) != NULL;
}

int nl_filter_parse(const struct nlmsghdr *nlh, NlFilter *ret) {
        const struct tcmsg *tcm;
        const struct nlattr *a, *opts = NULL;
        NlFilter f = { 0 };

        if (nlh->nlmsg_type != RTM_NEWTFILTER && nlh->nlmsg_type != RTM_DELTFILTER)
                return -ENOMSG;
        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*tcm))
                return -EBADMSG;
        tcm = mnl_nlmsg_get_payload(nlh);
        f.parent = tcm->tcm_parent;
        f.handle = tcm->tcm_handle;
        f.pref = (uint16_t) (TC_H_MAJ(tcm->tcm_info) >> 16);
        f.protocol = ntohs((uint16_t) TC_H_MIN(tcm->tcm_info));
        /* A classful qdisc's filters classify on egress. */
        f.hook = f.parent == nl_hook_parent(NL_HOOK_INGRESS) ? NL_HOOK_INGRESS : NL_HOOK_EGRESS;
        mnl_attr_for_each (a, nlh, sizeof(*tcm)) {
                switch (mnl_attr_get_type(a)) {
                case TCA_KIND:
                        if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
                                snprintf(f.kind, sizeof(f.kind), "%s", mnl_attr_get_str(a));
                        break;
                case TCA_OPTIONS:
                        if (mnl_attr_validate(a, MNL_TYPE_NESTED) >= 0)
                                opts = a;
                        break;
                case TCA_CHAIN:
                        if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                                f.chain = mnl_attr_get_u32(a);
                        break;
                }
        }
        if (opts && streq(f.kind, "bpf"))
                parse_bpf_options(opts, &f);
        *ret = f;
        return 0;
}

int nl_tc_event_parse(const struct nlmsghdr *nlh, int *ret_ifindex) {
        const struct tcmsg *tcm;

        if (nlh->nlmsg_type == RTM_NEWACTION || nlh->nlmsg_type == RTM_DELACTION) {
                if (ret_ifindex)
                        *ret_ifindex = 0;
                return 0;
        }
        if (nlh->nlmsg_type != RTM_NEWTFILTER && nlh->nlmsg_type != RTM_DELTFILTER &&
            nlh->nlmsg_type != RTM_NEWQDISC && nlh->nlmsg_type != RTM_DELQDISC)
                return -ENOMSG;
        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*tcm))
                return -EBADMSG;
        tcm = mnl_nlmsg_get_payload(nlh);
        if (ret_ifindex)
                *ret_ifindex = tcm->tcm_ifindex;
        return 0;
}
