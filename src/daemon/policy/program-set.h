/* program-set.h: the programs of one policy, loaded and verified before the policy is stored (a
 * transaction's, policy-txn.c), and held until the interfaces it reaches hold their own
 * (program-set.c). */
#pragma once

#include "manager.h"
#include "store-policy.h"

/* One program of the set: a filter's (action -1) or one of its actions'. */
typedef struct ProgramSetSlot {
        const FilterSpec *spec; /* the policy's */
        int action;
        char instance[17]; /* a filter with maps of its own: the set's own instance; "": the shared one */
        Program *program;
        bool unwritten; /* a new load: the policy's configuration entries are to be written into it */
} ProgramSetSlot;

typedef struct ProgramSet {
        Manager *m;
        Policy *policy;
        ProgramSetSlot *slots;
        size_t n_slots;
        bool held; /* every slot has its program */
        /* A load the set waited for is done (called from the load's answer: the set's work must not
         * run at once). */
        void (*on_loaded)(void *userdata);
        void *userdata;
} ProgramSet;

/* The set of policy's programs (a reference taken), none held yet: -ENOMEM. */
int program_set_init(ProgramSet *s, Manager *m, Policy *policy, void (*on_loaded)(void *userdata),
                     void *userdata);
/* Every program held (0), loads under way (-EAGAIN: on_loaded is called as each is done), or the
 * failure of one (a verifier's refusal, an object missing). */
int program_set_acquire(ProgramSet *s, Error *reterr);
/* Forgets its loads and releases its programs and the policy. */
void program_set_done(ProgramSet *s);
