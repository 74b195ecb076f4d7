/* metrics.c: what /metrics shows, read from the kernel at each scrape: clsd's own health, each filter's
 * attach state and run statistics, and the metrics documents derive from their programs' maps. The
 * exposition text is the face's (src/api/metrics-text.c); this file hands it families and samples. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btf.h"
#include "log.h"
#include "manager.h"
#include "map-metrics.h"
#include "daemon-changes.h"
#include "daemon-fleet.h"
#include "daemon-maps.h"
#include "daemon-metrics.h"
#include "daemon-policies.h"
#include "nl-map.h"
#include "nl-worker.h"
#include "store-policy.h"

/* The rollouts this node takes part in: where each is, and this node's wave and step. */
static void emit_rollouts(const DaemonFleet *f, const MetricWriter *w) {
        w->family(w->userdata, "clsd_fleet_reverts_total", "counter",
                  "Revisions this node's dead-man switch took back: etcd out of reach before their wave was "
                  "confirmed");
        w->sample(w->userdata, "clsd_fleet_reverts_total", NULL, 0, (double) f->reverts);
        w->family(w->userdata, "clsd_fleet_rollbacks_total", "counter",
                  "Revisions this node took back because their rollout halted or was aborted");
        w->sample(w->userdata, "clsd_fleet_rollbacks_total", NULL, 0, (double) f->rollbacks);
        if (f->n_rollouts == 0)
                return;
        w->family(w->userdata, "clsd_fleet_rollout_wave", "gauge",
                  "A rollout's current wave (1-based), with this node's own as the wave label (0: not in "
                  "the plan)");
        for (size_t i = 0; i < f->n_rollouts; i++) {
                const DaemonFleetRollout *r = &f->rollouts[i];
                char mine[16];
                snprintf(mine, sizeof(mine), "%d", r->wave + 1);
                w->sample(w->userdata, "clsd_fleet_rollout_wave",
                          (const char *const[]){ "policy", r->policy, "rollout", r->id, "node_wave", mine },
                          3, r->n_waves ? (double) r->current_wave + 1 : 0);
        }
        w->family(w->userdata, "clsd_fleet_rollout_state", "gauge",
                  "1 for a rollout's state (progressing, paused, halted, aborted, done) and this node's "
                  "step in it");
        for (size_t i = 0; i < f->n_rollouts; i++) {
                const DaemonFleetRollout *r = &f->rollouts[i];
                w->sample(w->userdata, "clsd_fleet_rollout_state",
                          (const char *const[]){ "policy", r->policy, "rollout", r->id, "state", r->phase,
                                                 "step", r->step },
                          4, 1);
        }
}

/* Each fleet policy that selects this node: what it is here (its state), which revision etcd asks for,
 * which one the kernel holds and which one the node committed, and its interfaces by state. */
static void emit_fleet_policies(const DaemonFleet *f, const MetricWriter *w) {
        static const char *const kinds[] = { "asked", "held", "committed" };

        if (f->n_policies == 0)
                return;
        w->family(w->userdata, "clsd_fleet_policy_state", "gauge",
                  "1 for what a fleet policy is on this node (applied, pending, waiting, failed, conflict, "
                  "overridden, unmatched, reverted, rolled-back, halted, aborted, superseded, ineligible)");
        for (size_t i = 0; i < f->n_policies; i++)
                w->sample(w->userdata, "clsd_fleet_policy_state",
                          (const char *const[]){ "policy", f->policies[i].policy, "state",
                                                 f->policies[i].state },
                          2, 1);
        w->family(w->userdata, "clsd_fleet_policy_revision", "gauge",
                  "A fleet policy's revision on this node: the one etcd asks for (asked), the one whose "
                  "filters "
                  "the kernel holds (held) and the last one this node committed (committed); 0: none");
        for (size_t i = 0; i < f->n_policies; i++) {
                const DaemonFleetPolicy *p = &f->policies[i];
                const uint64_t v[] = { p->revision, p->held, p->committed };
                for (size_t k = 0; k < ELEMENTSOF(kinds); k++)
                        w->sample(w->userdata, "clsd_fleet_policy_revision",
                                  (const char *const[]){ "policy", p->policy, "revision", kinds[k] }, 2,
                                  (double) v[k]);
        }
        w->family(w->userdata, "clsd_fleet_policy_interfaces", "gauge",
                  "The interfaces a fleet policy matches on this node, by its state on each (configured, "
                  "pending, failed, conflict, overridden)");
        for (size_t i = 0; i < f->n_policies; i++)
                for (PolicyIfaceState x = 0; x < _POLICY_IFACE_STATE_MAX; x++)
                        w->sample(w->userdata, "clsd_fleet_policy_interfaces",
                                  (const char *const[]){ "policy", f->policies[i].policy, "state",
                                                         policy_iface_state_to_string(x) },
                                  2, (double) f->policies[i].interfaces[x]);
}

/* clsd --fleet: the connection to etcd and what it applied. */
static void emit_fleet(Manager *d, const MetricWriter *w) {
        const DaemonFleet *f = daemon_fleet(d);
        size_t n = 0;

        for (size_t i = 0; i < d->policies.n; i++)
                n += d->policies.v[i]->fleet_revision > 0;
        w->family(w->userdata, "clsd_fleet_connected", "gauge",
                  "1 while etcd answers, the node's lease is held and the watch of fleet policies runs");
        w->sample(w->userdata, "clsd_fleet_connected",
                  (const char *const[]){ "node", f->node, "endpoint", f->endpoint }, 2, f->connected);
        w->family(w->userdata, "clsd_fleet_revision", "gauge",
                  "The etcd revision of the fleet snapshot this node applied (kept across restarts)");
        w->sample(w->userdata, "clsd_fleet_revision", NULL, 0, (double) f->revision);
        w->family(w->userdata, "clsd_fleet_seen_revision", "gauge", "The last etcd revision this node read");
        w->sample(w->userdata, "clsd_fleet_seen_revision", NULL, 0, (double) f->seen_revision);
        w->family(w->userdata, "clsd_fleet_policies", "gauge", "Fleet policies this node holds");
        w->sample(w->userdata, "clsd_fleet_policies", NULL, 0, (double) n);
        w->family(w->userdata, "clsd_fleet_changes_total", "counter",
                  "Fleet policies applied or removed here");
        w->sample(w->userdata, "clsd_fleet_changes_total", NULL, 0, (double) f->changes);
        w->family(w->userdata, "clsd_fleet_requests_total", "counter",
                  "Requests made to etcd (a watch stream counts once)");
        w->sample(w->userdata, "clsd_fleet_requests_total", NULL, 0, (double) f->requests);
        w->family(w->userdata, "clsd_fleet_foreign_writes_total", "counter",
                  "This node's record and status keys that another writer changed, deleted or added, put "
                  "right again");
        w->sample(w->userdata, "clsd_fleet_foreign_writes_total", NULL, 0, (double) f->foreign_keys);
        w->family(w->userdata, "clsd_fleet_busy_answers_total", "counter",
                  "etcd's answers that it is busy (too many requests, no leader, no answer in time): each "
                  "such call is sent again later, spaced, on the same connection");
        w->sample(w->userdata, "clsd_fleet_busy_answers_total", NULL, 0, (double) f->busy_answers);
        w->family(w->userdata, "clsd_fleet_retries_total", "counter",
                  "Calls to etcd sent again after it was busy");
        w->sample(w->userdata, "clsd_fleet_retries_total", NULL, 0, (double) f->retries);
        w->family(w->userdata, "clsd_fleet_busy_failures_total", "counter",
                  "Calls etcd stayed busy for past the client's retries: done again later, the connection "
                  "kept");
        w->sample(w->userdata, "clsd_fleet_busy_failures_total", NULL, 0, (double) f->busy_failures);
        w->family(w->userdata, "clsd_fleet_watch_restarts_total", "counter",
                  "Watch streams begun again (ended, or their watches slow to come), the connection kept");
        w->sample(w->userdata, "clsd_fleet_watch_restarts_total", NULL, 0, (double) f->stream_restarts);
        w->family(w->userdata, "clsd_fleet_lease_renewals_total", "counter",
                  "New leases after etcd lost the node's (it expired while etcd was busy or out of reach)");
        w->sample(w->userdata, "clsd_fleet_lease_renewals_total", NULL, 0, (double) f->lease_renewals);
        w->family(w->userdata, "clsd_fleet_lease_ttl_seconds", "gauge",
                  "The node's lease as etcd granted it: longer in a larger fleet, and after leases etcd let "
                  "expire while busy (a third of it between keepalives)");
        w->sample(w->userdata, "clsd_fleet_lease_ttl_seconds", NULL, 0, (double) f->lease_ttl);
        w->family(w->userdata, "clsd_fleet_authentications_total", "counter",
                  "Logins to etcd (a token is kept until etcd no longer knows it)");
        w->sample(w->userdata, "clsd_fleet_authentications_total", NULL, 0, (double) f->authentications);
        w->family(w->userdata, "clsd_fleet_lists_total", "counter",
                  "The fleet's policies and rollouts read whole: at the start, and after a compaction took "
                  "what a watch would resume from");
        w->sample(w->userdata, "clsd_fleet_lists_total", NULL, 0, (double) f->lists);
        w->family(w->userdata, "clsd_fleet_status_writes_total", "counter",
                  "Requests that wrote this node's record or statuses (one transaction for what changed)");
        w->sample(w->userdata, "clsd_fleet_status_writes_total", NULL, 0, (double) f->status_writes);
        w->family(w->userdata, "clsd_fleet_reconnects_total", "counter",
                  "Connections to etcd made again after one was lost");
        w->sample(w->userdata, "clsd_fleet_reconnects_total", NULL, 0, (double) f->reconnects);
        emit_rollouts(f, w);
        emit_fleet_policies(f, w);
}

/* The request queue, the workers and what clsd asked of rtnetlink. */
static void emit_work(Manager *d, const MetricWriter *w) {
        NlRequestCounts nc = nl_request_counts();

        w->family(w->userdata, "clsd_requests_merged_total", "counter",
                  "Reasons to reconcile an interface that joined a request already queued for it");
        w->sample(w->userdata, "clsd_requests_merged_total", NULL, 0,
                  (double) request_queue_merged(d->queue));
        w->family(w->userdata, "clsd_request_queue_length", "gauge", "Interfaces with work queued");
        w->sample(w->userdata, "clsd_request_queue_length", NULL, 0,
                  (double) request_queue_length(d->queue));
        w->family(w->userdata, "clsd_worker_jobs_total", "counter",
                  "Objects inspected and programs loaded by worker processes");
        w->sample(w->userdata, "clsd_worker_jobs_total", NULL, 0, (double) workers_jobs(d->workers));
        w->family(w->userdata, "clsd_image_pulls_total", "counter",
                  "Images pulled from registries (objects named oci://), since clsd started");
        w->sample(w->userdata, "clsd_image_pulls_total", NULL, 0, (double) d->counters.pulls);
        w->family(w->userdata, "clsd_image_pull_failures_total", "counter",
                  "Pulls that failed (the registry's reason is in the change's error and the log)");
        w->sample(w->userdata, "clsd_image_pull_failures_total", NULL, 0,
                  (double) d->counters.pull_failures);
        w->family(w->userdata, "clsd_worker_crashes_total", "counter",
                  "Workers that died of the object they were given (clsd went on)");
        w->sample(w->userdata, "clsd_worker_crashes_total", NULL, 0, (double) workers_crashes(d->workers));
        w->family(
                w->userdata, "clsd_worker_killed_total", "counter",
                "Workers ended by a signal, by its name (SIGSYS: the inspection's sandbox refused a system "
                "call, which clsd's log names)");
        for (int sig = 1; sig < WORKER_SIGNALS_MAX; sig++) {
                uint64_t n = workers_killed(d->workers, sig);
                const char *name = sigabbrev_np(sig);
                char buf[16];
                /* the signals a worker is seen to die of are there from the start; others once counted */
                if (!n && sig != SIGSYS && sig != SIGSEGV && sig != SIGABRT && sig != SIGBUS &&
                    sig != SIGKILL)
                        continue;
                if (name)
                        snprintf(buf, sizeof(buf), "SIG%s", name);
                else
                        snprintf(buf, sizeof(buf), "%d", sig);
                w->sample(w->userdata, "clsd_worker_killed_total", (const char *const[]){ "signal", buf }, 1,
                          (double) n);
        }
        w->family(w->userdata, "clsd_worker_spares_used_total", "counter",
                  "Jobs taken by a spare worker, started before the job (no exec waited for)");
        w->sample(w->userdata, "clsd_worker_spares_used_total", NULL, 0,
                  (double) workers_spares_used(d->workers));
        w->family(w->userdata, "clsd_worker_spare_ready", "gauge", "1 while a spare worker waits for a job");
        w->sample(w->userdata, "clsd_worker_spare_ready", NULL, 0, workers_spare_ready(d->workers) ? 1 : 0);
        w->family(w->userdata, "clsd_netlink_requests_total", "counter",
                  "Requests clsd sent to rtnetlink, by type (dump: a whole table read; other: a get or a "
                  "change)");
        w->sample(w->userdata, "clsd_netlink_requests_total", (const char *const[]){ "type", "dump" }, 1,
                  (double) nc.dumps);
        w->sample(w->userdata, "clsd_netlink_requests_total", (const char *const[]){ "type", "other" }, 1,
                  (double) nc.others);
        w->family(w->userdata, "clsd_netlink_sends_total", "counter",
                  "sendmsg calls to rtnetlink: a request each, or two in one (a clsact qdisc with the "
                  "filter it carries)");
        w->sample(w->userdata, "clsd_netlink_sends_total", NULL, 0, (double) nc.sends);
}

/* The interfaces each policy matches, by state. */
static void emit_policies(Manager *d, const MetricWriter *w) {
        w->family(w->userdata, "clsd_policy_interfaces", "gauge",
                  "Interfaces each policy matches, by their state");
        for (size_t i = 0; i < d->policies.n; i++) {
                const Policy *p = d->policies.v[i];
                size_t n[_IFACE_STATE_MAX] = { 0 };
                for (size_t k = 0; k < iface_table_size(d->ifaces); k++) {
                        const Iface *it = iface_table_at(d->ifaces, k);
                        if (it->visible && iface_has_policy(it, p))
                                n[it->state]++;
                }
                for (IfaceState s = 0; s < _IFACE_STATE_MAX; s++)
                        w->sample(w->userdata, "clsd_policy_interfaces",
                                  (const char *const[]){ "policy", p->name, "state",
                                                         iface_state_to_string(s) },
                                  2, (double) n[s]);
        }
}

static void emit_own(Manager *d, const MetricWriter *w) {
        size_t n_ifaces;
        Iface *const *ifaces = daemon_ifaces(d, &n_ifaces);
        const DaemonCounters *c = &d->counters;
        size_t by_state[_IFACE_STATE_MAX][_SOURCE_MAX] = { { 0 } };

        w->family(w->userdata, "clsd_build_info", "gauge",
                  "clsd's version, the libbpf it runs with, the kernel");
        w->sample(w->userdata, "clsd_build_info",
                  (const char *const[]){ "version", PROJECT_VERSION, "libbpf", nl_libbpf_version(), "kernel",
                                         d->kernel.kernel_release },
                  3, 1);
        w->family(w->userdata, "clsd_reconciles_total", "counter", "Interface reconciles run");
        w->sample(w->userdata, "clsd_reconciles_total", NULL, 0, (double) c->reconciles);
        w->family(w->userdata, "clsd_repairs_total", "counter",
                  "Drift repaired: the kernel differed from a document it had matched");
        w->sample(w->userdata, "clsd_repairs_total", NULL, 0, (double) c->repairs);
        w->family(w->userdata, "clsd_errors_total", "counter",
                  "Failed reconciles and requests, by error code");
        for (size_t i = 0; i < c->n_errors; i++)
                w->sample(w->userdata, "clsd_errors_total",
                          (const char *const[]){ "code", error_code_to_string(c->errors[i].code) }, 1,
                          (double) c->errors[i].n);
        for (size_t i = 0; i < n_ifaces; i++) {
                const Iface *it = ifaces[i];
                by_state[it->state][iface_source(it)]++;
        }
        w->family(w->userdata, "clsd_documents", "gauge", "Documents by state and source");
        for (IfaceState s = 0; s < _IFACE_STATE_MAX; s++)
                for (DocumentSource src = 0; src < _SOURCE_MAX; src++)
                        w->sample(w->userdata, "clsd_documents",
                                  (const char *const[]){ "state", iface_state_to_string(s), "source",
                                                         document_source_to_string(src) },
                                  2, (double) by_state[s][src]);
        w->family(w->userdata, "clsd_bpf_stats_enabled", "gauge",
                  "1 while clsd holds BPF_ENABLE_STATS (--bpf-stats): run counts and times are counted");
        w->sample(w->userdata, "clsd_bpf_stats_enabled", NULL, 0, d->kernel.bpf_stats_fd >= 0);
        w->family(w->userdata, "clsd_repair_loops_total", "counter",
                  "Repairs that came so fast that clsd backed off: another program fights it over a hook");
        w->sample(w->userdata, "clsd_repair_loops_total", NULL, 0, (double) c->repair_loops);
        emit_work(d, w);
        emit_policies(d, w);
        if (daemon_fleet(d)->enabled)
                emit_fleet(d, w);
}

static void emit_filters(Manager *d, const MetricWriter *w, IfaceStatus *st) {
        size_t n_ifaces;
        Iface *const *ifaces = daemon_ifaces(d, &n_ifaces);
        static const char *const names[] = { "clsd_filter_attached", "clsd_filter_run_count_total",
                                             "clsd_filter_run_time_seconds_total" };
        static const char *const types[] = { "gauge", "counter", "counter" };
        static const char *const helps[] = {
                "1 when the filter is attached as its document asks (read back from the kernel)",
                "Times the filter's program ran (counted while --bpf-stats is on)",
                "Time the filter's program ran (counted while --bpf-stats is on)",
        };

        size_t n = 0;
        bool counted = false;

        for (size_t i = 0; i < n_ifaces; i++) {
                n += ifaces[i]->n_filters;
                for (size_t k = 0; k < st[i].n_filters && !counted; k++)
                        counted = st[i].filters[k].has_stats;
        }
        /* with run counts, each filter's labels are written out once for its three families */
        _cleanup_free_ const void **sets = counted && w->label_set ? calloc(n + 1, sizeof(void *)) : NULL;
        for (int m = 0; m < 3; m++) {
                size_t j = 0;
                w->family(w->userdata, names[m], types[m], helps[m]);
                for (size_t i = 0; i < n_ifaces; i++) {
                        const Iface *it = ifaces[i];
                        for (size_t k = 0; k < it->n_filters; k++, j++) {
                                const Filter *f = &it->filters[k];
                                const FilterStatus *fs = k < st[i].n_filters ? &st[i].filters[k] : NULL;
                                const char *v[2 * (FILTER_LABELS + 2)];
                                char pref[8];
                                double x;

                                if (m > 0 && (!fs || !fs->observed.classifier_attached || !fs->has_stats))
                                        continue;
                                x = m == 0   ? (fs && fs->observed.attached)
                                    : m == 1 ? (double) fs->run_count
                                             : (double) fs->run_time_ns / 1e9;
                                if (sets && sets[j]) {
                                        w->sample_set(w->userdata, names[m], sets[j], x);
                                        continue;
                                }
                                size_t nl = metric_filter_labels(it, f, pref, v);
                                v[2 * nl] = "pref", v[2 * nl + 1] = pref;
                                v[2 * nl + 2] = "attach", v[2 * nl + 3] = filter_attach(f);
                                if (sets && (sets[j] = w->label_set(w->userdata, v, nl + 2))) {
                                        w->sample_set(w->userdata, names[m], sets[j], x);
                                        continue;
                                }
                                w->sample(w->userdata, names[m], v, nl + 2, x);
                        }
                }
        }
}

/* Each act_bpf action of a filter: whether it is in place, and what the kernel counted through it. */
static void emit_actions(Manager *d, const MetricWriter *w, IfaceStatus *st) {
        size_t n_ifaces;
        Iface *const *ifaces = daemon_ifaces(d, &n_ifaces);
        static const char *const names[] = { "clsd_action_attached", "clsd_action_packets_total",
                                             "clsd_action_bytes_total", "clsd_action_drops_total" };
        static const char *const types[] = { "gauge", "counter", "counter", "counter" };
        static const char *const helps[] = {
                "1 when the filter's act_bpf action runs its program (read back from the kernel)",
                "Packets through the act_bpf action (the kernel's count)",
                "Bytes through the act_bpf action (the kernel's count)",
                "Packets the act_bpf action dropped (the kernel's count)",
        };
        bool any = false;

        for (size_t i = 0; i < n_ifaces && !any; i++)
                any = iface_uses_actions(ifaces[i]);
        if (!any)
                return;
        for (int m = 0; m < 4; m++) {
                w->family(w->userdata, names[m], types[m], helps[m]);
                for (size_t i = 0; i < n_ifaces; i++) {
                        const Iface *it = ifaces[i];
                        for (size_t k = 0; k < it->n_filters; k++) {
                                const Filter *f = &it->filters[k];
                                for (size_t a = 0; a < f->spec->n_actions; a++) {
                                        const ActionObserved *as =
                                                k < st[i].n_filters ? &st[i].filters[k].observed.actions[a]
                                                                    : NULL;
                                        const char *v[2 * (FILTER_LABELS + 2)];
                                        char pref[8], index[24];
                                        double x;

                                        size_t n = metric_filter_labels(it, f, pref, v);
                                        snprintf(index, sizeof(index), "%zu", a + 1);
                                        v[2 * n] = "action", v[2 * n + 1] = index;
                                        v[2 * n + 2] = "program", v[2 * n + 3] = f->spec->actions[a].program;
                                        if (m > 0 && (!as || !as->attached))
                                                continue;
                                        x = m == 0   ? (as && as->attached)
                                            : m == 1 ? (double) as->packets
                                            : m == 2 ? (double) as->bytes
                                                     : (double) as->drops;
                                        w->sample(w->userdata, names[m], v, n + 2, x);
                                }
                        }
                }
        }
}

int daemon_metrics(Manager *d, const MetricWriter *w) {
        size_t n_ifaces;
        Iface *const *ifaces = daemon_ifaces(d, &n_ifaces);
        size_t n = n_ifaces;
        _cleanup_free_ IfaceStatus *st = calloc(n + 1, sizeof(IfaceStatus));

        DaemonMaps maps = { 0 };

        if (!st)
                return -ENOMEM;
        emit_own(d, w);
        for (size_t i = 0; i < n; i++) {
                const Iface *it = ifaces[i];
                Error e = ERROR_NULL;
                if (daemon_iface_status(d, it, &st[i], &e) < 0) {
                        error_done(&e);
                        continue;
                }
                bool metrics = false;
                for (size_t k = 0; k < it->n_filters && !metrics; k++)
                        metrics = it->filters[k].spec->n_metrics > 0;
                if (!metrics)
                        continue; /* no map-derived metrics: its maps are not looked at */
                if (daemon_maps_add(d, it, &st[i], &maps, &e) < 0) {
                        d->counters.map_metric_failures++;
                        log_debug("%s: maps: %s", it->ifname, strna(e.message));
                        error_done(&e);
                }
        }
        emit_filters(d, w, st);
        emit_actions(d, w, st);
        map_metrics_emit(d, w, &maps);
        daemon_maps_done(&maps);
        /* after the map metrics, so that this scrape's failures are in it */
        w->family(w->userdata, "clsd_map_metric_failures_total", "counter",
                  "Map-derived metrics left out of a scrape (a field the map does not have, a map that "
                  "cannot be read)");
        w->sample(w->userdata, "clsd_map_metric_failures_total", NULL, 0,
                  (double) d->counters.map_metric_failures);
        for (size_t i = 0; i < n; i++)
                iface_status_done(&st[i]);
        return 0;
}
