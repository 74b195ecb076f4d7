/* map-policy.c: a filter's "maps": {"NAME": {"reuse": false, "shared": false, "config": true}}: which
 * maps of the program it replaces the new program takes over (by default all of them), which maps each
 * filter has its own of instead of sharing one with every filter of the same program (by default none),
 * and which are configuration (entries written through clsd are stored and written again into a new
 * load's map), parsed strictly and written back normalised. */
#include <string.h>

#include "store.h"

#define MAP_NAME_MAX 255

void map_policies_free(MapPolicy *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i].name);
        free(v);
}

static bool map_name_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > MAP_NAME_MAX)
                return false;
        for (const char *c = s; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      *c == '_' || *c == '.'))
                        return false;
        return true;
}

int map_policies_parse(json_t *j, const char *path, MapPolicy **ret, size_t *ret_n, Error *reterr) {
        MapPolicy *v;
        const char *name;
        json_t *m;
        size_t n = 0;

        if (!json_is_object(j))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "%s: expected an object of map names",
                                 path);
        v = calloc(json_object_size(j) + 1, sizeof(MapPolicy));
        if (!v)
                return error_oom(reterr);
        json_object_foreach (j, name, m) {
                json_t *reuse = json_object_get(m, "reuse"), *shared = json_object_get(m, "shared"),
                       *config = json_object_get(m, "config");
                const char *bad = reuse && !json_is_boolean(reuse)     ? "reuse"
                                  : shared && !json_is_boolean(shared) ? "shared"
                                  : config && !json_is_boolean(config) ? "config"
                                                                       : NULL;
                int r = 0;

                if (!map_name_valid(name))
                        r = error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                      "%s: \"%.64s\" is not a map name (1 to 255 of A-Z a-z 0-9 _ .)", path,
                                      name);
                else if (!json_is_object(m))
                        r = error_set(
                                reterr, EINVAL, ERROR_WRONG_TYPE,
                                "%s.%s: expected {\"reuse\": BOOL, \"shared\": BOOL, \"config\": BOOL}",
                                path, name);
                else if (json_object_size(m) != (reuse ? 1u : 0u) + (shared ? 1u : 0u) + (config ? 1u : 0u))
                        r = error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD,
                                      "%s.%s: only \"reuse\", \"shared\" and \"config\" are known", path,
                                      name);
                else if (!reuse && !shared && !config)
                        r = error_set(reterr, EINVAL, ERROR_MISSING_FIELD,
                                      "%s.%s: expected \"reuse\", \"shared\" or \"config\" (true or false)",
                                      path, name);
                else if (bad)
                        r = error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "%s.%s.%s: expected true or false",
                                      path, name, bad);
                else if (!(v[n].name = strdup(name)))
                        r = error_oom(reterr);
                if (r < 0) {
                        map_policies_free(v, n);
                        return r;
                }
                v[n].reuse = !reuse || json_is_true(reuse);
                v[n].shared = !shared || json_is_true(shared);
                v[n++].config = json_is_true(config);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

json_t *map_policies_to_json(const MapPolicy *v, size_t n) {
        json_t *j = json_object();

        for (size_t i = 0; i < n; i++) {
                json_t *m = json_pack("{s:b}", "reuse", v[i].reuse);
                if (!v[i].shared)
                        json_object_set_new(m, "shared", json_false());
                if (v[i].config)
                        json_object_set_new(m, "config", json_true());
                json_object_set_new(j, v[i].name, m);
        }
        return j;
}

/* The filter's "maps" entry for a kernel map name (the object's cut to 15 characters), or NULL. */
static const MapPolicy *map_policy_find(const FilterSpec *f, const char *map) {
        for (size_t i = 0; i < f->n_maps; i++)
                if (strncmp(f->maps[i].name, map, 15) == 0 &&
                    strlen(map) == MIN(strlen(f->maps[i].name), 15u))
                        return &f->maps[i];
        return NULL;
}

bool filter_map_reused(const FilterSpec *f, const char *map) {
        const MapPolicy *p = map_policy_find(f, map);
        return !p || p->reuse;
}

bool filter_map_shared(const FilterSpec *f, const char *map) {
        const MapPolicy *p = map_policy_find(f, map);
        return !p || p->shared;
}

bool filter_map_config(const FilterSpec *f, const char *map) {
        const MapPolicy *p = map_policy_find(f, map);
        return p && p->config;
}

bool filter_has_config_maps(const FilterSpec *f) {
        for (size_t i = 0; i < f->n_maps; i++)
                if (f->maps[i].config)
                        return true;
        return false;
}

bool filter_has_own_maps(const FilterSpec *f) {
        for (size_t i = 0; i < f->n_maps; i++)
                if (!f->maps[i].shared)
                        return true;
        return false;
}
