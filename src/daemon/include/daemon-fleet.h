/* daemon-fleet.h: the fleet's status of each policy on this node, kept by src/fleet and shown by the faces
 */
#pragma once

#include "daemon.h"

/* ---- the fleet: clsd --fleet (src/fleet/) keeps its status; the daemon shows it to the faces and keeps
 * the revision applied ---- */
#define DAEMON_FLEET_ROLLOUTS_MAX 16
/* A rollout this node takes part in, as the faces show it. */
typedef struct DaemonFleetRollout {
        char policy[65];
        char id[65];
        char phase[16]; /* progressing, paused, halted, aborted, done */
        char step[16]; /* this node: waiting, applied, healthy, failed, reverted, rolled-back */
        int wave; /* this node's (-1: not in the plan) */
        unsigned current_wave, confirmed, n_waves;
        uint64_t revision; /* the one the rollout brings */
        char why[256];
} DaemonFleetRollout;

#define DAEMON_FLEET_POLICIES_MAX 64
/* What this node says of one fleet policy that selects it (its status in etcd), as the faces show it. */
typedef struct DaemonFleetPolicy {
        char policy[65];
        char state[16]; /* applied, pending, waiting, failed, conflict, overridden, unmatched, … */
        uint64_t revision; /* the one etcd asks for */
        uint64_t held; /* the one whose filters the daemon holds (0: none) */
        uint64_t committed; /* the last this node committed (0: none) */
        unsigned interfaces[_POLICY_IFACE_STATE_MAX]; /* of what it holds, by the policy's state on each */
        char why[256];
} DaemonFleetPolicy;

typedef struct DaemonFleet {
        bool enabled;
        bool connected; /* etcd answered, the node's lease is held and the watch runs */
        char node[64];
        char endpoint[256]; /* the endpoint in use, or the last tried */
        uint64_t revision; /* the etcd revision of the fleet snapshot applied (kept across restarts) */
        uint64_t seen_revision; /* the last etcd revision read */
        uint64_t changes; /* fleet policy changes applied */
        uint64_t reconnects;
        uint64_t requests; /* made to etcd (a watch counts once, a call sent again again) */
        uint64_t busy_answers; /* etcd answered busy (too many requests, no leader, no answer in time) */
        uint64_t retries; /* calls sent again after a busy answer */
        uint64_t busy_failures; /* calls still unanswered after the client's retries: done again later */
        uint64_t stream_restarts; /* the watch begun again, the connection kept */
        uint64_t lease_renewals; /* a new lease, the old one gone (etcd busy or out of reach too long) */
        unsigned lease_ttl; /* the lease's seconds, as etcd granted it (sized by the fleet) */
        uint64_t authentications; /* logins (a token is kept until etcd forgets it) */
        uint64_t lists; /* the fleet read whole (at the start, after a compaction) */
        uint64_t status_writes; /* requests that wrote the node's record or statuses */
        uint64_t foreign_keys; /* this node's own keys another writer changed or deleted, written again */
        uint64_t
                reverts; /* revisions its dead-man switch took back (etcd lost before they were confirmed) */
        uint64_t rollbacks; /* revisions taken back because their rollout halted or was aborted */
        DaemonFleetRollout rollouts[DAEMON_FLEET_ROLLOUTS_MAX];
        size_t n_rollouts;
        DaemonFleetPolicy policies[DAEMON_FLEET_POLICIES_MAX];
        size_t n_policies;
        char last_error[256]; /* "" */
} DaemonFleet;

/* The fleet's status as the fleet keeps it (borrowed: it outlives its use; NULL: no fleet any more). */
void daemon_set_fleet(Manager *m, const DaemonFleet *status);
/* The fleet's status, or one not enabled (with the revision applied) without --fleet. */
const DaemonFleet *daemon_fleet(Manager *m);
/* The fleet snapshot at revision is applied: kept durably (a start without etcd says so too). */
int daemon_fleet_applied(Manager *m, uint64_t revision, Error *reterr);
/* The revision of the fleet snapshot last applied (kept across restarts; 0: none). */
uint64_t daemon_fleet_revision(Manager *m);
/* What the fleet keeps of its rollouts in flight on this node (a JSON object; NULL: none), durably. */
int daemon_fleet_keep_save(Manager *m, json_t *keep, Error *reterr);
json_t *daemon_fleet_keep_load(Manager *m);
/* The sum on this node of one of policy's map-derived metrics (its filters' "metrics"; a histogram's
 * observations): a fleet health check's reading. */
int daemon_policy_metric_sum(Manager *m, const char *policy, const char *metric, double *ret, Error *reterr);
