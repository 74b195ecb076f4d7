/* reconcile-diff.h: the pure core of the cls_bpf reconciler: plan = reconcile_diff(desired, observed),
 * on plain structs, tested with cmocka without a kernel. */
#pragma once

#include "nl.h"

typedef struct DesiredAction {
        char name[NL_ACTION_NAME_MAX]; /* "clsd:<filter>/<n>" */
        char tag[NL_TAG_STRING_MAX];
        uint32_t prog_id;
        int prog_fd;
} DesiredAction;

typedef struct DesiredFilter {
        NlHook hook;
        uint32_t parent; /* the clsact hook's, or a classful qdisc's (classic mode) */
        uint16_t pref;
        char name[256];
        char tag[NL_TAG_STRING_MAX];
        uint32_t prog_id; /* the program to attach: two objects can share a tag (maps differ) */
        bool direct_action;
        uint32_t classid;
        int prog_fd;
        DesiredAction actions[NL_ACTIONS_MAX]; /* act_bpf, in order */
        size_t n_actions;
} DesiredFilter;

typedef enum PlanAction {
        PLAN_KEEP, /* already as desired */
        PLAN_ADD, /* nothing at the pref */
        PLAN_REPLACE, /* ours at the pref, but different: replace in place */
        PLAN_REMOVE, /* ours, no longer desired */
        PLAN_CONFLICT, /* a foreign filter holds the pref: never touched */
} PlanAction;

typedef struct PlanStep {
        PlanAction action;
        NlHook hook;
        uint32_t parent;
        uint16_t pref;
        uint32_t handle; /* of the observed filter, for REPLACE/REMOVE/CONFLICT */
        int desired; /* index into desired, or -1 */
        int observed; /* index into observed, or -1 */
} PlanStep;

typedef struct Plan {
        PlanStep *steps;
        size_t n_steps;
} Plan;

const char *plan_action_to_string(PlanAction a);
int reconcile_diff(const DesiredFilter *desired, size_t n_desired, const NlFilter *observed,
                   size_t n_observed, Plan *ret);
void plan_done(Plan *p);
/* clsd's filter named name at (parent, pref) in chain 0, or NULL. */
const NlFilter *find_ours(const NlFilter *observed, size_t n, uint32_t parent, uint16_t pref,
                          const char *name);
