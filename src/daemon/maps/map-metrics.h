/* map-metrics.h: the metrics documents derive from their programs' maps (map-metrics.c). */
#pragma once

#include "manager.h"
#include "daemon-maps.h"
#include "daemon-metrics.h"

/* Every map-derived metric of the filters whose maps are in maps, into w. */
void map_metrics_emit(Manager *d, const MetricWriter *w, DaemonMaps *maps);
/* A filter's labels (netns, ifname, direction, name, and policy when a policy's filter it is) as label
 * pairs in v: their number (at most FILTER_LABELS); pref's text in pref, for the callers that add it. */
#define FILTER_LABELS 5
size_t metric_filter_labels(const Iface *it, const Filter *f, char pref[8],
                            const char *v[2 * FILTER_LABELS]);
