/* maps.h: the maps of the programs clsd's filters hold, as the faces read them (maps.c). */
#pragma once

#include "manager.h"
#include "daemon-maps.h"

/* The maps of the programs the filter holds, each once in m, with the filter as one more user. */
int daemon_maps_add_filter(DaemonMaps *m, const Iface *it, const Filter *f, Error *reterr);
/* The maps of the programs held by every filter, on any interface, that want() picks. */
int maps_of_filters(Manager *m, bool (*want)(const Iface *it, const Filter *f, const void *userdata),
                    const void *userdata, DaemonMaps *ret, Error *reterr);
