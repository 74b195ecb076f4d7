/* manager.c: the Manager: its parts made and wired at start (store, interfaces, namespaces, registry,
 * objects, queue, workers), the first reconcile of every document queued, READY once it is done; and
 * what the faces read of it: interfaces, links, namespaces, kernel features, counters, STATUS=. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "attach.h"
#include "log.h"
#include "manager.h"

int daemon_new(const DaemonConfig *config, sd_event *event, Manager **ret, Error *reterr) {
        _cleanup_(daemon_freep) Manager *m = calloc(1, sizeof(*m));
        struct utsname u;
        int r;

        if (!m)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        m->config = *config;
        m->trusted = config->trusted_keys;
        m->event = sd_event_ref(event);
        m->kernel.bpf_stats_fd = -1;
        if (uname(&u) >= 0)
                snprintf(m->kernel.kernel_release, sizeof(m->kernel.kernel_release), "%s", u.release);
        r = store_open(config->state_dir, &m->store, reterr);
        if (r < 0)
                return r;
        (void) store_fleet_revision_load(m->store, &m->fleet.revision);
        if (iface_table_new(&m->ifaces) < 0 || object_cache_new(&m->objects) < 0 ||
            loads_new(&m->loads) < 0 || links_new(&m->links) < 0 ||
            request_queue_new(event, m, manager_process_request, &m->queue) < 0 ||
            workers_new(event, config->worker_exe ?: "/proc/self/exe", &m->workers) < 0)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        r = netns_set_new(event, config->netns_dir, manager_on_netns_event, manager_on_netns_change, m,
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
        loads_free(m->loads);
        manager_policies_free(m);
        sd_event_source_disable_unref(m->status_source);
        links_free(m->links);
        free(m->visible.list);
        workers_free(m->workers);
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
        request_queue_free(m->queue);
        iface_table_free(m->ifaces);
        object_cache_free(m->objects);
        registry_free(m->registry, true);
        netns_set_free(m->netns);
        sd_event_source_disable_unref(m->resync_source);
        sd_event_source_disable_unref(m->start.post);
        store_free(m->store);
        trusted_keys_free(m->trusted_owned);
        json_decref(m->map_entries);
        safe_close(m->kernel.bpf_stats_fd);
        free(m->listeners);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

/* ---- what the faces read ---- */

DaemonFleet *daemon_fleet(Manager *m) {
        return &m->fleet;
}

int daemon_fleet_applied(Manager *m, uint64_t revision, Error *reterr) {
        int r;

        if (m->fleet.revision == revision)
                return 0;
        r = store_fleet_revision_save(m->store, revision, reterr);
        if (r < 0)
                return r;
        m->fleet.revision = revision;
        return 0;
}

bool daemon_bpf_stats(Manager *m) {
        return m->kernel.bpf_stats_fd >= 0;
}

/* Whether run counts mean anything: clsd holds BPF_ENABLE_STATS, or someone does (the sysctl shows
 * it on). Read once per turn of the loop. */
static bool stats_counting(Manager *m, uint64_t now) {
        char buf[4] = "";

        if (m->kernel.bpf_stats_fd >= 0)
                return true;
        if (m->counting.usec != now || now == 0) {
                _cleanup_close_ int fd = open("/proc/sys/kernel/bpf_stats_enabled", O_RDONLY | O_CLOEXEC);
                m->counting.on = fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0 && buf[0] == '1';
                m->counting.usec = now;
        }
        return m->counting.on;
}

bool daemon_has_act_bpf(Manager *m) {
        return m->kernel.act_bpf;
}

bool daemon_has_tcx(Manager *m) {
        return m->kernel.tcx;
}

const char *daemon_kernel_release(Manager *m) {
        return m->kernel.kernel_release;
}

const DaemonCounters *daemon_counters(Manager *m) {
        m->counters.requests_merged = request_queue_merged(m->queue);
        m->counters.worker_crashes = workers_crashes(m->workers);
        return &m->counters;
}

size_t daemon_queue_length(Manager *m) {
        return request_queue_length(m->queue);
}

size_t daemon_workers_running(Manager *m) {
        return workers_running(m->workers);
}

/* The faces see the interfaces a document (or hog) was stored for: a change in flight for a new one
 * shows only once it is stored. */
/* The visible interfaces in the table's order, made again when the table changed: the faces walk
 * them with daemon_iface_at() in O(1) each. */
static void visible_index(Manager *m) {
        uint64_t v = iface_table_version(m->ifaces) + 1; /* never 0: 0 is "not made yet" */
        size_t n = 0;

        if (m->visible.version == v)
                return;
        if (m->visible.capacity < iface_table_size(m->ifaces)) {
                size_t cap = iface_table_size(m->ifaces) * 2;
                Iface **list = realloc(m->visible.list, cap * sizeof(Iface *));
                if (!list) {
                        m->visible.n = 0;
                        m->visible.version = 0;
                        return;
                }
                m->visible.list = list;
                m->visible.capacity = cap;
        }
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                if (it->visible)
                        m->visible.list[n++] = it;
        }
        m->visible.n = n;
        m->visible.version = v;
}

size_t daemon_iface_count(Manager *m) {
        visible_index(m);
        return m->visible.n;
}

Iface *const *daemon_ifaces(Manager *m, size_t *ret_n) {
        visible_index(m);
        *ret_n = m->visible.n;
        return m->visible.list;
}

Iface *daemon_iface_at(Manager *m, size_t i) {
        visible_index(m);
        return i < m->visible.n ? m->visible.list[i] : NULL;
}

Iface *daemon_iface_get(Manager *m, const char *netns, const char *ifname) {
        Iface *it = iface_table_get(m->ifaces, netns, ifname);
        return it && it->visible ? it : NULL;
}

void error_counts_add(DaemonErrorCount *v, size_t *n, size_t max, const char *code) {
        if (!code)
                return;
        for (size_t i = 0; i < *n; i++)
                if (streq(v[i].code, code)) {
                        v[i].n++;
                        return;
                }
        if (*n < max)
                v[(*n)++] = (DaemonErrorCount){ .code = code, .n = 1 };
}

void daemon_count_error(Manager *m, const char *code) {
        error_counts_add(m->counters.errors, &m->counters.n_errors, ELEMENTSOF(m->counters.errors), code);
}

void daemon_remove_change_listener(Manager *m, DaemonChangeFunc f, void *userdata) {
        for (size_t i = 0; i < m->n_listeners; i++)
                if (m->listeners[i].f == f && m->listeners[i].userdata == userdata) {
                        memmove(m->listeners + i, m->listeners + i + 1,
                                (m->n_listeners - i - 1) * sizeof(ChangeListener));
                        m->n_listeners--;
                        return;
                }
}

int daemon_add_change_listener(Manager *m, DaemonChangeFunc f, void *userdata) {
        ChangeListener *v = realloc(m->listeners, (m->n_listeners + 1) * sizeof(*v));

        if (!v)
                return -ENOMEM;
        m->listeners = v;
        m->listeners[m->n_listeners++] = (ChangeListener){ .f = f, .userdata = userdata };
        return 0;
}

static int on_status(sd_event_source *s, void *userdata) {
        (void) s;
        daemon_notify_status(userdata);
        return 0;
}

void manager_changed(Manager *m, Iface *it, unsigned changes) {
        if (!it->visible && !(changes & IFACE_REMOVED))
                return;
        for (size_t i = 0; i < m->n_listeners; i++)
                m->listeners[i].f(m, it, changes, m->listeners[i].userdata);
        /* STATUS= counts every interface: once per turn of the loop, not once per change (a start over
         * N interfaces would count N times N). */
        if (changes & (IFACE_CHANGED_STATE | IFACE_ADDED | IFACE_REMOVED)) {
                if (!m->status_source && sd_event_add_defer(m->event, &m->status_source, on_status, m) < 0)
                        daemon_notify_status(m);
                else
                        (void) sd_event_source_set_enabled(m->status_source, SD_EVENT_ONESHOT);
        }
}

/* ---- what the parts need of each other ---- */

int manager_link(Manager *m, const char *netns, const char *ifname, NlSocket **ret_rtnl, NlLink *ret_link,
                 Error *reterr) {
        NlSocket *rtnl;
        int r;

        r = netns_set_rtnl(m->netns, netns, &rtnl, reterr);
        if (r == -EAGAIN)
                netns_set_rescan(m->netns);
        if (r == -ENOENT || r == -EAGAIN) {
                error_done(reterr);
                return -ENODEV; /* an absent namespace is like an absent interface: the document waits */
        }
        if (r < 0)
                return r;
        /* The namespace's links as events keep them (one dump the first time, then none). */
        const LinkEntry *all;
        size_t n_all;
        if (!links_known(m->links, netns))
                (void) links_get(m->links, rtnl, netns, false, &all, &n_all, NULL);
        const NlLink *known = links_find_name(m->links, netns, ifname);
        if (known) {
                *ret_link = *known;
                *ret_rtnl = rtnl;
                return 0;
        }
        r = nl_link_by_name(rtnl, ifname, ret_link, reterr);
        if (r == -ENODEV)
                error_done(reterr);
        if (r < 0)
                return r;
        *ret_rtnl = rtnl;
        return 0;
}

void manager_release_netns(Manager *m, const char *netns) {
        if (!netns || !netns_set_follows(m->netns, netns) || manager_policies_want_netns(m, netns))
                return;
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++)
                if (streq_ptr(iface_table_at(m->ifaces, i)->netns, netns))
                        return;
        links_forget(m->links, netns);
        netns_set_release(m->netns, netns);
}

void manager_forget(Manager *m, Iface *it) {
        _cleanup_free_ char *netns = it->netns ? strdup(it->netns) : NULL;
        bool visible = it->visible;

        request_queue_drop(m->queue, it);
        loads_forget(m, it);
        while (it->ops) {
                Operation *op = it->ops;
                it->ops = op->next;
                op->free(op);
        }
        iface_table_remove(m->ifaces, it);
        if (visible)
                manager_changed(m, it, IFACE_REMOVED);
        iface_free(it, m->registry);
        manager_release_netns(m, netns);
        if (visible)
                map_config_prune(m); /* its documents' entries, and its own set of a policy's map */
}

void manager_save_facts(Manager *m, Iface *it) {
        Error e = ERROR_NULL;

        if (!iface_update_facts(it))
                return;
        if (it->api && store_document_save(m->store, it->api, &it->facts[SOURCE_API], &e) < 0)
                log_warning("%s: %s", it->ifname, strna(e.message));
        error_done(&e);
        if (it->hog && store_document_save(m->store, it->hog, &it->facts[SOURCE_HOG], &e) < 0)
                log_warning("%s: %s", it->ifname, strna(e.message));
        error_done(&e);
}

void daemon_reconcile_all(Manager *m) {
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                if (it->visible)
                        request_queue_reconcile(m->queue, it, REASON_RESYNC);
        }
}

/* ---- start ---- */

static void store_problem(const char *path, const char *reason, void *userdata) {
        (void) userdata;
        log_error("%s: set aside: %s", path, reason);
}

/* The documents of the store become interfaces (resolved against the objects the store has). */
static int load_documents(Manager *m, StoreLoad *load, Error *reterr) {
        StoredDocument *docs = NULL;
        size_t n = 0;
        int r;

        r = store_documents_load_end(load, &docs, &n, store_problem, m, reterr);
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
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
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

void manager_check_started(Manager *m) {
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
        manager_check_started(m);
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
                Error e = ERROR_NULL;
                /* Counting costs every program two clock reads per run: on only when asked for. */
                if (nl_bpf_stats_enable(&m->kernel.bpf_stats_fd, &e) < 0) {
                        log_warning("--bpf-stats: %s; run counts and times stay 0", strna(e.message));
                        error_done(&e);
                } else
                        log_info("bpf stats: on (BPF_ENABLE_STATS held)");
        }
        if (m->kernel.tcx)
                tcx_sweep(m->config.bpffs_dir, m->config.netns_dir);
        r = registry_new(m->config.bpffs_dir, m->config.passed, m->config.n_passed, &m->registry);
        m->config.passed = NULL, m->config.n_passed = 0;
        if (r < 0)
                r = error_set(reterr, r, "internal_error", "out of memory");
        else if ((r = manager_objects_load(m)) < 0)
                r = error_set(reterr, r, "store_error", "cannot load objects: %s", strerror(-r));
        /* Subscribed before the dump, so that no change falls between the two. */
        if (r >= 0)
                r = netns_set_start(m->netns, reterr);
        if (r >= 0)
                (void) links_get(m->links, netns_set_rtnl_followed(m->netns, NULL), NULL, false, &links,
                                 &n_links, NULL);
        if (r < 0) {
                StoredDocument *docs = NULL;
                size_t n = 0;
                if (store_documents_load_end(load, &docs, &n, store_problem, m, NULL) >= 0)
                        stored_documents_free(docs, n);
                return r;
        }
        r = load_documents(m, load, reterr);
        if (r < 0)
                return r;
        r = manager_policies_load(m, reterr);
        if (r < 0)
                return r;
        r = manager_hogs_load(m);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "cannot load hogs: %s", strerror(-r));
        {
                Error e = ERROR_NULL;
                if (store_map_entries_load(m->store, &m->map_entries, &e) < 0)
                        log_warning("%s", strna(e.message));
                error_done(&e);
                if (!m->map_entries)
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                map_config_prune(m);
        }
        r = manager_resync_start(m, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++)
                request_queue_reconcile(m->queue, iface_table_at(m->ifaces, i), REASON_START);
        manager_policies_start(m);
        /* Ready once the queue has run dry the first time: checked after each turn of the loop that
         * dispatched something, and once at the first (when there is nothing to do, nothing else runs). */
        r = sd_event_add_post(m->event, &m->start.post, on_started_check, m);
        if (r >= 0)
                r = sd_event_add_defer(m->event, NULL, on_started_check, m);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "cannot watch the queue: %s", strerror(-r));
        return 0;
}

void daemon_notify_status(Manager *m) {
        size_t n[_IFACE_STATE_MAX] = { 0 };
        char status[sizeof(m->status)];

        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                const Iface *it = iface_table_at(m->ifaces, i);
                if (it->visible)
                        n[it->state]++;
        }
        snprintf(status, sizeof(status), "STATUS=%zu document(s): %zu configured, %zu pending, %zu failed",
                 n[IFACE_CONFIGURED] + n[IFACE_PENDING] + n[IFACE_FAILED], n[IFACE_CONFIGURED],
                 n[IFACE_PENDING], n[IFACE_FAILED]);
        if (streq(status, m->status))
                return;
        snprintf(m->status, sizeof(m->status), "%s", status);
        (void) sd_notify(0, status);
}

/* ---- reading the kernel for the faces ---- */

/* From clsd's own view, kept current by the reconciles that every tc event, retry and resync bring (no
 * dump per request); only the act_bpf actions' counters, which change with every packet and raise no
 * event, are read from the kernel, for an interface that has actions. */
int daemon_iface_status(Manager *m, const Iface *it_const, IfaceStatus *ret, Error *reterr) {
        Iface *it = (Iface *) it_const; /* observing fills the filters' facts: the kernel's view, not ours */
        IfaceStatus s = { .n_filters = it->n_filters };
        NlSocket *rtnl;
        uint64_t now = 0;

        s.filters = calloc(it->n_filters + 1, sizeof(FilterStatus));
        if (!s.filters)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        rtnl = it->ifindex > 0 && iface_uses_actions(it) ? netns_set_rtnl_followed(m->netns, it->netns)
                                                         : NULL;
        if (rtnl) {
                AttachObserved obs = { 0 };
                AttachContext c;
                attach_context_init(m, it, rtnl, &c);
                if (attach_observe(&c, &obs, NULL) >= 0)
                        attach_observed_free(&obs);
        }
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        bool counting = stats_counting(m, now);
        for (size_t i = 0; i < it->n_filters; i++) {
                const Filter *f = &it->filters[i];
                FilterStatus *fs = &s.filters[i];
                NlProgramStats ps;
                int r;

                if (it->ifindex <= 0)
                        continue; /* pending: nothing is attached */
                fs->observed = f->observed;
                if (!fs->observed.classifier_attached || !counting)
                        continue; /* not counted: no run counts (null, and not in /metrics), not zeros */
                /* The kernel's counts for what is attached: a program's, so that one shared by many
                 * filters is asked once per turn of the loop (a scrape's). */
                if (m->stats_memo.prog_id == fs->observed.prog_id && m->stats_memo.usec == now) {
                        ps = m->stats_memo.stats;
                        r = 0;
                } else if (f->program && program_id(f->program) == fs->observed.prog_id)
                        r = nl_program_stats_fd(program_fd(f->program), &ps, NULL);
                else
                        r = nl_program_stats(fs->observed.prog_id, &ps, NULL);
                if (r >= 0)
                        m->stats_memo = (typeof(m->stats_memo)){ .prog_id = fs->observed.prog_id,
                                                                 .usec = now,
                                                                 .stats = ps };
                if (r >= 0) {
                        fs->has_stats = true;
                        fs->run_count = ps.run_count;
                        fs->run_time_ns = ps.run_time_ns;
                }
        }
        *ret = s;
        return 0;
}

void iface_status_done(IfaceStatus *s) {
        free(s->filters);
        *s = (IfaceStatus){ 0 };
}

int daemon_links(Manager *m, const char *netns, LinkView **ret, size_t *ret_n, Error *reterr) {
        const LinkEntry *links;
        NlSocket *rtnl;
        LinkView *v = NULL;
        size_t n = 0;
        int r;

        r = netns_set_rtnl(m->netns, netns, &rtnl, reterr);
        if (r == -ENOENT || r == -EAGAIN) {
                error_done(reterr);
                r = error_set(reterr, ENOENT, "netns_not_found", "no network namespace %s in %s", netns,
                              m->config.netns_dir);
        }
        if (r >= 0) {
                netns_set_drain(m->netns, netns);
                r = links_get(m->links, rtnl, netns, true, &links, &n, reterr);
        }
        if (r >= 0 && !(v = calloc(n + 1, sizeof(LinkView))))
                r = error_set(reterr, ENOMEM, "internal_error", "out of memory");
        if (r < 0) {
                daemon_links_done(m, netns, NULL);
                return r;
        }
        for (size_t i = 0; i < n; i++)
                v[i] = (LinkView){ .link = links[i].link,
                                   .filters = links[i].filters,
                                   .n_filters = links[i].n_filters };
        *ret = v;
        *ret_n = n;
        return 0;
}

uint64_t daemon_links_version(Manager *m) {
        return links_version(m->links);
}

void daemon_links_done(Manager *m, const char *netns, LinkView *v) {
        free(v);
        /* Looking is not following: a namespace nothing follows is let go again, and its view with it. */
        manager_release_netns(m, netns);
}

static int netns_view_add(NetnsView **v, size_t *n, const char *name) {
        NetnsView *nv;

        for (size_t i = 0; i < *n; i++)
                if (streq((*v)[i].name, name))
                        return (int) i;
        nv = realloc(*v, (*n + 1) * sizeof(NetnsView));
        if (!nv)
                return -ENOMEM;
        *v = nv;
        nv[*n] = (NetnsView){ 0 };
        snprintf(nv[*n].name, sizeof(nv[*n].name), "%s", name);
        return (int) (*n)++;
}

static int netns_view_cmp(const void *a, const void *b) {
        return strcmp(((const NetnsView *) a)->name, ((const NetnsView *) b)->name);
}

int daemon_netns_list(Manager *m, NetnsView **ret, size_t *ret_n, Error *reterr) {
        char **present = NULL;
        NetnsView *v = NULL;
        size_t n = 0, n_present = 0;
        int k = 0;

        if (netns_set_list_present(m->netns, &present, &n_present) < 0)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        for (size_t i = 0; i < n_present && k >= 0; i++)
                if ((k = netns_view_add(&v, &n, present[i])) >= 0)
                        v[k].present = true;
        strv_free_n(present, n_present);
        for (size_t i = 0; i < iface_table_size(m->ifaces) && k >= 0; i++) {
                const Iface *it = iface_table_at(m->ifaces, i);
                if (!it->netns || !it->visible)
                        continue;
                if ((k = netns_view_add(&v, &n, it->netns)) >= 0)
                        v[k].documents++;
        }
        if (k < 0) {
                free(v);
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        }
        for (size_t i = 0; i < n; i++)
                v[i].followed = netns_set_follows(m->netns, v[i].name);
        if (n > 0)
                qsort(v, n, sizeof(NetnsView), netns_view_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}
