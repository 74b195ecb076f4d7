/* netns.c: named network namespaces (ip-netns's /run/netns/NAME). A namespace is followed (its fd
 * held, a request and an event socket opened inside it) while a document names it and it exists;
 * inotify on the directory tells when one appears or goes. Holding a socket keeps a namespace alive,
 * so clsd lets go as soon as `ip netns del` removes it. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-internal.h"
#include "fileio.h"
#include "log.h"

/* After a namespace file appears, ip-netns mounts the namespace on it: look again this often, this
 * many times, before giving up until the next event or resync. */
#define NETNS_SCAN_DELAY_USEC (20 * 1000ULL)
#define NETNS_SCAN_TRIES_MAX 100

static Netns *netns_find(Daemon *d, const char *name) {
        for (size_t i = 0; i < d->n_netns; i++)
                if (streq(d->netns[i]->name, name))
                        return d->netns[i];
        return NULL;
}

static Netns *netns_free(Netns *ns) {
        if (!ns)
                return NULL;
        sd_event_source_disable_unref(ns->events_source);
        nl_socket_free(ns->events);
        nl_socket_free(ns->rtnl);
        safe_close(ns->fd);
        free(ns->name);
        free(ns);
        return NULL;
}

static int netns_follow(Daemon *d, const char *name, Netns **ret, Error *reterr) {
        Netns *ns = netns_find(d, name), **v = NULL;
        int r;

        if (ns) {
                *ret = ns;
                return 0;
        }
        ns = calloc(1, sizeof(*ns));
        if (!ns || !(ns->name = strdup(name))) {
                free(ns);
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        }
        ns->daemon = d;
        ns->fd = -1;
        r = nl_netns_open(d->config.netns_dir, name, &ns->fd, reterr);
        if (r >= 0)
                r = nl_socket_open_in(ns->fd, 0, &ns->rtnl, reterr);
        if (r >= 0)
                r = netns_events_start(d, ns, reterr);
        if (r >= 0 && !(v = realloc(d->netns, (d->n_netns + 1) * sizeof(Netns *))))
                r = error_set(reterr, ENOMEM, "internal_error", "out of memory");
        if (r < 0) {
                netns_free(ns);
                return r;
        }
        d->netns = v;
        d->netns[d->n_netns++] = ns;
        log_info("netns %s: following", name);
        *ret = ns;
        return 0;
}

/* The documents of the namespace turn pending; its sockets and fd are let go. */
static void netns_unfollow(Daemon *d, Netns *ns) {
        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];
                if (!streq_ptr(it->doc->netns, ns->name))
                        continue;
                if (it->state != IFACE_PENDING)
                        log_info("%s: netns %s is gone; document pending", it->doc->ifname, ns->name);
                it->state = IFACE_PENDING;
                it->ifindex = 0;
                error_done(&it->error);
        }
        for (size_t i = 0; i < d->n_netns; i++)
                if (d->netns[i] == ns) {
                        memmove(d->netns + i, d->netns + i + 1, (d->n_netns - i - 1) * sizeof(Netns *));
                        d->n_netns--;
                        break;
                }
        log_info("netns %s: no longer followed", ns->name);
        netns_free(ns);
}

static bool netns_named(Daemon *d, const char *name) {
        for (size_t i = 0; i < d->n_ifaces; i++)
                if (streq_ptr(d->ifaces[i]->doc->netns, name))
                        return true;
        return false;
}

void netns_release_if_unused(Daemon *d, const char *netns) {
        Netns *ns = netns ? netns_find(d, netns) : NULL;
        if (ns && !netns_named(d, netns))
                netns_unfollow(d, ns);
}

int daemon_rtnl(Daemon *d, const char *netns, NlSocket **ret, Error *reterr) {
        Netns *ns;
        int r;

        if (!netns) {
                *ret = d->own.rtnl;
                return 0;
        }
        r = netns_follow(d, netns, &ns, reterr);
        if (r < 0)
                return r;
        *ret = ns->rtnl;
        return 0;
}

int daemon_link_by_name(Daemon *d, const char *netns, const char *ifname, NlSocket **ret_rtnl, NlLink *ret,
                        Error *reterr) {
        NlSocket *rtnl;
        int r;

        r = daemon_rtnl(d, netns, &rtnl, reterr);
        if (r == -ENOENT || r == -EAGAIN)
                return -ENODEV; /* an absent namespace is like an absent interface: the document waits */
        if (r < 0)
                return r;
        r = nl_link_by_name(rtnl, ifname, ret, reterr);
        if (r < 0)
                return r;
        *ret_rtnl = rtnl;
        return 0;
}

int daemon_netns_enter(Daemon *d, const char *netns, int *ret_saved, Error *reterr) {
        Netns *ns;
        int r;

        *ret_saved = -1;
        if (!netns)
                return 0;
        ns = netns_find(d, netns);
        if (!ns)
                return error_set(reterr, ENOENT, "kernel_error", "netns %s is not followed", netns);
        r = nl_netns_enter(ns->fd, ret_saved);
        if (r < 0)
                return error_set(reterr, -r, "kernel_error", "cannot enter netns %s: %s", netns,
                                 strerror(-r));
        return 0;
}

/* Whether the followed namespace is still the one at its path (`ip netns del` and add again make
 * another). */
static bool netns_still_there(Daemon *d, const Netns *ns) {
        char path[PATH_MAX];
        struct stat a, b;

        snprintf(path, sizeof(path), "%s/%s", d->config.netns_dir, ns->name);
        return stat(path, &a) >= 0 && fstat(ns->fd, &b) >= 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static void schedule_scan(Daemon *d);

/* Namespaces that went are let go; documents whose namespace came are applied. */
void daemon_netns_scan(Daemon *d) {
        bool again = false;

        for (size_t i = 0; i < d->n_netns;) {
                Netns *ns = d->netns[i];
                if (netns_still_there(d, ns)) {
                        i++;
                        continue;
                }
                netns_unfollow(d, ns);
        }
        for (size_t i = 0; i < d->n_ifaces; i++) {
                Iface *it = d->ifaces[i];
                Netns *ns;
                Error e = ERROR_NULL;
                int r;

                if (!it->doc->netns || it->state != IFACE_PENDING || netns_find(d, it->doc->netns))
                        continue;
                r = netns_follow(d, it->doc->netns, &ns, &e);
                if (r == -EAGAIN)
                        again = true;
                else if (r < 0 && r != -ENOENT)
                        log_warning("%s: cannot follow netns %s: %s", it->doc->ifname, it->doc->netns,
                                    strna(e.message));
                error_done(&e);
                if (r < 0)
                        continue;
                log_info("%s: netns %s appeared; applying its document", it->doc->ifname, it->doc->netns);
                /* Every document of the namespace, now that it is followed. */
                for (size_t k = 0; k < d->n_ifaces; k++)
                        if (streq_ptr(d->ifaces[k]->doc->netns, ns->name) &&
                            d->ifaces[k]->state == IFACE_PENDING)
                                iface_reconcile_or_retry(d, d->ifaces[k]);
        }
        if (again && d->netns_scan_tries < NETNS_SCAN_TRIES_MAX)
                schedule_scan(d);
        else if (!again)
                d->netns_scan_tries = 0;
}

static int on_scan(sd_event_source *s, uint64_t usec, void *userdata) {
        Daemon *d = userdata;

        (void) s, (void) usec;
        daemon_netns_scan(d);
        return 0;
}

static void schedule_scan(Daemon *d) {
        uint64_t now;

        d->netns_scan_tries++;
        (void) sd_event_now(d->event, CLOCK_MONOTONIC, &now);
        if (!d->netns_scan_source) {
                if (sd_event_add_time(d->event, &d->netns_scan_source, CLOCK_MONOTONIC,
                                      now + NETNS_SCAN_DELAY_USEC, 0, on_scan, d) < 0)
                        return;
        } else
                (void) sd_event_source_set_time(d->netns_scan_source, now + NETNS_SCAN_DELAY_USEC);
        (void) sd_event_source_set_enabled(d->netns_scan_source, SD_EVENT_ONESHOT);
}

static int on_watch(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Daemon *d = userdata;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool gone = false;

        (void) s, (void) revents;
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *) p;
                        gone = gone || (ev->mask & (IN_DELETE | IN_MOVED_FROM | IN_Q_OVERFLOW));
                        p += sizeof(*ev) + ev->len;
                }
        }
        /* A deletion is handled now, so the namespace is not kept alive by our sockets; an arrival
         * once ip-netns has mounted it. */
        d->netns_scan_tries = 0;
        if (gone)
                daemon_netns_scan(d);
        schedule_scan(d);
        return 0;
}

int daemon_netns_start(Daemon *d, Error *reterr) {
        int r;

        /* ip-netns creates it too; made here, it can be watched before the first namespace exists. */
        r = mkdir_p(d->config.netns_dir, 0755);
        if (r < 0)
                return error_set(reterr, -r, "internal_error", "cannot create %s: %s", d->config.netns_dir,
                                 strerror(-r));
        d->netns_watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (d->netns_watch_fd < 0)
                return error_set(reterr, errno, "internal_error", "inotify: %m");
        if (inotify_add_watch(d->netns_watch_fd, d->config.netns_dir,
                              IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF) < 0)
                return error_set(reterr, errno, "internal_error", "cannot watch %s: %m",
                                 d->config.netns_dir);
        r = sd_event_add_io(d->event, &d->netns_watch_source, d->netns_watch_fd, EPOLLIN, on_watch, d);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "cannot watch %s: %s", d->config.netns_dir,
                                 strerror(-r));
        return 0;
}

void daemon_netns_free(Daemon *d) {
        for (size_t i = 0; i < d->n_netns; i++)
                netns_free(d->netns[i]);
        free(d->netns);
        d->netns = NULL;
        d->n_netns = 0;
        sd_event_source_disable_unref(d->netns_watch_source);
        sd_event_source_disable_unref(d->netns_scan_source);
        safe_close(d->netns_watch_fd);
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

int daemon_netns_list(Daemon *d, NetnsView **ret, size_t *ret_n, Error *reterr) {
        DIR *dir = opendir(d->config.netns_dir);
        NetnsView *v = NULL;
        size_t n = 0;
        struct dirent *de;
        int k;

        while (dir && (de = readdir(dir))) {
                int fd;
                if (!netns_name_valid(de->d_name))
                        continue;
                if (nl_netns_open(d->config.netns_dir, de->d_name, &fd, NULL) < 0)
                        continue;
                close(fd);
                k = netns_view_add(&v, &n, de->d_name);
                if (k < 0)
                        break;
                v[k].present = true;
        }
        if (dir)
                closedir(dir);
        for (size_t i = 0; i < d->n_ifaces; i++) {
                const char *name = d->ifaces[i]->doc->netns;
                if (!name)
                        continue;
                k = netns_view_add(&v, &n, name);
                if (k < 0) {
                        free(v);
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                }
                v[k].documents++;
        }
        for (size_t i = 0; i < n; i++)
                v[i].followed = netns_find(d, v[i].name) != NULL;
        if (n > 0)
                qsort(v, n, sizeof(NetnsView), netns_view_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}
