/* tcx.c: the reconciler's side of "attach":"tcx": clsd's tcx links are the ones pinned under
 * BPFFS_DIR/tcx/ as "<ifindex>-<hook>-<pref>-<name>", so they outlive clsd and a restart finds them;
 * on each hook they run in priority order among themselves, beside anyone else's tcx programs. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon-internal.h"
#include "fileio.h"
#include "log.h"

bool filter_uses_tcx(const Daemon *d, const FilterSpec *f) {
        if (f->attach == ATTACH_TCX)
                return true;
        return f->attach == ATTACH_AUTO && d->tcx && f->direct_action && !f->has_classid && !f->has_parent &&
               f->n_actions == 0;
}

bool document_uses_tcx(const Daemon *d, const Document *doc) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < doc->n_filters[dir]; i++)
                        if (filter_uses_tcx(d, &doc->filters[dir][i]))
                                return true;
        return false;
}

int document_check_tcx(const Daemon *d, const Document *doc, Error *reterr) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < doc->n_filters[dir]; i++)
                        for (size_t k = 0; k < i; k++) {
                                const FilterSpec *a = &doc->filters[dir][k], *b = &doc->filters[dir][i];
                                if (filter_uses_tcx(d, a) && filter_uses_tcx(d, b) &&
                                    streq_ptr(a->digest, b->digest) && streq_ptr(a->program, b->program))
                                        return error_set(
                                                reterr, EEXIST, "duplicate_program",
                                                "%s[%zu]: tcx runs a program at most once per hook, and "
                                                "\"%s\" runs %s of %s already; attach one of them as "
                                                "cls_bpf",
                                                direction_to_string(dir), i, a->name, strna(a->program),
                                                strna(a->digest));
                        }
        return 0;
}

/* Interfaces of a named namespace have their own ifindex space: their pins have their own directory. */
static void tcx_dir(const Daemon *d, const char *netns, char buf[PATH_MAX]) {
        if (netns)
                snprintf(buf, PATH_MAX, "%s/tcx@%s", d->config.bpffs_dir, netns);
        else
                snprintf(buf, PATH_MAX, "%s/tcx", d->config.bpffs_dir);
}

int daemon_tcx_ready(Daemon *d, const char *netns, Error *reterr) {
        char dir[PATH_MAX];
        int r;

        if (!d->tcx)
                return error_set(reterr, EOPNOTSUPP, "tcx_unavailable",
                                 "this kernel (%s) has no tcx (Linux 6.6+); use \"attach\": \"cls_bpf\" or "
                                 "\"auto\"",
                                 d->kernel_release);
        if (!d->config.bpffs_dir)
                return 0; /* clsd --check: nothing is pinned */
        r = nl_bpffs_check(d->config.bpffs_dir, NULL);
        if (r < 0) {
                /* The directory may not exist yet: its parent must be on bpffs then. */
                r = mkdir_p(d->config.bpffs_dir, 0700);
                if (r < 0)
                        return error_set(reterr, -r, "tcx_unavailable", "cannot create %s: %s",
                                         d->config.bpffs_dir, strerror(-r));
        }
        r = nl_bpffs_check(d->config.bpffs_dir, reterr);
        if (r < 0)
                return r;
        tcx_dir(d, netns, dir);
        r = mkdir_p(dir, 0700);
        if (r < 0)
                return error_set(reterr, -r, "tcx_unavailable", "cannot create %s: %s", dir, strerror(-r));
        return 0;
}

static void pin_name(int ifindex, Direction dir, uint16_t pref, const char *name, char buf[128]) {
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

int tcx_ours(Daemon *d, const char *netns, int ifindex, TcxOurs **ret, size_t *ret_n, Error *reterr) {
        char dir[PATH_MAX], **names = NULL;
        TcxOurs *v;
        size_t n = 0, k = 0;
        int r;

        tcx_dir(d, netns, dir);
        r = nl_pins_list(dir, &names, &n);
        if (r < 0)
                return error_set(reterr, -r, "kernel_error", "cannot list %s: %s", dir, strerror(-r));
        v = calloc(n + 1, sizeof(TcxOurs));
        if (!v) {
                strv_free_n(names, n);
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
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

int iface_tcx_find(Daemon *d, const char *netns, int ifindex, Direction dir, const FilterSpec *f,
                   NlTcxLink *ret) {
        char dir_path[PATH_MAX], name[128];
        _cleanup_close_ int fd = -1;
        NlTcxLink l;

        tcx_dir(d, netns, dir_path);
        pin_name(ifindex, dir, (uint16_t) f->priority, f->name, name);
        fd = nl_pin_open(dir_path, name);
        if (fd < 0 || nl_tcx_link_info(fd, &l) < 0 || l.ifindex != ifindex)
                return -ENOENT;
        *ret = l;
        return 0;
}

/* Detaches and unpins one of ours. */
static int tcx_remove(Daemon *d, const char *netns, const char *ifname, TcxOurs *o, Error *reterr) {
        char dir[PATH_MAX];
        int r;

        tcx_dir(d, netns, dir);
        if (o->link.ifindex > 0) {
                r = nl_tcx_detach(o->fd, reterr);
                if (r < 0)
                        return r;
        }
        r = nl_unpin(dir, o->pin);
        if (r < 0)
                return error_set(reterr, -r, "kernel_error", "cannot unpin %s/%s: %s", dir, o->pin,
                                 strerror(-r));
        log_info("%s: removed tcx %s link %u (%s, pref %u)", ifname, direction_to_string(o->dir),
                 o->link.link_id, o->name, o->pref);
        return 0;
}

int iface_tcx_remove_all(Daemon *d, const char *netns, int ifindex, const char *ifname, Error *reterr) {
        TcxOurs *ours = NULL;
        size_t n = 0;
        int r = 0;

        if (!d->tcx)
                return 0;
        r = tcx_ours(d, netns, ifindex, &ours, &n, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r >= 0; i++)
                r = tcx_remove(d, netns, ifname, &ours[i], reterr);
        tcx_ours_free(ours, n);
        return r;
}

int iface_tcx_link_ids(Daemon *d, const char *netns, int ifindex, uint32_t **ret, size_t *ret_n,
                       Error *reterr) {
        TcxOurs *ours = NULL;
        uint32_t *v;
        size_t n = 0;
        int r;

        *ret = NULL;
        *ret_n = 0;
        if (!d->tcx)
                return 0;
        r = tcx_ours(d, netns, ifindex, &ours, &n, reterr);
        if (r < 0)
                return r;
        v = calloc(n + 1, sizeof(uint32_t));
        for (size_t i = 0; v && i < n; i++)
                v[i] = ours[i].link.link_id;
        tcx_ours_free(ours, n);
        if (!v)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        *ret = v;
        *ret_n = n;
        return 0;
}

int iface_tcx_remove_added(Daemon *d, const char *netns, int ifindex, const char *ifname,
                           const uint32_t *before, size_t n_before, Error *reterr) {
        TcxOurs *ours = NULL;
        size_t n = 0;
        int r;

        if (!d->tcx)
                return 0;
        r = tcx_ours(d, netns, ifindex, &ours, &n, reterr);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                bool had = false;
                for (size_t k = 0; k < n_before && !had; k++)
                        had = before[k] == ours[i].link.link_id;
                if (!had)
                        r = tcx_remove(d, netns, ifname, &ours[i], reterr);
        }
        tcx_ours_free(ours, n);
        return r;
}

/* Where a new link of pref goes: before the first attached link of ours with a higher pref, else after
 * the last with a lower one, else at the end. */
static void tcx_position(const TcxOurs *ours, size_t n, Direction dir, uint16_t pref, int *ret_fd,
                         bool *ret_before) {
        *ret_fd = -1;
        *ret_before = false;
        for (size_t i = 0; i < n; i++) {
                if (ours[i].dir != dir || ours[i].link.ifindex == 0 || ours[i].fd < 0)
                        continue;
                if (ours[i].pref > pref) {
                        *ret_fd = ours[i].fd;
                        *ret_before = true;
                        return;
                }
                *ret_fd = ours[i].fd;
        }
}

int iface_tcx_apply(Daemon *d, Iface *it, char *what, size_t what_size, Error *reterr) {
        TcxOurs *ours = NULL;
        size_t n = 0;
        char dir_path[PATH_MAX];
        int r, changes = 0;
        bool any = document_uses_tcx(d, it->doc);

        if (!d->tcx && !any)
                return 0;
        if (any) {
                r = daemon_tcx_ready(d, it->doc->netns, reterr);
                if (r < 0)
                        return r;
        }
        tcx_dir(d, it->doc->netns, dir_path);
        r = tcx_ours(d, it->doc->netns, it->ifindex, &ours, &n, reterr);
        if (r < 0)
                return r;

        /* Which of ours the document still wants, unchanged in place (hook, pref, name) and attached. */
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                        const FilterSpec *f = &it->doc->filters[dir][i];
                        if (!filter_uses_tcx(d, f))
                                continue;
                        for (size_t k = 0; k < n; k++)
                                if (ours[k].dir == dir && ours[k].pref == f->priority &&
                                    streq(ours[k].name, f->name) && ours[k].link.ifindex > 0)
                                        ours[k].wanted = true;
                }
        /* What goes: not wanted, or no longer attached (its pin is all that is left). */
        for (size_t k = 0; k < n; k++) {
                if (ours[k].wanted)
                        continue;
                if (ours[k].link.ifindex > 0) {
                        changes++;
                        what_add(what, what_size, "tcx %s pref %u not declared",
                                 direction_to_string(ours[k].dir), ours[k].pref);
                }
                r = tcx_remove(d, it->doc->netns, it->doc->ifname, &ours[k], reterr);
                if (r < 0)
                        goto finish;
                ours[k].fd = safe_close(ours[k].fd);
                ours[k].link.ifindex = 0;
        }
        /* The kernel runs a program at most once per hook: a link whose new program another of ours
         * runs now (and gives up in this change: the document cannot have it twice) is removed first
         * and attached again below, after that one has changed. Swapping two programs works so. */
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                        const FilterSpec *f = &it->doc->filters[dir][i];
                        TcxOurs *have = NULL;
                        bool blocked = false;

                        if (!filter_uses_tcx(d, f))
                                continue;
                        for (size_t k = 0; k < n; k++)
                                if (ours[k].wanted && ours[k].dir == dir && ours[k].pref == f->priority &&
                                    streq(ours[k].name, f->name))
                                        have = &ours[k];
                        if (!have || have->link.prog_id == program_id(it->programs[dir][i]))
                                continue;
                        for (size_t k = 0; k < n; k++)
                                blocked = blocked ||
                                          (&ours[k] != have && ours[k].wanted && ours[k].dir == dir &&
                                           ours[k].link.prog_id == program_id(it->programs[dir][i]));
                        if (!blocked)
                                continue;
                        r = tcx_remove(d, it->doc->netns, it->doc->ifname, have, reterr);
                        if (r < 0)
                                goto finish;
                        have->fd = safe_close(have->fd);
                        have->link.ifindex = 0;
                        have->wanted = false;
                }
        /* What changes in place, then what comes, in pref order so that each new link finds its
         * neighbours in place. */
        for (int pass = 0; pass < 2; pass++)
                for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                        for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                                const FilterSpec *f = &it->doc->filters[dir][i];
                                const Program *p = it->programs[dir][i];
                                TcxOurs *have = NULL;
                                char name[128];
                                int link_fd = -1, rel_fd, saved;
                                bool before;

                                if (!filter_uses_tcx(d, f))
                                        continue;
                                for (size_t k = 0; k < n; k++)
                                        if (ours[k].wanted && ours[k].dir == dir &&
                                            ours[k].pref == f->priority && streq(ours[k].name, f->name))
                                                have = &ours[k];
                                if (have && have->link.prog_id == program_id(p))
                                        continue;
                                if (!have != (pass == 1))
                                        continue; /* updates in the first pass, new links in the second */
                                if (have) {
                                        /* In place: the link keeps its position. */
                                        r = nl_tcx_update(have->fd, program_fd(p), reterr);
                                        if (r < 0)
                                                goto finish;
                                        have->link.prog_id = program_id(p);
                                        changes++;
                                        what_add(what, what_size, "tcx %s pref %u not as declared",
                                                 direction_to_string(dir), f->priority);
                                        log_info("%s: replaced the program of tcx %s link %u (%s, pref %u): "
                                                 "tag %s",
                                                 it->doc->ifname, direction_to_string(dir),
                                                 have->link.link_id, f->name, f->priority, program_tag(p));
                                        continue;
                                }
                                tcx_position(ours, n, dir, (uint16_t) f->priority, &rel_fd, &before);
                                /* The kernel finds the ifindex in the caller's namespace. */
                                r = daemon_netns_enter(d, it->doc->netns, &saved, reterr);
                                if (r < 0)
                                        goto finish;
                                r = nl_tcx_attach(program_fd(p), it->ifindex, hook_of(dir), rel_fd, before,
                                                  &link_fd, reterr);
                                nl_netns_leave(saved);
                                if (r < 0)
                                        goto finish;
                                pin_name(it->ifindex, dir, (uint16_t) f->priority, f->name, name);
                                r = nl_pin(link_fd, dir_path, name, reterr);
                                if (r < 0) {
                                        (void) nl_tcx_detach(link_fd, NULL);
                                        safe_close(link_fd);
                                        goto finish;
                                }
                                changes++;
                                what_add(what, what_size, "tcx %s pref %u missing", direction_to_string(dir),
                                         f->priority);
                                /* Keep it among ours, so that later ones are placed relative to it. */
                                TcxOurs *nv = realloc(ours, (n + 2) * sizeof(TcxOurs));
                                if (!nv) {
                                        safe_close(link_fd);
                                        r = error_set(reterr, ENOMEM, "internal_error", "out of memory");
                                        goto finish;
                                }
                                ours = nv;
                                TcxOurs o = { .dir = dir,
                                              .pref = (uint16_t) f->priority,
                                              .fd = link_fd,
                                              .wanted = true };
                                snprintf(o.pin, sizeof(o.pin), "%s", name);
                                snprintf(o.name, sizeof(o.name), "%s", f->name);
                                (void) nl_tcx_link_info(link_fd, &o.link);
                                size_t at = n;
                                while (at > 0 && (ours[at - 1].dir > dir ||
                                                  (ours[at - 1].dir == dir && ours[at - 1].pref > o.pref)))
                                        at--;
                                memmove(ours + at + 1, ours + at, (n - at) * sizeof(TcxOurs));
                                ours[at] = o;
                                n++;
                                log_info("%s: added tcx %s link %u: %s pref %u (tag %s)", it->doc->ifname,
                                         direction_to_string(dir), o.link.link_id, f->name, f->priority,
                                         program_tag(p));
                        }
        r = iface_tcx_verify(d, it, reterr);
finish:
        tcx_ours_free(ours, n);
        return r < 0 ? r : changes;
}

/* Read back: each tcx filter of the document is attached with its program, and clsd's links run in
 * priority order on each hook. */
int iface_tcx_verify(Daemon *d, Iface *it, Error *reterr) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                _cleanup_free_ NlTcxEntry *entries = NULL;
                size_t n_entries = 0, last = 0;
                bool any = false;
                int r, saved;

                for (size_t i = 0; i < it->doc->n_filters[dir]; i++)
                        any = any || filter_uses_tcx(d, &it->doc->filters[dir][i]);
                if (!any)
                        continue;
                r = daemon_netns_enter(d, it->doc->netns, &saved, reterr);
                if (r < 0)
                        return r;
                r = nl_tcx_query(it->ifindex, hook_of(dir), &entries, &n_entries, reterr);
                nl_netns_leave(saved);
                if (r < 0)
                        return r;
                /* The document's tcx filters in pref order (documents keep prefs unique per hook). */
                for (uint32_t pref = 0, seen = 0;; seen++) {
                        const FilterSpec *next = NULL;
                        size_t next_i = 0;
                        NlTcxLink l;
                        size_t at;

                        for (size_t i = 0; i < it->doc->n_filters[dir]; i++) {
                                const FilterSpec *f = &it->doc->filters[dir][i];
                                if (filter_uses_tcx(d, f) && f->priority > pref &&
                                    (!next || f->priority < next->priority)) {
                                        next = f;
                                        next_i = i;
                                }
                        }
                        if (!next)
                                break;
                        pref = next->priority;
                        if (iface_tcx_find(d, it->doc->netns, it->ifindex, dir, next, &l) < 0 ||
                            l.prog_id != program_id(it->programs[dir][next_i]))
                                return error_set(
                                        reterr, EIO, "kernel_error",
                                        "%s: tcx %s pref %u is not attached as requested after applying",
                                        it->doc->ifname, direction_to_string(dir), next->priority);
                        for (at = 0; at < n_entries && entries[at].link_id != l.link_id; at++)
                                ;
                        if (at == n_entries || (seen > 0 && at < last))
                                return error_set(
                                        reterr, EIO, "kernel_error",
                                        "%s: tcx %s link %u (pref %u) is not where its priority puts it",
                                        it->doc->ifname, direction_to_string(dir), l.link_id,
                                        next->priority);
                        last = at;
                }
        }
        return 0;
}

static void tcx_sweep_dir(Daemon *d, const char *netns) {
        char dir[PATH_MAX], path[PATH_MAX];
        TcxOurs *ours = NULL;
        size_t n = 0;
        bool gone = false;

        if (tcx_ours(d, netns, 0, &ours, &n, NULL) < 0)
                return;
        tcx_dir(d, netns, dir);
        /* A namespace deleted while clsd was down may still be tearing down (the kernel frees it from
         * a workqueue), its devices and links not yet gone: its name being gone is what counts. */
        if (netns) {
                snprintf(path, sizeof(path), "%s/%s", d->config.netns_dir, netns);
                gone = access(path, F_OK) < 0 && errno == ENOENT;
        }
        for (size_t i = 0; i < n; i++)
                if ((gone || ours[i].link.ifindex == 0) && nl_unpin(dir, ours[i].pin) >= 0)
                        log_info("%s/%s: its link no longer runs anywhere; unpinned", dir, ours[i].pin);
        tcx_ours_free(ours, n);
        if (netns && rmdir(dir) >= 0)
                log_info("%s: empty; removed", dir);
}

/* At start: pins whose links no longer run anywhere (their device or namespace went while clsd was
 * down) go, in clsd's namespace (tcx/) and the named ones (tcx@NAME/). */
void daemon_tcx_sweep(Daemon *d) {
        char **names = NULL;
        size_t n = 0;

        if (!d->tcx)
                return;
        tcx_sweep_dir(d, NULL);
        if (nl_pins_list(d->config.bpffs_dir, &names, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (strncmp(names[i], "tcx@", 4) == 0 && netns_name_valid(names[i] + 4))
                        tcx_sweep_dir(d, names[i] + 4);
        strv_free_n(names, n);
}
