/* loads.h: one load per program at a time, whoever waits for it (loads.c). */
#pragma once

#include "manager.h"

/* Who waits for a load: what gets the program once it is in (an interface's filters, a change's
 * candidate's, a transaction's program set), and whose work then goes on. */
typedef struct LoadWaiter {
        void *target;
        /* Gives target's slots that want ref's program a reference to p. */
        void (*hand_over)(void *target, const ProgramRef *ref, Program *p);
        void *resume;
        /* resume's work goes on (from the load's answer: it must not run that work at once). */
        void (*on_loaded)(Manager *m, void *resume);
} LoadWaiter;

int loads_new(Loads **ret);
Loads *loads_free(Loads *l);
/* Starts (or joins) the load of ref for w: -EAGAIN (the program is handed over to w's target and
 * w's resume goes on when the load is done), or the failure of a load it waited for. */
int loads_request(Manager *m, const ProgramRef *ref, uint32_t reuse_id, const LoadWaiter *w, Error *reterr);
/* The program of ref into *slot: the registry's (held already, or taken back: adopt_id as for
 * registry_acquire()) at once (0), else a load for w (-EAGAIN; it takes over the maps of the program of
 * reuse_id), or the failure of either. */
int loads_acquire(Manager *m, const ProgramRef *ref, uint32_t adopt_id, uint32_t reuse_id, Program **slot,
                  const LoadWaiter *w, Error *reterr);
/* The target or resume goes: it waits for nothing any more. */
void loads_forget(Manager *m, const void *waiter);
