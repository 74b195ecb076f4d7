/* attach.h: the attach kinds (cls_bpf filters, direct-action and classic, with their act_bpf actions;
 * tcx links) behind one small interface and one table, so that the reconciler, a change and a dry run
 * serve them all through the *_all helpers: observe what the kernel has, check, plan (a pure diff),
 * apply, verify by reading back, snapshot and restore. A third kind is one file defining an AttachKind
 * and one row of attach_kinds[] (attach.c). */
#pragma once

#include <assert.h>
#include <limits.h>

#include "iface.h"
#include "namespaces.h"
#include "daemon-changes.h"

typedef struct Manager Manager;

/* What a kind observed, planned, holds for a rollback and keeps across a context: each kind's own struct
 * begins with one of these, tagged with its kind, so that the table's slots are typed and only the kind's
 * own files turn them back into its struct (DEFINE_ATTACH_CAST; networkd's NetDev casts the same way). */
typedef struct AttachObservation {
        AttachKindIndex kind;
} AttachObservation;
typedef struct AttachPlan {
        AttachKindIndex kind;
} AttachPlan;
typedef struct AttachHeld {
        AttachKindIndex kind;
} AttachHeld;
typedef struct AttachState {
        AttachKindIndex kind;
} AttachState;

/* static [q] Type *fn([q] Base *b): the kind's struct whose first member (of type Base) b is; NULL stays
 * NULL, and a slot of another kind is a bug. Used as a declaration, with its semicolon. */
#define DEFINE_ATTACH_CAST(fn, Type, Base, K, q) \
        static inline q Type *fn(q Base *b) { \
                assert(!b || b->kind == (K)); \
                return (q Type *) b; \
        } \
        struct attach_cast_needs_a_semicolon_

typedef struct AttachContext {
        Iface *it;
        NlSocket *rtnl; /* the interface's namespace's */
        NetnsSet *netns; /* to enter it (tcx acts on the caller's namespace) */
        const char *bpffs_dir; /* where tcx links are pinned */
        bool tcx; /* the kernel has tcx */
        bool fresh; /* read only what the interface's filters use (Iface.fresh) */
        /* With fresh: the links' view knows the link has no clsact qdisc, so its clsact hooks have no
         * filter to read. If applying then finds one, it fails with -ESTALE (nothing changed) and the
         * caller observes again with a dump. */
        bool hooks_absent;
        /* Each kind's own state across the context's life (what an apply leaves for its verify and a
         * restore), freed by attach_context_done() with the kind's state_free. */
        AttachState *kind_state[_ATTACH_KIND_MAX];
        char *what; /* findings of a repair, "; "-separated (NULL: not wanted) */
        size_t what_size;
} AttachContext;

typedef struct AttachKind {
        /* Reads what the kernel has for the interface, and fills each of the kind's filters' observed
         * (what is at its place: a program to adopt, or whose maps a new load takes over). */
        int (*observe)(AttachContext *c, AttachObservation **ret_observed, Error *reterr);
        /* Fills each filter's observed again from what was observed, with the programs now held (a
         * reconcile that changed nothing needs no read-back). */
        void (*settle)(AttachContext *c, const AttachObservation *observed);
        /* What the kind cannot do here (a foreign filter where one of ours must go, a kernel without
         * the kind): refused before anything loads. */
        int (*check)(AttachContext *c, const AttachObservation *observed, Error *reterr);
        /* The changes that make the kernel as the filters want (their programs', or in a dry run the
         * planned ones'): pure over what was observed. */
        int (*plan)(AttachContext *c, const AttachObservation *observed, AttachPlan **ret_plan,
                    Error *reterr);
        /* Applies a plan; the number of changes made. */
        int (*apply)(AttachContext *c, const AttachObservation *observed, const AttachPlan *plan,
                     Error *reterr);
        /* Reads back after an apply: every filter of the kind is as declared (fills observed), or
         * kernel_error. */
        int (*verify)(AttachContext *c, Error *reterr);
        /* A dry run's steps for the plan, appended to *steps. */
        int (*describe)(AttachContext *c, const AttachObservation *observed, const AttachPlan *plan,
                        DryRunStep **steps, size_t *n);
        /* What is clsd's now, held so that a change that fails half-way can put exactly that back; the
         * restore also puts back what before (the interface as it was, programs held or not) had. */
        int (*snapshot)(AttachContext *c, const AttachObservation *observed, AttachHeld **ret,
                        Error *reterr);
        int (*restore)(AttachContext *c, const AttachHeld *snapshot, Iface *before, Error *reterr);
        void (*snapshot_free)(AttachHeld *s);
        /* Everything of clsd's of the kind goes from the interface (DELETE, a device renamed away). */
        int (*remove_all)(AttachContext *c, Error *reterr);
        /* The counters the kernel keeps per packet for what the filters attached and no event reports
         * (act_bpf's), into status (parallel to the interface's filters); NULL: none. Reads only. */
        int (*counters)(const AttachContext *c, FilterStatus *status, Error *reterr);
        void (*observed_free)(AttachObservation *observed);
        void (*plan_free)(AttachPlan *plan);
        void (*state_free)(AttachState *state);
} AttachKind;

extern const AttachKind attach_kind_cls;
extern const AttachKind attach_kind_tcx;
/* Every kind, in the order they are applied. */
extern const AttachKind *const attach_kinds[_ATTACH_KIND_MAX];

/* What each kind observed, and what each holds for a rollback: indexed by AttachKindIndex. */
typedef struct AttachObserved {
        AttachObservation *of[_ATTACH_KIND_MAX];
} AttachObserved;
typedef struct AttachSnapshot {
        AttachHeld *of[_ATTACH_KIND_MAX];
} AttachSnapshot;

void attach_context_init(Manager *m, Iface *it, NlSocket *rtnl, AttachContext *ret);
void attach_context_done(AttachContext *c);
/* Observes with every kind; the caller frees with attach_observed_free(). */
int attach_observe_all(AttachContext *c, AttachObserved *ret, Error *reterr);
bool attach_observed_any(const AttachObserved *o);
void attach_observed_free(AttachObserved *o);
void attach_settle_all(AttachContext *c, const AttachObserved *o);
int attach_check_all(AttachContext *c, const AttachObserved *o, Error *reterr);
/* Plans and applies with every kind, then verifies: the number of changes. */
int attach_apply_all(AttachContext *c, const AttachObserved *o, Error *reterr);
/* A dry run's steps of every kind's plan. */
int attach_describe_all(AttachContext *c, const AttachObserved *o, DryRunStep **steps, size_t *n,
                        Error *reterr);
int attach_snapshot_all(AttachContext *c, const AttachObserved *o, AttachSnapshot *ret, Error *reterr);
int attach_restore_all(AttachContext *c, const AttachSnapshot *s, Iface *before, Error *reterr);
void attach_snapshot_free(AttachSnapshot *s);
int attach_remove_all(AttachContext *c, Error *reterr);
int attach_counters_all(const AttachContext *c, FilterStatus *status, Error *reterr);

/* The program the filter wants (action -1: its classifier): the one it holds, or in a dry run the
 * planned one (0: a new load). */
uint32_t filter_want_id(const Filter *f, int action);
const char *filter_want_tag(const Filter *f, int action);
int filter_want_fd(const Filter *f, int action);
/* Appends one finding to c->what. */
void attach_what(AttachContext *c, const char *fmt, ...) _printf_(2, 3);
