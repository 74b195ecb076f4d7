/* daemon.c: the daemon made, started and reloaded: every part of the Manager made and wired (store,
 * interfaces, namespaces and links, registry and loads, objects, queue and workers, policies,
 * configuration maps, views), then at start the kernel probed, the store's objects, documents,
 * policies and hogs read, the events followed, the first reconcile of everything queued and READY said
 * once it is done; SIGHUP's keys and hogs read again. The one file that sees every part. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "events.h"
#include "hogs.h"
#include "loads.h"
#include "log.h"
#include "manager.h"
#include "map-config.h"
#include "uploads.h"
#include "policy-match.h"
#include "reconcile.h"
#include "tcx-pins.h"
#include "object-trust.h"
#include "views.h"
#include "daemon-fleet.h"
#include "nl-map.h"
#include "nl-tcx.h"
#include "store-policy.h"

/* Every interface composed again (the filters of what is revoked leave, of what is trusted again come
 * back) and reconciled, in its turn behind its other changes. */
static void ifaces_recompose(Manager *m) {
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                if (it->visible)
                        policies_recompose(m, it);
        }
}

int daemon_new(const DaemonConfig *config, sd_event *event, Manager **ret, Error *reterr) {
        _cleanup_(daemon_freep) Manager *m = calloc(1, sizeof(*m));
        struct utsname u;
        int r;

        if (!m)
                return error_oom(reterr);
        m->config = *config;
        m->trust.keys = config->trusted_keys;
        m->trust.on_trusted_again = ifaces_recompose;
        m->event = sd_event_ref(event);
        m->kernel.bpf_stats_fd = -1;
        if (uname(&u) >= 0)
                snprintf(m->kernel.kernel_release, sizeof(m->kernel.kernel_release), "%s", u.release);
        r = store_open(config->state_dir, &m->store, reterr);
        if (r < 0)
                return r;
        (void) store_fleet_revision_load(m->store, &m->fleet.revision);
        m->fleet.none.revision = m->fleet.revision;
        if (iface_table_new(&m->ifaces) < 0 || object_cache_new(&m->objects) < 0 ||
            loads_new(&m->loads) < 0 || links_new(&m->links) < 0 || views_new(&m->views) < 0 ||
            map_config_new(&m->map_config) < 0 ||
            request_queue_new(event, m, reconcile_process_request, &m->queue) < 0 ||
            workers_new(event, config->worker_exe ?: "/proc/self/exe", &m->workers) < 0)
                return error_oom(reterr);
        r = netns_set_new(event, config->netns_dir, events_on_netns_event, events_on_netns_change, m,
                          &m->netns, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

Manager *daemon_free(Manager *m) {
        if (!m)
                return NULL;
        /* Exiting is not releasing: the fd store entries and pins stay for the next start. */
        if (m->registry)
                registry_exiting(m->registry);
        /* The interfaces and the changes under way first: a change stopped by the exit (a slow PUT, then
         * SIGTERM) still tells the loads, the workers and the pulls it waits no more. */
        while (m->ifaces && iface_table_size(m->ifaces) > 0) {
                Iface *it = iface_table_at(m->ifaces, iface_table_size(m->ifaces) - 1);
                request_queue_drop(m->queue, it);
                while (it->ops) {
                        Operation *op = it->ops;
                        it->ops = op->next;
                        op->free(op);
                }
                iface_table_remove(m->ifaces, it);
                iface_free(it, m->registry);
        }
        loads_free(m->loads);
        policy_set_clear(&m->policies);
        sd_event_source_disable_unref(m->listeners.status_source);
        links_free(m->links);
        views_free(m->views);
        workers_free(m->workers);
        request_queue_free(m->queue);
        iface_table_free(m->ifaces);
        object_cache_free(m->objects);
        registry_free(m->registry, true);
        netns_set_free(m->netns);
        sd_event_source_disable_unref(m->resync_source);
        sd_event_source_disable_unref(m->start.post);
        store_free(m->store);
        trusted_keys_free(m->trust.owned);
        map_config_free(m->map_config);
        safe_close(m->kernel.bpf_stats_fd);
        free(m->listeners.v);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

uint64_t daemon_fleet_revision(Manager *m) {
        return m->fleet.revision;
}

int daemon_fleet_applied(Manager *m, uint64_t revision, Error *reterr) {
        int r;

        if (m->fleet.revision == revision)
                return 0;
        r = store_fleet_revision_save(m->store, revision, reterr);
        if (r < 0)
                return r;
        m->fleet.revision = m->fleet.none.revision = revision;
        return 0;
}

int daemon_fleet_keep_save(Manager *m, json_t *keep, Error *reterr) {
        return store_fleet_keep_save(m->store, keep, reterr);
}

json_t *daemon_fleet_keep_load(Manager *m) {
        json_t *j = NULL;
        return store_fleet_keep_load(m->store, &j) >= 0 ? j : NULL;
}

/* The documents of the store become interfaces (resolved against the objects the store has). */
static int load_documents(Manager *m, StoreLoad *load, Error *reterr) {
        StoredDocument *docs = NULL;
        size_t n = 0;
        int r;

        r = store_documents_load_end(load, &docs, &n, manager_store_problem, m, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                Document *d = docs[i].doc;
                Iface *it = NULL;
                if (iface_new(d->netns, d->ifname, &it) < 0 || iface_table_reserve(m->ifaces) < 0 ||
                    iface_set_documents(it, d, &docs[i].facts, NULL, NULL, NULL, m->kernel.tcx,
                                        m->registry) < 0) {
                        iface_free(it, m->registry);
                        stored_documents_free(docs, n);
                        return error_oom(reterr);
                }
                if (iface_table_get(m->ifaces, d->netns, d->ifname)) {
                        iface_free(it, m->registry);
                        continue;
                }
                it->visible = true;
                /* Its first reconcile reads the hooks it uses; the periodic resync reads them all. */
                it->fresh = true;
                iface_table_touch(m->ifaces);
                iface_table_add(m->ifaces, it);
        }
        stored_documents_free(docs, n);
        return 0;
}

static void check_started(Manager *m) {
        if (m->start.done || !request_queue_idle(m->queue))
                return;
        m->start.done = true;
        m->start.post = sd_event_source_disable_unref(m->start.post);
        /* A document whose interface is absent keeps the programs (and maps) the last run kept. */
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                bool kept = false;
                if (it->state != IFACE_PENDING || it->programs_held)
                        continue;
                for (size_t k = 0; k < it->n_filters; k++)
                        for (int a = -1; a < (int) it->filters[k].spec->n_actions; a++) {
                                ProgramRef ref = program_ref(it->filters[k].spec, a, &it->filters[k].fact,
                                                             it->filters[k].instance);
                                kept = kept || registry_kept(m->registry, &ref);
                        }
                if (!kept)
                        continue;
                for (size_t k = 0; k < it->n_filters; k++) {
                        Filter *f = &it->filters[k];
                        for (int a = -1; a < (int) f->spec->n_actions; a++) {
                                ProgramRef ref = program_ref(f->spec, a, &f->fact, f->instance);
                                Program **slot = a < 0 ? &f->program : &f->actions[a];
                                if (!*slot)
                                        (void) registry_acquire(m->registry, &ref, 0, slot, NULL);
                        }
                }
        }
        registry_settle(m->registry);
        size_t failed = 0;
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++)
                failed += iface_table_at(m->ifaces, i)->state == IFACE_FAILED;
        log_info("started: %zu document(s), %zu object(s), %zu failed", daemon_iface_count(m),
                 object_cache_size(m->objects), failed);
        daemon_notify_status(m);
        if (m->start.ready)
                m->start.ready(m, m->start.userdata);
}

static int on_started_check(sd_event_source *s, void *userdata) {
        Manager *m = userdata;

        (void) s;
        check_started(m);
        return 0;
}

int daemon_start(Manager *m, DaemonReadyFunc ready, void *userdata, Error *reterr) {
        const LinkEntry *links;
        size_t n_links;
        StoreLoad *load;
        int r;

        /* The store's documents are read and parsed on a thread while this one probes the kernel,
         * subscribes to its events and dumps the links of its namespace (with a thousand documents,
         * each of the two is a third of a start). */
        r = store_documents_load_begin(m->store, SOURCE_API, &load, reterr);
        if (r < 0)
                return r;
        m->start.ready = ready;
        m->start.userdata = userdata;
        (void) nl_act_bpf_probe(netns_set_rtnl_followed(m->netns, NULL), &m->kernel.act_bpf);
        log_info("act_bpf: %s",
                 m->kernel.act_bpf ? "available" : "unavailable (this kernel has no CONFIG_NET_ACT_BPF)");
        (void) nl_tcx_probe(&m->kernel.tcx);
        log_info("tcx: %s", m->kernel.tcx ? "available" : "unavailable (Linux 6.6+ has it)");
        if (m->config.bpf_stats) {
                _cleanup_error_ Error e = ERROR_NULL;
                /* Counting costs every program two clock reads per run: on only when asked for. */
                if (nl_bpf_stats_enable(&m->kernel.bpf_stats_fd, &e) < 0)
                        log_warning("--bpf-stats: %s; run counts and times stay 0", strna(e.message));
                else
                        log_info("bpf stats: on (BPF_ENABLE_STATS held)");
        }
        if (m->kernel.tcx)
                tcx_sweep(m->config.bpffs_dir, m->config.netns_dir);
        r = registry_new(m->config.bpffs_dir, m->config.passed, m->config.n_passed, &m->registry);
        m->config.passed = NULL, m->config.n_passed = 0;
        if (r < 0)
                r = error_set(reterr, r, ERROR_INTERNAL_ERROR, "out of memory");
        else if ((r = objects_load(m)) < 0)
                r = error_set(reterr, r, ERROR_STORE_ERROR, "cannot load objects: %s", strerror(-r));
        else
                /* Subscribed before the dump, so that no change falls between the two. */
                r = netns_set_start(m->netns, reterr);
        if (r < 0) {
                StoredDocument *docs = NULL;
                size_t n = 0;
                if (store_documents_load_end(load, &docs, &n, manager_store_problem, m, NULL) >= 0)
                        stored_documents_free(docs, n);
                return r;
        }
        (void) links_get(m->links, netns_set_rtnl_followed(m->netns, NULL), NULL, false, &links, &n_links,
                         NULL);
        r = load_documents(m, load, reterr);
        if (r < 0)
                return r;
        r = store_policies_load(m->store, &m->policies.v, &m->policies.n, manager_store_problem, NULL,
                                reterr);
        if (r < 0)
                return r;
        if (m->policies.n > 0)
                log_info("%zu polic%s", m->policies.n, m->policies.n == 1 ? "y" : "ies");
        r = hogs_load(m);
        if (r < 0)
                return error_set(reterr, r, ERROR_INTERNAL_ERROR, "cannot load hogs: %s", strerror(-r));
        r = map_config_load(m, reterr);
        if (r < 0)
                return r;
        r = daemon_add_change_listener(m, map_config_on_change, m);
        if (r < 0)
                return error_oom(reterr);
        r = events_resync_start(m, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++)
                request_queue_reconcile(m->queue, iface_table_at(m->ifaces, i), REASON_START);
        policies_start(m);
        /* Ready once the queue has run dry the first time: checked after each turn of the loop that
         * dispatched something, and once at the first (when there is nothing to do, nothing else runs). */
        r = sd_event_add_post(m->event, &m->start.post, on_started_check, m);
        if (r < 0 || (r = sd_event_add_defer(m->event, NULL, on_started_check, m)) < 0)
                return error_set(reterr, r, ERROR_INTERNAL_ERROR, "cannot watch the queue: %s",
                                 strerror(-r));
        return 0;
}

void daemon_set_registries(Manager *m, const struct OciRegistries *registries) {
        m->config.registries = registries;
}

void daemon_reload(Manager *m) {
        /* the keys before the hogs: a hog's object is verified with the keys read now */
        if (trust_reload(m) > 0)
                ifaces_recompose(m);
        (void) hogs_reload(m);
        daemon_reconcile_all(m);
}
