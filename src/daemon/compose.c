/* compose.c: an interface's filters composed from its documents and the policies that match it. On each
 * hook: a hog's filters if it declares any there, else a hog's policy's (the lowest order), else the
 * interface's own document's, else the API's policy of lowest order that declares some (two of that
 * order: a conflict, none applied). Filters alike in the old composition keep their programs; one whose
 * object no trusted key verifies any more is left out. */
#include <stdio.h>
#include <string.h>

#include "iface.h"
#include "daemon-changes.h"
#include "daemon-policies.h"
#include "store-policy.h"

bool filter_same_hook(const Filter *a, const Filter *b) {
        return a->dir == b->dir && a->kind == b->kind && streq(a->instance, b->instance) &&
               streq(a->spec->name, b->spec->name);
}

bool filter_alike(const Filter *a, const Filter *b) {
        if (!filter_same_hook(a, b) || !filter_spec_program_alike(a->spec, b->spec) ||
            a->spec->n_actions != b->spec->n_actions)
                return false;
        for (size_t k = 0; k < a->spec->n_actions; k++)
                if (!filter_spec_action_alike(a->spec, b->spec, k))
                        return false;
        return true;
}

/* The facts of the old document's filters that the new one declares alike (same name, object, program,
 * actions): what was attached for them may be adopted (if the same instance: see iface_set_documents()). */
int iface_facts_for(const Iface *it, const Document *doc, DocumentFacts *ret) {
        DocumentFacts f = { .clsact_created = it->facts[SOURCE_API].clsact_created };

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < doc->n_filters[dir]; i++) {
                        const FilterSpec *s = &doc->filters[dir][i];
                        const FilterFact *old = document_facts_find(&it->facts[SOURCE_API], s->name);
                        const FilterSpec *was =
                                it->api ? document_find_filter(it->api, s->name, NULL) : NULL;
                        FilterFact fact;
                        if (!old || !was || !filter_spec_program_alike(was, s))
                                continue;
                        fact = *old;
                        fact.n_actions = 0;
                        for (size_t k = 0; k < old->n_actions && filter_spec_action_alike(was, s, k); k++)
                                fact.n_actions = k + 1;
                        if (document_facts_set(&f, &fact) < 0) {
                                document_facts_done(&f);
                                return -ENOMEM;
                        }
                }
        *ret = f;
        return 0;
}

/* Among the hog policies (hogs with "match") or the API's, the one that holds the hook: the lowest
 * order declaring filters there; two of that order are a conflict (NULL, and *conflict says which). */
static const Policy *hook_policy(const Iface *it, Direction dir, bool hogs, char **conflict) {
        const Policy *first = NULL;

        *conflict = NULL;
        for (size_t i = 0; i < it->n_policies; i++) {
                const Policy *p = it->policies[i];
                if (p->doc->n_filters[dir] == 0 || !!p->hog_path != hogs)
                        continue;
                if (!first) {
                        first = p;
                        continue;
                }
                if (p->order == first->order) {
                        if (asprintf(conflict, "%s and %s (both order %d)", first->name, p->name,
                                     (int) p->order) < 0)
                                *conflict = NULL;
                        return NULL;
                }
                break;
        }
        return first;
}

/* The hook is p's: what the kernel has of it is the interface's state (all or nothing), so the hook is
 * applied only once the interface is configured. */
static const char *hook_state(const Iface *it, const Policy *p, Direction dir, bool by_state,
                              const char **by) {
        *by = NULL;
        if (p->doc->n_filters[dir] == 0)
                return NULL;
        if (it->hook_policy[dir] == p)
                return !by_state                    ? "applied"
                       : it->state == IFACE_FAILED  ? "failed"
                       : it->state == IFACE_PENDING ? "pending"
                                                    : "applied";
        if (it->hook_conflict[dir]) {
                *by = it->hook_conflict[dir];
                return "conflict";
        }
        if (hog_holds(it->hog, dir))
                *by = "hog";
        else if (it->hook_policy[dir])
                *by = it->hook_policy[dir]->name;
        else if (it->api && it->api->n_filters[dir] > 0)
                *by = "document";
        return "overridden";
}

const char *iface_policy_state(const Iface *it, const Policy *p, Direction dir, const char **by) {
        return hook_state(it, p, dir, true, by);
}

static const char *const policy_iface_states[_POLICY_IFACE_STATE_MAX] = {
        [POLICY_IFACE_CONFIGURED] = "configured", [POLICY_IFACE_PENDING] = "pending",
        [POLICY_IFACE_FAILED] = "failed",         [POLICY_IFACE_CONFLICT] = "conflict",
        [POLICY_IFACE_OVERRIDDEN] = "overridden",
};

const char *policy_iface_state_to_string(PolicyIfaceState s) {
        return s < _POLICY_IFACE_STATE_MAX ? policy_iface_states[s] : NULL;
}

/* Its hooks taken together: a conflict on one is the interface's (nothing of p runs there), then a
 * failure, then pending; configured if p holds a hook, overridden if every hook it declares is another
 * source's. */
static PolicyIfaceState outcome(const Iface *it, const Policy *p, bool by_state, const char **by) {
        PolicyIfaceState st = POLICY_IFACE_CONFIGURED;
        bool held = false, declared = false;
        const char *over = NULL;

        *by = NULL;
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                const char *b = NULL, *s = hook_state(it, p, dir, by_state, &b);
                if (!s)
                        continue;
                declared = true;
                if (streq(s, "conflict")) {
                        *by = b;
                        return POLICY_IFACE_CONFLICT;
                }
                if (streq(s, "overridden")) {
                        over = over ?: b;
                        continue;
                }
                held = true;
                if (streq(s, "failed"))
                        st = POLICY_IFACE_FAILED;
                else if (streq(s, "pending") && st != POLICY_IFACE_FAILED)
                        st = POLICY_IFACE_PENDING;
        }
        if (declared && !held) {
                *by = over;
                return POLICY_IFACE_OVERRIDDEN;
        }
        return st;
}

PolicyIfaceState iface_policy_outcome(const Iface *it, const Policy *p, const char **by) {
        return outcome(it, p, true, by);
}

PolicyIfaceState iface_policy_composed(const Iface *it, const Policy *p, const char **by) {
        return outcome(it, p, false, by);
}

/* Whether a filter uses an object no trusted key verifies any more (its classifier's or an action's): 1,
 * with what and why added to *untrusted ("; " between two). */
static int filter_revoked(const FilterSpec *spec, Direction dir, const Registry *reg, char **untrusted) {
        for (int a = -1; a < (int) spec->n_actions; a++) {
                const char *digest = a < 0 ? spec->digest : spec->actions[a].digest;
                const char *why = registry_revoked(reg, digest);
                char *s;
                if (!why)
                        continue;
                if (asprintf(&s, "%s%s%s filter %s: object %s: %s", strempty(*untrusted),
                             *untrusted ? "; " : "", direction_to_string(dir), spec->name, digest,
                             why) >= 0) {
                        free(*untrusted);
                        *untrusted = s;
                }
                return 1;
        }
        return 0;
}

/* Whose filters each hook has, in precedence order: a hog; then a hog's policy (configuration); then the
 * interface's document; then the API's policies (a conflict: a policy's, none of them). Fills the
 * interface's hook_source, hook_policy and hook_conflict, and docs[] with the document each hook takes
 * its filters from; the number of filters they declare. */
static size_t compose_hooks(Iface *it, const Document *api, const Document *hog,
                            const Document *docs[_DIRECTION_MAX]) {
        size_t total = 0;

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                free(it->hook_conflict[dir]);
                it->hook_conflict[dir] = NULL;
                it->hook_policy[dir] = NULL;
                if (!hog_holds(hog, dir))
                        it->hook_policy[dir] = hook_policy(it, dir, true, &it->hook_conflict[dir]);
                if (!hog_holds(hog, dir) && !it->hook_policy[dir] && !it->hook_conflict[dir] &&
                    !(api && api->n_filters[dir] > 0))
                        it->hook_policy[dir] = hook_policy(it, dir, false, &it->hook_conflict[dir]);
                it->hook_source[dir] = hog_holds(hog, dir)              ? SOURCE_HOG
                                       : it->hook_policy[dir]           ? SOURCE_POLICY
                                       : it->hook_conflict[dir]         ? SOURCE_POLICY
                                       : api && api->n_filters[dir] > 0 ? SOURCE_API
                                       : hog || !api                    ? SOURCE_HOG
                                                                        : SOURCE_API;
                docs[dir] = it->hook_source[dir] == SOURCE_HOG   ? hog
                            : it->hook_source[dir] == SOURCE_API ? api
                            : it->hook_policy[dir]               ? it->hook_policy[dir]->doc
                                                                 : NULL;
                total += docs[dir] ? docs[dir]->n_filters[dir] : 0;
        }
        return total;
}

/* The filter of spec on the hook dir, with what was attached for it (facts) and what an alike filter of
 * the old composition held and attached, which it takes over. */
static void compose_filter(Iface *it, Filter *f, const FilterSpec *spec, Direction dir, DocumentSource src,
                           const DocumentFacts *facts, bool tcx) {
        const FilterFact *fact = document_facts_find(facts, spec->name);

        *f = (Filter){ .spec = spec, .dir = dir, .source = src };
        f->kind = filter_spec_uses_tcx(f->spec, tcx) ? ATTACH_KIND_TCX : ATTACH_KIND_CLS;
        if (filter_has_own_maps(f->spec))
                program_instance_name(it->key, dir, f->spec->name, f->instance);
        /* what was attached for another instance (shared, or own) is not this one's */
        if (fact && !streq(fact->instance, f->instance))
                fact = NULL;
        if (fact)
                f->fact = *fact;
        else
                snprintf(f->fact.name, sizeof(f->fact.name), "%s", f->spec->name);
        for (size_t k = 0; k < it->n_filters; k++) {
                Filter *old = &it->filters[k];
                if (!old->spec || !filter_alike(old, f))
                        continue;
                f->program = TAKE_PTR(old->program);
                memcpy(f->actions, old->actions, sizeof(f->actions));
                memset(old->actions, 0, sizeof(old->actions));
                f->observed = old->observed;
                f->state = old->state;
                if (!fact)
                        f->fact = old->fact;
                old->spec = NULL;
                break;
        }
}

/* The documents (references taken) and what was attached for them become the interface's. */
static void take_documents(Iface *it, Document *api, Document *hog, char *hog_path,
                           DocumentFacts facts[_SOURCE_MAX]) {
        document_ref(api);
        document_ref(hog);
        document_unref(it->api);
        document_unref(it->hog);
        it->api = api;
        it->hog = hog;
        free(it->hog_path);
        it->hog_path = hog_path;
        /* clsd's clsact stays clsd's whichever document asks for the interface now. */
        bool created = iface_clsact_created(it);
        for (DocumentSource s = 0; s < _SOURCE_MAX; s++) {
                facts[s].clsact_created = facts[s].clsact_created || created;
                document_facts_done(&it->facts[s]);
                it->facts[s] = facts[s];
        }
}

int iface_set_documents(Iface *it, Document *api, const DocumentFacts *api_facts, Document *hog,
                        const char *hog_path, const DocumentFacts *hog_facts, bool tcx, Registry *reg) {
        _cleanup_free_ char *untrusted = NULL;
        DocumentFacts facts[_SOURCE_MAX] = { 0 };
        const Document *docs[_DIRECTION_MAX];
        _cleanup_free_ char *path = NULL;
        Filter *filters;
        size_t n = 0, total;

        if ((hog_path && !(path = strdup(hog_path))) ||
            (api_facts && document_facts_copy(api_facts, &facts[SOURCE_API]) < 0) ||
            (hog_facts && document_facts_copy(hog_facts, &facts[SOURCE_HOG]) < 0)) {
                document_facts_done(&facts[SOURCE_API]);
                document_facts_done(&facts[SOURCE_HOG]);
                return -ENOMEM;
        }
        total = compose_hooks(it, api, hog, docs);
        filters = calloc(total ?: 1, sizeof(Filter)); /* a Filter is 1 KiB: none spare */
        if (!filters) {
                document_facts_done(&facts[SOURCE_API]);
                document_facts_done(&facts[SOURCE_HOG]);
                return -ENOMEM;
        }
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                DocumentSource src = it->hook_source[dir];
                for (size_t i = 0; docs[dir] && i < docs[dir]->n_filters[dir]; i++) {
                        const FilterSpec *spec = &docs[dir]->filters[dir][i];
                        if (filter_revoked(spec, dir, reg, &untrusted) != 0)
                                continue; /* an object no trusted key verifies: the filter goes */
                        compose_filter(it, &filters[n++], spec, dir, src, &facts[src], tcx);
                }
        }
        for (size_t k = 0; k < it->n_filters; k++)
                filter_release(&it->filters[k], reg);
        free(it->filters);
        it->filters = filters;
        it->n_filters = n;
        free(it->untrusted);
        it->untrusted = TAKE_PTR(untrusted);
        it->programs_held = true; /* nothing new to acquire (actions are acquired with their filter) */
        for (size_t i = 0; i < n; i++)
                if (!filters[i].program)
                        it->programs_held = false;
        take_documents(it, api, hog, TAKE_PTR(path), facts);
        return 0;
}
