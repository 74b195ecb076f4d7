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

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

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

int verb_fleet_diff(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *envelope = NULL, *rows = NULL, *answers = json_object(), *out = NULL,
                                       *nodes = json_array(), *lease_answer = NULL, *put_answer = NULL;
        _cleanup_(fleet_policy_done) FleetPolicy fp = { 0 };
        _cleanup_free_ char *name = NULL, *key = NULL, *text = NULL;
        FleetNodeInfo *infos = NULL;
        size_t n_infos = 0;
        _cleanup_error_ Error e = ERROR_NULL;
        char id[40], lease_id[32];
        uint64_t lease, deadline;
        double wait = c->wait_sec;
        int r, verdict = 0;

        if (!answers || !nodes)
                return ctl_oom();
        r = fleet_client(c, &ec);
        if (r < 0)
                return r;
        r = fleet_policy_file_read(ec, c, args[0], &name, &envelope);
        if (r < 0)
                return r;
        if (fleet_policy_parse(envelope, &fp, &e) < 0)
                return ctl_error(-EINVAL, "%s: %s", args[0], e.message);
        r = fleet_live_nodes(ec, c, &rows, &infos, &n_infos);
        if (r < 0)
                return r;
        size_t expected = 0;
        char why[128];
        for (size_t i = 0; i < n_infos; i++)
                expected += taken(&fp, &infos[i], why, sizeof(why));
        /* the nodes that would pull its images spread their pulls over them, as an apply's: the nodes
         * are told how many, and the wait grows with them (a registry's default pace, 60 a second) */
        if (json_object_set_new(envelope, "selected", json_integer((json_int_t) expected)) < 0) {
                fleet_node_infos_free(infos, n_infos);
                return ctl_oom();
        }
        if (wait <= 0)
                wait = DIFF_WAIT_DEFAULT_SEC + (double) expected / 60.0;
        /* the request: under a lease of its own, a little longer than the wait */
        r = fleet_call(ec, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t) wait + 10),
                       &lease_answer);
        if (r < 0) {
                fleet_node_infos_free(infos, n_infos);
                return r;
        }
        lease = strtoull(json_string_value(json_object_get(lease_answer, "ID")) ?: "0", NULL, 10);
        snprintf(lease_id, sizeof(lease_id), "%" PRIu64, lease);
        snprintf(id, sizeof(id), "%llx-%04x", (unsigned long long) time(NULL), (unsigned) getpid() & 0xffff);
        key = fleet_key(fleet_prefix_of(c), "diffs", id, NULL);
        text = json_dumps(envelope, JSON_COMPACT);
        if (!key || !text || !lease) {
                fleet_node_infos_free(infos, n_infos);
                if (lease)
                        request_remove(ec, c, NULL, lease, id, answers);
                return lease ? ctl_oom() : ctl_error(-EIO, "etcd granted no lease for the request");
        }
        r = fleet_call(ec, "/v3/kv/put", etcd_put_body(key, text, strlen(text), lease), &put_answer);
        if (r < 0) {
                fleet_node_infos_free(infos, n_infos);
                request_remove(ec, c, NULL, lease, id, answers);
                return r;
        }
        /* the nodes it takes answer; wait for each, at most the wait */
        deadline = now_usec() + (uint64_t) (wait * 1e6);
        for (;;) {
                size_t got = 0;
                json_object_clear(answers);
                r = answers_read(ec, c, id, answers);
                if (r < 0)
                        break;
                for (size_t i = 0; i < n_infos; i++)
                        got += taken(&fp, &infos[i], why, sizeof(why)) &&
                               json_object_get(answers, infos[i].node) != NULL;
                if (got >= expected || now_usec() >= deadline)
                        break;
                usleep(DIFF_POLL_USEC);
        }
        request_remove(ec, c, key, lease, id, answers);
        if (r < 0) {
                fleet_node_infos_free(infos, n_infos);
                return r;
        }
        /* every node with a record: taken (and its answer) or left out, and why */
        json_t *rec;
        size_t k;
        json_array_foreach (rows, k, rec) {
                const char *node = json_string_value(json_object_get(rec, "node"));
                const FleetNodeInfo *info = NULL;
                json_t *o;
                for (size_t i = 0; i < n_infos; i++)
                        if (streq_ptr(infos[i].node, node))
                                info = &infos[i];
                if (!node)
                        continue;
                if (!info) {
                        o = json_pack("{s:s, s:b, s:s}", "node", node, "selected", false, "why",
                                      "not connected (no live lease holds its record)");
                } else if (!taken(&fp, info, why, sizeof(why))) {
                        o = json_pack("{s:s, s:b, s:s}", "node", node, "selected", false, "why", why);
                } else {
                        json_t *a = json_object_get(answers, node);
                        o = json_pack("{s:s, s:b}", "node", node, "selected", true);
                        if (o && a) {
                                json_object_set(o, "answer", a);
                                verdict = MAX(verdict, answer_verdict(a));
                        } else if (o) {
                                json_object_set_new(o, "why", json_sprintf("no answer within %.0f s", wait));
                                verdict = 2;
                        }
                }
                if (!o || json_array_append_new(nodes, o) < 0) {
                        fleet_node_infos_free(infos, n_infos);
                        return ctl_oom();
                }
        }
        out = json_pack("{s:s, s:s, s:O}", "policy", fp.name, "id", id, "nodes", nodes);
        /* the waves its rollout would use, over the nodes alive now */
        if (out && fp.rollout.present) {
                FleetRolloutPlan plan = { 0 };
                json_t *waves = json_array();
                if (fleet_rollout_plan_make(&fp, infos, n_infos, &plan, &e) < 0) {
                        json_decref(waves);
                        fleet_node_infos_free(infos, n_infos);
                        return ctl_error(-EINVAL, "%s", e.message);
                }
                for (size_t w = 0; waves && w < plan.n_waves; w++) {
                        json_t *wave = json_array();
                        for (size_t i = 0; wave && plan.waves[w][i]; i++)
                                json_array_append_new(wave, json_string(plan.waves[w][i]));
                        json_array_append_new(waves, wave);
                }
                fleet_rollout_plan_done(&plan);
                json_object_set_new(out, "waves", waves);
        }
        fleet_node_infos_free(infos, n_infos);
        if (!out)
                return ctl_oom();
        json_object_set_new(out, "changes", json_boolean(verdict >= 1));
        r = c->json ? ctl_print_json(out) : print_table(out);
        if (r < 0)
                return r;
        return verdict; /* the caller turns 1 and 2 into the exit status, as diff(1) */
}
