/* test-reconcile.c: reconcile_diff() on structs: what the reconciler plans for each kernel state. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <linux/pkt_cls.h>
#include <stdio.h>
#include <string.h>

#include "iface.h"
#include "reconcile-diff.h"
#include "tcx-plan.h"

static DesiredFilter want(NlHook hook, uint16_t pref, const char *name, const char *tag) {
        DesiredFilter w = { .hook = hook,
                            .parent = nl_hook_parent(hook),
                            .pref = pref,
                            .direct_action = true,
                            .prog_fd = 3,
                            .prog_id = 5 };
        snprintf(w.name, sizeof(w.name), "%s", name);
        snprintf(w.tag, sizeof(w.tag), "%s", tag);
        return w;
}

static NlFilter have(NlHook hook, uint16_t pref, const char *name, const char *tag) {
        NlFilter f = { .hook = hook,
                       .parent = nl_hook_parent(hook),
                       .pref = pref,
                       .handle = 1,
                       .direct_action = true,
                       .prog_id = 5 };
        snprintf(f.kind, sizeof(f.kind), "bpf");
        snprintf(f.name, sizeof(f.name), "%s", name);
        snprintf(f.tag, sizeof(f.tag), "%s", tag);
        f.clsd_owned = strncmp(name, "clsd:", 5) == 0;
        return f;
}

static const PlanStep *step_at(const Plan *p, NlHook hook, uint16_t pref) {
        for (size_t i = 0; i < p->n_steps; i++)
                if (p->steps[i].hook == hook && p->steps[i].pref == pref)
                        return &p->steps[i];
        return NULL;
}

static void with_action(DesiredFilter *w, NlFilter *f, const char *name, uint32_t prog_id) {
        DesiredAction *a = &w->actions[w->n_actions++];
        NlAction *b = &f->actions[f->n_actions++];

        snprintf(a->name, sizeof(a->name), "%s", name);
        snprintf(a->tag, sizeof(a->tag), "dddddddddddddddd");
        a->prog_id = prog_id;
        a->prog_fd = 4;
        snprintf(b->kind, sizeof(b->kind), "bpf");
        snprintf(b->name, sizeof(b->name), "%s", name);
        snprintf(b->tag, sizeof(b->tag), "dddddddddddddddd");
        b->prog_id = prog_id;
        b->control = TC_ACT_PIPE;
        b->clsd_owned = true;
}

static void change_none(DesiredFilter *w, NlFilter *f) {
        (void) w, (void) f;
}
static void change_action_program(DesiredFilter *w, NlFilter *f) {
        (void) f;
        w->actions[1].prog_id = 99;
}
static void change_action_missing(DesiredFilter *w, NlFilter *f) {
        (void) w;
        f->n_actions = 1;
}
static void change_action_extra(DesiredFilter *w, NlFilter *f) {
        (void) f;
        w->n_actions = 1;
}
static void change_action_kind(DesiredFilter *w, NlFilter *f) {
        (void) w;
        snprintf(f->actions[0].kind, sizeof(f->actions[0].kind), "gact");
}
static void change_action_name(DesiredFilter *w, NlFilter *f) {
        (void) w;
        snprintf(f->actions[0].name, sizeof(f->actions[0].name), "count.bpf.o:[tc]");
}
static void change_action_control(DesiredFilter *w, NlFilter *f) {
        (void) w;
        f->actions[1].control = TC_ACT_SHOT;
}
static void change_action_truncated(DesiredFilter *w, NlFilter *f) {
        (void) w;
        f->actions_truncated = true;
}
static void change_no_actions_wanted(DesiredFilter *w, NlFilter *f) {
        (void) f;
        w->n_actions = 0;
}

/* A filter is as declared only with each of its actions in place: act_bpf, clsd's name, the program,
 * and "pipe"; any difference replaces the whole filter in place (classifier and actions at once). */
static void test_actions_diff(void **state) {
        static const struct {
                const char *what;
                void (*change)(DesiredFilter *w, NlFilter *f);
                PlanAction want;
        } cases[] = {
                { "all as declared", change_none, PLAN_KEEP },
                { "an action runs another program", change_action_program, PLAN_REPLACE },
                { "an action is missing", change_action_missing, PLAN_REPLACE },
                { "an action too many", change_action_extra, PLAN_REPLACE },
                { "an action of another kind", change_action_kind, PLAN_REPLACE },
                { "an action of someone else's", change_action_name, PLAN_REPLACE },
                { "an action's verdict is not pipe", change_action_control, PLAN_REPLACE },
                { "more actions than were read", change_action_truncated, PLAN_REPLACE },
                { "the document wants none any more", change_no_actions_wanted, PLAN_REPLACE },
        };

        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                DesiredFilter d = want(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa");
                NlFilter o = have(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa");
                Plan p;

                d.direct_action = o.direct_action = false;
                with_action(&d, &o, "clsd:a/1", 20);
                with_action(&d, &o, "clsd:a/2", 21);
                cases[i].change(&d, &o);
                assert_int_equal(reconcile_diff(&d, 1, &o, 1, &p), 0);
                assert_int_equal(p.n_steps, 1);
                if (p.steps[0].action != cases[i].want)
                        fail_msg("%s: %s, want %s", cases[i].what, plan_action_to_string(p.steps[0].action),
                                 plan_action_to_string(cases[i].want));
                plan_done(&p);
        }
}

static void test_empty_kernel_adds(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa"),
                              want(NL_HOOK_EGRESS, 10, "clsd:b", "bbbbbbbbbbbbbbbb") };
        Plan p;

        (void) state;
        assert_int_equal(reconcile_diff(d, 2, NULL, 0, &p), 0);
        assert_int_equal(p.n_steps, 2);
        assert_int_equal(step_at(&p, NL_HOOK_INGRESS, 10)->action, PLAN_ADD);
        assert_int_equal(step_at(&p, NL_HOOK_EGRESS, 10)->action, PLAN_ADD);
        assert_int_equal(step_at(&p, NL_HOOK_EGRESS, 10)->desired, 1);
        plan_done(&p);
}

static void test_matching_is_kept(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa") };
        NlFilter o[] = { have(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa") };
        Plan p;

        (void) state;
        assert_int_equal(reconcile_diff(d, 1, o, 1, &p), 0);
        assert_int_equal(p.n_steps, 1);
        assert_int_equal(p.steps[0].action, PLAN_KEEP);
        plan_done(&p);
}

static void test_changed_program_replaces_in_place(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_INGRESS, 10, "clsd:a", "cccccccccccccccc") };
        NlFilter o[] = { have(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa") };
        Plan p;

        (void) state;
        o[0].handle = 7;
        assert_int_equal(reconcile_diff(d, 1, o, 1, &p), 0);
        assert_int_equal(p.n_steps, 1);
        assert_int_equal(p.steps[0].action, PLAN_REPLACE);
        assert_int_equal(p.steps[0].handle, 7);
        plan_done(&p);

        /* A flag change is a difference too. */
        d[0] = want(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa");
        d[0].direct_action = false;
        assert_int_equal(reconcile_diff(d, 1, o, 1, &p), 0);
        assert_int_equal(p.steps[0].action, PLAN_REPLACE);
        plan_done(&p);
}

/* The tag hashes instructions with map references zeroed: two objects differing only in their maps
 * share it. The program id tells them apart. */
static void test_same_tag_other_program_replaces(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa") };
        NlFilter o[] = { have(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa") };
        Plan p;

        (void) state;
        d[0].prog_id = 6;
        assert_int_equal(reconcile_diff(d, 1, o, 1, &p), 0);
        assert_int_equal(p.n_steps, 1);
        assert_int_equal(p.steps[0].action, PLAN_REPLACE);
        plan_done(&p);
}

static void test_other_chain_is_not_ours_to_touch(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa") };
        NlFilter o[] = { have(NL_HOOK_INGRESS, 10, "foreign", "cccccccccccccccc"),
                         have(NL_HOOK_INGRESS, 11, "clsd:x", "cccccccccccccccc") };
        Plan p;

        (void) state;
        o[0].chain = 3;
        o[1].chain = 3;
        assert_int_equal(reconcile_diff(d, 1, o, 2, &p), 0);
        assert_int_equal(p.n_steps, 1);
        assert_int_equal(p.steps[0].action, PLAN_ADD);
        plan_done(&p);
}

/* A classic-mode filter under HTB 1: and one on the clsact egress hook are different places. */
static void test_parent_is_part_of_the_place(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_EGRESS, 1, "clsd:a", "aaaaaaaaaaaaaaaa") };
        NlFilter o[] = { have(NL_HOOK_EGRESS, 1, "foreign", "cccccccccccccccc"),
                         have(NL_HOOK_EGRESS, 1, "clsd:a", "aaaaaaaaaaaaaaaa") };
        Plan p;

        (void) state;
        d[0].parent = 0x10000;
        o[1].parent = 0x10000;
        assert_int_equal(reconcile_diff(d, 1, o, 2, &p), 0);
        assert_int_equal(p.n_steps, 1);
        assert_int_equal(p.steps[0].action, PLAN_KEEP);
        assert_int_equal(p.steps[0].observed, 1);
        plan_done(&p);
}

static void test_foreign_at_pref_conflicts(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_INGRESS, 20, "clsd:a", "aaaaaaaaaaaaaaaa") };
        NlFilter o[] = { have(NL_HOOK_INGRESS, 20, "x.o:[tc]", "ffffffffffffffff") };
        Plan p;

        (void) state;
        assert_int_equal(reconcile_diff(d, 1, o, 1, &p), 0);
        assert_int_equal(p.n_steps, 1);
        assert_int_equal(p.steps[0].action, PLAN_CONFLICT);
        assert_int_equal(p.steps[0].observed, 0);
        plan_done(&p);
}

static void test_ours_not_desired_removed_foreign_untouched(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa") };
        NlFilter o[] = { have(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa"),
                         have(NL_HOOK_INGRESS, 11, "clsd:old", "bbbbbbbbbbbbbbbb"),
                         have(NL_HOOK_INGRESS, 12, "foreign", "cccccccccccccccc"),
                         have(NL_HOOK_EGRESS, 11, "clsd:old2", "bbbbbbbbbbbbbbbb") };
        Plan p;

        (void) state;
        assert_int_equal(reconcile_diff(d, 1, o, 4, &p), 0);
        assert_int_equal(p.n_steps, 3);
        assert_int_equal(step_at(&p, NL_HOOK_INGRESS, 10)->action, PLAN_KEEP);
        assert_int_equal(step_at(&p, NL_HOOK_INGRESS, 11)->action, PLAN_REMOVE);
        assert_int_equal(step_at(&p, NL_HOOK_EGRESS, 11)->action, PLAN_REMOVE);
        assert_null(step_at(&p, NL_HOOK_INGRESS, 12));
        plan_done(&p);
}

static void test_nothing_desired_removes_only_ours(void **state) {
        NlFilter o[] = { have(NL_HOOK_INGRESS, 10, "clsd:a", "aaaaaaaaaaaaaaaa"),
                         have(NL_HOOK_INGRESS, 12, "foreign", "cccccccccccccccc") };
        Plan p;

        (void) state;
        assert_int_equal(reconcile_diff(NULL, 0, o, 2, &p), 0);
        assert_int_equal(p.n_steps, 1);
        assert_int_equal(p.steps[0].action, PLAN_REMOVE);
        assert_int_equal(p.steps[0].pref, 10);
        plan_done(&p);
}

static void test_same_pref_other_hook_is_independent(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_EGRESS, 20, "clsd:a", "aaaaaaaaaaaaaaaa") };
        NlFilter o[] = { have(NL_HOOK_INGRESS, 20, "foreign", "cccccccccccccccc") };
        Plan p;

        (void) state;
        assert_int_equal(reconcile_diff(d, 1, o, 1, &p), 0);
        assert_int_equal(p.n_steps, 1);
        assert_int_equal(p.steps[0].action, PLAN_ADD);
        plan_done(&p);
}

static void test_renamed_filter_at_same_pref_is_replaced(void **state) {
        DesiredFilter d[] = { want(NL_HOOK_INGRESS, 10, "clsd:new", "aaaaaaaaaaaaaaaa") };
        NlFilter o[] = { have(NL_HOOK_INGRESS, 10, "clsd:old", "aaaaaaaaaaaaaaaa") };
        Plan p;

        (void) state;
        assert_int_equal(reconcile_diff(d, 1, o, 1, &p), 0);
        assert_int_equal(p.n_steps, 1);
        assert_int_equal(p.steps[0].action, PLAN_REPLACE);
        plan_done(&p);
}

static Document *doc(const char *text) {
        Document *d = NULL;
        Error e = ERROR_NULL;

        if (document_from_string("eth0", text, strlen(text), &d, &e) < 0)
                fail_msg("%s: %s", text, e.message);
        return d;
}

#define F(name, prio) "{\"name\":\"" name "\",\"object\":\"/o.o\",\"priority\":" #prio "}"

/* On each hook the hog's filters if it declares any there, else the API's. */
static void test_compose_hog_wins_per_hook(void **state) {
        Document *api = doc("{\"ingress\":[" F("a", 1) "," F("b", 2) "],\"egress\":[" F("c", 3) "]}");
        Document *hog = doc("{\"ingress\":[" F("h", 9) "]}");
        Iface *it = NULL;

        (void) state;
        assert_int_equal(iface_new(NULL, "eth0", &it), 0);
        assert_int_equal(
                iface_set_documents(it, api, NULL, hog, "/etc/clsd/hogs.d/h.json", NULL, false, NULL), 0);
        assert_int_equal(iface_source(it), SOURCE_HOG);
        assert_true(iface_overridden(it, DIRECTION_INGRESS));
        assert_false(iface_overridden(it, DIRECTION_EGRESS));
        assert_int_equal(iface_filter_count(it), 2);
        assert_string_equal(filter_spec(iface_filter_at(it, 0))->name, "h");
        assert_int_equal(filter_source(iface_filter_at(it, 0)), SOURCE_HOG);
        assert_string_equal(filter_spec(iface_filter_at(it, 1))->name, "c");
        assert_int_equal(filter_source(iface_filter_at(it, 1)), SOURCE_API);
        assert_int_equal(filter_direction(iface_filter_at(it, 1)), DIRECTION_EGRESS);

        /* Only a hog: everything is the hog's. */
        assert_int_equal(
                iface_set_documents(it, NULL, NULL, hog, "/etc/clsd/hogs.d/h.json", NULL, false, NULL), 0);
        assert_int_equal(iface_filter_count(it), 1);
        assert_null(iface_api_document(it));

        /* No hog: the API's as it is. */
        assert_int_equal(iface_set_documents(it, api, NULL, NULL, NULL, NULL, false, NULL), 0);
        assert_int_equal(iface_source(it), SOURCE_API);
        assert_int_equal(iface_filter_count(it), 3);
        assert_int_equal(iface_filter_count_dir(it, DIRECTION_INGRESS), 2);
        assert_null(iface_hog_path(it));
        assert_ptr_equal(iface_api_document(it), api);
        iface_free(it, NULL);
        document_unref(api);
        document_unref(hog);
}

/* Documents are shared, not copied: an interface holds a reference. */
static void test_documents_are_shared(void **state) {
        Document *api = doc("{\"ingress\":[" F("a", 1) "]}");
        Iface *it = NULL;

        (void) state;
        assert_int_equal(iface_new("ns-1", "eth0", &it), 0);
        assert_int_equal(iface_set_documents(it, api, NULL, NULL, NULL, NULL, false, NULL), 0);
        assert_int_equal(api->n_ref, 2);
        assert_ptr_equal(filter_spec(iface_filter_at(it, 0)), &api->filters[DIRECTION_INGRESS][0]);
        iface_free(it, NULL);
        assert_int_equal(api->n_ref, 1);
        document_unref(api);
}

/* Facts (program id and tag) carry over to a new document only for a filter declared alike. */
static void test_keep_facts(void **state) {
        Document *old = doc("{\"ingress\":[" F("a", 1) "," F("b", 2) "]}");
        Document *new = doc("{\"ingress\":[" F("a", 1) "," F("b", 2) "]}");
        Document *other_hook = doc("{\"egress\":[" F("a", 1) "]}");
        DocumentFacts facts = { .clsact_created = true }, kept = { 0 };
        Iface *it = NULL;

        (void) state;
        for (size_t i = 0; i < 2; i++) {
                FilterFact f = { 0 };
                snprintf(f.name, sizeof(f.name), "%s", i == 0 ? "a" : "b");
                snprintf(f.program.tag, sizeof(f.program.tag), "0123456789abcdef");
                f.program.prog_id = 10 + (uint32_t) i;
                assert_int_equal(document_facts_set(&facts, &f), 0);
        }
        assert_int_equal(iface_new(NULL, "eth0", &it), 0);
        assert_int_equal(iface_set_documents(it, old, &facts, NULL, NULL, NULL, false, NULL), 0);
        free(new->filters[DIRECTION_INGRESS][1].program);
        new->filters[DIRECTION_INGRESS][1].program = strdup("other");
        assert_int_equal(iface_facts_for(it, new, &kept), 0);
        assert_true(kept.clsact_created);
        assert_non_null(document_facts_find(&kept, "a"));
        assert_int_equal(document_facts_find(&kept, "a")->program.prog_id, 10);
        assert_string_equal(document_facts_find(&kept, "a")->program.tag, "0123456789abcdef");
        assert_null(document_facts_find(&kept, "b")); /* another program */
        document_facts_done(&kept);
        /* a filter moved to the other hook is the same program: what was loaded for it is taken back */
        assert_int_equal(iface_facts_for(it, other_hook, &kept), 0);
        assert_non_null(document_facts_find(&kept, "a"));
        document_facts_done(&kept);
        document_facts_done(&facts);
        iface_free(it, NULL);
        document_unref(other_hook);
        document_unref(old);
        document_unref(new);
}

/* ---- tcx_plan ---- */

#define W(dir, pref, name, id) ((TcxWant){ DIRECTION_##dir, pref, name, id })
#define H(dir, pref, name, id, link) ((TcxHave){ DIRECTION_##dir, pref, name, id, link, true })

static void expect_steps(const TcxStep *v, size_t n, const char *want) {
        char got[256] = "";
        for (size_t i = 0; i < n; i++)
                snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s w%d h%d", i ? ", " : "",
                         tcx_step_to_string(v[i].kind), v[i].want, v[i].have);
        assert_string_equal(got, want);
}

/* New links go in by priority, whatever order the document lists them in. */
static void test_tcx_adds_in_priority_order(void **state) {
        TcxWant w[] = { W(INGRESS, 30, "c", 3), W(EGRESS, 1, "e", 4), W(INGRESS, 10, "a", 1),
                        W(INGRESS, 20, "b", 2) };
        _cleanup_free_ TcxStep *v = NULL;
        size_t n;

        (void) state;
        assert_int_equal(tcx_plan(w, 4, NULL, 0, &v, &n), 0);
        expect_steps(v, n, "add w2 h-1, add w3 h-1, add w0 h-1, add w1 h-1");
}

static void test_tcx_keep_update_remove(void **state) {
        TcxWant w[] = { W(INGRESS, 10, "a", 1), W(INGRESS, 20, "b", 5) };
        TcxHave h[] = { H(INGRESS, 10, "a", 1, 100), H(INGRESS, 20, "b", 2, 101),
                        H(INGRESS, 30, "gone", 3, 102) };
        _cleanup_free_ TcxStep *v = NULL;
        size_t n;

        (void) state;
        assert_int_equal(tcx_plan(w, 2, h, 3, &v, &n), 0);
        expect_steps(v, n, "remove w-1 h2, keep w0 h0, replace w1 h1");
}

/* Two links swap programs: the kernel runs a program once per hook, so one link makes way (removed,
 * added again after the other took its program over in place). */
static void test_tcx_swap(void **state) {
        TcxWant w[] = { W(INGRESS, 10, "a", 2), W(INGRESS, 20, "b", 1) };
        TcxHave h[] = { H(INGRESS, 10, "a", 1, 100), H(INGRESS, 20, "b", 2, 101) };
        _cleanup_free_ TcxStep *v = NULL;
        size_t n;

        (void) state;
        assert_int_equal(tcx_plan(w, 2, h, 2, &v, &n), 0);
        expect_steps(v, n, "remove w-1 h0, replace w1 h1, add w0 h-1");
}

/* A pin whose link no longer runs (someone detached it) is not ours in place: unpinned and added
 * anew. A renamed filter at the same priority is another link. The other hook is another place. */
static void test_tcx_places(void **state) {
        TcxWant w[] = { W(INGRESS, 10, "a", 1), W(INGRESS, 20, "new", 2), W(EGRESS, 10, "a", 1) };
        TcxHave h[] = { H(INGRESS, 10, "a", 1, 100), H(INGRESS, 20, "old", 2, 101),
                        H(INGRESS, 30, "c", 3, 102) };
        _cleanup_free_ TcxStep *v = NULL;
        size_t n;

        (void) state;
        h[0].attached = false;
        assert_int_equal(tcx_plan(w, 3, h, 3, &v, &n), 0);
        expect_steps(v, n,
                     "remove w-1 h0, remove w-1 h1, remove w-1 h2, add w0 h-1, add w1 h-1, add w2 h-1");
}

/* A dry run knows no ids for programs it would load: never "keep". */
static void test_tcx_unloaded_program_is_a_replace(void **state) {
        TcxWant w[] = { W(INGRESS, 10, "a", 0) };
        TcxHave h[] = { H(INGRESS, 10, "a", 1, 100) };
        _cleanup_free_ TcxStep *v = NULL;
        size_t n;

        (void) state;
        assert_int_equal(tcx_plan(w, 1, h, 1, &v, &n), 0);
        expect_steps(v, n, "replace w0 h0");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_empty_kernel_adds),
                cmocka_unit_test(test_matching_is_kept),
                cmocka_unit_test(test_changed_program_replaces_in_place),
                cmocka_unit_test(test_same_tag_other_program_replaces),
                cmocka_unit_test(test_other_chain_is_not_ours_to_touch),
                cmocka_unit_test(test_parent_is_part_of_the_place),
                cmocka_unit_test(test_foreign_at_pref_conflicts),
                cmocka_unit_test(test_ours_not_desired_removed_foreign_untouched),
                cmocka_unit_test(test_nothing_desired_removes_only_ours),
                cmocka_unit_test(test_same_pref_other_hook_is_independent),
                cmocka_unit_test(test_renamed_filter_at_same_pref_is_replaced),
                cmocka_unit_test(test_compose_hog_wins_per_hook),
                cmocka_unit_test(test_documents_are_shared),
                cmocka_unit_test(test_keep_facts),
                cmocka_unit_test(test_actions_diff),
                cmocka_unit_test(test_tcx_adds_in_priority_order),
                cmocka_unit_test(test_tcx_keep_update_remove),
                cmocka_unit_test(test_tcx_swap),
                cmocka_unit_test(test_tcx_places),
                cmocka_unit_test(test_tcx_unloaded_program_is_a_replace),
        };
        return cmocka_run_group_tests_name("reconcile", tests, NULL, NULL);
}
