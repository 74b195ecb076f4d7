/* events.c: following the kernel: RTNLGRP_LINK (a document is applied when its interface appears and
 * turns pending when it vanishes or is renamed away) and RTNLGRP_TC (a change to the filters or qdisc
 * of a configured interface is checked, and drift repaired, at once). Lost events, and a periodic
 * timer as the backstop, mean a full resync. */
#include <linux/rtnetlink.h>
#include <string.h>

#include "daemon-internal.h"
#include "log.h"

static int on_dirty(sd_event_source *s, void *userdata) {
        Daemon *d = userdata;

        (void) s;
        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];
                if (!it->dirty)
                        continue;
                it->dirty = false;
                iface_reconcile_or_retry(d, it);
        }
        return 0;
}

/* A tc change on an interface clsd manages: check it once the current burst of events is read
 * (one reconcile per interface however many events came), so our own changes cost one no-op dump. */
/* Whether a new filter can mean drift: clsd's own changes (a filter of ours exactly as declared)
 * and foreign filters at prefs the document does not want cannot. Deletions always can. */
static bool new_filter_matters(const Iface *it, const NlFilter *f) {
        if (f->handle == 0)
                return false; /* the chain head of a pref */
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                        const FilterSpec *s = &it->doc->filters[dir][i];
                        char name[256];

                        if (filter_parent(s, dir) != f->parent || s->priority != f->pref)
                                continue;
                        if (!f->clsd_owned)
                                return true; /* someone took a pref of ours */
                        filter_kernel_name(s, name);
                        if (!streq(f->name, name) || !it->programs[dir] || !it->programs[dir][i] ||
                            f->prog_id != program_id(it->programs[dir][i]) ||
                            f->direct_action != s->direct_action || f->n_actions != s->n_actions)
                                return true;
                        for (size_t k = 0; k < s->n_actions; k++)
                                if (!it->action_programs[dir] || !it->action_programs[dir][i] ||
                                    f->actions[k].prog_id != program_id(it->action_programs[dir][i][k]))
                                        return true;
                        return false;
                }
        return f->clsd_owned; /* a filter of ours the document does not want */
}

static bool iface_has_actions(const Iface *it) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++)
                        if (it->doc->filters[dir][i].n_actions > 0)
                                return true;
        return false;
}

/* Someone replaced or removed an action (`tc actions replace … index N`): actions belong to the
 * namespace, not to an interface, so every interface there whose filters have actions is checked. */
static void action_event(Daemon *d, const char *netns) {
        bool any = false;

        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];
                if (it->state != IFACE_CONFIGURED || !streq_ptr(it->doc->netns, netns) ||
                    !iface_has_actions(it))
                        continue;
                it->dirty = true;
                any = true;
        }
        if (any)
                (void) sd_event_source_set_enabled(d->dirty_source, SD_EVENT_ONESHOT);
}

static void tc_event(Daemon *d, const char *netns, const struct nlmsghdr *nlh) {
        bool any = false, is_new_filter = false;
        NlFilter f;
        int ifindex;

        if (nl_tc_event_parse(nlh, &ifindex) < 0)
                return;
        if (nlh->nlmsg_type == RTM_NEWACTION || nlh->nlmsg_type == RTM_DELACTION) {
                action_event(d, netns);
                return;
        }
        if (nlh->nlmsg_type == RTM_NEWQDISC)
                return; /* a qdisc appearing takes nothing of ours away */
        is_new_filter = nlh->nlmsg_type == RTM_NEWTFILTER && nl_filter_parse(nlh, &f) >= 0;
        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];
                if (it->ifindex != ifindex || !streq_ptr(it->doc->netns, netns))
                        continue;
                /* Only a document the kernel matched can drift; a failed one waits for its retry or
                 * the resync, unless the foreign filter in its way may just have gone: then at once
                 * (a foreign filter flapping costs a dump per deletion, never a reload). */
                if (it->state == IFACE_CONFIGURED && (!is_new_filter || new_filter_matters(it, &f))) {
                        it->dirty = true;
                        any = true;
                } else if (it->state == IFACE_FAILED && nlh->nlmsg_type == RTM_DELTFILTER &&
                           streq_ptr(it->error.code, "priority_taken")) {
                        it->retry_source = sd_event_source_disable_unref(it->retry_source);
                        it->dirty = true;
                        any = true;
                }
        }
        if (any)
                (void) sd_event_source_set_enabled(d->dirty_source, SD_EVENT_ONESHOT);
}

static int link_event(const struct nlmsghdr *nlh, void *userdata) {
        Netns *ns = userdata;
        Daemon *d = ns->daemon;
        NlLink l;

        if (nl_tc_event_parse(nlh, NULL) >= 0) {
                tc_event(d, ns->name, nlh);
                return 0;
        }
        if (nl_link_parse(nlh, &l) < 0)
                return 0;

        /* First what left: a device removed, or renamed away from a document's name. */
        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];

                if (it->ifindex != l.ifindex || !streq_ptr(it->doc->netns, ns->name))
                        continue;
                if (nlh->nlmsg_type == RTM_DELLINK) {
                        log_info("%s: interface removed; document pending", it->doc->ifname);
                        it->ifindex = 0;
                        it->state = IFACE_PENDING;
                } else if (!streq(it->doc->ifname, l.ifname)) {
                        /* Documents follow names, not devices: the device under its new name keeps
                         * none of this document's filters, unless a document names the new name (that
                         * one is applied below and takes the device over). */
                        log_info("%s: interface renamed to %s; document pending", it->doc->ifname, l.ifname);
                        if (!daemon_iface_get(d, ns->name, l.ifname)) {
                                Error e = ERROR_NULL;
                                if (iface_remove_all(d, it, &e) < 0)
                                        log_warning("%s: cannot remove clsd's filters: %s", l.ifname,
                                                    strna(e.message));
                                error_done(&e);
                        }
                        it->ifindex = 0;
                        it->state = IFACE_PENDING;
                }
        }
        if (nlh->nlmsg_type == RTM_DELLINK)
                return 0;

        /* Then what came: the document that names this interface. */
        Iface *it = daemon_iface_get(d, ns->name, l.ifname);
        if (it && (it->state != IFACE_CONFIGURED || it->ifindex != l.ifindex)) {
                log_info("%s: interface appeared (ifindex %d); applying its document", l.ifname, l.ifindex);
                iface_reconcile_or_retry(d, it);
        }
        return 0;
}

static int on_events(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Netns *ns = userdata;
        Daemon *d = ns->daemon;
        int r;

        (void) s, (void) fd, (void) revents;
        r = nl_socket_read_events(ns->events, link_event, ns);
        if (r == -ENOBUFS) {
                log_warning("%s%srtnetlink events were lost (ENOBUFS); resynchronising every interface",
                            strempty(ns->name), ns->name ? ": " : "");
                (void) daemon_reconcile_all(d);
        } else if (r < 0)
                log_warning_errno(r, "reading rtnetlink events failed: %m");
        return 0;
}

static int on_resync(sd_event_source *s, uint64_t usec, void *userdata) {
        Daemon *d = userdata;

        log_debug("periodic resync");
        daemon_netns_scan(d);
        (void) daemon_reconcile_all(d);
        (void) sd_event_source_set_time(s, usec + d->config.resync_usec);
        return 0;
}

int netns_events_start(Daemon *d, Netns *ns, Error *reterr) {
        int r;

        r = nl_socket_open_in(ns->fd, RTMGRP_LINK | RTMGRP_TC, &ns->events, reterr);
        if (r < 0)
                return r;
        r = sd_event_add_io(d->event, &ns->events_source, nl_socket_fd(ns->events), EPOLLIN, on_events, ns);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "cannot watch rtnetlink events: %s",
                                 strerror(-r));
        return 0;
}

int daemon_events_start(Daemon *d, Error *reterr) {
        uint64_t now;
        int r;

        r = netns_events_start(d, &d->own, reterr);
        if (r < 0)
                return r;
        r = sd_event_add_defer(d->event, &d->dirty_source, on_dirty, d);
        if (r >= 0)
                r = sd_event_source_set_enabled(d->dirty_source, SD_EVENT_OFF);
        if (r >= 0 && d->config.resync_usec > 0) {
                (void) sd_event_now(d->event, CLOCK_MONOTONIC, &now);
                r = sd_event_add_time(d->event, &d->resync_source, CLOCK_MONOTONIC,
                                      now + d->config.resync_usec, 0, on_resync, d);
                if (r >= 0)
                        r = sd_event_source_set_enabled(d->resync_source, SD_EVENT_ON);
        }
        if (r < 0)
                return error_set(reterr, r, "internal_error", "cannot watch rtnetlink events: %s",
                                 strerror(-r));
        return 0;
}
