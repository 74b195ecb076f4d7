/* wanted.c: the fleet's policies as etcd has them (a list's snapshot, then the watch's events): each
 * parsed, checked, and whether it selects this node. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"

static void wanted_done(Wanted *w) {
        free(w->name);
        fleet_policy_done(&w->fp);
        free(w->invalid);
        free(w->ineligible);
        free(w->refused);
        free(w->error);
        *w = (Wanted){ 0 };
}

void wanted_clear(WantedSet *s) {
        for (size_t i = 0; i < s->n; i++)
                wanted_done(&s->v[i]);
        free(s->v);
        *s = (WantedSet){ 0 };
}

Wanted *wanted_find(const WantedSet *s, const char *name) {
        for (size_t i = 0; i < s->n; i++)
                if (streq(s->v[i].name, name))
                        return &s->v[i];
        return NULL;
}

/* A key with a NUL in it is no policy's: as a C string it would be another's ("ok\0x" read as "ok"). */
const char *wanted_name_of(const char *prefix, const EtcdKv *kv) {
        const char *key = kv->key;
        size_t n = strlen(prefix);

        if (strlen(key) != kv->key_size || strncmp(key, prefix, n) != 0 ||
            strncmp(key + n, "policies/", 9) != 0)
                return NULL;
        key += n + 9;
        return key[0] && !strchr(key, '/') ? key : NULL;
}

void wanted_gone(WantedSet *s, const char *name, uint64_t revision) {
        Wanted *w = wanted_find(s, name);

        if (!w)
                return;
        fleet_policy_done(&w->fp);
        free(w->invalid);
        free(w->ineligible);
        free(w->refused);
        free(w->error);
        *w = (Wanted){ .name = w->name, .revision = revision, .gone = true };
}

int wanted_set(WantedSet *s, const char *prefix, const EtcdKv *kv, const char *node,
               const FleetLabel *labels, size_t n_labels, const FleetNodeFacts *facts) {
        const char *name = wanted_name_of(prefix, kv);
        Wanted w = { 0 }, *old;
        _cleanup_error_ Error e = ERROR_NULL;

        if (!name)
                return 0;
        if (!(w.name = strdup(name)))
                return -ENOMEM;
        w.revision = kv->mod_revision;
        if (fleet_policy_read(name, kv->value, kv->value_size, &w.fp, &e) < 0)
                w.invalid = strdup(e.message ?: "invalid");
        else if (!w.fp.removed && fleet_policy_selects(&w.fp, node, labels, n_labels)) {
                char why[128];
                w.selected = !facts || fleet_policy_qualifies(&w.fp, facts, why, sizeof(why));
                if (!w.selected && !(w.ineligible = strdup(why))) {
                        wanted_done(&w);
                        return -ENOMEM;
                }
        }
        if (w.invalid)
                log_warning("fleet: policy %s (revision %" PRIu64 "): %s; not applied", name, w.revision,
                            w.invalid);
        old = wanted_find(s, name);
        if (old) {
                wanted_done(old);
                *old = w;
                return 0;
        }
        Wanted *v = realloc(s->v, (s->n + 1) * sizeof(Wanted));
        if (!v) {
                wanted_done(&w);
                return -ENOMEM;
        }
        s->v = v;
        s->v[s->n++] = w;
        return 0;
}

int wanted_add_kept(WantedSet *s, const char *name, uint64_t revision) {
        Wanted w = { .name = strdup(name), .revision = revision, .selected = true };
        Wanted *v = w.name ? realloc(s->v, (s->n + 1) * sizeof(Wanted)) : NULL;

        if (!v) {
                free(w.name);
                return -ENOMEM;
        }
        s->v = v;
        s->v[s->n++] = w;
        return 0;
}

void wanted_forget_gone(WantedSet *s, bool (*has)(const char *name, void *userdata), void *userdata) {
        for (size_t i = 0; i < s->n;)
                if (s->v[i].gone && !has(s->v[i].name, userdata)) {
                        wanted_done(&s->v[i]);
                        s->v[i] = s->v[--s->n];
                } else
                        i++;
}

const char *wanted_rollout_id(const Wanted *w, char buf[FLEET_ROLLOUT_ID_MAX + 1]) {
        if (!w->fp.rollout.present)
                return "";
        if (w->fp.rollout.id[0])
                return w->fp.rollout.id;
        /* written without clsctl: the revision names it */
        snprintf(buf, FLEET_ROLLOUT_ID_MAX + 1, "r%" PRIu64, w->revision);
        return buf;
}
