/* maps.c: the maps of the programs attached for a document, as the kernel has them (found from the
 * attached prog ids, not from what clsd loaded), with their BTF, for the map views and /metrics. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "maps.h"
#include "daemon-maps.h"
#include "nl-bpf.h"
#include "nl-map.h"
#include "store-policy.h"

static struct btf *maps_btf(DaemonMaps *m, uint32_t btf_id) {
        struct btf *b, **v;
        uint32_t *ids;

        if (btf_id == 0)
                return NULL;
        for (size_t i = 0; i < m->n_btfs; i++)
                if (m->btf_ids[i] == btf_id)
                        return m->btfs[i];
        b = nl_btf_load(btf_id);
        if (!b)
                return NULL; /* decoded as hex */
        v = realloc(m->btfs, (m->n_btfs + 1) * sizeof(*v));
        if (!v) {
                nl_btf_free(b);
                return NULL;
        }
        m->btfs = v;
        ids = realloc(m->btf_ids, (m->n_btfs + 1) * sizeof(*ids));
        if (!ids) {
                nl_btf_free(b);
                return NULL;
        }
        m->btf_ids = ids;
        m->btfs[m->n_btfs] = b;
        m->btf_ids[m->n_btfs++] = btf_id;
        return b;
}

static DaemonMap *maps_find_id(DaemonMaps *m, uint32_t id) {
        for (size_t i = 0; i < m->n; i++)
                if (m->maps[i].map.id == id)
                        return &m->maps[i];
        return NULL;
}

static int map_add_user(DaemonMap *dm, const Iface *it, const Filter *f) {
        DaemonMapUser *u;

        for (size_t i = 0; i < dm->n_users; i++)
                if (dm->users[i].iface == it && dm->users[i].filter == f)
                        return 0; /* its classifier and an action share the map: one user */
        u = realloc(dm->users, (dm->n_users + 1) * sizeof(*u));
        if (!u)
                return -ENOMEM;
        dm->users = u;
        dm->users[dm->n_users++] = (DaemonMapUser){ .iface = it, .filter = f };
        return 0;
}

typedef struct DaemonMapsProgram {
        uint32_t prog_id;
        uint32_t *map_ids;
        size_t n_maps;
} DaemonMapsProgram;

static DaemonMapsProgram *program_seen(DaemonMaps *m, uint32_t prog_id) {
        for (size_t i = 0; i < m->n_programs; i++)
                if (m->programs[i].prog_id == prog_id)
                        return &m->programs[i];
        return NULL;
}

/* The maps of the program with this id, each once in m, with the filter as one more user. */
static int maps_add_program(DaemonMaps *m, uint32_t prog_id, const Iface *it, const Filter *f,
                            Error *reterr) {
        DaemonMapsProgram *seen = program_seen(m, prog_id), *pv;
        NlMap *maps = NULL;
        size_t n = 0;
        DaemonMap *v;
        int r;

        if (seen) {
                /* shared by another filter: the maps are in, the filter is one more user */
                for (size_t k = 0; k < seen->n_maps; k++) {
                        DaemonMap *dm = maps_find_id(m, seen->map_ids[k]);
                        if (dm && map_add_user(dm, it, f) < 0)
                                return error_oom(reterr);
                }
                return 0;
        }
        r = nl_program_maps_by_id(prog_id, &maps, &n, reterr);
        if (r == -ENOENT) {
                error_done(reterr);
                return 0; /* detached and gone meanwhile */
        }
        if (r < 0)
                return r;
        v = realloc(m->maps, (m->n + n + 1) * sizeof(*v));
        if (!v) {
                nl_maps_free(maps, n);
                return error_oom(reterr);
        }
        m->maps = v;
        pv = realloc(m->programs, (m->n_programs + 1) * sizeof(*pv));
        if (!pv) {
                nl_maps_free(maps, n);
                return error_oom(reterr);
        }
        m->programs = pv;
        pv = &m->programs[m->n_programs++];
        *pv = (DaemonMapsProgram){ .prog_id = prog_id, .map_ids = calloc(n + 1, sizeof(uint32_t)) };
        for (size_t k = 0; k < n && pv->map_ids; k++)
                pv->map_ids[pv->n_maps++] = maps[k].id;
        for (size_t k = 0; k < n; k++) {
                DaemonMap *dm = maps_find_id(m, maps[k].id);
                if (dm) {
                        safe_close(maps[k].fd);
                } else {
                        dm = &m->maps[m->n++];
                        *dm = (DaemonMap){ .map = maps[k] };
                        dm->btf = maps_btf(m, maps[k].btf_id);
                }
                if (map_add_user(dm, it, f) < 0) {
                        for (size_t j = k + 1; j < n; j++)
                                safe_close(maps[j].fd);
                        free(maps);
                        return error_oom(reterr);
                }
        }
        free(maps); /* the fds now belong to m */
        return 0;
}

int daemon_maps_add(Manager *mgr, const Iface *it, const IfaceStatus *st, DaemonMaps *m, Error *reterr) {
        int r;

        (void) mgr;
        for (size_t i = 0; i < it->n_filters && i < st->n_filters; i++) {
                const Filter *f = &it->filters[i];
                const FilterObserved *fo = &st->filters[i].observed;

                if (fo->classifier_attached) {
                        r = maps_add_program(m, fo->prog_id, it, f, reterr);
                        if (r < 0)
                                return r;
                }
                /* An action's maps are the filter's too (what it counts, what it drops). */
                for (size_t k = 0; k < f->spec->n_actions; k++) {
                        if (!fo->actions[k].attached)
                                continue;
                        r = maps_add_program(m, fo->actions[k].prog_id, it, f, reterr);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int daemon_maps_add_filter(DaemonMaps *m, const Iface *it, const Filter *f, Error *reterr) {
        for (int a = -1; a < (int) f->spec->n_actions; a++) {
                const Program *p = a < 0 ? f->program : f->actions[a];
                int r = p ? maps_add_program(m, program_id(p), it, f, reterr) : 0;
                if (r < 0)
                        return r;
        }
        return 0;
}

int maps_of_filters(Manager *m, bool (*want)(const Iface *it, const Filter *f, const void *userdata),
                    const void *userdata, DaemonMaps *ret, Error *reterr) {
        DaemonMaps all = { 0 };

        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                const Iface *it = iface_table_at(m->ifaces, i);
                for (size_t k = 0; k < it->n_filters; k++) {
                        const Filter *f = &it->filters[k];
                        int r = want(it, f, userdata) ? daemon_maps_add_filter(&all, it, f, reterr) : 0;
                        if (r < 0) {
                                daemon_maps_done(&all);
                                return r;
                        }
                }
        }
        *ret = all;
        return 0;
}

static bool filter_of_policy(const Iface *it, const Filter *f, const void *p) {
        return f->source == SOURCE_POLICY && it->hook_policy[f->dir] == p;
}

int daemon_policy_maps(Manager *m, const Policy *p, DaemonMaps *ret, Error *reterr) {
        return maps_of_filters(m, filter_of_policy, p, ret, reterr);
}

int daemon_iface_maps(Manager *d, const Iface *it, DaemonMaps *ret, Error *reterr) {
        IfaceStatus st = { 0 };
        DaemonMaps m = { 0 };
        int r;

        r = daemon_iface_status(d, it, &st, reterr);
        if (r < 0)
                return r;
        r = daemon_maps_add(d, it, &st, &m, reterr);
        iface_status_done(&st);
        if (r < 0) {
                daemon_maps_done(&m);
                return r;
        }
        *ret = m;
        return 0;
}

void daemon_maps_done(DaemonMaps *m) {
        for (size_t i = 0; i < m->n; i++) {
                safe_close(m->maps[i].map.fd);
                free(m->maps[i].users);
        }
        free(m->maps);
        for (size_t i = 0; i < m->n_btfs; i++)
                nl_btf_free(m->btfs[i]);
        free(m->btfs);
        free(m->btf_ids);
        for (size_t i = 0; i < m->n_programs; i++)
                free(m->programs[i].map_ids);
        free(m->programs);
        *m = (DaemonMaps){ 0 };
}

int daemon_maps_lookup(const DaemonMaps *m, const char *ifname, const char *what, const DaemonMap **ret,
                       Error *reterr) {
        const DaemonMap *found = NULL;
        size_t n = 0;
        char *end;
        unsigned long id;

        for (size_t i = 0; i < m->n; i++)
                if (streq(m->maps[i].map.name, what)) {
                        found = &m->maps[i];
                        n++;
                }
        if (n == 1) {
                *ret = found;
                return 0;
        }
        if (n > 1)
                return error_set(reterr, EINVAL, ERROR_MAP_AMBIGUOUS,
                                 "%s: %zu maps are named %s (one per program): name one by its id", ifname,
                                 n, what);
        errno = 0;
        id = strtoul(what, &end, 10);
        if (errno == 0 && *end == 0 && what[0] >= '0' && what[0] <= '9')
                for (size_t i = 0; i < m->n; i++)
                        if (m->maps[i].map.id == id) {
                                *ret = &m->maps[i];
                                return 0;
                        }
        return error_set(reterr, ENOENT, ERROR_UNKNOWN_MAP,
                         "%s: no attached program of the document uses a map %s", ifname, what);
}

int daemon_map_read(Manager *d, const DaemonMap *m, const uint8_t *cursor, size_t cursor_size, size_t limit,
                    NlMapPage *ret, Error *reterr) {
        (void) d;
        return nl_map_read(&m->map, cursor, cursor_size, limit, ret, reterr);
}
