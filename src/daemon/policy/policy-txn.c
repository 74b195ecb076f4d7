/* policy-txn.c: a policy transaction: a PUT of a policy, its dry run, a DELETE; the fleet's several at
 * once. The objects are resolved and each program loaded once (a program set holds them: program-set.h),
 * then every policy is stored at once (store_policies_commit()), the set replaced, and every
 * interface it matches or no longer matches changed once (policy-match.c); the answer says how each
 * ended. One refused, none is stored. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"
#include "log.h"
#include "map-config.h"
#include "policy-match.h"
#include "program-set.h"
#include "resolution.h"
#include "daemon-changes.h"
#include "daemon-metrics.h"
#include "daemon-policies.h"
#include "store-policy.h"

typedef struct PolicyTxn PolicyTxn;

/* One policy of a transaction: put (policy) or removed (NULL). */
typedef struct TxnItem {
        PolicyTxn *txn;
        char *name;
        Policy *policy;
        Policy *old;
        ObjectResolution res;
        ProgramSet programs; /* the new policy's, held until every interface holds its own */
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

static void txn_free(PolicyTxn *txn) {
        if (!txn)
                return;
        sd_event_source_disable_unref(txn->defer);
        for (size_t i = 0; i < txn->n_items; i++) {
                TxnItem *item = &txn->items[i];
                program_set_done(&item->programs);
                resolution_done(&item->res);
                policy_unref(item->policy);
                policy_unref(item->old);
                free(item->name);
        }
        free(txn->items);
        for (size_t i = 0; i < txn->n_results; i++) {
                free(txn->results[i].netns);
                free(txn->results[i].by);
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
                r->policy_state = POLICY_IFACE_FAILED;
                error_set(&r->error, e->error, e->code, "%s", strna(e->message));
        } else if (!it)
                r->removed = true;
        else {
                const Policy *p = txn->items[0].policy;
                const char *by = NULL;
                r->state = it->state;
                if (it->state == IFACE_FAILED && it->error.code)
                        error_set(&r->error, it->error.error, it->error.code, "%s",
                                  strna(it->error.message));
                r->policy_state = p && iface_has_policy(it, p) ? iface_policy_outcome(it, p, &by)
                                  : it->state == IFACE_FAILED  ? POLICY_IFACE_FAILED
                                  : it->state == IFACE_PENDING ? POLICY_IFACE_PENDING
                                                               : POLICY_IFACE_CONFIGURED;
                if (by)
                        r->by = strdup(by);
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
                /* what the apply would answer: a priority a foreign filter holds fails the interface */
                r->state = dr->refused.code ? IFACE_FAILED : dr->pending ? IFACE_PENDING : IFACE_CONFIGURED;
                if (dr->refused.code)
                        error_set(&r->error, dr->refused.error, dr->refused.code, "%s",
                                  strna(dr->refused.message));
                r->policy_state = dr->policy_state;
                /* an interface left with nothing declared is removed, as the apply answers it */
                r->removed = dr->dropped && !r->matched;
                r->dry_run = *dr;
                /* the plan is the result's now */
                ((DryRun *) dr)->doc = NULL, ((DryRun *) dr)->plan_doc = NULL;
                ((DryRun *) dr)->programs = NULL, ((DryRun *) dr)->n_programs = 0;
                ((DryRun *) dr)->steps = NULL, ((DryRun *) dr)->n_steps = 0;
                ((DryRun *) dr)->refused = (Error) ERROR_NULL, ((DryRun *) dr)->policy_by = NULL;
                if (r->dry_run.policy_by)
                        r->by = strdup(r->dry_run.policy_by);
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
        Policy **v = calloc(m->policies.n + txn->n_items + 1, sizeof(Policy *));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < m->policies.n; i++)
                if (!txn_names(txn, m->policies.v[i]->name))
                        v[n++] = m->policies.v[i];
        for (size_t i = 0; i < txn->n_items; i++)
                if (txn->items[i].policy)
                        v[n++] = txn->items[i].policy;
        *ret = v;
        *ret_n = n;
        return 0;
}

static bool txn_concerns(void *userdata, const Iface *it, Policy *const *v, size_t n, bool *ret_matched) {
        PolicyTxn *txn = userdata;
        bool matched = false;

        for (size_t i = 0; i < n; i++)
                matched = matched || txn_puts(txn, v[i]);
        *ret_matched = matched;
        return matched || (it && txn_held(txn, it));
}

static void *txn_follow(void *userdata, const char *netns, const char *ifname, bool matched) {
        PolicyTxn *txn = userdata;
        PolicyIfaceDone *d;
        int idx = txn_result_add(txn, netns, ifname, matched);

        if (idx < 0 || !(d = calloc(1, sizeof(*d))))
                return NULL;
        *d = (PolicyIfaceDone){ .txn = txn, .index = (size_t) idx };
        txn->pending++;
        return d;
}

/* The new set becomes the manager's (references moved), then every interface concerned changes: once,
 * whatever number of the transaction's policies it gains or loses. */
static void txn_apply(PolicyTxn *txn) {
        Manager *m = txn->m;
        PolicySet set = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        PolicyFollower fw = { .dry_run = txn->dry_run,
                              .doc = txn->items[0].policy ? txn->items[0].policy->doc : NULL,
                              .resolver = &txn->items[0].res.resolver,
                              .concerns = txn_concerns,
                              .follow = txn_follow,
                              .done = on_iface_done,
                              .dry_done = on_iface_dry_run,
                              .userdata = txn };

        if (txn_set(txn, &set.v, &set.n) < 0) {
                error_oom(&e);
                txn_fail(txn, &e);
                return;
        }
        if (!txn->dry_run) {
                for (size_t i = 0; i < set.n; i++)
                        policy_ref(set.v[i]);
                policy_set_replace(&m->policies, set.v, set.n);
                policy_sweep(m, &m->policies, &fw);
        } else {
                policy_sweep(m, &set, &fw);
                free(set.v);
        }
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

static void on_programs_loaded(void *userdata) {
        txn_wake(userdata);
}

/* The item's programs loaded and verified (0), under way (-EAGAIN), or refused. */
static int item_acquire(PolicyTxn *txn, TxnItem *item, Error *reterr) {
        if (!item->programs.m &&
            program_set_init(&item->programs, txn->m, item->policy, on_programs_loaded, txn) < 0)
                return error_oom(reterr);
        return program_set_acquire(&item->programs, reterr);
}

/* A refusal of the item named: with several items, the message says whose and that none is applied. */
static void txn_fail_item(PolicyTxn *txn, const char *name, const Error *e) {
        _cleanup_error_ Error e2 = ERROR_NULL;

        if (txn->n_alloc == 1) {
                txn_fail(txn, e);
                return;
        }
        error_set(&e2, e->error, e->code,
                  "policy %s: %s (none of the %zu policies of this change is applied)", name,
                  strna(e->message), txn->n_alloc);
        txn_fail(txn, &e2);
}

/* Resolve, load (not in a dry run), store, apply: as far as it can go now. Every policy's programs are
 * loaded and verified, once, before anything is stored; one refused, none is stored. */
static void txn_step(PolicyTxn *txn) {
        Manager *m = txn->m;
        _cleanup_free_ Policy **put = NULL;
        _cleanup_free_ char **removed = NULL;
        size_t n_put = 0, n_removed = 0, i;
        _cleanup_error_ Error e = ERROR_NULL;
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
                error_oom(&e);
                txn_fail(txn, &e);
                return;
        }
        for (i = 0; i < txn->n_items; i++)
                if (txn->items[i].policy)
                        put[n_put++] = txn->items[i].policy;
                else
                        removed[n_removed++] = txn->items[i].name;
        if (store_policies_commit(m->store, put, n_put, removed, n_removed, &e) < 0) {
                txn_fail(txn, &e);
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
}

/* A transaction of n policies, or NULL when it was answered already (out of memory). */
static PolicyTxn *txn_new(Manager *m, size_t n, bool dry_run, PolicyDoneFunc done, void *userdata) {
        PolicyTxn *txn = calloc(1, sizeof(*txn));
        _cleanup_error_ Error e = ERROR_NULL;

        if (!txn || !(txn->items = calloc(n, sizeof(TxnItem)))) {
                free(txn);
                error_oom(&e);
                daemon_count_error(m, e.code);
                done(m, NULL, &e, userdata);
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
                error_oom(reterr);
                return NULL;
        }
        txn->n_items++;
        item->txn = txn;
        resolution_init(&item->res, m, txn->dry_run, on_resolved);
        item->res.resolver.fresh = true;

        item->old = policy_ref(daemon_policy_get(m, name));
        if (item->old && item->old->hog_path)
                error_set(reterr, EBUSY, ERROR_HOG_OWNED,
                          "policy %s is declared by the hog %s; %s that file and send clsd SIGHUP", name,
                          item->old->hog_path, fix);
        else if (item->old && !fleet && item->old->fleet_revision)
                error_set(reterr, EBUSY, ERROR_FLEET_OWNED,
                          "policy %s comes from the fleet (etcd revision %" PRIu64 "); %s it there "
                          "(clsctl fleet)",
                          name, item->old->fleet_revision, fix);
        else if (item->old && fleet && !item->old->fleet_revision)
                error_set(reterr, EBUSY, ERROR_NAME_TAKEN,
                          "a local policy %s (the API's) holds the name; the fleet's is not applied here",
                          name);
        if (reterr->code ||
            expect_check(expect, "policy", item->old, item->old ? item->old->generation : 0, reterr) < 0)
                return NULL;
        return item;
}

/* The new policy of the item from body (NULL: it is removed, which needs a policy to remove). */
static int item_set(TxnItem *item, json_t *body, uint64_t fleet_revision, Error *reterr) {
        if (!body) {
                if (!item->old)
                        return error_set(reterr, ENOENT, ERROR_POLICY_NOT_FOUND, "no policy %s", item->name);
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
        _cleanup_error_ Error e = ERROR_NULL;

        if (!txn)
                return;
        item = txn_add(txn, name, expect, false, body ? "change" : "remove", &e);
        if (item && body && !item->old && m->config.policies_max) {
                size_t n = policy_set_count_local(&m->policies);
                if (n >= m->config.policies_max)
                        error_set(
                                &e, ENOSPC, ERROR_QUOTA_EXCEEDED,
                                "%zu policies are stored, the most --max-policies allows; delete one first",
                                n);
        }
        if (!item || e.code || item_set(item, body, 0, &e) < 0) {
                txn_fail(txn, &e);
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
        _cleanup_error_ Error e = ERROR_NULL;

        if (!txn)
                return;
        for (size_t i = 0; i < n; i++) {
                TxnItem *item = txn_add(txn, v[i].name, NULL, true, v[i].body ? "change" : "remove", &e);
                /* a fleet's change reaches its nodes at once: their pulls spread at the registry's pace */
                if (item)
                        item->res.pull_nodes = v[i].pull_nodes;
                if (!item || item_set(item, v[i].body, v[i].revision ?: 1, &e) < 0) {
                        txn_fail_item(txn, v[i].name, &e);
                        return;
                }
        }
        txn_step(txn);
}

void daemon_fleet_policy_dry_run(Manager *m, const FleetPolicyChange *v, PolicyDoneFunc done,
                                 void *userdata) {
        PolicyTxn *txn = txn_new(m, 1, true, done, userdata);
        _cleanup_error_ Error e = ERROR_NULL;
        TxnItem *item;

        if (!txn)
                return;
        item = txn_add(txn, v->name, NULL, true, "change", &e);
        if (item)
                item->res.pull_nodes = v->pull_nodes; /* (its pulls spread as an apply's) */
        if (!item || item_set(item, v->body, v->revision ?: 1, &e) < 0) {
                txn_fail_item(txn, v->name, &e);
                return;
        }
        txn_step(txn);
}
