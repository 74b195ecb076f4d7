/* iface-table.h: the interfaces clsd keeps, hashed by (namespace, name) and by (namespace, ifindex),
 * listed in the order they came. */
#pragma once

#include "iface.h"

typedef struct IfaceTable IfaceTable;

int iface_table_new(IfaceTable **ret);
/* Frees the table, not the interfaces. */
IfaceTable *iface_table_free(IfaceTable *t);
/* Room for one more, so that iface_table_add() cannot fail. */
int iface_table_reserve(IfaceTable *t);
void iface_table_add(IfaceTable *t, Iface *it);
void iface_table_remove(IfaceTable *t, Iface *it);
Iface *iface_table_get(const IfaceTable *t, const char *netns, const char *ifname);
/* The table's interface, or a new one added (not visible until a change stores it). */
int iface_table_ensure(IfaceTable *t, const char *netns, const char *ifname, Iface **ret);
Iface *iface_table_by_ifindex(const IfaceTable *t, const char *netns, int ifindex);
/* Sets it->ifindex and indexes it so (0: not indexed). */
void iface_table_set_ifindex(IfaceTable *t, Iface *it, int ifindex);
size_t iface_table_size(const IfaceTable *t);
/* An interface's visibility changed: the faces' list of visible ones is made again. */
void iface_table_touch(IfaceTable *t);
uint64_t iface_table_version(const IfaceTable *t);
Iface *iface_table_at(const IfaceTable *t, size_t i);
