/* attach.h: the attach kinds (cls_bpf filters, direct-action and classic, with their act_bpf actions;
 * tcx links) behind one small interface, so that one reconciler and one dry run serve them all: observe
 * what the kernel has, plan (a pure diff), apply, verify by reading back. */
#pragma once

#include <limits.h>

#include "iface.h"
#include "netns.h"

typedef struct AttachContext {
        Iface *it;
        NlSocket *rtnl; /* the interface's namespace's */
        NetnsSet *netns; /* to enter it (tcx acts on the caller's namespace) */
        const char *bpffs_dir; /* where tcx links are pinned */
        bool tcx; /* the kernel has tcx */
        bool fresh; /* read only what the interface's filters use (Iface.fresh) */
        /* With fresh: the links' view knows the link has no clsact qdisc, so its clsact hooks have no
         * filter to read. If the exclusive clsact add then finds one, apply fails with -ESTALE (nothing
         * changed) and the caller observes again with a dump. */
        bool hooks_absent;
        bool clsact_added; /* this change created the clsact qdisc (a rollback removes it) */
        /* cls_bpf after an apply: what was observed with the kernel's echo of each filter it made, and
         * without those it removed; verify reads it instead of dumping again (NULL: dump). */
        NlFilter *cls_after;
        size_t n_cls_after;
        char *what; /* findings of a repair, "; "-separated (NULL: not wanted) */
        size_t what_size;
} AttachContext;

typedef struct AttachKind {
        const char *name;
        /* Reads what the kernel has for the interface, and fills each of the kind's filters' observed
         * (what is at its place: a program to adopt, or whose maps a new load takes over). */
        int (*observe)(AttachContext *c, void **ret_observed, Error *reterr);
        /* Fills each filter's observed again from what was observed, with the programs now held (a
         * reconcile that changed nothing needs no read-back). */
        void (*settle)(AttachContext *c, const void *observed);
        /* A foreign filter where one of ours must go: refused before anything loads (priority_taken). */
        int (*check)(AttachContext *c, const void *observed, Error *reterr);
        /* The changes that make the kernel as the filters want (their programs', or in a dry run the
         * planned ones'): pure over what was observed. */
        int (*plan)(AttachContext *c, const void *observed, void **ret_plan, Error *reterr);
        /* Applies a plan; the number of changes made. */
        int (*apply)(AttachContext *c, const void *observed, const void *plan, Error *reterr);
        /* Reads back: every filter of the kind is as declared (fills observed), or kernel_error. */
        int (*verify)(AttachContext *c, Error *reterr);
        /* A dry run's steps for the plan, appended to *steps. */
        int (*describe)(AttachContext *c, const void *observed, const void *plan, DryRunStep **steps,
                        size_t *n);
        /* What is clsd's now, held so that a change that fails half-way can put exactly that back. */
        int (*snapshot)(AttachContext *c, const void *observed, void **ret, Error *reterr);
        int (*restore)(AttachContext *c, const void *snapshot, Error *reterr);
        void (*snapshot_free)(void *s);
        /* Everything of clsd's of the kind goes from the interface (DELETE, a device renamed away). */
        int (*remove_all)(AttachContext *c, Error *reterr);
        void (*observed_free)(void *observed);
        void (*plan_free)(void *plan);
} AttachKind;

extern const AttachKind attach_kind_cls;
extern const AttachKind attach_kind_tcx;

/* The program the filter wants (action -1: its classifier): the one it holds, or in a dry run the
 * planned one (0: a new load). */
uint32_t filter_want_id(const Filter *f, int action);
const char *filter_want_tag(const Filter *f, int action);
int filter_want_fd(const Filter *f, int action);
/* Where clsd pins the tcx links of a namespace (NULL: its own). */
void tcx_dir(const char *bpffs_dir, const char *netns, char buf[PATH_MAX]);
/* At start: pins whose links no longer run anywhere go. */
void tcx_sweep(const char *bpffs_dir, const char *netns_dir);
/* Appends one finding to c->what. */
void attach_what(AttachContext *c, const char *fmt, ...) _printf_(2, 3);
