/* policy-status.c: what this node says of a fleet policy in its status (status/NODE/POLICY): the revision
 * etcd asks of it, the one whose filters its kernel holds and the last one it committed, its state, and
 * each interface of what it holds with the policy's state there and each hook's. status.c writes it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-changes.h"
#include "daemon-fleet.h"
#include "daemon-policies.h"
#include "fleet-internal.h"
#include "fleet-io.h"
#include "fleet-rollouts.h"
#include "store-policy.h"

static const char *hook_names[] = { "ingress", "egress" };

/* One interface of the policy the daemon holds: the policy's state on it (and with or by whom), the
 * interface's error, each hook's. */
static json_t *iface_status(const Iface *it, const Policy *p, PolicyIfaceState *ret) {
        json_t *ji = json_object();
        const char *whose = NULL;
        PolicyIfaceState st = iface_policy_outcome(it, p, &whose);

        if (!ji)
                return NULL;
        json_object_set_new(ji, "ifname", json_string(iface_ifname(it)));
        if (iface_netns(it))
                json_object_set_new(ji, "netns", json_string(iface_netns(it)));
        json_object_set_new(ji, "state", json_string(policy_iface_state_to_string(st)));
        if (whose)
                json_object_set_new(ji, st == POLICY_IFACE_CONFLICT ? "with" : "by", json_string(whose));
        if (iface_state(it) == IFACE_FAILED && iface_error(it)->message)
                json_object_set_new(ji, "error", json_string(iface_error(it)->message));
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                const char *by = NULL, *s = iface_policy_state(it, p, dir, &by);
                char key[32];
                if (!s)
                        continue;
                json_object_set_new(ji, hook_names[dir], json_string(s));
                if (by) {
                        snprintf(key, sizeof(key), "%s_by", hook_names[dir]);
                        json_object_set_new(ji, key, json_string(by));
                }
        }
        *ret = st;
        return ji;
}

/* The interfaces of what the daemon holds of the policy (whatever its revision: a node that went back,
 * or waits for its wave, still has filters attached), and their states taken together: conflict, failed,
 * pending, unmatched (none), overridden (on every one), applied. */
static json_t *held_ifaces(Fleet *f, Policy *p, const char **ret_state) {
        _cleanup_free_ Iface **v = NULL;
        json_t *ifaces = json_array();
        size_t n = p ? daemon_policy_ifaces(f->m, p, &v) : 0, counts[_POLICY_IFACE_STATE_MAX] = { 0 };

        for (size_t i = 0; ifaces && i < n; i++) {
                PolicyIfaceState st;
                json_t *ji = iface_status(v[i], p, &st);
                if (!ji || json_array_append_new(ifaces, ji) < 0) {
                        json_decref(ifaces);
                        return NULL;
                }
                counts[st]++;
        }
        *ret_state = counts[POLICY_IFACE_CONFLICT]          ? "conflict"
                     : counts[POLICY_IFACE_FAILED]          ? "failed"
                     : counts[POLICY_IFACE_PENDING]         ? "pending"
                     : n == 0                               ? "unmatched"
                     : counts[POLICY_IFACE_OVERRIDDEN] == n ? "overridden"
                                                            : "applied";
        return ifaces;
}

/* The revision the node committed of w's policy: what it holds, unless a rollout brought that and no
 * wave of it confirmed it (then what the node goes back to: 0, none). */
static uint64_t committed_revision(Fleet *f, const Wanted *w, const Policy *p) {
        NodeRollout *r = node_rollout_find(f, w->name);

        if (r && node_rollout_uncommitted(f, r))
                return r->from_revision;
        return p ? p->fleet_revision : 0;
}

static json_t *revision_json(uint64_t revision) {
        return revision ? json_integer((json_int_t) revision) : json_null();
}

/* This node's status of a policy that selects it: the revision etcd asks for, the one whose filters the
 * daemon holds, the one it committed; its state and why; the interfaces of what it holds. */
json_t *policy_status(Fleet *f, const Wanted *w) {
        Policy *p = daemon_policy_get(f->m, w->name);
        uint64_t held = p ? p->fleet_revision : 0;
        const char *state = "applied", *why = NULL;
        json_t *j = json_object(), *ifaces = held_ifaces(f, p, &state);

        if (!j || !ifaces) {
                json_decref(j);
                json_decref(ifaces);
                return NULL;
        }
        /* a revision not held yet: being applied, or failed (its error) */
        if (w->error && w->error_revision == w->revision) {
                state = "failed";
                why = w->error;
        } else if (held != w->revision)
                state = "pending";
        json_t *rollout = rollout_status_json(f, w, &state, &why);
        if (w->ineligible) {
                state = "ineligible"; /* selected, but its kernel gates keep this node out */
                why = w->ineligible;
        } else if (w->refused) {
                state = "failed"; /* not signed as this node requires: nothing of it applied */
                why = w->refused;
        }
        json_object_set_new(j, "node", json_string(f->node));
        json_object_set_new(j, "policy", json_string(w->name));
        json_object_set_new(j, "revision", json_integer((json_int_t) w->revision));
        json_object_set_new(j, "held_revision", revision_json(held));
        json_object_set_new(j, "committed_revision", revision_json(committed_revision(f, w, p)));
        json_object_set_new(j, "applied_revision", revision_json(held)); /* (its name before 0.2) */
        json_object_set_new(j, "state", json_string(state));
        if (why)
                json_object_set_new(j, "error", json_string(why));
        if (rollout)
                json_object_set_new(j, "rollout", rollout);
        json_object_set_new(j, "interfaces", ifaces);
        return j;
}
