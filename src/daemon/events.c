/* events.c: following interfaces through RTNLGRP_LINK: a document is applied when its interface
 * appears and turns pending when it vanishes or is renamed away; lost events mean a full resync. */
#include <linux/rtnetlink.h>
#include <string.h>

#include "daemon-internal.h"
#include "log.h"

static int link_event(const struct nlmsghdr *nlh, void *userdata) {
        Daemon *d = userdata;
        NlLink l;

        if (nl_link_parse(nlh, &l) < 0)
                return 0;
        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];
                bool named = streq(it->doc->ifname, l.ifname);

                if (nlh->nlmsg_type == RTM_DELLINK) {
                        if (it->ifindex == l.ifindex) {
                                log_info("%s: interface removed; document pending", it->doc->ifname);
                                it->ifindex = 0;
                                it->state = IFACE_PENDING;
                        }
                        continue;
                }
                if (it->ifindex == l.ifindex && !named) {
                        /* Renamed away: the document follows the name, not the device. */
                        log_info("%s: interface renamed to %s; document pending", it->doc->ifname, l.ifname);
                        it->ifindex = 0;
                        it->state = IFACE_PENDING;
                        continue;
                }
                if (named && (it->state != IFACE_CONFIGURED || it->ifindex != l.ifindex)) {
                        log_info("%s: interface appeared (ifindex %d); applying its document", l.ifname,
                                 l.ifindex);
                        (void) iface_reconcile_and_save(d, it, NULL);
                }
        }
        return 0;
}

static int on_events(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Daemon *d = userdata;
        int r;

        (void) s, (void) fd, (void) revents;
        r = nl_socket_read_events(d->events, link_event, d);
        if (r == -ENOBUFS) {
                log_warning("rtnetlink events were lost (ENOBUFS); resynchronising every interface");
                (void) daemon_reconcile_all(d);
        } else if (r < 0)
                log_warning_errno(r, "reading rtnetlink events failed: %m");
        return 0;
}

int daemon_events_start(Daemon *d, Error *reterr) {
        int r;

        r = nl_socket_open(RTMGRP_LINK, &d->events, reterr);
        if (r < 0)
                return r;
        r = sd_event_add_io(d->event, &d->events_source, nl_socket_fd(d->events), EPOLLIN, on_events, d);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "cannot watch rtnetlink events: %s",
                                 strerror(-r));
        return 0;
}
