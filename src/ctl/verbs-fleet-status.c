/* verbs-fleet-status.c: clsctl fleet nodes and status: the fleet's live nodes, and node × policy as each
 * node says it applied it (only keys bound to a live lease count). */

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "fleet-keys.h"
#include "etcd.h"
#include "output.h"
#include "sha256.h"

/* etcd refuses a request over 1.5 MiB by default; base64 makes an object a third bigger. */
#define FLEET_OBJECT_MAX (1024u * 1024)

/* ---- nodes ---- */

int verb_fleet_nodes(const Ctl *c, char **args _unused_) {
        _cleanup_(json_decrefp) json_t *nodes = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        json_t *v;
        size_t i;
        int r;

        r = fleet_listing(c, "nodes", &nodes);
        if (r != 0)
                return r < 0 ? r : 0;
        t = table_new("NODE", "STATE", "LABELS", "VERSION", "KERNEL", "ACT_BPF", "TCX", "REVISION", NULL);
        if (!t)
                return ctl_oom();
        json_array_foreach (nodes, i, v) {
                char *labels = NULL;
                size_t n = 0;
                FILE *f = open_memstream(&labels, &n);
                if (!f)
                        return ctl_oom();
                fleet_labels_print(f, json_object_get(v, "labels"));
                fclose(f);
                table_add_json(t, json_object_get(v, "node"));
                /* a record no live lease holds: its node is gone, or someone else wrote it */
                table_add(t, json_is_true(json_object_get(v, "_bound")) ? "live" : "unbound");
                table_add(t, labels);
                table_add_fields(
                        t, v,
                        (const char *const[]){ "version", "kernel", "act_bpf", "tcx", "revision", NULL });
                free(labels);
        }
        if (table_rows(t) == 0) {
                puts("(no node)");
                return 0;
        }
        return ctl_table_print(t);
}

/* ---- status: node × policy ---- */

/* The node's status of the policy: under status/NODE/POLICY, saying so, bound to the node record's own
 * (live) lease; a key anyone else wrote is none. */
static json_t *find_status(json_t *statuses, json_t *node_record, const char *node, const char *policy) {
        _cleanup_free_ char *key = NULL;
        json_int_t lease = json_integer_value(json_object_get(node_record, "_lease"));
        json_t *v;
        size_t i;

        if (asprintf(&key, "%s/%s", node, policy) < 0)
                return NULL;
        json_array_foreach (statuses, i, v)
                if (json_is_true(json_object_get(v, "_bound")) &&
                    json_integer_value(json_object_get(v, "_lease")) == lease &&
                    streq_ptr(json_string_value(json_object_get(v, "_key")), key) &&
                    streq_ptr(json_string_value(json_object_get(v, "node")), node) &&
                    streq_ptr(json_string_value(json_object_get(v, "policy")), policy))
                        return v;
        return NULL;
}

static bool node_selected(json_t *policy, json_t *node) {
        FleetPolicy fp = { 0 };
        FleetLabel *labels = NULL;
        size_t n = 0;
        const char *k;
        json_t *v;
        bool selected = false;

        json_t *copy = json_deep_copy(policy);
        json_object_del(copy, "_key");
        json_object_del(copy, "_revision");
        json_object_foreach (json_object_get(node, "labels"), k, v) {
                FleetLabel *nl = realloc(labels, (n + 1) * sizeof(FleetLabel));
                if (!nl)
                        break;
                labels = nl;
                snprintf(labels[n].key, sizeof(labels[n].key), "%s", k);
                snprintf(labels[n].value, sizeof(labels[n].value), "%s", json_string_value(v) ?: "");
                n++;
        }
        if (fleet_policy_parse(copy, &fp, NULL) >= 0)
                selected = fleet_policy_selects(&fp, json_string_value(json_object_get(node, "node")) ?: "",
                                                labels, n);
        fleet_policy_done(&fp);
        json_decref(copy);
        free(labels);
        return selected;
}

/* "2 (1 configured, 1 conflict)": the interfaces a status lists, by the policy's state on each. */
static char *ifaces_text(json_t *ifaces) {
        static const char *const states[] = { "configured", "pending", "failed", "conflict", "overridden" };
        size_t counts[ELEMENTSOF(states)] = { 0 }, n = json_array_size(ifaces), k = 0;
        char *s = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&s, &size);

        if (!f)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const char *st = json_string_value(json_object_get(json_array_get(ifaces, i), "state"));
                for (size_t j = 0; st && j < ELEMENTSOF(states); j++)
                        if (streq(st, states[j]))
                                counts[j]++;
        }
        fprintf(f, "%zu", n);
        for (size_t j = 0; j < ELEMENTSOF(states); j++)
                if (counts[j])
                        fprintf(f, "%s%zu %s", k++ ? ", " : " (", counts[j], states[j]);
        if (k)
                fputc(')', f);
        fclose(f);
        return s;
}

/* A row of node × policy from the node's status s (NULL: none yet) of the policy etcd has at revision. */
static json_t *status_row(const char *node, const char *name, json_t *s, json_int_t revision) {
        json_int_t asked = json_integer_value(json_object_get(s, "revision"));
        const char *state = s ? json_string_value(json_object_get(s, "state")) : "no status";
        json_t *row = json_pack(
                "{s:s,s:s,s:s,s:I,s:O*,s:O*,s:O*,s:O*,s:O*,s:O*}", "node", node, "policy", name, "state",
                state ?: "?", "revision", revision, "asked_revision", json_object_get(s, "revision"),
                "held_revision", json_object_get(s, "held_revision"), "committed_revision",
                json_object_get(s, "committed_revision"), "error", json_object_get(s, "error"), "interfaces",
                json_object_get(s, "interfaces"), "rollout", json_object_get(s, "rollout"));

        if (!row)
                return NULL;
        json_object_set_new(row, "lag", json_integer(s ? revision - asked : revision));
        /* a status of an older revision says the node has not caught up */
        if (s && asked != revision)
                json_object_set_new(row, "state", json_string("behind"));
        return row;
}

static bool policy_listed(json_t *policies, const char *name) {
        json_t *p;
        size_t i;

        json_array_foreach (policies, i, p)
                if (streq_ptr(json_string_value(json_object_get(p, "_key")), name))
                        return true;
        return false;
}

/* A live node's status of a policy etcd no longer has: a node that requires signed policies keeps one
 * removed without a signature, and says so. Appended to rows (policy NULL: every one). */
/* What the rows found, for the exit status. */
typedef struct RowsSeen {
        bool found, failed, conflict, invalid;
} RowsSeen;

static void rows_seen_add(RowsSeen *seen, const json_t *row) {
        const char *state = json_string_value(json_object_get(row, "state"));

        seen->failed = seen->failed || streq_ptr(state, "failed");
        seen->conflict = seen->conflict || streq_ptr(state, "conflict");
}

static int kept_rows(json_t *statuses, json_t *nodes, json_t *policies, const char *policy, json_t *rows,
                     RowsSeen *seen) {
        json_t *s, *n;
        size_t i, k;

        json_array_foreach (statuses, i, s) {
                const char *node = json_string_value(json_object_get(s, "node")),
                           *name = json_string_value(json_object_get(s, "policy"));
                json_int_t revision = json_integer_value(json_object_get(s, "revision"));
                if (!node || !name || (policy && !streq(policy, name)) || policy_listed(policies, name))
                        continue;
                json_array_foreach (nodes, k, n)
                        if (streq_ptr(json_string_value(json_object_get(n, "node")), node) &&
                            json_is_true(json_object_get(n, "_bound")) &&
                            find_status(statuses, n, node, name)) {
                                json_t *row = status_row(node, name, s, revision);
                                if (!row || json_array_append_new(rows, row) < 0)
                                        return ctl_oom();
                                seen->found = true;
                                rows_seen_add(seen, row);
                                break;
                        }
        }
        return 0;
}

/* Every (node, policy) where the policy selects the node: the node's status, or none yet (only: that
 * policy's). Appended to rows. */
static int policy_rows(json_t *policies, json_t *nodes, json_t *statuses, const char *only, json_t *rows,
                       RowsSeen *seen) {
        json_t *p, *n;
        size_t i, k;

        json_array_foreach (policies, i, p) {
                const char *name = json_string_value(json_object_get(p, "_key"));
                json_int_t revision = json_integer_value(json_object_get(p, "_revision"));
                if (!name || (only && !streq(only, name)))
                        continue;
                seen->found = true;
                if (json_object_get(p, "_invalid")) {
                        /* no node can read it, nor say which nodes it selects */
                        json_t *row = json_pack("{s:n,s:s,s:s,s:I,s:n,s:n,s:O}", "node", "policy", name,
                                                "state", "invalid", "revision", revision, "held_revision",
                                                "lag", "error", json_object_get(p, "_invalid"));
                        if (!row)
                                return ctl_oom();
                        json_array_append_new(rows, row);
                        seen->invalid = true;
                        continue;
                }
                json_array_foreach (nodes, k, n) {
                        const char *node = json_string_value(json_object_get(n, "node"));
                        /* only live nodes count: a record no live lease holds is not a node (unbound) */
                        if (!node || !json_is_true(json_object_get(n, "_bound")) ||
                            !streq_ptr(json_string_value(json_object_get(n, "_key")), node) ||
                            !node_selected(p, n))
                                continue;
                        json_t *s = find_status(statuses, n, node, name);
                        /* a signed removal: only the nodes that still hold it (they refused it) */
                        if (!s && json_is_true(json_object_get(p, "removed")))
                                continue;
                        json_t *row = status_row(node, name, s, revision);
                        if (!row)
                                return ctl_oom();
                        rows_seen_add(seen, row);
                        json_array_append_new(rows, row);
                }
        }
        return 0;
}

int verb_fleet_status(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *policies = NULL, *nodes = NULL, *statuses = NULL, *leases = NULL,
                                       *rows = json_array();
        _cleanup_(table_freep) Table *t = NULL;
        json_t *p;
        size_t i;
        RowsSeen seen = { .found = !args[0] };
        int r;

        if (!rows)
                return ctl_oom();
        r = fleet_client(c, &ec);
        if (r < 0)
                return r;
        r = fleet_live_leases(ec, &leases);
        if (r < 0)
                return r;
        r = fleet_range_json(ec, c, "policies", NULL, &policies, NULL);
        if (r < 0)
                return r;
        r = fleet_range_json(ec, c, "nodes", leases, &nodes, NULL);
        if (r < 0)
                return r;
        r = fleet_range_json(ec, c, "status", leases, &statuses, NULL);
        if (r < 0)
                return r;
        if (policy_rows(policies, nodes, statuses, args[0], rows, &seen) < 0)
                return -ENOMEM;
        if (kept_rows(statuses, nodes, policies, args[0], rows, &seen) < 0)
                return -ENOMEM;
        if (!seen.found)
                return ctl_error(-ENOENT, "no fleet policy %s", args[0]);
        if (c->json)
                r = ctl_print_json(rows);
        else {
                /* the revision the node is asked for, the one whose filters it holds, the one it committed
                 */
                t = table_new("NODE", "POLICY", "STATE", "REVISION", "HELD", "COMMITTED", "INTERFACES",
                              "ERROR", NULL);
                if (!t)
                        return ctl_oom();
                json_array_foreach (rows, i, p) {
                        _cleanup_free_ char *ifaces = json_object_get(p, "interfaces")
                                                              ? ifaces_text(json_object_get(p, "interfaces"))
                                                              : NULL;
                        table_add_fields(t, p,
                                         (const char *const[]){ "node", "policy", "state", "asked_revision",
                                                                "held_revision", "committed_revision",
                                                                NULL });
                        table_add(t, ifaces);
                        table_add_json(t, json_object_get(p, "error"));
                }
                r = 0;
                if (table_rows(t) == 0)
                        puts("(no node is selected by a fleet policy)");
                else if ((r = ctl_table_print(t)) < 0)
                        return r;
        }
        if (r >= 0 && seen.failed)
                return ctl_error(-EIO, "a node failed to apply a fleet policy");
        if (r >= 0 && seen.conflict)
                return ctl_error(-EIO, "a fleet policy is in conflict on a node: neither of the policies is "
                                       "attached there");
        if (r >= 0 && seen.invalid)
                return ctl_error(-EINVAL, "a fleet policy is invalid: no node applies it");
        return r;
}
