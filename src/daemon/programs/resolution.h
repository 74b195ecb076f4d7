/* resolution.h: resolving a document's objects and programs for a change (a PUT, a policy), with the
 * objects clsd has not seen inspected by workers first while the loop goes on. */
#pragma once

#include "manager.h"
#include "resolve.h"
#include "oci.h"

typedef struct ObjectResolution {
        Manager *m;
        Resolver resolver;
        bool keep_only; /* a dry run: inspected objects count for this resolution only, nothing stored */
        size_t inspecting; /* worker jobs and pulls in flight */
        struct OciPullJob **pulls; /* the pulls of this round (NULL: done) */
        size_t n_pulls;
        uint64_t pull_nodes; /* the fleet's nodes that pull these images about now: a pull starts after a
                              * random wait sized by them and the registry's pulls_per_second */
        Error error; /* of a failed inspection */
        WorkerJob **jobs;
        size_t n_jobs;
        /* Every inspection of a round is in: run resolution_run() again (not from inside this call's
         * caller's stack: it comes from a worker's answer). */
        void (*on_inspected)(struct ObjectResolution *res);
} ObjectResolution;

void resolution_init(ObjectResolution *res, Manager *m, bool keep_only,
                     void (*on_inspected)(ObjectResolution *res));
void resolution_done(ObjectResolution *res);
/* Resolves doc: 0, -EAGAIN while images are pulled (each on a thread) or workers inspect objects
 * (on_inspected is called when they are done),
 * or the reason it cannot (in reterr). An inspected object is stored unless keep_only. */
int resolution_run(ObjectResolution *res, Document *doc, Error *reterr);
/* How ref is pulled on this host: its registry's credentials and CA, the object limit, the cosign
 * material when trusted keys will ask for it. */
void resolution_pull_options(Manager *m, const char *ref, OciPullOptions *ret);
