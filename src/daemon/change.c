/* change.c: running a change (a PUT, its dry run, a DELETE, a hog that changed) when its interface's
 * turn comes. It may wait for workers (an object to inspect, a program to load) while the loop goes
 * on; the kernel and the store change only once every program is loaded and verified, in one turn of
 * the loop, and a failure after that puts the kernel back as it was (a snapshot of what was clsd's,
 * each program held). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "change.h"
#include "log.h"

void change_free(Operation *op) {
        Change *c = (Change *) op;

        if (c->candidate) {
                loads_forget(c->m, c->candidate);
                iface_free(c->candidate, c->m->registry);
        }
        resolution_done(&c->res);
        document_unref(c->doc);
        for (size_t i = 0; i < c->n_policies; i++)
                policy_unref(c->policies[i]);
        free(c->policies);
        free(c->hog_path);
        free(c->expect_text);
        dry_run_done(&c->dry_run);
        free(c);
}

/* Answers whoever waits, once. */
bool change_is_dry_run(const Change *c) {
        return c->kind == CHANGE_DRY_RUN || c->kind == CHANGE_POLICY_DRY_RUN;
}

void change_finish(Change *c, Iface *it, const Error *e) {
        if (change_is_dry_run(c)) {
                if (c->dry_done)
                        c->dry_done(c->m, e ? NULL : &c->dry_run, e, c->userdata);
        } else if (c->done)
                c->done(c->m, e ? NULL : it, e, c->userdata);
        c->done = NULL;
        c->dry_done = NULL;
}

static int check_expect(const Iface *it, const DaemonExpect *expect, Error *reterr) {
        const Document *api = it && it->visible ? it->api : NULL;
        uint64_t have;

        if (expect->kind == EXPECT_NOTHING)
                return 0;
        if (expect->kind == EXPECT_ANY) {
                if (!api)
                        return error_set(reterr, EEXIST, "precondition_failed",
                                         "If-Match: *: there is no document to match");
                return 0;
        }
        if (!api)
                return error_set(reterr, EEXIST, "precondition_failed",
                                 "If-Match: %s does not match the document's generation (no document)",
                                 strna(expect->as_given));
        have = api->generation;
        if (expect->kind != EXPECT_GENERATION || expect->generation != have)
                return error_set(reterr, EEXIST, "precondition_failed",
                                 "If-Match: %s does not match the document's generation \"%" PRIu64 "\"",
                                 strna(expect->as_given), have);
        return 0;
}

/* ---- resolving objects (resolution.c): the change's request resumes when the workers are done ---- */

static void on_resolved(ObjectResolution *res) {
        Change *c = (Change *) ((char *) res - offsetof(Change, res));
        request_queue_resume(c->m->queue, c->op.iface);
}

/* ---- the candidate: the interface as the change makes it ---- */

/* The candidate's filters take the programs the interface's alike filters hold: nothing is loaded
 * again for what does not change. */
static void share_programs(Manager *m, Iface *candidate, const Iface *it) {
        for (size_t i = 0; i < candidate->n_filters; i++) {
                Filter *f = &candidate->filters[i];
                for (size_t k = 0; k < it->n_filters; k++) {
                        const Filter *o = &it->filters[k];
                        const FilterSpec *a = f->spec, *b = o->spec;
                        if (f->dir != o->dir || f->tcx != o->tcx || !streq(f->instance, o->instance) ||
                            !streq(a->name, b->name))
                                continue;
                        if (!f->program && o->program && streq_ptr(a->digest, b->digest) &&
                            streq_ptr(a->program, b->program))
                                f->program = registry_ref(o->program);
                        for (size_t j = 0; j < a->n_actions && j < b->n_actions; j++)
                                if (!f->actions[j] && o->actions[j] &&
                                    streq_ptr(a->actions[j].digest, b->actions[j].digest) &&
                                    streq_ptr(a->actions[j].program, b->actions[j].program))
                                        f->actions[j] = registry_ref(o->actions[j]);
                }
        }
        (void) m;
}

static int make_candidate(Change *c, Iface *it, Error *reterr) {
        Manager *m = c->m;
        Document *api = it->api, *hog = it->hog;
        DocumentFacts api_facts = { 0 };
        const char *hog_path = it->hog_path;
        int r;

        if (c->kind == CHANGE_PUT || c->kind == CHANGE_DRY_RUN) {
                api = c->doc;
                r = iface_facts_for(it, c->doc, &api_facts);
        } else if (c->kind == CHANGE_DELETE) {
                api = NULL;
                r = 0;
        } else if (c->kind == CHANGE_POLICY || c->kind == CHANGE_POLICY_DRY_RUN) {
                r = document_facts_copy(&it->facts[SOURCE_API], &api_facts);
        } else {
                hog = c->doc;
                hog_path = c->hog_path;
                r = document_facts_copy(&it->facts[SOURCE_API], &api_facts);
        }
        if (r < 0)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        r = iface_new(it->netns, it->ifname, &c->candidate);
        if (r >= 0)
                r = c->kind == CHANGE_POLICY || c->kind == CHANGE_POLICY_DRY_RUN
                            ? iface_set_policies(c->candidate, c->policies, c->n_policies)
                            : iface_set_policies(c->candidate, it->policies, it->n_policies);
        if (r >= 0)
                r = iface_set_documents(c->candidate, api, &api_facts, hog, hog_path, &it->facts[SOURCE_HOG],
                                        m->kernel.tcx, m->registry);
        document_facts_done(&api_facts);
        if (r < 0)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        c->candidate->ifindex = it->ifindex;
        c->candidate->repairs = it->repairs;
        share_programs(m, c->candidate, it);
        return 0;
}

/* ---- applying: one turn of the loop, from a fresh look at the kernel ---- */

typedef struct Rollback {
        void *cls, *tcx;
} Rollback;

static void rollback_free(Rollback *rb) {
        attach_kind_cls.snapshot_free(rb->cls);
        attach_kind_tcx.snapshot_free(rb->tcx);
}

/* Puts the kernel back as it was before a change that failed after changing it. */
static void rollback(Manager *m, Iface *it, AttachContext *ctx, const Rollback *rb, const char *what,
                     const Error *why) {
        Error e = ERROR_NULL;
        int r;

        log_error("%s: %s failed: %s; rolling back", it->ifname, what, strna(why ? why->message : NULL));
        r = attach_kind_cls.restore(ctx, rb->cls, &e);
        if (r >= 0)
                r = attach_kind_tcx.restore(ctx, rb->tcx, &e);
        /* tcx: the old document's links come back as they were (its programs are still held). */
        if (r >= 0 && iface_uses_tcx(it) && it->programs_held) {
                AttachContext old;
                AttachObserved obs = { 0 };
                attach_context_init(m, it, ctx->rtnl, &old);
                r = attach_kind_tcx.observe(&old, &obs.tcx, &e);
                if (r >= 0) {
                        void *plan = NULL;
                        r = attach_kind_tcx.plan(&old, obs.tcx, &plan, &e);
                        if (r >= 0)
                                r = attach_kind_tcx.apply(&old, obs.tcx, plan, &e);
                        attach_kind_tcx.plan_free(plan);
                }
                attach_observed_free(&obs);
        }
        if (r >= 0) {
                /* What GET shows comes from the filters' facts: read them back from the kernel. */
                AttachContext old;
                AttachObserved obs = { 0 };
                attach_context_init(m, it, ctx->rtnl, &old);
                if (attach_observe(&old, &obs, NULL) >= 0)
                        attach_observed_free(&obs);
                error_done(&e);
                return;
        }
        /* The kernel is now neither the old document nor the new one: say so where it shows. */
        log_error("%s: rollback failed: %s", it->ifname, strna(e.message));
        if (it->visible) {
                Error f = ERROR_NULL;
                error_set(&f, e.error, "kernel_error", "rollback after a failed change failed: %s",
                          strna(e.message));
                iface_set_state(it, IFACE_FAILED, &f);
                error_done(&f);
                manager_changed(m, it, IFACE_CHANGED_STATE);
        }
        error_done(&e);
}

/* The candidate's documents, filters and programs become the interface's; the old ones are released. */
static void commit(Manager *m, Iface *it, Iface *cand) {
        iface_release_programs(it, m->registry);
        free(it->filters);
        it->filters = TAKE_PTR(cand->filters);
        it->n_filters = cand->n_filters;
        cand->n_filters = 0;
        it->programs_held = cand->programs_held;
        document_unref(it->api);
        document_unref(it->hog);
        it->api = TAKE_PTR(cand->api);
        it->hog = TAKE_PTR(cand->hog);
        free(it->hog_path);
        it->hog_path = TAKE_PTR(cand->hog_path);
        for (DocumentSource s = 0; s < _SOURCE_MAX; s++) {
                document_facts_done(&it->facts[s]);
                it->facts[s] = cand->facts[s];
                cand->facts[s] = (DocumentFacts){ 0 };
        }
        memcpy(it->hook_source, cand->hook_source, sizeof(it->hook_source));
        (void) iface_set_policies(it, NULL, 0);
        it->policies = TAKE_PTR(cand->policies);
        it->n_policies = cand->n_policies;
        cand->n_policies = 0;
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                free(it->hook_conflict[dir]);
                it->hook_conflict[dir] = TAKE_PTR(cand->hook_conflict[dir]);
                it->hook_policy[dir] = cand->hook_policy[dir];
        }
}

/* The store says what the change did: the API's document (or its removal), and what a hog attached. */
static int store_change(Change *c, Iface *it, Iface *cand, Error *reterr) {
        Manager *m = c->m;
        int r = 0;

        (void) iface_update_facts(cand);
        if (c->kind == CHANGE_PUT)
                r = store_document_save(m->store, cand->api, &cand->facts[SOURCE_API], reterr);
        else if (c->kind == CHANGE_DELETE && it->api)
                r = store_document_remove(m->store, SOURCE_API, it->netns, it->ifname, reterr);
        if (r < 0)
                return r;
        if (cand->hog) {
                Error e = ERROR_NULL;
                if (store_document_save(m->store, cand->hog, &cand->facts[SOURCE_HOG], &e) < 0)
                        log_warning("%s: %s", it->ifname, strna(e.message));
                error_done(&e);
        } else if (it->hog)
                (void) store_document_remove(m->store, SOURCE_HOG, it->netns, it->ifname, NULL);
        return 0;
}

/* Applies the candidate (programs held) to the kernel and the store, rolling back on failure. seen:
 * what the kernel had, read in this same turn of the loop (taken), or NULL to read it now. */
static int apply_candidate(Change *c, Iface *it, NlSocket *rtnl, bool present, AttachObserved *seen,
                           Error *reterr) {
        Manager *m = c->m;
        Iface *cand = c->candidate;
        AttachObserved obs = { 0 };
        Rollback rb = { 0 };
        AttachContext ctx;
        int r = 0;

        if (present) {
                attach_context_init(m, cand, rtnl, &ctx);
                if (seen && (seen->cls || seen->tcx)) {
                        /* the filters' facts were filled then, with no programs held: again with them */
                        obs = *seen;
                        *seen = (AttachObserved){ 0 };
                        attach_kind_cls.settle(&ctx, obs.cls);
                        attach_kind_tcx.settle(&ctx, obs.tcx);
                } else
                        r = attach_observe(&ctx, &obs, reterr);
                if (r >= 0)
                        r = attach_kind_cls.snapshot(&ctx, obs.cls, &rb.cls, reterr);
                if (r >= 0)
                        r = attach_kind_tcx.snapshot(&ctx, obs.tcx, &rb.tcx, reterr);
                if (r >= 0) {
                        m->counters.reconciles++;
                        r = attach_apply_all(&ctx, &obs, reterr);
                        if (r < 0)
                                rollback(m, it, &ctx, &rb, "applying the change", reterr);
                }
                attach_observed_free(&obs);
                if (r < 0) {
                        rollback_free(&rb);
                        return r;
                }
        }
        r = store_change(c, it, cand, reterr);
        if (r < 0 && present)
                rollback(m, it, &ctx, &rb, "storing the change", reterr);
        rollback_free(&rb);
        return r;
}

/* The interface a change is for: the table's, or a new one not shown until a change stores it. */
static Iface *iface_for_change(Manager *m, const char *netns, const char *ifname, Error *reterr) {
        Iface *it = iface_table_get(m->ifaces, netns, ifname);

        if (it)
                return it;
        if (iface_new(netns, ifname, &it) < 0 || iface_table_reserve(m->ifaces) < 0) {
                iface_free(it, NULL);
                error_set(reterr, ENOMEM, "internal_error", "out of memory");
                return NULL;
        }
        iface_table_add(m->ifaces, it);
        return it;
}

Change *change_new(Manager *m, ChangeKind kind, const DaemonExpect *expect) {
        Change *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->m = m;
        c->kind = kind;
        c->op.run = change_run;
        c->op.free = change_free;
        resolution_init(&c->res, m, change_is_dry_run(c), on_resolved);
        c->res.resolver.fresh = kind == CHANGE_PUT || kind == CHANGE_DRY_RUN;
        if (expect) {
                c->expect = *expect;
                if (expect->as_given && !(c->expect_text = strdup(expect->as_given))) {
                        free(c);
                        return NULL;
                }
                c->expect.as_given = c->expect_text;
        }
        return c;
}

void change_queue(Manager *m, Change *c, const char *netns, const char *ifname) {
        Error e = ERROR_NULL;
        Iface *it = iface_for_change(m, netns, ifname, &e);

        if (!it) {
                change_finish(c, NULL, &e);
                error_done(&e);
                change_free(&c->op);
                return;
        }
        c->op.iface = it;
        request_queue_operation(m->queue, &c->op);
}

/* ---- one run of a change: as far as it can go now ---- */

/* A new interface whose first change stored nothing (a dry run, a failure) leaves nothing behind: not
 * in the table, and its namespace not followed for it. */
static int forget_if_new(Manager *m, Iface *it) {
        if (it->visible || it->ops->next)
                return 0;
        manager_forget(m, it);
        return -ESRCH;
}

/* A policy came, changed or went for the interface: its filters are composed again, and it is
 * reconciled as any interface is (a failure is its state, retried with a backoff, not the answer's). */
static int policy_change_run(Manager *m, Change *c, Iface *it) {
        Error e = ERROR_NULL;
        int r;

        if (!c->composed) {
                bool was_visible = it->visible;
                /* The old policies stay alive until the filters are composed again: the filters point
                 * into their documents. */
                _cleanup_free_ Policy **old = calloc(it->n_policies + 1, sizeof(Policy *));
                size_t n_old = old ? it->n_policies : 0;
                for (size_t i = 0; i < n_old; i++)
                        old[i] = policy_ref(it->policies[i]);
                r = !old ? -ENOMEM : iface_set_policies(it, c->policies, c->n_policies);
                if (r >= 0)
                        r = iface_set_documents(it, it->api, &it->facts[SOURCE_API], it->hog, it->hog_path,
                                                &it->facts[SOURCE_HOG], m->kernel.tcx, m->registry);
                for (size_t i = 0; i < n_old; i++)
                        policy_unref(old[i]);
                if (r < 0) {
                        error_set(&e, ENOMEM, "internal_error", "out of memory");
                        change_finish(c, it, &e);
                        error_done(&e);
                        return forget_if_new(m, it);
                }
                c->composed = true;
                if (!it->api && !it->hog && it->n_policies == 0) {
                        /* No policy is for it any more, and nothing else is: clsd's filters go. */
                        NlSocket *rtnl =
                                it->ifindex > 0 ? netns_set_rtnl_followed(m->netns, it->netns) : NULL;
                        if (rtnl && iface_remove_all(m, it, rtnl, &e) < 0)
                                log_warning("%s: cannot remove clsd's filters: %s", it->ifname,
                                            strna(e.message));
                        error_done(&e);
                        change_finish(c, NULL, NULL);
                        manager_forget(m, it);
                        return -ESRCH;
                }
                it->visible = true;
                iface_table_touch(m->ifaces);
                if (!was_visible) {
                        it->fresh = !it->api && !it->hog;
                        manager_changed(m, it, IFACE_ADDED);
                }
        }
        it->changing = true;
        r = iface_reconcile_and_report(m, it);
        it->changing = false;
        if (r == -EAGAIN)
                return -EAGAIN;
        if (r < 0)
                request_queue_reconcile(m->queue, it, REASON_RETRY);
        manager_changed(m, it, IFACE_CHANGED_DOCUMENT | IFACE_CHANGED_FILTERS);
        change_finish(c, it, NULL);
        return 0;
}

int change_run(Manager *m, Operation *op) {
        Change *c = (Change *) op;
        Iface *it = op->iface;
        AttachObserved obs = { 0 };
        Error e = ERROR_NULL;
        NlSocket *rtnl = NULL;
        NlLink link = { 0 };
        bool present;
        int r;

        if (c->kind == CHANGE_POLICY)
                return policy_change_run(m, c, it);
        /* Checks against the interface as it is when the change's turn comes. */
        if (!c->candidate) {
                r = check_expect(it, &c->expect, &e);
                if (r >= 0 && (c->kind == CHANGE_PUT || c->kind == CHANGE_DRY_RUN))
                        for (Direction dir = 0; dir < _DIRECTION_MAX && r >= 0; dir++)
                                if (hog_holds(it->hog, dir) && c->doc->n_filters[dir] > 0)
                                        r = error_set(&e, EBUSY, "hog_owned",
                                                      "%s: the %s hook of %s is declared by the hog %s; "
                                                      "change that "
                                                      "file and send clsd SIGHUP",
                                                      direction_to_string(dir), direction_to_string(dir),
                                                      it->ifname, it->hog_path);
                if (r >= 0 && c->kind == CHANGE_DELETE && !it->visible)
                        r = error_set(&e, ENOENT, "document_not_found", "no classifier document for %s",
                                      it->ifname);
                if (r >= 0 && c->kind == CHANGE_DELETE && !it->api && it->hog)
                        r = error_set(&e, EBUSY, "hog_owned",
                                      "%s is declared by the hog %s; remove that file and send clsd SIGHUP",
                                      it->ifname, it->hog_path);
                if (r >= 0 && c->doc && !c->shared_resolver) {
                        r = resolution_run(&c->res, c->doc, &e);
                        if (r == -EAGAIN)
                                return -EAGAIN;
                }
                /* The generation counts changes of the document: the same one again keeps it (and is
                 * still reconciled, which repairs any drift). */
                if (r >= 0 && (c->kind == CHANGE_PUT || c->kind == CHANGE_DRY_RUN))
                        c->doc->generation = !it->api || !it->visible ? 1
                                             : document_spec_equal(it->api, c->doc)
                                                     ? it->api->generation
                                                     : it->api->generation + 1;
                if (r >= 0)
                        r = make_candidate(c, it, &e);
                if (r < 0)
                        goto fail;
        }
        r = manager_link(m, it->netns, it->ifname, &rtnl, &link, &e);
        present = r >= 0;
        if (r == -ENODEV) {
                error_done(&e);
                r = 0;
        }
        if (r >= 0 && present && c->candidate->n_filters > 0) {
                AttachContext ctx;
                c->candidate->ifindex = link.ifindex;
                attach_context_init(m, c->candidate, rtnl, &ctx);
                r = attach_observe(&ctx, &obs, &e);
                if (r >= 0 && !change_is_dry_run(c))
                        r = attach_kind_cls.check(&ctx, obs.cls, &e);
                if (r >= 0 && !change_is_dry_run(c))
                        r = attach_kind_tcx.check(&ctx, obs.tcx, &e);
        }
        if (r < 0)
                goto fail;
        if (change_is_dry_run(c)) {
                attach_observed_free(&obs);
                r = dry_run_apply(c, it, rtnl, present, &e);
                if (r < 0)
                        goto fail;
                change_finish(c, it, NULL);
                return forget_if_new(m, it);
        }
        /* Every program is loaded and verified before anything changes. */
        if (!c->candidate->programs_held) {
                r = iface_acquire_programs(m, c->candidate, it, &e);
                if (r == -EAGAIN) {
                        attach_observed_free(&obs); /* the kernel is read again when they are in */
                        return -EAGAIN;
                }
                if (r < 0)
                        goto fail;
        }
        if ((c->kind == CHANGE_DELETE || c->kind == CHANGE_HOG) && !c->candidate->api &&
            !c->candidate->hog && c->candidate->n_policies == 0) {
                /* Nothing is declared any more: everything of clsd's goes, and the interface with it. */
                attach_observed_free(&obs);
                if (present) {
                        r = iface_remove_all(m, it, rtnl, &e);
                        if (r < 0)
                                goto fail;
                }
                if (it->api &&
                    (r = store_document_remove(m->store, SOURCE_API, it->netns, it->ifname, &e)) < 0)
                        goto fail;
                if (it->hog)
                        (void) store_document_remove(m->store, SOURCE_HOG, it->netns, it->ifname, NULL);
                log_info("%s: document deleted", it->ifname);
                change_finish(c, NULL, NULL);
                manager_forget(m, it);
                return -ESRCH;
        }
        r = apply_candidate(c, it, rtnl, present, &obs, &e);
        attach_observed_free(&obs);
        if (r < 0)
                goto fail;
        {
                bool was_visible = it->visible;
                commit(m, it, c->candidate);
                iface_set_state(it, present ? IFACE_CONFIGURED : IFACE_PENDING, NULL);
                it->visible = true;
                iface_table_touch(m->ifaces);
                iface_table_set_ifindex(m->ifaces, it, present ? link.ifindex : 0);
                for (size_t i = 0; i < it->n_filters; i++)
                        it->filters[i].state = FILTER_CONFIGURED;
                map_config_prune(m); /* filters or maps no longer configuration forget their entries */
                if (c->kind == CHANGE_PUT)
                        log_info("%s: document generation %" PRIu64 " stored, %s", it->ifname,
                                 it->api->generation, iface_state_to_string(it->state));
                else if (c->kind == CHANGE_DELETE)
                        log_info("%s: API document deleted; the hog %s stays", it->ifname,
                                 strna(it->hog_path));
                manager_changed(m, it,
                                (was_visible ? 0 : IFACE_ADDED) | IFACE_CHANGED_DOCUMENT |
                                        IFACE_CHANGED_STATE | IFACE_CHANGED_FILTERS);
        }
        change_finish(c, it, NULL);
        return 0;
fail:
        attach_observed_free(&obs);
        if (!change_is_dry_run(c))
                daemon_count_error(m, e.code);
        change_finish(c, it, &e);
        error_done(&e);
        return forget_if_new(m, it);
}
