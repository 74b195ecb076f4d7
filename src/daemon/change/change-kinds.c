/* change-kinds.c: what each kind of change is (its row: its own checks, the documents its candidate is
 * made of, whom it answers), and the candidate made from them: the interface as the change would leave it,
 * composed apart from the interface, its alike filters sharing the interface's programs. */
#include <stdio.h>
#include <string.h>

#include "change.h"
#include "expect.h"
#include "store-policy.h"

/* ---- checks ---- */

static int check_put(Change *c, const Iface *it, Error *reterr) {
        const Document *api = it->visible ? it->api : NULL;
        int r;

        r = expect_check(&c->expect, "document", api, api ? api->generation : 0, reterr);
        if (r < 0)
                return r;
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                if (hog_holds(it->hog, dir) && c->doc->n_filters[dir] > 0)
                        return error_set(reterr, EBUSY, ERROR_HOG_OWNED,
                                         "%s: the %s hook of %s is declared by the hog %s; change that file "
                                         "and send clsd SIGHUP",
                                         direction_to_string(dir), direction_to_string(dir), it->ifname,
                                         it->hog_path);
        return 0;
}

static int check_delete(Change *c, const Iface *it, Error *reterr) {
        const Document *api = it->visible ? it->api : NULL;
        int r;

        r = expect_check(&c->expect, "document", api, api ? api->generation : 0, reterr);
        if (r < 0)
                return r;
        if (!it->visible)
                return error_set(reterr, ENOENT, ERROR_DOCUMENT_NOT_FOUND, "no classifier document for %s",
                                 it->ifname);
        if (!it->api && it->hog)
                return error_set(reterr, EBUSY, ERROR_HOG_OWNED,
                                 "%s is declared by the hog %s; remove that file and send clsd SIGHUP",
                                 it->ifname, it->hog_path);
        return 0;
}

/* ---- the documents of the candidate ---- */

/* The generation counts changes of the document: the same one again keeps it (and is still reconciled,
 * which repairs any drift). */
static int documents_put(Change *c, const Iface *it, Document **api, DocumentFacts *api_facts,
                         Document **hog, const char **hog_path, Policy *const **policies,
                         size_t *n_policies) {
        c->doc->generation = !it->api || !it->visible               ? 1
                             : document_spec_equal(it->api, c->doc) ? it->api->generation
                                                                    : it->api->generation + 1;
        *api = c->doc;
        *hog = it->hog;
        *hog_path = it->hog_path;
        *policies = it->policies;
        *n_policies = it->n_policies;
        return iface_facts_for(it, c->doc, api_facts);
}

static int documents_delete(Change *c, const Iface *it, Document **api, DocumentFacts *api_facts,
                            Document **hog, const char **hog_path, Policy *const **policies,
                            size_t *n_policies) {
        (void) c;
        *api = NULL;
        *api_facts = (DocumentFacts){ 0 };
        *hog = it->hog;
        *hog_path = it->hog_path;
        *policies = it->policies;
        *n_policies = it->n_policies;
        return 0;
}

static int documents_hog(Change *c, const Iface *it, Document **api, DocumentFacts *api_facts,
                         Document **hog, const char **hog_path, Policy *const **policies,
                         size_t *n_policies) {
        *api = it->api;
        *hog = c->doc;
        *hog_path = c->hog_path;
        *policies = it->policies;
        *n_policies = it->n_policies;
        return document_facts_copy(&it->facts[SOURCE_API], api_facts);
}

static int documents_policies(Change *c, const Iface *it, Document **api, DocumentFacts *api_facts,
                              Document **hog, const char **hog_path, Policy *const **policies,
                              size_t *n_policies) {
        *api = it->api;
        *hog = it->hog;
        *hog_path = it->hog_path;
        *policies = c->policies;
        *n_policies = c->n_policies;
        return document_facts_copy(&it->facts[SOURCE_API], api_facts);
}

const ChangeType change_types[_CHANGE_KIND_MAX] = {
        [CHANGE_PUT] = { .name = "put",
                         .fresh_paths = true,
                         .check = check_put,
                         .documents = documents_put },
        [CHANGE_DRY_RUN] = { .name = "dry run",
                             .dry_run = true,
                             .fresh_paths = true,
                             .check = check_put,
                             .documents = documents_put },
        [CHANGE_DELETE] = { .name = "delete", .check = check_delete, .documents = documents_delete },
        [CHANGE_HOG] = { .name = "hog", .documents = documents_hog },
        [CHANGE_POLICY] = { .name = "policy", .intent = true, .documents = documents_policies },
        [CHANGE_POLICY_DRY_RUN] = { .name = "policy dry run",
                                    .dry_run = true,
                                    .intent = true,
                                    .documents = documents_policies },
};

/* ---- the answer ---- */

void change_finish(Change *c, Iface *it, const Error *e) {
        if (c->type->dry_run) {
                if (c->dry_done)
                        c->dry_done(c->m, e ? NULL : &c->dry_run, e, c->userdata);
        } else if (c->done)
                c->done(c->m, e ? NULL : it, e, c->userdata);
        c->done = NULL;
        c->dry_done = NULL;
}

/* ---- the candidate ---- */

/* The candidate's filters take the programs the interface's filters on the same hook hold where they are
 * alike (part by part: filter_spec_program_alike(), filter_spec_action_alike()): nothing is loaded again
 * for what does not change. */
static void share_programs(Iface *candidate, const Iface *it) {
        for (size_t i = 0; i < candidate->n_filters; i++) {
                Filter *f = &candidate->filters[i];
                for (size_t k = 0; k < it->n_filters; k++) {
                        const Filter *o = &it->filters[k];
                        if (!filter_same_hook(f, o))
                                continue;
                        if (!f->program && o->program && filter_spec_program_alike(f->spec, o->spec))
                                f->program = registry_ref(o->program);
                        for (size_t j = 0; j < f->spec->n_actions; j++)
                                if (!f->actions[j] && o->actions[j] &&
                                    filter_spec_action_alike(f->spec, o->spec, j))
                                        f->actions[j] = registry_ref(o->actions[j]);
                }
        }
}

int change_make_candidate(Change *c, Iface *it, Error *reterr) {
        Manager *m = c->m;
        Document *api, *hog;
        _cleanup_(document_facts_done) DocumentFacts api_facts = { 0 };
        const char *hog_path;
        Policy *const *policies;
        size_t n_policies;

        if (c->type->documents(c, it, &api, &api_facts, &hog, &hog_path, &policies, &n_policies) < 0 ||
            iface_new(it->netns, it->ifname, &c->candidate) < 0 ||
            iface_set_policies(c->candidate, policies, n_policies) < 0 ||
            iface_set_documents(c->candidate, api, &api_facts, hog, hog_path, &it->facts[SOURCE_HOG],
                                m->kernel.tcx, m->registry) < 0)
                return error_oom(reterr);
        c->candidate->ifindex = it->ifindex;
        c->candidate->repairs = it->repairs;
        share_programs(c->candidate, it);
        return 0;
}
