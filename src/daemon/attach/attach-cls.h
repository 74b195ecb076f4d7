/* attach-cls.h: what the cls_bpf attach kind's files share (attach-cls.c, cls-describe.c). */
#pragma once

#include "attach.h"
#include "reconcile-diff.h"
#include "daemon-changes.h"

typedef struct ClsObserved {
        AttachObservation meta;
        NlFilter *filters; /* every filter of the interface, clsd's and foreign */
        size_t n;
} ClsObserved;

typedef struct ClsPlan {
        AttachPlan meta;
        DesiredFilter *desired;
        size_t n_desired;
        Plan plan;
} ClsPlan;

DEFINE_ATTACH_CAST(cls_observed, ClsObserved, AttachObservation, ATTACH_KIND_CLS, const);
DEFINE_ATTACH_CAST(cls_plan_of, ClsPlan, AttachPlan, ATTACH_KIND_CLS, const);

const char *cls_hook_name(NlHook h);
/* The dry run's steps for a plan (AttachKind.describe). */
int cls_describe(AttachContext *c, const AttachObservation *observed, const AttachPlan *plan,
                 DryRunStep **steps, size_t *n);
/* act_bpf's counters into status (AttachKind.counters; cls-counters.c). */
int cls_counters(const AttachContext *c, FilterStatus *status, Error *reterr);
