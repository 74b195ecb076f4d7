/* manager.c: the services every part of the daemon needs of the Manager (manager.h): change listeners
 * and STATUS=, the interface's namespace and link, forgetting an interface, saving what was attached,
 * counting errors, a reconcile of everything. Nothing here calls a part above it. */
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "loads.h"
#include "log.h"
#include "manager.h"
#include "daemon-metrics.h"
#include "store-policy.h"

/* ---- listeners and STATUS= ---- */

void daemon_remove_change_listener(Manager *m, DaemonChangeFunc f, void *userdata) {
        for (size_t i = 0; i < m->listeners.n; i++)
                if (m->listeners.v[i].f == f && m->listeners.v[i].userdata == userdata) {
                        memmove(m->listeners.v + i, m->listeners.v + i + 1,
                                (m->listeners.n - i - 1) * sizeof(ChangeListener));
                        m->listeners.n--;
                        return;
                }
}

int daemon_add_change_listener(Manager *m, DaemonChangeFunc f, void *userdata) {
        ChangeListener *v = realloc(m->listeners.v, (m->listeners.n + 1) * sizeof(*v));

        if (!v)
                return -ENOMEM;
        m->listeners.v = v;
        m->listeners.v[m->listeners.n++] = (ChangeListener){ .f = f, .userdata = userdata };
        return 0;
}

void daemon_notify_status(Manager *m) {
        size_t n[_IFACE_STATE_MAX] = { 0 };
        char status[sizeof(m->listeners.status)];

        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                const Iface *it = iface_table_at(m->ifaces, i);
                if (it->visible)
                        n[it->state]++;
        }
        snprintf(status, sizeof(status), "STATUS=%zu document(s): %zu configured, %zu pending, %zu failed",
                 n[IFACE_CONFIGURED] + n[IFACE_PENDING] + n[IFACE_FAILED], n[IFACE_CONFIGURED],
                 n[IFACE_PENDING], n[IFACE_FAILED]);
        if (streq(status, m->listeners.status))
                return;
        snprintf(m->listeners.status, sizeof(m->listeners.status), "%s", status);
        (void) sd_notify(0, status);
}

static int on_status(sd_event_source *s, void *userdata) {
        (void) s;
        daemon_notify_status(userdata);
        return 0;
}

void manager_changed(Manager *m, Iface *it, unsigned changes) {
        if (!it->visible && !(changes & IFACE_REMOVED))
                return;
        for (size_t i = 0; i < m->listeners.n; i++)
                m->listeners.v[i].f(m, it, changes, m->listeners.v[i].userdata);
        /* STATUS= counts every interface: once per turn of the loop, not once per change (a start over
         * N interfaces would count N times N). */
        if (changes & (IFACE_CHANGED_STATE | IFACE_ADDED | IFACE_REMOVED)) {
                if (!m->listeners.status_source &&
                    sd_event_add_defer(m->event, &m->listeners.status_source, on_status, m) < 0)
                        daemon_notify_status(m);
                else
                        (void) sd_event_source_set_enabled(m->listeners.status_source, SD_EVENT_ONESHOT);
        }
}

/* ---- an interface's namespace and link ---- */

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
        if (!netns || !netns_set_follows(m->netns, netns) || policy_set_wants_netns(&m->policies, netns))
                return;
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++)
                if (streq_ptr(iface_table_at(m->ifaces, i)->netns, netns))
                        return;
        links_forget(m->links, netns);
        netns_set_release(m->netns, netns);
}

/* ---- an interface forgotten ---- */

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
        /* (what was kept for it, a configuration map's entries, goes with the removal told) */
        if (visible)
                manager_changed(m, it, IFACE_REMOVED);
        iface_free(it, m->registry);
        manager_release_netns(m, netns);
}

bool manager_forget_unused(Manager *m, Iface *it) {
        if (it->api || it->hog || it->n_policies > 0)
                return false;
        if (it->ops && it->ops->next) {
                /* the next change finds it as a new one */
                if (it->visible) {
                        manager_changed(m, it, IFACE_REMOVED);
                        it->visible = false;
                        iface_table_touch(m->ifaces);
                }
                return false;
        }
        manager_forget(m, it);
        return true;
}

/* ---- what the parts share ---- */

void manager_save_facts(Manager *m, Iface *it) {
        _cleanup_error_ Error e = ERROR_NULL;

        if (!iface_update_facts(it))
                return;
        if (it->api && store_document_save(m->store, it->api, &it->facts[SOURCE_API], &e) < 0)
                log_warning("%s: %s", it->ifname, strna(e.message));
        error_done(&e);
        if (it->hog && store_document_save(m->store, it->hog, &it->facts[SOURCE_HOG], &e) < 0)
                log_warning("%s: %s", it->ifname, strna(e.message));
}

void manager_store_problem(const char *path, const char *reason, void *userdata) {
        (void) userdata;
        log_error("%s: set aside: %s", path, reason);
}

void error_counts_add(DaemonErrorCount *v, size_t *n, size_t max, ErrorCode code) {
        if (code == ERROR_CODE_NONE)
                return;
        for (size_t i = 0; i < *n; i++)
                if (v[i].code == code) {
                        v[i].n++;
                        return;
                }
        if (*n < max)
                v[(*n)++] = (DaemonErrorCount){ .code = code, .n = 1 };
}

void daemon_count_error(Manager *m, ErrorCode code) {
        error_counts_add(m->counters.errors, &m->counters.n_errors, ELEMENTSOF(m->counters.errors), code);
}

void daemon_reconcile_all(Manager *m) {
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                if (it->visible)
                        request_queue_reconcile(m->queue, it, REASON_RESYNC);
        }
}
