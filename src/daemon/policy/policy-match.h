/* policy-match.h: policies matched against links (policy-match.c): each interface whose set of matching
 * policies differs gets a change of its own, queued behind its other work. */
#pragma once

#include "manager.h"
#include "policy-set.h"
#include "resolve.h"
#include "daemon-changes.h"
#include "store-policy.h"

/* Who follows the changes a sweep queues (a policy transaction), and what they are. */
typedef struct PolicyFollower {
        bool dry_run; /* the changes are dry runs of doc, resolved by resolver */
        Document *doc;
        const Resolver *resolver;
        /* Whether the change of the interface (NULL: none yet) to the policies v concerns the follower:
         * a dry run queues only those; *ret_matched: one of v is the follower's. */
        bool (*concerns)(void *userdata, const Iface *it, Policy *const *v, size_t n, bool *ret_matched);
        /* The follower takes the change of (netns, ifname): the userdata its done (or dry_done) is
         * called with, NULL if it cannot (out of memory: not queued). */
        void *(*follow)(void *userdata, const char *netns, const char *ifname, bool matched);
        DaemonDoneFunc done;
        DryRunDoneFunc dry_done;
        void *userdata;
} PolicyFollower;

/* Every link of a namespace set may match, and every interface that holds a policy now: each gets the
 * policies of set that match it; follower (may be NULL) follows the changes that concern it. */
void policy_sweep(Manager *m, const PolicySet *set, const PolicyFollower *follower);
/* Matches every link at start. */
void policies_start(Manager *m);
/* A link came or changed: the policies that match it now. */
void policies_on_link(Manager *m, const char *netns, const NlLink *l);
/* A namespace appeared: every link in it, if a policy may match there. */
void policies_on_netns(Manager *m, const char *netns);
/* The interface composed again with the policies it has (what they use may have been revoked or come
 * back), in its turn behind its other changes. */
void policies_recompose(Manager *m, Iface *it);
/* The hogs with "match" become the configuration's policies (references taken; one unchanged keeps
 * the policy it was, so that its interfaces are not touched); with apply, every interface whose
 * policies changed is changed. */
int policies_set_hogs(Manager *m, Policy *const *v, size_t n, bool apply);
