/* node-rollouts.c: this node's part in each rollout it applied, kept on disk (the daemon's store,
 * fleet-rollouts.json) so that a restart, even without etcd, still knows what it would go back to:
 * what the node held before the revision, whether it went back, whether its wave was confirmed; and,
 * with them, the serials of signed policies it accepted (trust.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "daemon-fleet.h"
#include "daemon-policies.h"
#include "store-policy.h"
#include "fleet-rollouts.h"

void node_rollout_done(NodeRollout *r) {
        free(r->policy);
        json_decref(r->from_body);
        free(r->samples);
        *r = (NodeRollout){ 0 };
}

NodeRollout *node_rollout_find(Fleet *f, const char *policy) {
        for (size_t i = 0; i < f->mine.n; i++)
                if (streq(f->mine.v[i].policy, policy))
                        return &f->mine.v[i];
        return NULL;
}

void node_rollout_remove(Fleet *f, NodeRollout *r) {
        node_rollout_done(r);
        *r = f->mine.v[--f->mine.n];
}

bool node_rollout_committed(Fleet *f, NodeRollout *r) {
        const RolloutView *v = rollout_views_find(&f->rollouts, r->policy, r->id);

        if (!r->committed && v && v->has_plan && fleet_rollout_state_committed(&v->state, r->wave)) {
                r->committed = true; /* for good: what its wave confirmed, an end does not take back */
                node_rollouts_save(f);
        }
        return r->committed;
}

bool node_rollout_uncommitted(Fleet *f, NodeRollout *r) {
        Policy *p = daemon_policy_get(f->m, r->policy);

        /* (a switch that went off, or a rollback under way, holds it no more than it must) */
        return p && p->fleet_revision == r->to_revision &&
               (r->reverted || r->rolled_back || !node_rollout_committed(f, r));
}

/* What survives a restart: what the node held before each rollout it applied, and whether it went back. */
void node_rollouts_save(Fleet *f) {
        _cleanup_(json_decrefp) json_t *keep = json_object();
        _cleanup_error_ Error e = ERROR_NULL;

        for (size_t i = 0; keep && i < f->mine.n; i++) {
                const NodeRollout *r = &f->mine.v[i];
                json_object_set_new(
                        keep, r->policy,
                        json_pack("{s:s,s:I,s:I,s:O,s:b,s:b,s:b,s:i,s:I,s:s}", "id", r->id, "to",
                                  (json_int_t) r->to_revision, "from", (json_int_t) r->from_revision,
                                  "from_body", r->from_body ?: json_null(), "reverted", r->reverted,
                                  "rolled_back", r->rolled_back, "committed", r->committed, "wave", r->wave,
                                  "confirm_ms", (json_int_t) (r->confirm_usec / 1000), "why", r->why));
        }
        /* what trust.c accepted goes with them: {"rollouts": {...}, "signed": {...}} */
        _cleanup_(json_decrefp) json_t *all =
                keep ? json_pack("{s:i,s:O,s:O}", "version", 2, "rollouts", keep, "signed", f->accepted)
                     : NULL;
        if (!all || daemon_fleet_keep_save(f->m, all, &e) < 0)
                log_error("fleet: cannot keep what this node's rollouts would go back to: %s",
                          strna(e.message ?: "out of memory"));
}

void node_rollouts_load(Fleet *f) {
        _cleanup_(json_decrefp) json_t *all = daemon_fleet_keep_load(f->m);
        /* before version 2, the file was the rollouts alone */
        bool v2 = json_integer_value(json_object_get(all, "version")) == 2;
        json_t *keep = v2 ? json_object_get(all, "rollouts") : all;
        const char *name;
        json_t *v;

        if (v2 && json_is_object(json_object_get(all, "signed")))
                (void) json_object_update(f->accepted, json_object_get(all, "signed"));
        json_object_foreach (keep, name, v) {
                NodeRollout *nv = realloc(f->mine.v, (f->mine.n + 1) * sizeof(NodeRollout));
                json_t *body = json_object_get(v, "from_body");
                if (!nv)
                        return;
                f->mine.v = nv;
                NodeRollout *r = &f->mine.v[f->mine.n];
                *r = (NodeRollout){
                        .policy = strdup(name),
                        .to_revision = (uint64_t) json_integer_value(json_object_get(v, "to")),
                        .from_revision = (uint64_t) json_integer_value(json_object_get(v, "from")),
                        .from_body = json_is_object(body) ? json_incref(body) : NULL,
                        .reverted = json_is_true(json_object_get(v, "reverted")),
                        .rolled_back = json_is_true(json_object_get(v, "rolled_back")),
                        .committed = json_is_true(json_object_get(v, "committed")),
                        .wave = (int) json_integer_value(json_object_get(v, "wave")),
                        .confirm_usec =
                                (uint64_t) json_integer_value(json_object_get(v, "confirm_ms")) * 1000
                };
                if (!r->policy)
                        return;
                snprintf(r->id, sizeof(r->id), "%s", strempty(json_string_value(json_object_get(v, "id"))));
                snprintf(r->why, sizeof(r->why), "%.255s",
                         strempty(json_string_value(json_object_get(v, "why"))));
                f->mine.n++;
        }
}

/* This node's part in the rollout id of policy w, begun: what it goes back to is the last revision it
 * committed, kept on disk before the revision is applied. That is what the daemon holds now, unless an
 * earlier rollout brought it and no wave confirmed it: then what that one would have gone back to. */
NodeRollout *node_rollout_begin(Fleet *f, const Wanted *w, const char *id, int wave) {
        NodeRollout *r = node_rollout_find(f, w->name);
        Policy *held = daemon_policy_get(f->m, w->name);
        uint64_t from_revision = 0;
        json_t *from_body = NULL;

        if (r && streq(r->id, id)) {
                r->wave = wave;
                return r;
        }
        if (r && node_rollout_uncommitted(f, r)) {
                from_revision = r->from_revision;
                from_body = TAKE_PTR(r->from_body);
        } else if (held && held->fleet_revision) {
                from_revision = held->fleet_revision;
                from_body = policy_to_json(held);
        }
        if (r)
                node_rollout_remove(f, r);
        NodeRollout *nv = realloc(f->mine.v, (f->mine.n + 1) * sizeof(NodeRollout));
        if (!nv) {
                json_decref(from_body);
                return NULL;
        }
        f->mine.v = nv;
        r = &f->mine.v[f->mine.n];
        *r = (NodeRollout){ .policy = strdup(w->name),
                            .to_revision = w->revision,
                            .wave = wave,
                            .from_revision = from_revision,
                            .from_body = from_body };
        if (!r->policy) {
                json_decref(from_body);
                *r = (NodeRollout){ 0 };
                return NULL;
        }
        snprintf(r->id, sizeof(r->id), "%s", id);
        f->mine.n++;
        node_rollouts_save(f);
        return r;
}
