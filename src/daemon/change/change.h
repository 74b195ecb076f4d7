/* change.h: a change of an interface's sources (a PUT, its dry run, a DELETE, a hog that changed, the
 * policies that came or went for it, their dry run), as an operation of the request queue, run as phases:
 * check, resolve, candidate, look, acquire, apply, commit. Each phase may say "again" (a worker is busy for
 * it): the change runs again from that phase when the worker is done. The kinds differ only in their row of
 * the kinds table (change-kinds.c: their checks and the documents their candidate is made of). change.c
 * drives the phases, change-kinds.c builds the candidate, change-apply.c looks at the kernel, applies,
 * rolls back and commits, dry-run.c plans without changing anything, iface-ops.c makes changes from what
 * a face asked. */
#pragma once

#include "attach.h"
#include "manager.h"
#include "resolution.h"
#include "daemon-changes.h"
#include "store-policy.h"

typedef enum ChangeKind {
        CHANGE_PUT, /* the API's document becomes doc */
        CHANGE_DRY_RUN, /* what CHANGE_PUT would do */
        CHANGE_DELETE, /* the API's document goes */
        CHANGE_HOG, /* the hog becomes doc (NULL: it goes) */
        CHANGE_POLICY, /* the interface is given the policies (a set that changed, an object revoked) */
        CHANGE_POLICY_DRY_RUN, /* what CHANGE_POLICY would do */
        _CHANGE_KIND_MAX,
} ChangeKind;

typedef enum ChangePhase {
        PHASE_CHECK, /* against the interface as it is when the change's turn comes */
        PHASE_RESOLVE, /* the document's objects and programs (workers inspect new objects) */
        PHASE_CANDIDATE, /* the interface as the change makes it */
        PHASE_LOOK, /* what the kernel has: what cannot be done is refused before anything loads */
        PHASE_ACQUIRE, /* every program loaded and verified (workers load them) */
        PHASE_APPLY, /* the kernel and the store changed, or put back as they were */
        PHASE_COMMIT, /* the candidate becomes the interface */
        _PHASE_MAX,
} ChangePhase;

/* A phase's answer besides 0 (the next phase), -EAGAIN (again, when a worker is done) and a failure. */
enum {
        CHANGE_ANSWERED = 1, /* the change is over and was answered (a dry run's plan, a removal) */
};

typedef struct Change Change;

/* A phase: 0 (the next phase), -EAGAIN (again from this phase, when a worker is done), CHANGE_ANSWERED
 * (over), or a failure (in reterr: answered, counted). */
typedef int (*ChangePhaseFunc)(Change *c, Iface *it, Error *reterr);
extern const ChangePhaseFunc change_phases[_PHASE_MAX];

/* A kind's row: what makes it differ from the others. */
typedef struct ChangeType {
        const char *name;
        bool dry_run;
        /* Declared intent (policies): what the kernel refuses after the candidate is made is the
         * interface's state, retried with the queue's backoff, not the answer; the kernel is still put
         * back as it was. A new interface's look reads only the hooks its filters use. */
        bool intent;
        bool fresh_paths; /* an object given by path is read again (resolve.h: Resolver.fresh) */
        /* Its own checks against the interface as it is (If-Match, a hog's hooks, a document to delete). */
        int (*check)(Change *c, const Iface *it, Error *reterr);
        /* The documents the candidate is made of: the API's (with what may be adopted of what was
         * attached for it), the hog's, the policies. */
        int (*documents)(Change *c, const Iface *it, Document **ret_api, DocumentFacts *ret_api_facts,
                         Document **ret_hog, const char **ret_hog_path, Policy *const **ret_policies,
                         size_t *ret_n_policies);
} ChangeType;

extern const ChangeType change_types[_CHANGE_KIND_MAX];

/* What the kernel had when the change looked, kept within one run (a run that waits lets it go: the
 * kernel is read again when it goes on). */
typedef struct ChangeLook {
        NlSocket *rtnl;
        NlLink link;
        bool looked; /* in this run (a run that waited let it go) */
        bool present; /* the interface exists */
        bool went; /* its link went while the change was applied (link.ifindex is the one that went) */
        bool fresh, hooks_absent; /* what the look read (AttachContext) */
        AttachObserved observed; /* of the candidate's filters, with present */
} ChangeLook;

struct Change {
        Operation op; /* first: the queue's view */
        Manager *m;
        ChangeKind kind;
        const ChangeType *type;
        const ChangePhaseFunc *phases; /* change_phases */
        ChangePhase phase; /* the next to run */
        Document *doc;
        char *hog_path;
        Policy **policies; /* CHANGE_POLICY, CHANGE_POLICY_DRY_RUN: references */
        size_t n_policies;
        const Resolver *shared_resolver; /* a policy's dry run: its objects, resolved once for all */
        DaemonExpect expect;
        char *expect_text;
        ObjectResolution res;
        Iface *candidate; /* the interface as the change makes it */
        ChangeLook look;
        DryRun dry_run;
        DaemonDoneFunc done;
        DryRunDoneFunc dry_done;
        void *userdata;
};

/* A change of kind for m, expecting expect of the API document (may be NULL); NULL: out of memory. */
Change *change_new(Manager *m, ChangeKind kind, const DaemonExpect *expect);
void change_free(Operation *op);
/* Queues the change behind the interface's others (a new interface is made, not shown until a change
 * stores it); on failure, answers and frees it. */
void change_queue(Manager *m, Change *c, const char *netns, const char *ifname);
/* The policies (references taken) a policy change gives the interface: -ENOMEM. */
int change_set_policies(Change *c, Policy *const *v, size_t n);
/* change-kinds.c */
/* Answers whoever waits, once (it: the interface as it is now, NULL if it went). */
void change_finish(Change *c, Iface *it, const Error *e);
/* The candidate, from the kind's documents; the interface's alike filters' programs shared. */
int change_make_candidate(Change *c, Iface *it, Error *reterr);

/* change-apply.c: the phases that meet the kernel and the store */
int change_look(Change *c, Iface *it, Error *reterr);
void change_look_done(ChangeLook *look);
int change_apply(Change *c, Iface *it, Error *reterr);
int change_commit(Change *c, Iface *it, Error *reterr);
/* A change of intent that failed after its candidate was made: the candidate becomes the interface,
 * failed with e, and is retried; whoever waits is told the interface's state. */
void change_hold_failed(Change *c, Iface *it, const Error *e);

/* dry-run.c: the dry run's plan (the programs it would use and the steps it would take) from what the
 * look saw. */
int dry_run_apply(Change *c, Iface *it, ChangeLook *look, Error *reterr);
