/* map-config.c: configuration maps ("maps": {"NAME": {"config": true}}): the entries written through clsd
 * (PUT|DELETE .../maps/{map}/entries) are kept in the store, by the document the filter comes from, and
 * written again into the maps of a new load of the filter's program (a new build, "reuse": false, a
 * filter's own instance, a start that found the program neither pinned nor attached), before it is
 * attached.
 *
 * The store keeps one JSON object: {OWNER: {FILTER: {MAP: [{"key": K, "value": V}, ...]}}}, where OWNER is
 * "api:KEY" or "hog:KEY" (KEY: the interface's "netns/ifname", "/ifname" in clsd's own namespace),
 * "policy:NAME" for a policy's shared map, "policy:NAME@KEY" for a map each interface has its own of. Key
 * and value are the typed JSON as written, encoded again against the map they go into. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btf.h"
#include "log.h"
#include "map-config.h"
#include "maps.h"
#include "daemon-maps.h"
#include "daemon-policies.h"
#include "nl-bpf.h"
#include "nl-map.h"
#include "store-policy.h"

struct MapConfig {
        json_t *entries; /* as stored (see above) */
};

int map_config_new(MapConfig **ret) {
        MapConfig *mc = calloc(1, sizeof(*mc));

        if (!mc || !(mc->entries = json_object())) {
                free(mc);
                return -ENOMEM;
        }
        *ret = mc;
        return 0;
}

MapConfig *map_config_free(MapConfig *mc) {
        if (mc)
                json_decref(mc->entries);
        free(mc);
        return NULL;
}

int map_config_load(Manager *m, Error *reterr) {
        _cleanup_error_ Error e = ERROR_NULL;
        json_t *entries = NULL;

        if (store_map_entries_load(m->store, &entries, &e) < 0)
                log_warning("%s", strna(e.message));
        if (!entries)
                return error_oom(reterr);
        json_decref(m->map_config->entries);
        m->map_config->entries = entries;
        map_config_prune(m);
        return 0;
}

void map_config_on_change(Manager *m, Iface *it, unsigned changes, void *userdata) {
        (void) it, (void) userdata;
        /* its documents' entries, and its own set of a policy's map */
        if (changes & IFACE_REMOVED)
                map_config_prune(m);
}

/* The owner of the filter's entries of map (see above): NULL when out of memory. */
static char *config_owner(const Iface *it, const Filter *f, const char *map) {
        const Policy *p = f->source == SOURCE_POLICY ? it->hook_policy[f->dir] : NULL;
        char *s = NULL;

        if (f->source == SOURCE_POLICY && !p)
                return NULL;
        if (p && filter_map_shared(f->spec, map))
                return asprintf(&s, "policy:%s", p->name) < 0 ? NULL : s;
        if (p)
                return asprintf(&s, "policy:%s@%s", p->name, it->key) < 0 ? NULL : s;
        return asprintf(&s, "%s:%s", document_source_to_string(f->source), it->key) < 0 ? NULL : s;
}

/* owners[owner][filter][map], made when create. */
static json_t *entries_of(json_t *owners, const char *owner, const char *filter, const char *map,
                          bool create) {
        json_t *o = json_object_get(owners, owner), *fo, *v;

        if (!o && create && json_object_set_new(owners, owner, o = json_object()) < 0)
                return NULL;
        fo = json_object_get(o, filter);
        if (!fo && create && json_object_set_new(o, filter, fo = json_object()) < 0)
                return NULL;
        v = json_object_get(fo, map);
        if (!v && create && json_object_set_new(fo, map, v = json_array()) < 0)
                return NULL;
        return json_is_array(v) ? v : NULL;
}

/* The entries stored for the filter's map (made when create). A policy's map of each interface's own
 * starts as the policy's shared entries: read from there until the interface's are written. */
static json_t *stored_entries(Manager *m, const Iface *it, const Filter *f, const char *map, bool create) {
        _cleanup_free_ char *owner = config_owner(it, f, map), *wide = NULL;
        const Policy *p = f->source == SOURCE_POLICY ? it->hook_policy[f->dir] : NULL;
        json_t *v, *w;

        if (!owner)
                return NULL;
        v = entries_of(m->map_config->entries, owner, f->spec->name, map, false);
        if (v || !p || filter_map_shared(f->spec, map))
                return v
                               ?: create
                                  ? entries_of(m->map_config->entries, owner, f->spec->name, map, true)
                                  : NULL;
        if (asprintf(&wide, "policy:%s", p->name) < 0)
                return NULL;
        w = entries_of(m->map_config->entries, wide, f->spec->name, map, false);
        if (!create)
                return w;
        v = entries_of(m->map_config->entries, owner, f->spec->name, map, true);
        if (v && w && json_array_extend(v, w) < 0)
                return NULL;
        return v;
}

static int encode(const DaemonMap *m, const json_t *j, bool key, uint8_t **ret, Error *reterr) {
        size_t size = key ? m->map.key_size : m->map.value_size;
        uint8_t *b = calloc(1, size ?: 1);
        int r;

        if (!b)
                return error_oom(reterr);
        r = btf_json_encode(m->btf, key ? m->map.btf_key_type_id : m->map.btf_value_type_id, j, b, size,
                            key ? "key" : "value", reterr);
        if (r < 0) {
                free(b);
                return r;
        }
        *ret = b;
        return 0;
}

/* The index in v of the entry whose key is the same bytes in map m as key (k encoded), or -1. */
static ssize_t entry_find(const DaemonMap *m, json_t *v, const uint8_t *k) {
        size_t i;
        json_t *e;

        json_array_foreach (v, i, e) {
                _cleanup_free_ uint8_t *other = NULL;
                if (encode(m, json_object_get(e, "key"), true, &other, NULL) >= 0 &&
                    memcmp(other, k, m->map.key_size) == 0)
                        return (ssize_t) i;
        }
        return -1;
}

/* In the stored set v (NULL: out of memory), the entry of key (k: its bytes in dm) written (value) or
 * deleted (NULL); *changed when it was. */
static int entry_set(const DaemonMap *dm, json_t *v, const uint8_t *k, const json_t *key,
                     const json_t *value, bool *changed, Error *reterr) {
        ssize_t at;

        if (!v)
                return error_oom(reterr);
        at = entry_find(dm, v, k);
        if (value) {
                json_t *e = json_pack("{s:O,s:O}", "key", key, "value", value);
                if (!e ||
                    (at >= 0 ? json_array_set_new(v, (size_t) at, e) : json_array_append_new(v, e)) < 0)
                        return error_oom(reterr);
                *changed = true;
        } else if (at >= 0) {
                json_array_remove(v, (size_t) at);
                *changed = true;
        }
        return 0;
}

/* The users of map dm: every filter, on any interface, whose "maps" declares it configuration and whose
 * attached programs use it (a shared map is many filters'). */
static bool declares_config(const Iface *it, const Filter *f, const void *map) {
        (void) it;
        return filter_map_config(f->spec, map);
}

static int config_users(Manager *m, const DaemonMap *dm, DaemonMaps *ret, const DaemonMap **ret_map,
                        Error *reterr) {
        int r = maps_of_filters(m, declares_config, dm->map.name, ret, reterr);

        *ret_map = NULL;
        for (size_t i = 0; r >= 0 && i < ret->n; i++)
                if (ret->maps[i].map.id == dm->map.id)
                        *ret_map = &ret->maps[i];
        return r;
}

int map_config_record(Manager *m, const DaemonMap *dm, const json_t *key, const json_t *value,
                      Error *reterr) {
        _cleanup_free_ uint8_t *k = NULL;
        const DaemonMap *users;
        DaemonMaps all;
        bool changed = false;
        int r;

        r = config_users(m, dm, &all, &users, reterr);
        if (r < 0)
                return r;
        if (!users) {
                daemon_maps_done(&all);
                return 0; /* not configuration: the entry lives in the kernel's map only */
        }
        r = encode(dm, key, true, &k, reterr);
        for (size_t i = 0; r >= 0 && i < users->n_users; i++) {
                const Filter *f = users->users[i].filter;
                /* (a delete too makes the interface's own set, not to delete from the policy's) */
                json_t *v = stored_entries(m, users->users[i].iface, f, dm->map.name, true);
                r = entry_set(dm, v, k, key, value, &changed, reterr);
        }
        daemon_maps_done(&all);
        if (r < 0)
                return r;
        if (!changed)
                return 0;
        return store_map_entries_save(m->store, m->map_config->entries, reterr);
}

int map_config_record_policy(Manager *m, const Policy *p, const DaemonMap *dm, const json_t *key,
                             const json_t *value, Error *reterr) {
        _cleanup_free_ char *owner = NULL;
        _cleanup_free_ uint8_t *k = NULL;
        bool changed = false;
        int r;

        if (asprintf(&owner, "policy:%s", p->name) < 0)
                return error_oom(reterr);
        r = encode(dm, key, true, &k, reterr);
        for (Direction dir = 0; r >= 0 && dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; r >= 0 && i < p->doc->n_filters[dir]; i++) {
                        const FilterSpec *f = &p->doc->filters[dir][i];
                        json_t *v;

                        /* a shared map's set is the policy's already (map_config_record()) */
                        if (!filter_map_config(f, dm->map.name) || filter_map_shared(f, dm->map.name))
                                continue;
                        v = entries_of(m->map_config->entries, owner, f->name, dm->map.name, true);
                        r = entry_set(dm, v, k, key, value, &changed, reterr);
                }
        if (r < 0)
                return r;
        if (changed && store_map_entries_save(m->store, m->map_config->entries, reterr) < 0)
                return -EIO;
        return changed;
}

/* Writes the stored entries into the configuration maps of one program of the filter; returns how many. */
/* Whose configuration a new load's maps take: an interface's filter (it, f), or a policy's program set
 * (policy: its shared maps' entries, before any interface holds the program). */
typedef struct ConfigOf {
        const char *who; /* for the log */
        const FilterSpec *spec;
        const Iface *it;
        const Filter *f;
        const Policy *policy;
} ConfigOf;

static json_t *config_entries(Manager *m, const ConfigOf *of, const char *map) {
        _cleanup_free_ char *owner = NULL;

        if (!filter_map_config(of->spec, map))
                return NULL;
        if (of->it)
                return stored_entries(m, of->it, of->f, map, false);
        if (!filter_map_shared(of->spec, map) || asprintf(&owner, "policy:%s", of->policy->name) < 0)
                return NULL;
        return entries_of(m->map_config->entries, owner, of->spec->name, map, false);
}

static size_t write_program(Manager *m, const ConfigOf *of, Program *p) {
        NlMap *maps = NULL;
        size_t n = 0, written = 0;
        _cleanup_error_ Error e = ERROR_NULL;

        if (nl_program_maps(program_fd(p), &maps, &n, &e) < 0) {
                log_warning("%s: filter %s: cannot list its program's maps to configure them: %s", of->who,
                            of->spec->name, strna(e.message));
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                json_t *v = config_entries(m, of, maps[i].name);
                DaemonMap dm = { .map = maps[i] };
                json_t *entry;
                size_t k;

                if (json_array_size(v) == 0)
                        continue;
                dm.btf = maps[i].btf_id ? nl_btf_load(maps[i].btf_id) : NULL;
                json_array_foreach (v, k, entry) {
                        _cleanup_free_ uint8_t *key = NULL, *value = NULL;
                        if (encode(&dm, json_object_get(entry, "key"), true, &key, &e) >= 0 &&
                            encode(&dm, json_object_get(entry, "value"), false, &value, &e) >= 0 &&
                            nl_map_update(&dm.map, key, value, &e) >= 0) {
                                written++;
                                continue;
                        }
                        log_warning("%s: filter %s: map %s: stored entry %zu not written: %s", of->who,
                                    of->spec->name, maps[i].name, k + 1, strna(e.message));
                        error_done(&e);
                }
                nl_btf_free(dm.btf);
        }
        nl_maps_free(maps, n);
        return written;
}

void map_config_apply(Manager *m, Iface *it) {
        for (size_t i = 0; i < it->n_filters; i++) {
                Filter *f = &it->filters[i];
                ConfigOf of = { .who = it->ifname, .spec = f->spec, .it = it, .f = f };
                size_t written = 0;

                /* only a new load's maps: a program taken back, shared or kept has its maps as they
                 * were (what the program or bpftool changed in them is theirs) */
                if (!f->config_unwritten || !filter_has_config_maps(f->spec))
                        continue;
                f->config_unwritten = false;
                for (int a = -1; a < (int) f->spec->n_actions; a++) {
                        Program *p = a < 0 ? f->program : f->actions[a];
                        if (p)
                                written += write_program(m, &of, p);
                }
                if (written > 0)
                        log_info("%s: filter %s: %zu stored entr%s written into its configuration maps",
                                 it->ifname, f->spec->name, written, written == 1 ? "y" : "ies");
        }
}

void map_config_apply_policy(Manager *m, const Policy *policy, const FilterSpec *spec, Program *p) {
        _cleanup_free_ char *who = NULL;

        if (!filter_has_config_maps(spec) || asprintf(&who, "policy %s", policy->name) < 0)
                return;
        (void) write_program(m, &(ConfigOf){ .who = who, .spec = spec, .policy = policy }, p);
}

/* The filter spec an owner's filter names now, or NULL (the document, hog or policy is gone, or no
 * longer has the filter). */
static const FilterSpec *filter_spec_of(Manager *m, const char *owner, const char *filter) {
        _cleanup_free_ char *netns = NULL;
        const char *rest, *slash, *at;
        const Document *doc = NULL;
        Direction dir;

        if ((rest = startswith(owner, "policy:"))) {
                _cleanup_free_ char *name =
                        (at = strchr(rest, '@')) ? strndup(rest, (size_t) (at - rest)) : strdup(rest);
                const Policy *p = name ? daemon_policy_get(m, name) : NULL;
                doc = p ? p->doc : NULL;
                /* an interface's own set: while the interface is there and the policy is its */
                if (doc && at) {
                        const Iface *it;
                        slash = strchr(at + 1, '/');
                        if (!slash)
                                return NULL;
                        if (slash > at + 1 && !(netns = strndup(at + 1, (size_t) (slash - at - 1))))
                                return NULL;
                        it = iface_table_get(m->ifaces, netns, slash + 1);
                        if (!it || !iface_has_policy(it, p))
                                return NULL;
                }
        } else {
                bool api = !!startswith(owner, "api:");
                const Iface *it;
                rest = strchr(owner, ':');
                slash = rest ? strchr(rest + 1, '/') : NULL;
                if (!slash)
                        return NULL;
                if (slash > rest + 1 && !(netns = strndup(rest + 1, (size_t) (slash - rest - 1))))
                        return NULL;
                it = iface_table_get(m->ifaces, netns, slash + 1);
                doc = !it ? NULL : api ? it->api : startswith(owner, "hog:") ? it->hog : NULL;
        }
        return doc ? document_find_filter(doc, filter, &dir) : NULL;
}

void map_config_prune(Manager *m) {
        const char *owner, *filter, *map;
        json_t *o, *fo, *v;
        void *t1, *t2, *t3;
        bool changed = false;
        _cleanup_error_ Error e = ERROR_NULL;

        json_object_foreach_safe(m->map_config->entries, t1, owner, o) {
                json_object_foreach_safe(o, t2, filter, fo) {
                        const FilterSpec *spec = filter_spec_of(m, owner, filter);
                        json_object_foreach_safe(fo, t3, map, v)
                                /* (an empty set stays: an interface's own set emptied is not the policy's)
                                 */
                                if (!spec || !filter_map_config(spec, map)) {
                                json_object_del(fo, map);
                                changed = true;
                        }
                        if (json_object_size(fo) == 0)
                                json_object_del(o, filter);
                }
                if (json_object_size(o) == 0) {
                        json_object_del(m->map_config->entries, owner);
                        changed = true;
                }
        }
        if (changed && store_map_entries_save(m->store, m->map_config->entries, &e) < 0)
                log_warning("%s", strna(e.message));
}

bool daemon_map_config(Manager *m, const DaemonMap *dm, size_t *ret_stored) {
        bool config = false;

        *ret_stored = 0;
        for (size_t i = 0; i < dm->n_users; i++) {
                const Filter *f = dm->users[i].filter;

                if (!filter_map_config(f->spec, dm->map.name))
                        continue;
                config = true;
                *ret_stored =
                        MAX(*ret_stored,
                            json_array_size(stored_entries(m, dm->users[i].iface, f, dm->map.name, false)));
        }
        return config;
}
