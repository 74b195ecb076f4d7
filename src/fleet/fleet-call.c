/* fleet-call.c: what every part of the fleet does with etcd: a call, whose failure is the connection's
 * (the session disconnects from the loop and reconnects), and the loop's clock and timers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "fleet-internal.h"
#include "log.h"
#include "fleet-io.h"

void fleet_lost(Fleet *f, const char *fmt, ...) {
        va_list ap;

        /* the first reason of a loss is the one said */
        if (sd_event_source_get_enabled(f->lost, NULL) > 0)
                return;
        va_start(ap, fmt);
        vsnprintf(f->status.last_error, sizeof(f->status.last_error), fmt, ap);
        va_end(ap);
        (void) sd_event_source_set_enabled(f->lost, SD_EVENT_ONESHOT);
}

void fleet_call(Fleet *f, const char *path, json_t *body, EtcdCallDone done, void (*cancel)(void *),
                void *userdata) {
        if (etcd_async_call(f->etcd, path, body, done, cancel, userdata) < 0) {
                if (cancel)
                        cancel(userdata);
                fleet_lost(f, "out of memory");
        }
        f->status.requests = etcd_async_requests(f->etcd);
        f->status.busy_answers = etcd_async_busy_answers(f->etcd);
        f->status.retries = etcd_async_retries(f->etcd);
}

/* What stayed unanswered while etcd was busy, done again once the client's spacing allows: a second,
 * or its backoff if that is longer (the calls wait for it anyway). */
#define RESYNC_USEC (1000 * 1000ULL)

void fleet_call_failed(Fleet *f, const Error *e) {
        if (e->code == ERROR_ETCD_TOKEN_INVALID) {
                etcd_async_forget_token(f->etcd); /* the next connection logs in again */
                fleet_lost(f, "%s", e->message);
                return;
        }
        if (e->code == ERROR_ETCD_LEASE_NOT_FOUND) {
                /* the lease expired (etcd busy or out of reach longer than its time): a new one, and the
                 * node's keys written again under it; the watch and the connection stay */
                f->lease_lost = true;
                fleet_timer_once(f, &f->resync, 0, NULL);
                return;
        }
        if (e->code != ERROR_ETCD_OVERLOADED) {
                fleet_lost(f, "%s", e->message);
                return;
        }
        if (f->status.busy_failures++ % 100 == 0)
                log_warning("fleet: %s; the connection stays, what it was for is done again later",
                            strna(e->message));
        /* (session.c made the timer: it publishes, ticks the rollouts and converges) */
        fleet_timer_once(f, &f->resync, MAX(RESYNC_USEC, etcd_async_backoff_usec(f->etcd)), NULL);
}

/* The window a node's comebacks are drawn from grows with the fleet: this much per node, from the first
 * up to the last (5,000 nodes that lost etcd at once come back over 50 s: 100 a second). */
#define BACKOFF_MIN_USEC (250 * 1000ULL)
#define BACKOFF_MAX_USEC (8 * 1000 * 1000ULL)
#define BACKOFF_PER_NODE_USEC (10 * 1000ULL)
#define BACKOFF_FLEET_MAX_USEC (120 * 1000 * 1000ULL)

static uint64_t backoff_cap(Fleet *f) {
        return CLAMP(f->fleet_size * BACKOFF_PER_NODE_USEC, BACKOFF_MAX_USEC, BACKOFF_FLEET_MAX_USEC);
}

uint64_t fleet_backoff_next(Fleet *f) {
        /* from half to all of the backoff: after an outage, a fleet's nodes do not come back at once */
        return backoff_next_jittered(&f->backoff, BACKOFF_MIN_USEC, backoff_cap(f));
}

void fleet_sized(Fleet *f, uint64_t nodes) {
        f->fleet_size = nodes;
        f->sized = true;
        /* the etcd client's spacing while etcd is busy grows with the fleet too */
        etcd_async_set_backoff_cap(f->etcd, backoff_cap(f));
}

void fleet_on_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        (void) a, (void) answer;
        if (e)
                fleet_call_failed(userdata, e);
}

int fleet_range_answer(Fleet *f, json_t *answer, const Error *e, EtcdKv **ret, size_t *ret_n) {
        if (e) {
                fleet_call_failed(f, e);
                return -EIO;
        }
        return etcd_range_parse(answer, ret, ret_n, NULL, NULL);
}

uint64_t fleet_now(Fleet *f) {
        uint64_t now = 0;
        (void) sd_event_now(f->event, CLOCK_MONOTONIC, &now);
        return now;
}

void fleet_timer_once(Fleet *f, sd_event_source **s, uint64_t usec, sd_event_time_handler_t handler) {
        uint64_t now = fleet_now(f);

        if (!*s) {
                if (sd_event_add_time(f->event, s, CLOCK_MONOTONIC, now + usec, 1000, handler, f) < 0)
                        return;
        } else
                (void) sd_event_source_set_time(*s, now + usec);
        (void) sd_event_source_set_enabled(*s, SD_EVENT_ONESHOT);
}

void fleet_status_changed(Fleet *f) {
        if (f->status_kick)
                (void) sd_event_source_set_enabled(f->status_kick, SD_EVENT_ONESHOT);
}

void fleet_converge_soon(Fleet *f) {
        if (f->kick)
                (void) sd_event_source_set_enabled(f->kick, SD_EVENT_ONESHOT);
}

uint64_t fleet_realtime_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}
