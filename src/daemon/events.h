/* events.h: following the kernel's events and the namespaces' comings and goings (events.c). */
#pragma once

#include "manager.h"

/* The namespaces' callbacks (netns_set_new()): an event of a followed namespace (lost: some were), a
 * namespace that came or went. */
void events_on_netns_event(const char *netns, const struct nlmsghdr *nlh, bool lost, void *userdata);
void events_on_netns_change(const char *netns, bool present, void *userdata);
/* The periodic resync, the backstop for lost events. */
int events_resync_start(Manager *m, Error *reterr);
