/* hogs.h: hogs, the configuration's documents (hogs.c). */
#pragma once

#include "manager.h"

/* At start: every hog's interface set up (reconciled with the rest), the hogs with "match" made
 * policies, what a hog gone while clsd was down attached removed. */
int hogs_load(Manager *m);
/* SIGHUP: the hogs directory read again and what changed queued. */
int hogs_reload(Manager *m);
