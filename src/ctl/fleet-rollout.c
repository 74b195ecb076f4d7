/* fleet-rollout.c: what clsctl fleet apply (and rollback) writes beside a fleet policy, in one
 * transaction with it: the rollout's id and its plan of waves, made from the records of the nodes alive
 * now (the nodes then follow the plan by themselves: nothing here must stay up), and the policy's
 * history entry (who applied it, when, the whole policy, and what changed), kept until deleted so that a
 * rollback can take any earlier revision back. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fleet-keys.h"
#include "fleet-rollout.h"
#include "oci-ref.h"

static uint64_t realtime_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

int fleet_policy_current(EtcdClient *ec, const Ctl *c, const char *name, json_t **ret,
                         uint64_t *ret_revision) {
        _cleanup_free_ char *key = fleet_key(fleet_prefix_of(c), "policies", name, NULL);

        *ret = NULL;
        *ret_revision = 0;
        return key ? fleet_get_json(ec, key, ret, ret_revision) : ctl_oom();
}

void fleet_node_infos_free(FleetNodeInfo *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free((FleetLabel *) v[i].labels);
        free(v);
}

int fleet_live_nodes(EtcdClient *ec, const Ctl *c, json_t **ret_rows, FleetNodeInfo **ret, size_t *ret_n) {
        _cleanup_(json_decrefp) json_t *leases = NULL, *rows = NULL;
        FleetNodeInfo *v;
        json_t *row;
        size_t n = 0, i;
        int r;

        r = fleet_live_leases(ec, &leases);
        if (r < 0)
                return r;
        r = fleet_range_json(ec, c, "nodes", leases, &rows, NULL);
        if (r < 0)
                return r;
        if (!(v = calloc(json_array_size(rows) + 1, sizeof(FleetNodeInfo))))
                return ctl_oom();
        json_array_foreach (rows, i, row) {
                const char *node = json_string_value(json_object_get(row, "node")), *k;
                json_t *labels = json_object_get(row, "labels"), *lv;
                FleetLabel *l;
                if (!json_is_true(json_object_get(row, "_bound")) || !fleet_node_name_valid(node))
                        continue; /* a record no live node holds is no node of the rollout */
                if (!(l = calloc(json_object_size(labels) + 1, sizeof(FleetLabel)))) {
                        fleet_node_infos_free(v, n);
                        return ctl_oom();
                }
                v[n] = (FleetNodeInfo){ .node = node,
                                        .labels = l,
                                        .facts = {
                                                .kernel = json_string_value(json_object_get(row, "kernel")),
                                                .tcx = json_is_true(json_object_get(row, "tcx")),
                                                .act_bpf = json_is_true(json_object_get(row, "act_bpf")) } };
                json_object_foreach (labels, k, lv)
                        if (json_is_string(lv) && v[n].n_labels < FLEET_LABELS_MAX) {
                                snprintf(l[v[n].n_labels].key, sizeof(l[0].key), "%s", k);
                                snprintf(l[v[n].n_labels].value, sizeof(l[0].value), "%s",
                                         json_string_value(lv));
                                v[n].n_labels++;
                        }
                n++;
        }
        *ret_rows = TAKE_PTR(rows);
        *ret = v;
        *ret_n = n;
        return 0;
}

/* ---- what changed ---- */

static const char *const hooks[] = { "ingress", "egress" };

static json_t *filter_named(json_t *envelope, const char *hook, const char *name) {
        json_t *f;
        size_t i;

        json_array_foreach (json_object_get(envelope, hook), i, f)
                if (streq_ptr(json_string_value(json_object_get(f, "name")), name))
                        return f;
        return NULL;
}

/* "new policy", or what differs between old and new: filters added, removed, changed (and which of
 * their fields), the selector, the match, the order, the rollout, the checks. */
static char *summary_of(json_t *old, json_t *new) {
        static const char *const fields[] = { "nodes", "match", "order", "rollout", "health" };
        char *s = NULL;
        size_t n = 0;
        FILE *f;
        json_t *x;
        size_t i;

        if (!old)
                return strdup("new policy");
        if (!(f = open_memstream(&s, &n)))
                return NULL;
        for (size_t h = 0; h < ELEMENTSOF(hooks); h++) {
                json_array_foreach (json_object_get(new, hooks[h]), i, x) {
                        const char *name = json_string_value(json_object_get(x, "name"));
                        json_t *was = filter_named(old, hooks[h], name);
                        if (!was)
                                fprintf(f, "%s%s %s added", ftell(f) ? "; " : "", hooks[h], strna(name));
                        else if (!json_equal(was, x)) {
                                const char *k;
                                json_t *v;
                                fprintf(f, "%s%s %s:", ftell(f) ? "; " : "", hooks[h], strna(name));
                                json_object_foreach (x, k, v)
                                        if (!json_equal(v, json_object_get(was, k)))
                                                fprintf(f, " %s", k);
                                json_object_foreach (was, k, v)
                                        if (!json_object_get(x, k))
                                                fprintf(f, " %s (gone)", k);
                        }
                }
                json_array_foreach (json_object_get(old, hooks[h]), i, x) {
                        const char *name = json_string_value(json_object_get(x, "name"));
                        if (!filter_named(new, hooks[h], name))
                                fprintf(f, "%s%s %s removed", ftell(f) ? "; " : "", hooks[h], strna(name));
                }
        }
        for (size_t k = 0; k < ELEMENTSOF(fields); k++) {
                json_t *a = json_object_get(old, fields[k]), *b = json_object_get(new, fields[k]);
                /* a rollout's id is each apply's own */
                if (streq(fields[k], "rollout") && a && b) {
                        json_t *ac = json_deep_copy(a), *bc = json_deep_copy(b);
                        json_object_del(ac, "id");
                        json_object_del(bc, "id");
                        bool same = json_equal(ac, bc);
                        json_decref(ac);
                        json_decref(bc);
                        if (same)
                                continue;
                } else if ((!a && !b) || (a && b && json_equal(a, b)))
                        continue;
                fprintf(f, "%s%s changed", ftell(f) ? "; " : "", fields[k]);
        }
        if (ftell(f) == 0)
                fputs("no change", f);
        fclose(f);
        return s;
}

/* ---- the transaction ---- */

static int put_op(json_t *ops, const char *key, json_t *value) {
        _cleanup_free_ char *text = value ? json_dumps(value, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_t *put = text ? etcd_put_body(key, text, strlen(text), 0) : NULL;

        if (!put || json_array_append_new(ops, json_pack("{s:o}", "request_put", put)) < 0)
                return ctl_oom();
        return 0;
}

static int delete_op(json_t *ops, char *key, bool prefix) {
        _cleanup_free_ char *k = key;
        json_t *del = k ? etcd_delete_body(k, prefix) : NULL;

        if (!del || json_array_append_new(ops, json_pack("{s:o}", "request_delete_range", del)) < 0)
                return ctl_oom();
        return 0;
}

int fleet_rollout_forget_ops(const Ctl *c, const char *name, const char *id, json_t *ops) {
        const char *prefix = fleet_prefix_of(c);
        char *nodes = NULL;
        int r = delete_op(ops, fleet_rollout_key(prefix, name, id, id ? "" : NULL), true);

        if (r < 0)
                return r;
        if (id)
                nodes = fleet_rollout_node_key(prefix, name, id, -1, -1, NULL);
        else if (asprintf(&nodes, "%srollout-nodes/%s/", prefix, name) < 0)
                nodes = NULL;
        return delete_op(ops, nodes, true);
}

int fleet_txn(EtcdClient *ec, json_t *compares, json_t *ops, json_t **ret_answer) {
        int r = fleet_call(ec, "/v3/kv/txn", json_pack("{s:O,s:O}", "compare", compares, "success", ops),
                           ret_answer);
        if (r < 0)
                return r;
        return json_is_true(json_object_get(*ret_answer, "succeeded")) ? 1 : 0;
}

/* A compare of the transaction: key's mod_revision is revision (0: the key does not exist). */
int fleet_compare_mod(json_t *compares, const char *key, uint64_t revision) {
        _cleanup_free_ char *b64 = NULL;
        char rev[32];

        if (etcd_b64_encode(key, strlen(key), &b64) < 0)
                return ctl_oom();
        snprintf(rev, sizeof(rev), "%" PRIu64, revision);
        if (json_array_append_new(compares, json_pack("{s:s,s:s,s:s,s:s}", "key", b64, "target", "MOD",
                                                      "result", "EQUAL", "mod_revision", rev)) < 0)
                return ctl_oom();
        return 0;
}

/* The rollout id of an envelope etcd has at revision (NULL: it has none). */
static const char *envelope_rollout_id(json_t *envelope, uint64_t revision,
                                       char buf[FLEET_ROLLOUT_ID_MAX + 1]) {
        json_t *rollout = json_object_get(envelope, "rollout");
        const char *id = json_string_value(json_object_get(rollout, "id"));

        if (!rollout)
                return NULL;
        if (id)
                return id;
        snprintf(buf, FLEET_ROLLOUT_ID_MAX + 1, "r%" PRIu64, revision);
        return buf;
}

int fleet_supersede_ops(EtcdClient *ec, const Ctl *c, const char *name, json_t *old, uint64_t old_revision,
                        const char *by_id, const char *by, json_t *compares, json_t *ops) {
        _cleanup_free_ char *pkey = fleet_key(fleet_prefix_of(c), "policies", name, NULL), *skey = NULL;
        _cleanup_(json_decrefp) json_t *state = NULL, *j = NULL;
        char buf[FLEET_ROLLOUT_ID_MAX + 1];
        const char *id = old ? envelope_rollout_id(old, old_revision, buf) : NULL;
        FleetRolloutState s;
        uint64_t state_revision = 0;
        int r;

        if (!pkey)
                return ctl_oom();
        /* written over what was read: another apply meanwhile makes this one read again */
        r = fleet_compare_mod(compares, pkey, old_revision);
        if (r < 0 || !id)
                return r;
        if (!(skey = fleet_rollout_key(fleet_prefix_of(c), name, id, "state")))
                return ctl_oom();
        r = fleet_get_json(ec, skey, &state, &state_revision);
        if (r < 0)
                return r;
        if (fleet_rollout_state_parse(state, &s, NULL) < 0 || fleet_rollout_state_ended(&s))
                return 0; /* it ended: what it says stays */
        /* (no state key yet: its first wave, since its plan) */
        s.phase = ROLLOUT_SUPERSEDED;
        snprintf(s.superseded_by, sizeof(s.superseded_by), "%s", strempty(by_id));
        snprintf(s.by, sizeof(s.by), "%.127s", by);
        if (by_id)
                snprintf(s.why, sizeof(s.why), "superseded by rollout %s (applied by %.100s)", by_id, by);
        else
                snprintf(s.why, sizeof(s.why), "superseded: the policy was removed by %.100s", by);
        r = fleet_compare_mod(compares, skey, state_revision);
        if (r < 0)
                return r;
        return (j = fleet_rollout_state_to_json(&s)) ? put_op(ops, skey, j) : ctl_oom();
}

/* The history keeps a policy's last FLEET_HISTORY_KEEP revisions: the oldest go, with their rollouts'
 * keys, in the transaction that writes a new one (etcd's keys do not grow with every apply). */
int fleet_prune_ops(EtcdClient *ec, const Ctl *c, const char *name, json_t *ops) {
        _cleanup_free_ char *hprefix = fleet_history_key(fleet_prefix_of(c), name, NULL);
        EtcdKv *kvs = NULL;
        size_t n = 0;
        int r = hprefix ? fleet_range_kvs(ec, hprefix, true, &kvs, &n) : ctl_oom();

        for (size_t i = 0; r >= 0 && n >= FLEET_HISTORY_KEEP && i <= n - FLEET_HISTORY_KEEP; i++) {
                const char *id = kvs[i].key + strlen(hprefix);
                r = delete_op(ops, strdup(kvs[i].key), false);
                if (r >= 0 && *id && !strchr(id, '/'))
                        r = fleet_rollout_forget_ops(c, name, id, ops);
        }
        etcd_kvs_free(kvs, n);
        return r;
}

int fleet_removal_ops(const Ctl *c, const char *name, uint64_t old_revision, json_t *ops) {
        EtcdCredentials creds = fleet_credentials(c);
        _cleanup_(json_decrefp) json_t *entry = NULL;
        _cleanup_free_ char *hkey = NULL;
        char id[FLEET_ROLLOUT_ID_MAX + 1], by[256];

        etcd_identity(&creds, by, sizeof(by));
        snprintf(id, sizeof(id), "%llu-%04x", (unsigned long long) realtime_ms(),
                 (unsigned) (getpid() ^ rand()) & 0xffff);
        entry = json_pack("{s:s,s:s,s:s,s:I,s:b,s:s,s:I}", "policy", name, "id", id, "by", by, "time_ms",
                          (json_int_t) realtime_ms(), "removed", true, "summary", "removed", "previous",
                          (json_int_t) old_revision);
        if (!entry || !(hkey = fleet_history_key(fleet_prefix_of(c), name, id)))
                return ctl_oom();
        return put_op(ops, hkey, entry);
}

/* Whether the envelope names an image (oci://…): its nodes pull it from a registry. */
static bool envelope_pulls(json_t *envelope) {
        json_t *f, *a;
        size_t i, k;

        for (size_t h = 0; h < ELEMENTSOF(hooks); h++)
                json_array_foreach (json_object_get(envelope, hooks[h]), i, f) {
                        if (oci_ref_is(strempty(json_string_value(json_object_get(f, "object")))))
                                return true;
                        json_array_foreach (json_object_get(f, "actions"), k, a)
                                if (oci_ref_is(strempty(json_string_value(json_object_get(a, "object")))))
                                        return true;
                }
        return false;
}

/* "selected": of the live nodes, those the policy selects (and its kernel gates let in), for a policy that
 * names images (their pulls spread over them at the registry's pace: registries' pulls_per_second) or has
 * a rollout: a node learns from it how big the fleet has grown since it counted (its lease's length). */
static int selected_op(const FleetPolicy *fp, const FleetNodeInfo *nodes, size_t n, json_t *envelope) {
        size_t selected = 0;
        char why[128];

        for (size_t i = 0; i < n; i++)
                selected += fleet_policy_selects(fp, nodes[i].node, nodes[i].labels, nodes[i].n_labels) &&
                            fleet_policy_qualifies(fp, &nodes[i].facts, why, sizeof(why));
        return json_object_set_new(envelope, "selected", json_integer((json_int_t) selected)) < 0 ? ctl_oom()
                                                                                                  : 0;
}

/* Its rollout planned over the nodes alive now. */
static int plan_op(const Ctl *c, const FleetPolicy *fp, const FleetNodeInfo *nodes, size_t n, const char *by,
                   json_t *ops) {
        _cleanup_(json_decrefp) json_t *j = NULL;
        _cleanup_free_ char *key = NULL;
        FleetRolloutPlan plan = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        r = fleet_rollout_plan_make(fp, nodes, n, &plan, &e);
        if (r < 0)
                return ctl_error(r, "%s", e.message);
        plan.created_ms = realtime_ms();
        snprintf(plan.by, sizeof(plan.by), "%.127s", by);
        j = fleet_rollout_plan_to_json(&plan);
        key = fleet_rollout_key(fleet_prefix_of(c), fp->name, fp->rollout.id, "plan");
        FleetRolloutState done;
        bool empty = fleet_rollout_plan_done_state(&plan, &done);
        fleet_rollout_plan_done(&plan);
        if (!j || !key)
                return ctl_oom();
        r = put_op(ops, key, j);
        if (r >= 0 && empty) {
                _cleanup_(json_decrefp) json_t *state = fleet_rollout_state_to_json(&done);
                _cleanup_free_ char *skey =
                        fleet_rollout_key(fleet_prefix_of(c), fp->name, fp->rollout.id, "state");
                r = state && skey ? put_op(ops, skey, state) : ctl_oom();
        }
        return r;
}

/* --sign KEY: the envelope signed at a serial above the one etcd has (the time in milliseconds, or
 * that serial and one when the clock is behind it): a node takes none lower than one it applied. */
int fleet_sign(const Ctl *c, json_t *envelope, json_t *old) {
        json_t *was = json_object_get(json_object_get(old, "signed"), "serial");
        uint64_t serial = realtime_ms(),
                 before = json_is_integer(was) ? (uint64_t) json_integer_value(was) : 0;
        SecretKey *k = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        if (secret_key_load(c->sign_key, &k, &e) < 0)
                return ctl_error(-EINVAL, "--sign %s", e.message);
        r = fleet_policy_sign(envelope, k, MAX(serial, before + 1), &e);
        secret_key_free(k);
        if (r < 0)
                r = ctl_error(r, "%s", e.message);
        return r;
}

int fleet_apply_ops(EtcdClient *ec, const Ctl *c, json_t *envelope, const char *summary, json_t *compares,
                    json_t *ops) {
        _cleanup_(json_decrefp) json_t *old = NULL, *entry = NULL, *rows = NULL;
        _cleanup_free_ char *key = NULL, *hkey = NULL, *what = NULL;
        EtcdCredentials creds = fleet_credentials(c);
        _cleanup_(fleet_node_infos_done) FleetNodeInfos ni = { 0 };
        _cleanup_(fleet_policy_done) FleetPolicy fp = { 0 };
        char id[FLEET_ROLLOUT_ID_MAX + 1], by[256];
        uint64_t old_revision;
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        /* --waves: this apply rolls out so (the policy's other rollout fields, or their defaults) */
        if (c->waves) {
                json_t *rollout = json_object_get(envelope, "rollout");
                FleetWave *v = NULL;
                size_t n = 0;
                if (fleet_waves_parse(c->waves, &v, &n, &e) < 0)
                        return ctl_error(-EINVAL, "--waves %s: %s", c->waves, e.message);
                json_t *waves = fleet_waves_to_json(v, n);
                free(v);
                if (!rollout && json_object_set_new(envelope, "rollout", rollout = json_object()) < 0)
                        rollout = NULL;
                if (!waves || !rollout) {
                        json_decref(waves);
                        return ctl_oom();
                }
                if (json_object_set_new(rollout, "waves", waves) < 0)
                        return ctl_oom();
        }
        /* an id of this apply's own: its rollout's keys and its history entry */
        snprintf(id, sizeof(id), "%llu-%04x", (unsigned long long) realtime_ms(),
                 (unsigned) (getpid() ^ rand()) & 0xffff);
        if (json_object_get(envelope, "rollout") &&
            json_object_set_new(json_object_get(envelope, "rollout"), "id", json_string(id)) < 0)
                return ctl_oom();
        if (fleet_policy_parse(envelope, &fp, &e) < 0)
                return ctl_error(-EINVAL, "%s", e.message);
        etcd_identity(&creds, by, sizeof(by));
        r = fleet_policy_current(ec, c, fp.name, &old, &old_revision);
        if (r < 0)
                return r;
        /* the live nodes, read once: what a policy naming images selects, and its rollout's plan */
        bool pulls = envelope_pulls(envelope);
        json_object_del(envelope, "selected"); /* (a file's own count is its apply's no more) */
        if (pulls || fp.rollout.present) {
                r = fleet_live_nodes(ec, c, &rows, &ni.v, &ni.n);
                if (r < 0)
                        return r;
                /* (said whenever the nodes were read anyway: a node also sizes its lease by it) */
                r = selected_op(&fp, ni.v, ni.n, envelope);
                if (r < 0)
                        return r;
        }
        /* a signature is made here or not at all: one the envelope brought signed something else */
        (void) json_object_del(envelope, "signed");
        if (c->sign_key && (r = fleet_sign(c, envelope, old)) < 0)
                return r;
        if (!(key = fleet_key(fleet_prefix_of(c), "policies", fp.name, NULL)) ||
            !(hkey = fleet_history_key(fleet_prefix_of(c), fp.name, id)) ||
            !(what = summary ? strdup(summary) : summary_of(old, envelope)))
                return ctl_oom();
        r = fleet_supersede_ops(ec, c, fp.name, old, old_revision, id, by, compares, ops);
        if (r < 0)
                return r;
        r = put_op(ops, key, envelope);
        if (r < 0)
                return r;
        r = fleet_prune_ops(ec, c, fp.name, ops);
        if (r < 0)
                return r;
        if (fp.rollout.present && (r = plan_op(c, &fp, ni.v, ni.n, by, ops)) < 0)
                return r;
        entry = json_pack("{s:s,s:s,s:s,s:I,s:O,s:s,s:o}", "policy", fp.name, "id", id, "by", by, "time_ms",
                          (json_int_t) realtime_ms(), "envelope", envelope, "summary", what, "previous",
                          old_revision ? json_integer((json_int_t) old_revision) : json_null());
        return entry ? put_op(ops, hkey, entry) : ctl_oom();
}
