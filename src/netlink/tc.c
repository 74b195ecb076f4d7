/* tc.c: tc requests against the kernel: clsact qdiscs and cls_bpf filters, each change acked. */
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <string.h>

#include "nl-internal.h"

typedef struct QdiscScan {
        int ifindex;
        bool found;
        uint32_t root; /* handle of the root qdisc, 0 if none or noqueue */
} QdiscScan;

static int qdisc_cb(const struct nlmsghdr *nlh, void *data) {
        const struct tcmsg *tcm = mnl_nlmsg_get_payload(nlh);
        QdiscScan *q = data;
        const struct nlattr *a;

        if (nlh->nlmsg_type != RTM_NEWQDISC || mnl_nlmsg_get_payload_len(nlh) < sizeof(*tcm))
                return MNL_CB_OK;
        if (tcm->tcm_ifindex != q->ifindex)
                return MNL_CB_OK;
        if (tcm->tcm_parent == TC_H_ROOT && tcm->tcm_handle != 0) {
                q->root = tcm->tcm_handle;
                return MNL_CB_OK;
        }
        if (tcm->tcm_parent != TC_H_CLSACT)
                return MNL_CB_OK;
        mnl_attr_for_each (a, nlh, sizeof(*tcm)) {
                if (mnl_attr_get_type(a) == TCA_KIND && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0 &&
                    streq(mnl_attr_get_str(a), "clsact"))
                        q->found = true;
        }
        return MNL_CB_OK;
}

/* Dumps the qdiscs of ifindex (0: of every interface) to cb. */
static int qdisc_dump(NlSocket *s, int ifindex, mnl_cb_t cb, void *data, Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        struct nlmsghdr *nlh = nl_msg_dump(buf, RTM_GETQDISC, sizeof(struct tcmsg), s);
        struct tcmsg *tcm = mnl_nlmsg_get_payload(nlh);

        tcm->tcm_ifindex = ifindex; /* with NETLINK_GET_STRICT_CHK the kernel filters by interface */
        return nl_request(s, nlh, cb, data, "dump qdiscs", reterr);
}

static int qdisc_scan(NlSocket *s, int ifindex, QdiscScan *ret, Error *reterr) {
        QdiscScan q = { .ifindex = ifindex };
        int r;

        r = qdisc_dump(s, ifindex, qdisc_cb, &q, reterr);
        if (r < 0)
                return r;
        *ret = q;
        return 0;
}

typedef struct HookScan {
        int *v;
        size_t n, allocated;
} HookScan;

static int hook_cb(const struct nlmsghdr *nlh, void *data) {
        const struct tcmsg *tcm = mnl_nlmsg_get_payload(nlh);
        HookScan *h = data;

        if (nlh->nlmsg_type != RTM_NEWQDISC || mnl_nlmsg_get_payload_len(nlh) < sizeof(*tcm) ||
            tcm->tcm_parent != TC_H_CLSACT) /* TC_H_INGRESS is the same: clsact's and ingress' */
                return MNL_CB_OK;
        if (greedy_realloc((void **) &h->v, &h->allocated, h->n + 1, sizeof(int)) < 0) {
                errno = ENOMEM;
                return MNL_CB_ERROR;
        }
        h->v[h->n++] = tcm->tcm_ifindex;
        return MNL_CB_OK;
}

int nl_hook_qdiscs(NlSocket *s, int **ret, size_t *ret_n, Error *reterr) {
        HookScan h = { 0 };
        int r;

        r = qdisc_dump(s, 0, hook_cb, &h, reterr);
        if (r < 0) {
                free(h.v);
                return r;
        }
        *ret = h.v;
        *ret_n = h.n;
        return 0;
}

typedef struct ParentScan {
        int ifindex;
        uint32_t handle;
        bool found;
} ParentScan;

static int parent_cb(const struct nlmsghdr *nlh, void *data) {
        const struct tcmsg *tcm = mnl_nlmsg_get_payload(nlh);
        ParentScan *p = data;

        if ((nlh->nlmsg_type == RTM_NEWQDISC || nlh->nlmsg_type == RTM_NEWTCLASS) &&
            mnl_nlmsg_get_payload_len(nlh) >= sizeof(*tcm) && tcm->tcm_ifindex == p->ifindex &&
            tcm->tcm_handle == p->handle)
                p->found = true;
        return MNL_CB_OK;
}

int nl_tc_parent_exists(NlSocket *s, int ifindex, uint32_t parent, Error *reterr) {
        ParentScan p = { .ifindex = ifindex, .handle = parent };
        char buf[NL_MSG_BUFFER_SIZE];
        struct nlmsghdr *nlh;
        int r;

        if (TC_H_MIN(parent) == 0)
                r = qdisc_dump(s, ifindex, parent_cb, &p, reterr);
        else {
                nlh = nl_msg_dump(buf, RTM_GETTCLASS, sizeof(struct tcmsg), s);
                ((struct tcmsg *) mnl_nlmsg_get_payload(nlh))->tcm_ifindex = ifindex;
                r = nl_request(s, nlh, parent_cb, &p, "dump classes", reterr);
        }
        return r < 0 ? r : p.found;
}

int nl_clsact_add(NlSocket *s, int ifindex, Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        return nl_request(s, nl_msg_clsact(buf, ifindex, true, nl_socket_next_seq(s)), NULL, NULL,
                          "add clsact qdisc", reterr);
}

int nl_clsact_add_deferred(NlSocket *s, int ifindex, int *ret, Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        return nl_defer(s, nl_msg_clsact(buf, ifindex, true, nl_socket_next_seq(s)), "add clsact qdisc", ret,
                        reterr);
}

int nl_clsact_del(NlSocket *s, int ifindex, Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        return nl_request(s, nl_msg_clsact(buf, ifindex, false, nl_socket_next_seq(s)), NULL, NULL,
                          "delete clsact qdisc", reterr);
}

typedef struct FilterList {
        NlHook hook;
        NlFilter *filters;
        size_t n, allocated;
} FilterList;

static int filter_cb(const struct nlmsghdr *nlh, void *data) {
        FilterList *fl = data;
        NlFilter f;

        if (nl_filter_parse(nlh, &f) < 0)
                return MNL_CB_OK;
        if (f.handle == 0)
                return MNL_CB_OK; /* the chain head of a pref, not a filter */
        f.hook = fl->hook;
        if (greedy_realloc((void **) &fl->filters, &fl->allocated, fl->n + 1, sizeof(NlFilter)) < 0) {
                errno = ENOMEM;
                return MNL_CB_ERROR;
        }
        fl->filters[fl->n++] = f;
        return MNL_CB_OK;
}

int nl_filter_dump(NlSocket *s, int ifindex, NlFilter **ret, size_t *ret_n, Error *reterr) {
        return nl_filter_dump_some(s, ifindex, NL_DUMP_INGRESS | NL_DUMP_EGRESS | NL_DUMP_ROOT, ret, ret_n,
                                   reterr);
}

int nl_filter_dump_some(NlSocket *s, int ifindex, unsigned what, NlFilter **ret, size_t *ret_n,
                        Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        FilterList fl = { 0 };
        size_t n_hooks;
        int r;

        /* No qdisc dump first: the kernel's walks every interface of the namespace, which made a start
         * over N interfaces cost N². A hook without clsact dumps empty. */
        for (NlHook h = 0; h < _NL_HOOK_MAX; h++) {
                if (!(what & (h == NL_HOOK_INGRESS ? NL_DUMP_INGRESS : NL_DUMP_EGRESS)))
                        continue;
                fl.hook = h;
                r = nl_request(s, nl_msg_filter_dump(buf, ifindex, nl_hook_parent(h), nl_socket_next_seq(s)),
                               filter_cb, &fl, "dump filters", reterr);
                if (r < 0) {
                        free(fl.filters);
                        return r;
                }
        }
        /* Classic-mode filters sit on a classful root qdisc: parent 0 dumps the root's (none for a
         * classless one). The answer says parent 0 too, so only then is the root's handle looked up. */
        n_hooks = fl.n;
        fl.hook = NL_HOOK_EGRESS;
        if (what & NL_DUMP_ROOT)
                (void) nl_request(s, nl_msg_filter_dump(buf, ifindex, 0, nl_socket_next_seq(s)), filter_cb,
                                  &fl, "dump root qdisc filters", NULL);
        if (fl.n > n_hooks) {
                QdiscScan q;
                r = qdisc_scan(s, ifindex, &q, reterr);
                if (r < 0) {
                        free(fl.filters);
                        return r;
                }
                for (size_t i = n_hooks; i < fl.n; i++)
                        fl.filters[i].parent = q.root;
        }
        *ret = fl.filters;
        *ret_n = fl.n;
        return 0;
}

int nl_bpf_filter_set(NlSocket *s, const NlBpfFilterSpec *f, bool replace, Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        return nl_request(s, nl_msg_bpf_filter(buf, f, replace, nl_socket_next_seq(s)), NULL, NULL,
                          replace ? "replace filter" : "add filter", reterr);
}

typedef struct Echo {
        NlFilter *filter;
        bool found;
} Echo;

static int echo_cb(const struct nlmsghdr *nlh, void *data) {
        Echo *e = data;
        if (nlh->nlmsg_type == RTM_NEWTFILTER && nl_filter_parse(nlh, e->filter) >= 0)
                e->found = true;
        return MNL_CB_OK;
}

int nl_bpf_filter_set_echo(NlSocket *s, const NlBpfFilterSpec *f, bool replace, NlFilter *ret,
                           Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        struct nlmsghdr *nlh = nl_msg_bpf_filter(buf, f, replace, nl_socket_next_seq(s));
        Echo e = { .filter = ret };
        int r;

        nlh->nlmsg_flags |= NLM_F_ECHO;
        r = nl_request(s, nlh, echo_cb, &e, replace ? "replace filter" : "add filter", reterr);
        if (r < 0)
                return r;
        if (!e.found)
                return error_set(reterr, EIO, ERROR_KERNEL_ERROR,
                                 "the kernel did not echo the filter it made");
        return 0;
}

int nl_filter_del(NlSocket *s, int ifindex, uint32_t parent, uint16_t pref, uint16_t protocol,
                  uint32_t handle, Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        return nl_request(
                s, nl_msg_filter_del(buf, ifindex, parent, pref, protocol, handle, nl_socket_next_seq(s)),
                NULL, NULL, "delete filter", reterr);
}
