/* queue.c: the request queue. Each interface with work has one ReconcileRequest in a FIFO: the changes
 * waiting for it (operations, in order of arrival) and the reasons to reconcile it, merged. A defer event
 * source runs the queue after each burst of events; a request that waits for a worker stays, marked running,
 * until its interface is resumed; one that failed comes back after its backoff (1 s, doubling, at most
 * a minute), which a timer wakes up. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "iface.h"
#include "log.h"
#include "queue.h"

#define RETRY_BASE_USEC (1000000ULL)
#define RETRY_MAX_USEC (60 * 1000000ULL)

struct RequestQueue {
        sd_event *event;
        Manager *m;
        RequestProcessFunc process;
        ReconcileRequest *head, *tail;
        size_t n;
        sd_event_source *defer;
        sd_event_source *timer;
        bool processing;
        uint64_t merged;
};

static uint64_t now_usec(RequestQueue *q) {
        uint64_t now;
        if (sd_event_now(q->event, CLOCK_MONOTONIC, &now) < 0)
                return 0;
        return now;
}

static void schedule(RequestQueue *q) {
        (void) sd_event_source_set_enabled(q->defer, SD_EVENT_ONESHOT);
}

static void request_unlink(RequestQueue *q, ReconcileRequest *r) {
        for (ReconcileRequest **p = &q->head, *prev = NULL; *p; prev = *p, p = &(*p)->next)
                if (*p == r) {
                        *p = r->next;
                        if (q->tail == r)
                                q->tail = prev;
                        q->n--;
                        return;
                }
}

static void request_free(RequestQueue *q, ReconcileRequest *r) {
        request_unlink(q, r);
        free(r);
}

/* The earliest backoff among the requests that wait for one; the timer wakes the queue then. */
static void arm_timer(RequestQueue *q) {
        uint64_t next = UINT64_MAX, now = now_usec(q);

        for (ReconcileRequest *r = q->head; r; r = r->next)
                if (!r->dropped && !r->running && r->reasons && !r->iface->ops && r->not_before > now &&
                    r->not_before < next)
                        next = r->not_before;
        if (next == UINT64_MAX) {
                (void) sd_event_source_set_enabled(q->timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(q->timer, next);
        (void) sd_event_source_set_enabled(q->timer, SD_EVENT_ONESHOT);
}

/* The request's reconcile failed (or a change that declared intent): again after its backoff. */
static void retry_later(RequestQueue *q, ReconcileRequest *req) {
        uint64_t delay = backoff_next(&req->backoff, RETRY_BASE_USEC, RETRY_MAX_USEC);

        req->reasons |= REASON_RETRY;
        req->not_before = now_usec(q) + delay;
        log_info("%s: next attempt in %llu s", req->iface->ifname, (unsigned long long) (delay / 1000000));
}

/* Runs the interface's work that can run now; returns whether the request is done. */
static bool request_run(RequestQueue *q, ReconcileRequest *req) {
        Iface *it = req->iface;
        int r;

        while (it->ops) {
                Operation *op = it->ops;
                r = op->run(q->m, op);
                if (r == -EAGAIN) {
                        req->running = true;
                        return false;
                }
                if (r == -ESRCH)
                        return true; /* the operation forgot the interface: nothing of it is left */
                it->ops = op->next;
                if (!it->ops)
                        it->ops_tail = NULL;
                op->free(op);
                /* A change just applied the whole interface: what asked for a reconcile is met. */
                req->reasons &= ~(unsigned) (REASON_TC | REASON_RESYNC | REASON_LINK | REASON_PROGRAMS);
                if (r == OPERATION_RETRY)
                        retry_later(q, req);
                else {
                        backoff_reset(&req->backoff);
                        req->not_before = 0;
                }
        }
        if (!req->reasons)
                return true;
        if (req->not_before > now_usec(q))
                return false; /* backing off: the timer brings it back */
        req->reasons = 0;
        r = q->process(q->m, req);
        if (r == -EAGAIN) {
                /* its programs are being loaded: once they are, the reconcile runs again */
                req->reasons |= REASON_PROGRAMS;
                req->running = true;
                return false;
        }
        if (r < 0) {
                retry_later(q, req);
                return false;
        }
        backoff_reset(&req->backoff);
        req->not_before = 0;
        return !req->reasons;
}

static int on_defer(sd_event_source *s, void *userdata) {
        RequestQueue *q = userdata;

        (void) s;
        q->processing = true;
        /* Requests queued while the queue runs are run in this pass too (they are at the tail); one that
         * an operation drops is only marked, and freed after the pass. */
        for (ReconcileRequest *r = q->head; r; r = r->next) {
                if (r->running || r->dropped)
                        continue;
                if (request_run(q, r) && !r->dropped) {
                        r->iface->request = NULL;
                        r->dropped = true;
                }
        }
        q->processing = false;
        for (ReconcileRequest *r = q->head, *next; r; r = next) {
                next = r->next;
                if (r->dropped)
                        request_free(q, r);
        }
        arm_timer(q);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        RequestQueue *q = userdata;

        (void) s, (void) usec;
        schedule(q);
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(RequestQueue *, request_queue_free);

int request_queue_new(sd_event *event, Manager *m, RequestProcessFunc process, RequestQueue **ret) {
        _cleanup_(request_queue_freep) RequestQueue *q = calloc(1, sizeof(*q));
        int r;

        if (!q)
                return -ENOMEM;
        q->event = sd_event_ref(event);
        q->m = m;
        q->process = process;
        r = sd_event_add_defer(event, &q->defer, on_defer, q);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(q->defer, SD_EVENT_OFF);
        if (r < 0)
                return r;
        r = sd_event_add_time(event, &q->timer, CLOCK_MONOTONIC, 0, 0, on_timer, q);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(q->timer, SD_EVENT_OFF);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(q);
        return 0;
}

RequestQueue *request_queue_free(RequestQueue *q) {
        if (!q)
                return NULL;
        while (q->head) {
                ReconcileRequest *r = q->head;
                if (r->iface && r->iface->request == r)
                        r->iface->request = NULL;
                request_free(q, r);
        }
        sd_event_source_disable_unref(q->defer);
        sd_event_source_disable_unref(q->timer);
        sd_event_unref(q->event);
        free(q);
        return NULL;
}

static ReconcileRequest *request_get(RequestQueue *q, Iface *it) {
        ReconcileRequest *r = it->request;

        if (r)
                return r;
        r = calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        r->iface = it;
        if (q->tail)
                q->tail->next = r;
        else
                q->head = r;
        q->tail = r;
        q->n++;
        it->request = r;
        return r;
}

void request_queue_reconcile(RequestQueue *q, Iface *it, RequestReason reason) {
        ReconcileRequest *r;

        if (it->request && it->request->reasons) {
                q->merged++;
                it->request->reasons |= reason;
                return;
        }
        r = request_get(q, it);
        if (!r) {
                log_error("%s: out of memory: the reconcile waits for the resync", it->ifname);
                return;
        }
        r->reasons |= reason;
        if (!r->running)
                schedule(q);
}

void request_queue_expedite(RequestQueue *q, Iface *it) {
        if (!it->request)
                return;
        it->request->not_before = 0;
        if (!it->request->running)
                schedule(q);
}

bool request_queue_backing_off(const RequestQueue *q, const Iface *it) {
        (void) q;
        return it->request && it->request->backoff.usec > 0;
}

void request_queue_operation(RequestQueue *q, Operation *op) {
        Iface *it = op->iface;
        ReconcileRequest *r = request_get(q, it);

        op->next = NULL;
        if (it->ops_tail)
                it->ops_tail->next = op;
        else
                it->ops = op;
        it->ops_tail = op;
        if (!r) {
                log_error("%s: out of memory queueing a change", it->ifname);
                return;
        }
        if (!r->running)
                schedule(q);
}

void request_queue_resume(RequestQueue *q, Iface *it) {
        if (!it->request)
                return;
        it->request->running = false;
        schedule(q);
}

void request_queue_drop(RequestQueue *q, Iface *it) {
        ReconcileRequest *r = it->request;

        if (!r)
                return;
        it->request = NULL;
        r->iface = NULL;
        if (q->processing)
                r->dropped = true; /* freed once the pass is over */
        else
                request_free(q, r);
}

size_t request_queue_length(const RequestQueue *q) {
        return q->n;
}

bool request_queue_idle(const RequestQueue *q) {
        for (const ReconcileRequest *r = q->head; r; r = r->next)
                if (!r->dropped &&
                    (r->running || (r->iface && r->iface->ops) || (r->reasons && r->backoff.usec == 0)))
                        return false;
        return true;
}

uint64_t request_queue_merged(const RequestQueue *q) {
        return q->merged;
}
