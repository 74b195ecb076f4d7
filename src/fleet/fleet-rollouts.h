/* fleet-rollouts.h: rollouts as the node follows them: their keys watched, its own waves judged, the
 * dead-man switch */
#pragma once

#include "fleet-internal.h"
#include "fleet-plan.h"

/* ---- rollouts.c ---- */
void rollout_views_clear(RolloutViews *s);
RolloutView *rollout_views_find(const RolloutViews *s, const char *policy, const char *id);
/* A key under PREFIX rollouts/ (a plan, a state) as etcd has it now (deleted: gone); now: CLOCK_MONOTONIC.
 */
int rollout_views_set(RolloutViews *s, const char *prefix, const EtcdKv *kv, bool deleted, uint64_t now);

/* ---- node-rollouts.c ---- */
void node_rollout_done(NodeRollout *r);
NodeRollout *node_rollout_find(Fleet *f, const char *policy);
void node_rollout_remove(Fleet *f, NodeRollout *r);
/* This node's part in rollout id of w begun (at wave): the last revision it committed is what it goes
 * back to (what the daemon holds, or what an uncommitted earlier rollout's would), kept on disk before the
 * revision is applied. NULL: out of memory. */
NodeRollout *node_rollout_begin(Fleet *f, const Wanted *w, const char *id, int wave);
/* Whether the node committed r's revision: its wave confirmed, or the rollout done (then for good). */
bool node_rollout_committed(Fleet *f, NodeRollout *r);
/* Whether the daemon holds r's revision without having committed it (or while going back from it): what
 * a newer rollout, or an end, takes back to r's from. */
bool node_rollout_uncommitted(Fleet *f, NodeRollout *r);
/* Written whole (fleet-rollouts.json in the daemon's store), read at the start. */
void node_rollouts_save(Fleet *f);
void node_rollouts_load(Fleet *f);

/* ---- rollout-wave.c ---- */
/* The node's step in r's rollout (said in etcd once connected; logged). */
void rollout_step_set(Fleet *f, NodeRollout *r, FleetNodeStep step, const char *why);
/* After the node said its final step: its wave judged, if it is the current one. */
void rollout_evaluate(Fleet *f, NodeRollout *r, bool timeout);
/* Each wave whose time ran out (for this node, of its wave or one before it) judged, the missing as
 * unhealthy; *next: when the next one's runs out. */
void rollout_wave_deadlines(Fleet *f, uint64_t now, uint64_t *next);
/* A rollout of a selected policy with no plan yet: a node plans it if none has after a while. */
void rollout_plans_missing(Fleet *f);

/* ---- rollout.c ---- */
/* etcd answered (EtcdAsync's contact callback). */
void rollout_contact(void *userdata);
/* At the start: what this node kept of its rollouts; etcd's answers counted as contact. */
int rollout_start(Fleet *f);
void rollout_free(Fleet *f);
/* Before each converge: what the node is to hold of each wanted policy (Wanted.desire); a revision about
 * to be applied first has what it replaces kept on disk. */
void rollout_desire_all(Fleet *f);
/* Each rollout of this node moved on as far as it can now (hold, health, dead-man switch, a wave's
 * time), the timers set for the next look, the faces' view updated. */
void rollout_tick(Fleet *f);
/* The rollouts' keys changed (a list, the watch). */
void rollout_views_changed(Fleet *f);
/* A group of the daemon's was applied at revision (e: it failed). */
void rollout_applied(Fleet *f, char *const *names, size_t n, uint64_t revision, const Error *e);
/* The node's steps written under its lease (after a new one). */
void rollout_publish(Fleet *f);
/* The node's part in w's rollout for its status (NULL: w does not roll out); the status's state and why
 * as the rollout makes them (waiting, reverted, rolled-back, failed). */
json_t *rollout_status_json(Fleet *f, const Wanted *w, const char **state, const char **why);
/* Before etcd was read (a start without it): what the dead-man switch took back, as changes (at most
 * max, into v). */
size_t rollout_reverts(Fleet *f, Pending *v, size_t max);
/* The connection went: holds begin again on the next, and the steps being written are written again. */
void rollout_reset(Fleet *f);
/* A new lease: every step is written again under it. */
void rollout_republish(Fleet *f);
/* The state of a rollout moved from the one at revision judged to next (fails if another moved it). */
void rollout_state_write(Fleet *f, const char *policy, const char *id, uint64_t judged,
                         const FleetRolloutState *next);
