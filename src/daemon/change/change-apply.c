/* change-apply.c: the phases of a change that meet the kernel and the store. The look reads what the
 * kernel has for the candidate and refuses what cannot be done before anything loads; the apply, with
 * every program held, snapshots what is clsd's, applies every kind, stores the documents and rolls the
 * kernel back if any of it fails (or removes everything when nothing is declared any more); the commit
 * makes the candidate the interface. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "change.h"
#include "links.h"
#include "map-config.h"
#include "reconcile.h"
#include "log.h"
#include "store-policy.h"

void change_look_done(ChangeLook *look) {
        attach_observed_free(&look->observed);
        *look = (ChangeLook){ 0 };
}

/* The context of the candidate on what the look read. */
static void look_context(Change *c, AttachContext *ctx) {
        attach_context_init(c->m, c->candidate, c->look.rtnl, ctx);
        ctx->fresh = c->look.fresh;
        ctx->hooks_absent = c->look.hooks_absent;
}

int change_look(Change *c, Iface *it, Error *reterr) {
        Manager *m = c->m;
        ChangeLook *look = &c->look;
        AttachContext ctx;
        int r;

        change_look_done(look);
        look->looked = true;
        r = manager_link(m, it->netns, it->ifname, &look->rtnl, &look->link, reterr);
        if (r == -ENODEV)
                return 0; /* absent: the change is stored, and the interface pending */
        if (r < 0)
                return r;
        look->present = true;
        c->candidate->ifindex = look->link.ifindex;
        if (c->type->intent) {
                /* one device, one owner: the first, its own namespace's document */
                if (it->netns && (r = iface_check_owner(m, it->netns, it->ifname, reterr)) < 0)
                        return r;
                /* Nothing of clsd's is on a link a policy reaches first (or at the start): only the
                 * hooks its filters use are read, and none of a link known to have no clsact. */
                look->fresh = (it->fresh || !it->visible) && !c->candidate->untrusted;
                look->hooks_absent = look->fresh &&
                                     links_hooks_absent(m->links, look->rtnl, it->netns, look->link.ifindex);
        }
        if (c->candidate->n_filters == 0)
                return 0;
        look_context(c, &ctx);
        r = attach_observe_all(&ctx, &look->observed, reterr);
        if (r >= 0 && !c->type->dry_run)
                r = attach_check_all(&ctx, &look->observed, reterr);
        attach_context_done(&ctx);
        return r;
}

/* ---- applying: one turn of the loop, from a fresh look at the kernel ---- */

/* The kernel knows no device of the look's ifindex any more: the link went under the change, and what
 * the change and the documents before it had attached there went with it. The change stands as for a link
 * absent at the look: stored, pending; a link that comes under the name is reconciled at its event. */
static int link_went(Change *c, Iface *it, Error *reterr) {
        log_info("%s: the link went while the change was applied (%s); document pending", it->ifname,
                 strna(reterr ? reterr->message : NULL));
        error_done(reterr);
        c->look.present = false;
        c->look.went = true;
        return 0;
}

/* The store says what the change did: the API's document (or its removal), and what a hog attached. */
static int store_change(Change *c, Iface *it, Iface *cand, Error *reterr) {
        Manager *m = c->m;
        int r = 0;

        bool facts_changed = iface_update_facts(cand);

        if (cand->api && (cand->api != it->api || facts_changed))
                r = store_document_save(m->store, cand->api, &cand->facts[SOURCE_API], reterr);
        else if (!cand->api && it->api)
                r = store_document_remove(m->store, SOURCE_API, it->netns, it->ifname, reterr);
        if (r < 0)
                return r;
        if (cand->hog && (cand->hog != it->hog || facts_changed)) {
                _cleanup_error_ Error e = ERROR_NULL;
                if (store_document_save(m->store, cand->hog, &cand->facts[SOURCE_HOG], &e) < 0)
                        log_warning("%s: %s", it->ifname, strna(e.message));
        } else if (it->hog)
                (void) store_document_remove(m->store, SOURCE_HOG, it->netns, it->ifname, NULL);
        return 0;
}

/* The candidate (programs held) applied to the kernel, from what the look saw, and to the store; the
 * kernel is put back as it was if either fails. */
static int apply_candidate(Change *c, Iface *it, Error *reterr) {
        Manager *m = c->m;
        Iface *cand = c->candidate;
        _cleanup_(attach_snapshot_free) AttachSnapshot snap = { 0 };
        _cleanup_(attach_context_done) AttachContext ctx = { 0 };
        int r;

        if (!c->look.present)
                return store_change(c, it, cand, reterr);
        look_context(c, &ctx);
        if (attach_observed_any(&c->look.observed))
                /* the filters' facts were filled then, with no programs held: again with them */
                attach_settle_all(&ctx, &c->look.observed);
        else if ((r = attach_observe_all(&ctx, &c->look.observed, reterr)) < 0)
                return r;
        for (;;) {
                r = attach_snapshot_all(&ctx, &c->look.observed, &snap, reterr);
                if (r < 0)
                        return r;
                m->counters.reconciles++;
                r = attach_apply_all(&ctx, &c->look.observed, reterr);
                if (r != -ESTALE || !ctx.hooks_absent)
                        break;
                /* the links' view was behind the kernel (nothing changed): read it this time */
                error_done(reterr);
                attach_snapshot_free(&snap);
                attach_observed_free(&c->look.observed);
                ctx.hooks_absent = c->look.hooks_absent = false;
                r = attach_observe_all(&ctx, &c->look.observed, reterr);
                if (r < 0)
                        return r;
                r = attach_check_all(&ctx, &c->look.observed, reterr);
                if (r < 0)
                        return r;
        }
        if (r == -ENODEV)
                r = link_went(c, it, reterr);
        else if (r < 0) {
                iface_rollback(m, it, &ctx, &snap, "applying the change", reterr);
                return r;
        }
        r = store_change(c, it, cand, reterr);
        if (r < 0)
                iface_rollback(m, it, &ctx, &snap, "storing the change", reterr);
        return r;
}

/* Nothing is declared any more: everything of clsd's goes from the kernel and the store, and the
 * interface is emptied (the driver forgets it). */
static int remove_everything(Change *c, Iface *it, Error *reterr) {
        Manager *m = c->m;
        int r;

        if (c->look.present) {
                /* from the link that has the name now, as a reconcile does: the interface's ifindex is 0
                 * once the deletion of its link was seen, and 0 lists every interface's tcx pins */
                iface_table_set_ifindex(m->ifaces, it, c->look.link.ifindex);
                r = iface_remove_all(m, it, c->look.rtnl, reterr);
                if (r < 0)
                        return r;
        }
        if (it->api && (r = store_document_remove(m->store, SOURCE_API, it->netns, it->ifname, reterr)) < 0)
                return r;
        if (it->hog)
                (void) store_document_remove(m->store, SOURCE_HOG, it->netns, it->ifname, NULL);
        log_info("%s: document deleted", it->ifname);
        iface_commit(it, c->candidate, m->registry);
        change_finish(c, NULL, NULL);
        return CHANGE_ANSWERED;
}

int change_apply(Change *c, Iface *it, Error *reterr) {
        Iface *cand = c->candidate;
        int r;

        /* A run after a wait reads the kernel again. */
        if (!c->look.looked) {
                r = change_look(c, it, reterr);
                if (r < 0)
                        return r;
        }
        if (!cand->api && !cand->hog && cand->n_policies == 0)
                return remove_everything(c, it, reterr);
        return apply_candidate(c, it, reterr);
}

/* The candidate becomes the interface, shown in the table at the link the look saw (else at
 * absent_ifindex): the changes to tell the listeners. */
static unsigned take_candidate(Change *c, Iface *it, int absent_ifindex) {
        Manager *m = c->m;
        bool was_visible = it->visible;

        iface_commit(it, c->candidate, m->registry);
        it->visible = true;
        iface_table_touch(m->ifaces);
        /* a link that went under the change keeps its ifindex: the deletion's event, not read yet,
         * finds the interface (one only policies were for goes then) */
        iface_table_set_ifindex(m->ifaces, it,
                                c->look.present || c->look.went ? c->look.link.ifindex : absent_ifindex);
        map_config_prune(m); /* filters or maps no longer configuration forget their entries */
        return (was_visible ? 0 : IFACE_ADDED) | IFACE_CHANGED_DOCUMENT | IFACE_CHANGED_STATE |
               IFACE_CHANGED_FILTERS;
}

int change_commit(Change *c, Iface *it, Error *reterr) {
        Manager *m = c->m;
        bool api_changed = c->candidate->api != it->api;
        unsigned changes;

        (void) reterr;
        changes = take_candidate(c, it, 0);
        /* objects no key trusts any more were left out: failed, until a key comes back */
        if (!c->look.present || !iface_report_untrusted(m, it))
                iface_set_state(it, c->look.present ? IFACE_CONFIGURED : IFACE_PENDING, NULL);
        it->fresh = it->fresh && !c->look.present;
        it->whole = false;
        if (api_changed && it->api)
                log_info("%s: document generation %" PRIu64 " stored, %s", it->ifname, it->api->generation,
                         iface_state_to_string(it->state));
        else if (api_changed)
                log_info("%s: API document deleted; the hog %s stays", it->ifname, strna(it->hog_path));
        manager_changed(m, it, changes);
        change_finish(c, it, NULL);
        return CHANGE_ANSWERED;
}

void change_hold_failed(Change *c, Iface *it, const Error *e) {
        unsigned changes;

        log_error("%s: %s change failed: %s; retrying", it->ifname, c->type->name, strna(e->message));
        /* (a failure after a wait has no look: the table keeps what it knew) */
        changes = take_candidate(c, it, it->ifindex);
        iface_set_state(it, IFACE_FAILED, e);
        /* its retries apply it whole or not at all, as this change did */
        it->whole = true;
        manager_changed(c->m, it, changes);
        change_finish(c, it, NULL);
}
