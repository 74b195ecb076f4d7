/* uploads.h: the stored objects (uploads.c). */
#pragma once

#include "manager.h"

/* At start: the store's objects verified against the trusted keys and put in the cache. */
int objects_load(Manager *m);
