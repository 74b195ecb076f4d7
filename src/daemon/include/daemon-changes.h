/* daemon-changes.h: what the faces ask of an interface (a PUT, its dry run, a DELETE), each answered once */
#pragma once

#include "daemon.h"

/* ---- changes: each runs on the loop, one at a time per interface; loading a program runs in a
 * worker, so the loop keeps serving. done() is called once, with the interface (NULL after a
 * DELETE, or on failure) and the error; from within the call, or later. ---- */

/* What a change expects of the API document it replaces: the face turns HTTP's If-Match into this. */
typedef enum DaemonExpectKind {
        EXPECT_NOTHING, /* no If-Match */
        EXPECT_ANY, /* "*": a document must exist */
        EXPECT_GENERATION, /* this generation */
        EXPECT_UNMATCHABLE, /* a precondition no generation can meet (an If-Match that names none) */
} DaemonExpectKind;

typedef struct DaemonExpect {
        DaemonExpectKind kind;
        uint64_t generation;
        const char *as_given; /* the client's words, for the 412's message */
} DaemonExpect;

typedef void (*DaemonDoneFunc)(Manager *m, Iface *it, const Error *e, void *userdata);

/* The transactional PUT: every program is loaded and verified, and conflicts are checked, before the
 * store or the kernel changes; a kernel or store failure after that rolls back. expect may be NULL. */
void daemon_iface_put(Manager *m, const char *netns, const char *ifname, json_t *body,
                      const DaemonExpect *expect, DaemonDoneFunc done, void *userdata);
void daemon_iface_delete(Manager *m, const char *netns, const char *ifname, const DaemonExpect *expect,
                         DaemonDoneFunc done, void *userdata);

/* A dry run of a PUT: what it would load and change, and why; nothing is loaded or changed. */
typedef enum DryRunLoad {
        DRY_RUN_SHARED, /* already loaded for another filter or interface */
        DRY_RUN_ADOPT, /* attached here already: taken back by id */
        DRY_RUN_LOAD, /* would be loaded and verified */
} DryRunLoad;

typedef struct DryRunProgram {
        const FilterSpec *filter; /* in DryRun.plan_doc */
        Direction direction;
        int action; /* -1: the filter's classifier; else its action number action */
        DryRunLoad load;
} DryRunProgram;

typedef struct DryRunStep {
        const char *action; /* "keep", "add", "replace", "remove", "conflict" */
        Direction direction;
        uint16_t pref;
        char name[256]; /* the kernel filter's name */
        char reason[600];
} DryRunStep;

typedef struct DryRun {
        Document *doc; /* the document as it would be stored */
        Document *plan_doc; /* what the reconciler would apply: doc, with a hog's hooks */
        bool pending; /* the interface does not exist: nothing would change in the kernel now */
        bool document_changed; /* doc differs from the stored one (or there is none) */
        bool dropped; /* nothing would be declared for the interface (no document, hog or policy): it goes */
        DryRunProgram *programs;
        size_t n_programs;
        DryRunStep *steps;
        size_t n_steps;
        Error refused; /* what the apply would refuse with (a priority a foreign filter holds), if anything
                        */
        /* a policy's dry run: the policy's state on the interface as it would be, and by or with whom */
        PolicyIfaceState policy_state;
        char *policy_by;
} DryRun;

void dry_run_done(DryRun *r);
typedef void (*DryRunDoneFunc)(Manager *m, const DryRun *dr, const Error *e, void *userdata);
void daemon_iface_dry_run(Manager *m, const char *netns, const char *ifname, json_t *body,
                          const DaemonExpect *expect, DryRunDoneFunc done, void *userdata);
