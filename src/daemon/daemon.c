/* daemon.c: the Daemon: start-up (store, objects, documents, first reconcile) and the document
 * operations the faces call: put (transactional), get, delete, status, and the host's links. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <systemd/sd-daemon.h>

#include "daemon-internal.h"
#include "log.h"

int daemon_new(const DaemonConfig *config, sd_event *event, Daemon **ret, Error *reterr) {
        _cleanup_(daemon_freep) Daemon *d = calloc(1, sizeof(*d));
        struct utsname u;
        int r;

        if (!d)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        d->config = *config;
        d->event = sd_event_ref(event);
        if (uname(&u) >= 0)
                snprintf(d->kernel_release, sizeof(d->kernel_release), "%s", u.release);
        r = store_open(config->state_dir, &d->store, reterr);
        if (r < 0)
                return r;
        d->own = (Netns){ .daemon = d, .fd = -1 };
        d->netns_watch_fd = -1;
        d->bpf_stats_fd = -1;
        r = nl_socket_open(0, &d->own.rtnl, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(d);
        return 0;
}

Daemon *daemon_free(Daemon *d) {
        if (!d)
                return NULL;
        /* Exiting is not releasing: the fd store entries and pins stay for the next start. */
        d->exiting = true;
        for (size_t i = 0; i < d->n_ifaces; i++)
                iface_free(d, d->ifaces[i]);
        free(d->ifaces);
        for (size_t i = 0; i < d->n_objects; i++)
                nl_object_info_free(d->objects[i].info);
        free(d->objects);
        free(d->programs);
        registry_free_passed(d);
        daemon_netns_free(d);
        sd_event_source_disable_unref(d->own.events_source);
        sd_event_source_disable_unref(d->dirty_source);
        sd_event_source_disable_unref(d->resync_source);
        nl_socket_free(d->own.events);
        nl_socket_free(d->own.rtnl);
        store_free(d->store);
        safe_close(d->bpf_stats_fd);
        sd_event_unref(d->event);
        free(d);
        return NULL;
}

bool daemon_bpf_stats(Daemon *d) {
        return d->bpf_stats_fd >= 0;
}

bool daemon_has_act_bpf(Daemon *d) {
        return d->act_bpf;
}

bool daemon_has_tcx(Daemon *d) {
        return d->tcx;
}

const char *daemon_kernel_release(Daemon *d) {
        return d->kernel_release;
}

size_t daemon_iface_count(Daemon *d) {
        return d->n_ifaces;
}

Iface *daemon_iface_at(Daemon *d, size_t i) {
        return i < d->n_ifaces ? d->ifaces[i] : NULL;
}

Iface *daemon_iface_get(Daemon *d, const char *netns, const char *ifname) {
        for (size_t i = 0; i < d->n_ifaces; i++)
                if (streq(d->ifaces[i]->doc->ifname, ifname) && streq_ptr(d->ifaces[i]->doc->netns, netns))
                        return d->ifaces[i];
        return NULL;
}

int ifaces_reserve(Daemon *d) {
        Iface **n = realloc(d->ifaces, (d->n_ifaces + 1) * sizeof(Iface *));
        if (!n)
                return -ENOMEM;
        d->ifaces = n;
        return 0;
}

void ifaces_put(Daemon *d, Iface *old, Iface *it) {
        if (!old) {
                d->ifaces[d->n_ifaces++] = it;
                return;
        }
        for (size_t i = 0; i < d->n_ifaces; i++)
                if (d->ifaces[i] == old)
                        d->ifaces[i] = it;
}

/* Puts the kernel back as it was before a PUT that failed after changing it. */
static void rollback(Daemon *d, const Iface *it, Iface *old, const Snapshot *snap, const char *what,
                     const Error *why) {
        Error e = ERROR_NULL;
        int r;

        log_error("%s: %s failed: %s; rolling back", it->doc->ifname, what,
                  strna(why ? why->message : NULL));
        r = snapshot_restore(snap, it->doc->ifname, &e);
        /* tcx: the links this change added go; the old document's come back as they were (its programs
         * are still held), in place where only their program changed. */
        if (r >= 0)
                r = iface_tcx_remove_added(d, it->doc->netns, it->ifindex, it->doc->ifname, snap->tcx_links,
                                           snap->n_tcx_links, &e);
        if (r >= 0 && old && old->ifindex == it->ifindex && old->programs[DIRECTION_INGRESS])
                r = iface_tcx_apply(d, old, NULL, 0, &e);
        if (r >= 0) {
                error_done(&e);
                return;
        }
        /* The kernel is now neither the old document nor the new one: say so where it shows. */
        log_error("%s: rollback failed: %s", it->doc->ifname, strna(e.message));
        if (old) {
                error_done(&old->error);
                old->state = IFACE_FAILED;
                error_set(&old->error, e.error, "kernel_error", "rollback after a failed PUT failed: %s",
                          strna(e.message));
        }
        error_done(&e);
}

static int ifaces_add(Daemon *d, Iface *it) {
        if (ifaces_reserve(d) < 0)
                return -ENOMEM;
        ifaces_put(d, NULL, it);
        return 0;
}

static void ifaces_remove(Daemon *d, Iface *it) {
        for (size_t i = 0; i < d->n_ifaces; i++)
                if (d->ifaces[i] == it) {
                        memmove(d->ifaces + i, d->ifaces + i + 1, (d->n_ifaces - i - 1) * sizeof(Iface *));
                        d->n_ifaces--;
                        return;
                }
}

/* Saves what the kernel taught us (program ids and tags, clsact ownership) into the documents the
 * interface's hooks came from. */
static void iface_save_facts(Daemon *d, Iface *it) {
        Error e = ERROR_NULL;

        if (!iface_facts_sync(it))
                return;
        if (it->api && store_document_save(d->store, it->api, &e) < 0)
                log_warning("%s: %s", it->doc->ifname, strna(e.message));
        error_done(&e);
        if (it->hog && store_document_save(d->store, it->hog, &e) < 0)
                log_warning("%s: %s", it->doc->ifname, strna(e.message));
        error_done(&e);
}

int iface_reconcile_and_save(Daemon *d, Iface *it, Error *reterr) {
        int r = iface_reconcile(d, it, reterr);
        iface_save_facts(d, it);
        return r;
}

/* Backoff of the retries of a failed interface: 1 s, doubling, at most a minute. */
#define RETRY_BASE_USEC (1000000ULL)
#define RETRY_MAX_USEC (60 * 1000000ULL)

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Daemon *d = userdata;

        (void) usec;
        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];
                if (it->retry_source != s)
                        continue;
                it->retry_source = sd_event_source_disable_unref(it->retry_source);
                iface_reconcile_or_retry(d, it);
                return 0;
        }
        return 0;
}

static void schedule_retry(Daemon *d, Iface *it) {
        uint64_t now, delay = RETRY_BASE_USEC << MIN(it->failures, 6u);

        if (it->retry_source)
                return;
        delay = MIN(delay, RETRY_MAX_USEC);
        it->failures++;
        (void) sd_event_now(d->event, CLOCK_MONOTONIC, &now);
        if (sd_event_add_time(d->event, &it->retry_source, CLOCK_MONOTONIC, now + delay, 0, on_retry, d) >=
            0)
                log_info("%s: next attempt in %llu s", it->doc->ifname,
                         (unsigned long long) (delay / 1000000));
}

void iface_reconcile_or_retry(Daemon *d, Iface *it) {
        if (it->retry_source)
                return; /* backing off: the timer will try */
        if (iface_reconcile_and_save(d, it, NULL) >= 0) {
                it->failures = 0;
                return;
        }
        schedule_retry(d, it);
}

static void store_problem(const char *path, const char *reason, void *userdata) {
        (void) userdata;
        log_error("%s: set aside: %s", path, reason);
}

int daemon_start(Daemon *d, Error *reterr) {
        Document **docs = NULL;
        size_t n_docs = 0, n_failed = 0;
        int r;

        (void) nl_act_bpf_probe(d->own.rtnl, &d->act_bpf);
        log_info("act_bpf: %s",
                 d->act_bpf ? "available" : "unavailable (this kernel has no CONFIG_NET_ACT_BPF)");
        (void) nl_tcx_probe(&d->tcx);
        log_info("tcx: %s", d->tcx ? "available" : "unavailable (Linux 6.6+ has it)");
        if (d->config.bpf_stats) {
                Error e = ERROR_NULL;
                /* Counting costs every program two clock reads per run: on only when asked for. */
                if (nl_bpf_stats_enable(&d->bpf_stats_fd, &e) < 0) {
                        log_warning("--bpf-stats: %s; run counts and times stay 0", strna(e.message));
                        error_done(&e);
                } else
                        log_info("bpf stats: on (BPF_ENABLE_STATS held)");
        }
        daemon_tcx_sweep(d);
        r = registry_start(d, d->config.passed, d->config.n_passed);
        d->config.passed = NULL, d->config.n_passed = 0;
        if (r < 0)
                return error_set(reterr, r, "internal_error", "out of memory");
        r = daemon_objects_load(d);
        if (r < 0)
                return error_set(reterr, r, "store_error", "cannot load objects: %s", strerror(-r));
        r = store_documents_load(d->store, SOURCE_API, &docs, &n_docs, store_problem, d, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_docs; i++) {
                Iface *it;
                r = iface_new(docs[i], NULL, NULL, &it);
                document_free(docs[i]);
                if (r >= 0 && ifaces_add(d, it) < 0) {
                        iface_free(d, it);
                        r = -ENOMEM;
                }
                if (r < 0) {
                        for (size_t k = i + 1; k < n_docs; k++)
                                document_free(docs[k]);
                        free(docs);
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                }
        }
        free(docs);
        r = daemon_hogs_load(d);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "cannot load hogs: %s", strerror(-r));

        r = daemon_events_start(d, reterr);
        if (r >= 0)
                r = daemon_netns_start(d, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < d->n_ifaces; i++)
                if (iface_reconcile_and_save(d, d->ifaces[i], NULL) < 0) {
                        n_failed++;
                        schedule_retry(d, d->ifaces[i]);
                }
        /* A document whose interface is absent keeps the programs (and maps) the last run kept. */
        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];
                bool kept = false;
                if (it->state != IFACE_PENDING || it->programs[DIRECTION_INGRESS])
                        continue;
                for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                        for (size_t k = 0; k < it->doc->n_filters[dir]; k++) {
                                const FilterSpec *f = &it->doc->filters[dir][k];
                                for (int a = -1; a < (int) f->n_actions; a++) {
                                        ProgramRef ref = program_ref(f, a);
                                        kept = kept || registry_kept(d, &ref);
                                }
                        }
                if (kept)
                        (void) iface_acquire_programs(d, it, NULL, 0, NULL);
        }
        registry_settle(d);
        log_info("started: %zu document(s), %zu object(s), %zu failed", d->n_ifaces, d->n_objects, n_failed);
        return 0;
}

void daemon_notify_status(Daemon *d) {
        size_t n[_IFACE_STATE_MAX] = { 0 };
        char status[sizeof(d->status)];

        for (size_t i = 0; i < d->n_ifaces; i++)
                n[d->ifaces[i]->state]++;
        snprintf(status, sizeof(status), "STATUS=%zu document(s): %zu configured, %zu pending, %zu failed",
                 d->n_ifaces, n[IFACE_CONFIGURED], n[IFACE_PENDING], n[IFACE_FAILED]);
        if (streq(status, d->status))
                return;
        memcpy(d->status, status, sizeof(status));
        (void) sd_notify(0, status);
}

int daemon_reconcile_all(Daemon *d) {
        int ret = 0;
        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];
                int r = iface_reconcile_and_save(d, it, NULL);
                if (r >= 0) {
                        it->failures = 0;
                        it->retry_source = sd_event_source_disable_unref(it->retry_source);
                }
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

static int check_if_match(const Iface *old, const char *if_match, Error *reterr) {
        char want[32];

        if (!if_match)
                return 0;
        if (old && !old->api)
                old = NULL; /* a hog has no generation: If-Match is about the API's document */
        if (streq(if_match, "*")) {
                if (!old)
                        return error_set(reterr, EEXIST, "precondition_failed",
                                         "If-Match: *: there is no document to match");
                return 0;
        }
        snprintf(want, sizeof(want), "\"%" PRIu64 "\"", old ? old->api->generation : 0);
        if (!old || (!streq(if_match, want) && !(strlen(if_match) + 2 == strlen(want) &&
                                                 strncmp(want + 1, if_match, strlen(if_match)) == 0)))
                return error_set(reterr, EEXIST, "precondition_failed",
                                 "If-Match: %s does not match the document's generation %s", if_match,
                                 old ? want : "(no document)");
        return 0;
}

/* The PUT: every program is loaded and verified, and conflicts are checked, before anything in the
 * store or the kernel changes; a kernel or store failure after that rolls back to the old document. */
int iface_document_prepare(Daemon *d, const char *netns, const char *ifname, json_t *body,
                           const char *if_match, bool store, Document **ret, Error *reterr) {
        _cleanup_(document_freep) Document *doc = NULL;
        Iface *old = daemon_iface_get(d, netns, ifname);
        int r;

        if (netns && !netns_name_valid(netns))
                return error_set(
                        reterr, EINVAL, "invalid_value",
                        "\"%s\" is not a valid network namespace name (1 to %d characters of A-Z a-z "
                        "0-9 _ . -)",
                        netns, NETNS_NAME_MAX);
        if (!ifname_valid(ifname))
                return error_set(
                        reterr, EINVAL, "invalid_value",
                        "\"%s\" is not a valid interface name (1 to 15 characters, no '/', ':' or space)",
                        ifname);
        r = document_from_json(ifname, body, &doc, reterr);
        if (r < 0)
                return r;
        if (netns && !(doc->netns = strdup(netns)))
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        r = check_if_match(old, if_match, reterr);
        if (r < 0)
                return r;
        for (Direction dir = 0; old && dir < _DIRECTION_MAX; dir++)
                if (hog_holds(old->hog, dir) && doc->n_filters[dir] > 0)
                        return error_set(reterr, EBUSY, "hog_owned",
                                         "%s: the %s hook of %s is declared by the hog %s; change that file "
                                         "and send clsd SIGHUP",
                                         direction_to_string(dir), direction_to_string(dir), ifname,
                                         old->hog_path);
        r = daemon_document_resolve(d, doc, store, reterr);
        if (r < 0)
                return r;
        doc->generation = old && old->api ? old->api->generation + 1 : 1;
        doc->clsact_created = old && old->doc->clsact_created;
        /* Keep what the unchanged filters attached, so that it can be adopted. */
        if (old)
                document_keep_facts(doc, old->api);
        *ret = TAKE_PTR(doc);
        return 0;
}

int iface_replace(Daemon *d, Iface *old, const char *ifname, const Document *api, const Document *hog,
                  const char *hog_path, Iface **ret, Error *reterr) {
        _cleanup_free_ NlFilter *observed = NULL;
        const char *netns = (api ?: hog)->netns;
        size_t n_observed = 0;
        Iface *it = NULL;
        Snapshot snap = { 0 };
        NlSocket *rtnl;
        NlLink link;
        int r;

        r = daemon_link_by_name(d, netns, ifname, &rtnl, &link, reterr);
        if (r < 0 && r != -ENODEV)
                return r;
        if (r >= 0) {
                r = nl_filter_dump(rtnl, link.ifindex, &observed, &n_observed, reterr);
                if (r < 0)
                        return r;
        } else
                link.ifindex = 0;

        r = iface_new(api, hog, hog_path, &it);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "out of memory");
        it->ifindex = link.ifindex;
        if (old)
                iface_carry_over(it, old);
        r = iface_check_conflicts(d, it, observed, n_observed, reterr);
        if (r >= 0)
                r = iface_acquire_programs(d, it, observed, n_observed, reterr);
        if (r < 0) {
                iface_free(d, it);
                return r;
        }

        /* Grow the list first: after the store is written nothing may fail. */
        if (!old && ifaces_reserve(d) < 0) {
                iface_free(d, it);
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        }
        if (it->ifindex > 0) {
                /* The dump already made is the state to come back to. */
                r = snapshot_take(rtnl, it->ifindex, observed, n_observed, &snap, reterr);
                if (r >= 0)
                        r = iface_tcx_link_ids(d, it->doc->netns, it->ifindex, &snap.tcx_links,
                                               &snap.n_tcx_links, reterr);
                if (r >= 0) {
                        r = iface_apply(d, it, NULL, 0, reterr);
                        if (r < 0)
                                rollback(d, it, old, &snap, "applying the new document", reterr);
                }
                if (r < 0) {
                        snapshot_done(&snap);
                        iface_free(d, it);
                        return r;
                }
                it->state = IFACE_CONFIGURED;
        } else
                it->state = IFACE_PENDING;

        (void) iface_facts_sync(it);
        if (it->api)
                r = store_document_save(d->store, it->api, reterr);
        else if (old && old->api)
                r = store_document_remove(d->store, SOURCE_API, netns, ifname, reterr);
        if (r < 0) {
                if (it->ifindex > 0)
                        rollback(d, it, old, &snap, "storing the new document", reterr);
                snapshot_done(&snap);
                iface_free(d, it);
                return r;
        }
        snapshot_done(&snap);
        if (it->hog) {
                Error e = ERROR_NULL;
                if (store_document_save(d->store, it->hog, &e) < 0)
                        log_warning("%s: %s", ifname, strna(e.message));
                error_done(&e);
        }
        ifaces_put(d, old, it);
        iface_free(d, old);
        if (ret)
                *ret = it;
        return 0;
}

int daemon_iface_put(Daemon *d, const char *netns, const char *ifname, json_t *body, const char *if_match,
                     Iface **ret, Error *reterr) {
        _cleanup_(document_freep) Document *doc = NULL;
        Iface *old = daemon_iface_get(d, netns, ifname), *it;
        int r;

        r = iface_document_prepare(d, netns, ifname, body, if_match, true, &doc, reterr);
        if (r < 0)
                return r;
        r = iface_replace(d, old, ifname, doc, old ? old->hog : NULL, old ? old->hog_path : NULL, &it,
                          reterr);
        if (r < 0) {
                netns_release_if_unused(d, netns);
                return r;
        }
        log_info("%s: document generation %" PRIu64 " stored, %s", ifname, it->api->generation,
                 iface_state_to_string(it->state));
        *ret = it;
        return 0;
}

int iface_forget(Daemon *d, Iface *it, Error *reterr) {
        _cleanup_free_ char *netns = it->doc->netns ? strdup(it->doc->netns) : NULL;
        NlSocket *rtnl;
        NlLink link;
        int r;

        if (it->doc->netns && !netns)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        r = daemon_link_by_name(d, it->doc->netns, it->doc->ifname, &rtnl, &link, reterr);
        if (r < 0 && r != -ENODEV)
                return r;
        if (r >= 0) {
                it->ifindex = link.ifindex;
                r = iface_remove_all(d, it, reterr);
                if (r < 0)
                        return r;
        }
        if (it->api) {
                r = store_document_remove(d->store, SOURCE_API, it->doc->netns, it->doc->ifname, reterr);
                if (r < 0)
                        return r;
        }
        if (it->hog)
                (void) store_document_remove(d->store, SOURCE_HOG, it->doc->netns, it->doc->ifname, NULL);
        ifaces_remove(d, it);
        iface_free(d, it);
        netns_release_if_unused(d, netns);
        return 0;
}

int daemon_iface_delete(Daemon *d, const char *netns, const char *ifname, const char *if_match,
                        Error *reterr) {
        Iface *it = daemon_iface_get(d, netns, ifname);
        int r;

        if (!it || (!it->api && !it->hog))
                return error_set(reterr, ENOENT, "document_not_found", "no classifier document for %s",
                                 ifname);
        if (!it->api)
                return error_set(reterr, EBUSY, "hog_owned",
                                 "%s is declared by the hog %s; remove that file and send clsd SIGHUP",
                                 ifname, it->hog_path);
        r = check_if_match(it, if_match, reterr);
        if (r < 0)
                return r;
        if (it->hog) {
                /* The hog's hooks stay; the API's go. */
                r = iface_replace(d, it, ifname, NULL, it->hog, it->hog_path, NULL, reterr);
                if (r < 0)
                        return r;
                log_info("%s: API document deleted; the hog %s stays", ifname,
                         daemon_iface_get(d, netns, ifname)->hog_path);
                return 0;
        }
        r = iface_forget(d, it, reterr);
        if (r < 0)
                return r;
        log_info("%s: document deleted", ifname);
        return 0;
}

void iface_status_done(IfaceStatus *s) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                free(s->filters[dir]);
                s->filters[dir] = NULL;
        }
}

int daemon_iface_status(Daemon *d, const Iface *it, IfaceStatus *ret, Error *reterr) {
        _cleanup_free_ NlFilter *observed = NULL;
        IfaceStatus s = { 0 };
        size_t n_observed = 0;
        int r;

        if (it->ifindex > 0 && iface_rtnl(d, it)) {
                r = nl_filter_dump(iface_rtnl(d, it), it->ifindex, &observed, &n_observed, reterr);
                if (r < 0 && r != -ENODEV && r != -EINVAL)
                        return r;
        }
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                s.filters[dir] = calloc(it->doc->n_filters[dir] + 1, sizeof(FilterStatus));
                if (!s.filters[dir]) {
                        iface_status_done(&s);
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                }
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                        const FilterSpec *f = &it->doc->filters[dir][i];
                        FilterStatus *fs = &s.filters[dir][i];
                        const NlFilter *o;
                        char name[256];

                        fs->pref = (uint16_t) f->priority;
                        if (filter_uses_tcx(d, f)) {
                                NlTcxLink l;
                                fs->tcx = true;
                                if (it->ifindex <= 0 ||
                                    iface_tcx_find(d, it->doc->netns, it->ifindex, dir, f, &l) < 0)
                                        continue;
                                fs->link_id = l.link_id;
                                fs->prog_id = l.prog_id;
                                fs->attached = it->programs[dir] && it->programs[dir][i] &&
                                               l.prog_id == program_id(it->programs[dir][i]);
                                fs->classifier_attached = fs->attached;
                                if (fs->attached)
                                        snprintf(fs->tag, sizeof(fs->tag), "%s",
                                                 program_tag(it->programs[dir][i]));
                                continue;
                        }
                        filter_kernel_name(f, name);
                        o = find_ours(observed, n_observed, filter_parent(f, dir), fs->pref, name);
                        if (!o)
                                continue;
                        fs->handle = o->handle;
                        fs->prog_id = o->prog_id;
                        memcpy(fs->tag, o->tag, sizeof(fs->tag));
                        fs->attached = it->programs[dir] && it->programs[dir][i] &&
                                       o->prog_id == program_id(it->programs[dir][i]);
                        fs->classifier_attached = fs->attached;
                        for (size_t k = 0; k < f->n_actions && k < o->n_actions; k++) {
                                const NlAction *a = &o->actions[k];
                                ActionStatus *as = &fs->actions[k];
                                char want[NL_ACTION_NAME_MAX];

                                action_kernel_name(f, k, want);
                                as->index = a->index;
                                as->prog_id = a->prog_id;
                                memcpy(as->tag, a->tag, sizeof(as->tag));
                                as->packets = a->packets;
                                as->bytes = a->bytes;
                                as->drops = a->drops;
                                as->attached = streq(a->kind, "bpf") && streq(a->name, want) &&
                                               it->action_programs[dir] && it->action_programs[dir][i] &&
                                               a->prog_id == program_id(it->action_programs[dir][i][k]);
                                /* The filter is as declared only with every action in its place. */
                                fs->attached = fs->attached && as->attached;
                        }
                        if (o->n_actions != f->n_actions)
                                fs->attached = false;
                }
                /* The kernel's counts for what is attached (0 unless BPF_ENABLE_STATS is held). */
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                        FilterStatus *fs = &s.filters[dir][i];
                        NlProgramStats ps;
                        if (fs->attached && nl_program_stats(fs->prog_id, &ps, NULL) >= 0) {
                                fs->has_stats = true;
                                fs->run_count = ps.run_count;
                                fs->run_time_ns = ps.run_time_ns;
                        }
                }
        }
        *ret = s;
        return 0;
}

void link_views_free(LinkView *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i].filters);
        free(v);
}

static int links_of(Daemon *d, const char *netns, LinkView **ret, size_t *ret_n, Error *reterr) {
        _cleanup_free_ NlLink *links = NULL;
        NlSocket *rtnl;
        LinkView *v;
        size_t n;
        int r;

        r = daemon_rtnl(d, netns, &rtnl, reterr);
        if (r == -ENOENT || r == -EAGAIN)
                return error_set(reterr, ENOENT, "netns_not_found", "no network namespace %s in %s", netns,
                                 d->config.netns_dir);
        if (r < 0)
                return r;
        r = nl_link_list(rtnl, &links, &n, reterr);
        if (r < 0)
                return r;
        v = calloc(n + 1, sizeof(LinkView));
        if (!v)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        for (size_t i = 0; i < n; i++) {
                v[i].link = links[i];
                /* An interface can vanish between the two dumps: show it without filters. */
                (void) nl_filter_dump(rtnl, links[i].ifindex, &v[i].filters, &v[i].n_filters, NULL);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int daemon_links(Daemon *d, const char *netns, LinkView **ret, size_t *ret_n, Error *reterr) {
        int r = links_of(d, netns, ret, ret_n, reterr);
        /* Looking is not following: a namespace no document names is let go again. */
        netns_release_if_unused(d, netns);
        return r;
}
