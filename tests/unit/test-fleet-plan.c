/* test-fleet-plan.c: the fleet's converge as pure functions over etcd's answers captured as data
 * (tests/data/fleet: a range of policies/ from etcd 3.4's gateway, and a watch stream): which policies
 * select a node, and what goes to the daemon next (one etcd revision's changes as one group, puts and
 * removals; a failed group held back without holding up the ones after it). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "fleet-internal.h"
#include "fleet-plan.h"

#define PREFIX "/clsd/"

static json_t *load(const char *name, size_t line) {
        char path[512], buf[8192];
        json_t *j = NULL;
        FILE *f;

        snprintf(path, sizeof(path), "%s/fleet/%s", TEST_DATA_DIR, name);
        f = fopen(path, "re");
        assert_non_null(f);
        if (line == 0)
                j = json_loadf(f, 0, NULL);
        else
                for (size_t i = 0; i < line && fgets(buf, sizeof(buf), f); i++)
                        if (i + 1 == line)
                                j = json_loads(buf, 0, NULL);
        fclose(f);
        assert_non_null(j);
        return j;
}

/* The policies of the captured range as node (with labels "k=v,…") sees them; the range's revision. */
static uint64_t wanted_from_range(WantedSet *s, const char *node, const char *labels) {
        json_t *j = load("range.json", 0);
        FleetLabel *l = NULL;
        size_t n_l = 0, n = 0;
        EtcdKv *kvs = NULL;
        uint64_t revision = 0;
        Error e = ERROR_NULL;

        assert_int_equal(fleet_labels_parse(labels, &l, &n_l, &e), 0);
        assert_int_equal(etcd_range_parse(j, &kvs, &n, &revision, &e), 0);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(wanted_set(s, PREFIX, &kvs[i], node, l, n_l, NULL), 0);
        etcd_kvs_free(kvs, n);
        json_decref(j);
        free(l);
        return revision;
}

static void test_what_selects_a_node(void **state) {
        WantedSet s = { 0 };
        uint64_t revision;

        (void) state;
        revision = wanted_from_range(&s, "n1", "role=edge");
        assert_int_equal(revision, 6);
        assert_int_equal(s.n, 5);
        assert_true(wanted_find(&s, "web")->selected); /* by its label */
        assert_int_equal(wanted_find(&s, "web")->revision, 2);
        assert_true(wanted_find(&s, "dns")->selected); /* every node */
        assert_true(wanted_find(&s, "ntp")->selected); /* by name */
        assert_non_null(wanted_find(&s, "broken")->invalid);
        assert_false(wanted_find(&s, "broken")->selected);
        /* a name that is not its key's */
        assert_non_null(wanted_find(&s, "other")->invalid);
        wanted_clear(&s);
        wanted_from_range(&s, "n3", "role=core");
        assert_false(wanted_find(&s, "web")->selected);
        assert_true(wanted_find(&s, "dns")->selected);
        assert_false(wanted_find(&s, "ntp")->selected);
        wanted_clear(&s);
}

static void test_a_key_with_a_nul_is_no_policy(void **state) {
        char key[] = PREFIX "policies/ok\0x";
        EtcdKv kv = { .key = key, .key_size = sizeof(key) - 1 };

        (void) state;
        assert_null(wanted_name_of(PREFIX, &kv));
        kv.key_size = strlen(key);
        assert_string_equal(wanted_name_of(PREFIX, &kv), "ok");
        char sub[] = PREFIX "policies/a/b";
        kv = (EtcdKv){ .key = sub, .key_size = strlen(sub) };
        assert_null(wanted_name_of(PREFIX, &kv));
}

static const Pending *change_of(const FleetStep *st, const char *name) {
        for (size_t i = 0; i < st->n_changes; i++)
                if (streq(st->changes[i].name, name))
                        return &st->changes[i];
        return NULL;
}

static void test_one_revision_is_one_group_in_order(void **state) {
        WantedSet s = { 0 };
        FleetStep st = { 0 };
        uint64_t revision = wanted_from_range(&s, "n1", "role=edge");

        (void) state;
        /* nothing held: web's revision first, alone */
        assert_int_equal(fleet_plan(&s, NULL, 0, revision, 0, 0, 100, &st), 0);
        assert_int_equal(st.n_changes, 1);
        assert_string_equal(st.changes[0].name, "web");
        assert_ptr_equal(st.changes[0].put, wanted_find(&s, "web"));
        assert_ptr_equal(st.changes[0].body, wanted_find(&s, "web")->fp.policy);
        fleet_step_done(&st);
        /* then dns and ntp: one transaction wrote both */
        FleetHeld held[] = { { "web", 2 }, { "dns", 3 }, { "ntp", 3 }, { "gone", 1 } };
        assert_int_equal(fleet_plan(&s, held, 1, revision, 0, 0, 100, &st), 0);
        assert_int_equal(st.n_changes, 2);
        assert_non_null(change_of(&st, "dns"));
        assert_non_null(change_of(&st, "ntp"));
        assert_int_equal(st.changes[0].revision, 3);
        fleet_step_done(&st);
        /* all held: nothing */
        assert_int_equal(fleet_plan(&s, held, 3, revision, 0, 0, 100, &st), 0);
        assert_int_equal(st.n_changes, 0);
        assert_int_equal(st.retry_usec, UINT64_MAX);
        /* one held that etcd has not (deleted while this node was away): removed at the list's revision */
        assert_int_equal(fleet_plan(&s, held, 4, revision, 0, 0, 100, &st), 0);
        assert_int_equal(st.n_changes, 1);
        assert_string_equal(st.changes[0].name, "gone");
        assert_null(st.changes[0].put);
        assert_int_equal(st.changes[0].revision, revision);
        fleet_step_done(&st);
        wanted_clear(&s);
}

static void test_a_node_no_longer_selected_removes_it(void **state) {
        WantedSet s = { 0 };
        FleetStep st = { 0 };
        uint64_t revision = wanted_from_range(&s, "n3", "role=core");
        FleetHeld held[] = { { "web", 2 }, { "dns", 3 } };

        (void) state;
        assert_int_equal(fleet_plan(&s, held, 2, revision, 0, 0, 100, &st), 0);
        assert_int_equal(st.n_changes, 1);
        assert_string_equal(st.changes[0].name, "web");
        assert_null(st.changes[0].put);
        assert_int_equal(st.changes[0].revision, 2);
        fleet_step_done(&st);
        wanted_clear(&s);
}

static bool has_none(const char *name, void *userdata) {
        (void) name, (void) userdata;
        return false;
}

static void test_a_watch_message_is_one_group_of_put_and_removal(void **state) {
        WantedSet s = { 0 };
        FleetStep st = { 0 };
        EtcdWatchMessage msg = { 0 };
        Error e = ERROR_NULL;
        json_t *created = load("watch.jsonl", 1), *j = load("watch.jsonl", 2);
        FleetHeld held[] = { { "web", 2 }, { "dns", 3 }, { "ntp", 3 } };

        (void) state;
        wanted_from_range(&s, "n1", "role=edge");
        assert_int_equal(etcd_watch_parse(created, &msg, &e), 0);
        assert_true(msg.created);
        etcd_watch_message_done(&msg);
        assert_int_equal(etcd_watch_parse(j, &msg, &e), 0);
        assert_int_equal(msg.n_events, 2);
        for (size_t i = 0; i < msg.n_events; i++) {
                const char *name = wanted_name_of(PREFIX, &msg.events[i]);
                if (msg.deleted[i])
                        wanted_gone(&s, name, msg.events[i].mod_revision);
                else
                        assert_int_equal(wanted_set(&s, PREFIX, &msg.events[i], "n1", NULL, 0, NULL), 0);
        }
        etcd_watch_message_done(&msg);
        assert_true(wanted_find(&s, "web")->gone);
        assert_int_equal(fleet_plan(&s, held, 3, 7, 0, 0, 100, &st), 0);
        assert_int_equal(st.n_changes, 2);
        assert_null(change_of(&st, "web")->put);
        assert_non_null(change_of(&st, "dns")->put);
        assert_int_equal(change_of(&st, "web")->revision, 7);
        fleet_step_done(&st);
        /* once the daemon has no web, the deleted policy is forgotten */
        wanted_forget_gone(&s, has_none, NULL);
        assert_null(wanted_find(&s, "web"));
        json_decref(created);
        json_decref(j);
        wanted_clear(&s);
}

static void test_a_failed_group_waits_without_holding_up_later_ones(void **state) {
        WantedSet s = { 0 };
        FleetStep st = { 0 };
        uint64_t revision = wanted_from_range(&s, "n1", "role=edge");
        FleetHeld held[] = { { "web", 2 } };
        Wanted *dns = wanted_find(&s, "dns");

        (void) state;
        /* dns's put failed at its revision: its group (dns, ntp) waits until its retry */
        dns->error = strdup("refused");
        dns->error_revision = dns->revision;
        dns->retry_usec = 5000;
        assert_int_equal(fleet_plan(&s, held, 1, revision, 0, 0, 100, &st), 0);
        assert_int_equal(st.n_changes, 0);
        assert_int_equal(st.retry_usec, 5000);
        assert_int_equal(fleet_plan(&s, held, 1, revision, 0, 0, 5000, &st), 0);
        assert_int_equal(st.n_changes, 2);
        fleet_step_done(&st);
        /* the last failed revision waits too; a later group goes meanwhile */
        free(dns->error);
        dns->error = NULL;
        dns->error_revision = 0;
        EtcdKv later = { .key = (char *) PREFIX "policies/late",
                         .key_size = strlen(PREFIX "policies/late"),
                         .value = (char *) "{\"name\":\"late\",\"match\":{\"ifname\":[\"x\"]}}",
                         .mod_revision = 9 };
        later.value_size = strlen(later.value);
        assert_int_equal(wanted_set(&s, PREFIX, &later, "n1", NULL, 0, NULL), 0);
        assert_int_equal(fleet_plan(&s, held, 1, revision, 3, 9000, 100, &st), 0);
        assert_int_equal(st.n_changes, 1);
        assert_string_equal(st.changes[0].name, "late");
        fleet_step_done(&st);
        wanted_clear(&s);
}

static void test_own_writes_and_another_writers(void **state) {
        OwnWrite w = { 0 };

        (void) state;
        /* a put under way: what the watch says meanwhile is judged at its answer */
        w.inflight = 1;
        assert_false(own_write_foreign(&w, 10));
        assert_false(own_write_answered(&w, 10)); /* it was this write */
        assert_false(own_write_foreign(&w, 10)); /* the watch's echo of it */
        assert_true(own_write_foreign(&w, 11)); /* after it, none under way: another writer */
        w.inflight = 1;
        assert_false(own_write_foreign(&w, 14));
        assert_true(own_write_answered(&w, 12)); /* 14 came after this node's 12 */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_what_selects_a_node),
                cmocka_unit_test(test_a_key_with_a_nul_is_no_policy),
                cmocka_unit_test(test_one_revision_is_one_group_in_order),
                cmocka_unit_test(test_a_node_no_longer_selected_removes_it),
                cmocka_unit_test(test_a_watch_message_is_one_group_of_put_and_removal),
                cmocka_unit_test(test_a_failed_group_waits_without_holding_up_later_ones),
                cmocka_unit_test(test_own_writes_and_another_writers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
