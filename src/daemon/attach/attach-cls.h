/* attach-cls.h: what the cls_bpf attach kind's files share (attach-cls.c, cls-describe.c). */
#pragma once

#include "attach.h"
#include "reconcile-diff.h"
#include "daemon-changes.h"

typedef struct ClsObserved {
        NlFilter *filters; /* every filter of the interface, clsd's and foreign */
        size_t n;
} ClsObserved;

typedef struct ClsPlan {
        DesiredFilter *desired;
        size_t n_desired;
        Plan plan;
} ClsPlan;

const char *cls_hook_name(NlHook h);
/* The dry run's steps for a plan (AttachKind.describe). */
int cls_describe(AttachContext *c, const void *observed, const void *plan, DryRunStep **steps, size_t *n);
/* act_bpf's counters into status (AttachKind.counters; cls-counters.c). */
int cls_counters(const AttachContext *c, FilterStatus *status, Error *reterr);
