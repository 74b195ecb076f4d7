/* test-reconcile.c: reconcile_diff() on structs: what the reconciler plans for each kernel state. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "daemon-internal.h"

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
        };
        return cmocka_run_group_tests_name("reconcile", tests, NULL, NULL);
}
