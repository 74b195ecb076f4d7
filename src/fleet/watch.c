/* watch.c: what this node reads of etcd: the fleet's policies and rollouts, listed at one revision (with the
 * fleet's size, which spaces its retries) in one transaction, then watched from the next on one stream
 * (the policies, the rollouts, and this node's own keys, which another writer may change or delete: they
 * are written again). A stream that ends, or whose watches etcd is slow to make, is begun again from where
 * each watch was, after a pause that grows; the connection stays (the lease, what was published): a slow
 * etcd is asked again once, not by a new connection's many requests. A list again only after a
 * compaction took the history a watch would resume from. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "fleet-io.h"
#include "fleet-rollouts.h"
#include "fleet-session.h"

/* The stream's watches, one JSON text each: the fleet's policies, this node's own keys (its record, its
 * status), the rollouts' plans and states, and clsctl fleet diff's requests. */
enum {
        WATCH_POLICIES = 1,
        WATCH_RECORD = 2,
        WATCH_STATUS = 3,
        WATCH_ROLLOUTS = 4,
        WATCH_DIFFS = 5,
        WATCHES = 5,
        /* the watches a node needs to be connected: the diffs' is not one (a node whose etcd user was
         * made before fleet diff existed may not read diffs/: it runs, and answers no diff) */
        WATCHES_ALL = (1u << WATCH_POLICIES) | (1u << WATCH_RECORD) | (1u << WATCH_STATUS) |
                      (1u << WATCH_ROLLOUTS),
};

/* How long etcd may take to make a stream's watches before it is begun again: doubling while it is slow,
 * from the first, up to the last. */
#define WATCH_CREATED_MIN_USEC (5 * 1000000ULL)
#define WATCH_CREATED_MAX_USEC (120 * 1000000ULL)
/* Streams that ended in a row without a message before the connection is taken for lost (the endpoint
 * is gone: the next one is tried). */
#define STREAM_FAILURES_MAX 3

static void stream_begin(Fleet *f);
static void stream_again(Fleet *f, const char *why);

/* ---- the list: one transaction, one revision ---- */

static int take_policies(Fleet *f, json_t *range, uint64_t revision) {
        EtcdKv *kvs = NULL;
        size_t n = 0;
        int r;

        r = etcd_range_parse(range, &kvs, &n, NULL, NULL);
        if (r < 0)
                return r;
        /* what failed before is tried again against this snapshot */
        wanted_clear(&f->wanted);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                const char *name = wanted_name_of(f->prefix, &kvs[i]);
                r = wanted_set(&f->wanted, f->prefix, &kvs[i], f->node, f->labels, f->n_labels, &f->facts);
                if (r >= 0 && name)
                        trust_judge(f, name);
        }
        etcd_kvs_free(kvs, n);
        if (r >= 0)
                trust_keep_unlisted(f, revision);
        return r;
}

static int take_rollouts(Fleet *f, json_t *range) {
        EtcdKv *kvs = NULL;
        size_t n = 0;
        int r;

        r = etcd_range_parse(range, &kvs, &n, NULL, NULL);
        if (r < 0)
                return r;
        rollout_views_clear(&f->rollouts);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = rollout_views_set(&f->rollouts, f->prefix, &kvs[i], false, fleet_now(f));
        etcd_kvs_free(kvs, n);
        return r;
}

static json_t *response_range(json_t *answer, size_t i) {
        return json_object_get(json_array_get(json_object_get(answer, "responses"), i), "response_range");
}

static void on_listed(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        uint64_t revision = etcd_answer_revision(answer);

        (void) a;
        if (e) {
                if (e->code == ERROR_ETCD_TOKEN_INVALID)
                        etcd_async_forget_token(f->etcd);
                fleet_lost(f, "%s", e->message);
                return;
        }
        if (take_policies(f, response_range(answer, 0), revision) < 0 ||
            take_rollouts(f, response_range(answer, 1)) < 0) {
                fleet_lost(f, "etcd's list could not be read");
                return;
        }
        /* the fleet's size spaces this node's retries: a fleet's nodes do not come back at once */
        fleet_sized(f, etcd_range_count(response_range(answer, 2)));
        f->revision = f->rollouts_revision = revision;
        f->listed = true;
        f->state = FLEET_WATCHING;
        f->status.seen_revision = f->revision;
        log_info("fleet: %zu fleet policies, %zu rollouts at revision %" PRIu64 ", %" PRIu64 " nodes (%s)",
                 f->wanted.n, f->rollouts.n, f->revision, f->fleet_size, etcd_async_endpoint(f->etcd));
        stream_begin(f);
        apply_later(f);
        status_later(f);
        rollout_views_changed(f);
}

void watch_list(Fleet *f) {
        _cleanup_free_ char *policies = fleet_key(f->prefix, "policies", NULL, NULL),
                            *rollouts = fleet_key(f->prefix, "rollouts", NULL, NULL),
                            *nodes = fleet_key(f->prefix, "nodes", NULL, NULL);
        json_t *count = nodes ? etcd_count_body(nodes) : NULL;

        if (count && (!policies || !rollouts)) {
                json_decref(count);
                count = NULL;
        }
        if (!count) {
                fleet_lost(f, "out of memory");
                return;
        }
        f->status.lists++;
        /* the policies, the rollouts and the fleet's size at one revision: one request */
        fleet_call(f, "/v3/kv/txn",
                   json_pack("{s:[{s:o},{s:o},{s:o}]}", "success", "request_range",
                             etcd_range_body(policies, true), "request_range",
                             etcd_range_body(rollouts, true), "request_range", count),
                   on_listed, NULL, f);
}

/* ---- the stream ---- */

/* The events of one message are one etcd revision (a transaction's): taken together. */
/* A policy says how many nodes it selected when applied (clsctl's count): the fleet is at least that big.
 * A node counts the fleet when it lists only, and a fleet that grew since would keep the leases of its
 * first size (and their keepalives) until they expired; this keeps its size current for free. */
static void fleet_size_seen(Fleet *f, const char *name) {
        const Wanted *w = wanted_find(&f->wanted, name);

        if (w && w->fp.selected > f->fleet_size)
                fleet_sized(f, w->fp.selected);
}

static int watch_policies(Fleet *f, const EtcdWatchMessage *msg) {
        uint64_t seen = 0;

        for (size_t i = 0; i < msg->n_events; i++) {
                const char *name = wanted_name_of(f->prefix, &msg->events[i]);
                if (!name)
                        continue;
                if (msg->deleted[i]) {
                        if (!trust_keeps_deleted(f, name, msg->events[i].mod_revision))
                                wanted_gone(&f->wanted, name, msg->events[i].mod_revision);
                } else if (wanted_set(&f->wanted, f->prefix, &msg->events[i], f->node, f->labels,
                                      f->n_labels, &f->facts) < 0)
                        return -ENOMEM;
                else {
                        trust_judge(f, name);
                        fleet_size_seen(f, name);
                }
        }
        /* What this node has seen all of: an event's revision, or a progress notification's (sent to a
         * watch that has caught up). A created answer's header is etcd's revision, not the watch's. */
        for (size_t i = 0; i < msg->n_events; i++)
                seen = MAX(seen, msg->events[i].mod_revision);
        if (msg->n_events == 0 && !msg->created)
                seen = msg->revision;
        if (seen > f->revision)
                f->revision = seen;
        f->status.seen_revision = f->revision;
        return 0;
}

static int watch_rollouts(Fleet *f, const EtcdWatchMessage *msg) {
        for (size_t i = 0; i < msg->n_events; i++) {
                if (rollout_views_set(&f->rollouts, f->prefix, &msg->events[i], msg->deleted[i],
                                      fleet_now(f)) < 0)
                        return -ENOMEM;
                f->rollouts_revision = MAX(f->rollouts_revision, msg->events[i].mod_revision);
        }
        if (msg->n_events == 0 && !msg->created) /* caught up (a progress notification) */
                f->rollouts_revision = MAX(f->rollouts_revision, msg->revision);
        return 0;
}

static void watch_created(Fleet *f, uint64_t id) {
        f->watches_created |= 1u << id;
        f->watching_all = f->status.connected = (f->watches_created & WATCHES_ALL) == WATCHES_ALL;
        if (f->status.connected) {
                f->status.last_error[0] = 0;
                backoff_reset(&f->backoff);
                f->watch_deadline_usec = 0; /* etcd copes: the next stream gets the first deadline */
                (void) sd_event_source_set_enabled(f->watch_check, SD_EVENT_OFF);
        }
}

static void on_watch_message(EtcdAsync *a, json_t *j, void *userdata) {
        Fleet *f = userdata;
        EtcdWatchMessage msg = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        int r = 0;

        (void) a;
        if (etcd_watch_parse(j, &msg, &e) < 0) {
                fleet_lost(f, "%s", strna(e.message));
                return;
        }
        f->stream_failures = 0; /* the stream works */
        if (msg.compact_revision > 0 && msg.watch_id == WATCH_DIFFS) {
                /* the diffs' watch fell behind (a request lives seconds: nothing to read again); it
                 * resumes from the compaction at the stream's next start */
                f->diffs_revision = msg.compact_revision;
                etcd_watch_message_done(&msg);
                return;
        }
        if (msg.compact_revision > 0) {
                log_warning("fleet: the watch from revision %" PRIu64
                            " fell behind a compaction (revision %" PRIu64 "); listing again",
                            f->revision + 1, msg.compact_revision);
                etcd_watch_message_done(&msg);
                etcd_async_stream_stop(f->etcd);
                watch_list(f);
                return;
        }
        /* the diffs' watch refused (etcd names no watch id in a refused create: it is the one not made
         * once the others are) */
        if (msg.canceled && (msg.watch_id == WATCH_DIFFS ||
                             ((msg.watch_id < WATCH_POLICIES || msg.watch_id > WATCH_ROLLOUTS) &&
                              (f->watches_created & WATCHES_ALL) == WATCHES_ALL))) {
                /* its user may not read diffs/: the other watches go on; said once a run */
                if (!f->diffs_denied)
                        log_warning("fleet: node %s cannot read fleet diff requests (%s): it answers none; "
                                    "clsctl fleet rbac %s --apply gives its user what it needs",
                                    f->node, strna(msg.cancel_reason), f->node);
                f->diffs_denied = true;
                etcd_watch_message_done(&msg);
                return;
        }
        if (msg.canceled) {
                /* etcd cancelled a watch for another reason (a token it forgot, a permission taken away):
                 * a login again where it is the token, else the stream again, where it was */
                char why[256];
                snprintf(why, sizeof(why), "etcd cancelled the watch: %s", strna(msg.cancel_reason));
                bool token = msg.cancel_reason && strstr(msg.cancel_reason, "token");
                etcd_watch_message_done(&msg);
                if (token) {
                        etcd_async_forget_token(f->etcd);
                        fleet_lost(f, "%s", why);
                } else
                        stream_again(f, why);
                return;
        }
        if (msg.created && msg.watch_id >= WATCH_POLICIES && msg.watch_id <= WATCH_DIFFS)
                watch_created(f, msg.watch_id);
        log_debug("fleet: watch %" PRIu64 ": %zu event(s)%s", msg.watch_id, msg.n_events,
                  msg.created ? ", created" : "");
        if (msg.watch_id == WATCH_ROLLOUTS) {
                /* rollouts' plans and states: what each node may do now */
                r = watch_rollouts(f, &msg);
                etcd_watch_message_done(&msg);
                if (r < 0)
                        fleet_lost(f, "out of memory");
                else
                        rollout_views_changed(f);
                return;
        }
        if (msg.watch_id == WATCH_DIFFS) {
                for (size_t i = 0; i < msg.n_events; i++) {
                        diff_seen(f, &msg.events[i], msg.deleted[i]);
                        f->diffs_revision = MAX(f->diffs_revision, msg.events[i].mod_revision);
                }
                if (msg.n_events == 0 && !msg.created) /* caught up (a progress notification) */
                        f->diffs_revision = MAX(f->diffs_revision, msg.revision);
                etcd_watch_message_done(&msg);
                return;
        }
        if (msg.watch_id == WATCH_RECORD || msg.watch_id == WATCH_STATUS) {
                /* this node's own keys: they do not move the policies' revision on */
                for (size_t i = 0; i < msg.n_events; i++)
                        status_own_key_seen(f, &msg.events[i], msg.deleted[i]);
                etcd_watch_message_done(&msg);
                return;
        }
        r = watch_policies(f, &msg);
        etcd_watch_message_done(&msg);
        if (r < 0) {
                fleet_lost(f, "out of memory");
                return;
        }
        apply_later(f);
        status_later(f);
}

/* The stream is begun again after a pause drawn from its backoff (from where each watch was: nothing
 * is listed again); after a few in a row that ended without a message, the endpoint is taken for gone. */
static void stream_again(Fleet *f, const char *why) {
        f->status.connected = f->watching_all = false;
        if (++f->stream_failures > STREAM_FAILURES_MAX) {
                fleet_lost(f, "%s", why);
                return;
        }
        f->status.stream_restarts++;
        uint64_t delay = fleet_backoff_next(f);
        log_warning("fleet: %s; the watch begins again in %" PRIu64 " ms (the lease and the policies stay)",
                    why, delay / 1000);
        etcd_async_stream_stop(f->etcd);
        fleet_timer_once(f, &f->stream_retry, delay, NULL);
}

static void on_watch_end(EtcdAsync *a, const char *why, void *userdata) {
        Fleet *f = userdata;
        char s[256];

        (void) a;
        snprintf(s, sizeof(s), "the watch ended: %s", why);
        stream_again(f, s);
}

/* One stream, five watches, each from where it was. */
static char *watch_body(Fleet *f) {
        _cleanup_free_ char *policies = fleet_key(f->prefix, "policies", NULL, NULL),
                            *record = fleet_key(f->prefix, "nodes", f->node, NULL),
                            *status = fleet_key(f->prefix, "status", f->node, ""),
                            *rollouts = fleet_key(f->prefix, "rollouts", NULL, NULL),
                            *diffs = fleet_key(f->prefix, "diffs", NULL, NULL);
        /* (the diffs' from where it was, or from the list: a request written once the node's record was
         * is seen even when the stream begins later) */
        json_t *v[WATCHES] = {
                policies ? etcd_watch_body(policies, true, f->revision + 1, WATCH_POLICIES) : NULL,
                record ? etcd_watch_body(record, false, f->revision + 1, WATCH_RECORD) : NULL,
                status ? etcd_watch_body(status, true, f->revision + 1, WATCH_STATUS) : NULL,
                rollouts ? etcd_watch_body(rollouts, true, f->rollouts_revision + 1, WATCH_ROLLOUTS) : NULL,
                diffs ? etcd_watch_body(diffs, true, MAX(f->diffs_revision, f->revision) + 1, WATCH_DIFFS)
                      : NULL
        };
        char *t[WATCHES] = { NULL }, *out = NULL;

        for (size_t i = 0; i < WATCHES; i++)
                t[i] = v[i] ? json_dumps(v[i], JSON_COMPACT) : NULL;
        if (t[0] && t[1] && t[2] && t[3] && t[4] &&
            asprintf(&out, "%s\n%s\n%s\n%s\n%s\n", t[0], t[1], t[2], t[3], t[4]) < 0)
                out = NULL;
        for (size_t i = 0; i < WATCHES; i++) {
                json_decref(v[i]);
                free(t[i]);
        }
        return out;
}

/* etcd has not made every watch of the stream within its deadline: a busy etcd (the deadline doubles
 * for the next), or a stream that lost part of its request: begun again. */
static int on_watch_check(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *f = userdata;
        char why[128];

        (void) s, (void) usec;
        if (f->state != FLEET_WATCHING || (f->watches_created & WATCHES_ALL) == WATCHES_ALL)
                return 0;
        snprintf(why, sizeof(why), "etcd made only some of the stream's watches within %" PRIu64 " s",
                 f->watch_deadline_usec / 1000000);
        f->watch_deadline_usec = MIN(f->watch_deadline_usec * 2, WATCH_CREATED_MAX_USEC);
        stream_again(f, why);
        return 0;
}

static void stream_begin(Fleet *f) {
        f->watches_created = 0;
        f->watching_all = false;
        f->status.connected = false;
        if (!f->watch_deadline_usec)
                f->watch_deadline_usec = WATCH_CREATED_MIN_USEC;
        if (etcd_async_stream_start(f->etcd, "/v3/watch", watch_body(f), on_watch_message, on_watch_end, f) <
            0)
                fleet_lost(f, "out of memory");
        else
                fleet_timer_once(f, &f->watch_check, f->watch_deadline_usec, on_watch_check);
        f->status.requests = etcd_async_requests(f->etcd);
}

void watch_start(Fleet *f) {
        (void) sd_event_source_set_enabled(f->stream_retry, SD_EVENT_OFF);
        if (f->listed)
                stream_begin(f); /* where it was */
        else
                watch_list(f);
}

static int on_stream_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *f = userdata;

        (void) s, (void) usec;
        if (f->state == FLEET_WATCHING)
                stream_begin(f);
        return 0;
}

int watch_setup(Fleet *f) {
        /* the timers, made now so that fleet_timer_once() has their handlers */
        fleet_timer_once(f, &f->stream_retry, UINT64_MAX / 2, on_stream_retry);
        fleet_timer_once(f, &f->watch_check, UINT64_MAX / 2, on_watch_check);
        (void) sd_event_source_set_enabled(f->stream_retry, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(f->watch_check, SD_EVENT_OFF);
        return f->stream_retry && f->watch_check ? 0 : -ENOMEM;
}

void watch_stop(Fleet *f) {
        etcd_async_stream_stop(f->etcd);
        (void) sd_event_source_set_enabled(f->stream_retry, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(f->watch_check, SD_EVENT_OFF);
}

void watch_free(Fleet *f) {
        diff_free(f);
        sd_event_source_disable_unref(f->stream_retry);
        sd_event_source_disable_unref(f->watch_check);
}
