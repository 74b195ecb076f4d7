/* iface.c: one interface's runtime: its documents, the policies that match it and the filters composed
 * from them (compose.c), the programs they hold, what was attached for them, its state; a change's
 * candidate made the interface (iface_commit()); what the faces read of it. */
#include <stdio.h>
#include <string.h>

#include "iface.h"
#include "log.h"
#include "daemon-policies.h"
#include "store-policy.h"

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

void filter_release(Filter *f, Registry *reg) {
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

size_t iface_policy_count(const Iface *it) {
        return it->n_policies;
}

const Policy *iface_policy_at(const Iface *it, size_t i) {
        return i < it->n_policies ? it->policies[i] : NULL;
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

void iface_commit(Iface *it, Iface *cand, Registry *reg) {
        iface_release_programs(it, reg);
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
        for (size_t i = 0; i < it->n_policies; i++)
                policy_unref(it->policies[i]);
        free(it->policies);
        it->policies = TAKE_PTR(cand->policies);
        it->n_policies = cand->n_policies;
        cand->n_policies = 0;
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                free(it->hook_conflict[dir]);
                it->hook_conflict[dir] = TAKE_PTR(cand->hook_conflict[dir]);
                it->hook_policy[dir] = cand->hook_policy[dir];
        }
        free(it->untrusted);
        it->untrusted = TAKE_PTR(cand->untrusted);
        for (size_t i = 0; i < it->n_filters; i++)
                it->filters[i].state = FILTER_CONFIGURED;
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

const char *attach_kind_to_string(AttachKindIndex k) {
        static const char *const names[_ATTACH_KIND_MAX] = {
                [ATTACH_KIND_CLS] = "cls_bpf",
                [ATTACH_KIND_TCX] = "tcx",
        };
        return k < _ATTACH_KIND_MAX ? names[k] : NULL;
}

const char *filter_attach(const Filter *f) {
        return attach_kind_to_string(f->kind);
}
