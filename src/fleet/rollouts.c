/* rollouts.c: the fleet's rollouts as etcd has them (rollouts/NAME/ID/plan and /state, listed and then
 * watched with the policies): each one's plan of waves and where it is. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "fleet-rollouts.h"

static void view_done(RolloutView *v) {
        free(v->policy);
        fleet_rollout_plan_done(&v->plan);
        *v = (RolloutView){ 0 };
}

void rollout_views_clear(RolloutViews *s) {
        for (size_t i = 0; i < s->n; i++)
                view_done(&s->v[i]);
        free(s->v);
        *s = (RolloutViews){ 0 };
}

RolloutView *rollout_views_find(const RolloutViews *s, const char *policy, const char *id) {
        for (size_t i = 0; i < s->n; i++)
                if (streq(s->v[i].policy, policy) && streq(s->v[i].id, id))
                        return &s->v[i];
        return NULL;
}

static RolloutView *view_get(RolloutViews *s, const char *policy, const char *id) {
        RolloutView *v = rollout_views_find(s, policy, id), *nv;

        if (v)
                return v;
        nv = realloc(s->v, (s->n + 1) * sizeof(RolloutView));
        if (!nv)
                return NULL;
        s->v = nv;
        v = &s->v[s->n];
        *v = (RolloutView){ .policy = strdup(policy) };
        if (!v->policy)
                return NULL;
        snprintf(v->id, sizeof(v->id), "%s", id);
        s->n++;
        return v;
}

/* "PREFIX rollouts/NAME/ID/WHAT": NAME, ID and WHAT cut out (in buf), or false. */
static bool key_split(const char *prefix, const EtcdKv *kv, char *buf, size_t size, const char **name,
                      const char **id, const char **what) {
        size_t n = strlen(prefix);
        char *a, *b;

        if (strlen(kv->key) != kv->key_size || strncmp(kv->key, prefix, n) != 0 ||
            strncmp(kv->key + n, "rollouts/", 9) != 0 || strlen(kv->key + n + 9) >= size)
                return false;
        strcpy(buf, kv->key + n + 9);
        if (!(a = strchr(buf, '/')) || !(b = strchr(a + 1, '/')) || strchr(b + 1, '/'))
                return false;
        *a = *b = 0;
        *name = buf;
        *id = a + 1;
        *what = b + 1;
        return **name && **id;
}

int rollout_views_set(RolloutViews *s, const char *prefix, const EtcdKv *kv, bool deleted, uint64_t now) {
        char buf[512];
        const char *name, *id, *what;
        _cleanup_error_ Error e = ERROR_NULL;
        RolloutView *v;
        json_t *j;
        int r = 0;

        if (!key_split(prefix, kv, buf, sizeof(buf), &name, &id, &what) ||
            (!streq(what, "plan") && !streq(what, "state")))
                return 0;
        log_debug("fleet: %s %s (revision %" PRIu64 ")", kv->key, deleted ? "deleted" : "put",
                  kv->mod_revision);
        v = view_get(s, name, id);
        if (!v)
                return -ENOMEM;
        j = deleted ? NULL : json_loadb(kv->value, kv->value_size, 0, NULL);
        if (streq(what, "plan")) {
                fleet_rollout_plan_done(&v->plan);
                v->has_plan = false;
                if (j && fleet_rollout_plan_parse(j, &v->plan, &e) >= 0 && streq(v->plan.policy, name) &&
                    streq(v->plan.id, id)) {
                        v->has_plan = true;
                        v->plan_created_usec = now;
                } else if (!deleted) {
                        fleet_rollout_plan_done(&v->plan);
                        log_warning(
                                "fleet: %s: not a rollout plan this node can read: %s; the rollout waits",
                                kv->key, strna(e.message ?: "its policy or id is not its key's"));
                }
        } else if (deleted) {
                v->state = (FleetRolloutState){ .phase = ROLLOUT_PROGRESSING };
                v->state_revision = 0;
        } else if (fleet_rollout_state_parse(j, &v->state, &e) >= 0)
                v->state_revision = kv->mod_revision;
        else
                log_warning("fleet: %s: not a rollout state this node can read: %s", kv->key,
                            strna(e.message));
        json_decref(j);
        if (deleted && !v->has_plan && !v->state_revision) {
                /* both keys gone (fleet rm, the history pruned): nothing of it is kept */
                view_done(v);
                *v = s->v[--s->n];
        }
        return r;
}
