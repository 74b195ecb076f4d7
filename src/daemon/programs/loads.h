/* loads.h: one load per program at a time, whoever waits for it (loads.c). */
#pragma once

#include "manager.h"

int loads_new(Loads **ret);
Loads *loads_free(Loads *l);
/* Starts (or joins) the load of ref for waiter's filters: -EAGAIN (the program goes to waiter's filters
 * that want it, and resume's work goes on, when the load is done), or the failure of a load it waited
 * for. */
int loads_request(Manager *m, const ProgramRef *ref, uint32_t reuse_id, Iface *waiter, Iface *resume,
                  Error *reterr);
/* The interface goes: it waits for nothing (as a target or to be resumed). */
void loads_forget(Manager *m, Iface *waiter);
