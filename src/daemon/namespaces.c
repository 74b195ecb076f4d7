/* namespaces.c: the network namespaces clsd follows. Its own, and each named one (ip-netns's
 * /run/netns/NAME) while a document names it and it exists: its fd held, a request and an event socket
 * inside it; inotify on the directory tells when one appears or goes. Holding a socket keeps a namespace
 * alive, so clsd lets go as soon as `ip netns del` removes it. */
#include <dirent.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "namespaces.h"
#include "store.h"

/* After a namespace file appears, ip-netns mounts the namespace on it: look again this often, this
 * many times, before giving up until the next event or resync. */
#define NETNS_SCAN_DELAY_USEC (20 * 1000ULL)
#define NETNS_SCAN_TRIES_MAX 100

struct Netns {
        NetnsSet *set;
        char *name; /* NULL: clsd's own */
        int fd; /* the named namespace, held while followed; -1 for clsd's own */
        NlSocket *rtnl;
        NlSocket *events;
        sd_event_source *events_source;
};

struct NetnsSet {
        sd_event *event;
        char *dir;
        Netns own;
        Netns **named;
        size_t n_named;
        dev_t own_dev;
        ino_t own_ino;
        int watch_fd;
        sd_event_source *watch_source;
        sd_event_source *scan_source;
        unsigned scan_tries;
        NetnsEventFunc on_event;
        NetnsChangeFunc on_change;
        void *userdata;
};

static int event_cb(const struct nlmsghdr *nlh, void *userdata) {
        Netns *ns = userdata;
        ns->set->on_event(ns->name, nlh, false, ns->set->userdata);
        return 0;
}

static int on_events(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Netns *ns = userdata;
        int r;

        (void) source, (void) fd, (void) revents;
        r = nl_socket_read_events(ns->events, event_cb, ns);
        if (r == -ENOBUFS) {
                log_warning("%s%srtnetlink events were lost (ENOBUFS); resynchronising every interface",
                            strempty(ns->name), ns->name ? ": " : "");
                ns->set->on_event(ns->name, NULL, true, ns->set->userdata);
        } else if (r < 0)
                log_warning_errno(r, "reading rtnetlink events failed: %m");
        return 0;
}

static int events_start(NetnsSet *s, Netns *ns, Error *reterr) {
        int r;

        r = nl_socket_open_in(ns->fd, RTMGRP_LINK | RTMGRP_TC, &ns->events, reterr);
        if (r < 0)
                return r;
        r = sd_event_add_io(s->event, &ns->events_source, nl_socket_fd(ns->events), EPOLLIN, on_events, ns);
        if (r < 0)
                return error_set(reterr, r, ERROR_INTERNAL_ERROR, "cannot watch rtnetlink events: %s",
                                 strerror(-r));
        return 0;
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

int netns_set_new(sd_event *event, const char *dir, NetnsEventFunc on_event, NetnsChangeFunc on_change,
                  void *userdata, NetnsSet **ret, Error *reterr) {
        NetnsSet *s = calloc(1, sizeof(*s));
        struct stat st;
        int r;

        if (!s || !(s->dir = strdup(dir))) {
                free(s);
                return error_oom(reterr);
        }
        s->event = sd_event_ref(event);
        s->own = (Netns){ .set = s, .fd = -1 };
        s->watch_fd = -1;
        s->on_event = on_event;
        s->on_change = on_change;
        s->userdata = userdata;
        if (stat("/proc/self/ns/net", &st) >= 0) {
                s->own_dev = st.st_dev;
                s->own_ino = st.st_ino;
        }
        r = nl_socket_open(0, &s->own.rtnl, reterr);
        if (r < 0) {
                netns_set_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

NetnsSet *netns_set_free(NetnsSet *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_named; i++)
                netns_free(s->named[i]);
        free(s->named);
        sd_event_source_disable_unref(s->own.events_source);
        nl_socket_free(s->own.events);
        nl_socket_free(s->own.rtnl);
        sd_event_source_disable_unref(s->watch_source);
        sd_event_source_disable_unref(s->scan_source);
        safe_close(s->watch_fd);
        sd_event_unref(s->event);
        free(s->dir);
        free(s);
        return NULL;
}

static Netns *netns_find(NetnsSet *s, const char *name) {
        if (!name)
                return &s->own;
        for (size_t i = 0; i < s->n_named; i++)
                if (streq(s->named[i]->name, name))
                        return s->named[i];
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(Netns *, netns_free);

static int netns_follow(NetnsSet *s, const char *name, Netns **ret, Error *reterr) {
        _cleanup_(netns_freep) Netns *ns = NULL;
        Netns **v;
        int r;

        if ((*ret = netns_find(s, name)))
                return 0;
        ns = calloc(1, sizeof(*ns));
        if (!ns)
                return error_oom(reterr);
        ns->set = s;
        ns->fd = -1;
        if (!(ns->name = strdup(name)))
                return error_oom(reterr);
        r = nl_netns_open(s->dir, name, &ns->fd, reterr);
        if (r < 0)
                return r;
        r = nl_socket_open_in(ns->fd, 0, &ns->rtnl, reterr);
        if (r < 0)
                return r;
        r = events_start(s, ns, reterr);
        if (r < 0)
                return r;
        v = realloc(s->named, (s->n_named + 1) * sizeof(Netns *));
        if (!v)
                return error_oom(reterr);
        s->named = v;
        log_info("netns %s: following", name);
        *ret = s->named[s->n_named++] = TAKE_PTR(ns);
        return 0;
}

int netns_set_rtnl(NetnsSet *s, const char *name, NlSocket **ret, Error *reterr) {
        Netns *ns = NULL;
        int r;

        r = netns_follow(s, name, &ns, reterr);
        if (r < 0)
                return r;
        *ret = ns->rtnl;
        return 0;
}

NlSocket *netns_set_rtnl_followed(NetnsSet *s, const char *name) {
        Netns *ns = netns_find(s, name);
        return ns ? ns->rtnl : NULL;
}

void netns_set_drain(NetnsSet *s, const char *name) {
        Netns *ns = netns_find(s, name);
        if (ns && ns->events)
                (void) on_events(NULL, -1, 0, ns);
}

bool netns_set_follows(NetnsSet *s, const char *name) {
        return name && netns_find(s, name);
}

int netns_set_enter(NetnsSet *s, const char *name, int *ret_saved, Error *reterr) {
        Netns *ns;
        int r;

        *ret_saved = -1;
        if (!name)
                return 0;
        ns = netns_find(s, name);
        if (!ns)
                return error_set(reterr, ENOENT, ERROR_KERNEL_ERROR, "netns %s is not followed", name);
        r = nl_netns_enter(ns->fd, ret_saved);
        if (r < 0)
                return error_set(reterr, -r, ERROR_KERNEL_ERROR, "cannot enter netns %s: %s", name,
                                 strerror(-r));
        return 0;
}

bool netns_set_is_own(NetnsSet *s, const char *name) {
        char path[PATH_MAX];
        struct stat st;

        if (!name)
                return true;
        snprintf(path, sizeof(path), "%s/%s", s->dir, name);
        return s->own_ino != 0 && stat(path, &st) >= 0 && st.st_dev == s->own_dev && st.st_ino == s->own_ino;
}

void netns_set_release(NetnsSet *s, const char *name) {
        Netns *ns = name ? netns_find(s, name) : NULL;

        if (!ns)
                return;
        for (size_t i = 0; i < s->n_named; i++)
                if (s->named[i] == ns) {
                        memmove(s->named + i, s->named + i + 1, (s->n_named - i - 1) * sizeof(Netns *));
                        s->n_named--;
                        break;
                }
        log_info("netns %s: no longer followed", name);
        netns_free(ns);
}

/* Whether the followed namespace is still the one at its path (`ip netns del` and add again make
 * another). */
static bool still_there(NetnsSet *s, const Netns *ns) {
        char path[PATH_MAX];
        struct stat a, b;

        snprintf(path, sizeof(path), "%s/%s", s->dir, ns->name);
        return stat(path, &a) >= 0 && fstat(ns->fd, &b) >= 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void netns_set_sweep(NetnsSet *s) {
        for (size_t i = 0; i < s->n_named;) {
                _cleanup_free_ char *name = NULL;
                if (still_there(s, s->named[i])) {
                        i++;
                        continue;
                }
                name = strdup(s->named[i]->name);
                netns_set_release(s, s->named[i]->name);
                if (name)
                        s->on_change(name, false, s->userdata);
        }
}

static void schedule_scan(NetnsSet *s);

/* The directory changed, or a namespace was still being made: what went is let go, what came is the
 * manager's to follow. */
static void scan(NetnsSet *s) {
        netns_set_sweep(s);
        s->on_change(NULL, true, s->userdata);
}

static int on_scan(sd_event_source *source, uint64_t usec, void *userdata) {
        NetnsSet *s = userdata;

        (void) source, (void) usec;
        scan(s);
        return 0;
}

static void schedule_scan(NetnsSet *s) {
        uint64_t now;

        s->scan_tries++;
        (void) sd_event_now(s->event, CLOCK_MONOTONIC, &now);
        if (!s->scan_source) {
                if (sd_event_add_time(s->event, &s->scan_source, CLOCK_MONOTONIC,
                                      now + NETNS_SCAN_DELAY_USEC, 0, on_scan, s) < 0)
                        return;
        } else
                (void) sd_event_source_set_time(s->scan_source, now + NETNS_SCAN_DELAY_USEC);
        (void) sd_event_source_set_enabled(s->scan_source, SD_EVENT_ONESHOT);
}

void netns_set_rescan(NetnsSet *s) {
        if (s->scan_tries < NETNS_SCAN_TRIES_MAX)
                schedule_scan(s);
}

static int on_watch(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        NetnsSet *s = userdata;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

        (void) source, (void) revents;
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
        }
        /* A deletion is handled now, so the namespace is not kept alive by our sockets; an arrival
         * once ip-netns has mounted it (the timer looks again). */
        s->scan_tries = 0;
        scan(s);
        schedule_scan(s);
        return 0;
}

int netns_set_start(NetnsSet *s, Error *reterr) {
        int r;

        r = events_start(s, &s->own, reterr);
        if (r < 0)
                return r;
        /* ip-netns creates it too; made here, it can be watched before the first namespace exists. */
        r = mkdir_p(s->dir, 0755);
        if (r < 0)
                return error_set(reterr, -r, ERROR_INTERNAL_ERROR, "cannot create %s: %s", s->dir,
                                 strerror(-r));
        s->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (s->watch_fd < 0 && errno == EMFILE) {
                /* the user's inotify instances (each clsd takes one), not its files: say which limit */
                _cleanup_free_ char *max = NULL;
                size_t n = 0;
                (void) read_full_file("/proc/sys/fs/inotify/max_user_instances", 32, &max, &n);
                while (n > 0 && max[n - 1] == '\n')
                        max[--n] = 0;
                return error_set(reterr, EMFILE, ERROR_INTERNAL_ERROR,
                                 "cannot watch %s: this user has all the inotify instances it may have "
                                 "(fs.inotify.max_user_instances is %s; each clsd takes one)",
                                 s->dir, n ? max : "unknown");
        }
        if (s->watch_fd < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "inotify: %m");
        if (inotify_add_watch(s->watch_fd, s->dir,
                              IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF) < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "cannot watch %s: %m", s->dir);
        r = sd_event_add_io(s->event, &s->watch_source, s->watch_fd, EPOLLIN, on_watch, s);
        if (r < 0)
                return error_set(reterr, r, ERROR_INTERNAL_ERROR, "cannot watch %s: %s", s->dir,
                                 strerror(-r));
        return 0;
}

int netns_set_list_present(NetnsSet *s, char ***ret, size_t *ret_n) {
        _cleanup_(closedirp) DIR *dir = opendir(s->dir);
        char **v = NULL;
        size_t n = 0;
        struct dirent *de;

        while (dir && (de = readdir(dir))) {
                char **nv;
                int fd;
                if (!netns_name_valid(de->d_name) || nl_netns_open(s->dir, de->d_name, &fd, NULL) < 0)
                        continue;
                close(fd);
                nv = realloc(v, (n + 2) * sizeof(char *));
                if (!nv || !(nv[n] = strdup(de->d_name))) {
                        strv_free_n(nv ?: v, n);
                        return -ENOMEM;
                }
                v = nv;
                n++;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
