/* test-rollout.c: rollouts as etcd holds them, pure: the envelope's rollout, health and kernel gates
 * parsed strictly; a plan's waves (sizes, an order stable for its id, spread over a label, the nodes a gate
 * keeps out); its JSON both ways; a wave's verdict and the state after it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "etcd-rollout.h"

static int parse(const char *text, FleetPolicy *p, Error *e) {
        json_t *j = json_loads(text, 0, NULL);
        int r;

        assert_non_null(j);
        r = fleet_policy_parse(j, p, e);
        json_decref(j);
        return r;
}

static void test_the_envelope_parts_are_parsed_strictly(void **state) {
        FleetPolicy p = { 0 };
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(
                parse("{\"name\":\"x\",\"rollout\":{\"waves\":[1,\"10%\",\"100%\"],\"hold\":\"1.5s\","
                      "\"confirm\":\"1500ms\",\"max_unhealthy\":2,\"spread\":\"zone\",\"id\":\"a-1\"},"
                      "\"health\":[{\"metric\":\"drops\",\"max_rate\":10},{\"metric\":\"pk\",\"min_rate\":1}"
                      "],"
                      "\"nodes\":{\"kernel\":\">=6.6\",\"features\":[\"tcx\"]},"
                      "\"ingress\":[{\"name\":\"d\",\"metrics\":[{\"name\":\"drops\"}]}],"
                      "\"egress\":[{\"name\":\"e\",\"metrics\":[{\"name\":\"pk\"}]}]}",
                      &p, &e),
                0);
        assert_true(p.rollout.present && p.rollout.n_waves == 3 && p.rollout.waves[1].percent);
        assert_int_equal(p.rollout.hold_usec, 1500000);
        assert_int_equal(p.rollout.confirm_usec, 1500000);
        assert_int_equal(p.rollout.max_unhealthy, 2);
        assert_string_equal(p.rollout.spread, "zone");
        assert_string_equal(p.rollout.id, "a-1");
        assert_int_equal(p.n_health, 2);
        assert_true(p.health[0].has_max && !p.health[0].has_min && p.health[1].has_min);
        assert_true(p.any_node && p.need_tcx && p.kernel_cmp == FLEET_CMP_GE);
        /* the envelope's parts are not the policy's */
        assert_null(json_object_get(p.policy, "rollout"));
        assert_null(json_object_get(p.policy, "health"));
        fleet_policy_done(&p);
        /* defaults */
        assert_int_equal(parse("{\"name\":\"x\",\"rollout\":{}}", &p, &e), 0);
        assert_int_equal(p.rollout.n_waves, 4);
        assert_int_equal(p.rollout.hold_usec, 60000000);
        assert_int_equal(p.rollout.confirm_usec, 20000000);
        fleet_policy_done(&p);
        /* refused, each saying what */
        static const char *const bad[] = {
                "{\"name\":\"x\",\"rollout\":{\"waves\":[5,2]}}",
                "{\"name\":\"x\",\"rollout\":{\"waves\":[0]}}",
                "{\"name\":\"x\",\"rollout\":{\"waves\":[\"200%\"]}}",
                /* a count after a percentage could reach fewer nodes; nothing after 100%; "50" is no count
                 */
                "{\"name\":\"x\",\"rollout\":{\"waves\":[\"100%\",1]}}",
                "{\"name\":\"x\",\"rollout\":{\"waves\":[\"10%\",50]}}",
                "{\"name\":\"x\",\"rollout\":{\"waves\":[1,\"100%\",\"100%\"]}}",
                "{\"name\":\"x\",\"rollout\":{\"waves\":[\"50\"]}}",
                "{\"name\":\"x\",\"rollout\":{\"waves\":[1,\"50\"]}}",
                /* a check no rate can pass */
                ("{\"name\":\"x\",\"health\":[{\"metric\":\"m\",\"max_rate\":1,\"min_rate\":5}],"
                 "\"ingress\":[{\"name\":\"d\",\"metrics\":[{\"name\":\"m\"}]}]}"),
                "{\"name\":\"x\",\"rollout\":{\"hold\":\"-1s\"}}",
                "{\"name\":\"x\",\"rollout\":{\"hold\":\"2d\"}}",
                "{\"name\":\"x\",\"rollout\":{\"wave\":[1]}}",
                "{\"name\":\"x\",\"rollout\":{\"id\":\"a/b\"}}",
                "{\"name\":\"x\",\"rollout\":{\"confirm\":\"500ms\"}}",
                "{\"name\":\"x\",\"health\":[{\"metric\":\"m\"}]}",
                /* a metric the policy's filters do not declare: no gate at all */
                ("{\"name\":\"x\",\"health\":[{\"metric\":\"drps\",\"max_rate\":1}],"
                 "\"ingress\":[{\"name\":\"d\",\"metrics\":[{\"name\":\"drops\"}]}]}"),
                "{\"name\":\"x\",\"health\":[{\"metric\":\"m\",\"max_rate\":-1}]}",
                "{\"name\":\"x\",\"nodes\":{\"kernel\":\"6.6\"}}",
                "{\"name\":\"x\",\"nodes\":{\"features\":[\"xdp\"]}}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(parse(bad[i], &p, &e), -EINVAL);
                assert_non_null(e.message);
                error_done(&e);
        }
}

static void test_kernel_gates_compare_versions(void **state) {
        FleetPolicy p = { 0 };
        Error e = ERROR_NULL;
        char why[128];
        FleetNodeFacts old = { .kernel = "6.1.0-57-amd64", .act_bpf = true },
                       new = { .kernel = "6.18.44-fc", .tcx = true };

        (void) state;
        assert_int_equal(parse("{\"name\":\"x\",\"nodes\":{\"kernel\":\">=6.6\"}}", &p, &e), 0);
        assert_false(fleet_policy_qualifies(&p, &old, why, sizeof(why)));
        assert_string_equal(why, "kernel 6.1.0-57-amd64 is not >=6.6");
        assert_true(fleet_policy_qualifies(&p, &new, why, sizeof(why)));
        fleet_policy_done(&p);
        assert_int_equal(
                parse("{\"name\":\"x\",\"nodes\":{\"kernel\":\"<6.2\",\"features\":[\"act_bpf\"]}}", &p, &e),
                0);
        assert_true(fleet_policy_qualifies(&p, &old, why, sizeof(why)));
        assert_false(fleet_policy_qualifies(&p, &new, why, sizeof(why)));
        fleet_policy_done(&p);
        assert_int_equal(parse("{\"name\":\"x\",\"nodes\":{\"features\":[\"tcx\"]}}", &p, &e), 0);
        assert_false(fleet_policy_qualifies(&p, &old, why, sizeof(why)));
        assert_string_equal(why, "this kernel has no tcx");
        fleet_policy_done(&p);
}

static FleetLabel zone_a[] = { { "zone", "a" } }, zone_b[] = { { "zone", "b" } },
                  zone_c[] = { { "zone", "c" } };

static void nodes10(FleetNodeInfo v[10], char names[10][8]) {
        for (int i = 0; i < 10; i++) {
                snprintf(names[i], 8, "n%d", i);
                v[i] = (FleetNodeInfo){ .node = names[i],
                                        .labels = i < 5   ? zone_a
                                                  : i < 8 ? zone_b
                                                          : zone_c,
                                        .n_labels = 1,
                                        .facts = { .kernel = i == 9 ? "5.10.0" : "6.1.0", .tcx = false } };
        }
}

static void test_a_plan_is_waves_stable_spread_and_gated(void **state) {
        FleetPolicy p = { 0 };
        FleetRolloutPlan a = { 0 }, b = { 0 }, c = { 0 };
        FleetNodeInfo nodes[10];
        char names[10][8];
        Error e = ERROR_NULL;

        (void) state;
        nodes10(nodes, names);
        assert_int_equal(
                parse("{\"name\":\"x\",\"nodes\":{\"kernel\":\">=6.0\"},\"rollout\":{\"waves\":[1,\"30%\","
                      "\"100%\"],\"spread\":\"zone\",\"id\":\"r1\"}}",
                      &p, &e),
                0);
        assert_int_equal(fleet_rollout_plan_make(&p, nodes, 10, &a, &e), 0);
        /* n9's kernel keeps it out: 9 nodes, waves of 1, 2 (30% of 9 is 3 in all), 6 */
        assert_int_equal(a.n_waves, 3);
        assert_int_equal(a.wave_sizes[0], 1);
        assert_int_equal(a.wave_sizes[1], 2);
        assert_int_equal(a.wave_sizes[2], 6);
        assert_int_equal(json_array_size(a.excluded), 1);
        assert_int_equal(fleet_rollout_plan_wave_of(&a, "n9"), -1);
        /* spread: the first three cover three zones... no: two zones a and b (c's only node is out) */
        const char *first3[3] = { a.waves[0][0], a.waves[1][0], a.waves[1][1] };
        int in_a = 0, in_b = 0;
        for (int i = 0; i < 3; i++) {
                int k = first3[i][1] - '0';
                in_a += k < 5;
                in_b += k >= 5 && k < 8;
        }
        assert_true(in_a >= 1 && in_b >= 1);
        /* stable for its id; another id, another order */
        assert_int_equal(fleet_rollout_plan_make(&p, nodes, 10, &b, &e), 0);
        for (size_t w = 0; w < a.n_waves; w++)
                for (size_t i = 0; i < a.wave_sizes[w]; i++)
                        assert_string_equal(a.waves[w][i], b.waves[w][i]);
        snprintf(p.rollout.id, sizeof(p.rollout.id), "r2");
        assert_int_equal(fleet_rollout_plan_make(&p, nodes, 10, &c, &e), 0);
        bool differs = false;
        for (size_t w = 0; w < a.n_waves; w++)
                for (size_t i = 0; i < a.wave_sizes[w]; i++)
                        differs = differs || strcmp(a.waves[w][i], c.waves[w][i]) != 0;
        assert_true(differs);
        /* its JSON, both ways */
        a.created_ms = 1234;
        snprintf(a.by, sizeof(a.by), "alice");
        json_t *j = fleet_rollout_plan_to_json(&a);
        FleetRolloutPlan d = { 0 };
        assert_int_equal(fleet_rollout_plan_parse(j, &d, &e), 0);
        assert_int_equal(d.n_waves, 3);
        assert_int_equal(d.wave_sizes[2], 6);
        assert_int_equal(d.created_ms, 1234);
        assert_string_equal(d.by, "alice");
        assert_int_equal(fleet_rollout_plan_wave_of(&d, a.waves[2][5]), 2);
        json_decref(j);
        fleet_rollout_plan_done(&a);
        fleet_rollout_plan_done(&b);
        fleet_rollout_plan_done(&c);
        fleet_rollout_plan_done(&d);
        fleet_policy_done(&p);
}

static void test_small_fleets_and_waves_that_would_be_empty(void **state) {
        FleetPolicy p = { 0 };
        FleetRolloutPlan a = { 0 };
        FleetNodeInfo nodes[10];
        char names[10][8];
        Error e = ERROR_NULL;

        (void) state;
        nodes10(nodes, names);
        /* 3 nodes: [1, 10%, 50%, 100%] is waves of 1 (10% is still 1: left out), 1 (50% of 3 is 2), 1 */
        assert_int_equal(parse("{\"name\":\"x\",\"rollout\":{}}", &p, &e), 0);
        assert_int_equal(fleet_rollout_plan_make(&p, nodes, 3, &a, &e), 0);
        assert_int_equal(a.n_waves, 3);
        fleet_rollout_plan_done(&a);
        fleet_policy_done(&p);
        /* waves that stop short: the nodes past the last one are one more wave */
        assert_int_equal(parse("{\"name\":\"x\",\"rollout\":{\"waves\":[1,2]}}", &p, &e), 0);
        assert_int_equal(fleet_rollout_plan_make(&p, nodes, 10, &a, &e), 0);
        assert_int_equal(a.n_waves, 3);
        assert_int_equal(a.wave_sizes[2], 8);
        fleet_rollout_plan_done(&a);
        FleetRolloutState st;
        assert_int_equal(fleet_rollout_plan_make(&p, nodes, 10, &a, &e), 0);
        assert_false(fleet_rollout_plan_done_state(&a, &st));
        fleet_rollout_plan_done(&a);
        /* no node selected: no wave, and done as it is written (a node that gains the label later waits
         * for done, which no wave would ever judge) */
        assert_int_equal(fleet_rollout_plan_make(&p, nodes, 0, &a, &e), 0);
        assert_int_equal(a.n_waves, 0);
        assert_true(fleet_rollout_plan_done_state(&a, &st));
        assert_true(st.phase == ROLLOUT_DONE && fleet_rollout_state_committed(&st, -1));
        fleet_rollout_plan_done(&a);
        fleet_policy_done(&p);
}

static void test_a_waves_verdict_and_the_state_after(void **state) {
        FleetRolloutState s = { .phase = ROLLOUT_PROGRESSING }, n;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(fleet_wave_verdict(4, 3, 0, 0, false), WAVE_WAIT);
        assert_int_equal(fleet_wave_verdict(4, 4, 0, 0, false), WAVE_CONFIRMED);
        assert_int_equal(fleet_wave_verdict(4, 3, 1, 0, false), WAVE_HALT);
        assert_int_equal(fleet_wave_verdict(4, 3, 1, 1, false), WAVE_CONFIRMED);
        assert_int_equal(fleet_wave_verdict(4, 2, 0, 1, false), WAVE_WAIT);
        /* time is up: the missing count as unhealthy */
        assert_int_equal(fleet_wave_verdict(4, 3, 0, 0, true), WAVE_HALT);
        assert_int_equal(fleet_wave_verdict(4, 3, 0, 1, true), WAVE_CONFIRMED);
        /* confirmed: the next wave, from now; the last: done */
        fleet_rollout_state_next(&s, 0, 3, WAVE_CONFIRMED, 1000, &n);
        assert_true(n.phase == ROLLOUT_PROGRESSING && n.wave == 1 && n.confirmed == 1 && n.since_ms == 1000);
        fleet_rollout_state_next(&n, 2, 3, WAVE_CONFIRMED, 2000, &s);
        assert_true(s.phase == ROLLOUT_DONE && s.confirmed == 3);
        fleet_rollout_state_next(&n, 1, 3, WAVE_HALT, 3000, &s);
        assert_true(s.phase == ROLLOUT_HALTED && fleet_rollout_state_back(&s) && s.confirmed == 1);
        /* its JSON, both ways; none yet: wave 0, progressing */
        json_t *j = fleet_rollout_state_to_json(&s);
        assert_int_equal(fleet_rollout_state_parse(j, &n, &e), 0);
        assert_true(n.phase == ROLLOUT_HALTED && n.wave == s.wave && n.confirmed == 1);
        json_decref(j);
        assert_int_equal(fleet_rollout_state_parse(NULL, &n, &e), 0);
        assert_true(n.phase == ROLLOUT_PROGRESSING && n.wave == 0);
        j = json_pack("{s:s}", "state", "exploded");
        assert_int_equal(fleet_rollout_state_parse(j, &n, &e), -EINVAL);
        error_done(&e);
        json_decref(j);
}

static void test_durations_and_waves_from_the_command_line(void **state) {
        FleetWave *v = NULL;
        size_t n = 0;
        uint64_t usec;
        Error e = ERROR_NULL;
        json_t *j;

        (void) state;
        j = json_string("2m");
        assert_int_equal(fleet_duration_parse(j, &usec), 0);
        assert_int_equal(usec, 120000000);
        json_decref(j);
        j = json_integer(3);
        assert_int_equal(fleet_duration_parse(j, &usec), 0);
        assert_int_equal(usec, 3000000);
        json_decref(j);
        assert_int_equal(fleet_waves_parse("1,25%,100%", &v, &n, &e), 0);
        assert_int_equal(n, 3);
        j = fleet_waves_to_json(v, n);
        char *text = json_dumps(j, JSON_COMPACT);
        assert_string_equal(text, "[1,\"25%\",\"100%\"]");
        free(text);
        json_decref(j);
        free(v);
        assert_int_equal(fleet_waves_parse("1,x", &v, &n, &e), -EINVAL);
        error_done(&e);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_the_envelope_parts_are_parsed_strictly),
                cmocka_unit_test(test_kernel_gates_compare_versions),
                cmocka_unit_test(test_a_plan_is_waves_stable_spread_and_gated),
                cmocka_unit_test(test_small_fleets_and_waves_that_would_be_empty),
                cmocka_unit_test(test_a_waves_verdict_and_the_state_after),
                cmocka_unit_test(test_durations_and_waves_from_the_command_line),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
