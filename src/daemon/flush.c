/* flush.c: `clsd --flush`: takes out of the kernel everything clsd attached (its cls_bpf filters, in
 * its own namespace and the named ones, its pinned tcx links, its program pins) and keeps the store,
 * so that the next start attaches it all again. Refused while a clsd runs on the state directory. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "fileio.h"
#include "log.h"
#include "nl-map.h"
#include "nl-tcx.h"
#include "store-policy.h"

typedef struct FlushCount {
        unsigned filters, links, pins, errors;
        /* the programs this clsd pinned (its bpffs progs/): a clsd-named filter running another is
         * another clsd's (another state directory on the host), not to be touched; NULL: no pins to
         * tell by, every clsd-named filter goes */
        uint32_t *ids;
        size_t n_ids;
} FlushCount;

static bool ours(const FlushCount *c, uint32_t prog_id) {
        if (!c->ids)
                return true;
        for (size_t i = 0; i < c->n_ids; i++)
                if (c->ids[i] == prog_id)
                        return true;
        return false;
}

/* The ids of the programs pinned in bpffs_dir/progs/. */
static void pinned_ids(const char *bpffs_dir, FlushCount *c) {
        char dir[PATH_MAX], **pins = NULL;
        size_t n = 0;

        snprintf(dir, sizeof(dir), "%s/progs", bpffs_dir);
        if (nl_pins_list(dir, &pins, &n) < 0 || n == 0) {
                strv_free_n(pins, n);
                return;
        }
        c->ids = calloc(n, sizeof(uint32_t));
        for (size_t i = 0; c->ids && i < n; i++) {
                _cleanup_close_ int fd = nl_pin_open(dir, pins[i]);
                NlProgramStats st;
                if (fd >= 0 && nl_program_stats_fd(fd, &st, NULL) >= 0)
                        c->ids[c->n_ids++] = st.id;
        }
        strv_free_n(pins, n);
}

static void flush_filters(NlSocket *s, const char *where, FlushCount *c) {
        _cleanup_free_ NlLink *links = NULL;
        size_t n_links = 0;
        _cleanup_error_ Error e = ERROR_NULL;

        if (nl_link_list(s, &links, &n_links, &e) < 0) {
                fprintf(stderr, "clsd: --flush: %s: %s\n", where, e.message);
                c->errors++;
                return;
        }
        for (size_t i = 0; i < n_links; i++) {
                _cleanup_free_ NlFilter *f = NULL;
                size_t n = 0;

                if (nl_filter_dump(s, links[i].ifindex, &f, &n, NULL) < 0)
                        continue; /* gone meanwhile */
                for (size_t k = 0; k < n; k++) {
                        if (!f[k].clsd_owned || !ours(c, f[k].prog_id))
                                continue;
                        if (nl_filter_del(s, links[i].ifindex, f[k].parent, f[k].pref, f[k].protocol,
                                          f[k].handle, &e) < 0) {
                                fprintf(stderr, "clsd: --flush: %s%s: %s: %s\n", where, links[i].ifname,
                                        f[k].name, e.message);
                                error_done(&e);
                                c->errors++;
                                continue;
                        }
                        printf("removed filter %s on %s%s (pref %u)\n",
                               f[k].name + strlen(NL_FILTER_NAME_PREFIX), where, links[i].ifname, f[k].pref);
                        c->filters++;
                }
        }
}

static void flush_namespaces(const char *netns_dir, FlushCount *c) {
        _cleanup_(closedirp) DIR *dh = opendir(netns_dir);
        struct dirent *de;

        while (dh && (de = readdir(dh))) {
                _cleanup_(nl_socket_freep) NlSocket *s = NULL;
                char where[300];
                int fd;

                if (de->d_name[0] == '.' || nl_netns_open(netns_dir, de->d_name, &fd, NULL) < 0)
                        continue;
                if (nl_socket_open_in(fd, 0, &s, NULL) >= 0) {
                        snprintf(where, sizeof(where), "%s/", de->d_name);
                        flush_filters(s, where, c);
                }
                safe_close(fd);
        }
}

/* tcx/ and tcx@NAME/: every pinned link is detached, then unpinned; progs/: unpinned. */
static void flush_pins(const char *bpffs_dir, FlushCount *c) {
        _cleanup_(closedirp) DIR *dh = opendir(bpffs_dir);
        struct dirent *de;

        while (dh && (de = readdir(dh))) {
                bool tcx = streq(de->d_name, "tcx") || strncmp(de->d_name, "tcx@", 4) == 0;
                char dir[PATH_MAX];
                char **pins = NULL;
                size_t n = 0;

                if (!tcx && !streq(de->d_name, "progs"))
                        continue;
                snprintf(dir, sizeof(dir), "%s/%s", bpffs_dir, de->d_name);
                if (nl_pins_list(dir, &pins, &n) < 0)
                        continue;
                for (size_t i = 0; i < n; i++) {
                        _cleanup_error_ Error e = ERROR_NULL;
                        int fd = tcx ? nl_pin_open(dir, pins[i]) : -1;
                        if (fd >= 0 && nl_tcx_detach(fd, &e) < 0) {
                                fprintf(stderr, "clsd: --flush: %s/%s: %s\n", dir, pins[i], e.message);
                                c->errors++;
                        } else if (fd >= 0) {
                                printf("detached tcx link %s/%s\n", dir, pins[i]);
                                c->links++;
                        }
                        safe_close(fd);
                        if (nl_unpin(dir, pins[i]) >= 0 && !tcx)
                                c->pins++;
                }
                strv_free_n(pins, n);
        }
}

int daemon_flush(const DaemonConfig *config) {
        _cleanup_(nl_socket_freep) NlSocket *s = NULL;
        _cleanup_(store_freep) Store *store = NULL;
        FlushCount c = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;

        /* The store's lock says whether a clsd runs: it would put everything back at once. */
        if (store_open(config->state_dir, &store, &e) < 0 || nl_socket_open(0, &s, &e) < 0) {
                fprintf(stderr, "clsd: --flush: %s\n", e.message);
                return -EBUSY;
        }
        if (config->bpffs_dir)
                pinned_ids(config->bpffs_dir, &c);
        flush_filters(s, "", &c);
        if (config->netns_dir)
                flush_namespaces(config->netns_dir, &c);
        if (config->bpffs_dir)
                flush_pins(config->bpffs_dir, &c);
        printf("removed %u filter(s), %u tcx link(s) and %u program pin(s); the store is kept, so the next "
               "start attaches its documents again\n",
               c.filters, c.links, c.pins);
        free(c.ids);
        return c.errors ? -EIO : 0;
}
