/* daemon-maps.h: the maps of the attached programs, read and written through their BTF */
#pragma once

#include "daemon.h"
#include "nl-bpf.h"
#include "nl-map.h"
#include "store-policy.h"

/* ---- maps of the attached programs (maps.c), decoded through BTF (btf-json.c) ---- */
struct btf;

/* A filter whose attached program (or action) uses the map. */
typedef struct DaemonMapUser {
        const Iface *iface;
        const Filter *filter;
} DaemonMapUser;

typedef struct DaemonMap {
        NlMap map; /* with an fd of its own */
        struct btf *btf; /* NULL: the map has no BTF (or it could not be read): bytes in hex */
        DaemonMapUser *users;
        size_t n_users;
} DaemonMap;

/* Maps gathered over one or more documents, each once (programs and maps are shared), with the BTF
 * objects they use loaded once each. */
typedef struct DaemonMaps {
        DaemonMap *maps;
        size_t n;
        struct btf **btfs;
        uint32_t *btf_ids;
        size_t n_btfs;
        /* Programs whose maps are in already, each with the ids of its maps: a program shared by many
         * filters is asked for its maps once. */
        struct DaemonMapsProgram *programs;
        size_t n_programs;
} DaemonMaps;

/* Adds the maps of the programs the kernel has attached for the document (st: its status). */
int daemon_maps_add(Manager *m, const Iface *it, const IfaceStatus *st, DaemonMaps *maps, Error *reterr);
/* The document's maps: its status read from the kernel, then daemon_maps_add(). */
int daemon_iface_maps(Manager *m, const Iface *it, DaemonMaps *ret, Error *reterr);
/* The maps of the programs held for the policy's filters, on every interface it is applied to. */
int daemon_policy_maps(Manager *m, const Policy *p, DaemonMaps *ret, Error *reterr);
/* Writes (value) or deletes (NULL) one entry through the policy: by name, in every interface's map of that
 * name (one when shared) and in the policy's own set of a configuration map; by id, in that map. */
int daemon_policy_map_write(Manager *m, const Policy *p, const DaemonMaps *maps, const char *what,
                            const json_t *key, const json_t *value, Error *reterr);
void daemon_maps_done(DaemonMaps *maps);
/* A page of the map's entries as the kernel has them now (nl_map_read()). */
/* Writes one entry of a map (BPF_ANY: added or replaced; a per-CPU map gets the value on every CPU), or
 * deletes one: key and value in the JSON a read gives. -ENOENT (entry_not_found) for a key not there. */
int daemon_map_write(Manager *d, const DaemonMap *m, const json_t *key, const json_t *value, Error *reterr);
int daemon_map_delete(Manager *d, const DaemonMap *m, const json_t *key, Error *reterr);
/* Whether a user's "maps" declares the map configuration ("config": true), and how many entries are stored
 * for it (the most any of its users has). */
bool daemon_map_config(Manager *m, const DaemonMap *dm, size_t *ret_stored);
int daemon_map_read(Manager *m, const DaemonMap *dm, const uint8_t *cursor, size_t cursor_size, size_t limit,
                    NlMapPage *ret, Error *reterr);
/* By kernel name, or by id when names are ambiguous: 404 "unknown_map", 409 "map_ambiguous". */
int daemon_maps_lookup(const DaemonMaps *maps, const char *ifname, const char *what, const DaemonMap **ret,
                       Error *reterr);
