/* iface.h: one interface as clsd keeps it: its documents (immutable, shared, a source each: the API's and
 * a hog's), the runtime filters composed from them, each with the programs it holds and what the kernel
 * showed for it, and the interface's state. A small state machine: pending, configured, failed. */
#pragma once

#include "daemon.h"
#include "registry.h"
#include "daemon-changes.h"
#include "store-policy.h"

/* How a filter is attached: the rows of attach_kinds[] (attach.h), each kind's code in its own files. */
typedef enum AttachKindIndex {
        ATTACH_KIND_CLS, /* a cls_bpf filter (with its act_bpf actions) */
        ATTACH_KIND_TCX, /* a tcx link */
        _ATTACH_KIND_MAX,
} AttachKindIndex;
/* The kind as a document's "attach" says it: "cls_bpf", "tcx". */
const char *attach_kind_to_string(AttachKindIndex k);

typedef enum FilterState {
        FILTER_REQUESTING, /* its programs are not held yet */
        FILTER_CONFIGURED, /* attached as declared (read back) */
        FILTER_FAILED,
} FilterState;

struct Filter {
        const FilterSpec *spec; /* in api or hog, which the interface holds */
        Direction dir;
        DocumentSource source;
        AttachKindIndex kind; /* "attach", with "auto" resolved by the kernel's features */
        char instance[17]; /* its own program instance, when "maps" gives it maps of its own; else "" */
        FilterState state;
        Program *program; /* NULL until acquired */
        bool config_unwritten; /* a new load gave it a program: its configuration maps are to be written */
        Program *actions[NL_ACTIONS_MAX];
        FilterFact fact; /* what clsd attached last (stored with the document, adopted at a restart) */
        FilterObserved observed; /* what the kernel showed at the last reconcile */
        /* A dry run holds no programs: what it would use (id 0: a new load). */
        AttachedFact planned;
        AttachedFact planned_actions[NL_ACTIONS_MAX];
};

struct Iface {
        char *netns; /* NULL: clsd's own */
        char *ifname;
        char *key; /* "netns/ifname" or "/ifname": the table's key */
        Document *api; /* the API's document (a reference), or NULL */
        Document *hog;
        char *hog_path;
        DocumentFacts facts[_SOURCE_MAX]; /* what clsd attached for each document */
        DocumentSource hook_source[_DIRECTION_MAX]; /* whose filters each hook has */
        Policy **policies; /* the policies that match it (references), by order then name */
        size_t n_policies;
        const Policy *hook_policy[_DIRECTION_MAX]; /* the policy a hook has its filters from, or NULL */
        /* Two policies of the same order want the hook (and nothing above them does): neither is
         * applied there; "a and b" */
        char *hook_conflict[_DIRECTION_MAX];
        Filter *filters; /* ingress, then egress */
        size_t n_filters;
        /* Filters left out because no trusted key verifies their object any more (registry_revoked()):
         * which and why, or NULL. The interface is failed ("object_untrusted") while there are some. */
        char *untrusted;
        IfaceState state;
        int ifindex; /* 0 while pending */
        Error error; /* why the last attempt failed, in state IFACE_FAILED */
        unsigned repairs;
        uint64_t last_repair_usec; /* CLOCK_REALTIME */
        char last_repair_what[256];
        /* Repairs are counted over a window: too many in it and another program fights clsd over a
         * hook; the interface's next reconcile waits (backoff), and it is said once. */
        uint64_t repair_window_usec;
        unsigned repair_window_count;
        unsigned repair_loops;
        bool programs_held; /* every filter's programs acquired */
        bool visible; /* in the table and the faces' view (a new interface becomes so once stored) */
        /* Loaded at start or brought by a policy, and clsd has not looked at its kernel state yet: its
         * first reconcile reads only the hooks its filters use (a change that moved filters away
         * removed them then; the periodic resync looks at everything), or all of them if a filter was
         * left out untrusted (what the last run attached for it is removed). */
        bool fresh;
        /* A change that declared intent (a policy's) was refused here: its reconciles apply the interface
         * whole or put the kernel back (a snapshot, as a change's), until one succeeds; what they change
         * is that change, not a repair of drift. */
        bool whole;
        struct ReconcileRequest *request; /* its reconcile request, while one is queued or running */
        struct Operation *ops; /* changes waiting for it, in order (queue.c) */
        struct Operation *ops_tail;
};

/* compose.c */
/* A new interface of no documents (the caller sets them). */
int iface_new(const char *netns, const char *ifname, Iface **ret);
/* Releases the programs (through reg, which may be NULL when none were acquired) and frees. */
Iface *iface_free(Iface *it, Registry *reg);
/* Makes api and hog (references taken; either may be NULL) the interface's documents, with what was
 * attached for them, and composes the filters: on each hook a hog's if it declares any there, else the
 * API's, else the policy of lowest order that declares some (two of that order: a conflict, none). tcx:
 * whether the kernel has tcx ("auto"). Filters whose spec is alike in the old composition keep their
 * programs. */
int iface_set_documents(Iface *it, Document *api, const DocumentFacts *api_facts, Document *hog,
                        const char *hog_path, const DocumentFacts *hog_facts, bool tcx, Registry *reg);
/* Makes v the policies that match the interface (references taken); iface_set_documents() composes
 * them. */
int iface_set_policies(Iface *it, Policy *const *v, size_t n);
/* Whether the interface's policies are exactly v (in any order). */
bool iface_policies_equal(const Iface *it, Policy *const *v, size_t n);
bool iface_has_policy(const Iface *it, const Policy *p);
/* The facts of the interface's API document that a new API document doc may keep: those of filters
 * declared alike (same name, object, program; actions alike up to the first that differs). */
int iface_facts_for(const Iface *it, const Document *doc, DocumentFacts *ret);
/* The same hook (direction, tcx or not, program instance) and filter name. */
bool filter_same_hook(const Filter *a, const Filter *b);
/* Alike: the same hook and name, and every program alike (store.h's filter_spec_*_alike()): a new
 * composition keeps what the old one held for it. */
bool filter_alike(const Filter *a, const Filter *b);
void iface_release_programs(Iface *it, Registry *reg);
/* The filter's programs released (reg NULL: none were acquired). */
void filter_release(Filter *f, Registry *reg);
/* A change's candidate (its documents, composition and programs, all held) becomes the interface: what
 * the interface had is released, the candidate left empty. Its filters are configured (read back). */
void iface_commit(Iface *it, Iface *cand, Registry *reg);
void iface_set_state(Iface *it, IfaceState state, const Error *e);
/* iface_policy_outcome() of a composition alone (a candidate's): the hooks p holds count as configured,
 * whatever the interface's state. */
PolicyIfaceState iface_policy_composed(const Iface *it, const Policy *p, const char **by);
/* The facts of the document a filter came from, refreshed from the filter's programs; returns whether
 * anything changed (the store needs writing). */
bool iface_update_facts(Iface *it);
bool iface_uses_actions(const Iface *it);
bool hog_holds(const Document *hog, Direction dir);
/* Whether clsd created the interface's clsact qdisc (whichever document it did it for). */
bool iface_clsact_created(const Iface *it);
/* The kernel name of the filter, "clsd:<name>": the mark that makes it clsd's. */
void filter_kernel_name(const FilterSpec *f, char buf[256]);
/* The kernel name of the filter's action k: "clsd:<name>/<k + 1>", so that `tc actions ls` says whose. */
void action_kernel_name(const FilterSpec *f, size_t k, char buf[NL_ACTION_NAME_MAX]);
NlHook hook_of(Direction dir);
/* Where a filter goes: its "parent", or the clsact hook of its direction. */
uint32_t filter_parent(const FilterSpec *f, Direction dir);
