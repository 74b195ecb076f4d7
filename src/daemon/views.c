/* views.c: what the faces read of the daemon: the visible interfaces in order, each one's status (clsd's
 * own view with the counters the kernel keeps per packet), kernel features, counters, the links and
 * namespaces clsd sees. Reads change nothing of the view; none dumps what events keep current. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attach.h"
#include "manager.h"
#include "views.h"
#include "daemon-fleet.h"
#include "daemon-objects.h"
#include "nl-map.h"

struct Views {
        struct {
                Iface **list;
                size_t n, capacity;
                uint64_t version; /* the table's version + 1 it was made at */
        } visible; /* the interfaces the faces see, in order */
        struct {
                uint32_t prog_id;
                uint64_t usec; /* the loop's now it was read at */
                NlProgramStats stats;
        } stats_memo; /* the last program's run counts, for the filters that share it */
        struct {
                uint64_t usec; /* the turn of the loop it was read in */
                bool on;
        } counting; /* whether the kernel counts programs' runs (BPF_ENABLE_STATS held by anyone) */
};

int views_new(Views **ret) {
        *ret = calloc(1, sizeof(Views));
        return *ret ? 0 : -ENOMEM;
}

Views *views_free(Views *v) {
        if (v)
                free(v->visible.list);
        free(v);
        return NULL;
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
        if (m->views->counting.usec != now || now == 0) {
                _cleanup_close_ int fd = open("/proc/sys/kernel/bpf_stats_enabled", O_RDONLY | O_CLOEXEC);
                m->views->counting.on = fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0 && buf[0] == '1';
                m->views->counting.usec = now;
        }
        return m->views->counting.on;
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

/* The visible interfaces in the table's order, made again when the table changed: the faces walk
 * them with daemon_iface_at() in O(1) each. */
static void visible_index(Manager *m) {
        uint64_t v = iface_table_version(m->ifaces) + 1; /* never 0: 0 is "not made yet" */
        size_t n = 0;

        if (m->views->visible.version == v)
                return;
        if (m->views->visible.capacity < iface_table_size(m->ifaces)) {
                size_t cap = iface_table_size(m->ifaces) * 2;
                Iface **list = realloc(m->views->visible.list, cap * sizeof(Iface *));
                if (!list) {
                        m->views->visible.n = 0;
                        m->views->visible.version = 0;
                        return;
                }
                m->views->visible.list = list;
                m->views->visible.capacity = cap;
        }
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                if (it->visible)
                        m->views->visible.list[n++] = it;
        }
        m->views->visible.n = n;
        m->views->visible.version = v;
}

size_t daemon_iface_count(Manager *m) {
        visible_index(m);
        return m->views->visible.n;
}

Iface *const *daemon_ifaces(Manager *m, size_t *ret_n) {
        visible_index(m);
        *ret_n = m->views->visible.n;
        return m->views->visible.list;
}

Iface *daemon_iface_at(Manager *m, size_t i) {
        visible_index(m);
        return i < m->views->visible.n ? m->views->visible.list[i] : NULL;
}

Iface *daemon_iface_get(Manager *m, const char *netns, const char *ifname) {
        Iface *it = iface_table_get(m->ifaces, netns, ifname);
        return it && it->visible ? it : NULL;
}

/* From clsd's own view, kept current by the reconciles that every tc event, retry and resync bring (no
 * dump per request); only the act_bpf actions' counters, which change with every packet and raise no
 * event, are read from the kernel, for an interface that has actions. */
/* The kernel's run counts for what is attached: a program's, so that one shared by many filters is
 * asked once per turn of the loop (a scrape's). Not counted: no run counts (null, and not in /metrics),
 * not zeros. */
static void program_stats(Manager *m, const Filter *f, FilterStatus *fs, uint64_t now) {
        NlProgramStats ps;
        int r;

        if (!fs->observed.classifier_attached)
                return;
        if (m->views->stats_memo.prog_id == fs->observed.prog_id && m->views->stats_memo.usec == now) {
                ps = m->views->stats_memo.stats;
                r = 0;
        } else if (f->program && program_id(f->program) == fs->observed.prog_id)
                r = nl_program_stats_fd(program_fd(f->program), &ps, NULL);
        else
                r = nl_program_stats(fs->observed.prog_id, &ps, NULL);
        if (r < 0)
                return;
        m->views->stats_memo.prog_id = fs->observed.prog_id;
        m->views->stats_memo.usec = now;
        m->views->stats_memo.stats = ps;
        fs->has_stats = true;
        fs->run_count = ps.run_count;
        fs->run_time_ns = ps.run_time_ns;
}

/* The act_bpf actions' counters, read from the kernel into the status (a read: nothing else). */
static void action_counters(Manager *m, const Iface *it, IfaceStatus *s) {
        NlSocket *rtnl = iface_uses_actions(it) ? netns_set_rtnl_followed(m->netns, it->netns) : NULL;
        AttachContext c;

        if (!rtnl)
                return;
        attach_context_init(m, (Iface *) it, rtnl, &c);
        (void) attach_counters_all(&c, s->filters, NULL);
        attach_context_done(&c);
}

/* From clsd's own view, kept current by the reconciles that every tc event, retry and resync bring (no
 * dump per request, and nothing of the view changes). Counters the kernel keeps per packet and reports
 * by no event are read: the programs' run counts (once per program per turn of the loop, a scrape's),
 * and the act_bpf actions' packets and bytes, for an interface that has actions. */
int daemon_iface_status(Manager *m, const Iface *it, IfaceStatus *ret, Error *reterr) {
        IfaceStatus s = { .n_filters = it->n_filters };
        uint64_t now = 0;

        s.filters = calloc(it->n_filters + 1, sizeof(FilterStatus));
        if (!s.filters)
                return error_oom(reterr);
        if (it->ifindex <= 0) {
                *ret = s; /* pending: nothing is attached */
                return 0;
        }
        for (size_t i = 0; i < it->n_filters; i++)
                s.filters[i].observed = it->filters[i].observed;
        action_counters(m, it, &s);
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        if (stats_counting(m, now))
                for (size_t i = 0; i < it->n_filters; i++)
                        program_stats(m, &it->filters[i], &s.filters[i], now);
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
                r = error_set(reterr, ENOENT, ERROR_NETNS_NOT_FOUND, "no network namespace %s in %s", netns,
                              m->config.netns_dir);
        }
        if (r >= 0) {
                netns_set_drain(m->netns, netns);
                r = links_get(m->links, rtnl, netns, true, &links, &n, reterr);
        }
        if (r >= 0 && !(v = calloc(n + 1, sizeof(LinkView))))
                r = error_oom(reterr);
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
                return error_oom(reterr);
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
                return error_oom(reterr);
        }
        for (size_t i = 0; i < n; i++)
                v[i].followed = netns_set_follows(m->netns, v[i].name);
        if (n > 0)
                qsort(v, n, sizeof(NetnsView), netns_view_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}

void daemon_set_fleet(Manager *m, const DaemonFleet *status) {
        m->fleet.status = status;
}

const DaemonFleet *daemon_fleet(Manager *m) {
        return m->fleet.status ?: &m->fleet.none;
}
