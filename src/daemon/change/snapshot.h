/* snapshot.h: clsd's cls_bpf filters on an interface before a change, each with a reference to its
 * program and actions', to put exactly that back if the change fails half-way. */
#pragma once

#include "nl.h"
#include "nl-bpf.h"

typedef struct Snapshot {
        NlSocket *rtnl;
        int ifindex;
        bool had_clsact;
        NlFilter *filters; /* clsd's only */
        NlProgram **programs; /* a reference to each one's program */
        NlProgram **action_programs; /* and to its actions': NL_ACTIONS_MAX for each filter */
        size_t n_filters;
} Snapshot;

/* all: the interface's filters as just dumped. */
int snapshot_take(NlSocket *rtnl, int ifindex, const NlFilter *all, size_t n_all, Snapshot *ret,
                  Error *reterr);
int snapshot_restore(const Snapshot *s, const char *ifname, Error *reterr);
void snapshot_done(Snapshot *s);
