/* verbs-rollout.c: clsctl fleet rollout status|pause|resume|abort|promote NAME, fleet history NAME and
 * fleet rollback NAME [--to REV]: a policy's rollout as etcd has it (its plan, its state, each node's
 * step), moved by a transaction on the state's revision (a node moving it at the same moment wins or
 * loses whole); its revisions as the history keeps them, and one of them applied again as a new one. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet-keys.h"
#include "fleet-rollout.h"
#include "output.h"

/* ---- reading a rollout ---- */

typedef struct RolloutRead {
        json_t *envelope; /* the policy's current one */
        uint64_t revision;
        char id[FLEET_ROLLOUT_ID_MAX + 1];
        FleetRolloutPlan plan;
        FleetRolloutState state;
        uint64_t state_revision; /* 0: no state key yet */
        json_t *nodes; /* {node: {"wave", "step", "why"}} */
} RolloutRead;

static void rollout_read_done(RolloutRead *rr) {
        json_decref(rr->envelope);
        fleet_rollout_plan_done(&rr->plan);
        json_decref(rr->nodes);
        *rr = (RolloutRead){ 0 };
}

/* Each node's step: the keys under rollout-nodes/NAME/ID/ (WAVE/STEP/NODE). */
static int nodes_read(EtcdClient *ec, const Ctl *c, const char *name, const char *id, json_t **ret) {
        _cleanup_free_ char *prefix = fleet_rollout_node_key(fleet_prefix_of(c), name, id, -1, -1, NULL);
        json_t *out = json_object();
        EtcdKv *kvs = NULL;
        size_t n = 0;
        int r;

        if (!prefix || !out) {
                json_decref(out);
                return ctl_oom();
        }
        r = fleet_range_kvs(ec, prefix, false, &kvs, &n);
        if (r >= 0)
                for (size_t i = 0; i < n; i++) {
                        char wave[16], step[16], node[FLEET_NODE_NAME_MAX + 1];
                        json_t *v = json_loadb(kvs[i].value, kvs[i].value_size, 0, NULL);
                        if (strlen(kvs[i].key) == kvs[i].key_size &&
                            sscanf(kvs[i].key + strlen(prefix), "%15[0-9]/%15[a-z]/%63s", wave, step,
                                   node) == 3)
                                json_object_set_new(
                                        out, node,
                                        json_pack("{s:I,s:s,s:s}", "wave", (json_int_t) atoi(wave) + 1,
                                                  "step", step, "why",
                                                  strempty(json_string_value(json_object_get(v, "why")))));
                        json_decref(v);
                }
        etcd_kvs_free(kvs, n);
        if (r < 0) {
                json_decref(out);
                return r;
        }
        *ret = out;
        return 0;
}

static int rollout_read(EtcdClient *ec, const Ctl *c, const char *name, RolloutRead *rr) {
        _cleanup_(json_decrefp) json_t *plan = NULL, *state = NULL;
        _cleanup_free_ char *pkey = NULL, *skey = NULL;
        uint64_t plan_revision;
        _cleanup_error_ Error e = ERROR_NULL;
        const char *id;
        int r;

        r = fleet_policy_current(ec, c, name, &rr->envelope, &rr->revision);
        if (r < 0)
                return r;
        if (!rr->envelope)
                return ctl_error(-ENOENT, "no fleet policy %s", name);
        id = json_string_value(json_object_get(json_object_get(rr->envelope, "rollout"), "id"));
        if (!json_object_get(rr->envelope, "rollout"))
                return ctl_error(-ENOENT,
                                 "fleet policy %s (revision %" PRIu64
                                 ") has no rollout: it went to every node at once",
                                 name, rr->revision);
        if (!id)
                snprintf(rr->id, sizeof(rr->id), "r%" PRIu64, rr->revision);
        else
                snprintf(rr->id, sizeof(rr->id), "%s", id);
        if (!(pkey = fleet_rollout_key(fleet_prefix_of(c), name, rr->id, "plan")) ||
            !(skey = fleet_rollout_key(fleet_prefix_of(c), name, rr->id, "state")))
                return ctl_oom();
        r = fleet_get_json(ec, pkey, &plan, &plan_revision);
        if (r < 0)
                return r;
        r = fleet_get_json(ec, skey, &state, &rr->state_revision);
        if (r < 0)
                return r;
        if (!plan || fleet_rollout_plan_parse(plan, &rr->plan, &e) < 0)
                return ctl_error(-ENOENT, "fleet policy %s: its rollout %s has no plan yet", name, rr->id);
        if (fleet_rollout_state_parse(state, &rr->state, &e) < 0)
                return ctl_error(-EPROTO, "fleet policy %s: its rollout's state: %s", name, e.message);
        return nodes_read(ec, c, name, rr->id, &rr->nodes);
}

/* ---- status ---- */

static json_t *rollout_json(const char *name, const RolloutRead *rr) {
        json_t *waves = json_array(), *j;

        for (size_t w = 0; waves && w < rr->plan.n_waves; w++) {
                json_t *a = json_array();
                for (size_t i = 0; a && i < rr->plan.wave_sizes[w]; i++) {
                        json_t *n = json_object_get(rr->nodes, rr->plan.waves[w][i]);
                        json_array_append_new(
                                a, json_pack("{s:s,s:s,s:s}", "node", rr->plan.waves[w][i], "step",
                                             n ? json_string_value(json_object_get(n, "step")) : "-", "why",
                                             n ? json_string_value(json_object_get(n, "why")) : ""));
                }
                json_array_append_new(waves, a);
        }
        j = json_pack("{s:s,s:I,s:s,s:o,s:o,s:O}", "policy", name, "revision", (json_int_t) rr->revision,
                      "rollout", rr->id, "state", fleet_rollout_state_to_json(&rr->state), "waves", waves,
                      "excluded", rr->plan.excluded);
        return j;
}

static int rollout_status(const Ctl *c, EtcdClient *ec, const char *name) {
        _cleanup_(rollout_read_done) RolloutRead rr = { 0 };
        _cleanup_(table_freep) Table *t = NULL;
        json_t *x;
        size_t i;
        int r;

        r = rollout_read(ec, c, name, &rr);
        if (r < 0)
                return r;
        if (c->json) {
                _cleanup_(json_decrefp) json_t *j = rollout_json(name, &rr);
                return j ? ctl_print_json(j) : ctl_oom();
        }
        printf("fleet policy %s revision %" PRIu64 ", rollout %s: %s, wave %u of %zu%s%s%s\n", name,
               rr.revision, rr.id, fleet_rollout_phase_to_string(rr.state.phase),
               MIN(rr.state.wave + 1, (unsigned) rr.plan.n_waves), rr.plan.n_waves,
               rr.state.promoted ? " (promoted)" : "", rr.state.why[0] ? ": " : "", rr.state.why);
        printf("hold %.1f s, confirm %.1f s, at most %u unhealthy per wave; %u wave(s) confirmed\n",
               (double) rr.plan.hold_usec / 1e6, (double) rr.plan.confirm_usec / 1e6, rr.plan.max_unhealthy,
               rr.state.confirmed);
        t = table_new("WAVE", "NODE", "STEP", "WHY", NULL);
        if (!t)
                return ctl_oom();
        for (size_t w = 0; w < rr.plan.n_waves; w++)
                for (size_t k = 0; k < rr.plan.wave_sizes[w]; k++) {
                        json_t *n = json_object_get(rr.nodes, rr.plan.waves[w][k]);
                        char wave[24];
                        snprintf(wave, sizeof(wave), "%zu", w + 1);
                        table_add(t, wave);
                        table_add(t, rr.plan.waves[w][k]);
                        table_add(t, n ? json_string_value(json_object_get(n, "step")) : "-");
                        table_add(t, n ? json_string_value(json_object_get(n, "why")) : "");
                }
        if ((r = ctl_table_print(t)) < 0)
                return r;
        json_array_foreach (rr.plan.excluded, i, x)
                printf("excluded: %s (%s)\n", strna(json_string_value(json_object_get(x, "node"))),
                       strna(json_string_value(json_object_get(x, "why"))));
        return 0;
}

/* ---- pause, resume, abort, promote ---- */

static int rollout_move(const Ctl *c, EtcdClient *ec, const char *name, const char *action) {
        _cleanup_(rollout_read_done) RolloutRead rr = { 0 };
        _cleanup_(json_decrefp) json_t *answer = NULL, *j = NULL;
        _cleanup_free_ char *key = NULL, *b64 = NULL, *text = NULL;
        EtcdCredentials creds = fleet_credentials(c);
        FleetRolloutState next;
        char rev[32], by[128];
        int r;

        r = rollout_read(ec, c, name, &rr);
        if (r < 0)
                return r;
        next = rr.state;
        if (rr.state_revision == 0)
                next.since_ms = rr.plan.created_ms; /* no state yet: its first wave began with the plan */
        etcd_identity(&creds, by, sizeof(by));
        snprintf(next.by, sizeof(next.by), "%s", by);
        next.why[0] = 0;
        if (streq(action, "pause")) {
                if (rr.state.phase != ROLLOUT_PROGRESSING)
                        return ctl_error(-EBUSY, "rollout %s of %s is %s: only a progressing one pauses",
                                         rr.id, name, fleet_rollout_phase_to_string(rr.state.phase));
                next.phase = ROLLOUT_PAUSED;
        } else if (streq(action, "resume")) {
                if (rr.state.phase != ROLLOUT_PAUSED)
                        return ctl_error(-EBUSY, "rollout %s of %s is %s: only a paused one resumes", rr.id,
                                         name, fleet_rollout_phase_to_string(rr.state.phase));
                next.phase = ROLLOUT_PROGRESSING;
        } else if (streq(action, "abort")) {
                /* an abort takes back what was not committed: a done rollout's revision is every
                 * node's, and only a new revision takes it back */
                if (rr.state.phase == ROLLOUT_DONE)
                        return ctl_error(-EBUSY,
                                         "rollout %s of %s is done: revision %" PRIu64
                                         " is committed on its nodes; 'clsctl fleet rollback %s' "
                                         "applies the revision before it again",
                                         rr.id, name, rr.revision, name);
                if (fleet_rollout_state_ended(&rr.state))
                        return ctl_error(-EBUSY, "rollout %s of %s is %s already", rr.id, name,
                                         fleet_rollout_phase_to_string(rr.state.phase));
                next.phase = ROLLOUT_ABORTED;
                snprintf(next.why, sizeof(next.why),
                         "aborted by %.100s: every node that applied revision %" PRIu64 " goes back", by,
                         rr.revision);
        } else {
                if (rr.state.phase != ROLLOUT_PROGRESSING && rr.state.phase != ROLLOUT_PAUSED)
                        return ctl_error(-EBUSY, "rollout %s of %s is %s: nothing to promote", rr.id, name,
                                         fleet_rollout_phase_to_string(rr.state.phase));
                next.promoted = true; /* every wave now, the remaining holds skipped */
                next.phase = ROLLOUT_PROGRESSING;
                next.wave = rr.plan.n_waves ? (unsigned) rr.plan.n_waves - 1 : 0;
        }
        j = fleet_rollout_state_to_json(&next);
        key = fleet_rollout_key(fleet_prefix_of(c), name, rr.id, "state");
        if (!j || !key || !(text = json_dumps(j, JSON_COMPACT)) ||
            etcd_b64_encode(key, strlen(key), &b64) < 0)
                return ctl_oom();
        snprintf(rev, sizeof(rev), "%" PRIu64, rr.state_revision);
        r = fleet_call(ec, "/v3/kv/txn",
                       json_pack("{s:[{s:s,s:s,s:s,s:s}],s:[{s:o}]}", "compare", "key", b64, "target", "MOD",
                                 "result", "EQUAL", "mod_revision", rev, "success", "request_put",
                                 etcd_put_body(key, text, strlen(text), 0)),
                       &answer);
        if (r < 0)
                return r;
        if (!json_is_true(json_object_get(answer, "succeeded")))
                return ctl_error(-EAGAIN,
                                 "rollout %s of %s moved meanwhile (a node judged a wave): look again",
                                 rr.id, name);
        if (c->json) {
                _cleanup_(json_decrefp) json_t *out =
                        json_pack("{s:s,s:s,s:o}", "policy", name, "rollout", rr.id, "state",
                                  fleet_rollout_state_to_json(&next));
                return out ? ctl_print_json(out) : ctl_oom();
        }
        printf("rollout %s of %s: %s%s\n", rr.id, name, fleet_rollout_phase_to_string(next.phase),
               next.promoted && !rr.state.promoted ? ", promoted: every wave now" : "");
        return 0;
}

int verb_fleet_rollout(const Ctl *c, char **args) {
        static const char *const actions[] = { "status", "pause", "resume", "abort", "promote" };
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        bool known = false;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(actions); i++)
                known = known || streq(args[0], actions[i]);
        if (!known)
                return ctl_error(
                        -EINVAL,
                        "unknown command 'fleet rollout %s' (status, pause, resume, abort, promote)",
                        args[0]);
        r = fleet_client(c, &ec);
        if (r < 0)
                return r;
        return streq(args[0], "status") ? rollout_status(c, ec, args[1])
                                        : rollout_move(c, ec, args[1], args[0]);
}

/* ---- history, rollback ---- */

/* The policy's history entries, oldest first, each with "_revision" (the revision it wrote) and, for a
 * rollout, "_outcome" (its state). */
static int history_read(EtcdClient *ec, const Ctl *c, const char *name, json_t **ret) {
        _cleanup_free_ char *prefix = fleet_history_key(fleet_prefix_of(c), name, NULL);
        json_t *out = json_array();
        EtcdKv *kvs = NULL;
        size_t n = 0;
        int r;

        if (!prefix || !out) {
                json_decref(out);
                return ctl_oom();
        }
        r = fleet_range_kvs(ec, prefix, false, &kvs, &n);
        if (r >= 0) {
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        json_t *v = json_loadb(kvs[i].value, kvs[i].value_size, 0, NULL), *state = NULL;
                        const char *id = json_string_value(json_object_get(v, "id"));
                        uint64_t sr;
                        if (!json_is_object(v) || !id) {
                                json_decref(v);
                                continue;
                        }
                        json_object_set_new(v, "_revision", json_integer((json_int_t) kvs[i].mod_revision));
                        if (json_object_get(json_object_get(v, "envelope"), "rollout")) {
                                _cleanup_free_ char *skey =
                                        fleet_rollout_key(fleet_prefix_of(c), name, id, "state");
                                r = skey ? fleet_get_json(ec, skey, &state, &sr) : ctl_oom();
                                FleetRolloutState s;
                                if (r >= 0 && fleet_rollout_state_parse(state, &s, NULL) >= 0)
                                        json_object_set_new(v, "_outcome", fleet_rollout_state_to_json(&s));
                                json_decref(state);
                        }
                        json_array_append_new(out, v);
                }
        }
        etcd_kvs_free(kvs, n);
        if (r < 0) {
                json_decref(out);
                return r;
        }
        /* a rollout superseded by another apply: that apply's revision */
        json_t *v, *w;
        size_t i, k;
        json_array_foreach (out, i, v) {
                const char *by_id =
                        json_string_value(json_object_get(json_object_get(v, "_outcome"), "superseded_by"));
                json_array_foreach (out, k, w)
                        if (by_id && *by_id && streq_ptr(json_string_value(json_object_get(w, "id")), by_id))
                                json_object_set(json_object_get(v, "_outcome"), "superseded_by_revision",
                                                json_object_get(w, "_revision"));
        }
        *ret = out;
        return 0;
}

/* How a rollout ended (or where it is), for people: a superseded one names the revision that came
 * after it (the history entry of its id), or its policy's removal. */
static void outcome_text(json_t *rows, json_t *o, char *buf, size_t size) {
        const char *state = strempty(json_string_value(json_object_get(o, "state"))),
                   *why = strempty(json_string_value(json_object_get(o, "why"))),
                   *by_id = json_string_value(json_object_get(o, "superseded_by"));
        json_t *v;
        size_t i;

        if (streq(state, "superseded")) {
                json_array_foreach (rows, i, v)
                        if (by_id && *by_id &&
                            streq_ptr(json_string_value(json_object_get(v, "id")), by_id)) {
                                snprintf(buf, size, "superseded by revision %" PRIu64,
                                         (uint64_t) json_integer_value(json_object_get(v, "_revision")));
                                return;
                        }
                snprintf(buf, size, "superseded: %s", by_id && *by_id ? why : "the policy was removed");
                return;
        }
        snprintf(buf, size, "%s%s%s", state, *why ? ": " : "", why);
}

int verb_fleet_history(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *rows = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        json_t *v;
        size_t i;
        int r;

        r = fleet_client(c, &ec);
        if (r < 0)
                return r;
        r = history_read(ec, c, args[0], &rows);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(rows);
        if (json_array_size(rows) == 0)
                return ctl_error(-ENOENT, "fleet policy %s has no history", args[0]);
        t = table_new("REVISION", "TIME", "BY", "ROLLOUT", "WHAT", NULL);
        if (!t)
                return ctl_oom();
        json_array_foreach (rows, i, v) {
                json_t *o = json_object_get(v, "_outcome");
                time_t when = (time_t) (json_integer_value(json_object_get(v, "time_ms")) / 1000);
                char tbuf[32], rollout[300];
                strftime(tbuf, sizeof(tbuf), "%Y-%m-%d %H:%M:%S", gmtime(&when));
                if (json_is_true(json_object_get(v, "removed")))
                        snprintf(rollout, sizeof(rollout), "-");
                else if (o)
                        outcome_text(rows, o, rollout, sizeof(rollout));
                else
                        snprintf(rollout, sizeof(rollout), "%s",
                                 json_object_get(json_object_get(v, "envelope"), "rollout") ? "planned"
                                                                                            : "at once");
                table_add_json(t, json_object_get(v, "_revision"));
                table_add(t, tbuf);
                table_add(t, json_string_value(json_object_get(v, "by")));
                table_add(t, rollout);
                table_add(t, json_string_value(json_object_get(v, "summary")));
        }
        return ctl_table_print(t);
}

/* The history entry to apply again: --to REV's, else the last before the current revision (a removal's
 * entry is none: it has no policy). */
static json_t *rollback_target(json_t *rows, uint64_t to, uint64_t current_revision) {
        json_t *v, *target = NULL;
        size_t i;

        json_array_foreach (rows, i, v) {
                uint64_t rev = (uint64_t) json_integer_value(json_object_get(v, "_revision"));
                if (!json_object_get(v, "envelope"))
                        continue;
                if (to ? rev == to : (!current_revision || rev < current_revision))
                        target = v;
        }
        return target;
}

int verb_fleet_rollback(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *envelope = NULL;
        uint64_t to = c->rollback_to, revision = 0;
        int r;

        r = fleet_client(c, &ec);
        for (int attempt = 0; r >= 0 && attempt < FLEET_TXN_ATTEMPTS && !revision; attempt++) {
                _cleanup_(json_decrefp) json_t *rows = NULL, *current = NULL, *ops = json_array(),
                                               *compares = json_array(), *answer = NULL;
                _cleanup_free_ char *summary = NULL;
                uint64_t current_revision = 0;
                json_t *target;

                if (!ops || !compares)
                        return ctl_oom();
                r = history_read(ec, c, args[0], &rows);
                if (r < 0)
                        return r;
                r = fleet_policy_current(ec, c, args[0], &current, &current_revision);
                if (r < 0)
                        return r;
                if (!(target = rollback_target(rows, c->rollback_to, current_revision)))
                        return c->rollback_to ? ctl_error(-ENOENT,
                                                          "fleet policy %s: no revision %" PRIu64
                                                          " in its history (fleet history %s)",
                                                          args[0], c->rollback_to, args[0])
                                              : ctl_error(-ENOENT,
                                                          "fleet policy %s: no revision before %" PRIu64
                                                          " in its history",
                                                          args[0], current_revision);
                to = (uint64_t) json_integer_value(json_object_get(target, "_revision"));
                json_decref(envelope);
                envelope = json_deep_copy(json_object_get(target, "envelope"));
                if (!envelope || asprintf(&summary, "rollback to revision %" PRIu64 " (%s)", to,
                                          strna(json_string_value(json_object_get(target, "summary")))) < 0)
                        return ctl_oom();
                r = fleet_apply_ops(ec, c, envelope, summary, compares, ops);
                if (r < 0)
                        return r;
                r = fleet_txn(ec, compares, ops, &answer);
                if (r < 0)
                        return r;
                if (r > 0)
                        revision = etcd_answer_revision(answer);
        }
        if (r < 0)
                return r;
        if (!revision)
                return ctl_error(-EAGAIN,
                                 "fleet policy %s (or its rollout) kept changing between this "
                                 "rollback's read and its write: try again",
                                 args[0]);
        const char *id = json_string_value(json_object_get(json_object_get(envelope, "rollout"), "id"));
        if (c->json) {
                _cleanup_(json_decrefp) json_t *out =
                        json_pack("{s:s,s:I,s:I,s:o}", "name", args[0], "revision", (json_int_t) revision,
                                  "from", (json_int_t) to, "rollout", id ? json_string(id) : json_null());
                return out ? ctl_print_json(out) : ctl_oom();
        }
        printf("fleet policy %s: revision %" PRIu64 " is revision %" PRIu64 "'s policy again%s%s\n", args[0],
               revision, to, id ? ", rollout " : "", strempty(id));
        return 0;
}
