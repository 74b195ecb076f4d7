/* link.c: interfaces, by RTM_GETLINK dump or by name, and parsing of link events. */
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <string.h>

#include "nl-internal.h"

int nl_link_parse(const struct nlmsghdr *nlh, NlLink *ret) {
        const struct ifinfomsg *ifi;
        const struct nlattr *a;
        NlLink l = { 0 };

        if (nlh->nlmsg_type != RTM_NEWLINK && nlh->nlmsg_type != RTM_DELLINK)
                return -ENOMSG;
        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifi))
                return -EBADMSG;
        ifi = mnl_nlmsg_get_payload(nlh);
        /* A bridge's messages about its ports (AF_BRIDGE): an RTM_DELLINK of those is a port leaving
         * the bridge, not the device going. */
        if (ifi->ifi_family == AF_BRIDGE)
                return -ENOMSG;
        l.ifindex = ifi->ifi_index;
        l.flags = ifi->ifi_flags;
        mnl_attr_for_each (a, nlh, sizeof(*ifi)) {
                switch (mnl_attr_get_type(a)) {
                case IFLA_IFNAME:
                        if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
                                snprintf(l.ifname, sizeof(l.ifname), "%s", mnl_attr_get_str(a));
                        break;
                case IFLA_MASTER:
                        if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                                l.master = (int) mnl_attr_get_u32(a);
                        break;
                case IFLA_LINKINFO: {
                        const struct nlattr *b;
                        mnl_attr_for_each_nested (b, a)
                                if (mnl_attr_get_type(b) == IFLA_INFO_KIND &&
                                    mnl_attr_validate(b, MNL_TYPE_STRING) >= 0)
                                        snprintf(l.kind, sizeof(l.kind), "%.*s",
                                                 (int) strnlen(mnl_attr_get_payload(b),
                                                               mnl_attr_get_payload_len(b)),
                                                 (const char *) mnl_attr_get_payload(b));
                        break;
                }
                }
        }
        if (!l.ifname[0])
                return -EBADMSG;
        *ret = l;
        return 0;
}

const char *nl_link_kind(const NlLink *l) {
        if (l->kind[0])
                return l->kind;
        return l->flags & IFF_LOOPBACK ? "loopback" : "physical";
}

typedef struct LinkList {
        NlLink *links;
        size_t n, allocated;
} LinkList;

static int link_cb(const struct nlmsghdr *nlh, void *data) {
        LinkList *ll = data;
        NlLink l;

        if (nl_link_parse(nlh, &l) < 0)
                return MNL_CB_OK;
        if (greedy_realloc((void **) &ll->links, &ll->allocated, ll->n + 1, sizeof(NlLink)) < 0) {
                errno = ENOMEM;
                return MNL_CB_ERROR;
        }
        ll->links[ll->n++] = l;
        return MNL_CB_OK;
}

int nl_link_list(NlSocket *s, NlLink **ret, size_t *ret_n, Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        LinkList ll = { 0 };
        struct nlmsghdr *nlh = nl_msg_dump(buf, RTM_GETLINK, sizeof(struct ifinfomsg), s);
        int r;

        /* name, kind and master are all clsd reads: no statistics (each device's counters, read for them) */
        mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
        r = nl_request(s, nlh, link_cb, &ll, "dump links", reterr);
        if (r < 0) {
                free(ll.links);
                return r;
        }
        *ret = ll.links;
        *ret_n = ll.n;
        return 0;
}

int nl_link_by_name(NlSocket *s, const char *ifname, NlLink *ret, Error *reterr) {
        char buf[NL_MSG_BUFFER_SIZE];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        LinkList ll = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        nlh->nlmsg_type = RTM_GETLINK;
        nlh->nlmsg_flags = NLM_F_REQUEST;
        nlh->nlmsg_seq = nl_socket_next_seq(s);
        mnl_nlmsg_put_extra_header(nlh, sizeof(struct ifinfomsg));
        mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
        r = nl_request(s, nlh, link_cb, &ll, ifname, &e);
        if (r == -ENODEV || (r >= 0 && ll.n == 0)) {
                free(ll.links);
                return -ENODEV;
        }
        if (r < 0) {
                free(ll.links);
                if (reterr && !reterr->code) {
                        *reterr = e; /* the first explanation is kept, as error_set() does */
                        e = ERROR_NULL;
                }
                return r;
        }
        *ret = ll.links[0];
        free(ll.links);
        return 0;
}
