/* policy-match.c: policies matched against links. A policy is one more source of an interface's
 * filters (composed in compose.c); matching gives each interface whose set of matching policies differs
 * a change of its own (change.h: CHANGE_POLICY, or its dry run), queued with its other work. Link events
 * match one link; a namespace appearing, every link in it; a new set (a transaction, the hogs read
 * again), every link a policy may match and every interface that holds one. */
#include <stdio.h>
#include <string.h>

#include "change.h"
#include "log.h"
#include "policy-match.h"
#include "store-policy.h"

/* A policy change of kind giving the policies v (references taken), or NULL (out of memory). */
static Change *policy_change_new(Manager *m, ChangeKind kind, Policy *const *v, size_t n) {
        Change *c = change_new(m, kind, NULL);

        if (c && change_set_policies(c, v, n) < 0) {
                change_free(&c->op);
                return NULL;
        }
        return c;
}

/* The change that gives the interface (netns, ifname) the policies v, if they differ from what it has
 * (or, in a dry run, for one the follower's policy concerns, always). */
static void queue_policies(Manager *m, const char *netns, const char *ifname, Policy **v, size_t n,
                           const PolicyFollower *fw) {
        Iface *it = iface_table_get(m->ifaces, netns, ifname);
        const Iface *held = it && it->visible ? it : NULL;
        bool matched = false, concerned = fw && fw->concerns(fw->userdata, held, v, n, &matched);

        if (held ? iface_policies_equal(it, v, n) && !(fw && fw->dry_run && concerned) : n == 0)
                return;
        if (fw && fw->dry_run && !concerned)
                return;
        /* made before the follower counts it: a change it follows is always answered */
        Change *c = policy_change_new(m, fw && fw->dry_run ? CHANGE_POLICY_DRY_RUN : CHANGE_POLICY, v, n);
        if (c && concerned && !(c->userdata = fw->follow(fw->userdata, netns, ifname, matched))) {
                change_free(&c->op);
                c = NULL;
        }
        if (!c) {
                log_error("%s: cannot queue a policy change: out of memory", ifname);
                return;
        }
        if (concerned) {
                c->done = fw->done;
                c->dry_done = fw->dry_done;
        }
        if (fw && fw->dry_run) {
                /* the plan is of the transaction's policy, whose objects it resolved (and waits for) */
                c->doc = document_ref(fw->doc);
                c->shared_resolver = fw->resolver;
        }
        change_queue(m, c, netns, ifname);
}

void policies_recompose(Manager *m, Iface *it) {
        Change *c = policy_change_new(m, CHANGE_POLICY, it->policies, it->n_policies);

        if (!c) {
                log_error("%s: cannot queue a policy change: out of memory", it->ifname);
                return;
        }
        change_queue(m, c, it->netns, it->ifname);
}

/* Matches one link against set. */
static void rematch_link(Manager *m, const PolicySet *set, const char *netns, const NlLink *l,
                         const PolicyFollower *fw) {
        _cleanup_free_ Policy **v = calloc(set->n + 1, sizeof(Policy *));
        const NlLink *master = l->master > 0 ? links_find(m->links, netns, l->master) : NULL;
        size_t k;

        if (!v)
                return;
        k = policy_set_match(set, netns, l->ifname, nl_link_kind(l), master ? master->ifname : NULL, v);
        queue_policies(m, netns, l->ifname, v, k, fw);
}

void policies_on_link(Manager *m, const char *netns, const NlLink *l) {
        if (m->policies.n == 0 && !iface_table_get(m->ifaces, netns, l->ifname))
                return;
        rematch_link(m, &m->policies, netns, l, NULL);
}

/* Every link of the namespace (NULL: clsd's own, which it follows), matched against set. */
static void rematch_netns(Manager *m, const PolicySet *set, const char *netns, const PolicyFollower *fw) {
        const LinkEntry *links;
        NlSocket *rtnl;
        _cleanup_error_ Error e = ERROR_NULL;
        size_t nl;

        if (netns_set_rtnl(m->netns, netns, &rtnl, &e) < 0 ||
            links_get(m->links, rtnl, netns, false, &links, &nl, &e) < 0) {
                log_warning("netns %s: cannot match policies: %s", strna(netns), strna(e.message));
                return;
        }
        /* The list is the table's: copy it, as queueing may look links up again. */
        _cleanup_free_ NlLink *copy = calloc(nl + 1, sizeof(NlLink));
        for (size_t k = 0; copy && k < nl; k++)
                copy[k] = links[k].link;
        for (size_t k = 0; copy && k < nl; k++)
                rematch_link(m, set, netns, &copy[k], fw);
}

void policy_sweep(Manager *m, const PolicySet *set, const PolicyFollower *fw) {
        char **present = NULL;
        size_t n_present = 0;

        /* clsd's own namespace, and the named ones only if a policy names namespaces */
        if (policy_set_wants_named_netns(set))
                (void) netns_set_list_present(m->netns, &present, &n_present);
        for (size_t i = 0; i <= n_present; i++) {
                const char *netns = i < n_present ? present[i] : NULL;
                if (policy_set_wants_netns(set, netns))
                        rematch_netns(m, set, netns, fw);
        }
        strv_free_n(present, n_present);
        /* Interfaces that hold a policy but whose link is not among those (gone, or its namespace no
         * policy wants any more). */
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                const NlLink *l;
                if (!it->visible || it->n_policies == 0)
                        continue;
                l = it->ifindex > 0 ? links_find(m->links, it->netns, it->ifindex) : NULL;
                if (l && policy_set_wants_netns(set, it->netns))
                        continue; /* matched above */
                queue_policies(m, it->netns, it->ifname, NULL, 0, fw);
        }
}

void policies_on_netns(Manager *m, const char *netns) {
        if (policy_set_wants_netns(&m->policies, netns))
                rematch_netns(m, &m->policies, netns, NULL);
}

void policies_start(Manager *m) {
        if (m->policies.n > 0)
                policy_sweep(m, &m->policies, NULL);
}

int policies_set_hogs(Manager *m, Policy *const *v, size_t n, bool apply) {
        PolicySet set;
        size_t changed;
        int r;

        r = policy_set_with_hogs(&m->policies, v, n, &set, &changed);
        if (r < 0)
                return r;
        policy_set_replace(&m->policies, set.v, set.n);
        if (apply && changed > 0)
                policy_sweep(m, &m->policies, NULL);
        return 0;
}
