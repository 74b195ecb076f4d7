/* rollout-wave.c: what a node writes and reads of a rollout in etcd. Its step (applied, healthy,
 * failed) under its lease, one key per step under rollout-nodes/NAME/ID/WAVE/; a wave judged by two
 * count-only ranges (its healthy and failed nodes) once a node of it said its final step, or when its
 * time ran out, and the rollout's state moved on by a transaction on the state's revision (so that two
 * nodes cannot both); a rollout its writer left without a plan planned from the nodes' records. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "fleet-io.h"
#include "fleet-rollouts.h"

/* Past hold and confirm, this long for the wave's nodes to apply and say so before it is unhealthy. */
#define WAVE_GRACE_USEC (30 * 1000000ULL)
/* A rollout without a plan (its policy written by something else than clsctl) is planned by a node
 * after this (a random part added, so that the nodes do not all do it). */
#define PLAN_WAIT_USEC (2 * 1000000ULL)

typedef struct StepWrite {
        Fleet *f;
        char policy[65];
        char id[FLEET_ROLLOUT_ID_MAX + 1];
        FleetNodeStep step;
} StepWrite;

typedef struct WaveLook {
        Fleet *f;
        char policy[65];
        char id[FLEET_ROLLOUT_ID_MAX + 1];
        unsigned wave;
        bool timeout;
        uint64_t state_revision; /* the state it was judged against */
} WaveLook;

void rollout_step_set(Fleet *f, NodeRollout *r, FleetNodeStep step, const char *why) {
        if (r->step_set && r->step == step)
                return;
        r->step_set = true;
        r->step = step;
        r->evaluated = false;
        snprintf(r->step_why, sizeof(r->step_why), "%s", strempty(why));
        if (step == NODE_FAILED)
                log_warning("fleet: policy %s revision %" PRIu64 ": %s", r->policy, r->to_revision,
                            strempty(why));
        else
                log_info("fleet: policy %s revision %" PRIu64 ": %s (wave %d)", r->policy, r->to_revision,
                         fleet_node_step_to_string(step), r->wave + 1);
        rollout_publish(f);
        fleet_status_changed(f);
}

static void on_step_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        _cleanup_free_ StepWrite *sw = userdata;
        Fleet *f = sw->f;
        NodeRollout *r = node_rollout_find(f, sw->policy);

        (void) a, (void) answer;
        if (r && streq(r->id, sw->id))
                r->publishing = false;
        if (e) {
                fleet_call_failed(f, e); /* (said again at the next tick) */
                return;
        }
        if (!r || !streq(r->id, sw->id) || !r->step_set)
                return;
        r->published_set = true;
        r->published = sw->step;
        if (r->step != sw->step) {
                rollout_publish(f); /* it moved on meanwhile: that too, after this one */
                return;
        }
        if (r->step != NODE_APPLIED && !r->evaluated)
                rollout_evaluate(f, r, false);
}

/* Puts the node's step key (and deletes its others) in one transaction, under its lease. */
static void step_publish(Fleet *f, NodeRollout *r) {
        _cleanup_(json_decrefp) json_t *ops = json_array(),
                                       *v = json_pack("{s:s,s:I,s:s,s:I,s:s}", "node", f->node, "revision",
                                                      (json_int_t) r->to_revision, "step",
                                                      fleet_node_step_to_string(r->step), "since_ms",
                                                      (json_int_t) fleet_realtime_ms(), "why", r->step_why);
        _cleanup_free_ char *value = v ? json_dumps(v, JSON_COMPACT) : NULL;
        StepWrite *sw;

        if (!ops || !value || r->wave < 0)
                return;
        for (int s = 0; s < _NODE_STEP_MAX; s++) {
                _cleanup_free_ char *key =
                        fleet_rollout_node_key(f->prefix, r->policy, r->id, r->wave, s, f->node);
                if (!key)
                        return;
                json_array_append_new(
                        ops,
                        s == (int) r->step
                                ? json_pack("{s:o}", "request_put",
                                            etcd_put_body(key, value, strlen(value), f->lease))
                                : json_pack("{s:o}", "request_delete_range", etcd_delete_body(key, false)));
        }
        if (!(sw = calloc(1, sizeof(*sw))))
                return;
        *sw = (StepWrite){ .f = f, .step = r->step };
        snprintf(sw->policy, sizeof(sw->policy), "%s", r->policy);
        snprintf(sw->id, sizeof(sw->id), "%s", r->id);
        r->publishing = true;
        fleet_call(f, "/v3/kv/txn", json_pack("{s:O}", "success", ops), on_step_written, free, sw);
}

void rollout_publish(Fleet *f) {
        if (f->state != FLEET_WATCHING || !f->lease)
                return;
        for (size_t i = 0; i < f->mine.n; i++) {
                NodeRollout *r = &f->mine.v[i];
                if (r->step_set && r->wave >= 0 && !r->publishing &&
                    !(r->published_set && r->published == r->step))
                        step_publish(f, r);
        }
}

static uint64_t response_count(json_t *answer, size_t i) {
        return etcd_range_count(
                json_object_get(json_array_get(json_object_get(answer, "responses"), i), "response_range"));
}

static void on_state_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;

        (void) a, (void) answer;
        if (e)
                fleet_call_failed(f, e); /* (judged again: its wave's node, or its time running out) */
        /* (one that lost the race to another node's transaction changed nothing: the watch says what won) */
}

/* The state of the rollout moved from what was judged (its revision) to next, by a transaction that
 * fails if any other writer moved it first. */
void rollout_state_write(Fleet *f, const char *policy, const char *id, uint64_t judged,
                         const FleetRolloutState *next) {
        _cleanup_free_ char *key = fleet_rollout_key(f->prefix, policy, id, "state"), *b64 = NULL,
                            *text = NULL;
        _cleanup_(json_decrefp) json_t *j = fleet_rollout_state_to_json(next);
        char rev[32];

        if (!key || !j || !(text = json_dumps(j, JSON_COMPACT)) ||
            etcd_b64_encode(key, strlen(key), &b64) < 0)
                return;
        snprintf(rev, sizeof(rev), "%" PRIu64, judged);
        fleet_call(f, "/v3/kv/txn",
                   json_pack("{s:[{s:s,s:s,s:s,s:s}],s:[{s:o}]}", "compare", "key", b64, "target", "MOD",
                             "result", "EQUAL", "mod_revision", rev, "success", "request_put",
                             etcd_put_body(key, text, strlen(text), 0)),
                   on_state_written, NULL, f);
}

static void on_wave_counted(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        _cleanup_free_ WaveLook *wl = userdata;
        Fleet *f = wl->f;
        RolloutView *v = rollout_views_find(&f->rollouts, wl->policy, wl->id);
        FleetRolloutState next;

        (void) a;
        if (e) {
                /* not counted: the wave's nodes look at it again */
                for (size_t i = 0; i < f->mine.n; i++)
                        if (streq(f->mine.v[i].policy, wl->policy) && streq(f->mine.v[i].id, wl->id))
                                f->mine.v[i].evaluated = false;
                fleet_call_failed(f, e);
                return;
        }
        if (!v || !v->has_plan || v->state_revision != wl->state_revision || wl->wave >= v->plan.n_waves) {
                log_debug("fleet: policy %s rollout %s: wave %u: the state moved meanwhile", wl->policy,
                          wl->id, wl->wave + 1);
                return; /* it moved meanwhile: judged again by what moved it */
        }
        size_t size = v->plan.wave_sizes[wl->wave], healthy = response_count(answer, 0),
               failed = response_count(answer, 1);
        FleetWaveVerdict verdict =
                fleet_wave_verdict(size, healthy, failed, v->plan.max_unhealthy, wl->timeout);
        log_debug("fleet: policy %s rollout %s: wave %u: %zu of %zu healthy, %zu failed%s", wl->policy,
                  wl->id, wl->wave + 1, healthy, size, failed, wl->timeout ? " (its time ran out)" : "");
        if (verdict == WAVE_WAIT || (verdict == WAVE_CONFIRMED && v->state.phase != ROLLOUT_PROGRESSING))
                return; /* a paused rollout halts, but does not go on */
        fleet_rollout_state_next(&v->state, wl->wave, v->plan.n_waves, verdict, fleet_realtime_ms(), &next);
        snprintf(next.by, sizeof(next.by), "node %s", f->node);
        if (verdict == WAVE_HALT)
                snprintf(next.why, sizeof(next.why),
                         "wave %u: %zu of %zu nodes unhealthy%s (at most %u may be)", wl->wave + 1,
                         wl->timeout ? size - MIN(healthy, size) : failed, size,
                         wl->timeout ? " when its time ran out" : "", v->plan.max_unhealthy);
        log_info("fleet: policy %s rollout %s: wave %u %s (%zu of %zu healthy)", wl->policy, wl->id,
                 wl->wave + 1, verdict == WAVE_HALT ? "unhealthy: halting" : "confirmed", healthy, size);
        rollout_state_write(f, wl->policy, wl->id, wl->state_revision, &next);
}

/* Counts the wave's healthy and failed nodes (count-only ranges, one transaction) and moves the state on
 * if they decide it. */
static void evaluate_wave(Fleet *f, const RolloutView *v, unsigned wave, bool timeout) {
        _cleanup_free_ char *healthy = fleet_rollout_node_key(f->prefix, v->policy, v->id, (int) wave,
                                                              NODE_HEALTHY, NULL),
                            *failed = fleet_rollout_node_key(f->prefix, v->policy, v->id, (int) wave,
                                                             NODE_FAILED, NULL);
        WaveLook *wl;

        if (f->state != FLEET_WATCHING || !healthy || !failed || !(wl = calloc(1, sizeof(*wl))))
                return;
        *wl = (WaveLook){ .f = f, .wave = wave, .timeout = timeout, .state_revision = v->state_revision };
        snprintf(wl->policy, sizeof(wl->policy), "%s", v->policy);
        snprintf(wl->id, sizeof(wl->id), "%s", v->id);
        fleet_call(f, "/v3/kv/txn",
                   json_pack("{s:[{s:o},{s:o}]}", "success", "request_range", etcd_count_body(healthy),
                             "request_range", etcd_count_body(failed)),
                   on_wave_counted, free, wl);
}

/* Whether v is the rollout its policy, as etcd has it now, rolls out: an older one (superseded, whether
 * clsctl said so or another writer left it as it was) is judged by no one. */
static bool view_current(Fleet *f, const RolloutView *v) {
        const Wanted *w = wanted_find(&f->wanted, v->policy);
        char buf[FLEET_ROLLOUT_ID_MAX + 1];

        return w && !w->gone && !w->invalid && w->fp.rollout.present &&
               streq(wanted_rollout_id(w, buf), v->id);
}

/* After the node said its final step (healthy, failed): its wave, if it is the current one. */
void rollout_evaluate(Fleet *f, NodeRollout *r, bool timeout) {
        RolloutView *v = rollout_views_find(&f->rollouts, r->policy, r->id);

        r->evaluated = true;
        if (!v || !v->has_plan || !view_current(f, v) || r->wave < 0 ||
            v->state.wave != (unsigned) r->wave ||
            (v->state.phase != ROLLOUT_PROGRESSING && v->state.phase != ROLLOUT_PAUSED)) {
                log_debug("fleet: policy %s: wave %d not judged here (the rollout is at wave %u, %s)",
                          r->policy, r->wave + 1, v ? v->state.wave + 1 : 0,
                          v ? fleet_rollout_phase_to_string(v->state.phase) : "unknown");
                return;
        }
        evaluate_wave(f, v, (unsigned) r->wave, timeout);
}

/* A wave whose time has run out is judged with the missing as unhealthy, by any node of it or after it. */
void rollout_wave_deadlines(Fleet *f, uint64_t now, uint64_t *next) {
        uint64_t now_ms = fleet_realtime_ms();

        for (size_t i = 0; i < f->rollouts.n; i++) {
                const RolloutView *v = &f->rollouts.v[i];
                int wave;
                if (!v->has_plan || v->state.phase != ROLLOUT_PROGRESSING ||
                    v->state.wave >= v->plan.n_waves || !view_current(f, v))
                        continue;
                wave = fleet_rollout_plan_wave_of(&v->plan, f->node);
                if (wave < (int) v->state.wave)
                        continue;
                uint64_t since = v->state_revision ? v->state.since_ms : v->plan.created_ms;
                uint64_t deadline_ms =
                        since + (v->plan.hold_usec + v->plan.confirm_usec + WAVE_GRACE_USEC) / 1000;
                if (now_ms >= deadline_ms)
                        evaluate_wave(f, v, v->state.wave, true);
                else
                        *next = MIN(*next, now + (deadline_ms - now_ms) * 1000);
        }
}

static void on_rollout_read(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        EtcdKv *kvs = NULL;
        size_t n = 0;

        (void) a;
        if (fleet_range_answer(f, answer, e, &kvs, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                (void) rollout_views_set(&f->rollouts, f->prefix, &kvs[i], false, fleet_now(f));
        etcd_kvs_free(kvs, n);
        fleet_converge_soon(f);
}

static void on_plan_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        _cleanup_free_ char *prefix = fleet_key(f->prefix, "rollouts", NULL, NULL);

        (void) a;
        if (e) {
                fleet_call_failed(f, e); /* (planned again if it is still missing) */
                return;
        }
        /* a plan was there after all (its event not seen): read, rather than wait for one */
        if (!json_is_true(json_object_get(answer, "succeeded")) && prefix)
                fleet_call(f, "/v3/kv/range", etcd_range_body(prefix, true), on_rollout_read, NULL, f);
}

static void on_nodes_listed(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        EtcdKv *kvs = NULL;
        size_t n = 0;

        (void) a;
        if (fleet_range_answer(f, answer, e, &kvs, &n) < 0)
                return;
        _cleanup_free_ FleetNodeInfo *nodes = calloc(n + 1, sizeof(FleetNodeInfo));
        json_t **records = calloc(n + 1, sizeof(json_t *));
        FleetLabel **labels = calloc(n + 1, sizeof(FleetLabel *));
        size_t k = 0;
        for (size_t i = 0; nodes && records && labels && i < n; i++) {
                json_t *j = json_loadb(kvs[i].value, kvs[i].value_size, 0, NULL);
                const char *node = json_string_value(json_object_get(j, "node"));
                json_t *l = json_object_get(j, "labels");
                const char *lk;
                json_t *lv;
                if (!fleet_node_name_valid(node) || kvs[i].lease == 0) {
                        json_decref(j);
                        continue;
                }
                records[k] = j;
                labels[k] = calloc(json_object_size(l) + 1, sizeof(FleetLabel));
                nodes[k] = (FleetNodeInfo){
                        .node = node,
                        .labels = labels[k],
                        .facts = { .kernel = json_string_value(json_object_get(j, "kernel")),
                                   .tcx = json_is_true(json_object_get(j, "tcx")),
                                   .act_bpf = json_is_true(json_object_get(j, "act_bpf")) }
                };
                json_object_foreach (l, lk, lv)
                        if (labels[k] && json_is_string(lv) && nodes[k].n_labels < FLEET_LABELS_MAX) {
                                FleetLabel *x = &labels[k][nodes[k].n_labels++];
                                snprintf(x->key, sizeof(x->key), "%s", lk);
                                snprintf(x->value, sizeof(x->value), "%s", json_string_value(lv));
                        }
                k++;
        }
        for (size_t i = 0; nodes && i < f->wanted.n; i++) {
                const Wanted *w = &f->wanted.v[i];
                char buf[FLEET_ROLLOUT_ID_MAX + 1];
                const char *id;
                FleetRolloutPlan plan = { 0 };
                _cleanup_error_ Error e2 = ERROR_NULL;
                if (!w->selected || w->gone || w->invalid || !w->fp.rollout.present)
                        continue;
                id = wanted_rollout_id(w, buf);
                const RolloutView *v = rollout_views_find(&f->rollouts, w->name, id);
                if (v && v->has_plan)
                        continue;
                FleetPolicy p = w->fp;
                snprintf(p.rollout.id, sizeof(p.rollout.id), "%s", id);
                if (fleet_rollout_plan_make(&p, nodes, k, &plan, &e2) < 0) {
                        log_error("fleet: policy %s: cannot plan its rollout: %s", w->name,
                                  strna(e2.message));
                        continue;
                }
                plan.created_ms = fleet_realtime_ms();
                snprintf(plan.by, sizeof(plan.by), "node %s", f->node);
                FleetRolloutState done;
                bool empty = fleet_rollout_plan_done_state(&plan, &done);
                _cleanup_(json_decrefp) json_t *j = fleet_rollout_plan_to_json(&plan),
                                               *dj = empty ? fleet_rollout_state_to_json(&done) : NULL;
                _cleanup_free_ char *key = fleet_rollout_key(f->prefix, w->name, id, "plan"),
                                    *skey = fleet_rollout_key(f->prefix, w->name, id, "state"),
                                    *text = j ? json_dumps(j, JSON_COMPACT) : NULL,
                                    *dtext = dj ? json_dumps(dj, JSON_COMPACT) : NULL, *b64 = NULL;
                fleet_rollout_plan_done(&plan);
                if (!key || !skey || !text || (empty && !dtext) ||
                    etcd_b64_encode(key, strlen(key), &b64) < 0)
                        continue;
                log_info("fleet: policy %s revision %" PRIu64
                         ": no rollout plan was written with it; planning it",
                         w->name, w->revision);
                /* whoever is first: the others' transactions find it there */
                json_t *ops = json_pack("[{s:o}]", "request_put", etcd_put_body(key, text, strlen(text), 0));
                if (ops && empty)
                        json_array_append_new(ops, json_pack("{s:o}", "request_put",
                                                             etcd_put_body(skey, dtext, strlen(dtext), 0)));
                fleet_call(f, "/v3/kv/txn",
                           json_pack("{s:[{s:s,s:s,s:s,s:s}],s:o}", "compare", "key", b64, "target",
                                     "CREATE", "result", "EQUAL", "create_revision", "0", "success", ops),
                           on_plan_written, NULL, f);
        }
        for (size_t i = 0; records && i < k; i++) {
                json_decref(records[i]);
                free(labels[i]);
        }
        free(records);
        free(labels);
        etcd_kvs_free(kvs, n);
}

static int on_plan_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *f = userdata;
        _cleanup_free_ char *nodes = fleet_key(f->prefix, "nodes", NULL, NULL);

        (void) s, (void) usec;
        if (nodes && f->state == FLEET_WATCHING)
                fleet_call(f, "/v3/kv/range", etcd_range_body(nodes, true), on_nodes_listed, NULL, f);
        return 0;
}

/* A rollout of a selected policy with no plan yet: a node plans it if none has after a while. */
void rollout_plans_missing(Fleet *f) {
        bool missing = false;

        for (size_t i = 0; i < f->wanted.n && !missing; i++) {
                const Wanted *w = &f->wanted.v[i];
                char buf[FLEET_ROLLOUT_ID_MAX + 1];
                if (w->selected && !w->gone && !w->invalid && w->fp.rollout.present) {
                        const RolloutView *v =
                                rollout_views_find(&f->rollouts, w->name, wanted_rollout_id(w, buf));
                        missing = !v || !v->has_plan;
                }
        }
        if (!missing || f->state != FLEET_WATCHING)
                return;
        if (f->plan_timer && sd_event_source_get_enabled(f->plan_timer, NULL) > 0)
                return;
        uint64_t delay = PLAN_WAIT_USEC + (uint64_t) random() % PLAN_WAIT_USEC;
        if (!f->plan_timer)
                (void) sd_event_add_time(f->event, &f->plan_timer, CLOCK_MONOTONIC, fleet_now(f) + delay,
                                         1000, on_plan_timer, f);
        else {
                (void) sd_event_source_set_time(f->plan_timer, fleet_now(f) + delay);
                (void) sd_event_source_set_enabled(f->plan_timer, SD_EVENT_ONESHOT);
        }
}
