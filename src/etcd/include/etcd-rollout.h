/* etcd-rollout.h: rollouts in waves, as etcd holds them (rollout.c), read and written alike by clsd's
 * nodes and by clsctl.
 *
 * Under the prefix, for policy NAME and rollout ID (the envelope's "rollout"."id"):
 *   rollouts/NAME/ID/plan          the waves, fixed when the rollout starts (JSON; nodes in order)
 *   rollouts/NAME/ID/state         where it is: the wave nodes may apply, the waves confirmed, paused,
 *                                  halted, aborted or done (written by transactions on its revision)
 *   rollout-nodes/NAME/ID/W/S/NODE a node of wave W in step S (applied, healthy, failed), bound to its
 *                                  lease: counted by count-only ranges, one per step
 *   history/NAME/ID                who applied which policy, when, and what changed (the last
 *                                  FLEET_HISTORY_KEEP, also after fleet rm: a rollback takes an old
 *                                  revision's policy from here) */
#pragma once

#include "etcd.h"

#define FLEET_ROLLOUT_ID_MAX 64
#define FLEET_WAVES_MAX 16
/* The revisions of a policy its history keeps (history/NAME/ID): clsctl deletes older ones, with their
 * rollouts' keys, when it writes a new one. */
#define FLEET_HISTORY_KEEP 32

/* ---- a policy's envelope ---- */
/* "rollout" (NULL: none; its defaults: waves [1, "10%", "50%", "100%"], hold 60 s, confirm 20 s,
 * max_unhealthy 0, no spread). */
int fleet_rollout_parse(json_t *j, FleetRollout *ret, Error *reterr);
/* "health": a list of checks (NULL: none). */
int fleet_health_parse(json_t *j, FleetHealthCheck **ret, size_t *ret_n, Error *reterr);
/* Each check's metric is one the policy's filters declare ("metrics": [{"name"}]): a name that is not
 * would be no gate at all. */
int fleet_health_check_metrics(const FleetHealthCheck *v, size_t n, json_t *policy, Error *reterr);
/* "nodes": {"kernel", "features"} into p. */
int fleet_gates_parse(json_t *nodes, FleetPolicy *p, Error *reterr);
/* "60s", "500ms", "2m" or a number of seconds. */
int fleet_duration_parse(json_t *j, uint64_t *ret_usec);
/* A waves list from clsctl's --waves ("1,10%,100%"). */
int fleet_waves_parse(const char *s, FleetWave **ret, size_t *ret_n, Error *reterr);
json_t *fleet_waves_to_json(const FleetWave *v, size_t n);

/* ---- the plan ---- */
/* A node as its record (nodes/NODE) says. */
typedef struct FleetNodeInfo {
        const char *node;
        const FleetLabel *labels;
        size_t n_labels;
        FleetNodeFacts facts;
} FleetNodeInfo;

typedef struct FleetRolloutPlan {
        char *policy;
        char id[FLEET_ROLLOUT_ID_MAX + 1];
        char ***waves; /* each a NULL-terminated list of node names, in order */
        size_t *wave_sizes;
        size_t n_waves;
        uint64_t hold_usec, confirm_usec;
        unsigned max_unhealthy;
        uint64_t created_ms; /* CLOCK_REALTIME of its maker: wave 0 began then */
        char by[128]; /* who made it (clsctl's user, or a node) */
        json_t *excluded; /* [{"node", "why"}]: selected, but the kernel gates keep them out */
} FleetRolloutPlan;

/* The plan of policy p's rollout over the nodes (the selected and qualified ones, in an order stable for
 * the rollout's id and spread over the values of its spread label, cut into its waves; a wave that would
 * be empty is left out, and the nodes past the last wave join it). */
int fleet_rollout_plan_make(const FleetPolicy *p, const FleetNodeInfo *nodes, size_t n,
                            FleetRolloutPlan *ret, Error *reterr);
json_t *fleet_rollout_plan_to_json(const FleetRolloutPlan *plan);
int fleet_rollout_plan_parse(json_t *j, FleetRolloutPlan *ret, Error *reterr);
void fleet_rollout_plan_done(FleetRolloutPlan *plan);
/* The wave the node is in, or -1. */
int fleet_rollout_plan_wave_of(const FleetRolloutPlan *plan, const char *node);

/* ---- the state ---- */
/* A rollout's phase. Done, halted, aborted and superseded are its end: nothing moves it on from there
 * (the nodes and clsctl's verbs both refuse), so that what the history says of it never changes. When
 * it ends otherwise than done, each node whose wave was not confirmed goes back to the last revision it
 * committed; a node whose wave was confirmed keeps the revision (committed: clsctl fleet rollback takes
 * it back, as a new revision). */
typedef enum FleetRolloutPhase {
        ROLLOUT_PROGRESSING,
        ROLLOUT_PAUSED,
        ROLLOUT_HALTED, /* a wave was unhealthy */
        ROLLOUT_ABORTED, /* an operator's halt */
        ROLLOUT_DONE, /* every wave confirmed */
        ROLLOUT_SUPERSEDED, /* a newer apply (or fleet rm) of its policy came before it was done */
        _ROLLOUT_PHASE_MAX,
} FleetRolloutPhase;

typedef struct FleetRolloutState {
        FleetRolloutPhase phase;
        unsigned wave; /* nodes of waves <= wave may apply */
        unsigned confirmed; /* waves < confirmed are confirmed healthy: their nodes commit */
        bool promoted; /* the remaining holds skipped */
        uint64_t since_ms; /* when wave began (CLOCK_REALTIME of its writer) */
        char why[256];
        char by[128];
        char superseded_by[FLEET_ROLLOUT_ID_MAX +
                           1]; /* superseded: the newer apply's id ("" for fleet rm) */
} FleetRolloutState;

const char *fleet_rollout_phase_to_string(FleetRolloutPhase p);
/* NULL (no state key yet): wave 0, progressing. */
int fleet_rollout_state_parse(json_t *j, FleetRolloutState *ret, Error *reterr);
json_t *fleet_rollout_state_to_json(const FleetRolloutState *s);
/* Whether the rollout ended without being done (halted, aborted, superseded): the nodes whose wave was
 * not confirmed go back to what they committed. */
bool fleet_rollout_state_back(const FleetRolloutState *s);
/* A plan of no wave (no node selected and qualified when it was made) is done as it is written: its
 * state, written with it (else it would progress forever, and a node that gains the label later, which
 * waits for the rollout to be done, would never apply it). false: the plan needs no state of its own. */
bool fleet_rollout_plan_done_state(const FleetRolloutPlan *plan, FleetRolloutState *ret);
/* Whether the rollout ended (done, or back): its state never changes again. */
bool fleet_rollout_state_ended(const FleetRolloutState *s);
/* Whether the node of wave (-1: not in the plan) committed the rollout's revision: its wave confirmed, or
 * the rollout done. */
bool fleet_rollout_state_committed(const FleetRolloutState *s, int wave);

/* What a wave of size nodes comes to, with healthy and failed of them so far (timeout: its time is up,
 * the rest count as unhealthy). */
typedef enum FleetWaveVerdict {
        WAVE_WAIT,
        WAVE_CONFIRMED,
        WAVE_HALT,
} FleetWaveVerdict;

FleetWaveVerdict fleet_wave_verdict(size_t size, size_t healthy, size_t failed, unsigned max_unhealthy,
                                    bool timeout);
/* The state after the verdict on wave (of n_waves) of s, at now_ms. */
void fleet_rollout_state_next(const FleetRolloutState *s, unsigned wave, size_t n_waves, FleetWaveVerdict v,
                              uint64_t now_ms, FleetRolloutState *ret);

/* ---- a node's steps ---- */
typedef enum FleetNodeStep {
        NODE_APPLIED, /* applied, holding */
        NODE_HEALTHY,
        NODE_FAILED, /* applying failed, a check failed, or it reverted (lost etcd) */
        _NODE_STEP_MAX,
} FleetNodeStep;

const char *fleet_node_step_to_string(FleetNodeStep s);

/* ---- keys ---- */
char *fleet_rollout_key(const char *prefix, const char *policy, const char *id, const char *what);
/* rollout-nodes/NAME/ID/W/STEP/ (node NULL: the step's prefix; wave -1 and step -1: the rollout's) */
char *fleet_rollout_node_key(const char *prefix, const char *policy, const char *id, int wave, int step,
                             const char *node);
char *fleet_history_key(const char *prefix, const char *policy, const char *id);
