/* daemon-metrics.h: /metrics: families and samples for the face to write out */
#pragma once

#include "daemon.h"

/* ---- /metrics (metrics.c): families and samples for the face to write out ---- */
typedef struct MetricWriter {
        /* Once per metric name, before its samples. */
        void (*family)(void *userdata, const char *name, const char *type, const char *help);
        /* labels: n_labels (name, value) pairs. */
        void (*sample)(void *userdata, const char *name, const char *const *labels, size_t n_labels,
                       double value);
        /* Optional: a label set written out once for the samples of several families (a filter's): a
         * handle good until the scrape ends, or NULL (out of memory: sample() then). */
        const void *(*label_set)(void *userdata, const char *const *labels, size_t n_labels);
        void (*sample_set)(void *userdata, const char *name, const void *set, double value);
        void *userdata;
} MetricWriter;

typedef struct DaemonErrorCount {
        ErrorCode code;
        uint64_t n;
} DaemonErrorCount;

typedef struct DaemonCounters {
        uint64_t reconciles;
        uint64_t repairs;
        uint64_t repair_loops;
        uint64_t worker_jobs;
        uint64_t pulls, pull_failures; /* images pulled from registries (oci://…), and those that failed */
        DaemonErrorCount errors[48];
        size_t n_errors;
        uint64_t map_metric_failures;
} DaemonCounters;

/* Everything the daemon exports, read from the kernel now: its own counters, every filter's attach
 * state and run statistics, and the documents' map-derived metrics. */
int daemon_metrics(Manager *m, const MetricWriter *w);
/* Counts one more of code in v (n entries, room for max). */
void error_counts_add(DaemonErrorCount *v, size_t *n, size_t max, ErrorCode code);
/* Counts a failure by its error code (clsd_errors_total). */
void daemon_count_error(Manager *m, ErrorCode code);
