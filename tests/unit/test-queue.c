/* test-queue.c: the request queue on a real sd-event loop: reasons merged into one request per
 * interface, interfaces in order of arrival, a change's operations before its reconcile (and meeting
 * it), a failure backed off (doubling) and expedited, a request waiting for a worker resumed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "queue.h"
#include "iface.h"

#define MAX_CALLS 32

/* What the queue asked of the test, in order: "r:IFNAME" for a reconcile (the reasons are the request's
 * until then: checked before), "o:NAME" for an operation. */
static char calls[MAX_CALLS][64];
static size_t n_calls;
static int process_answer; /* what the next reconciles of interface "a" answer */

static void record(const char *fmt, ...) _printf_(1, 2);
static void record(const char *fmt, ...) {
        va_list ap;

        assert_true(n_calls < MAX_CALLS);
        va_start(ap, fmt);
        vsnprintf(calls[n_calls++], sizeof(calls[0]), fmt, ap);
        va_end(ap);
}

static int process(Manager *m, ReconcileRequest *r) {
        (void) m;
        record("r:%s", r->iface->ifname);
        return streq(r->iface->ifname, "a") ? process_answer : 0;
}

typedef struct TestOp {
        Operation op;
        char name[16];
        int answer;
} TestOp;

static int op_run(Manager *m, Operation *op) {
        TestOp *t = (TestOp *) op;
        (void) m;
        record("o:%s", t->name);
        return t->answer;
}

static void op_free(Operation *op) {
        free(op);
}

static void queue_op(RequestQueue *q, Iface *it, const char *name, int answer) {
        TestOp *t = calloc(1, sizeof(*t));
        assert_non_null(t);
        t->op = (Operation){ .iface = it, .run = op_run, .free = op_free };
        snprintf(t->name, sizeof(t->name), "%s", name);
        t->answer = answer;
        request_queue_operation(q, &t->op);
}

typedef struct Fixture {
        sd_event *event;
        RequestQueue *q;
        Iface *a, *b;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_int_equal(sd_event_new(&f->event), 0);
        assert_int_equal(request_queue_new(f->event, NULL, process, &f->q), 0);
        assert_int_equal(iface_new(NULL, "a", &f->a), 0);
        assert_int_equal(iface_new(NULL, "b", &f->b), 0);
        n_calls = 0;
        process_answer = 0;
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        request_queue_free(f->q);
        iface_free(f->a, NULL);
        iface_free(f->b, NULL);
        sd_event_unref(f->event);
        free(f);
        return 0;
}

/* Runs the loop until nothing is left to dispatch now. */
static void run(Fixture *f) {
        for (int i = 0; i < 100 && sd_event_run(f->event, 0) > 0; i++)
                ;
}

static void test_reasons_are_merged_into_one_request(void **state) {
        Fixture *f = *state;

        request_queue_reconcile(f->q, f->a, REASON_LINK);
        request_queue_reconcile(f->q, f->a, REASON_TC);
        request_queue_reconcile(f->q, f->a, REASON_TC);
        assert_int_equal(request_queue_length(f->q), 1);
        assert_int_equal(request_queue_merged(f->q), 2);
        assert_int_equal(f->a->request->reasons, REASON_LINK | REASON_TC);
        assert_false(request_queue_idle(f->q));
        run(f);
        assert_int_equal(n_calls, 1);
        assert_string_equal(calls[0], "r:a");
        assert_int_equal(request_queue_length(f->q), 0);
        assert_true(request_queue_idle(f->q));
        assert_null(f->a->request);
}

static void test_interfaces_run_in_order_of_arrival(void **state) {
        Fixture *f = *state;

        request_queue_reconcile(f->q, f->b, REASON_START);
        request_queue_reconcile(f->q, f->a, REASON_START);
        request_queue_reconcile(f->q, f->b, REASON_TC); /* joins b's, which stays first */
        run(f);
        assert_int_equal(n_calls, 2);
        assert_string_equal(calls[0], "r:b");
        assert_string_equal(calls[1], "r:a");
}

static void test_operations_run_in_order_and_meet_a_reconcile(void **state) {
        Fixture *f = *state;

        request_queue_reconcile(f->q, f->a, REASON_TC | REASON_START);
        queue_op(f->q, f->a, "put1", 0);
        queue_op(f->q, f->a, "put2", 0);
        run(f);
        /* the operations first, in order; a change applies the whole interface: the tc event's reconcile
         * is met, the start's is not */
        assert_int_equal(n_calls, 3);
        assert_string_equal(calls[0], "o:put1");
        assert_string_equal(calls[1], "o:put2");
        assert_string_equal(calls[2], "r:a");
        assert_null(f->a->ops);
        /* only a reason a change meets: no reconcile after it */
        request_queue_reconcile(f->q, f->a, REASON_TC | REASON_LINK);
        queue_op(f->q, f->a, "put3", 0);
        run(f);
        assert_int_equal(n_calls, 4);
        assert_string_equal(calls[3], "o:put3");
}

static void test_a_failure_backs_off_doubling_and_is_expedited(void **state) {
        Fixture *f = *state;
        uint64_t now, first;

        process_answer = -EIO;
        request_queue_reconcile(f->q, f->a, REASON_TC);
        run(f);
        assert_int_equal(n_calls, 1);
        assert_true(request_queue_backing_off(f->q, f->a));
        assert_true(request_queue_idle(f->q)); /* a retry backing off is not work to wait for */
        assert_int_equal(sd_event_now(f->event, CLOCK_MONOTONIC, &now), 0);
        first = f->a->request->not_before - now;
        assert_true(first > 900000 && first <= 1000000);
        /* its own backoff: another reason joins and waits */
        request_queue_reconcile(f->q, f->b, REASON_TC);
        request_queue_reconcile(f->q, f->a, REASON_TC);
        run(f);
        assert_int_equal(n_calls, 2);
        assert_string_equal(calls[1], "r:b");
        /* expedited: at once, and failing again doubles the backoff */
        request_queue_expedite(f->q, f->a);
        run(f);
        assert_int_equal(n_calls, 3);
        assert_string_equal(calls[2], "r:a");
        assert_int_equal(f->a->request->backoff.usec, 2000000); /* failed twice: 1 s, then 2 s */
        assert_int_equal(sd_event_now(f->event, CLOCK_MONOTONIC, &now), 0);
        assert_true(f->a->request->not_before - now > 1900000);
        /* it works: the request goes */
        process_answer = 0;
        request_queue_expedite(f->q, f->a);
        run(f);
        assert_int_equal(n_calls, 4);
        assert_false(request_queue_backing_off(f->q, f->a));
        assert_int_equal(request_queue_length(f->q), 0);
}

static void test_a_request_waiting_for_a_worker_is_resumed(void **state) {
        Fixture *f = *state;

        process_answer = -EAGAIN;
        request_queue_reconcile(f->q, f->a, REASON_LINK);
        run(f);
        assert_int_equal(n_calls, 1);
        assert_true(f->a->request->running);
        assert_false(request_queue_idle(f->q));
        /* while it waits, new reasons join without running it */
        request_queue_reconcile(f->q, f->a, REASON_TC);
        run(f);
        assert_int_equal(n_calls, 1);
        assert_int_equal(f->a->request->reasons, REASON_PROGRAMS | REASON_TC);
        process_answer = 0;
        request_queue_resume(f->q, f->a);
        run(f);
        assert_int_equal(n_calls, 2);
        assert_string_equal(calls[1], "r:a");
        assert_true(request_queue_idle(f->q));
}

static void test_an_operation_that_waits_holds_the_interface(void **state) {
        Fixture *f = *state;

        queue_op(f->q, f->a, "slow", -EAGAIN);
        queue_op(f->q, f->a, "next", 0);
        request_queue_reconcile(f->q, f->b, REASON_TC);
        run(f);
        /* a's first operation waits; b goes on meanwhile; a's next waits behind it */
        assert_int_equal(n_calls, 2);
        assert_string_equal(calls[0], "o:slow");
        assert_string_equal(calls[1], "r:b");
        ((TestOp *) f->a->ops)->answer = 0;
        request_queue_resume(f->q, f->a);
        run(f);
        assert_int_equal(n_calls, 4);
        assert_string_equal(calls[2], "o:slow");
        assert_string_equal(calls[3], "o:next");
}

static void test_a_dropped_interface_leaves_nothing(void **state) {
        Fixture *f = *state;

        request_queue_reconcile(f->q, f->a, REASON_TC);
        request_queue_drop(f->q, f->a);
        assert_null(f->a->request);
        assert_int_equal(request_queue_length(f->q), 0);
        run(f);
        assert_int_equal(n_calls, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_reasons_are_merged_into_one_request, setup, teardown),
                cmocka_unit_test_setup_teardown(test_interfaces_run_in_order_of_arrival, setup, teardown),
                cmocka_unit_test_setup_teardown(test_operations_run_in_order_and_meet_a_reconcile, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_a_failure_backs_off_doubling_and_is_expedited, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_a_request_waiting_for_a_worker_is_resumed, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_an_operation_that_waits_holds_the_interface, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_a_dropped_interface_leaves_nothing, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
