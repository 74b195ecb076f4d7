/* iface-ops.h: changes of an interface asked by the faces and by hogs (iface-ops.c). */
#pragma once

#include "manager.h"
#include "daemon-changes.h"

/* Queues a change of the interface's hog (NULL: it goes), applied like a PUT, rolled back on failure;
 * done (may be NULL) is told when it is applied or failed. */
void iface_hog_change(Manager *m, const char *netns, const char *ifname, Document *hog, const char *hog_path,
                      DaemonDoneFunc done, void *userdata);
