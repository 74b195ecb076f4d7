/* map-write.c: a map's entry written or deleted through clsd (an interface's map, a policy's on every
 * interface that has it): encoded from typed JSON against the map's BTF, written into the kernel's
 * map, and kept if the map is configuration (map-config.c). */
#include <string.h>

#include "btf.h"
#include "log.h"
#include "map-config.h"
#include "maps.h"
#include "daemon-maps.h"
#include "nl-bpf.h"
#include "nl-map.h"
#include "store-policy.h"

static int encode_entry(const DaemonMap *m, const json_t *key, const json_t *value, uint8_t **ret_key,
                        uint8_t **ret_value, Error *reterr) {
        _cleanup_free_ uint8_t *k = calloc(1, m->map.key_size ?: 1), *v = NULL;
        int r;

        if (!k || (value && !(v = calloc(1, m->map.value_size ?: 1))))
                return error_oom(reterr);
        r = btf_json_encode(m->btf, m->map.btf_key_type_id, key, k, m->map.key_size, "key", reterr);
        if (r >= 0 && value)
                r = btf_json_encode(m->btf, m->map.btf_value_type_id, value, v, m->map.value_size, "value",
                                    reterr);
        if (r < 0)
                return r;
        *ret_key = TAKE_PTR(k);
        if (ret_value)
                *ret_value = TAKE_PTR(v);
        return 0;
}

int daemon_map_write(Manager *d, const DaemonMap *m, const json_t *key, const json_t *value, Error *reterr) {
        _cleanup_free_ uint8_t *k = NULL, *v = NULL;
        int r;

        if (!nl_map_writable(m->map.type))
                return error_set(reterr, EOPNOTSUPP, ERROR_MAP_UNWRITABLE,
                                 "map %s (%s): its entries are not written", m->map.name,
                                 nl_map_type_name(m->map.type));
        r = encode_entry(m, key, value, &k, &v, reterr);
        if (r < 0)
                return r;
        r = nl_map_update(&m->map, k, v, reterr);
        if (r < 0)
                return r;
        return map_config_record(d, m, key, value, reterr);
}

int daemon_map_delete(Manager *d, const DaemonMap *m, const json_t *key, Error *reterr) {
        _cleanup_free_ uint8_t *k = NULL;
        int r;

        r = encode_entry(m, key, NULL, &k, NULL, reterr);
        if (r < 0)
                return r;
        r = nl_map_delete(&m->map, k, reterr);
        if (r == -ENOENT) {
                /* not in the map, but maybe stored (the program deleted it): forgotten there too */
                _cleanup_error_ Error e = ERROR_NULL;
                if (map_config_record(d, m, key, NULL, &e) < 0)
                        log_warning("map %s: %s", m->map.name, strna(e.message));
                return r;
        }
        if (r < 0)
                return r;
        return map_config_record(d, m, key, NULL, reterr);
}
int daemon_policy_map_write(Manager *m, const Policy *p, const DaemonMaps *maps, const char *what,
                            const json_t *key, const json_t *value, Error *reterr) {
        const DaemonMap *one = NULL;
        size_t done = 0;
        int r;

        /* by name: every interface's map of that name (one when shared); by id: that one */
        for (size_t i = 0; i < maps->n; i++) {
                const DaemonMap *dm = &maps->maps[i];
                if (!streq(dm->map.name, what))
                        continue;
                one = dm;
                r = value ? daemon_map_write(m, dm, key, value, reterr)
                          : daemon_map_delete(m, dm, key, reterr);
                if (r == -ENOENT && !value) {
                        error_done(reterr);
                        continue;
                }
                if (r < 0)
                        return r;
                done++;
        }
        if (one) {
                r = map_config_record_policy(m, p, one, key, value, reterr);
                if (r < 0)
                        return r;
                return done > 0 || r > 0 ? 0
                                         : error_set(reterr, ENOENT, ERROR_ENTRY_NOT_FOUND,
                                                     "policy %s: no map %s has that key", p->name, what);
        }
        r = daemon_maps_lookup(maps, p->name, what, &one, reterr);
        if (r < 0)
                return r;
        return value ? daemon_map_write(m, one, key, value, reterr) : daemon_map_delete(m, one, key, reterr);
}
