/* session.c: this node's connection to etcd. With an etcd user it authenticates first; each connection
 * makes sure its credentials cannot write the fleet's policies. It takes a lease, writes its record under
 * it, lists the fleet policies at one revision and watches from the next (one stream: the policies, and
 * this node's own keys), keeping the lease alive; whatever goes wrong (an answer, the watch, a part's
 * call) loses the connection: the policies applied stay, and clsd reconnects with backoff to the next
 * endpoint, lists again (or watches on where it was) and converges on what changed meanwhile. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"

#define BACKOFF_MIN_USEC (250 * 1000ULL)
#define BACKOFF_MAX_USEC (8 * 1000 * 1000ULL)

/* The watches of the one /v3/watch stream: the fleet's policies, and this node's own keys (its record,
 * its status), which another writer may change or delete: they are written again. */
enum {
        WATCH_POLICIES = 1,
        WATCH_RECORD = 2,
        WATCH_STATUS = 3,
        WATCH_ROLLOUTS = 4,
        WATCHES_ALL = (1u << WATCH_POLICIES) | (1u << WATCH_RECORD) | (1u << WATCH_STATUS) |
                      (1u << WATCH_ROLLOUTS),
};

/* A stream whose watches are not all made this long after it began is begun again. */
#define WATCH_CREATED_USEC (5 * 1000000ULL)

static void connect_etcd(Fleet *f);
static void list(Fleet *f);
static void on_rollouts_listed(EtcdAsync *a, json_t *answer, const Error *e, void *userdata);

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        connect_etcd(userdata);
        return 0;
}

/* The connection is lost (f->status.last_error says why): everything under way goes, and the next
 * endpoint is tried after a backoff. */
static void disconnect(Fleet *f) {
        f->backoff_usec = f->backoff_usec ? MIN(f->backoff_usec * 2, BACKOFF_MAX_USEC) : BACKOFF_MIN_USEC;
        /* from half to all of the backoff: after an outage, a fleet's nodes do not come back at once */
        uint64_t delay = f->backoff_usec / 2 + (uint64_t) random() % (f->backoff_usec / 2 + 1);
        if (f->state != FLEET_IDLE)
                log_warning("fleet: %s; the policies applied stay, reconnecting in %" PRIu64 " ms",
                            f->status.last_error, delay / 1000);
        f->state = FLEET_IDLE;
        f->status.connected = false;
        f->lease = 0;
        (void) sd_event_source_set_enabled(f->lost, SD_EVENT_OFF);
        status_reset(f);
        rollout_reset(f);
        etcd_async_cancel_all(f->etcd);
        (void) sd_event_source_set_enabled(f->keepalive, SD_EVENT_OFF);
        etcd_async_next_endpoint(f->etcd);
        fleet_timer_once(f, &f->retry, delay, on_retry);
}

static void lose(Fleet *f, const char *why) {
        snprintf(f->status.last_error, sizeof(f->status.last_error), "%s", why);
        disconnect(f);
}

static int on_lost(sd_event_source *s, void *userdata) {
        (void) s;
        disconnect(userdata);
        return 0;
}

/* ---- the lease ---- */

static void on_keepalive_answer(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        json_t *result = json_object_get(answer, "result");
        json_t *ttl = json_object_get(result ?: answer, "TTL");

        (void) a;
        if (e)
                lose(f, e->message);
        else if (!ttl || (json_is_string(ttl) && atoll(json_string_value(ttl)) <= 0)) {
                char why[64];
                snprintf(why, sizeof(why), "the lease %" PRIu64 " expired", f->lease);
                lose(f, why);
        }
}

static int on_keepalive(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *f = userdata;
        char id[32];

        snprintf(id, sizeof(id), "%" PRIu64, f->lease);
        fleet_call(f, "/v3/lease/keepalive", json_pack("{s:s}", "ID", id), on_keepalive_answer, NULL, f);
        (void) sd_event_source_set_time(s, usec + f->ttl * 1000000ULL / 3);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

/* ---- the watch ---- */

/* The events of one message are one etcd revision (a transaction's): taken together. */
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
                else
                        trust_judge(f, name);
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

static void on_watch_message(EtcdAsync *a, json_t *j, void *userdata) {
        Fleet *f = userdata;
        EtcdWatchMessage msg = { 0 };
        Error e = ERROR_NULL;

        (void) a;
        if (etcd_watch_parse(j, &msg, &e) < 0) {
                lose(f, strna(e.message));
                error_done(&e);
                return;
        }
        if (msg.compact_revision > 0 || msg.canceled) {
                log_warning("fleet: the watch from revision %" PRIu64
                            " fell behind a compaction (revision %" PRIu64 "); listing again",
                            f->revision + 1, msg.compact_revision);
                etcd_watch_message_done(&msg);
                etcd_async_stream_stop(f->etcd);
                list(f);
                return;
        }
        if (msg.created && msg.watch_id >= WATCH_POLICIES && msg.watch_id <= WATCH_ROLLOUTS) {
                f->watches_created |= 1u << msg.watch_id;
                f->status.connected = f->watches_created == WATCHES_ALL;
                if (f->status.connected) {
                        f->status.last_error[0] = 0;
                        f->backoff_usec = 0;
                }
        }
        log_debug("fleet: watch %" PRIu64 ": %zu event(s)%s", msg.watch_id, msg.n_events,
                  msg.created ? ", created" : "");
        if (msg.watch_id == WATCH_ROLLOUTS) {
                /* rollouts' plans and states: what each node may do now */
                for (size_t i = 0; i < msg.n_events; i++) {
                        if (rollout_views_set(&f->rollouts, f->prefix, &msg.events[i], msg.deleted[i],
                                              fleet_now(f)) < 0) {
                                etcd_watch_message_done(&msg);
                                lose(f, "out of memory");
                                return;
                        }
                        f->rollouts_revision = MAX(f->rollouts_revision, msg.events[i].mod_revision);
                }
                if (msg.n_events == 0 && !msg.created) /* caught up (a progress notification) */
                        f->rollouts_revision = MAX(f->rollouts_revision, msg.revision);
                etcd_watch_message_done(&msg);
                rollout_views_changed(f);
                return;
        }
        if (msg.watch_id == WATCH_RECORD || msg.watch_id == WATCH_STATUS) {
                /* this node's own keys: they do not move the policies' revision on */
                for (size_t i = 0; i < msg.n_events; i++)
                        status_own_key_seen(f, &msg.events[i], msg.deleted[i]);
                etcd_watch_message_done(&msg);
                return;
        }
        int r = watch_policies(f, &msg);
        etcd_watch_message_done(&msg);
        if (r < 0) {
                lose(f, "out of memory");
                return;
        }
        apply_later(f);
        status_later(f);
}

static void on_watch_end(EtcdAsync *a, const char *why, void *userdata) {
        Fleet *f = userdata;
        char s[256];

        (void) a;
        snprintf(s, sizeof(s), "the watch ended: %s", why);
        lose(f, s);
}

/* One stream, four watches (one JSON text each): the policies, this node's record, its status keys, the
 * rollouts' plans and states. */
static char *watch_body(Fleet *f) {
        _cleanup_free_ char *policies = fleet_key(f->prefix, "policies", NULL, NULL),
                            *record = fleet_key(f->prefix, "nodes", f->node, NULL),
                            *status = fleet_key(f->prefix, "status", f->node, ""),
                            *rollouts = fleet_key(f->prefix, "rollouts", NULL, NULL);
        json_t *v[4] = { policies ? etcd_watch_body(policies, true, f->revision + 1, WATCH_POLICIES) : NULL,
                         record ? etcd_watch_body(record, false, f->revision + 1, WATCH_RECORD) : NULL,
                         status ? etcd_watch_body(status, true, f->revision + 1, WATCH_STATUS) : NULL,
                         rollouts ? etcd_watch_body(rollouts, true, f->rollouts_revision + 1, WATCH_ROLLOUTS)
                                  : NULL };
        char *t[4] = { NULL }, *out = NULL;

        for (size_t i = 0; i < 4; i++)
                t[i] = v[i] ? json_dumps(v[i], JSON_COMPACT) : NULL;
        if (t[0] && t[1] && t[2] && t[3] && asprintf(&out, "%s\n%s\n%s\n%s\n", t[0], t[1], t[2], t[3]) < 0)
                out = NULL;
        for (size_t i = 0; i < 4; i++) {
                json_decref(v[i]);
                free(t[i]);
        }
        return out;
}

static int on_watch_check(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *f = userdata;

        (void) s, (void) usec;
        if (f->state == FLEET_WATCHING && f->watches_created != WATCHES_ALL)
                lose(f, "etcd made only some of the stream's watches");
        return 0;
}

static void start_watch(Fleet *f) {
        f->watches_created = 0;
        if (etcd_async_stream_start(f->etcd, "/v3/watch", watch_body(f), on_watch_message, on_watch_end, f) <
            0)
                lose(f, "out of memory");
        else
                fleet_timer_once(f, &f->watch_check, WATCH_CREATED_USEC, on_watch_check);
        f->status.requests = etcd_async_requests(f->etcd);
}

/* ---- list, lease, connect ---- */

static void on_listed(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        EtcdKv *kvs = NULL;
        size_t n = 0;
        uint64_t revision = 0;
        Error e2 = ERROR_NULL;

        (void) a;
        if (e) {
                lose(f, e->message);
                return;
        }
        if (etcd_range_parse(answer, &kvs, &n, &revision, &e2) < 0) {
                lose(f, strna(e2.message));
                error_done(&e2);
                return;
        }
        /* What failed before is tried again against this snapshot. */
        wanted_clear(&f->wanted);
        for (size_t i = 0; i < n; i++)
                if (wanted_set(&f->wanted, f->prefix, &kvs[i], f->node, f->labels, f->n_labels, &f->facts) <
                    0) {
                        etcd_kvs_free(kvs, n);
                        lose(f, "out of memory");
                        return;
                } else {
                        const char *name = wanted_name_of(f->prefix, &kvs[i]);
                        if (name)
                                trust_judge(f, name);
                }
        etcd_kvs_free(kvs, n);
        trust_keep_unlisted(f, revision);
        f->revision = revision;
        /* the rollouts at the same revision, then the watch from the next */
        _cleanup_free_ char *rollouts = fleet_key(f->prefix, "rollouts", NULL, NULL);
        json_t *body = rollouts ? etcd_range_body(rollouts, true) : NULL;
        char rev[32];
        snprintf(rev, sizeof(rev), "%" PRIu64, revision);
        if (!body || json_object_set_new(body, "revision", json_string(rev)) < 0) {
                json_decref(body);
                lose(f, "out of memory");
                return;
        }
        fleet_call(f, "/v3/kv/range", body, on_rollouts_listed, NULL, f);
}

static void on_rollouts_listed(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        EtcdKv *kvs = NULL;
        size_t n = 0;
        Error e2 = ERROR_NULL;

        (void) a;
        if (e) {
                lose(f, e->message);
                return;
        }
        if (etcd_range_parse(answer, &kvs, &n, NULL, &e2) < 0) {
                lose(f, strna(e2.message));
                error_done(&e2);
                return;
        }
        rollout_views_clear(&f->rollouts);
        for (size_t i = 0; i < n; i++)
                if (rollout_views_set(&f->rollouts, f->prefix, &kvs[i], false, fleet_now(f)) < 0) {
                        etcd_kvs_free(kvs, n);
                        lose(f, "out of memory");
                        return;
                }
        etcd_kvs_free(kvs, n);
        f->rollouts_revision = f->revision; /* read at the policies' revision */
        f->listed = true;
        f->state = FLEET_WATCHING;
        f->status.seen_revision = f->revision;
        log_info("fleet: %zu fleet policies, %zu rollouts at revision %" PRIu64 " (%s)", f->wanted.n,
                 f->rollouts.n, f->revision, etcd_async_endpoint(f->etcd));
        start_watch(f);
        apply_later(f);
        status_later(f);
        rollout_views_changed(f);
}

static void list(Fleet *f) {
        _cleanup_free_ char *prefix = fleet_key(f->prefix, "policies", NULL, NULL);

        if (!prefix) {
                lose(f, "out of memory");
                return;
        }
        fleet_call(f, "/v3/kv/range", etcd_range_body(prefix, true), on_listed, NULL, f);
}

static void on_granted(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        json_t *id = json_object_get(answer, "ID");
        uint64_t now = fleet_now(f);

        (void) a;
        if (e) {
                lose(f, e->message);
                return;
        }
        f->lease = json_is_string(id) ? strtoull(json_string_value(id), NULL, 10) : 0;
        if (!f->lease) {
                lose(f, "etcd granted no lease");
                return;
        }
        status_publish_record(f);
        status_later(f);
        if (!f->keepalive)
                (void) sd_event_add_time(f->event, &f->keepalive, CLOCK_MONOTONIC,
                                         now + f->ttl * 1000000ULL / 3, 0, on_keepalive, f);
        else {
                (void) sd_event_source_set_time(f->keepalive, now + f->ttl * 1000000ULL / 3);
                (void) sd_event_source_set_enabled(f->keepalive, SD_EVENT_ON);
        }
        /* After a lost connection the watch resumes where it was (a compaction since: listed again). */
        if (f->listed) {
                f->state = FLEET_WATCHING;
                start_watch(f);
                rollout_tick(f); /* what it could not say while away (its steps) */
        } else
                list(f);
}

/* Whether this node's credentials could write the fleet's policies: etcd checks a transaction's put
 * even when its compare keeps it from being made. A node that can is refused: whoever took it could
 * rewrite every host (--fleet-allow-writer lets it run all the same). */
static void on_probed(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        const char *user = etcd_async_user(a);

        (void) answer;
        if (e && !streq(e->code, ETCD_PERMISSION_DENIED)) {
                lose(f, e->message);
                return;
        }
        if (!e && !f->allow_writer) {
                log_error("fleet: node %s: %s can write the fleet's policies (%spolicies/): a node that can "
                          "rewrite the fleet is a single point of compromise. Give it a node's own etcd "
                          "user (clsctl fleet rbac), or start it with --fleet-allow-writer",
                          f->node, user ? user : "etcd without authentication", f->prefix);
                (void) sd_event_exit(f->event, -EPERM);
                return;
        }
        if (!e && !f->writer_said) {
                log_warning("fleet: node %s: %s can write the fleet's policies (allowed by "
                            "--fleet-allow-writer)",
                            f->node, user ? user : "etcd without authentication");
                f->writer_said = true;
        }
        fleet_call(f, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t) f->ttl), on_granted, NULL,
                   f);
}

static void probe(Fleet *f) {
        _cleanup_free_ char *key = fleet_key(f->prefix, "policies", NULL, NULL);
        json_t *body = key ? etcd_write_probe_body(key) : NULL;

        if (!body) {
                lose(f, "out of memory");
                return;
        }
        fleet_call(f, "/v3/kv/txn", body, on_probed, NULL, f);
}

static void on_authenticated(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;

        (void) answer;
        if (e) {
                fleet_lost(f, "etcd user %s: %s", etcd_async_user(a), e->message);
                return;
        }
        probe(f);
}

static void connect_etcd(Fleet *f) {
        if (f->state != FLEET_IDLE)
                return;
        f->state = FLEET_CONNECTING;
        f->status.reconnects += f->listed || f->status.last_error[0];
        snprintf(f->status.endpoint, sizeof(f->status.endpoint), "%s", etcd_async_endpoint(f->etcd));
        /* with a user: a token first (each connection asks anew: etcd forgets tokens after a while) */
        if (etcd_async_user(f->etcd)) {
                if (etcd_async_authenticate(f->etcd, on_authenticated, NULL, f) < 0)
                        lose(f, "out of memory");
                f->status.requests = etcd_async_requests(f->etcd);
        } else
                probe(f);
}

int session_start(Fleet *f) {
        int r = sd_event_add_defer(f->event, &f->lost, on_lost, f);

        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(f->lost, SD_EVENT_OFF);
        connect_etcd(f);
        return 0;
}

void session_free(Fleet *f) {
        sd_event_source_disable_unref(f->watch_check);
        sd_event_source_disable_unref(f->retry);
        sd_event_source_disable_unref(f->keepalive);
        sd_event_source_disable_unref(f->lost);
}
