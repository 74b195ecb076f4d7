/* rollout.c: this node's part in a rollout. No process drives a rollout: each node decides from etcd's
 * data when its wave's turn has come (rollouts/NAME/ID/state says which waves may apply), applies the
 * revision, holds it (connected, its health checks met) and says so under its lease
 * (rollout-nodes/NAME/ID/W/STEP/NODE); whoever then sees its wave healthy (or a node failed past
 * max_unhealthy, or the wave's time run out) moves the state on by a transaction on its revision, so
 * two nodes cannot both. Until its wave is confirmed the node's dead-man switch is armed: etcd
 * unreachable for "confirm" and it goes back by itself to what it held before (kept on disk before the
 * revision was applied), even when the new program drops the traffic that carries etcd. A halted or
 * aborted rollout takes every node that applied the revision back the same way. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet-internal.h"
#include "log.h"
#include "daemon-changes.h"
#include "daemon-fleet.h"
#include "daemon-policies.h"
#include "store-policy.h"
#include "fleet-io.h"
#include "fleet-plan.h"
#include "fleet-rollouts.h"

/* ---- what this node is to hold ---- */

static bool daemon_holds(Fleet *f, const char *name, uint64_t revision) {
        Policy *p = daemon_policy_get(f->m, name);
        return p && p->fleet_revision == revision;
}

static void desire_back(Wanted *w, const NodeRollout *r) {
        w->desire = DESIRE_BODY;
        w->desire_revision = r->from_revision;
        w->desire_body = r->from_body;
}

/* A rollout's policy: its etcd revision once its wave may apply; before, what the node holds, but for a
 * revision an earlier rollout brought that no wave confirmed (that rollout ended, or was superseded):
 * the node goes back to what it committed. After a halt, an abort or the dead-man switch, what it
 * committed too; a revision its wave confirmed stays. */
static void desire_one(Fleet *f, Wanted *w) {
        char buf[FLEET_ROLLOUT_ID_MAX + 1];
        const char *id = wanted_rollout_id(w, buf);
        RolloutView *v = rollout_views_find(&f->rollouts, w->name, id);
        NodeRollout *r = node_rollout_find(f, w->name), *older = NULL;
        int wave;

        w->desire = DESIRE_KEEP;
        if (r && !streq(r->id, id)) {
                if (!node_rollout_uncommitted(f, r)) {
                        /* its revision was committed, or the node went back: nothing of it to undo */
                        node_rollout_remove(f, r);
                        node_rollouts_save(f);
                } else
                        older = r; /* superseded before its wave confirmed: back, unless this one's came */
                r = NULL;
        }
        if (older)
                desire_back(w, older);
        if (!v || !v->has_plan)
                return; /* waits for its plan */
        wave = fleet_rollout_plan_wave_of(&v->plan, f->node);
        if (r)
                r->wave = wave;
        if (fleet_rollout_state_back(&v->state)) {
                if (r && (r->rolled_back || node_rollout_uncommitted(f, r)))
                        desire_back(w, r);
                return;
        }
        if (r && r->reverted) {
                desire_back(w, r);
                return;
        }
        bool turn = wave < 0 ? v->state.phase == ROLLOUT_DONE
                             : v->state.promoted || v->state.wave >= (unsigned) wave ||
                                       v->state.phase == ROLLOUT_DONE;
        if (!turn || (v->state.phase == ROLLOUT_PAUSED && !daemon_holds(f, w->name, w->revision)))
                return;
        if (wave >= 0) {
                NodeRollout *m = node_rollout_begin(f, w, id, wave);
                if (!m)
                        return; /* out of memory: it waits rather than apply what it could not go back from
                                 */
                if (m->confirm_usec != v->plan.confirm_usec) {
                        m->confirm_usec = v->plan.confirm_usec;
                        node_rollouts_save(f); /* before the revision is applied */
                }
        }
        w->desire = DESIRE_ETCD;
        w->desire_body = NULL;
}

void rollout_desire_all(Fleet *f) {
        for (size_t i = 0; i < f->wanted.n; i++) {
                Wanted *w = &f->wanted.v[i];
                w->desire = DESIRE_ETCD;
                if (w->selected && !w->invalid && !w->gone && !w->refused && w->fp.rollout.present)
                        desire_one(f, w);
        }
        /* a rollout whose policy went, or no longer rolls out here, is over for this node */
        for (size_t i = 0; i < f->mine.n;) {
                const Wanted *w = wanted_find(&f->wanted, f->mine.v[i].policy);
                if (f->listed && (!w || w->gone || !w->selected || !w->fp.rollout.present) &&
                    !daemon_holds(f, f->mine.v[i].policy, f->mine.v[i].to_revision)) {
                        node_rollout_remove(f, &f->mine.v[i]);
                        node_rollouts_save(f);
                } else
                        i++;
        }
}

/* ---- health: held, connected, the checks met ---- */

/* The checks' readings now, into v (n: the policy's checks); -ENOENT with why when one cannot be read. */
static int health_read(Fleet *f, const Wanted *w, double *v, char *why, size_t size) {
        for (size_t i = 0; i < w->fp.n_health; i++) {
                _cleanup_error_ Error e = ERROR_NULL;
                if (daemon_policy_metric_sum(f->m, w->name, w->fp.health[i].metric, &v[i], &e) < 0) {
                        snprintf(why, size, "health: %s", strna(e.message));
                        return -ENOENT;
                }
        }
        return 0;
}

/* The checks over the hold: each metric's rate between the readings at its start and now. */
static bool health_ok(Fleet *f, const Wanted *w, NodeRollout *r, uint64_t now, char *why, size_t size) {
        _cleanup_free_ double *v = calloc(w->fp.n_health + 1, sizeof(double));
        double secs = (double) (now - r->hold_from_usec) / 1e6;

        if (w->fp.n_health == 0)
                return true;
        if (!v || !r->samples || health_read(f, w, v, why, size) < 0)
                return !v || !r->samples
                               ? (snprintf(why, size, "health: its readings were not taken"), false)
                               : false;
        for (size_t i = 0; i < w->fp.n_health; i++) {
                const FleetHealthCheck *c = &w->fp.health[i];
                double rate = secs > 0 ? (v[i] - r->samples[i]) / secs : 0;
                if ((c->has_max && rate > c->max_rate) || (c->has_min && rate < c->min_rate)) {
                        snprintf(why, size, "health: %s at %.1f/s over %.1f s, %s %g/s", c->metric, rate,
                                 secs,
                                 c->has_max && rate > c->max_rate ? "above its max_rate"
                                                                  : "below its min_rate",
                                 c->has_max && rate > c->max_rate ? c->max_rate : c->min_rate);
                        return false;
                }
        }
        return true;
}

/* The hold begins (again): now, with the checks' readings. */
static void hold_begin(Fleet *f, const Wanted *w, NodeRollout *r, uint64_t now) {
        char why[256] = "";

        r->hold_from_usec = now;
        free(r->samples);
        r->samples = w->fp.n_health ? calloc(w->fp.n_health, sizeof(double)) : NULL;
        if (r->samples && health_read(f, w, r->samples, why, sizeof(why)) < 0)
                rollout_step_set(f, r, NODE_FAILED, why);
}

/* ---- the dead-man switch ---- */

/* Goes back to what the node held before: etcd was out of reach for confirm before the wave was
 * confirmed. */
static void revert(Fleet *f, NodeRollout *r, uint64_t lost_usec) {
        char why[256];

        snprintf(why, sizeof(why),
                 "reverted: etcd out of reach for %.1f s after applying revision %" PRIu64
                 " (wave %d not confirmed); back to %s",
                 (double) lost_usec / 1e6, r->to_revision, r->wave + 1,
                 r->from_body ? "the revision it held before" : "none");
        log_warning("fleet: policy %s: %s", r->policy, why);
        r->reverted = true;
        snprintf(r->why, sizeof(r->why), "%s", why);
        node_rollouts_save(f);
        f->status.reverts++;
        rollout_step_set(f, r, NODE_FAILED, why);
        fleet_converge_soon(f);
}

/* ---- the tick: each rollout of this node moved on as far as it can now ---- */

/* The longest etcd may stay silent while the node counts as connected: a keepalive's interval (a third
 * of the lease) and a second. */
static uint64_t contact_gap(Fleet *f) {
        return (uint64_t) f->ttl * 1000000ULL / 3 + 1000000ULL;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        rollout_tick(userdata);
        return 0;
}

static void arm(Fleet *f, sd_event_source **s, uint64_t at, uint64_t now) {
        fleet_timer_once(f, s, at > now ? at - now : 0, on_timer);
}

/* When the tick looks again: a hold's end, a dead-man switch's, and how often etcd must answer while a
 * switch is armed. */
typedef struct Next {
        uint64_t hold, deadman, ping;
} Next;

/* While a dead-man switch is armed, etcd is asked at least four times within "confirm" (the lease's
 * keepalive alone may come a third of the lease apart: a confirm shorter than that would otherwise
 * revert a healthy node). */
#define PING_MIN_USEC 250000ULL

static void on_ping_answer(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;

        /* an answer is contact (noted by the connection); no answer is what the switch counts */
        (void) a, (void) answer, (void) e;
        f->ping_pending = false;
}

static void on_ping_dropped(void *userdata) {
        Fleet *f = userdata;
        f->ping_pending = false;
}

static int on_ping(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *f = userdata;
        char id[32];

        (void) s, (void) usec;
        f->last_ping_usec = fleet_now(f);
        /* one at a time: a busy etcd is asked again by the client, not more often here */
        if (f->state == FLEET_WATCHING && f->lease && !f->ping_pending) {
                snprintf(id, sizeof(id), "%" PRIu64, f->lease);
                f->ping_pending = true;
                fleet_call(f, "/v3/lease/keepalive", json_pack("{s:s}", "ID", id), on_ping_answer,
                           on_ping_dropped, f);
        }
        rollout_tick(f);
        return 0;
}

/* Whether r's rollout is the one w (its policy as etcd has it now) rolls out. */
static bool rollout_current(const Wanted *w, const NodeRollout *r) {
        char buf[FLEET_ROLLOUT_ID_MAX + 1];
        return w && !w->gone && w->selected && w->fp.rollout.present &&
               streq(wanted_rollout_id(w, buf), r->id);
}

/* The rollout of r ended before the node's wave was confirmed (halted, aborted, superseded: by its state,
 * or by a newer revision of its policy): once the daemon holds what it committed again, that is said. */
static void progress_back(Fleet *f, NodeRollout *r, const RolloutView *v) {
        bool back = r->from_body ? daemon_holds(f, r->policy, r->from_revision)
                                 : !daemon_policy_get(f->m, r->policy);

        if (!back || r->rolled_back || r->reverted || r->committed)
                return;
        r->rolled_back = true;
        if (v && v->has_plan && fleet_rollout_state_back(&v->state) && v->state.phase != ROLLOUT_SUPERSEDED)
                snprintf(r->why, sizeof(r->why), "rolled back: the rollout %s (%.200s)",
                         fleet_rollout_phase_to_string(v->state.phase), v->state.why);
        else
                snprintf(r->why, sizeof(r->why),
                         "rolled back: the rollout was superseded before wave %d was confirmed",
                         r->wave + 1);
        log_warning("fleet: policy %s: %s", r->policy, r->why);
        f->status.rollbacks++;
        node_rollouts_save(f);
}

/* Whether the policy runs here as w asks: held at its revision, matching an interface, configured on each
 * (a conflict, an override, a failure or a pending interface is not running it); why not, if not. */
static bool policy_runs(Fleet *f, const Wanted *w, char *why, size_t size) {
        Policy *p = daemon_policy_get(f->m, w->name);
        _cleanup_free_ Iface **v = NULL;
        size_t n;

        if (!p || p->fleet_revision != w->revision) {
                snprintf(why, size, "health: revision %" PRIu64 " is not the one this node holds",
                         w->revision);
                return false;
        }
        n = daemon_policy_ifaces(f->m, p, &v);
        if (n == 0) {
                snprintf(why, size, "health: the policy matches no interface on this node");
                return false;
        }
        for (size_t i = 0; i < n; i++) {
                const char *by = NULL;
                PolicyIfaceState st = iface_policy_outcome(v[i], p, &by);
                if (st == POLICY_IFACE_CONFIGURED)
                        continue;
                snprintf(why, size, "health: %s: %s%s%s", iface_ifname(v[i]),
                         policy_iface_state_to_string(st),
                         by ? st == POLICY_IFACE_CONFLICT ? " with " : " by " : "",
                         by ? by
                         : st == POLICY_IFACE_FAILED
                                 ? strna(iface_error(v[i]) ? iface_error(v[i])->message : NULL)
                                 : "");
                return false;
        }
        return true;
}

/* One rollout of this node: hold, health, the dead-man switch, a rollback seen through. Returns when it
 * next needs a look (UINT64_MAX: at an event). */
static void progress(Fleet *f, NodeRollout *r, uint64_t now, Next *next) {
        RolloutView *v = rollout_views_find(&f->rollouts, r->policy, r->id);
        const Wanted *w = wanted_find(&f->wanted, r->policy);
        bool connected = f->state == FLEET_WATCHING && f->status.connected &&
                         now - MIN(f->last_contact_usec, now) <= contact_gap(f);
        bool viewed = v && v->has_plan;
        char why[256] = "";

        (void) node_rollout_committed(f, r);
        /* a newer revision of the policy superseded it (before the first list, what etcd has is not known:
         * only the dead-man switch works; a policy gone or no longer this node's is taken away whole) */
        bool superseded = f->listed && w && !w->gone && w->selected && !rollout_current(w, r);
        if ((viewed && fleet_rollout_state_back(&v->state)) || superseded) {
                progress_back(f, r, v);
                return;
        }
        if (r->reverted || r->rolled_back || r->wave < 0 || !daemon_holds(f, r->policy, r->to_revision))
                return;
        if (viewed && r->confirm_usec != v->plan.confirm_usec) {
                r->confirm_usec = v->plan.confirm_usec;
                node_rollouts_save(f);
        }
        /* commit confirmed: until its wave is confirmed, etcd must stay within reach (also before etcd was
         * read after a restart: what it needs is kept) */
        if (!r->committed && r->confirm_usec > 0) {
                uint64_t lost = now - MIN(f->last_contact_usec, now);
                if (lost >= r->confirm_usec) {
                        revert(f, r, lost);
                        return;
                }
                next->deadman = MIN(next->deadman, f->last_contact_usec + r->confirm_usec);
                next->ping = MIN(next->ping, MAX(r->confirm_usec / 4, PING_MIN_USEC));
        }
        if (!viewed || !w)
                return;
        if (!r->step_set) {
                rollout_step_set(f, r, NODE_APPLIED, "");
                r->hold_from_usec = 0;
        }
        if (r->step != NODE_APPLIED)
                return;
        if (!connected) {
                r->hold_from_usec = 0; /* "stayed connected for hold": it begins again */
                return;
        }
        if (r->hold_from_usec == 0) {
                hold_begin(f, w, r, now);
                if (r->step != NODE_APPLIED)
                        return;
        }
        uint64_t hold = v->state.promoted ? 0 : v->plan.hold_usec;
        if (now < r->hold_from_usec + hold) {
                next->hold = MIN(next->hold, r->hold_from_usec + hold);
                return;
        }
        /* healthy only where it runs: a conflict, an override or a failure is no revision held */
        if (!policy_runs(f, w, why, sizeof(why)))
                rollout_step_set(f, r, NODE_FAILED, why);
        else if (v->state.promoted || health_ok(f, w, r, now, why, sizeof(why)))
                rollout_step_set(f, r, NODE_HEALTHY, "");
        else
                rollout_step_set(f, r, NODE_FAILED, why);
}

/* What the faces show: each rollout this node is selected for. */
static void export_status(Fleet *f) {
        size_t n = 0;

        for (size_t i = 0; i < f->wanted.n && n < DAEMON_FLEET_ROLLOUTS_MAX; i++) {
                const Wanted *w = &f->wanted.v[i];
                char buf[FLEET_ROLLOUT_ID_MAX + 1];
                const char *id;
                if (!w->selected || w->gone || w->invalid || !w->fp.rollout.present)
                        continue;
                id = wanted_rollout_id(w, buf);
                const RolloutView *v = rollout_views_find(&f->rollouts, w->name, id);
                const NodeRollout *r = node_rollout_find(f, w->name);
                DaemonFleetRollout *d = &f->status.rollouts[n++];
                *d = (DaemonFleetRollout){ .wave = v && v->has_plan
                                                           ? fleet_rollout_plan_wave_of(&v->plan, f->node)
                                                           : -1,
                                           .revision = w->revision };
                snprintf(d->policy, sizeof(d->policy), "%s", w->name);
                snprintf(d->id, sizeof(d->id), "%s", id);
                snprintf(d->phase, sizeof(d->phase), "%s",
                         v && v->has_plan ? fleet_rollout_phase_to_string(v->state.phase) : "planning");
                if (v && v->has_plan) {
                        d->current_wave = v->state.wave;
                        d->confirmed = v->state.confirmed;
                        d->n_waves = (unsigned) v->plan.n_waves;
                        snprintf(d->why, sizeof(d->why), "%s", v->state.why);
                }
                r = r && streq(r->id, id) ? r : NULL;
                snprintf(d->step, sizeof(d->step), "%s",
                         !r               ? "waiting"
                         : r->reverted    ? "reverted"
                         : r->rolled_back ? "rolled-back"
                         : r->step_set    ? fleet_node_step_to_string(r->step)
                                          : "waiting");
                if (r && (r->reverted || r->rolled_back))
                        snprintf(d->why, sizeof(d->why), "%s", r->why);
        }
        f->status.n_rollouts = n;
}

json_t *rollout_status_json(Fleet *f, const Wanted *w, const char **state, const char **why) {
        char buf[FLEET_ROLLOUT_ID_MAX + 1];
        const char *id;
        json_t *j;

        if (!w->fp.rollout.present || !w->selected)
                return NULL;
        id = wanted_rollout_id(w, buf);
        const RolloutView *v = rollout_views_find(&f->rollouts, w->name, id);
        const NodeRollout *r = node_rollout_find(f, w->name);
        r = r && streq(r->id, id) ? r : NULL;
        int wave = v && v->has_plan ? fleet_rollout_plan_wave_of(&v->plan, f->node) : -1;
        j = json_pack("{s:s,s:s}", "id", id, "state",
                      v && v->has_plan ? fleet_rollout_phase_to_string(v->state.phase) : "planning");
        if (!j)
                return NULL;
        if (v && v->has_plan) {
                json_object_set_new(j, "wave", wave >= 0 ? json_integer(wave + 1) : json_null());
                json_object_set_new(j, "current_wave", json_integer(v->state.wave + 1));
                json_object_set_new(j, "waves", json_integer((json_int_t) v->plan.n_waves));
        }
        if (r && r->step_set)
                json_object_set_new(j, "step", json_string(fleet_node_step_to_string(r->step)));
        if (r)
                json_object_set_new(j, "committed", json_boolean(r->committed));
        if (r && (r->reverted || r->rolled_back)) {
                *state = r->reverted ? "reverted" : "rolled-back";
                *why = r->why;
        } else if (v && v->has_plan && fleet_rollout_state_back(&v->state) &&
                   !daemon_holds(f, w->name, w->revision)) {
                /* never applied here: the rollout stopped before this node's wave */
                *state = fleet_rollout_phase_to_string(v->state.phase);
                *why = v->state.why;
        } else if (w->desire != DESIRE_ETCD && !daemon_holds(f, w->name, w->revision)) {
                /* its wave has not come (what it holds meanwhile is what it committed) */
                *state = "waiting";
                *why = NULL;
        } else if (r && r->step_set && r->step == NODE_FAILED) {
                *state = "failed";
                *why = r->step_why;
        }
        return j;
}

void rollout_tick(Fleet *f) {
        uint64_t now = fleet_now(f), next_wave = UINT64_MAX;
        Next next = { UINT64_MAX, UINT64_MAX, UINT64_MAX };

        for (size_t i = 0; i < f->mine.n; i++)
                progress(f, &f->mine.v[i], now, &next);
        if (f->state == FLEET_WATCHING)
                rollout_wave_deadlines(f, now, &next_wave);
        /* a node whose final step is published looks at its wave again when the state moves (resumed) */
        for (size_t i = 0; i < f->mine.n; i++) {
                NodeRollout *r = &f->mine.v[i];
                if (r->published_set && r->published != NODE_APPLIED && !r->evaluated)
                        rollout_evaluate(f, r, false);
        }
        rollout_plans_missing(f);
        if (next.hold != UINT64_MAX)
                arm(f, &f->hold_timer, next.hold, now);
        if (next.deadman != UINT64_MAX)
                arm(f, &f->deadman, next.deadman, now);
        if (next.ping < (uint64_t) f->ttl * 1000000ULL / 3) {
                uint64_t at = MAX(f->last_contact_usec, f->last_ping_usec) + next.ping;
                fleet_timer_once(f, &f->ping_timer, at > now ? at - now : 0, on_ping);
        }
        if (next_wave != UINT64_MAX)
                arm(f, &f->wave_timer, next_wave, now);
        rollout_publish(f);
        export_status(f);
}

size_t rollout_reverts(Fleet *f, Pending *v, size_t max) {
        size_t n = 0;

        for (size_t i = 0; i < f->mine.n && n < max; i++) {
                const NodeRollout *r = &f->mine.v[i];
                if (r->reverted && daemon_holds(f, r->policy, r->to_revision))
                        v[n++] = (Pending){ .name = r->policy,
                                            .revision = r->from_revision,
                                            .body = r->from_body };
        }
        return n;
}

/* ---- the fleet's events ---- */

void rollout_views_changed(Fleet *f) {
        /* a state that moved is looked at again by the nodes of its current wave */
        for (size_t i = 0; i < f->mine.n; i++)
                f->mine.v[i].evaluated = false;
        fleet_converge_soon(f);
        rollout_tick(f);
        fleet_status_changed(f);
}

void rollout_applied(Fleet *f, char *const *names, size_t n, uint64_t revision, const Error *e) {
        for (size_t i = 0; i < n; i++) {
                NodeRollout *r = node_rollout_find(f, names[i]);
                if (!r || r->to_revision != revision || r->reverted || r->rolled_back)
                        continue;
                if (e)
                        rollout_step_set(f, r, NODE_FAILED, e->message);
        }
        rollout_tick(f);
}

void rollout_contact(void *userdata) {
        Fleet *f = userdata;
        uint64_t now = fleet_now(f);

        f->status.requests = etcd_async_requests(f->etcd);
        f->status.busy_answers = etcd_async_busy_answers(f->etcd);
        f->status.retries = etcd_async_retries(f->etcd);
        if (f->state == FLEET_WATCHING && f->watching_all)
                f->status.connected = true;
        /* a silence longer than the keepalive's: a hold under way begins again ("stayed connected") */
        if (now - MIN(f->last_contact_usec, now) > contact_gap(f))
                for (size_t i = 0; i < f->mine.n; i++)
                        f->mine.v[i].hold_from_usec = 0;
        f->last_contact_usec = now;
}

void rollout_reset(Fleet *f) {
        for (size_t i = 0; i < f->mine.n; i++) {
                NodeRollout *r = &f->mine.v[i];
                if (r->publishing) /* (its call was dropped with the connection: said again) */
                        r->published_set = false;
                r->publishing = false;
                r->hold_from_usec = 0;
        }
        f->ping_pending = false;
}

void rollout_republish(Fleet *f) {
        for (size_t i = 0; i < f->mine.n; i++)
                f->mine.v[i].published_set = false;
}

int rollout_start(Fleet *f) {
        f->last_contact_usec = fleet_now(f);
        node_rollouts_load(f);
        etcd_async_set_contact(f->etcd, rollout_contact, f);
        return 0;
}

void rollout_free(Fleet *f) {
        for (size_t i = 0; i < f->mine.n; i++)
                node_rollout_done(&f->mine.v[i]);
        free(f->mine.v);
        rollout_views_clear(&f->rollouts);
        sd_event_source_disable_unref(f->deadman);
        sd_event_source_disable_unref(f->hold_timer);
        sd_event_source_disable_unref(f->wave_timer);
        sd_event_source_disable_unref(f->plan_timer);
        sd_event_source_disable_unref(f->ping_timer);
}
