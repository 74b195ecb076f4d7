/* capture-nl.c: writes the kernel's raw rtnetlink answers to files, to refresh tests/data/.
 * Usage: capture-nl IFNAME OUTDIR   (run where IFNAME has clsd's and foreign cls_bpf filters)
 *        capture-nl IFNAME OUTDIR FILE   (only IFNAME's ingress filter dump, into OUTDIR/FILE) */
#include <libmnl/libmnl.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int capture(struct mnl_socket *nl, struct nlmsghdr *nlh, const char *path) {
        char buf[32768];
        FILE *f = fopen(path, "we");
        int done = 0;

        if (!f || mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -1;
        while (!done) {
                int n = (int) mnl_socket_recvfrom(nl, buf, sizeof(buf));
                if (n <= 0)
                        break;
                fwrite(buf, 1, (size_t) n, f);
                for (struct nlmsghdr *h = (void *) buf; mnl_nlmsg_ok(h, n); h = mnl_nlmsg_next(h, &n))
                        if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
                                done = 1;
        }
        fclose(f);
        return 0;
}

int main(int argc, char **argv) {
        char req[8192], path[512];
        struct mnl_socket *nl;
        struct nlmsghdr *nlh;
        struct tcmsg *tcm;
        int one = 1;

        if (argc != 3 && argc != 4)
                return 2;
        nl = mnl_socket_open(NETLINK_ROUTE);
        mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof(one));
        mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof(one));
        mnl_socket_setsockopt(nl, NETLINK_GET_STRICT_CHK, &one, sizeof(one));
        mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID);

        /* the ingress filter dump */
        nlh = mnl_nlmsg_put_header(req);
        nlh->nlmsg_type = RTM_GETTFILTER;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        nlh->nlmsg_seq = 1;
        tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
        tcm->tcm_ifindex = (int) if_nametoindex(argv[1]);
        tcm->tcm_parent = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS);
        snprintf(path, sizeof(path), "%s/%s", argv[2], argc == 4 ? argv[3] : "filter-dump-ingress.bin");
        capture(nl, nlh, path);
        if (argc == 4) {
                mnl_socket_close(nl);
                return 0;
        }

        /* one link */
        nlh = mnl_nlmsg_put_header(req);
        nlh->nlmsg_type = RTM_GETLINK;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        nlh->nlmsg_seq = 2;
        mnl_nlmsg_put_extra_header(nlh, sizeof(struct ifinfomsg));
        mnl_attr_put_strz(nlh, IFLA_IFNAME, argv[1]);
        snprintf(path, sizeof(path), "%s/link-get.bin", argv[2]);
        capture(nl, nlh, path);

        /* an error with an extended ack: a filter under a clsact qdisc that lo does not have */
        nlh = mnl_nlmsg_put_header(req);
        nlh->nlmsg_type = RTM_NEWTFILTER;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        nlh->nlmsg_seq = 3;
        tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
        tcm->tcm_ifindex = (int) if_nametoindex("lo");
        tcm->tcm_parent = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS);
        tcm->tcm_handle = 1;
        tcm->tcm_info = TC_H_MAKE(300u << 16, htons(0x0003));
        mnl_attr_put_strz(nlh, TCA_KIND, "bpf");
        struct nlattr *o = mnl_attr_nest_start(nlh, TCA_OPTIONS);
        mnl_attr_put_u32(nlh, TCA_BPF_FLAGS, TCA_BPF_FLAG_ACT_DIRECT);
        mnl_attr_nest_end(nlh, o);
        snprintf(path, sizeof(path), "%s/filter-add-error.bin", argv[2]);
        capture(nl, nlh, path);
        /* the kernel's answer to an act_bpf probe (RTM_NEWACTION, kind "bpf", empty options) */
        nlh = mnl_nlmsg_put_header(req);
        nlh->nlmsg_type = RTM_NEWACTION;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        nlh->nlmsg_seq = 4;
        mnl_nlmsg_put_extra_header(nlh, sizeof(struct tcamsg));
        struct nlattr *tab = mnl_attr_nest_start(nlh, TCA_ACT_TAB);
        struct nlattr *act = mnl_attr_nest_start(nlh, 1);
        mnl_attr_put_strz(nlh, TCA_ACT_KIND, "bpf");
        struct nlattr *ao = mnl_attr_nest_start(nlh, TCA_ACT_OPTIONS);
        mnl_attr_nest_end(nlh, ao);
        mnl_attr_nest_end(nlh, act);
        mnl_attr_nest_end(nlh, tab);
        snprintf(path, sizeof(path), "%s/act-bpf-probe-reply.bin", argv[2]);
        capture(nl, nlh, path);
        mnl_socket_close(nl);
        return 0;
}
