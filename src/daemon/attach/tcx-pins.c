/* tcx-pins.c: where clsd keeps its tcx links: pinned under BPFFS_DIR/tcx/ (tcx@NAME/ for a named
 * namespace) as "<ifindex>-<hook>-<pref>-<name>", read back with what each link runs, and swept at start
 * of the pins whose links no longer run anywhere. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "tcx-pins.h"
#include "nl-tcx.h"

void tcx_dir(const char *bpffs_dir, const char *netns, char buf[PATH_MAX]) {
        if (netns)
                snprintf(buf, PATH_MAX, "%s/tcx@%s", bpffs_dir, netns);
        else
                snprintf(buf, PATH_MAX, "%s/tcx", bpffs_dir);
}

void tcx_pin_name(int ifindex, Direction dir, uint16_t pref, const char *name, char buf[128]) {
        snprintf(buf, 128, "%d-%s-%u-%s", ifindex, direction_to_string(dir), pref, name);
}

static bool pin_parse(const char *s, TcxOurs *ret, int *ret_ifindex) {
        char hook[8];
        unsigned pref;
        int ifindex, n = 0;

        if (sscanf(s, "%d-%7[a-z]-%u-%n", &ifindex, hook, &pref, &n) != 3 || n == 0 || pref == 0 ||
            pref > PRIORITY_MAX || !filter_name_valid(s + n))
                return false;
        if (streq(hook, "ingress"))
                ret->dir = DIRECTION_INGRESS;
        else if (streq(hook, "egress"))
                ret->dir = DIRECTION_EGRESS;
        else
                return false;
        ret->pref = (uint16_t) pref;
        snprintf(ret->name, sizeof(ret->name), "%s", s + n);
        snprintf(ret->pin, sizeof(ret->pin), "%s", s);
        *ret_ifindex = ifindex;
        return true;
}

void tcx_ours_free(TcxOurs *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                safe_close(v[i].fd);
        free(v);
}

/* clsd's links of ifindex (every interface's with ifindex 0) in dir, sorted by (hook, pref). */
int tcx_ours_list(const char *dir, int ifindex, TcxOurs **ret, size_t *ret_n, Error *reterr) {
        char **names = NULL;
        TcxOurs *v;
        size_t n = 0, k = 0;
        int r;

        r = nl_pins_list(dir, &names, &n);
        if (r < 0)
                return error_set(reterr, -r, ERROR_KERNEL_ERROR, "cannot list %s: %s", dir, strerror(-r));
        v = calloc(n + 1, sizeof(TcxOurs));
        if (!v) {
                strv_free_n(names, n);
                return error_oom(reterr);
        }
        for (size_t i = 0; i < n; i++) {
                TcxOurs o = { .fd = -1 };
                int pin_ifindex;

                if (!pin_parse(names[i], &o, &pin_ifindex) || (ifindex > 0 && pin_ifindex != ifindex))
                        continue;
                o.fd = nl_pin_open(dir, names[i]);
                if (o.fd < 0 || nl_tcx_link_info(o.fd, &o.link) < 0) {
                        log_warning("%s/%s: not a tcx link; left alone", dir, names[i]);
                        safe_close(o.fd);
                        continue;
                }
                if (o.link.ifindex != pin_ifindex)
                        o.link.ifindex = 0;
                v[k++] = o;
        }
        strv_free_n(names, n);
        /* insertion sort: a handful of entries */
        for (size_t i = 1; i < k; i++)
                for (size_t j = i; j > 0 && (v[j - 1].dir > v[j].dir ||
                                             (v[j - 1].dir == v[j].dir && v[j - 1].pref > v[j].pref));
                     j--) {
                        TcxOurs t = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = t;
                }
        *ret = v;
        *ret_n = k;
        return 0;
}

/* At start: pins whose links no longer run anywhere (their device or namespace went while clsd was
 * down) go, in clsd's namespace (tcx/) and the named ones (tcx@NAME/). */
static void sweep_dir(const char *bpffs_dir, const char *netns_dir, const char *netns) {
        char dir[PATH_MAX], path[PATH_MAX];
        TcxOurs *ours = NULL;
        size_t n = 0;
        bool gone = false;

        tcx_dir(bpffs_dir, netns, dir);
        if (tcx_ours_list(dir, 0, &ours, &n, NULL) < 0)
                return;
        /* A namespace deleted while clsd was down may still be tearing down (the kernel frees it from
         * a workqueue), its devices and links not yet gone: its name being gone is what counts. */
        if (netns) {
                snprintf(path, sizeof(path), "%s/%s", netns_dir, netns);
                gone = access(path, F_OK) < 0 && errno == ENOENT;
        }
        for (size_t i = 0; i < n; i++)
                if ((gone || ours[i].link.ifindex == 0) && nl_unpin(dir, ours[i].pin) >= 0)
                        log_info("%s/%s: its link no longer runs anywhere; unpinned", dir, ours[i].pin);
        tcx_ours_free(ours, n);
        if (netns && rmdir(dir) >= 0)
                log_info("%s: empty; removed", dir);
}

void tcx_sweep(const char *bpffs_dir, const char *netns_dir) {
        char **names = NULL;
        size_t n = 0;

        if (!bpffs_dir)
                return;
        sweep_dir(bpffs_dir, netns_dir, NULL);
        if (nl_pins_list(bpffs_dir, &names, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (strncmp(names[i], "tcx@", 4) == 0 && netns_name_valid(names[i] + 4))
                        sweep_dir(bpffs_dir, netns_dir, names[i] + 4);
        strv_free_n(names, n);
}
