/* reconcile.c: one reconciler for every attach kind. A pass over an interface observes what the kernel
 * has (each kind), acquires the programs its filters want (the very ones attached last are adopted;
 * the rest come from the registry, or are loaded by a worker while the loop goes on), plans and
 * applies each kind's changes, and reads the result back. Drift it repairs is counted; repairs that
 * come too fast are a fight with another program, backed off and said once. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "attach.h"
#include "log.h"
#include "loads.h"
#include "map-config.h"
#include "reconcile.h"
#include "daemon-metrics.h"

/* More repairs than this within the window is a fight: another program changes what clsd puts back. */
#define REPAIR_LOOP_MAX 50
#define REPAIR_WINDOW_USEC (10 * 1000000ULL)

/* What is at the filter's place is the very program attached last (id and tag): adopt it. */
static uint32_t adopt_id(const AttachedFact *fact, uint32_t observed_id) {
        return fact && fact->tag[0] && observed_id && observed_id == fact->prog_id ? observed_id : 0;
}

/* A load is in: the program goes to every filter of the interface (or candidate) that waits for it. */
static void on_program_loaded(void *target, const ProgramRef *ref, Program *p) {
        Iface *it = target;

        for (size_t i = 0; i < it->n_filters; i++) {
                Filter *f = &it->filters[i];
                const FilterSpec *s = f->spec;
                if (!streq(f->instance, strempty(ref->instance)))
                        continue;
                if (ref->kind == NL_PROG_CLASSIFIER && !f->program && streq_ptr(s->digest, ref->digest) &&
                    streq_ptr(s->program, ref->program))
                        f->program = registry_ref(p), f->config_unwritten = true;
                for (size_t k = 0; ref->kind == NL_PROG_ACTION && k < s->n_actions; k++)
                        if (!f->actions[k] && streq_ptr(s->actions[k].digest, ref->digest) &&
                            streq_ptr(s->actions[k].program, ref->program))
                                f->actions[k] = registry_ref(p), f->config_unwritten = true;
        }
}

static void on_programs_in(Manager *m, void *resume) {
        request_queue_resume(m->queue, resume);
}

int iface_acquire_programs(Manager *m, Iface *target, Iface *resume, Error *reterr) {
        LoadWaiter w = { .target = target,
                         .hand_over = on_program_loaded,
                         .resume = resume,
                         .on_loaded = on_programs_in };
        bool waiting = false;
        int r;

        for (size_t i = 0; i < target->n_filters; i++) {
                Filter *f = &target->filters[i];
                for (int a = -1; a < (int) f->spec->n_actions; a++) {
                        Program **slot = a < 0 ? &f->program : &f->actions[a];
                        ProgramRef ref = program_ref(f->spec, a, &f->fact, f->instance);
                        uint32_t observed = a < 0 ? f->observed.prog_id : f->observed.actions[a].prog_id;

                        if (*slot)
                                continue;
                        /* a new load takes over the maps of the program it replaces */
                        r = loads_acquire(m, &ref, adopt_id(ref.fact, observed), observed, slot, &w, reterr);
                        if (r == -EAGAIN)
                                waiting = true;
                        else if (r < 0)
                                return r;
                }
        }
        if (waiting)
                return -EAGAIN;
        /* before anything is attached: the programs see their configuration from the first packet */
        map_config_apply(m, target);
        target->programs_held = true;
        return 0;
}

int iface_check_owner(Manager *m, const char *netns, const char *ifname, Error *reterr) {
        if (netns && netns_set_is_own(m->netns, netns)) {
                Iface *other = iface_table_get(m->ifaces, NULL, ifname);
                if (other && other->visible)
                        return error_set(
                                reterr, EEXIST, ERROR_DEVICE_TAKEN,
                                "%s: netns %s is clsd's own namespace, and the document of %s there already "
                                "declares this device; one device has one document",
                                ifname, netns, ifname);
        }
        if (!netns)
                for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                        Iface *o = iface_table_at(m->ifaces, i);
                        if (o->netns && o->visible && streq(o->ifname, ifname) &&
                            netns_set_is_own(m->netns, o->netns))
                                return error_set(
                                        reterr, EEXIST, ERROR_DEVICE_TAKEN,
                                        "%s: the document of %s in netns %s (clsd's own namespace) already "
                                        "declares this device; one device has one document",
                                        ifname, ifname, o->netns);
                }
        return 0;
}

static void count_repair(Manager *m, Iface *it, const char *what) {
        uint64_t now = clock_usec(CLOCK_MONOTONIC);

        it->repairs++;
        m->counters.repairs++;
        it->last_repair_usec = clock_usec(CLOCK_REALTIME);
        snprintf(it->last_repair_what, sizeof(it->last_repair_what), "%s", what);
        if (now - it->repair_window_usec > REPAIR_WINDOW_USEC) {
                it->repair_window_usec = now;
                it->repair_window_count = 0;
        }
        it->repair_window_count++;
        log_notice("%s: repaired (%u so far): %s", it->ifname, it->repairs, what);
        manager_changed(m, it, IFACE_CHANGED_REPAIRS);
}

/* The kernel knows no device of the link's ifindex any more: it went under the reconcile, and clsd's
 * filters with it. The interface is pending, as for a link absent at the start; it keeps the ifindex, so
 * that the deletion's event, not read yet, finds it (an interface only policies were for goes then), and
 * a link that comes under the name is reconciled at its own event. */
static int link_went(Iface *it, Error *reterr) {
        log_info("%s: the link went while it was reconciled (%s); pending", it->ifname,
                 strna(reterr ? reterr->message : NULL));
        if (reterr)
                error_done(reterr);
        return 0;
}

void iface_rollback(Manager *m, Iface *it, AttachContext *ctx, const AttachSnapshot *snap, const char *what,
                    const Error *why) {
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        log_error("%s: %s failed: %s; rolling back", it->ifname, what, strna(why ? why->message : NULL));
        r = attach_restore_all(ctx, snap, it, &e);
        if (r >= 0) {
                /* What GET shows comes from the filters' facts: read them back from the kernel. */
                AttachContext old;
                AttachObserved obs = { 0 };
                attach_context_init(m, it, ctx->rtnl, &old);
                if (attach_observe_all(&old, &obs, NULL) >= 0)
                        attach_observed_free(&obs);
                attach_context_done(&old);
                return;
        }
        /* The kernel is now neither the old document nor the new one: say so where it shows. */
        log_error("%s: rollback failed: %s", it->ifname, strna(e.message));
        if (it->visible) {
                _cleanup_error_ Error f = ERROR_NULL;
                error_set(&f, e.error, ERROR_KERNEL_ERROR, "rollback after a failed change failed: %s",
                          strna(e.message));
                iface_set_state(it, IFACE_FAILED, &f);
                manager_changed(m, it, IFACE_CHANGED_STATE);
        }
}

int iface_reconcile(Manager *m, Iface *it, Error *reterr) {
        char what[sizeof(it->last_repair_what)] = "";
        AttachObserved obs = { 0 };
        AttachSnapshot snap = { 0 };
        AttachContext c;
        NlSocket *rtnl;
        NlLink link;
        int r, changes;

        m->counters.reconciles++; /* a PUT's, an event's, a resync's: every pass that diffs and applies */
        r = manager_link(m, it->netns, it->ifname, &rtnl, &link, reterr);
        if (r == -ENODEV) {
                iface_table_set_ifindex(m->ifaces, it, 0);
                return 0; /* pending: the caller says so */
        }
        if (r < 0)
                return r;
        /* one device, one owner: the first, its own namespace's document */
        if (it->netns && (r = iface_check_owner(m, it->netns, it->ifname, reterr)) < 0)
                return r;
        iface_table_set_ifindex(m->ifaces, it, link.ifindex);
        attach_context_init(m, it, rtnl, &c);
        c.what = what;
        c.what_size = sizeof(what);
        /* A filter left out for an object revoked since the last run may still be attached, on a hook (or
         * a tcx link) no filter composed uses: that first reconcile reads them all, as SIGHUP's does. */
        c.fresh = it->fresh && !it->untrusted;
        c.hooks_absent = c.fresh && links_hooks_absent(m->links, rtnl, it->netns, link.ifindex);
again:
        r = attach_observe_all(&c, &obs, reterr);
        if (r < 0) {
                attach_context_done(&c);
                return r == -ENODEV ? link_went(it, reterr) : r;
        }
        if (!it->programs_held) {
                r = iface_acquire_programs(m, it, it, reterr);
                if (r < 0) {
                        attach_observed_free(&obs);
                        attach_context_done(&c);
                        return r;
                }
        }
        /* an interface whose change was refused: its retry too applies it whole, or puts the kernel back */
        if (it->whole && (r = attach_snapshot_all(&c, &obs, &snap, reterr)) < 0) {
                attach_observed_free(&obs);
                attach_context_done(&c);
                return r;
        }
        changes = attach_apply_all(&c, &obs, reterr);
        attach_observed_free(&obs);
        if (changes == -ESTALE && c.hooks_absent) {
                /* the links' view was behind the kernel: read it this time */
                log_debug("%s: %s; reading its filters", it->ifname, strna(reterr ? reterr->message : NULL));
                if (reterr)
                        error_done(reterr);
                attach_snapshot_free(&snap);
                c.hooks_absent = false;
                goto again;
        }
        if (changes < 0 && changes != -ENODEV && it->whole)
                iface_rollback(m, it, &c, &snap, "applying the interface", reterr);
        attach_snapshot_free(&snap);
        attach_context_done(&c);
        if (changes == -ENODEV)
                return link_went(it, reterr);
        if (changes < 0)
                return changes;
        it->fresh = false;
        bool whole = it->whole;
        it->whole = false;
        for (size_t i = 0; i < it->n_filters; i++)
                it->filters[i].state = FILTER_CONFIGURED;
        manager_save_facts(m, it);
        if (changes > 0)
                manager_changed(m, it, IFACE_CHANGED_FILTERS);
        bool in_loop = it->state == IFACE_FAILED && it->error.code == ERROR_REPAIR_LOOP;
        if (changes > 0 && !whole && (it->state == IFACE_CONFIGURED || in_loop)) {
                /* The kernel had drifted from a document it matched: that is a repair. */
                count_repair(m, it, what);
                if (it->repair_window_count > REPAIR_LOOP_MAX || in_loop) {
                        bool first = !in_loop;
                        if (first) {
                                it->repair_loops++;
                                m->counters.repair_loops++;
                                log_warning("%s: %u repairs within %llu s: another program keeps changing "
                                            "what clsd "
                                            "puts back; backing off (next repairs by retry only)",
                                            it->ifname, it->repair_window_count,
                                            (unsigned long long) (REPAIR_WINDOW_USEC / 1000000));
                        }
                        return error_set(
                                reterr, EBUSY, ERROR_REPAIR_LOOP,
                                "%s: another program keeps changing clsd's filters (%u repairs within %llu "
                                "s, the last: %s); clsd backs off and repairs on retries only",
                                it->ifname, it->repair_window_count,
                                (unsigned long long) (REPAIR_WINDOW_USEC / 1000000), what);
                }
        }
        return 1; /* configured */
}

int iface_remove_all(Manager *m, Iface *it, NlSocket *rtnl, Error *reterr) {
        AttachContext c;
        int r;

        attach_context_init(m, it, rtnl, &c);
        r = attach_remove_all(&c, reterr);
        attach_context_done(&c);
        return r;
}

/* A reconcile request's turn: the interface's state follows the result. */
int reconcile_process_request(Manager *m, ReconcileRequest *req) {
        return iface_reconcile_and_report(m, req->iface);
}

bool iface_report_untrusted(Manager *m, Iface *it) {
        _cleanup_error_ Error e = ERROR_NULL;

        if (!it->untrusted)
                return false;
        error_set(&e, EPERM, ERROR_OBJECT_UNTRUSTED,
                  "%s: not applied (signed by no key of --trusted-keys any more; its filters were removed): "
                  "%s",
                  it->ifname, it->untrusted);
        if (!streq_ptr(it->error.message, e.message)) {
                log_error("%s", e.message);
                daemon_count_error(m, e.code);
        }
        iface_set_state(it, IFACE_FAILED, &e);
        return true;
}

int iface_reconcile_and_report(Manager *m, Iface *it) {
        IfaceState before = it->state;
        _cleanup_free_ char *error_before = it->error.message ? strdup(it->error.message) : NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        r = iface_reconcile(m, it, &e);
        if (r == -EAGAIN)
                return -EAGAIN;
        if (r < 0) {
                log_error("%s: reconcile failed: %s", it->ifname, strna(e.message));
                daemon_count_error(m, e.code);
                iface_set_state(it, IFACE_FAILED, &e);
        } else if (r == 0) {
                if (it->state != IFACE_PENDING)
                        log_info("%s%s%s: interface absent; document pending", strempty(it->netns),
                                 it->netns ? "/" : "", it->ifname);
                iface_set_state(it, IFACE_PENDING, NULL);
        } else if (!iface_report_untrusted(m, it))
                iface_set_state(it, IFACE_CONFIGURED, NULL);
        if (it->state != before || !streq_ptr(it->error.message, error_before))
                manager_changed(m, it, IFACE_CHANGED_STATE | IFACE_CHANGED_FILTERS);
        if (it->state == IFACE_CONFIGURED && it->repair_loops > 0 && before == IFACE_FAILED)
                log_info("%s: quiet again: clsd's filters stayed as they were put back", it->ifname);
        return r < 0 ? r : 0;
}
