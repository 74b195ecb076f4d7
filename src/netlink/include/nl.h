/* nl.h: the kernel. rtnetlink through libmnl (links, clsact, cls_bpf filters) and bpf(2) through
 * libbpf (objects, programs). Returns plain structs describing kernel state; holds no policy. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "macros.h"

/* Every filter clsd installs carries TCA_BPF_NAME "clsd:<filter name>": the mark of ownership. */
#define NL_FILTER_NAME_PREFIX "clsd:"
#define NL_TAG_STRING_MAX 17
/* One request message; ours are a few hundred bytes. */
#define NL_MSG_BUFFER_SIZE 8192
/* One read of answers or events: the kernel sends dumps in chunks of up to 32 KiB. */
#define NL_RECV_BUFFER_SIZE 32768

struct nlmsghdr;

/* ---- rtnetlink socket (rtnl.c) ---- */
typedef struct NlSocket NlSocket;

/* groups: RTMGRP_* bits to join (0 for a request socket). */
int nl_socket_open(unsigned groups, NlSocket **ret, Error *reterr);
NlSocket *nl_socket_free(NlSocket *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(NlSocket *, nl_socket_free);
int nl_socket_fd(const NlSocket *s);
/* Like mnl_nlmsg_ok(), which casts nlmsg_len to int, so that a length of 2^31 or more passes its
 * check: a message header that fits in len bytes and a length that does too. */
bool nl_msg_ok(const struct nlmsghdr *nlh, size_t len);
/* Reads pending events; calls cb per message. -ENOBUFS when the kernel dropped events. */
typedef int (*NlEventFunc)(const struct nlmsghdr *nlh, void *userdata);
int nl_socket_read_events(NlSocket *s, NlEventFunc cb, void *userdata);

/* ---- links (link.c) ---- */
typedef struct NlLink {
        int ifindex;
        char ifname[IF_NAMESIZE];
        unsigned flags;
        char kind[16]; /* IFLA_INFO_KIND: "veth", "vlan", "bond", …; "" for a device without one */
        int master; /* IFLA_MASTER's ifindex (a bridge, a bond), or 0 */
} NlLink;

/* The link's kind as a policy matches it: its IFLA_INFO_KIND, "loopback", or "physical" (none). */
const char *nl_link_kind(const NlLink *l);

int nl_link_list(NlSocket *s, NlLink **ret, size_t *ret_n, Error *reterr);
/* -ENODEV when there is no such interface. */
int nl_link_by_name(NlSocket *s, const char *ifname, NlLink *ret, Error *reterr);
/* Parses an RTM_NEWLINK/RTM_DELLINK message. */
int nl_link_parse(const struct nlmsghdr *nlh, NlLink *ret);

/* ---- tc: clsact and cls_bpf filters (tc.c, tc-msg.c) ---- */
typedef enum NlHook {
        NL_HOOK_INGRESS,
        NL_HOOK_EGRESS,
        _NL_HOOK_MAX,
} NlHook;

uint32_t nl_hook_parent(NlHook h);

/* act_bpf actions after a classifier: at most this many per filter (tc allows 32); a bound on the
 * work of one filter and on the size of NlFilter. */
#define NL_ACTIONS_MAX 8
#define NL_ACTION_NAME_MAX 64

/* One action of a filter as the kernel shows it. */
typedef struct NlAction {
        char kind[16]; /* "bpf" for act_bpf */
        char name[NL_ACTION_NAME_MAX]; /* act_bpf: TCA_ACT_BPF_NAME */
        uint32_t index; /* the kernel's action index */
        int32_t control; /* act_bpf: the verdict for a program's TC_ACT_UNSPEC (TC_ACT_PIPE, …) */
        uint32_t prog_id;
        char tag[NL_TAG_STRING_MAX];
        uint64_t packets; /* what went through it (TCA_ACT_STATS) */
        uint64_t bytes;
        uint32_t drops;
        bool clsd_owned; /* name starts with NL_FILTER_NAME_PREFIX */
} NlAction;

typedef struct NlFilter {
        NlHook hook;
        uint32_t parent;
        uint16_t pref;
        uint16_t protocol; /* host order ETH_P_* */
        uint32_t handle;
        uint32_t chain; /* TCA_CHAIN; clsd's filters are all in chain 0 */
        char kind[16];
        /* cls_bpf only: */
        char name[256];
        uint32_t prog_id;
        char tag[NL_TAG_STRING_MAX];
        uint32_t flags; /* TCA_BPF_FLAGS */
        uint32_t classid;
        bool direct_action;
        bool clsd_owned; /* name starts with NL_FILTER_NAME_PREFIX */
        /* cls_bpf's actions (TCA_BPF_ACT), in the order they run; more than NL_ACTIONS_MAX set
         * actions_truncated and keep the first ones. */
        NlAction actions[NL_ACTIONS_MAX];
        size_t n_actions;
        bool actions_truncated;
} NlFilter;

/* An act_bpf action to create with a filter: runs prog_fd, named name (with the prefix); a program's
 * TC_ACT_UNSPEC goes on to the next action (TC_ACT_PIPE, as tc's default). */
typedef struct NlActionSpec {
        int prog_fd;
        const char *name;
} NlActionSpec;

typedef struct NlBpfFilterSpec {
        int ifindex;
        NlHook hook;
        uint32_t parent; /* 0: the clsact hook's; else a classful qdisc or class ("1:") */
        uint16_t pref;
        uint32_t handle;
        int prog_fd;
        const char *name; /* full TCA_BPF_NAME, with the prefix */
        bool direct_action;
        uint32_t classid; /* 0: none */
        const NlActionSpec *actions; /* act_bpf actions run when the classifier matches */
        size_t n_actions;
} NlBpfFilterSpec;

/* Builds the request into buf (at least NL_MSG_BUFFER_SIZE); exposed for tests. */
struct nlmsghdr *nl_msg_bpf_filter(void *buf, const NlBpfFilterSpec *f, bool replace, uint32_t seq);
/* Deletes exactly one filter: a pref can hold foreign filters (other handles, other protocols) too. */
struct nlmsghdr *nl_msg_filter_del(void *buf, int ifindex, uint32_t parent, uint16_t pref, uint16_t protocol,
                                   uint32_t handle, uint32_t seq);
struct nlmsghdr *nl_msg_filter_dump(void *buf, int ifindex, uint32_t parent, uint32_t seq);
struct nlmsghdr *nl_msg_clsact(void *buf, int ifindex, bool add, uint32_t seq);
/* Parses one RTM_NEWTFILTER message. 0 on success, -ENOMSG when it is not a filter message. */
int nl_filter_parse(const struct nlmsghdr *nlh, NlFilter *ret);
/* A filter or qdisc event (new or deleted): 0 and its interface, or -ENOMSG for anything else. An
 * action event (someone replaced or removed an action; actions belong to a namespace, not to an
 * interface) is 0 with ifindex 0. */
int nl_tc_event_parse(const struct nlmsghdr *nlh, int *ret_ifindex);

/* The interfaces of the namespace that have a clsact (or ingress) qdisc, from one dump of its qdiscs:
 * only those can have filters on a clsact hook. */
int nl_hook_qdiscs(NlSocket *s, int **ret, size_t *ret_n, Error *reterr);
/* Whether ifindex has a qdisc (minor 0) or a class of the handle parent: 1 or 0. */
int nl_tc_parent_exists(NlSocket *s, int ifindex, uint32_t parent, Error *reterr);
int nl_clsact_add(NlSocket *s, int ifindex, Error *reterr);
/* nl_clsact_add() sent in one sendmsg with the socket's next request, ahead of it (one round trip for
 * both); its answer is in *ret and reterr when that request returns, or after nl_flush(). -EBUSY: a
 * request is deferred already (send this one alone). */
int nl_clsact_add_deferred(NlSocket *s, int ifindex, int *ret, Error *reterr);
/* Sends a deferred request that no other took along, and reads its answer. */
int nl_flush(NlSocket *s);
int nl_clsact_del(NlSocket *s, int ifindex, Error *reterr);
/* Dumps all filters of both clsact hooks and of the root qdisc (where classic-mode filters go). */
int nl_filter_dump(NlSocket *s, int ifindex, NlFilter **ret, size_t *ret_n, Error *reterr);
/* Only some of them: a dump per clsact hook asked for, and the root qdisc's (classic mode). */
enum {
        NL_DUMP_INGRESS = 1 << 0,
        NL_DUMP_EGRESS = 1 << 1,
        NL_DUMP_ROOT = 1 << 2,
};
int nl_filter_dump_some(NlSocket *s, int ifindex, unsigned what, NlFilter **ret, size_t *ret_n,
                        Error *reterr);
/* Adds (replace=false, NLM_F_EXCL) or replaces in place (NLM_F_REPLACE) a cls_bpf filter, with its
 * actions: a replace swaps the classifier and its actions at once. */
int nl_bpf_filter_set(NlSocket *s, const NlBpfFilterSpec *f, bool replace, Error *reterr);
/* The same, read back in the same round trip: the kernel echoes the filter as it made it (NLM_F_ECHO)
 * into *ret; -EIO when it did not. */
int nl_bpf_filter_set_echo(NlSocket *s, const NlBpfFilterSpec *f, bool replace, NlFilter *ret,
                           Error *reterr);
int nl_filter_del(NlSocket *s, int ifindex, uint32_t parent, uint16_t pref, uint16_t protocol,
                  uint32_t handle, Error *reterr);

/* ---- act_bpf (act.c) ---- */
struct nlmsghdr *nl_msg_act_bpf_probe(void *buf, uint32_t seq);
/* Whether this kernel has the act_bpf action; never creates one. */
int nl_act_bpf_probe(NlSocket *s, bool *ret_available);

/* ---- named network namespaces (netns.c) ---- */
/* An fd of the namespace dir/name; -ENOENT when there is none, -EAGAIN while it is only a placeholder
 * (ip-netns creates the file, then mounts the namespace on it). */
int nl_netns_open(const char *dir, const char *name, int *ret_fd, Error *reterr);
/* Moves the calling thread into the namespace; nl_netns_leave() goes back (-1: nothing to do). */
int nl_netns_enter(int netns_fd, int *ret_saved_fd);
void nl_netns_leave(int saved_fd);
/* nl_socket_open() inside the namespace (netns_fd -1: the caller's); the socket stays there. */
int nl_socket_open_in(int netns_fd, unsigned groups, NlSocket **ret, Error *reterr);
