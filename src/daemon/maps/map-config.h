/* map-config.h: configuration maps ("config": true): the entries written through clsd kept, and
 * written into new loads' maps (map-config.c). */
#pragma once

#include "manager.h"
#include "daemon-maps.h"
#include "store-policy.h"

int map_config_new(MapConfig **ret);
MapConfig *map_config_free(MapConfig *mc);
/* The stored entries read (an unreadable file set aside), and those of what no longer declares them
 * forgotten. */
int map_config_load(Manager *m, Error *reterr);
/* A change listener: an interface removed takes its entries with it. */
void map_config_on_change(Manager *m, Iface *it, unsigned changes, void *userdata);
/* The entry just written to (value) or deleted from (NULL) map dm is stored for every filter whose "maps"
 * declares dm configuration and whose programs use it. */
int map_config_record(Manager *m, const DaemonMap *dm, const json_t *key, const json_t *value,
                      Error *reterr);
/* The same for the policy's own set of a map each interface has its own of (written through the policy):
 * 1 when it changed. */
int map_config_record_policy(Manager *m, const Policy *p, const DaemonMap *dm, const json_t *key,
                             const json_t *value, Error *reterr);
/* Writes the stored entries into the configuration maps of the programs new loads gave the interface's
 * filters. */
void map_config_apply(Manager *m, Iface *it);
/* The policy's configuration entries of spec's shared maps written into p, a new load of one of its
 * programs (a transaction's program set: the interfaces that take p from the registry find them). */
void map_config_apply_policy(Manager *m, const Policy *policy, const FilterSpec *spec, Program *p);
/* Forgets the entries of documents, filters and maps that no longer declare them configuration. */
void map_config_prune(Manager *m);
