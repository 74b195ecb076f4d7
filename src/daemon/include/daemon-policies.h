/* daemon-policies.h: policies, one document for every interface that matches, as the faces see them */
#pragma once

#include "daemon.h"
#include "daemon-changes.h"
#include "store-policy.h"

/* ---- policies: one document for every interface that matches ---- */

/* What a policy change did (or would do) to one interface it matched before or matches now. */
typedef struct PolicyResult {
        char *netns;
        char ifname[IF_NAMESIZE];
        bool matched; /* the (new) policy matches it; false: it lost the policy */
        bool removed; /* nothing is declared for it any more: clsd's filters went */
        IfaceState state;
        PolicyIfaceState policy_state; /* the policy's on it (matched) */
        char *by; /* the conflict, or whose its hooks are (overridden) */
        Error error; /* its state's reason, when failed */
        DryRun dry_run; /* a dry run's plan */
} PolicyResult;

typedef struct PolicyOutcome {
        const Policy *policy; /* the new one (NULL after a DELETE) */
        bool dry_run;
        PolicyResult *results;
        size_t n_results;
} PolicyOutcome;

typedef void (*PolicyDoneFunc)(Manager *m, const PolicyOutcome *o, const Error *e, void *userdata);

size_t daemon_policy_count(Manager *m);
Policy *daemon_policy_at(Manager *m, size_t i);
Policy *daemon_policy_get(Manager *m, const char *name);
/* PUT /policies/NAME: parsed strictly, its objects resolved and programs loaded and verified before it
 * is stored (once, durably); then every interface it matches, now or no longer, is applied on its own,
 * and done tells how each ended. dry_run: the plan of each, nothing loaded, stored or changed. */
void daemon_policy_put(Manager *m, const char *name, json_t *body, const DaemonExpect *expect, bool dry_run,
                       PolicyDoneFunc done, void *userdata);
void daemon_policy_delete(Manager *m, const char *name, const DaemonExpect *expect, PolicyDoneFunc done,
                          void *userdata);
/* The fleet's (src/fleet/): policies from etcd, each put (body, at revision, kept with it) or removed
 * (body NULL), as one: every program verified before anything is stored, stored as one, applied as one;
 * one refused, none is. The API cannot change such a policy; the fleet's is refused (name_taken) where a
 * local policy holds the name. */
typedef struct FleetPolicyChange {
        const char *name;
        json_t *body;
        uint64_t revision;
        uint64_t pull_nodes; /* the nodes that pull its images about now (0: none but this one): the
                              * pulls spread over them, at their registry's pace */
} FleetPolicyChange;
void daemon_fleet_policies_change(Manager *m, const FleetPolicyChange *v, size_t n, PolicyDoneFunc done,
                                  void *userdata);
/* A fleet policy's dry run (clsctl fleet diff): what daemon_fleet_policies_change() would do with it on
 * each interface it matches, as PUT /policies/NAME?dry_run=1 answers it; nothing loaded, stored or
 * changed. Its objects must be stored already. */
void daemon_fleet_policy_dry_run(Manager *m, const FleetPolicyChange *v, PolicyDoneFunc done,
                                 void *userdata);
/* The interfaces holding the policy (matched), in the table's order. */
size_t daemon_policy_ifaces(Manager *m, const Policy *p, Iface ***ret);
/* What each hook of it is to p ("applied", "failed" or "pending" as the interface is when p holds the
 * hook; "overridden" by another source, "conflict" with a policy of the same order; NULL: p declares none
 * there); by: whose (overridden), or with whom (conflict). */
const char *iface_policy_state(const Iface *it, const Policy *p, Direction dir, const char **by);
const char *policy_iface_state_to_string(PolicyIfaceState s);
/* by: the conflict (conflict), or whose the hooks are (overridden), else NULL. */
PolicyIfaceState iface_policy_outcome(const Iface *it, const Policy *p, const char **by);
size_t iface_policy_count(const Iface *it);
const Policy *iface_policy_at(const Iface *it, size_t i);
