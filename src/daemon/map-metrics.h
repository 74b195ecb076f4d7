/* map-metrics.h: the metrics documents derive from their programs' maps (map-metrics.c). */
#pragma once

#include "manager.h"

/* Every map-derived metric of the filters whose maps are in maps, into w. */
void map_metrics_emit(Manager *d, const MetricWriter *w, DaemonMaps *maps);
/* A filter's labels (netns, ifname, direction, name, pref, attach) as label pairs in v, pref's text in pref.
 */
void metric_filter_labels(const Iface *it, const Filter *f, char pref[8], const char *v[8]);
