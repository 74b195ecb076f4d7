/* fleet-rollout.h: what clsctl writes with a fleet policy (fleet-rollout.c): its rollout's id and plan,
 * and its history entry, in the transaction that writes the policy. */
#pragma once

#include "ctl.h"
#include "etcd-rollout.h"
#include "etcd.h"

/* The transaction's operations for the fleet policy envelope (its objects already digests): the policy,
 * its rollout's plan when it has one ("rollout", or --waves: an id made, the plan from the live nodes'
 * records), its history entry (who, when, the policy, what changed from the revision before;
 * summary: the change's own words, NULL: made from the difference), and the history's oldest entries past
 * FLEET_HISTORY_KEEP deleted with their rollouts' keys. Appended to ops. */
int fleet_apply_ops(EtcdClient *ec, const Ctl *c, json_t *envelope, const char *summary, json_t *compares,
                    json_t *ops);
/* The compares and operations that supersede the rollout of old (the envelope etcd has for name at
 * old_revision; NULL: none) if it has not ended: its state becomes superseded (by the apply by_id; NULL:
 * the policy's removal) by who; the transaction holds only while neither the policy nor that state moved
 * since they were read (another apply, a node judging a wave): else the caller reads again. */
int fleet_supersede_ops(EtcdClient *ec, const Ctl *c, const char *name, json_t *old, uint64_t old_revision,
                        const char *by_id, const char *by, json_t *compares, json_t *ops);
/* The history entry of the policy's removal (who, when, the revision it had). */
int fleet_removal_ops(const Ctl *c, const char *name, uint64_t old_revision, json_t *ops);
/* The history's oldest entries past FLEET_HISTORY_KEEP deleted, with their rollouts' keys. */
int fleet_prune_ops(EtcdClient *ec, const Ctl *c, const char *name, json_t *ops);
/* The transaction: 1 if its compares held and it was written, 0 if not (nothing written). */
int fleet_txn(EtcdClient *ec, json_t *compares, json_t *ops, json_t **ret_answer);
/* A compare: key's mod_revision is revision (0: no such key). */
int fleet_compare_mod(json_t *compares, const char *key, uint64_t revision);
/* How many times a transaction whose compares failed (another writer came between its read and its
 * write) is read and tried again. */
#define FLEET_TXN_ATTEMPTS 5
/* The operations that delete rollout id of policy name (its plan, its state, its nodes' steps); id NULL:
 * every rollout of the policy. */
int fleet_rollout_forget_ops(const Ctl *c, const char *name, const char *id, json_t *ops);
/* --sign KEY: the envelope signed at a serial above old's (the envelope etcd has; NULL: none). */
int fleet_sign(const Ctl *c, json_t *envelope, json_t *old);
/* The current revision of policy name and its envelope (NULL, 0: none). */
int fleet_policy_current(EtcdClient *ec, const Ctl *c, const char *name, json_t **ret,
                         uint64_t *ret_revision);
/* The live nodes' records (nodes/ bound to a live lease), as FleetNodeInfo over rows (kept by the caller).
 */
int fleet_live_nodes(EtcdClient *ec, const Ctl *c, json_t **ret_rows, FleetNodeInfo **ret, size_t *ret_n);
void fleet_node_infos_free(FleetNodeInfo *v, size_t n);
/* The live nodes a command read, for _cleanup_(fleet_node_infos_done). */
typedef struct FleetNodeInfos {
        FleetNodeInfo *v;
        size_t n;
} FleetNodeInfos;
static inline void fleet_node_infos_done(FleetNodeInfos *ni) {
        fleet_node_infos_free(ni->v, ni->n);
}
