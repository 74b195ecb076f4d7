/* policies.c: policies, one document for every interface that matches, now and later. A policy is one
 * more source of an interface's filters (after a hog and the interface's own document; among policies
 * the lowest "order" on a hook), composed in iface.c and reconciled like any interface: matching makes
 * a CHANGE_POLICY of each interface whose set of policies differs, queued with its other work.
 *
 * A PUT resolves the objects and loads each program once (a probe interface holds them, outside the
 * table), stores the policy once, then changes every interface it matches or no longer matches, and
 * answers with how each ended. The fleet's transaction does the same for several policies at once: all
 * verified before any is stored, stored as one (store_policies_commit()), and each interface changed
 * once for all of them. Link events re-match one link; a namespace appearing, every link in it. */
#include <stdio.h>
#include <string.h>

#include "change.h"
#include "log.h"

typedef struct PolicyTxn PolicyTxn;

/* One policy of a transaction: put (policy) or removed (NULL). */
typedef struct TxnItem {
        PolicyTxn *txn;
        char *name;
        Policy *policy;
        Policy *old;
        ObjectResolution res;
        Iface *probe; /* holds the new policy's programs until every interface holds its own */
} TxnItem;

/* A transaction: one policy from the API, or several from the fleet, stored and applied as one. */
struct PolicyTxn {
        Manager *m;
        TxnItem *items;
        size_t n_items, n_alloc;
        bool dry_run;
        sd_event_source *defer;
        PolicyResult *results;
        size_t n_results, cap_results;
        size_t pending; /* interface changes not answered yet */
        bool swept;
        PolicyDoneFunc done;
        void *userdata;
};

/* Whether p is one of the transaction's new policies. */
static bool txn_puts(const PolicyTxn *txn, const Policy *p) {
        for (size_t i = 0; p && i < txn->n_items; i++)
                if (txn->items[i].policy == p)
                        return true;
        return false;
}

/* Whether the interface holds a policy the transaction changes or removes. */
static bool txn_held(const PolicyTxn *txn, const Iface *it) {
        for (size_t i = 0; i < txn->n_items; i++)
                if (txn->items[i].old && iface_has_policy(it, txn->items[i].old))
                        return true;
        return false;
}

/* One interface's change, answered into the transaction's results. */
typedef struct PolicyIfaceDone {
        PolicyTxn *txn;
        size_t index;
} PolicyIfaceDone;

size_t daemon_policy_count(Manager *m) {
        return m->n_policies;
}

Policy *daemon_policy_at(Manager *m, size_t i) {
        return i < m->n_policies ? m->policies[i] : NULL;
}

static Policy *daemon_policy_get_from(Policy *const *v, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(v[i]->name, name))
                        return v[i];
        return NULL;
}

Policy *daemon_policy_get(Manager *m, const char *name) {
        return daemon_policy_get_from(m->policies, m->n_policies, name);
}

size_t iface_policy_count(const Iface *it) {
        return it->n_policies;
}

const Policy *iface_policy_at(const Iface *it, size_t i) {
        return i < it->n_policies ? it->policies[i] : NULL;
}

size_t daemon_policy_ifaces(Manager *m, const Policy *p, Iface ***ret) {
        Iface **v = calloc(iface_table_size(m->ifaces) + 1, sizeof(Iface *));
        size_t n = 0;

        for (size_t i = 0; v && i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                if (it->visible && iface_has_policy(it, p))
                        v[n++] = it;
        }
        *ret = v;
        return n;
}

/* ---- matching ---- */

/* Whether any policy of set may match links of the namespace (NULL: clsd's own). */
static bool set_wants_netns(Policy *const *set, size_t n, const char *netns) {
        for (size_t i = 0; i < n; i++)
                if (policy_matches_netns(set[i], netns))
                        return true;
        return false;
}

bool manager_policies_want_netns(Manager *m, const char *netns) {
        return set_wants_netns(m->policies, m->n_policies, netns);
}

/* The policies of set that match the link, into v (room for n). */
static size_t match_link(Manager *m, Policy *const *set, size_t n, const char *netns, const NlLink *l,
                         Policy **v) {
        const NlLink *master = l->master > 0 ? links_find(m->links, netns, l->master) : NULL;
        const char *kind = nl_link_kind(l);
        size_t k = 0;

        for (size_t i = 0; i < n; i++)
                if (policy_matches(set[i], netns, l->ifname, kind, master ? master->ifname : NULL))
                        v[k++] = set[i];
        return k;
}

static void on_iface_done(Manager *m, Iface *it, const Error *e, void *userdata);
static void on_iface_dry_run(Manager *m, const DryRun *dr, const Error *e, void *userdata);

static int txn_result_add(PolicyTxn *txn, const char *netns, const char *ifname, bool matched) {
        PolicyResult *r;

        if (txn->n_results == txn->cap_results) {
                size_t cap = txn->cap_results ? txn->cap_results * 2 : 16;
                PolicyResult *v = realloc(txn->results, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                txn->results = v;
                txn->cap_results = cap;
        }
        r = &txn->results[txn->n_results];
        *r = (PolicyResult){ .matched = matched };
        if (netns && !(r->netns = strdup(netns)))
                return -ENOMEM;
        snprintf(r->ifname, sizeof(r->ifname), "%s", ifname);
        return (int) txn->n_results++;
}

void manager_iface_recompose(Manager *m, Iface *it) {
        Change *c = change_new(m, CHANGE_POLICY, NULL);

        if (!c || (it->n_policies > 0 && !(c->policies = calloc(it->n_policies, sizeof(Policy *))))) {
                if (c)
                        change_free(&c->op);
                log_error("%s: cannot queue a change: out of memory", it->ifname);
                return;
        }
        for (size_t i = 0; i < it->n_policies; i++)
                c->policies[i] = policy_ref(it->policies[i]);
        c->n_policies = it->n_policies;
        change_queue(m, c, it->netns, it->ifname);
}

/* Queues the change that gives the interface (netns, ifname) the policies v, if they differ from what
 * it has (or, in a dry run, always for one the transaction's policy concerns). */
static void queue_policies(Manager *m, const char *netns, const char *ifname, Policy **v, size_t n,
                           PolicyTxn *txn, bool concerned) {
        Iface *it = iface_table_get(m->ifaces, netns, ifname);
        PolicyIfaceDone *d = NULL;
        Change *c;
        int idx;

        if (it && it->visible ? iface_policies_equal(it, v, n) && !(txn && txn->dry_run && concerned)
                              : n == 0)
                return;
        if (txn && txn->dry_run && !concerned)
                return;
        c = change_new(m, txn && txn->dry_run ? CHANGE_POLICY_DRY_RUN : CHANGE_POLICY, NULL);
        if (!c || (n > 0 && !(c->policies = calloc(n, sizeof(Policy *))))) {
                if (c)
                        change_free(&c->op);
                log_error("%s: cannot queue a policy change: out of memory", ifname);
                return;
        }
        for (size_t i = 0; i < n; i++)
                c->policies[i] = policy_ref(v[i]);
        c->n_policies = n;
        if (txn && concerned) {
                bool matched = false;
                for (size_t i = 0; i < n; i++)
                        matched = matched || txn_puts(txn, v[i]);
                idx = txn_result_add(txn, netns, ifname, matched);
                if (idx < 0 || !(d = calloc(1, sizeof(*d)))) {
                        change_free(&c->op);
                        return;
                }
                *d = (PolicyIfaceDone){ .txn = txn, .index = (size_t) idx };
                txn->pending++;
                c->userdata = d;
                if (txn->dry_run) {
                        c->dry_done = on_iface_dry_run;
                        c->doc = document_ref(txn->items[0].policy ? txn->items[0].policy->doc : NULL);
                        c->shared_resolver = &txn->items[0].res.resolver;
                } else
                        c->done = on_iface_done;
        }
        change_queue(m, c, netns, ifname);
}

/* Matches one link against set; txn (may be NULL) follows the changes that concern its policy. */
static void rematch_link(Manager *m, Policy *const *set, size_t n, const char *netns, const NlLink *l,
                         PolicyTxn *txn) {
        _cleanup_free_ Policy **v = calloc(n + 1, sizeof(Policy *));
        Iface *it = iface_table_get(m->ifaces, netns, l->ifname);
        size_t k;
        bool concerned;

        if (!v)
                return;
        k = match_link(m, set, n, netns, l, v);
        concerned = txn && it && it->visible && txn_held(txn, it);
        for (size_t i = 0; txn && i < k; i++)
                concerned = concerned || txn_puts(txn, v[i]);
        queue_policies(m, netns, l->ifname, v, k, txn, concerned);
}

void manager_policies_link(Manager *m, const char *netns, const NlLink *l) {
        if (m->n_policies == 0 && !iface_table_get(m->ifaces, netns, l->ifname))
                return;
        rematch_link(m, m->policies, m->n_policies, netns, l, NULL);
}

/* Every link of the namespace (NULL: clsd's own, which it follows), matched against set. */
static void rematch_netns(Manager *m, Policy *const *set, size_t n, const char *netns, PolicyTxn *txn) {
        const LinkEntry *links;
        NlSocket *rtnl;
        Error e = ERROR_NULL;
        size_t nl;

        if (netns_set_rtnl(m->netns, netns, &rtnl, &e) < 0 ||
            links_get(m->links, rtnl, netns, false, &links, &nl, &e) < 0) {
                log_warning("netns %s: cannot match policies: %s", strna(netns), strna(e.message));
                error_done(&e);
                return;
        }
        /* The list is the table's: copy it, as queueing may look links up again. */
        _cleanup_free_ NlLink *copy = calloc(nl + 1, sizeof(NlLink));
        for (size_t k = 0; copy && k < nl; k++)
                copy[k] = links[k].link;
        for (size_t k = 0; copy && k < nl; k++)
                rematch_link(m, set, n, netns, &copy[k], txn);
}

/* Every link of a namespace set may match, and every interface that holds a policy now: each gets the
 * policies of set that match it. */
static void sweep(Manager *m, Policy *const *set, size_t n, PolicyTxn *txn) {
        char **present = NULL;
        size_t n_present = 0;

        (void) netns_set_list_present(m->netns, &present, &n_present);
        for (size_t i = 0; i <= n_present; i++) {
                const char *netns = i < n_present ? present[i] : NULL;
                if (set_wants_netns(set, n, netns))
                        rematch_netns(m, set, n, netns, txn);
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
                if (l && set_wants_netns(set, n, it->netns))
                        continue; /* matched above */
                queue_policies(m, it->netns, it->ifname, NULL, 0, txn, txn && txn_held(txn, it));
        }
}

void manager_policies_netns(Manager *m, const char *netns) {
        if (set_wants_netns(m->policies, m->n_policies, netns))
                rematch_netns(m, m->policies, m->n_policies, netns, NULL);
}

static void store_problem(const char *path, const char *reason, void *userdata) {
        (void) userdata;
        log_error("%s: set aside: %s", path, reason);
}

int manager_policies_load(Manager *m, Error *reterr) {
        int r = store_policies_load(m->store, &m->policies, &m->n_policies, store_problem, NULL, reterr);
        if (r < 0)
                return r;
        if (m->n_policies > 0)
                log_info("%zu polic%s", m->n_policies, m->n_policies == 1 ? "y" : "ies");
        return 0;
}

void manager_policies_start(Manager *m) {
        if (m->n_policies > 0)
                sweep(m, m->policies, m->n_policies, NULL);
}

static bool policy_same(const Policy *a, const Policy *b) {
        json_t *x, *y;
        bool eq;

        if (!streq(a->name, b->name) || !streq_ptr(a->hog_path, b->hog_path))
                return false;
        x = policy_to_json(a);
        y = policy_to_json(b);
        eq = json_equal(x, y);
        json_decref(x);
        json_decref(y);
        return eq;
}

int manager_policies_set_hogs(Manager *m, Policy *const *v, size_t n, bool apply) {
        Policy **set = calloc(m->n_policies + n + 1, sizeof(Policy *));
        size_t k = 0, changed = 0;

        if (!set)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_policies; i++)
                if (!m->policies[i]->hog_path)
                        set[k++] = policy_ref(m->policies[i]);
        for (size_t i = 0; i < n; i++) {
                Policy *old = daemon_policy_get(m, v[i]->name), *use = v[i];
                if (daemon_policy_get_from(set, k, v[i]->name)) {
                        log_error("%s: the API has a policy named %s; this hog is not applied",
                                  v[i]->hog_path, v[i]->name);
                        continue;
                }
                if (old && old->hog_path && policy_same(old, v[i]))
                        use = old; /* unchanged: its interfaces stay as they are */
                else {
                        changed++;
                        log_info("policy %s: %s hog %s", v[i]->name, old ? "changed" : "new",
                                 v[i]->hog_path);
                }
                set[k++] = policy_ref(use);
        }
        /* a hog policy the new set has none of that name of: removed (kept or changed ones are there) */
        for (size_t i = 0; i < m->n_policies; i++)
                if (m->policies[i]->hog_path && !daemon_policy_get_from(set, k, m->policies[i]->name)) {
                        changed++;
                        log_info("policy %s: hog %s removed", m->policies[i]->name,
                                 m->policies[i]->hog_path);
                }
        manager_policies_free(m);
        m->policies = set;
        m->n_policies = k;
        if (apply && changed > 0)
                sweep(m, m->policies, m->n_policies, NULL);
        return 0;
}

void manager_policies_free(Manager *m) {
        for (size_t i = 0; i < m->n_policies; i++)
                policy_unref(m->policies[i]);
        free(m->policies);
        m->policies = NULL;
        m->n_policies = 0;
}

/* ---- a transaction: PUT, its dry run, DELETE; the fleet's several at once ---- */

static void txn_free(PolicyTxn *txn) {
        if (!txn)
                return;
        sd_event_source_disable_unref(txn->defer);
        for (size_t i = 0; i < txn->n_items; i++) {
                TxnItem *item = &txn->items[i];
                if (item->probe) {
                        loads_forget(txn->m, item->probe);
                        iface_free(item->probe, txn->m->registry);
                }
                resolution_done(&item->res);
                policy_unref(item->policy);
                policy_unref(item->old);
                free(item->name);
        }
        free(txn->items);
        for (size_t i = 0; i < txn->n_results; i++) {
                free(txn->results[i].netns);
                error_done(&txn->results[i].error);
                dry_run_done(&txn->results[i].dry_run);
        }
        free(txn->results);
        free(txn);
}

static void txn_answer(PolicyTxn *txn, const Error *e) {
        PolicyOutcome o = { .policy = txn->items[0].policy,
                            .dry_run = txn->dry_run,
                            .results = txn->results,
                            .n_results = txn->n_results };
        if (txn->done)
                txn->done(txn->m, e ? NULL : &o, e, txn->userdata);
        txn->done = NULL;
}

static void txn_fail(PolicyTxn *txn, const Error *e) {
        if (!txn->dry_run)
                daemon_count_error(txn->m, e->code);
        txn_answer(txn, e);
        txn_free(txn);
}

static void txn_maybe_finish(PolicyTxn *txn) {
        if (!txn->swept || txn->pending > 0)
                return;
        txn_answer(txn, NULL);
        txn_free(txn);
}

static void on_iface_done(Manager *m, Iface *it, const Error *e, void *userdata) {
        PolicyIfaceDone *d = userdata;
        PolicyTxn *txn = d->txn;
        PolicyResult *r = &txn->results[d->index];

        (void) m;
        free(d);
        if (e) {
                r->state = IFACE_FAILED;
                error_set(&r->error, e->error, e->code, "%s", strna(e->message));
        } else if (!it)
                r->removed = true;
        else {
                r->state = it->state;
                if (it->state == IFACE_FAILED && it->error.code)
                        error_set(&r->error, it->error.error, it->error.code, "%s",
                                  strna(it->error.message));
        }
        txn->pending--;
        txn_maybe_finish(txn);
}

static void on_iface_dry_run(Manager *m, const DryRun *dr, const Error *e, void *userdata) {
        PolicyIfaceDone *d = userdata;
        PolicyTxn *txn = d->txn;
        PolicyResult *r = &txn->results[d->index];

        (void) m;
        free(d);
        if (e) {
                r->state = IFACE_FAILED;
                error_set(&r->error, e->error, e->code, "%s", strna(e->message));
        } else {
                r->state = dr->pending ? IFACE_PENDING : IFACE_CONFIGURED;
                r->dry_run = *dr;
                /* the plan is the result's now */
                ((DryRun *) dr)->doc = NULL, ((DryRun *) dr)->plan_doc = NULL;
                ((DryRun *) dr)->programs = NULL, ((DryRun *) dr)->n_programs = 0;
                ((DryRun *) dr)->steps = NULL, ((DryRun *) dr)->n_steps = 0;
        }
        txn->pending--;
        txn_maybe_finish(txn);
}

static bool txn_names(const PolicyTxn *txn, const char *name) {
        for (size_t i = 0; i < txn->n_items; i++)
                if (streq(txn->items[i].name, name))
                        return true;
        return false;
}

/* The policy set with the transaction's policies in place of the old ones (or without them). */
static int txn_set(PolicyTxn *txn, Policy ***ret, size_t *ret_n) {
        Manager *m = txn->m;
        Policy **v = calloc(m->n_policies + txn->n_items + 1, sizeof(Policy *));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_policies; i++)
                if (!txn_names(txn, m->policies[i]->name))
                        v[n++] = m->policies[i];
        for (size_t i = 0; i < txn->n_items; i++)
                if (txn->items[i].policy)
                        v[n++] = txn->items[i].policy;
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The new set becomes the manager's (references moved), then every interface concerned changes: once,
 * whatever number of the transaction's policies it gains or loses. */
static void txn_apply(PolicyTxn *txn) {
        Manager *m = txn->m;
        Policy **set = NULL;
        size_t n = 0;
        Error e = ERROR_NULL;

        if (txn_set(txn, &set, &n) < 0) {
                error_set(&e, ENOMEM, "internal_error", "out of memory");
                txn_fail(txn, &e);
                error_done(&e);
                return;
        }
        if (!txn->dry_run) {
                for (size_t i = 0; i < n; i++)
                        policy_ref(set[i]);
                manager_policies_free(m);
                m->policies = set;
                m->n_policies = n;
                set = NULL;
                sweep(m, m->policies, m->n_policies, txn);
        } else
                sweep(m, set, n, txn);
        free(set);
        txn->swept = true;
        txn_maybe_finish(txn);
}

static void txn_step(PolicyTxn *txn);

static int on_defer(sd_event_source *s, void *userdata) {
        (void) s;
        txn_step(userdata);
        return 0;
}

/* Called from inside a worker's answer or a load's: the next step runs from the loop. */
static void txn_wake(PolicyTxn *txn) {
        if (!txn->defer && sd_event_add_defer(txn->m->event, &txn->defer, on_defer, txn) < 0)
                return;
        (void) sd_event_source_set_enabled(txn->defer, SD_EVENT_ONESHOT);
}

static void on_resolved(ObjectResolution *res) {
        txn_wake(((TxnItem *) ((char *) res - offsetof(TxnItem, res)))->txn);
}

static void on_probe_resume(void *userdata) {
        txn_wake(userdata);
}

/* The item's programs loaded and verified (0), under way (-EAGAIN), or refused. */
static int item_acquire(PolicyTxn *txn, TxnItem *item, Error *reterr) {
        Manager *m = txn->m;
        int r;

        if (!item->probe) {
                r = iface_new(NULL, item->name, &item->probe);
                if (r >= 0)
                        r = iface_set_policies(item->probe, &item->policy, 1);
                if (r >= 0)
                        r = iface_set_documents(item->probe, NULL, NULL, NULL, NULL, NULL, m->kernel.tcx,
                                                m->registry);
                if (r < 0)
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                item->probe->on_resume = on_probe_resume;
                item->probe->on_resume_userdata = txn;
        }
        if (item->probe->programs_held)
                return 0;
        return iface_acquire_programs(m, item->probe, item->probe, reterr);
}

/* A refusal of the item named: with several items, the message says whose and that none is applied. */
static void txn_fail_item(PolicyTxn *txn, const char *name, const Error *e) {
        Error e2 = ERROR_NULL;

        if (txn->n_alloc == 1) {
                txn_fail(txn, e);
                return;
        }
        error_set(&e2, e->error, e->code,
                  "policy %s: %s (none of the %zu policies of this change is applied)", name,
                  strna(e->message), txn->n_alloc);
        txn_fail(txn, &e2);
        error_done(&e2);
}

/* Resolve, load (not in a dry run), store, apply: as far as it can go now. Every policy's programs are
 * loaded and verified, once, before anything is stored; one refused, none is stored. */
static void txn_step(PolicyTxn *txn) {
        Manager *m = txn->m;
        _cleanup_free_ Policy **put = NULL;
        _cleanup_free_ char **removed = NULL;
        size_t n_put = 0, n_removed = 0, i;
        Error e = ERROR_NULL;
        bool waiting = false;
        int r = 0;

        for (i = 0; i < txn->n_items; i++) {
                if (!txn->items[i].policy)
                        continue;
                r = resolution_run(&txn->items[i].res, txn->items[i].policy->doc, &e);
                if (r == -EAGAIN)
                        waiting = true;
                else if (r < 0)
                        goto fail;
        }
        if (waiting)
                return;
        if (txn->dry_run) {
                txn_apply(txn);
                return;
        }
        for (i = 0; i < txn->n_items; i++) {
                if (!txn->items[i].policy)
                        continue;
                r = item_acquire(txn, &txn->items[i], &e);
                if (r == -EAGAIN)
                        waiting = true;
                else if (r < 0)
                        goto fail;
        }
        if (waiting)
                return;
        put = calloc(txn->n_items, sizeof(Policy *));
        removed = calloc(txn->n_items, sizeof(char *));
        if (!put || !removed) {
                error_set(&e, ENOMEM, "internal_error", "out of memory");
                txn_fail(txn, &e);
                error_done(&e);
                return;
        }
        for (i = 0; i < txn->n_items; i++)
                if (txn->items[i].policy)
                        put[n_put++] = txn->items[i].policy;
                else
                        removed[n_removed++] = txn->items[i].name;
        if (store_policies_commit(m->store, put, n_put, removed, n_removed, &e) < 0) {
                txn_fail(txn, &e);
                error_done(&e);
                return;
        }
        for (i = 0; i < txn->n_items; i++)
                if (txn->items[i].policy)
                        log_info("policy %s: generation %" PRIu64 " stored", txn->items[i].name,
                                 txn->items[i].policy->generation);
                else
                        log_info("policy %s: deleted", txn->items[i].name);
        txn_apply(txn);
        map_config_prune(m);
        return;
fail:
        txn_fail_item(txn, txn->items[i].name, &e);
        error_done(&e);
}

static int check_expect(const Policy *old, const DaemonExpect *expect, Error *reterr) {
        if (!expect || expect->kind == EXPECT_NOTHING)
                return 0;
        if (!old)
                return error_set(reterr, EEXIST, "precondition_failed",
                                 "If-Match: %s: there is no policy to match", strna(expect->as_given));
        if (expect->kind == EXPECT_ANY)
                return 0;
        if (expect->kind != EXPECT_GENERATION || expect->generation != old->generation)
                return error_set(reterr, EEXIST, "precondition_failed",
                                 "If-Match: %s does not match the policy's generation \"%" PRIu64 "\"",
                                 strna(expect->as_given), old->generation);
        return 0;
}

/* A transaction of n policies, or NULL when it was answered already (out of memory). */
static PolicyTxn *txn_new(Manager *m, size_t n, bool dry_run, PolicyDoneFunc done, void *userdata) {
        PolicyTxn *txn = calloc(1, sizeof(*txn));
        Error e = ERROR_NULL;

        if (!txn || !(txn->items = calloc(n, sizeof(TxnItem)))) {
                free(txn);
                error_set(&e, ENOMEM, "internal_error", "out of memory");
                daemon_count_error(m, e.code);
                done(m, NULL, &e, userdata);
                error_done(&e);
                return NULL;
        }
        txn->m = m;
        txn->n_alloc = n;
        txn->dry_run = dry_run;
        txn->done = done;
        txn->userdata = userdata;
        return txn;
}

/* The transaction's next item, on the policy name: refused (-1, reterr set) for a hog's policy (which
 * the API does not change: fix tells what to do instead), the fleet's (to the API) or a local one (to
 * the fleet), or If-Match not met. */
static TxnItem *txn_add(PolicyTxn *txn, const char *name, const DaemonExpect *expect, bool fleet,
                        const char *fix, Error *reterr) {
        Manager *m = txn->m;
        TxnItem *item = &txn->items[txn->n_items];

        if (!(item->name = strdup(name))) {
                error_set(reterr, ENOMEM, "internal_error", "out of memory");
                return NULL;
        }
        txn->n_items++;
        item->txn = txn;
        resolution_init(&item->res, m, txn->dry_run, on_resolved);
        item->res.resolver.fresh = true;
        item->old = policy_ref(daemon_policy_get(m, name));
        if (item->old && item->old->hog_path)
                error_set(reterr, EBUSY, "hog_owned",
                          "policy %s is declared by the hog %s; %s that file and send clsd SIGHUP", name,
                          item->old->hog_path, fix);
        else if (item->old && !fleet && item->old->fleet_revision)
                error_set(reterr, EBUSY, "fleet_owned",
                          "policy %s comes from the fleet (etcd revision %" PRIu64 "); %s it there "
                          "(clsctl fleet)",
                          name, item->old->fleet_revision, fix);
        else if (item->old && fleet && !item->old->fleet_revision)
                error_set(reterr, EBUSY, "name_taken",
                          "a local policy %s (the API's) holds the name; the fleet's is not applied here",
                          name);
        if (reterr->code || check_expect(item->old, expect, reterr) < 0)
                return NULL;
        return item;
}

/* The new policy of the item from body (NULL: it is removed, which needs a policy to remove). */
static int item_set(TxnItem *item, json_t *body, uint64_t fleet_revision, Error *reterr) {
        if (!body) {
                if (!item->old)
                        return error_set(reterr, ENOENT, "policy_not_found", "no policy %s", item->name);
                return 0;
        }
        if (policy_from_json(item->name, body, &item->policy, reterr) < 0)
                return -EINVAL;
        item->policy->generation = item->old ? item->old->generation + 1 : 1;
        item->policy->doc->generation = item->policy->generation;
        item->policy->fleet_revision = fleet_revision;
        return 0;
}

static void policy_change(Manager *m, const char *name, json_t *body, const DaemonExpect *expect,
                          bool dry_run, PolicyDoneFunc done, void *userdata) {
        PolicyTxn *txn = txn_new(m, 1, dry_run, done, userdata);
        TxnItem *item;
        Error e = ERROR_NULL;

        if (!txn)
                return;
        item = txn_add(txn, name, expect, false, body ? "change" : "remove", &e);
        if (item && body && !item->old && m->config.policies_max) {
                size_t n = 0;
                for (size_t i = 0; i < m->n_policies; i++)
                        n += !m->policies[i]->hog_path && !m->policies[i]->fleet_revision;
                if (n >= m->config.policies_max)
                        error_set(
                                &e, ENOSPC, "quota_exceeded",
                                "%zu policies are stored, the most --max-policies allows; delete one first",
                                n);
        }
        if (!item || e.code || item_set(item, body, 0, &e) < 0) {
                txn_fail(txn, &e);
                error_done(&e);
                return;
        }
        txn_step(txn);
}

void daemon_policy_put(Manager *m, const char *name, json_t *body, const DaemonExpect *expect, bool dry_run,
                       PolicyDoneFunc done, void *userdata) {
        policy_change(m, name, body, expect, dry_run, done, userdata);
}

void daemon_policy_delete(Manager *m, const char *name, const DaemonExpect *expect, PolicyDoneFunc done,
                          void *userdata) {
        policy_change(m, name, NULL, expect, false, done, userdata);
}

void daemon_fleet_policies_change(Manager *m, const FleetPolicyChange *v, size_t n, PolicyDoneFunc done,
                                  void *userdata) {
        PolicyTxn *txn = txn_new(m, MAX(n, 1u), false, done, userdata);
        Error e = ERROR_NULL;

        if (!txn)
                return;
        for (size_t i = 0; i < n; i++) {
                TxnItem *item = txn_add(txn, v[i].name, NULL, true, v[i].body ? "change" : "remove", &e);
                if (!item || item_set(item, v[i].body, v[i].revision ?: 1, &e) < 0) {
                        txn_fail_item(txn, v[i].name, &e);
                        error_done(&e);
                        return;
                }
        }
        txn_step(txn);
}
