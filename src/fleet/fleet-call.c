/* fleet-call.c: what every part of the fleet does with etcd: a call, whose failure is the connection's
 * (the session disconnects from the loop and reconnects), and the loop's clock and timers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "fleet-internal.h"

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
}

void fleet_on_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        (void) a, (void) answer;
        if (e)
                fleet_lost(userdata, "%s", e->message);
}

int fleet_range_answer(Fleet *f, json_t *answer, const Error *e, EtcdKv **ret, size_t *ret_n) {
        if (e) {
                fleet_lost(f, "%s", e->message);
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
