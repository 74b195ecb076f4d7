/* events.c: following the kernel, each event a request: RTNLGRP_LINK (a document is applied when its
 * interface appears, and turns pending when it vanishes or is renamed away), RTNLGRP_TC (a change to
 * the filters, qdisc or actions of a configured interface: drift, perhaps). Lost events, and a periodic
 * timer as the backstop, mean a full resync. A burst of events for one interface is one request. */
#include <linux/rtnetlink.h>
#include <string.h>

#include "log.h"
#include "events.h"
#include "policy-match.h"
#include "reconcile.h"

/* Whether a new filter can mean drift: clsd's own changes (a filter of ours exactly as declared) and
 * foreign filters at prefs the document does not want cannot. Deletions always can. */
static bool new_filter_matters(const Iface *it, const NlFilter *f) {
        if (f->handle == 0)
                return false; /* the chain head of a pref */
        for (size_t i = 0; i < it->n_filters; i++) {
                const Filter *x = &it->filters[i];
                const FilterSpec *s = x->spec;
                char name[256];

                /* a filter event is cls_bpf's: tcx links send none */
                if (x->kind != ATTACH_KIND_CLS || filter_parent(s, x->dir) != f->parent ||
                    s->priority != f->pref)
                        continue;
                if (!f->clsd_owned)
                        return true; /* someone took a pref of ours */
                filter_kernel_name(s, name);
                if (!streq(f->name, name) || !x->program || f->prog_id != program_id(x->program) ||
                    f->direct_action != s->direct_action || f->n_actions != s->n_actions)
                        return true;
                for (size_t k = 0; k < s->n_actions; k++)
                        if (!x->actions[k] || f->actions[k].prog_id != program_id(x->actions[k]))
                                return true;
                return false;
        }
        return f->clsd_owned; /* a filter of ours the document does not want */
}

static void tc_event(Manager *m, const char *netns, const struct nlmsghdr *nlh) {
        bool is_new_filter;
        NlFilter f;
        Iface *it;
        int ifindex;

        if (nl_tc_event_parse(nlh, &ifindex) < 0)
                return;
        if (nlh->nlmsg_type == RTM_NEWACTION || nlh->nlmsg_type == RTM_DELACTION) {
                /* Someone replaced or removed an action (`tc actions replace … index N`): actions belong
                 * to the namespace, not to an interface. */
                for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                        it = iface_table_at(m->ifaces, i);
                        if (it->state == IFACE_CONFIGURED && streq_ptr(it->netns, netns) &&
                            iface_uses_actions(it))
                                request_queue_reconcile(m->queue, it, REASON_TC);
                }
                return;
        }
        if (nlh->nlmsg_type == RTM_NEWQDISC)
                return; /* a qdisc appearing takes nothing of ours away */
        it = iface_table_by_ifindex(m->ifaces, netns, ifindex);
        if (!it || !it->visible)
                return;
        is_new_filter = nlh->nlmsg_type == RTM_NEWTFILTER && nl_filter_parse(nlh, &f) >= 0;
        /* Only a document the kernel matched can drift; a failed one waits for its retry or the resync,
         * unless the foreign filter in its way may just have gone: then at once (a foreign filter
         * flapping costs a dump per deletion, never a reload). */
        if (it->state == IFACE_CONFIGURED && (!is_new_filter || new_filter_matters(it, &f)))
                request_queue_reconcile(m->queue, it, REASON_TC);
        else if (it->state == IFACE_FAILED && nlh->nlmsg_type == RTM_DELTFILTER &&
                 it->error.code == ERROR_PRIORITY_TAKEN) {
                request_queue_reconcile(m->queue, it, REASON_TC);
                request_queue_expedite(m->queue, it);
        }
}

static void link_event(Manager *m, const char *netns, const struct nlmsghdr *nlh) {
        Iface *it;
        NlLink l;

        if (nl_link_parse(nlh, &l) < 0)
                return;
        /* First what left: a device removed, or renamed away from a document's name. */
        it = iface_table_by_ifindex(m->ifaces, netns, l.ifindex);
        if (it && it->visible) {
                if (nlh->nlmsg_type == RTM_DELLINK && !it->api && !it->hog) {
                        /* Only policies were for it: it goes with its device. */
                        log_info("%s: interface removed", it->ifname);
                        manager_forget(m, it);
                } else if (nlh->nlmsg_type == RTM_DELLINK) {
                        log_info("%s: interface removed; document pending", it->ifname);
                        iface_table_set_ifindex(m->ifaces, it, 0);
                        iface_set_state(it, IFACE_PENDING, NULL);
                        manager_changed(m, it, IFACE_CHANGED_STATE);
                } else if (!streq(it->ifname, l.ifname)) {
                        /* Documents follow names, not devices: the device under its new name keeps none of
                         * this document's filters, unless a document names the new name (that one is
                         * applied below and takes the device over). */
                        log_info("%s: interface renamed to %s; document pending", it->ifname, l.ifname);
                        if (!daemon_iface_get(m, netns, l.ifname)) {
                                NlSocket *rtnl = netns_set_rtnl_followed(m->netns, netns);
                                Error e = ERROR_NULL;
                                if (rtnl && iface_remove_all(m, it, rtnl, &e) < 0)
                                        log_warning("%s: cannot remove clsd's filters: %s", l.ifname,
                                                    strna(e.message));
                                error_done(&e);
                        }
                        if (!it->api && !it->hog)
                                manager_forget(m, it); /* only policies were for it */
                        else {
                                iface_table_set_ifindex(m->ifaces, it, 0);
                                iface_set_state(it, IFACE_PENDING, NULL);
                                manager_changed(m, it, IFACE_CHANGED_STATE);
                        }
                }
        }
        if (nlh->nlmsg_type == RTM_DELLINK)
                return;
        /* The policies that match it now (a new name, kind or master may change them). */
        policies_on_link(m, netns, &l);
        /* Then what came: the document that names this interface. */
        it = daemon_iface_get(m, netns, l.ifname);
        if (it && (it->state != IFACE_CONFIGURED || it->ifindex != l.ifindex)) {
                if (it->state == IFACE_PENDING)
                        log_info("%s: interface appeared (ifindex %d); applying its document", l.ifname,
                                 l.ifindex);
                request_queue_reconcile(m->queue, it, REASON_LINK);
        }
}

void events_on_netns_event(const char *netns, const struct nlmsghdr *nlh, bool lost, void *userdata) {
        Manager *m = userdata;

        if (lost)
                links_lost(m->links, netns);
        else
                links_on_event(m->links, netns, nlh);
        if (lost) {
                for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                        Iface *it = iface_table_at(m->ifaces, i);
                        if (it->visible && streq_ptr(it->netns, netns))
                                request_queue_reconcile(m->queue, it, REASON_RESYNC);
                }
                return;
        }
        if (nl_tc_event_parse(nlh, NULL) >= 0)
                tc_event(m, netns, nlh);
        else
                link_event(m, netns, nlh);
}

void events_on_netns_change(const char *netns, bool present, void *userdata) {
        Manager *m = userdata;

        if (netns && !present) {
                links_forget(m->links, netns);
                /* A followed namespace went: its documents wait for it to come back; what only policies
                 * were for goes. */
                for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                        Iface *it = iface_table_at(m->ifaces, i);
                        if (!streq_ptr(it->netns, netns))
                                continue;
                        if (!it->api && !it->hog && it->n_policies > 0) {
                                manager_forget(m, it);
                                i--;
                                continue;
                        }
                        if (it->state != IFACE_PENDING && it->visible)
                                log_info("%s: netns %s is gone; document pending", it->ifname, netns);
                        iface_table_set_ifindex(m->ifaces, it, 0);
                        iface_set_state(it, IFACE_PENDING, NULL);
                        manager_changed(m, it, IFACE_CHANGED_STATE);
                }
                return;
        }
        /* The directory changed: namespaces a policy may match are followed and their links matched. */
        if (policy_set_wants_named_netns(&m->policies)) {
                char **present_names = NULL;
                size_t n = 0;
                (void) netns_set_list_present(m->netns, &present_names, &n);
                for (size_t i = 0; i < n; i++)
                        if (!netns_set_follows(m->netns, present_names[i]) &&
                            policy_set_wants_netns(&m->policies, present_names[i]))
                                policies_on_netns(m, present_names[i]);
                strv_free_n(present_names, n);
        }
        /* Documents whose namespace came are applied. */
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                NlSocket *rtnl;
                Error e = ERROR_NULL;
                int r;

                if (!it->netns || !it->visible || it->state != IFACE_PENDING ||
                    netns_set_follows(m->netns, it->netns))
                        continue;
                r = netns_set_rtnl(m->netns, it->netns, &rtnl, &e);
                if (r == -EAGAIN)
                        netns_set_rescan(m->netns);
                else if (r < 0 && r != -ENOENT)
                        log_warning("%s: cannot follow netns %s: %s", it->ifname, it->netns,
                                    strna(e.message));
                error_done(&e);
                if (r < 0)
                        continue;
                log_info("%s: netns %s appeared; applying its document", it->ifname, it->netns);
                /* Every document of the namespace, now that it is followed. */
                for (size_t k = 0; k < iface_table_size(m->ifaces); k++) {
                        Iface *o = iface_table_at(m->ifaces, k);
                        if (o->visible && streq_ptr(o->netns, it->netns) && o->state == IFACE_PENDING)
                                request_queue_reconcile(m->queue, o, REASON_NETNS);
                }
        }
}

static int on_resync(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        log_debug("periodic resync");
        netns_set_sweep(m->netns);
        events_on_netns_change(NULL, true, m);
        daemon_reconcile_all(m);
        (void) sd_event_source_set_time(s, usec + m->config.resync_usec);
        return 0;
}

int events_resync_start(Manager *m, Error *reterr) {
        uint64_t now;
        int r;

        if (m->config.resync_usec == 0)
                return 0;
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        r = sd_event_add_time(m->event, &m->resync_source, CLOCK_MONOTONIC, now + m->config.resync_usec, 0,
                              on_resync, m);
        if (r < 0 || (r = sd_event_source_set_enabled(m->resync_source, SD_EVENT_ON)) < 0)
                return error_set(reterr, r, ERROR_INTERNAL_ERROR, "cannot set the resync timer: %s",
                                 strerror(-r));
        return 0;
}
