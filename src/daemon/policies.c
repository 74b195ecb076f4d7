/* policies.c: policies, one document for every interface that matches, now and later. A policy is one
 * more source of an interface's filters (after a hog and the interface's own document; among policies
 * the lowest "order" on a hook), composed in iface.c and reconciled like any interface: matching makes
 * a CHANGE_POLICY of each interface whose set of policies differs, queued with its other work.
 *
 * A PUT resolves the objects and loads each program once (a probe interface holds them, outside the
 * table), stores the policy once, then changes every interface it matches or no longer matches, and
 * answers with how each ended. Link events re-match one link; a namespace appearing, every link in it. */
#include <stdio.h>
#include <string.h>

#include "change.h"
#include "log.h"

typedef struct PolicyTxn {
        Manager *m;
        char *name;
        Policy *policy; /* the new policy (NULL: DELETE) */
        Policy *old;
        bool dry_run;
        ObjectResolution res;
        Iface *probe; /* holds the new policy's programs until every interface holds its own */
        sd_event_source *defer;
        PolicyResult *results;
        size_t n_results, cap_results;
        size_t pending; /* interface changes not answered yet */
        bool swept;
        PolicyDoneFunc done;
        void *userdata;
} PolicyTxn;

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
                        matched = matched || (txn->policy && v[i] == txn->policy);
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
                        c->doc = document_ref(txn->policy ? txn->policy->doc : NULL);
                        c->shared_resolver = &txn->res.resolver;
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
        concerned = txn && txn->old && it && it->visible && iface_has_policy(it, txn->old);
        for (size_t i = 0; txn && i < k; i++)
                concerned = concerned || v[i] == txn->policy;
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
                queue_policies(m, it->netns, it->ifname, NULL, 0, txn,
                               txn && txn->old && iface_has_policy(it, txn->old));
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

/* ---- a transaction: PUT, its dry run, DELETE ---- */

static void txn_free(PolicyTxn *txn) {
        if (!txn)
                return;
        sd_event_source_disable_unref(txn->defer);
        if (txn->probe) {
                loads_forget(txn->m, txn->probe);
                iface_free(txn->probe, txn->m->registry);
        }
        resolution_done(&txn->res);
        for (size_t i = 0; i < txn->n_results; i++) {
                free(txn->results[i].netns);
                error_done(&txn->results[i].error);
                dry_run_done(&txn->results[i].dry_run);
        }
        free(txn->results);
        policy_unref(txn->policy);
        policy_unref(txn->old);
        free(txn->name);
        free(txn);
}

static void txn_answer(PolicyTxn *txn, const Error *e) {
        PolicyOutcome o = { .policy = txn->policy,
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

/* The policy set with the transaction's policy in place of the old one (or without it). */
static int txn_set(PolicyTxn *txn, Policy ***ret, size_t *ret_n) {
        Manager *m = txn->m;
        Policy **v = calloc(m->n_policies + 2, sizeof(Policy *));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_policies; i++)
                if (!streq(m->policies[i]->name, txn->name))
                        v[n++] = m->policies[i];
        if (txn->policy)
                v[n++] = txn->policy;
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The new set becomes the manager's (references moved), then every interface concerned changes. */
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
        txn_wake((PolicyTxn *) ((char *) res - offsetof(PolicyTxn, res)));
}

static void on_probe_resume(void *userdata) {
        txn_wake(userdata);
}

/* Resolve, load (not in a dry run), store, apply: as far as it can go now. */
static void txn_step(PolicyTxn *txn) {
        Manager *m = txn->m;
        Error e = ERROR_NULL;
        int r;

        r = resolution_run(&txn->res, txn->policy->doc, &e);
        if (r == -EAGAIN)
                return;
        if (r < 0)
                goto fail;
        if (txn->dry_run) {
                txn_apply(txn);
                return;
        }
        if (!txn->probe) {
                r = iface_new(NULL, txn->name, &txn->probe);
                if (r >= 0)
                        r = iface_set_policies(txn->probe, &txn->policy, 1);
                if (r >= 0)
                        r = iface_set_documents(txn->probe, NULL, NULL, NULL, NULL, NULL, m->kernel.tcx,
                                                m->registry);
                if (r < 0) {
                        error_set(&e, ENOMEM, "internal_error", "out of memory");
                        goto fail;
                }
                txn->probe->on_resume = on_probe_resume;
                txn->probe->on_resume_userdata = txn;
        }
        /* Every program loaded and verified, once, before anything is stored. */
        if (!txn->probe->programs_held) {
                r = iface_acquire_programs(m, txn->probe, txn->probe, &e);
                if (r == -EAGAIN)
                        return;
                if (r < 0)
                        goto fail;
        }
        r = store_policy_save(m->store, txn->policy, &e);
        if (r < 0)
                goto fail;
        log_info("policy %s: generation %" PRIu64 " stored", txn->name, txn->policy->generation);
        txn_apply(txn);
        return;
fail:
        txn_fail(txn, &e);
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

/* A transaction on the policy name, or NULL when it was answered already: out of memory, a hog's
 * policy (which the API does not change: fix tells what to do instead), the fleet's (to the API) or a
 * local one (to the fleet), If-Match not met. */
static PolicyTxn *txn_begin(Manager *m, const char *name, const DaemonExpect *expect, bool dry_run,
                            bool fleet, const char *fix, PolicyDoneFunc done, void *userdata) {
        PolicyTxn *txn = calloc(1, sizeof(*txn));
        Error e = ERROR_NULL;

        if (!txn || !(txn->name = strdup(name))) {
                free(txn);
                error_set(&e, ENOMEM, "internal_error", "out of memory");
                done(m, NULL, &e, userdata);
                error_done(&e);
                return NULL;
        }
        txn->m = m;
        txn->dry_run = dry_run;
        txn->done = done;
        txn->userdata = userdata;
        resolution_init(&txn->res, m, dry_run, on_resolved);
        txn->old = policy_ref(daemon_policy_get(m, name));
        if (txn->old && txn->old->hog_path)
                error_set(&e, EBUSY, "hog_owned",
                          "policy %s is declared by the hog %s; %s that file and send clsd SIGHUP", name,
                          txn->old->hog_path, fix);
        else if (txn->old && !fleet && txn->old->fleet_revision)
                error_set(&e, EBUSY, "fleet_owned",
                          "policy %s comes from the fleet (etcd revision %" PRIu64 "); %s it there "
                          "(clsctl fleet)",
                          name, txn->old->fleet_revision, fix);
        else if (txn->old && fleet && !txn->old->fleet_revision)
                error_set(&e, EBUSY, "name_taken",
                          "a local policy %s (the API's) holds the name; the fleet's is not applied here",
                          name);
        if (e.code || check_expect(txn->old, expect, &e) < 0) {
                txn_fail(txn, &e);
                error_done(&e);
                return NULL;
        }
        return txn;
}

static void policy_put(Manager *m, const char *name, json_t *body, const DaemonExpect *expect, bool dry_run,
                       uint64_t fleet_revision, PolicyDoneFunc done, void *userdata) {
        PolicyTxn *txn = txn_begin(m, name, expect, dry_run, fleet_revision > 0, "change", done, userdata);
        Error e = ERROR_NULL;

        if (!txn)
                return;
        if (policy_from_json(name, body, &txn->policy, &e) < 0) {
                txn_fail(txn, &e);
                error_done(&e);
                return;
        }
        txn->policy->generation = txn->old ? txn->old->generation + 1 : 1;
        txn->policy->doc->generation = txn->policy->generation;
        txn->policy->fleet_revision = fleet_revision;
        txn_step(txn);
}

void daemon_policy_put(Manager *m, const char *name, json_t *body, const DaemonExpect *expect, bool dry_run,
                       PolicyDoneFunc done, void *userdata) {
        policy_put(m, name, body, expect, dry_run, 0, done, userdata);
}

void daemon_fleet_policy_put(Manager *m, const char *name, json_t *body, uint64_t revision,
                             PolicyDoneFunc done, void *userdata) {
        policy_put(m, name, body, NULL, false, revision ?: 1, done, userdata);
}

static void policy_delete(Manager *m, const char *name, const DaemonExpect *expect, bool fleet,
                          PolicyDoneFunc done, void *userdata) {
        PolicyTxn *txn;
        Error e = ERROR_NULL;

        if (!daemon_policy_get(m, name)) {
                error_set(&e, ENOENT, "policy_not_found", "no policy %s", name);
                daemon_count_error(m, e.code);
                done(m, NULL, &e, userdata);
                error_done(&e);
                return;
        }
        txn = txn_begin(m, name, expect, false, fleet, "remove", done, userdata);
        if (!txn)
                return;
        if (store_policy_remove(m->store, name, &e) < 0) {
                txn_fail(txn, &e);
                error_done(&e);
                return;
        }
        log_info("policy %s: deleted", name);
        txn_apply(txn);
}

void daemon_policy_delete(Manager *m, const char *name, const DaemonExpect *expect, PolicyDoneFunc done,
                          void *userdata) {
        policy_delete(m, name, expect, false, done, userdata);
}

void daemon_fleet_policy_delete(Manager *m, const char *name, PolicyDoneFunc done, void *userdata) {
        policy_delete(m, name, NULL, true, done, userdata);
}
