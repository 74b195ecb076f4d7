/* clsact.h: the clsact qdisc clsd created, removed when unused (clsact.c). */
#pragma once

#include "nl.h"

/* Deletes the clsact qdisc unless a filter still uses it (call only for one clsd created). */
int clsact_remove_if_unused(NlSocket *rtnl, int ifindex, const char *ifname, Error *reterr);
/* The same, from what is known to be left (a dump, less what was deleted since). */
int clsact_remove_unless_used(NlSocket *rtnl, int ifindex, const char *ifname, const NlFilter *left,
                              size_t n_left, Error *reterr);
