/* test-change.c: a change as phases, on a manager of an interface table, a queue and no kernel: the
 * phases run in order; one that says "again" is run again (and the ones before it not); a failure is
 * answered once, counted, and ends the change; a new interface a change leaves nothing in is forgotten,
 * unless another change waits for it. And each kind's own row: If-Match, a hog's hooks, a document to
 * delete, the generation a PUT stores. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "change.h"
#include "loads.h"
#include "daemon-changes.h"
#include "store-policy.h"

#define D1 "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int process_stub(Manager *m, ReconcileRequest *r) {
        (void) m, (void) r;
        return 0;
}

static Manager *manager_make(void) {
        Manager *m = calloc(1, sizeof(*m));

        assert_non_null(m);
        assert_int_equal(sd_event_new(&m->event), 0);
        assert_int_equal(iface_table_new(&m->ifaces), 0);
        assert_int_equal(loads_new(&m->loads), 0);
        assert_int_equal(request_queue_new(m->event, m, process_stub, &m->queue), 0);
        return m;
}

static void manager_unmake(Manager *m) {
        while (iface_table_size(m->ifaces) > 0) {
                Iface *it = iface_table_at(m->ifaces, 0);
                request_queue_drop(m->queue, it);
                while (it->ops) {
                        Operation *op = it->ops;
                        it->ops = op->next;
                        op->free(op);
                }
                iface_table_remove(m->ifaces, it);
                iface_free(it, NULL);
        }
        request_queue_free(m->queue);
        loads_free(m->loads);
        iface_table_free(m->ifaces);
        sd_event_unref(m->event);
        free(m->listeners.v);
        free(m);
}

static void run(Manager *m) {
        for (int i = 0; i < 100 && sd_event_run(m->event, 0) > 0; i++)
                ;
}

static Document *doc_make(const char *ifname, uint32_t priority) {
        char text[256];
        Document *d = NULL;
        Error e = ERROR_NULL;

        snprintf(text, sizeof(text),
                 "{\"ingress\":[{\"name\":\"web\",\"object\":\"" D1
                 "\",\"program\":\"p\",\"priority\":%u}]}",
                 priority);
        assert_int_equal(document_from_string(ifname, text, strlen(text), &d, &e), 0);
        return d;
}

/* ---- the driver, with phases of the test's ---- */

static char trace[64];
static int answers[_PHASE_MAX]; /* what each phase says next (then 0) */
static int answered, answered_error;

#define PHASE(i) \
        static int phase##i(Change *c, Iface *it, Error *reterr) { \
                int r = answers[i]; \
                (void) c, (void) it; \
                answers[i] = 0; \
                snprintf(trace + strlen(trace), sizeof(trace) - strlen(trace), "%d", i); \
                if (r < 0 && r != -EAGAIN) \
                        return error_set(reterr, -r, ERROR_KERNEL_ERROR, "phase %d failed", i); \
                if (r == CHANGE_ANSWERED) \
                        change_finish(c, it, NULL); \
                return r; \
        }
PHASE(0)
PHASE(1)
PHASE(2)
PHASE(3)
PHASE(4)
PHASE(5)
PHASE(6)

static const ChangePhaseFunc test_phases[_PHASE_MAX] = { phase0, phase1, phase2, phase3,
                                                         phase4, phase5, phase6 };

static void on_done(Manager *m, Iface *it, const Error *e, void *userdata) {
        (void) m, (void) it, (void) userdata;
        answered++;
        answered_error += !!e;
}

static Change *test_change(Manager *m, const char *ifname) {
        Change *c = change_new(m, CHANGE_HOG, NULL);

        assert_non_null(c);
        c->phases = test_phases;
        c->done = on_done;
        change_queue(m, c, NULL, ifname);
        return c;
}

static int driver_setup(void **state) {
        *state = manager_make();
        trace[0] = 0;
        memset(answers, 0, sizeof(answers));
        answered = answered_error = 0;
        return 0;
}

static int driver_teardown(void **state) {
        manager_unmake(*state);
        return 0;
}

static void test_phases_run_in_order(void **state) {
        Manager *m = *state;

        answers[6] = CHANGE_ANSWERED;
        test_change(m, "eth0");
        run(m);
        assert_string_equal(trace, "0123456");
        assert_int_equal(answered, 1);
        assert_int_equal(answered_error, 0);
}

static void test_a_phase_that_waits_runs_again_alone(void **state) {
        Manager *m = *state;
        Iface *it;

        answers[1] = -EAGAIN;
        answers[4] = -EAGAIN;
        answers[6] = CHANGE_ANSWERED;
        test_change(m, "eth0");
        run(m);
        assert_string_equal(trace, "01");
        assert_int_equal(answered, 0);
        it = iface_table_get(m->ifaces, NULL, "eth0");
        assert_non_null(it);
        request_queue_resume(m->queue, it);
        run(m);
        assert_string_equal(trace, "011234"); /* the phase that waited, again; not those before it */
        request_queue_resume(m->queue, it);
        run(m);
        assert_string_equal(trace, "011234456");
        assert_int_equal(answered, 1);
}

static void test_a_failure_is_answered_once_counted_and_ends_the_change(void **state) {
        Manager *m = *state;

        answers[3] = -EBUSY;
        test_change(m, "eth0");
        run(m);
        assert_string_equal(trace, "0123");
        assert_int_equal(answered, 1);
        assert_int_equal(answered_error, 1);
        assert_int_equal(m->counters.n_errors, 1);
        assert_int_equal(m->counters.errors[0].code, ERROR_KERNEL_ERROR);
        /* a new interface the change left nothing in: forgotten */
        assert_null(iface_table_get(m->ifaces, NULL, "eth0"));
        assert_int_equal(request_queue_length(m->queue), 0);
}

static void test_a_new_interface_another_change_waits_for_stays(void **state) {
        Manager *m = *state;
        Iface *it;

        answers[2] = -EBUSY;
        test_change(m, "eth0");
        test_change(m, "eth0");
        answers[6] = CHANGE_ANSWERED; /* (the first fails before it: this is the second's) */
        run(m);
        /* the first failed at 2; the interface stayed for the second, which ran through */
        assert_string_equal(trace, "0120123456");
        assert_int_equal(answered, 2);
        assert_int_equal(answered_error, 1);
        it = iface_table_get(m->ifaces, NULL, "eth0");
        assert_null(it); /* then nothing waited: forgotten */
}

/* ---- each kind's row ---- */

static Iface *iface_with_api(Manager *m, Document *api) {
        Iface *it = NULL;

        assert_int_equal(iface_table_ensure(m->ifaces, NULL, "eth0", &it), 0);
        if (api) {
                assert_int_equal(iface_set_documents(it, api, NULL, NULL, NULL, NULL, false, NULL), 0);
                it->visible = true;
        }
        return it;
}

static void test_if_match_is_checked_against_the_document(void **state) {
        Manager *m = *state;
        Document *old = doc_make("eth0", 10);
        Iface *it;
        Error e = ERROR_NULL;
        DaemonExpect any = { .kind = EXPECT_ANY, .as_given = "*" },
                     gen7 = { .kind = EXPECT_GENERATION, .generation = 7, .as_given = "\"7\"" },
                     gen3 = { .kind = EXPECT_GENERATION, .generation = 3, .as_given = "\"3\"" };
        Change *c = change_new(m, CHANGE_PUT, &any);

        /* no document yet: If-Match: * fails */
        it = iface_with_api(m, NULL);
        c->doc = doc_make("eth0", 10);
        assert_int_equal(change_types[CHANGE_PUT].check(c, it, &e), -EEXIST);
        assert_int_equal(e.code, ERROR_PRECONDITION_FAILED);
        assert_non_null(strstr(e.message, "no document"));
        error_done(&e);
        change_free(&c->op);
        /* one at generation 7 */
        old->generation = 7;
        it = iface_with_api(m, old);
        c = change_new(m, CHANGE_PUT, &gen7);
        c->doc = doc_make("eth0", 10);
        assert_int_equal(change_types[CHANGE_PUT].check(c, it, &e), 0);
        change_free(&c->op);
        c = change_new(m, CHANGE_DELETE, &gen3);
        assert_int_equal(change_types[CHANGE_DELETE].check(c, it, &e), -EEXIST);
        assert_non_null(strstr(e.message, "\"7\""));
        error_done(&e);
        change_free(&c->op);
        document_unref(old);
}

static void test_a_put_keeps_or_counts_the_generation(void **state) {
        Manager *m = *state;
        Document *old = doc_make("eth0", 10), *api, *hog;
        DocumentFacts facts = { 0 };
        const char *hog_path;
        Policy *const *policies;
        size_t n_policies;
        Iface *it;
        Change *c;

        old->generation = 4;
        it = iface_with_api(m, old);
        /* the same document again keeps its generation; another counts one more */
        for (int k = 0; k < 2; k++) {
                c = change_new(m, CHANGE_PUT, NULL);
                c->doc = doc_make("eth0", k == 0 ? 10 : 20);
                assert_int_equal(change_types[CHANGE_PUT].documents(c, it, &api, &facts, &hog, &hog_path,
                                                                    &policies, &n_policies),
                                 0);
                assert_ptr_equal(api, c->doc);
                assert_int_equal(api->generation, k == 0 ? 4 : 5);
                document_facts_done(&facts);
                change_free(&c->op);
        }
        /* a delete's candidate has no API document, and the hog it had */
        c = change_new(m, CHANGE_DELETE, NULL);
        assert_int_equal(change_types[CHANGE_DELETE].documents(c, it, &api, &facts, &hog, &hog_path,
                                                               &policies, &n_policies),
                         0);
        assert_null(api);
        assert_null(hog);
        change_free(&c->op);
        document_unref(old);
}

static void test_a_hogs_hook_and_a_missing_document_are_refused(void **state) {
        Manager *m = *state;
        Document *hog = doc_make("eth0", 10);
        Iface *it = NULL;
        Error e = ERROR_NULL;
        Change *c;

        assert_int_equal(iface_table_ensure(m->ifaces, NULL, "eth0", &it), 0);
        /* nothing stored: nothing to delete */
        c = change_new(m, CHANGE_DELETE, NULL);
        assert_int_equal(change_types[CHANGE_DELETE].check(c, it, &e), -ENOENT);
        assert_int_equal(e.code, ERROR_DOCUMENT_NOT_FOUND);
        error_done(&e);
        change_free(&c->op);
        /* a hog holds ingress: a PUT there, or a DELETE of the hog's document, is the hog's */
        assert_int_equal(
                iface_set_documents(it, NULL, NULL, hog, "/etc/clsd/hogs/eth0.json", NULL, false, NULL), 0);
        it->visible = true;
        c = change_new(m, CHANGE_PUT, NULL);
        c->doc = doc_make("eth0", 20);
        assert_int_equal(change_types[CHANGE_PUT].check(c, it, &e), -EBUSY);
        assert_int_equal(e.code, ERROR_HOG_OWNED);
        error_done(&e);
        change_free(&c->op);
        c = change_new(m, CHANGE_DELETE, NULL);
        assert_int_equal(change_types[CHANGE_DELETE].check(c, it, &e), -EBUSY);
        assert_int_equal(e.code, ERROR_HOG_OWNED);
        error_done(&e);
        change_free(&c->op);
        document_unref(hog);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_phases_run_in_order, driver_setup, driver_teardown),
                cmocka_unit_test_setup_teardown(test_a_phase_that_waits_runs_again_alone, driver_setup,
                                                driver_teardown),
                cmocka_unit_test_setup_teardown(test_a_failure_is_answered_once_counted_and_ends_the_change,
                                                driver_setup, driver_teardown),
                cmocka_unit_test_setup_teardown(test_a_new_interface_another_change_waits_for_stays,
                                                driver_setup, driver_teardown),
                cmocka_unit_test_setup_teardown(test_if_match_is_checked_against_the_document, driver_setup,
                                                driver_teardown),
                cmocka_unit_test_setup_teardown(test_a_put_keeps_or_counts_the_generation, driver_setup,
                                                driver_teardown),
                cmocka_unit_test_setup_teardown(test_a_hogs_hook_and_a_missing_document_are_refused,
                                                driver_setup, driver_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
