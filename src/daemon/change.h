/* change.h: a change someone waits for (a PUT, its dry run, a DELETE, a hog that changed), as an
 * operation of the request queue. change.c runs it, dry-run.c plans it without changing anything,
 * iface-ops.c makes it from what a face asked. */
#pragma once

#include "attach.h"
#include "manager.h"
#include "resolution.h"

typedef enum ChangeKind {
        CHANGE_PUT, /* the API's document becomes doc */
        CHANGE_DRY_RUN, /* what CHANGE_PUT would do */
        CHANGE_DELETE, /* the API's document goes */
        CHANGE_HOG, /* the hog becomes doc (NULL: it goes) */
        CHANGE_POLICY, /* the policies that match the interface become policies */
        CHANGE_POLICY_DRY_RUN, /* what CHANGE_POLICY would do */
} ChangeKind;

typedef struct Change {
        Operation op; /* first: the queue's view */
        Manager *m;
        ChangeKind kind;
        Document *doc;
        char *hog_path;
        Policy **policies; /* CHANGE_POLICY: references */
        size_t n_policies;
        const Resolver *shared_resolver; /* a policy's dry run: its objects, resolved once for all */
        bool composed; /* CHANGE_POLICY: the interface has them; its reconcile runs */
        DaemonExpect expect;
        char *expect_text;
        ObjectResolution res;
        Iface *candidate; /* the interface as the change makes it */
        DryRun dry_run;
        DaemonDoneFunc done;
        DryRunDoneFunc dry_done;
        void *userdata;
} Change;

/* A change of kind for m, expecting expect of the API document (may be NULL); NULL: out of memory. */
Change *change_new(Manager *m, ChangeKind kind, const DaemonExpect *expect);
void change_free(Operation *op);
/* Queues the change behind the interface's others (a new interface is made, not shown until a change
 * stores it); on failure, answers and frees it. */
void change_queue(Manager *m, Change *c, const char *netns, const char *ifname);
bool change_is_dry_run(const Change *c);
/* Answers whoever waits, once. */
void change_finish(Change *c, Iface *it, const Error *e);
/* The operation's run: as far as the change can go now (0 done, -EAGAIN waiting for a worker, -ESRCH
 * the interface went with it). */
int change_run(Manager *m, Operation *op);
/* The dry run's plan: the programs it would use and the steps it would take, from a fresh look at
 * the kernel (present: the interface exists). */
int dry_run_apply(Change *c, Iface *it, NlSocket *rtnl, bool present, Error *reterr);
