/* verbs-fleet-diff.c: clsctl fleet diff FILE, a fleet-wide dry run. The policy is read as fleet apply
 * reads it (its objects uploaded to etcd, its images checked and pinned), then written nowhere a node
 * applies from: at diffs/ID, under a lease of this command's own. Each node it selects answers from its
 * own kernel (src/fleet/diff.c: the daemon's dry run of it as a fleet policy) at diff-answers/NODE/ID,
 * under the node's lease, so no node's API need be reachable. Printed: the nodes it takes and those it
 * leaves out and why, each taken node's interfaces and what the policy would do there, the waves its
 * rollout would use. Exit 0: nothing would change; 1: something would; 2: a conflict, a refusal, or a
 * node that did not answer in time. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "etcd-rollout.h"
#include "fleet-keys.h"
#include "fleet-rollout.h"

#define DIFF_WAIT_DEFAULT_SEC 10.0
#define DIFF_POLL_USEC (100 * 1000)

/* Whether the live node record row is taken by the policy, and if not, why (into why). */
static bool taken(const FleetPolicy *fp, const FleetNodeInfo *n, char *why, size_t size) {
        if (!fleet_policy_selects(fp, n->node, n->labels, n->n_labels)) {
                snprintf(why, size, "its name and labels are not selected");
                return false;
        }
        return fleet_policy_qualifies(fp, &n->facts, why, size);
}

/* The answers of request id so far: {node: answer}. */
static int answers_read(EtcdClient *ec, const Ctl *c, const char *id, json_t *into) {
        _cleanup_free_ char *prefix = fleet_key(fleet_prefix_of(c), "diff-answers", NULL, NULL);
        EtcdKv *kvs = NULL;
        size_t n = 0;
        int r;

        if (!prefix)
                return ctl_oom();
        r = fleet_range_kvs(ec, prefix, false, &kvs, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                const char *rest = kvs[i].key + strlen(prefix), *slash = strchr(rest, '/');
                _cleanup_free_ char *node = NULL;
                json_t *a;
                if (!slash || !streq(slash + 1, id))
                        continue;
                /* the node is the key's (etcd lets a node write only its own): never what the value says */
                if (!(node = strndup(rest, slash - rest)))
                        return ctl_oom();
                a = json_loadb(kvs[i].value, kvs[i].value_size, 0, NULL);
                if (a && json_is_object(a) && fleet_node_name_valid(node) &&
                    streq_ptr(json_string_value(json_object_get(a, "node")), node))
                        json_object_set_new(into, node, a);
                else
                        json_decref(a);
        }
        etcd_kvs_free(kvs, n);
        return 0;
}

/* The request deleted (its lease revoked), and each answer read (a node deletes its own too, but one that
 * lost etcd meanwhile would keep it as long as its lease). */
static void request_remove(EtcdClient *ec, const Ctl *c, const char *key, uint64_t lease, const char *id,
                           json_t *answers) {
        _cleanup_(json_decrefp) json_t *a = NULL, *b = NULL;
        const char *node;
        json_t *v;
        char lid[32];

        if (key)
                (void) fleet_call(ec, "/v3/kv/deleterange", etcd_delete_body(key, false), &a);
        snprintf(lid, sizeof(lid), "%" PRIu64, lease);
        (void) fleet_call(ec, "/v3/lease/revoke", json_pack("{s:s}", "ID", lid), &b);
        json_object_foreach (answers, node, v) {
                _cleanup_free_ char *k = fleet_key(fleet_prefix_of(c), "diff-answers", node, id);
                _cleanup_(json_decrefp) json_t *d = NULL;
                if (k)
                        (void) fleet_call(ec, "/v3/kv/deleterange", etcd_delete_body(k, false), &d);
        }
}

/* What one node's answer says would happen: 0 nothing, 1 changes, 2 a conflict or a refusal. */
static int answer_verdict(json_t *answer) {
        json_t *i;
        size_t k;
        int v = 0;

        if (json_object_get(answer, "error"))
                return 2;
        if (json_is_true(json_object_get(answer, "policy_changed")))
                v = 1; /* (the node would store it anew, whatever its filters) */
        json_array_foreach (json_object_get(answer, "interfaces"), k, i) {
                const char *state = json_string_value(json_object_get(i, "state")) ?: "";
                if (streq(state, "conflict") || json_object_get(i, "refused") || json_object_get(i, "error"))
                        v = 2;
                else if (json_is_true(json_object_get(i, "changed")) && v < 1)
                        v = 1;
        }
        return v;
}

static void row(Table *t, const char *node, const char *iface, const char *what, const char *detail) {
        table_add(t, node);
        table_add(t, iface);
        table_add(t, what);
        table_add(t, detail);
}

static int print_table(json_t *out) {
        _cleanup_(table_freep) Table *t = table_new("NODE", "INTERFACE", "WOULD", "WHY", NULL);
        json_t *n, *i, *s, *w;
        size_t k, a, b;

        if (!t)
                return ctl_oom();
        json_array_foreach (json_object_get(out, "nodes"), k, n) {
                const char *node = json_string_value(json_object_get(n, "node"));
                json_t *answer = json_object_get(n, "answer");
                if (!json_is_true(json_object_get(n, "selected"))) {
                        row(t, node, "-", "left out", json_string_value(json_object_get(n, "why")));
                        continue;
                }
                if (!answer) {
                        row(t, node, "-", "no answer", json_string_value(json_object_get(n, "why")));
                        continue;
                }
                if (json_object_get(answer, "error")) {
                        json_t *e = json_object_get(answer, "error");
                        _cleanup_free_ char *why = NULL;
                        if (asprintf(&why, "%s: %s", json_string_value(json_object_get(e, "code")),
                                     json_string_value(json_object_get(e, "message"))) < 0)
                                why = NULL;
                        row(t, node, "-", "refused", why);
                        continue;
                }
                if (json_array_size(json_object_get(answer, "interfaces")) == 0)
                        row(t, node, "-", "nothing", "no interface here matches");
                json_array_foreach (json_object_get(answer, "interfaces"), a, i) {
                        const char *ifname = json_string_value(json_object_get(i, "ifname"));
                        const char *state = json_string_value(json_object_get(i, "state")) ?: "";
                        const char *by = json_string_value(json_object_get(i, "by"));
                        json_t *refused = json_object_get(i, "refused");
                        if (refused) {
                                row(t, node, ifname, "conflict",
                                    json_string_value(json_object_get(refused, "message")));
                                continue;
                        }
                        if (streq(state, "conflict") || streq(state, "overridden")) {
                                row(t, node, ifname, state, by);
                                continue;
                        }
                        json_array_foreach (json_object_get(i, "steps"), b, s) {
                                _cleanup_free_ char *what = NULL;
                                const char *action = json_string_value(json_object_get(s, "action"));
                                if (asprintf(&what, "%s %s %s prio %d", action,
                                             json_string_value(json_object_get(s, "hook")),
                                             json_string_value(json_object_get(s, "name")),
                                             (int) json_integer_value(json_object_get(s, "priority"))) < 0)
                                        what = NULL;
                                row(t, node, ifname, what, json_string_value(json_object_get(s, "reason")));
                        }
                }
        }
        if (ctl_table_print(t) < 0)
                return -EIO;
        json_array_foreach (json_object_get(out, "waves"), k, w) {
                _cleanup_free_ char *names = NULL;
                json_array_foreach (w, a, n) {
                        char *v = NULL;
                        if (asprintf(&v, "%s%s%s", names ?: "", names ? ", " : "", json_string_value(n)) < 0)
                                return ctl_oom();
                        free(names);
                        names = v;
                }
                printf("wave %zu: %s\n", k + 1, names ?: "-");
        }
        return 0;
}

/* The request written at diffs/ID under a lease of its own, a little longer than the wait. On failure
 * nothing is left (the lease revoked). */
static int request_put(EtcdClient *ec, const Ctl *c, json_t *envelope, double wait, const char *id,
                       char **ret_key, uint64_t *ret_lease) {
        _cleanup_(json_decrefp) json_t *lease_answer = NULL, *put_answer = NULL, *none = json_object();
        _cleanup_free_ char *key = fleet_key(fleet_prefix_of(c), "diffs", id, NULL),
                            *text = json_dumps(envelope, JSON_COMPACT);
        uint64_t lease = 0;
        int r;

        r = fleet_call(ec, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t) wait + 10),
                       &lease_answer);
        if (r < 0)
                return r;
        lease = strtoull(json_string_value(json_object_get(lease_answer, "ID")) ?: "0", NULL, 10);
        if (!lease)
                return ctl_error(-EIO, "etcd granted no lease for the request");
        r = key && text && none ? fleet_call(ec, "/v3/kv/put", etcd_put_body(key, text, strlen(text), lease),
                                             &put_answer)
                                : ctl_oom();
        if (r < 0) {
                request_remove(ec, c, NULL, lease, id, none);
                return r;
        }
        *ret_key = TAKE_PTR(key);
        *ret_lease = lease;
        return 0;
}

/* The answers of the taken nodes (taken[i] for infos[i]), read until each has answered or the wait is
 * over. */
static int answers_wait(EtcdClient *ec, const Ctl *c, const char *id, const FleetNodeInfos *ni,
                        const bool *taken_v, size_t expected, double wait, json_t *answers) {
        uint64_t deadline = clock_usec(CLOCK_MONOTONIC) + (uint64_t) (wait * 1e6);

        for (;;) {
                size_t got = 0;
                int r;
                json_object_clear(answers);
                r = answers_read(ec, c, id, answers);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < ni->n; i++)
                        got += taken_v[i] && json_object_get(answers, ni->v[i].node) != NULL;
                if (got >= expected || clock_usec(CLOCK_MONOTONIC) >= deadline)
                        return 0;
                usleep(DIFF_POLL_USEC);
        }
}

/* Every node with a record: taken (and its answer, or that it gave none) or left out, and why; the
 * verdict (0, 1, 2) raised by each answer. */
static json_t *nodes_json(json_t *rows, const FleetNodeInfos *ni, const FleetPolicy *fp, json_t *answers,
                          double wait, int *verdict) {
        _cleanup_(json_decrefp) json_t *nodes = json_array();
        json_t *rec;
        size_t k;
        char why[128];

        if (!nodes)
                return NULL;
        json_array_foreach (rows, k, rec) {
                const char *node = json_string_value(json_object_get(rec, "node"));
                const FleetNodeInfo *info = NULL;
                json_t *o, *a;
                if (!node)
                        continue;
                for (size_t i = 0; i < ni->n; i++)
                        if (streq_ptr(ni->v[i].node, node))
                                info = &ni->v[i];
                if (!info)
                        o = json_pack("{s:s, s:b, s:s}", "node", node, "selected", false, "why",
                                      "not connected (no live lease holds its record)");
                else if (!taken(fp, info, why, sizeof(why)))
                        o = json_pack("{s:s, s:b, s:s}", "node", node, "selected", false, "why", why);
                else if ((a = json_object_get(answers, node))) {
                        o = json_pack("{s:s, s:b, s:O}", "node", node, "selected", true, "answer", a);
                        *verdict = MAX(*verdict, answer_verdict(a));
                } else {
                        o = json_pack("{s:s, s:b, s:o}", "node", node, "selected", true, "why",
                                      json_sprintf("no answer within %.0f s", wait));
                        *verdict = 2;
                }
                if (!o || json_array_append_new(nodes, o) < 0)
                        return NULL;
        }
        return TAKE_PTR(nodes);
}

/* The waves its rollout would use, over the nodes alive now: [[node, ...], ...]. */
static json_t *waves_json(const FleetPolicy *fp, const FleetNodeInfos *ni, Error *reterr) {
        FleetRolloutPlan plan = { 0 };
        json_t *waves;

        if (fleet_rollout_plan_make(fp, ni->v, ni->n, &plan, reterr) < 0)
                return NULL;
        waves = json_array();
        for (size_t w = 0; waves && w < plan.n_waves; w++) {
                json_t *wave = json_array();
                for (size_t i = 0; wave && plan.waves[w][i]; i++)
                        json_array_append_new(wave, json_string(plan.waves[w][i]));
                json_array_append_new(waves, wave);
        }
        fleet_rollout_plan_done(&plan);
        if (!waves)
                error_oom(reterr);
        return waves;
}

int verb_fleet_diff(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *envelope = NULL, *rows = NULL, *answers = json_object(), *out = NULL,
                                       *nodes = NULL;
        _cleanup_(fleet_policy_done) FleetPolicy fp = { 0 };
        _cleanup_(fleet_node_infos_done) FleetNodeInfos ni = { 0 };
        _cleanup_free_ char *name = NULL, *key = NULL;
        _cleanup_free_ bool *taken_v = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        double wait = c->wait_sec;
        size_t expected = 0;
        uint64_t lease = 0;
        char id[40], why[128];
        int r, verdict = 0;

        if (!answers)
                return ctl_oom();
        r = fleet_client(c, &ec);
        if (r < 0)
                return r;
        r = fleet_policy_file_read(ec, c, args[0], &name, &envelope);
        if (r < 0)
                return r;
        if (fleet_policy_parse(envelope, &fp, &e) < 0)
                return ctl_error(-EINVAL, "%s: %s", args[0], e.message);
        r = fleet_live_nodes(ec, c, &rows, &ni.v, &ni.n);
        if (r < 0)
                return r;
        if (!(taken_v = calloc(ni.n + 1, sizeof(bool))))
                return ctl_oom();
        for (size_t i = 0; i < ni.n; i++)
                expected += taken_v[i] = taken(&fp, &ni.v[i], why, sizeof(why));
        /* the nodes that would pull its images spread their pulls over them, as an apply's: the nodes
         * are told how many, and the wait grows with them (a registry's default pace, 60 a second) */
        if (json_object_set_new(envelope, "selected", json_integer((json_int_t) expected)) < 0)
                return ctl_oom();
        if (wait <= 0)
                wait = DIFF_WAIT_DEFAULT_SEC + (double) expected / 60.0;
        snprintf(id, sizeof(id), "%llx-%04x", (unsigned long long) time(NULL), (unsigned) getpid() & 0xffff);
        r = request_put(ec, c, envelope, wait, id, &key, &lease);
        if (r < 0)
                return r;
        r = answers_wait(ec, c, id, &ni, taken_v, expected, wait, answers);
        request_remove(ec, c, key, lease, id, answers);
        if (r < 0)
                return r;
        nodes = nodes_json(rows, &ni, &fp, answers, wait, &verdict);
        out = nodes ? json_pack("{s:s, s:s, s:O, s:b}", "policy", fp.name, "id", id, "nodes", nodes,
                                "changes", verdict >= 1)
                    : NULL;
        if (!out)
                return ctl_oom();
        if (fp.rollout.present) {
                json_t *waves = waves_json(&fp, &ni, &e);
                if (!waves)
                        return ctl_error(-EINVAL, "%s", e.message);
                json_object_set_new(out, "waves", waves);
        }
        r = c->json ? ctl_print_json(out) : print_table(out);
        if (r < 0)
                return r;
        return verdict; /* the caller turns 1 and 2 into the exit status, as diff(1) */
}
