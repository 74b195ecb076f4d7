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
int fleet_apply_ops(EtcdClient *ec, const Ctl *c, json_t *envelope, const char *summary, json_t *ops);
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
