/* queue.h: the request queue, in the manner of networkd-queue.c: every reason to touch an interface (an
 * API change, a hog, a link or tc event, a retry, a resync) becomes a request of that interface; a
 * reason that finds a request queued joins it; requests run one at a time per interface, and a
 * failed one comes back after a backoff that lives with it. Changes that answer someone (a PUT, a
 * DELETE, a hog's change) are operations, run in order of arrival, each once. */
#pragma once

#include "backoff.h"
#include "daemon.h"

typedef struct RequestQueue RequestQueue;

/* Why an interface is to be reconciled; a request carries the union of its reasons. */
typedef enum RequestReason {
        REASON_START = 1 << 0,
        REASON_LINK = 1 << 1, /* the interface appeared, went or was renamed */
        REASON_TC = 1 << 2, /* a tc event on it: drift, perhaps */
        REASON_RETRY = 1 << 3, /* after a failure, with backoff */
        REASON_RESYNC = 1 << 4, /* the periodic resync, lost events, SIGHUP, D-Bus Reconcile */
        REASON_NETNS = 1 << 5, /* its namespace appeared */
        REASON_PROGRAMS = 1 << 6, /* a program it waits for was loaded */
} RequestReason;

typedef struct ReconcileRequest {
        Iface *iface;
        unsigned reasons;
        Backoff backoff; /* its failures in a row */
        uint64_t not_before; /* CLOCK_MONOTONIC µs: a retry waits until then */
        bool running; /* waiting for a worker; the interface's other work waits */
        bool dropped; /* its interface went: freed after the queue's pass */
        struct ReconcileRequest *next;
} ReconcileRequest;

/* An operation: one change that someone waits for. run() is called when the interface's turn comes;
 * it returns 0 when done (it answered), OPERATION_RETRY when done but what it declared is to be tried
 * again (a reconcile, after the request's backoff), -EAGAIN when it waits for a worker (it will be run
 * again), and frees itself through done. */
enum {
        OPERATION_RETRY = 1,
};
typedef struct Operation Operation;
typedef int (*OperationRunFunc)(Manager *m, Operation *op);
typedef void (*OperationFreeFunc)(Operation *op);
struct Operation {
        Iface *iface;
        OperationRunFunc run;
        OperationFreeFunc free;
        struct Operation *next;
};

/* process: called for each request whose turn came (running false), with the request; it returns 0
 * (done: the request goes), -EAGAIN (it waits for a worker and stays, running), or <0 (failed: retried
 * after a backoff). */
typedef int (*RequestProcessFunc)(Manager *m, ReconcileRequest *r);

int request_queue_new(sd_event *event, Manager *m, RequestProcessFunc process, RequestQueue **ret);
RequestQueue *request_queue_free(RequestQueue *q);
/* Queues a reconcile of it for reason, joining its request if one is queued. */
void request_queue_reconcile(RequestQueue *q, Iface *it, RequestReason reason);
/* Queues an operation behind the interface's others. */
void request_queue_operation(RequestQueue *q, Operation *op);
/* A reconcile backing off runs now (the reason it failed may just have gone). */
void request_queue_expedite(RequestQueue *q, Iface *it);
/* Whether the interface's reconcile failed and waits for its backoff. */
bool request_queue_backing_off(const RequestQueue *q, const Iface *it);
/* The interface's request (after -EAGAIN) may go on: runs it again. */
void request_queue_resume(RequestQueue *q, Iface *it);
/* Forgets everything queued for the interface (it goes). */
void request_queue_drop(RequestQueue *q, Iface *it);
size_t request_queue_length(const RequestQueue *q);
/* Whether nothing is queued or running but retries backing off: the first reconcile at start is done
 * when so. */
bool request_queue_idle(const RequestQueue *q);
uint64_t request_queue_merged(const RequestQueue *q);
