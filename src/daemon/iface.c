/* iface.c: one interface's runtime: its documents composed into filters (on each hook the hog's if it
 * declares any there, else the API's), the programs they hold, what was attached for them, its state. */
#include <stdio.h>
#include <string.h>

#include "iface.h"
#include "log.h"

const char *iface_state_to_string(IfaceState s) {
        static const char *const names[_IFACE_STATE_MAX] = {
                [IFACE_PENDING] = "pending",
                [IFACE_CONFIGURED] = "configured",
                [IFACE_FAILED] = "failed",
        };
        return s < _IFACE_STATE_MAX ? names[s] : "unknown";
}

NlHook hook_of(Direction dir) {
        return dir == DIRECTION_INGRESS ? NL_HOOK_INGRESS : NL_HOOK_EGRESS;
}

void filter_kernel_name(const FilterSpec *f, char buf[256]) {
        snprintf(buf, 256, NL_FILTER_NAME_PREFIX "%s", f->name);
}

void action_kernel_name(const FilterSpec *f, size_t k, char buf[NL_ACTION_NAME_MAX]) {
        snprintf(buf, NL_ACTION_NAME_MAX, NL_FILTER_NAME_PREFIX "%s/%zu", f->name, k + 1);
}

uint32_t filter_parent(const FilterSpec *f, Direction dir) {
        return f->has_parent ? f->parent : nl_hook_parent(hook_of(dir));
}

bool hog_holds(const Document *hog, Direction dir) {
        return hog && hog->n_filters[dir] > 0;
}

bool iface_clsact_created(const Iface *it) {
        for (DocumentSource s = 0; s < _SOURCE_MAX; s++)
                if (it->facts[s].clsact_created)
                        return true;
        return false;
}

int iface_new(const char *netns, const char *ifname, Iface **ret) {
        Iface *it = calloc(1, sizeof(*it));

        if (!it)
                return -ENOMEM;
        if ((netns && !(it->netns = strdup(netns))) || !(it->ifname = strdup(ifname)) ||
            asprintf(&it->key, "%s/%s", strempty(netns), ifname) < 0) {
                it->key = NULL;
                iface_free(it, NULL);
                return -ENOMEM;
        }
        *ret = it;
        return 0;
}

static void filter_release(Filter *f, Registry *reg) {
        if (!reg)
                return;
        registry_release(reg, f->program);
        f->program = NULL;
        for (size_t k = 0; k < NL_ACTIONS_MAX; k++) {
                registry_release(reg, f->actions[k]);
                f->actions[k] = NULL;
        }
}

void iface_release_programs(Iface *it, Registry *reg) {
        for (size_t i = 0; i < it->n_filters; i++) {
                filter_release(&it->filters[i], reg);
                it->filters[i].state = FILTER_REQUESTING;
        }
        it->programs_held = false;
}

Iface *iface_free(Iface *it, Registry *reg) {
        if (!it)
                return NULL;
        iface_release_programs(it, reg);
        free(it->filters);
        document_unref(it->api);
        document_unref(it->hog);
        (void) iface_set_policies(it, NULL, 0);
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                free(it->hook_conflict[dir]);
        for (DocumentSource s = 0; s < _SOURCE_MAX; s++)
                document_facts_done(&it->facts[s]);
        free(it->hog_path);
        free(it->untrusted);
        free(it->netns);
        free(it->ifname);
        free(it->key);
        error_done(&it->error);
        free(it);
        return NULL;
}

/* Two filters are alike when the same programs would serve both: then a new composition keeps what
 * the old one held. */
static bool filter_alike(const Filter *a, const Filter *b) {
        const FilterSpec *x = a->spec, *y = b->spec;

        if (a->dir != b->dir || a->tcx != b->tcx || !streq(a->instance, b->instance) ||
            !streq(x->name, y->name) || !streq_ptr(x->digest, y->digest) ||
            !streq_ptr(x->program, y->program) || x->n_actions != y->n_actions)
                return false;
        for (size_t k = 0; k < x->n_actions; k++)
                if (!streq_ptr(x->actions[k].digest, y->actions[k].digest) ||
                    !streq_ptr(x->actions[k].program, y->actions[k].program))
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
                        if (!old || !was || !streq_ptr(was->digest, s->digest) ||
                            !streq_ptr(was->program, s->program))
                                continue;
                        fact = *old;
                        fact.n_actions = 0;
                        for (size_t k = 0; k < s->n_actions && k < was->n_actions && k < old->n_actions;
                             k++) {
                                if (!streq_ptr(was->actions[k].digest, s->actions[k].digest) ||
                                    !streq_ptr(was->actions[k].program, s->actions[k].program))
                                        break;
                                fact.n_actions = k + 1;
                        }
                        if (document_facts_set(&f, &fact) < 0) {
                                document_facts_done(&f);
                                return -ENOMEM;
                        }
                }
        *ret = f;
        return 0;
}

static int policy_compare(const void *a, const void *b) {
        const Policy *x = *(Policy *const *) a, *y = *(Policy *const *) b;
        if (x->order != y->order)
                return x->order < y->order ? -1 : 1;
        return strcmp(x->name, y->name);
}

int iface_set_policies(Iface *it, Policy *const *v, size_t n) {
        Policy **copy = NULL;

        if (n > 0) {
                copy = calloc(n, sizeof(Policy *));
                if (!copy)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++)
                        copy[i] = policy_ref(v[i]);
                qsort(copy, n, sizeof(Policy *), policy_compare);
        }
        for (size_t i = 0; i < it->n_policies; i++)
                policy_unref(it->policies[i]);
        free(it->policies);
        it->policies = copy;
        it->n_policies = n;
        return 0;
}

bool iface_has_policy(const Iface *it, const Policy *p) {
        for (size_t i = 0; i < it->n_policies; i++)
                if (it->policies[i] == p)
                        return true;
        return false;
}

bool iface_policies_equal(const Iface *it, Policy *const *v, size_t n) {
        if (n != it->n_policies)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!iface_has_policy(it, v[i]))
                        return false;
        return true;
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

const char *iface_policy_state(const Iface *it, const Policy *p, Direction dir, const char **by) {
        *by = NULL;
        if (p->doc->n_filters[dir] == 0)
                return NULL;
        if (it->hook_policy[dir] == p)
                return "applied";
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

int iface_set_documents(Iface *it, Document *api, const DocumentFacts *api_facts, Document *hog,
                        const char *hog_path, const DocumentFacts *hog_facts, bool tcx, Registry *reg) {
        _cleanup_free_ char *untrusted = NULL;
        DocumentFacts facts[_SOURCE_MAX] = { 0 };
        const Document *docs[_DIRECTION_MAX];
        _cleanup_free_ char *path = NULL;
        Filter *filters;
        size_t n = 0, total = 0;

        if ((hog_path && !(path = strdup(hog_path))) ||
            (api_facts && document_facts_copy(api_facts, &facts[SOURCE_API]) < 0) ||
            (hog_facts && document_facts_copy(hog_facts, &facts[SOURCE_HOG]) < 0)) {
                document_facts_done(&facts[SOURCE_API]);
                document_facts_done(&facts[SOURCE_HOG]);
                return -ENOMEM;
        }
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                free(it->hook_conflict[dir]);
                it->hook_conflict[dir] = NULL;
                it->hook_policy[dir] = NULL;
                /* A hog; then a hog's policy (configuration); then the interface's document; then the
                 * API's policies. */
                if (!hog_holds(hog, dir))
                        it->hook_policy[dir] = hook_policy(it, dir, true, &it->hook_conflict[dir]);
                if (!hog_holds(hog, dir) && !it->hook_policy[dir] && !it->hook_conflict[dir] &&
                    !(api && api->n_filters[dir] > 0))
                        it->hook_policy[dir] = hook_policy(it, dir, false, &it->hook_conflict[dir]);
                /* Whose filters the hook has (a conflict: a policy's, none of them). */
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
        filters = calloc(total ?: 1, sizeof(Filter)); /* a Filter is 1 KiB: none spare */
        if (!filters) {
                document_facts_done(&facts[SOURCE_API]);
                document_facts_done(&facts[SOURCE_HOG]);
                return -ENOMEM;
        }
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                DocumentSource src = it->hook_source[dir];
                const Document *doc = docs[dir];

                for (size_t i = 0; doc && i < doc->n_filters[dir]; i++) {
                        const FilterSpec *spec = &doc->filters[dir][i];
                        if (filter_revoked(spec, dir, reg, &untrusted) != 0)
                                continue; /* an object no trusted key verifies: the filter goes */
                        Filter *f = &filters[n++];
                        const FilterFact *fact = document_facts_find(&facts[src], doc->filters[dir][i].name);

                        *f = (Filter){ .spec = &doc->filters[dir][i], .dir = dir, .source = src };
                        f->tcx = filter_spec_uses_tcx(f->spec, tcx);
                        if (filter_has_own_maps(f->spec))
                                program_instance_name(it->key, dir, f->spec->name, f->instance);
                        /* what was attached for another instance (shared, or own) is not this one's */
                        if (fact && !streq(fact->instance, f->instance))
                                fact = NULL;
                        if (fact)
                                f->fact = *fact;
                        else
                                snprintf(f->fact.name, sizeof(f->fact.name), "%s", f->spec->name);
                        /* What an alike filter of the old composition held and attached carries over. */
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
        }
        for (size_t k = 0; k < it->n_filters; k++)
                filter_release(&it->filters[k], reg);
        free(it->filters);
        it->filters = filters;
        it->n_filters = n;
        free(it->untrusted);
        it->untrusted = TAKE_PTR(untrusted);
        it->programs_held = false;
        for (size_t i = 0; i < n; i++)
                if (!filters[i].program)
                        goto swap;
        it->programs_held = true; /* nothing new to acquire (actions are acquired with their filter) */
swap:
        document_ref(api);
        document_ref(hog);
        document_unref(it->api);
        document_unref(it->hog);
        it->api = api;
        it->hog = hog;
        free(it->hog_path);
        it->hog_path = TAKE_PTR(path);
        /* clsd's clsact stays clsd's whichever document asks for the interface now. */
        bool created = iface_clsact_created(it);
        for (DocumentSource s = 0; s < _SOURCE_MAX; s++) {
                facts[s].clsact_created = facts[s].clsact_created || created;
                document_facts_done(&it->facts[s]);
                it->facts[s] = facts[s];
        }
        return 0;
}

void iface_set_state(Iface *it, IfaceState state, const Error *e) {
        it->state = state;
        error_done(&it->error);
        if (state == IFACE_FAILED && e)
                error_set(&it->error, e->error, e->code, "%s", strna(e->message));
}

bool iface_update_facts(Iface *it) {
        bool changed = false;

        for (size_t i = 0; i < it->n_filters; i++) {
                Filter *f = &it->filters[i];
                FilterFact fact = { 0 };
                const FilterFact *have;

                if (!f->program)
                        continue;
                snprintf(fact.name, sizeof(fact.name), "%s", f->spec->name);
                memcpy(fact.instance, f->instance, sizeof(fact.instance));
                snprintf(fact.program.tag, sizeof(fact.program.tag), "%s", program_tag(f->program));
                fact.program.prog_id = program_id(f->program);
                fact.n_actions = f->spec->n_actions;
                for (size_t k = 0; k < fact.n_actions; k++)
                        if (f->actions[k]) {
                                snprintf(fact.actions[k].tag, sizeof(fact.actions[k].tag), "%s",
                                         program_tag(f->actions[k]));
                                fact.actions[k].prog_id = program_id(f->actions[k]);
                        }
                f->fact = fact;
                have = document_facts_find(&it->facts[f->source], fact.name);
                if (have && memcmp(have, &fact, sizeof(fact)) == 0)
                        continue;
                if (document_facts_set(&it->facts[f->source], &fact) >= 0)
                        changed = true;
        }
        return changed;
}

bool iface_uses_actions(const Iface *it) {
        for (size_t i = 0; i < it->n_filters; i++)
                if (it->filters[i].spec->n_actions > 0)
                        return true;
        return false;
}

bool iface_uses_tcx(const Iface *it) {
        for (size_t i = 0; i < it->n_filters; i++)
                if (it->filters[i].tcx)
                        return true;
        return false;
}

/* ---- what the faces read ---- */

const char *iface_ifname(const Iface *it) {
        return it->ifname;
}

const char *iface_netns(const Iface *it) {
        return it->netns;
}

IfaceState iface_state(const Iface *it) {
        return it->state;
}

int iface_ifindex(const Iface *it) {
        return it->ifindex;
}

const Error *iface_error(const Iface *it) {
        return it->state == IFACE_FAILED && it->error.code ? &it->error : NULL;
}

DocumentSource iface_source(const Iface *it) {
        return it->hog ? SOURCE_HOG : it->api || it->n_policies == 0 ? SOURCE_API : SOURCE_POLICY;
}

const char *iface_hog_path(const Iface *it) {
        return it->hog_path;
}

const Document *iface_api_document(const Iface *it) {
        return it->api;
}

bool iface_overridden(const Iface *it, Direction dir) {
        return it->api && it->api->n_filters[dir] > 0 && it->hook_source[dir] != SOURCE_API;
}

unsigned iface_repairs(const Iface *it) {
        return it->repairs;
}

uint64_t iface_last_repair_usec(const Iface *it) {
        return it->last_repair_usec;
}

const char *iface_last_repair_what(const Iface *it) {
        return it->last_repair_what;
}

unsigned iface_repair_loops(const Iface *it) {
        return it->repair_loops;
}

size_t iface_filter_count(const Iface *it) {
        return it->n_filters;
}

const Filter *iface_filter_at(const Iface *it, size_t i) {
        return i < it->n_filters ? &it->filters[i] : NULL;
}

size_t iface_filter_count_dir(const Iface *it, Direction dir) {
        size_t n = 0;
        for (size_t i = 0; i < it->n_filters; i++)
                n += it->filters[i].dir == dir;
        return n;
}

const FilterSpec *filter_spec(const Filter *f) {
        return f->spec;
}

Direction filter_direction(const Filter *f) {
        return f->dir;
}

DocumentSource filter_source(const Filter *f) {
        return f->source;
}

bool filter_is_tcx(const Filter *f) {
        return f->tcx;
}
