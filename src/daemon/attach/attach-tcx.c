/* attach-tcx.c: the tcx attach kind ("attach":"tcx"): clsd's tcx links are the ones pinned under
 * BPFFS_DIR/tcx/ (tcx@NAME/ for a named namespace) as "<ifindex>-<hook>-<pref>-<name>", so they outlive
 * clsd and a restart finds them; on each hook they run in priority order among themselves, beside
 * anyone else's tcx programs. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attach.h"
#include "fileio.h"
#include "log.h"
#include "tcx-pins.h"
#include "tcx-plan.h"
#include "daemon-changes.h"
#include "nl-tcx.h"

typedef struct TcxObserved {
        AttachObservation meta;
        TcxOurs *ours; /* sorted by (hook, pref) */
        size_t n;
} TcxObserved;

typedef struct TcxPlanned {
        AttachPlan meta;
        TcxWant *want;
        const Filter **want_filter; /* parallel to want */
        size_t n_want;
        TcxHave *have; /* parallel to the observed ours */
        size_t n_have;
        TcxStep *steps;
        size_t n_steps;
} TcxPlanned;

DEFINE_ATTACH_CAST(tcx_observed, TcxObserved, AttachObservation, ATTACH_KIND_TCX, const);
DEFINE_ATTACH_CAST(tcx_planned, TcxPlanned, AttachPlan, ATTACH_KIND_TCX, const);

/* Whether the interface has a filter of the kind's. */
static bool uses_tcx(const Iface *it) {
        for (size_t i = 0; i < it->n_filters; i++)
                if (it->filters[i].kind == ATTACH_KIND_TCX)
                        return true;
        return false;
}

static void tcx_observed_free(AttachObservation *p) {
        TcxObserved *o = (TcxObserved *) tcx_observed(p);
        if (!o)
                return;
        tcx_ours_free(o->ours, o->n);
        free(o);
}

static void tcx_plan_free(AttachPlan *p) {
        TcxPlanned *pl = (TcxPlanned *) tcx_planned(p);
        if (!pl)
                return;
        free(pl->want);
        free(pl->want_filter);
        free(pl->have);
        free(pl->steps);
        free(pl);
}

static const TcxOurs *ours_at(const TcxObserved *o, const Filter *f) {
        for (size_t k = 0; k < o->n; k++)
                if (o->ours[k].dir == f->dir && o->ours[k].pref == f->spec->priority &&
                    streq(o->ours[k].name, f->spec->name) && o->ours[k].link.ifindex > 0)
                        return &o->ours[k];
        return NULL;
}

static void observe_filter(Filter *f, const TcxObserved *o) {
        const TcxOurs *h = ours_at(o, f);

        f->observed = (FilterObserved){ 0 };
        if (!h)
                return;
        f->observed.link_id = h->link.link_id;
        f->observed.prog_id = h->link.prog_id;
        f->observed.classifier_attached = f->program && h->link.prog_id == program_id(f->program);
        f->observed.attached = f->observed.classifier_attached;
        if (f->observed.attached)
                snprintf(f->observed.tag, sizeof(f->observed.tag), "%s", program_tag(f->program));
}

static int tcx_observe(AttachContext *c, AttachObservation **ret, Error *reterr) {
        TcxObserved *o = calloc(1, sizeof(*o));
        char dir[PATH_MAX];
        int r;

        if (!o)
                return error_oom(reterr);
        o->meta.kind = ATTACH_KIND_TCX;
        /* A first reconcile (fresh) reads only what the interface's filters use, as cls_observe() does:
         * a link that a filter no longer tcx left behind is found by the next resync. */
        if (c->tcx && c->bpffs_dir && (!c->fresh || uses_tcx(c->it))) {
                tcx_dir(c->bpffs_dir, c->it->netns, dir);
                r = tcx_ours_list(dir, c->it->ifindex, &o->ours, &o->n, reterr);
                if (r < 0) {
                        free(o);
                        return r;
                }
        }
        for (size_t i = 0; i < c->it->n_filters; i++)
                if (c->it->filters[i].kind == ATTACH_KIND_TCX)
                        observe_filter(&c->it->filters[i], o);
        *ret = &o->meta;
        return 0;
}

static void tcx_settle(AttachContext *c, const AttachObservation *observed) {
        for (size_t i = 0; i < c->it->n_filters; i++)
                if (c->it->filters[i].kind == ATTACH_KIND_TCX)
                        observe_filter(&c->it->filters[i], tcx_observed(observed));
}

static int tcx_check(AttachContext *c, const AttachObservation *observed, Error *reterr) {
        (void) observed;
        if (!uses_tcx(c->it))
                return 0;
        if (!c->tcx)
                return error_set(
                        reterr, EOPNOTSUPP, ERROR_TCX_UNAVAILABLE,
                        "this kernel has no tcx (Linux 6.6+); use \"attach\": \"cls_bpf\" or \"auto\"");
        return 0;
}

static int tcx_plan_make(AttachContext *c, const AttachObservation *observed, AttachPlan **ret,
                         Error *reterr) {
        const TcxObserved *o = tcx_observed(observed);
        TcxPlanned *pl = calloc(1, sizeof(*pl));

        if (!pl)
                return error_oom(reterr);
        pl->meta.kind = ATTACH_KIND_TCX;
        pl->want = calloc(c->it->n_filters + 1, sizeof(TcxWant));
        pl->want_filter = calloc(c->it->n_filters + 1, sizeof(Filter *));
        pl->have = calloc(o->n + 1, sizeof(TcxHave));
        if (!pl->want || !pl->want_filter || !pl->have) {
                tcx_plan_free(&pl->meta);
                return error_oom(reterr);
        }
        for (size_t i = 0; i < c->it->n_filters; i++) {
                const Filter *f = &c->it->filters[i];
                if (f->kind != ATTACH_KIND_TCX)
                        continue;
                pl->want_filter[pl->n_want] = f;
                pl->want[pl->n_want++] = (TcxWant){ .dir = f->dir,
                                                    .pref = (uint16_t) f->spec->priority,
                                                    .name = f->spec->name,
                                                    .prog_id = filter_want_id(f, -1) };
        }
        for (size_t k = 0; k < o->n; k++)
                pl->have[pl->n_have++] = (TcxHave){ .dir = o->ours[k].dir,
                                                    .pref = o->ours[k].pref,
                                                    .name = o->ours[k].name,
                                                    .prog_id = o->ours[k].link.prog_id,
                                                    .link_id = o->ours[k].link.link_id,
                                                    .attached = o->ours[k].link.ifindex > 0 };
        if (tcx_plan(pl->want, pl->n_want, pl->have, pl->n_have, &pl->steps, &pl->n_steps) < 0) {
                tcx_plan_free(&pl->meta);
                return error_oom(reterr);
        }
        *ret = &pl->meta;
        return 0;
}

/* Detaches (if it still runs) and unpins one of ours. */
static int ours_remove(AttachContext *c, const char *dir, TcxOurs *o, Error *reterr) {
        int r;

        if (o->link.ifindex > 0) {
                r = nl_tcx_detach(o->fd, reterr);
                if (r < 0)
                        return r;
        }
        r = nl_unpin(dir, o->pin);
        if (r < 0)
                return error_set(reterr, -r, ERROR_KERNEL_ERROR, "cannot unpin %s/%s: %s", dir, o->pin,
                                 strerror(-r));
        log_info("%s: removed tcx %s link %u (%s, pref %u)", c->it->ifname, direction_to_string(o->dir),
                 o->link.link_id, o->name, o->pref);
        o->fd = safe_close(o->fd);
        o->link.ifindex = 0;
        return 0;
}

/* Where a new link of pref goes: before the first attached link of ours with a higher pref, else after
 * the last with a lower one, else at the end. */
static void position(const TcxOurs *ours, size_t n, Direction dir, uint16_t pref, int *ret_fd,
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

static int tcx_ready(AttachContext *c, const char *dir, Error *reterr) {
        int r;

        if (!c->tcx)
                return error_set(
                        reterr, EOPNOTSUPP, ERROR_TCX_UNAVAILABLE,
                        "this kernel has no tcx (Linux 6.6+); use \"attach\": \"cls_bpf\" or \"auto\"");
        if (!c->bpffs_dir)
                return error_set(reterr, EOPNOTSUPP, ERROR_TCX_UNAVAILABLE,
                                 "no --bpffs-dir to pin tcx links in");
        r = nl_bpffs_check(c->bpffs_dir, NULL);
        if (r < 0 && (r = mkdir_p(c->bpffs_dir, 0700)) < 0)
                return error_set(reterr, -r, ERROR_TCX_UNAVAILABLE, "cannot create %s: %s", c->bpffs_dir,
                                 strerror(-r));
        r = nl_bpffs_check(c->bpffs_dir, reterr);
        if (r < 0)
                return r;
        r = mkdir_p(dir, 0700);
        if (r < 0)
                return error_set(reterr, -r, ERROR_TCX_UNAVAILABLE, "cannot create %s: %s", dir,
                                 strerror(-r));
        return 0;
}

/* A new link of f (attached next to ours, in pref order, and pinned in dir), kept among ours (n of them,
 * room for one more) so that later ones are placed relative to it. */
static int tcx_add(AttachContext *c, const char *dir, const Filter *f, TcxOurs *ours, size_t *n,
                   Error *reterr) {
        int link_fd = -1, rel_fd, saved, r;
        char name[128];
        bool before;

        position(ours, *n, f->dir, (uint16_t) f->spec->priority, &rel_fd, &before);
        /* The kernel finds the ifindex in the caller's namespace. */
        r = netns_set_enter(c->netns, c->it->netns, &saved, reterr);
        if (r < 0)
                return r;
        r = nl_tcx_attach(filter_want_fd(f, -1), c->it->ifindex, hook_of(f->dir), rel_fd, before, &link_fd,
                          reterr);
        nl_netns_leave(saved);
        if (r < 0)
                return r;
        tcx_pin_name(c->it->ifindex, f->dir, (uint16_t) f->spec->priority, f->spec->name, name);
        r = nl_pin(link_fd, dir, name, reterr);
        if (r < 0) {
                (void) nl_tcx_detach(link_fd, NULL);
                safe_close(link_fd);
                return r;
        }
        attach_what(c, "tcx %s pref %u missing", direction_to_string(f->dir), f->spec->priority);
        TcxOurs added = { .dir = f->dir, .pref = (uint16_t) f->spec->priority, .fd = link_fd };
        snprintf(added.pin, sizeof(added.pin), "%s", name);
        snprintf(added.name, sizeof(added.name), "%s", f->spec->name);
        (void) nl_tcx_link_info(link_fd, &added.link);
        size_t at = *n;
        while (at > 0 && (ours[at - 1].dir > added.dir ||
                          (ours[at - 1].dir == added.dir && ours[at - 1].pref > added.pref)))
                at--;
        memmove(ours + at + 1, ours + at, (*n - at) * sizeof(TcxOurs));
        ours[at] = added;
        (*n)++;
        log_info("%s: added tcx %s link %u: %s pref %u (tag %s)", c->it->ifname, direction_to_string(f->dir),
                 added.link.link_id, f->spec->name, f->spec->priority, filter_want_tag(f, -1));
        return 1;
}

/* The program of f's link replaced in place: the link keeps its position. */
static int tcx_update(AttachContext *c, const Filter *f, TcxOurs *h, Error *reterr) {
        int r = nl_tcx_update(h->fd, filter_want_fd(f, -1), reterr);

        if (r < 0)
                return r;
        h->link.prog_id = filter_want_id(f, -1);
        attach_what(c, "tcx %s pref %u not as declared", direction_to_string(f->dir), f->spec->priority);
        log_info("%s: replaced the program of tcx %s link %u (%s, pref %u): tag %s", c->it->ifname,
                 direction_to_string(f->dir), h->link.link_id, f->spec->name, f->spec->priority,
                 filter_want_tag(f, -1));
        return 1;
}

static int tcx_apply(AttachContext *c, const AttachObservation *observed, const AttachPlan *plan,
                     Error *reterr) {
        const TcxObserved *o = tcx_observed(observed);
        const TcxPlanned *pl = tcx_planned(plan);
        TcxOurs *ours = NULL;
        size_t n = o->n;
        char dir[PATH_MAX];
        int r = 0, changes = 0;

        if (!c->tcx && pl->n_want == 0 && o->n == 0)
                return 0;
        tcx_dir(c->bpffs_dir ?: "", c->it->netns, dir);
        if (pl->n_want > 0) {
                r = tcx_ready(c, dir, reterr);
                if (r < 0)
                        return r;
        }
        /* A working copy of ours (each with its own fd), so that new links are placed among them. */
        ours = calloc(n + pl->n_want + 1, sizeof(TcxOurs));
        if (!ours)
                return error_oom(reterr);
        for (size_t k = 0; k < n; k++) {
                ours[k] = o->ours[k];
                ours[k].fd = o->ours[k].fd >= 0 ? fcntl(o->ours[k].fd, F_DUPFD_CLOEXEC, 3) : -1;
        }
        for (size_t i = 0; i < pl->n_steps && r >= 0; i++) {
                const TcxStep *s = &pl->steps[i];
                const Filter *f = s->want >= 0 ? pl->want_filter[s->want] : NULL;
                TcxOurs *h = s->have >= 0 ? &ours[s->have] : NULL;

                switch (s->kind) {
                case TCX_KEEP:
                        r = 0;
                        break;
                case TCX_REMOVE:
                        if (h->link.ifindex > 0) {
                                changes++;
                                attach_what(c, "tcx %s pref %u not declared", direction_to_string(h->dir),
                                            h->pref);
                        }
                        r = ours_remove(c, dir, h, reterr);
                        break;
                case TCX_UPDATE:
                        r = tcx_update(c, f, h, reterr);
                        break;
                case TCX_ADD:
                        r = tcx_add(c, dir, f, ours, &n, reterr);
                        break;
                }
                if (r > 0)
                        changes += r;
        }
        tcx_ours_free(ours, n);
        return r < 0 ? r : changes;
}

/* The link of clsd's for the filter, attached to the interface, or -ENOENT. */
static int tcx_find(AttachContext *c, const Filter *f, NlTcxLink *ret) {
        char dir[PATH_MAX], name[128];
        _cleanup_close_ int fd = -1;
        NlTcxLink l;

        tcx_dir(c->bpffs_dir, c->it->netns, dir);
        tcx_pin_name(c->it->ifindex, f->dir, (uint16_t) f->spec->priority, f->spec->name, name);
        fd = nl_pin_open(dir, name);
        if (fd < 0 || nl_tcx_link_info(fd, &l) < 0 || l.ifindex != c->it->ifindex)
                return -ENOENT;
        *ret = l;
        return 0;
}

/* Read back: each tcx filter is attached with its program, and clsd's links run in priority order on
 * each hook. */
static int tcx_verify(AttachContext *c, Error *reterr) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                _cleanup_free_ NlTcxEntry *entries = NULL;
                size_t n_entries = 0, last = 0, seen = 0;
                bool any = false;
                int r, saved;

                for (size_t i = 0; i < c->it->n_filters; i++)
                        any = any ||
                              (c->it->filters[i].kind == ATTACH_KIND_TCX && c->it->filters[i].dir == dir);
                if (!any)
                        continue;
                r = netns_set_enter(c->netns, c->it->netns, &saved, reterr);
                if (r < 0)
                        return r;
                r = nl_tcx_query(c->it->ifindex, hook_of(dir), &entries, &n_entries, reterr);
                nl_netns_leave(saved);
                if (r < 0)
                        return r;
                /* The hook's tcx filters in pref order (documents keep prefs unique per hook). */
                for (uint32_t pref = 0;; seen++) {
                        Filter *next = NULL;
                        NlTcxLink l;
                        size_t at;

                        for (size_t i = 0; i < c->it->n_filters; i++) {
                                Filter *f = &c->it->filters[i];
                                if (f->kind == ATTACH_KIND_TCX && f->dir == dir &&
                                    f->spec->priority > pref &&
                                    (!next || f->spec->priority < next->spec->priority))
                                        next = f;
                        }
                        if (!next)
                                break;
                        pref = next->spec->priority;
                        if (tcx_find(c, next, &l) < 0 || l.prog_id != filter_want_id(next, -1))
                                return error_set(
                                        reterr, EIO, ERROR_KERNEL_ERROR,
                                        "%s: tcx %s pref %u is not attached as requested after applying",
                                        c->it->ifname, direction_to_string(dir), next->spec->priority);
                        for (at = 0; at < n_entries && entries[at].link_id != l.link_id; at++)
                                ;
                        if (at == n_entries || (seen > 0 && at < last))
                                return error_set(
                                        reterr, EIO, ERROR_KERNEL_ERROR,
                                        "%s: tcx %s link %u (pref %u) is not where its priority puts it",
                                        c->it->ifname, direction_to_string(dir), l.link_id,
                                        next->spec->priority);
                        last = at;
                        next->observed = (FilterObserved){ .attached = true,
                                                           .classifier_attached = true,
                                                           .link_id = l.link_id,
                                                           .prog_id = l.prog_id };
                        snprintf(next->observed.tag, sizeof(next->observed.tag), "%s",
                                 filter_want_tag(next, -1));
                }
        }
        return 0;
}

static int tcx_describe(AttachContext *c, const AttachObservation *observed, const AttachPlan *plan,
                        DryRunStep **steps, size_t *n) {
        const TcxPlanned *pl = tcx_planned(plan);
        DryRunStep *v = realloc(*steps, (*n + pl->n_steps + 1) * sizeof(DryRunStep));

        (void) c, (void) observed;
        if (!v)
                return -ENOMEM;
        *steps = v;
        for (size_t i = 0; i < pl->n_steps; i++) {
                const TcxStep *s = &pl->steps[i];
                const TcxWant *w = s->want >= 0 ? &pl->want[s->want] : NULL;
                const TcxHave *h = s->have >= 0 ? &pl->have[s->have] : NULL;
                DryRunStep *d = &v[*n];

                if (s->kind == TCX_REMOVE && !h->attached)
                        continue; /* a pin whose link went: cleaned up, nothing changes */
                *d = (DryRunStep){ .action = tcx_step_to_string(s->kind),
                                   .direction = w ? w->dir : h->dir,
                                   .pref = w ? w->pref : h->pref };
                snprintf(d->name, sizeof(d->name), NL_FILTER_NAME_PREFIX "%s", w ? w->name : h->name);
                switch (s->kind) {
                case TCX_KEEP:
                        snprintf(d->reason, sizeof(d->reason), "tcx link %u runs the declared program",
                                 h->link_id);
                        break;
                case TCX_UPDATE:
                        snprintf(d->reason, sizeof(d->reason),
                                 "tcx link %u: its program would be replaced in place", h->link_id);
                        break;
                case TCX_ADD:
                        snprintf(d->reason, sizeof(d->reason), "tcx: no link of clsd's for it");
                        break;
                case TCX_REMOVE:
                        snprintf(d->reason, sizeof(d->reason), "tcx link %u of clsd's, not in the document",
                                 h->link_id);
                        break;
                }
                (*n)++;
        }
        return 0;
}

/* A snapshot of the tcx side: the ids of clsd's links before the change; restoring takes away every
 * link of clsd's added since (the old filters are put back by applying the old document). */
typedef struct TcxSnapshot {
        AttachHeld meta;
        uint32_t *link_ids;
        size_t n;
} TcxSnapshot;

DEFINE_ATTACH_CAST(tcx_snapshot_of, TcxSnapshot, AttachHeld, ATTACH_KIND_TCX, const);

static int tcx_snapshot(AttachContext *c, const AttachObservation *observed, AttachHeld **ret,
                        Error *reterr) {
        const TcxObserved *o = tcx_observed(observed);
        TcxSnapshot *s = calloc(1, sizeof(*s));

        (void) c;
        if (!s || !(s->link_ids = calloc(o->n + 1, sizeof(uint32_t)))) {
                free(s);
                return error_oom(reterr);
        }
        s->meta.kind = ATTACH_KIND_TCX;
        for (size_t i = 0; i < o->n; i++)
                s->link_ids[s->n++] = o->ours[i].link.link_id;
        *ret = &s->meta;
        return 0;
}

/* Links this change made go; the interface as it was gets its own links back (its programs are still
 * held, unless it had none yet). */
static int tcx_restore(AttachContext *c, const AttachHeld *snapshot, Iface *before, Error *reterr) {
        const TcxSnapshot *s = tcx_snapshot_of(snapshot);
        TcxOurs *ours = NULL;
        size_t n = 0;
        char dir[PATH_MAX];
        int r;

        if (!c->tcx || !c->bpffs_dir)
                return 0;
        tcx_dir(c->bpffs_dir, c->it->netns, dir);
        r = tcx_ours_list(dir, c->it->ifindex, &ours, &n, reterr);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                bool had = false;
                for (size_t k = 0; k < s->n && !had; k++)
                        had = s->link_ids[k] == ours[i].link.link_id;
                if (!had)
                        r = ours_remove(c, dir, &ours[i], reterr);
        }
        tcx_ours_free(ours, n);
        if (r < 0 || !before || !uses_tcx(before) || !before->programs_held)
                return r;
        AttachContext old = *c;
        AttachObservation *observed = NULL;
        AttachPlan *plan = NULL;
        old.it = before;
        old.what = NULL;
        r = tcx_observe(&old, &observed, reterr);
        if (r < 0)
                return r;
        r = tcx_plan_make(&old, observed, &plan, reterr);
        if (r >= 0) {
                r = tcx_apply(&old, observed, plan, reterr);
                tcx_plan_free(plan);
        }
        tcx_observed_free(observed);
        return r < 0 ? r : 0;
}

static void tcx_snapshot_free(AttachHeld *p) {
        TcxSnapshot *s = (TcxSnapshot *) tcx_snapshot_of(p);
        if (!s)
                return;
        free(s->link_ids);
        free(s);
}

static int tcx_remove_all(AttachContext *c, Error *reterr) {
        TcxOurs *ours = NULL;
        size_t n = 0;
        char dir[PATH_MAX];
        int r;

        /* no link, nothing of the interface's (tcx_ours_list() takes 0 for every interface's links) */
        if (!c->tcx || !c->bpffs_dir || c->it->ifindex <= 0)
                return 0;
        tcx_dir(c->bpffs_dir, c->it->netns, dir);
        r = tcx_ours_list(dir, c->it->ifindex, &ours, &n, reterr);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = ours_remove(c, dir, &ours[i], reterr);
        tcx_ours_free(ours, n);
        return r;
}

const AttachKind attach_kind_tcx = {
        .observe = tcx_observe,
        .settle = tcx_settle,
        .check = tcx_check,
        .plan = tcx_plan_make,
        .apply = tcx_apply,
        .verify = tcx_verify,
        .describe = tcx_describe,
        .snapshot = tcx_snapshot,
        .restore = tcx_restore,
        .snapshot_free = tcx_snapshot_free,
        .remove_all = tcx_remove_all,
        .observed_free = tcx_observed_free,
        .plan_free = tcx_plan_free,
};
