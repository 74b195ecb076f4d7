/* apply.c: converging the daemon on what etcd wants of this node. The next group of changes (plan.c:
 * what one etcd revision changed, as one) goes to the daemon as one transaction, after the objects its
 * policies name are fetched from etcd and checked against their digest; a group that fails is tried
 * again later, less often each time, without holding up the groups after it. Once everything etcd had
 * at a revision is applied (or failed, and said so), the revision is kept and the node's status
 * written. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "sha256.h"
#include "daemon-fleet.h"
#include "daemon-objects.h"
#include "daemon-policies.h"
#include "store-policy.h"
#include "fleet-io.h"
#include "fleet-plan.h"
#include "fleet-rollouts.h"

#define RETRY_USEC (1000 * 1000ULL)

static void group_clear(Fleet *f) {
        for (size_t i = 0; i < f->n_group; i++)
                free(f->group[i]);
        free(f->group);
        f->group = NULL;
        f->n_group = 0;
        f->busy = false;
}

/* The group ended (e: how it failed): its puts remember the failure, and are tried again later. */
static void group_done(Fleet *f, const Error *e) {
        uint64_t now = fleet_now(f);

        for (size_t i = 0; i < f->n_group; i++) {
                Wanted *w = wanted_find(&f->wanted, f->group[i]);
                if (!w || w->gone || w->revision != f->group_revision)
                        continue;
                free(w->error);
                w->error = NULL;
                w->error_revision = 0;
                if (!e) {
                        backoff_reset(&w->retry);
                        continue;
                }
                w->error = strdup(e->message ?: error_code_to_string(e->code));
                w->error_revision = w->revision;
                /* tried again later (what was in the way, a local policy or an object, may go), less
                 * often each time */
                w->retry_usec = now + backoff_next(&w->retry, FAILED_RETRY_USEC, FAILED_RETRY_MAX_USEC);
        }
        rollout_applied(f, f->group, f->n_group, f->group_revision, e);
        if (e) {
                log_warning("fleet: revision %" PRIu64 ": %s", f->group_revision, strna(e->message));
                if (f->failed_revision != f->group_revision)
                        backoff_reset(&f->failed);
                f->failed_revision = f->group_revision;
                f->failed_retry_usec =
                        now + backoff_next(&f->failed, FAILED_RETRY_USEC, FAILED_RETRY_MAX_USEC);
        } else if (f->failed_revision == f->group_revision)
                f->failed_revision = 0;
        group_clear(f);
        /* After a failure the next step waits a second: a removal the daemon refuses is tried again
         * without spinning (a put that failed waits for its backoff). */
        if (e)
                apply_after(f, RETRY_USEC);
        else
                apply_later(f);
        status_later(f);
}

static void on_group_done(Manager *m, const PolicyOutcome *o, const Error *e, void *userdata) {
        Fleet *f = userdata;

        (void) o;
        for (size_t i = 0; !e && i < f->n_group; i++) {
                Policy *p = daemon_policy_get(m, f->group[i]);
                f->status.changes++;
                if (p)
                        log_info("fleet: policy %s: revision %" PRIu64 " applied", f->group[i],
                                 p->fleet_revision);
                else
                        log_info("fleet: policy %s: no longer this node's; removed", f->group[i]);
        }
        group_done(f, e);
}

/* ---- an object of the group fetched from etcd ---- */

typedef struct ObjectFetch {
        Fleet *f;
        char digest[SHA256_DIGEST_STRING_MAX];
} ObjectFetch;

/* The connection went first: the group waits for the next. */
static void object_fetch_cancel(void *userdata) {
        ObjectFetch *x = userdata;
        group_clear(x->f);
        free(x);
}

static void on_object_added(Manager *m, const DaemonObject *o, bool created, const Error *e,
                            void *userdata) {
        ObjectFetch *x = userdata;
        Fleet *f = x->f;

        (void) m, (void) o;
        if (e)
                group_done(f, e);
        else {
                if (created)
                        log_info("fleet: object %s fetched from etcd", x->digest);
                group_clear(f);
                apply_later(f); /* the next object, or the change */
        }
        free(x);
}

/* The object want and its signature (objects/DIGEST.sig) from one prefix range's answer, its bytes
 * checked against want. */
static int object_of(const char *want, json_t *answer, EtcdKv **ret_kvs, size_t *ret_n, EtcdKv **ret_obj,
                     EtcdKv **ret_sig, Error *reterr) {
        char digest[SHA256_DIGEST_STRING_MAX];
        EtcdKv *obj = NULL;
        int r;

        *ret_sig = NULL;
        r = etcd_range_parse(answer, ret_kvs, ret_n, NULL, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < *ret_n; i++) {
                EtcdKv *kv = &(*ret_kvs)[i];
                size_t l = strlen(kv->key);
                if (l > 4 && streq(kv->key + l - 4, ".sig"))
                        *ret_sig = kv;
                else if (l >= strlen(want) && streq(kv->key + l - strlen(want), want))
                        obj = kv;
        }
        if (!obj)
                return error_set(reterr, ENOENT, ERROR_OBJECT_NOT_FOUND, "object %s is not in etcd (%s)",
                                 want, "clsctl fleet apply uploads the objects a policy names");
        sha256_digest_string(obj->value, obj->value_size, digest);
        if (!streq(digest, want))
                return error_set(reterr, EBADMSG, ERROR_OBJECT_CORRUPT,
                                 "etcd's object %s has the digest %s: not used", want, digest);
        *ret_obj = obj;
        return 0;
}

static void on_object_fetched(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        ObjectFetch *x = userdata;
        Fleet *f = x->f;
        _cleanup_error_ Error e2 = ERROR_NULL;

        (void) a;
        if (e) {
                free(x);
                group_clear(f);
                fleet_call_failed(f, e); /* (fetched again at the next converge) */
                return;
        }
        if (fleet_object_store(f, x->digest, answer, on_object_added, x, &e2) < 0) {
                group_done(f, &e2);
                free(x);
        }
}

int fleet_object_store(Fleet *f, const char *want, json_t *answer, DaemonObjectDoneFunc done, void *userdata,
                       Error *reterr) {
        EtcdKv *kvs = NULL, *obj = NULL, *sig = NULL;
        size_t n = 0;
        int r;

        r = object_of(want, answer, &kvs, &n, &obj, &sig, reterr);
        if (r >= 0)
                daemon_object_add(f->m, obj->value, obj->value_size, sig ? sig->value : NULL,
                                  sig ? sig->value_size : 0, done, userdata);
        etcd_kvs_free(kvs, n);
        return r;
}

json_t *fleet_object_range(const char *key) {
        /* read from the member the node watches (no quorum round): its watch said the policy, written
         * after its objects, so that member has them; and an object is named by its digest, never
         * changed */
        json_t *range = key ? etcd_range_body(key, true) : NULL;

        if (range && json_object_set_new(range, "serializable", json_true()) < 0) {
                json_decref(range);
                range = NULL;
        }
        return range;
}

/* A missing object of the group's puts is being fetched (1), or every one is here (0). An envelope whose
 * objects cannot be listed fails the group. */
static int fetch_object(Fleet *f, const Pending *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ const char **digests = NULL;
                _cleanup_error_ Error e = ERROR_NULL;
                const FleetPolicy body = { .policy = v[i].body };
                if (!v[i].body)
                        continue;
                if (fleet_policy_digests(&body, &digests, &e) < 0) {
                        group_done(f, &e);
                        return 1;
                }
                for (size_t k = 0; digests[k]; k++) {
                        if (daemon_object_get(f->m, digests[k]))
                                continue;
                        /* fetched only while connected; offline, the change waits for the next list */
                        if (f->state != FLEET_WATCHING) {
                                group_clear(f);
                                return 1;
                        }
                        ObjectFetch *x = calloc(1, sizeof(*x));
                        _cleanup_free_ char *key = fleet_key(f->prefix, "objects", digests[k], NULL);
                        if (!x || !key) {
                                free(x);
                                return -ENOMEM;
                        }
                        x->f = f;
                        snprintf(x->digest, sizeof(x->digest), "%s", digests[k]);
                        fleet_call(f, "/v3/kv/range", fleet_object_range(key), on_object_fetched,
                                   object_fetch_cancel, x);
                        return 1;
                }
        }
        return 0;
}

/* ---- converging ---- */

/* The group, named in f->group, busy. */
static int group_take(Fleet *f, const Pending *v, size_t n, uint64_t revision) {
        if (!(f->group = calloc(n, sizeof(char *))))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (!(f->group[f->n_group++] = strdup(v[i].name))) {
                        group_clear(f);
                        return -ENOMEM;
                }
        f->group_revision = revision;
        f->busy = true;
        return 0;
}

/* The nodes that pull what the change names about when this one does: its wave's, in a rollout; else what
 * it selected when it was applied (clsctl counts them); else the fleet's size. */
static uint64_t pull_nodes(Fleet *f, const Pending *p) {
        const Wanted *w = p->put;
        char buf[FLEET_ROLLOUT_ID_MAX + 1];

        if (w && w->fp.rollout.present) {
                const RolloutView *v = rollout_views_find(&f->rollouts, w->name, wanted_rollout_id(w, buf));
                int wave = v && v->has_plan ? fleet_rollout_plan_wave_of(&v->plan, f->node) : -1;
                if (wave >= 0)
                        return v->plan.wave_sizes[wave];
        }
        return w && w->fp.selected ? w->fp.selected : MAX(f->fleet_size, 1u);
}

/* The group's changes to the daemon, as one transaction. */
static int group_apply(Fleet *f, const Pending *v, size_t n) {
        _cleanup_free_ FleetPolicyChange *changes = calloc(n, sizeof(FleetPolicyChange));

        if (!changes)
                return -ENOMEM;
        for (size_t j = 0; j < n; j++)
                changes[j] = (FleetPolicyChange){ .name = v[j].name,
                                                  .body = v[j].body,
                                                  .revision = v[j].revision,
                                                  .pull_nodes = pull_nodes(f, &v[j]) };
        daemon_fleet_policies_change(f->m, changes, n, on_group_done, f);
        return 0;
}

static bool daemon_has(const char *name, void *userdata) {
        return daemon_policy_get(userdata, name);
}

/* The fleet policies the daemon holds. */
static FleetHeld *held_list(Manager *m, size_t *ret_n) {
        FleetHeld *v = calloc(daemon_policy_count(m) + 1, sizeof(FleetHeld));
        size_t n = 0;

        for (size_t i = 0; v && i < daemon_policy_count(m); i++) {
                Policy *p = daemon_policy_at(m, i);
                if (p->fleet_revision)
                        v[n++] = (FleetHeld){ .name = p->name, .revision = p->fleet_revision };
        }
        *ret_n = n;
        return v;
}

/* Everything etcd had at this revision is applied (or failed, and said so). */
static void converged(Fleet *f) {
        _cleanup_error_ Error e = ERROR_NULL;

        if (daemon_fleet_applied(f->m, f->revision, &e) < 0)
                log_error("fleet: %s", strna(e.message));
        else
                f->status.revision = f->revision;
        status_publish(f); /* now (with the record): what converged is said at once; interface changes are
                            * batched */
        status_own_keys_check(f);
        rollout_tick(f);
}

static void converge(Fleet *f) {
        FleetStep step = { 0 };
        size_t n_held = 0;
        uint64_t now = fleet_now(f);
        int r;

        if (f->busy)
                return;
        /* Before the first list, the stored policies are all there is: they stay as they are, but for
         * what the dead-man switch takes back (one at a time). */
        if (!f->listed) {
                Pending back;
                if (rollout_reverts(f, &back, 1) == 1 &&
                    (group_take(f, &back, 1, back.revision) < 0 || group_apply(f, &back, 1) < 0)) {
                        group_clear(f);
                        log_error("fleet: cannot go back: out of memory");
                }
                return;
        }
        /* a policy deleted in etcd is forgotten once the daemon has none of that name */
        wanted_forget_gone(&f->wanted, daemon_has, f->m);
        /* what the rollouts let this node hold now */
        rollout_desire_all(f);
        _cleanup_free_ FleetHeld *held = held_list(f->m, &n_held);
        if (!held || fleet_plan(&f->wanted, held, n_held, f->revision, f->failed_revision,
                                f->failed_retry_usec, now, &step) < 0) {
                fleet_lost(f, "out of memory");
                return;
        }
        if (step.n_changes == 0) {
                if (step.retry_usec != UINT64_MAX)
                        apply_after(f, step.retry_usec - now);
                converged(f);
        } else if (group_take(f, step.changes, step.n_changes, step.changes[0].revision) < 0 ||
                   (r = fetch_object(f, step.changes, step.n_changes)) < 0 ||
                   (r == 0 && group_apply(f, step.changes, step.n_changes) < 0)) {
                group_clear(f);
                fleet_lost(f, "out of memory");
        }
        fleet_step_done(&step);
}

static int on_kick(sd_event_source *s, void *userdata) {
        (void) s;
        converge(userdata);
        return 0;
}

/* From the loop, never from inside the daemon's callback that answered. */
void apply_later(Fleet *f) {
        fleet_converge_soon(f);
}

int apply_start(Fleet *f) {
        int r = sd_event_add_defer(f->event, &f->kick, on_kick, f);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(f->kick, SD_EVENT_OFF);
}

static int on_converge_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        converge(userdata);
        return 0;
}

void apply_after(Fleet *f, uint64_t usec) {
        fleet_timer_once(f, &f->converge_timer, usec, on_converge_timer);
}

void apply_free(Fleet *f) {
        group_clear(f);
        sd_event_source_disable_unref(f->kick);
        sd_event_source_disable_unref(f->converge_timer);
}
