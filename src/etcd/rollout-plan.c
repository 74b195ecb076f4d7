/* rollout-plan.c: a fleet policy's rollout as etcd holds it: a plan of waves made from the nodes' records
 * (selected and qualified nodes in an order stable for the rollout, spread over a label's values, cut
 * into waves); the plan's and the state's JSON; a wave's verdict and the state after it; the keys. Pure:
 * no I/O. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-rollout.h"
#include "names.h"

/* ---- the plan ---- */

static uint64_t fnv1a(uint64_t h, const char *s) {
        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return (h ^ 0xff) * 1099511628211ULL;
}

typedef struct Ranked {
        const FleetNodeInfo *n;
        uint64_t hash, group_hash;
        const char *group;
        size_t rank; /* within its group */
} Ranked;

static int ranked_cmp_group(const void *a, const void *b) {
        const Ranked *x = a, *y = b;
        int c = strcmp(x->group, y->group);
        if (c)
                return c;
        return x->hash < y->hash ? -1 : x->hash > y->hash ? 1 : strcmp(x->n->node, y->n->node);
}

/* Round-robin over the groups: a group's first, then every group's second…; among the nodes of one rank,
 * the groups in an order of their own (hashed), so that the first wave is not always zone "a". */
static int ranked_cmp_spread(const void *a, const void *b) {
        const Ranked *x = a, *y = b;
        if (x->rank != y->rank)
                return x->rank < y->rank ? -1 : 1;
        if (x->group_hash != y->group_hash)
                return x->group_hash < y->group_hash ? -1 : 1;
        return strcmp(x->group, y->group);
}

static const char *label_of(const FleetNodeInfo *n, const char *key) {
        for (size_t i = 0; i < n->n_labels; i++)
                if (streq(n->labels[i].key, key))
                        return n->labels[i].value;
        return "";
}

/* The number of nodes the waves have reached after each, of n: growing, the last n (a wave that would
 * reach no more nodes than the one before is left out). */
static size_t *wave_ends(const FleetRollout *r, size_t n, size_t *ret_n) {
        size_t *ends = calloc(r->n_waves + 1, sizeof(size_t)), k = 0, last = 0;

        if (!ends)
                return NULL;
        for (size_t i = 0; i < r->n_waves && last < n; i++) {
                size_t want = r->waves[i].percent ? (n * r->waves[i].value + 99) / 100 : r->waves[i].value;
                want = MIN(MAX(want, 1u), n);
                if (want <= last)
                        continue;
                ends[k++] = last = want;
        }
        if (last < n)
                ends[k++] = n; /* what the waves did not reach: one more wave */
        *ret_n = k;
        return ends;
}

static int plan_oom(FleetRolloutPlan *p, Error *reterr) {
        fleet_rollout_plan_done(p);
        return error_oom(reterr);
}

int fleet_rollout_plan_make(const FleetPolicy *p, const FleetNodeInfo *nodes, size_t n,
                            FleetRolloutPlan *ret, Error *reterr) {
        FleetRolloutPlan plan = { .hold_usec = p->rollout.hold_usec,
                                  .confirm_usec = p->rollout.confirm_usec,
                                  .max_unhealthy = p->rollout.max_unhealthy,
                                  .excluded = json_array() };
        _cleanup_free_ Ranked *v = calloc(n + 1, sizeof(Ranked));
        _cleanup_free_ size_t *ends = NULL;
        size_t k = 0, n_ends = 0;
        char why[128];

        snprintf(plan.id, sizeof(plan.id), "%s", p->rollout.id);
        if (!v || !plan.excluded || !(plan.policy = strdup(p->name)))
                return plan_oom(&plan, reterr);
        uint64_t salt = fnv1a(fnv1a(14695981039346656037ULL, p->name), p->rollout.id);
        for (size_t i = 0; i < n; i++) {
                if (!fleet_policy_selects(p, nodes[i].node, nodes[i].labels, nodes[i].n_labels))
                        continue;
                if (!fleet_policy_qualifies(p, &nodes[i].facts, why, sizeof(why))) {
                        if (json_array_append_new(plan.excluded, json_pack("{s:s,s:s}", "node",
                                                                           nodes[i].node, "why", why)) < 0)
                                return plan_oom(&plan, reterr);
                        continue;
                }
                const char *group = p->rollout.spread[0] ? label_of(&nodes[i], p->rollout.spread) : "";
                v[k++] = (Ranked){ .n = &nodes[i],
                                   .hash = fnv1a(salt, nodes[i].node),
                                   .group = group,
                                   .group_hash = fnv1a(salt, group) };
        }
        /* each group in its stable order, ranked; then the groups interleaved by rank */
        qsort(v, k, sizeof(Ranked), ranked_cmp_group);
        for (size_t i = 0; i < k; i++)
                v[i].rank = i > 0 && streq(v[i].group, v[i - 1].group) ? v[i - 1].rank + 1 : 0;
        qsort(v, k, sizeof(Ranked), ranked_cmp_spread);
        if (k > 0 && !(ends = wave_ends(&p->rollout, k, &n_ends)))
                return plan_oom(&plan, reterr);
        plan.waves = calloc(n_ends + 1, sizeof(char **));
        plan.wave_sizes = calloc(n_ends + 1, sizeof(size_t));
        if (!plan.waves || !plan.wave_sizes)
                return plan_oom(&plan, reterr);
        for (size_t w = 0, at = 0; w < n_ends; w++) {
                size_t size = ends[w] - at;
                if (!(plan.waves[w] = calloc(size + 1, sizeof(char *))))
                        return plan_oom(&plan, reterr);
                plan.n_waves = w + 1;
                for (size_t i = 0; i < size; i++)
                        if (!(plan.waves[w][i] = strdup(v[at + i].n->node)))
                                return plan_oom(&plan, reterr);
                plan.wave_sizes[w] = size;
                at = ends[w];
        }
        *ret = plan;
        return 0;
}

void fleet_rollout_plan_done(FleetRolloutPlan *plan) {
        for (size_t w = 0; plan->waves && w < plan->n_waves; w++) {
                for (size_t i = 0; plan->waves[w] && plan->waves[w][i]; i++)
                        free(plan->waves[w][i]);
                free(plan->waves[w]);
        }
        free(plan->waves);
        free(plan->wave_sizes);
        free(plan->policy);
        json_decref(plan->excluded);
        *plan = (FleetRolloutPlan){ 0 };
}

int fleet_rollout_plan_wave_of(const FleetRolloutPlan *plan, const char *node) {
        for (size_t w = 0; w < plan->n_waves; w++)
                for (size_t i = 0; i < plan->wave_sizes[w]; i++)
                        if (streq(plan->waves[w][i], node))
                                return (int) w;
        return -1;
}

json_t *fleet_rollout_plan_to_json(const FleetRolloutPlan *plan) {
        json_t *waves = json_array(), *j;

        for (size_t w = 0; waves && w < plan->n_waves; w++) {
                json_t *a = json_array();
                for (size_t i = 0; a && i < plan->wave_sizes[w]; i++)
                        json_array_append_new(a, json_string(plan->waves[w][i]));
                if (!a || json_array_append_new(waves, a) < 0) {
                        json_decref(waves);
                        return NULL;
                }
        }
        j = json_pack("{s:s,s:s,s:o,s:I,s:I,s:I,s:I,s:s,s:O}", "policy", plan->policy, "id", plan->id,
                      "waves", waves, "hold_ms", (json_int_t) (plan->hold_usec / 1000), "confirm_ms",
                      (json_int_t) (plan->confirm_usec / 1000), "max_unhealthy",
                      (json_int_t) plan->max_unhealthy, "created_ms", (json_int_t) plan->created_ms, "by",
                      plan->by, "excluded", plan->excluded ?: json_array());
        return j;
}

int fleet_rollout_plan_parse(json_t *j, FleetRolloutPlan *ret, Error *reterr) {
        FleetRolloutPlan plan = { 0 };
        json_t *waves = json_object_get(j, "waves");
        const char *policy = json_string_value(json_object_get(j, "policy")),
                   *id = json_string_value(json_object_get(j, "id"));
        json_int_t hold = json_integer_value(json_object_get(j, "hold_ms")),
                   confirm = json_integer_value(json_object_get(j, "confirm_ms")),
                   max_unhealthy = json_integer_value(json_object_get(j, "max_unhealthy"));

        if (!policy || !id || !name_valid(id, FLEET_ROLLOUT_ID_MAX) || !json_is_array(waves) ||
            json_array_size(waves) > 10000 || hold < 0 || confirm < 0 || max_unhealthy < 0)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "a rollout plan needs policy, id, waves");
        snprintf(plan.id, sizeof(plan.id), "%s", id);
        plan.hold_usec = (uint64_t) hold * 1000;
        plan.confirm_usec = (uint64_t) confirm * 1000;
        plan.max_unhealthy = (unsigned) max_unhealthy;
        plan.created_ms = (uint64_t) MAX(json_integer_value(json_object_get(j, "created_ms")), 0);
        snprintf(plan.by, sizeof(plan.by), "%s", strempty(json_string_value(json_object_get(j, "by"))));
        plan.excluded = json_incref(json_object_get(j, "excluded")) ?: json_array();
        plan.waves = calloc(json_array_size(waves) + 1, sizeof(char **));
        plan.wave_sizes = calloc(json_array_size(waves) + 1, sizeof(size_t));
        if (!(plan.policy = strdup(policy)) || !plan.waves || !plan.wave_sizes || !plan.excluded)
                return plan_oom(&plan, reterr);
        for (size_t w = 0; w < json_array_size(waves); w++) {
                json_t *a = json_array_get(waves, w);
                if (!json_is_array(a)) {
                        fleet_rollout_plan_done(&plan);
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "a rollout plan's wave is a list of nodes");
                }
                if (!(plan.waves[w] = calloc(json_array_size(a) + 1, sizeof(char *))))
                        return plan_oom(&plan, reterr);
                plan.n_waves = w + 1;
                for (size_t i = 0; i < json_array_size(a); i++) {
                        const char *s = json_string_value(json_array_get(a, i));
                        if (!fleet_node_name_valid(s)) {
                                fleet_rollout_plan_done(&plan);
                                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                 "a rollout plan names a node badly");
                        }
                        if (!(plan.waves[w][i] = strdup(s)))
                                return plan_oom(&plan, reterr);
                        plan.wave_sizes[w] = i + 1;
                }
        }
        *ret = plan;
        return 0;
}

/* ---- the state ---- */

static const char *const phases[_ROLLOUT_PHASE_MAX] = {
        [ROLLOUT_PROGRESSING] = "progressing",
        [ROLLOUT_PAUSED] = "paused",
        [ROLLOUT_HALTED] = "halted",
        [ROLLOUT_ABORTED] = "aborted",
        [ROLLOUT_DONE] = "done",
        [ROLLOUT_SUPERSEDED] = "superseded",
};

const char *fleet_rollout_phase_to_string(FleetRolloutPhase p) {
        return p < _ROLLOUT_PHASE_MAX ? phases[p] : NULL;
}

bool fleet_rollout_state_back(const FleetRolloutState *s) {
        return s->phase == ROLLOUT_HALTED || s->phase == ROLLOUT_ABORTED || s->phase == ROLLOUT_SUPERSEDED;
}

bool fleet_rollout_plan_done_state(const FleetRolloutPlan *plan, FleetRolloutState *ret) {
        if (plan->n_waves > 0)
                return false;
        *ret = (FleetRolloutState){ .phase = ROLLOUT_DONE, .since_ms = plan->created_ms };
        snprintf(ret->why, sizeof(ret->why), "no node was selected when it was planned");
        snprintf(ret->by, sizeof(ret->by), "%s", plan->by);
        return true;
}

bool fleet_rollout_state_ended(const FleetRolloutState *s) {
        return s->phase == ROLLOUT_DONE || fleet_rollout_state_back(s);
}

bool fleet_rollout_state_committed(const FleetRolloutState *s, int wave) {
        /* a node outside the plan commits only once every wave has */
        return s->phase == ROLLOUT_DONE || (wave >= 0 && s->confirmed > (unsigned) wave);
}

int fleet_rollout_state_parse(json_t *j, FleetRolloutState *ret, Error *reterr) {
        FleetRolloutState s = { .phase = ROLLOUT_PROGRESSING };
        const char *phase = json_string_value(json_object_get(j, "state"));
        json_int_t wave = json_integer_value(json_object_get(j, "wave")),
                   confirmed = json_integer_value(json_object_get(j, "confirmed")),
                   since = json_integer_value(json_object_get(j, "since_ms"));

        if (j) {
                size_t i;
                for (i = 0; phase && i < _ROLLOUT_PHASE_MAX && !streq(phases[i], phase); i++)
                        ;
                if (!phase || i == _ROLLOUT_PHASE_MAX || wave < 0 || confirmed < 0 || since < 0 ||
                    wave > FLEET_WAVES_MAX * 1000 || confirmed > FLEET_WAVES_MAX * 1000)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "a rollout state needs state, wave, confirmed");
                s.phase = (FleetRolloutPhase) i;
                s.wave = (unsigned) wave;
                s.confirmed = (unsigned) confirmed;
                s.since_ms = (uint64_t) since;
                s.promoted = json_is_true(json_object_get(j, "promoted"));
                snprintf(s.why, sizeof(s.why), "%s", strempty(json_string_value(json_object_get(j, "why"))));
                snprintf(s.by, sizeof(s.by), "%s", strempty(json_string_value(json_object_get(j, "by"))));
                snprintf(s.superseded_by, sizeof(s.superseded_by), "%s",
                         strempty(json_string_value(json_object_get(j, "superseded_by"))));
        }
        *ret = s;
        return 0;
}

json_t *fleet_rollout_state_to_json(const FleetRolloutState *s) {
        json_t *j = json_pack("{s:s,s:I,s:I,s:b,s:I,s:s,s:s}", "state", phases[s->phase], "wave",
                              (json_int_t) s->wave, "confirmed", (json_int_t) s->confirmed, "promoted",
                              s->promoted, "since_ms", (json_int_t) s->since_ms, "why", s->why, "by", s->by);

        if (j && s->phase == ROLLOUT_SUPERSEDED &&
            json_object_set_new(j, "superseded_by", json_string(s->superseded_by)) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

FleetWaveVerdict fleet_wave_verdict(size_t size, size_t healthy, size_t failed, unsigned max_unhealthy,
                                    bool timeout) {
        size_t unhealthy = timeout ? size - MIN(healthy, size) : failed;

        if (unhealthy > max_unhealthy)
                return WAVE_HALT;
        if (healthy + max_unhealthy >= size)
                return WAVE_CONFIRMED;
        return WAVE_WAIT;
}

void fleet_rollout_state_next(const FleetRolloutState *s, unsigned wave, size_t n_waves, FleetWaveVerdict v,
                              uint64_t now_ms, FleetRolloutState *ret) {
        FleetRolloutState n = *s;

        n.by[0] = 0;
        n.why[0] = 0;
        if (v == WAVE_HALT) {
                n.phase = ROLLOUT_HALTED;
        } else if (v == WAVE_CONFIRMED) {
                n.confirmed = MAX(n.confirmed, wave + 1);
                if (wave + 1 >= n_waves) {
                        n.phase = ROLLOUT_DONE;
                        n.wave = wave;
                } else if (n.wave <= wave) {
                        n.wave = wave + 1;
                        n.since_ms = now_ms;
                }
        }
        *ret = n;
}

static const char *const steps[_NODE_STEP_MAX] = {
        [NODE_APPLIED] = "applied",
        [NODE_HEALTHY] = "healthy",
        [NODE_FAILED] = "failed",
};

const char *fleet_node_step_to_string(FleetNodeStep s) {
        return s < _NODE_STEP_MAX ? steps[s] : NULL;
}

/* ---- keys ---- */

char *fleet_rollout_key(const char *prefix, const char *policy, const char *id, const char *what) {
        char *s = NULL;

        if (asprintf(&s, "%srollouts/%s/%s%s%s", prefix, policy, id ?: "", what ? "/" : "", what ?: "") < 0)
                return NULL;
        return s;
}

char *fleet_rollout_node_key(const char *prefix, const char *policy, const char *id, int wave, int step,
                             const char *node) {
        char *s = NULL;
        int r;

        if (wave < 0)
                r = asprintf(&s, "%srollout-nodes/%s/%s/", prefix, policy, id);
        else if (step < 0)
                r = asprintf(&s, "%srollout-nodes/%s/%s/%d/", prefix, policy, id, wave);
        else
                r = asprintf(&s, "%srollout-nodes/%s/%s/%d/%s/%s", prefix, policy, id, wave, steps[step],
                             strempty(node));
        return r < 0 ? NULL : s;
}

char *fleet_history_key(const char *prefix, const char *policy, const char *id) {
        char *s = NULL;

        if (asprintf(&s, "%shistory/%s/%s", prefix, policy, strempty(id)) < 0)
                return NULL;
        return s;
}
