/* session.c: this node's connection to etcd. With an etcd user it authenticates (once: the token is kept
 * until etcd says it knows it no more); it makes sure once that its credentials cannot write the fleet's
 * policies; it holds a lease (kept across a lost connection while etcd still has it; as long as the
 * fleet's size asks, and longer after etcd let one expire: fleet_lease_ttl(); a new one when the fleet
 * grew to ask for twice as long), writes its record under it
 * and keeps it alive; then watch.c reads the fleet. etcd busy is not a lost connection: the client asks
 * again, spaced (etcd-async.h), and what stays unanswered is done again later. A connection is lost only
 * when its endpoint is out of reach (or a part cannot go on): the policies applied stay, and clsd comes
 * back to the next endpoint after a backoff drawn over a window sized by the fleet (a fleet's nodes do
 * not come back at once), to its lease if etcd kept it, and to its watch where it was. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "fleet-io.h"
#include "fleet-rollouts.h"
#include "fleet-session.h"

static void connect_etcd(Fleet *f);

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        connect_etcd(userdata);
        return 0;
}

/* The connection is lost (f->status.last_error says why): everything under way goes, and the next
 * endpoint is tried after a backoff. The lease is kept (etcd may still hold it), and what was published
 * under it (what was still being written is written again). */
static void disconnect(Fleet *f) {
        uint64_t delay = fleet_backoff_next(f);

        if (f->state != FLEET_IDLE)
                log_warning("fleet: %s; the policies applied stay, reconnecting in %" PRIu64 " ms",
                            f->status.last_error, delay / 1000);
        f->state = FLEET_IDLE;
        f->status.connected = f->watching_all = false;
        f->keepalive_pending = false;
        (void) sd_event_source_set_enabled(f->lost, SD_EVENT_OFF);
        status_unsent(f);
        rollout_reset(f);
        etcd_async_cancel_all(f->etcd);
        watch_stop(f);
        (void) sd_event_source_set_enabled(f->keepalive, SD_EVENT_OFF);
        etcd_async_next_endpoint(f->etcd);
        fleet_timer_once(f, &f->retry, delay, on_retry);
}

static void lose(Fleet *f, const char *why) {
        snprintf(f->status.last_error, sizeof(f->status.last_error), "%s", why);
        disconnect(f);
}

/* A call of the connection's making failed: it is made again from the start after a backoff (with a
 * login first, if etcd forgot the token). */
static void connect_failed(Fleet *f, const Error *e) {
        if (e->code == ERROR_ETCD_TOKEN_INVALID)
                etcd_async_forget_token(f->etcd);
        fleet_lost(f, "%s", e->message);
}

static int on_lost(sd_event_source *s, void *userdata) {
        (void) s;
        disconnect(userdata);
        return 0;
}

/* ---- the lease ---- */

/* A new lease: what was under the old one (gone with it) is written again under it. */
static void lease_new(Fleet *f, uint64_t lease) {
        f->lease = lease;
        status_reset(f);
        rollout_republish(f);
}

/* etcd no longer has the lease (it expired while etcd was out of reach or busy): a new one, the node's
 * keys written again under it; the watch and what the node holds stay. */
static void lease_renew(Fleet *f);

/* The seconds a keepalive's (or a grant's) answer says the lease lives; 0: etcd has it no more. */
static unsigned answer_ttl(json_t *answer) {
        json_t *result = json_object_get(answer, "result");
        json_t *ttl = json_object_get(result ?: answer, "TTL");
        long long v = json_is_string(ttl) ? atoll(json_string_value(ttl)) : json_integer_value(ttl);

        return v > 0 ? (unsigned) MIN(v, 3600LL) : 0;
}

/* The fleet grew since the lease was sized (a policy said it selected more nodes than were counted):
 * once its size asks for a lease twice as long, the node takes one, its keys written again under it, and
 * lets the old one lapse. Without it a fleet grown tenfold keeps its first leases' keepalives, ten times
 * what its size asks, until etcd lets them expire under the load. */
static void lease_check_size(Fleet *f) {
        unsigned want = fleet_lease_ttl(f->ttl_configured, f->fleet_size, f->lease_expiries);

        if (f->ttl_configured || !f->lease || want < 2 * f->ttl)
                return;
        log_info("fleet: the fleet has grown to %" PRIu64 " nodes: a lease of %u s instead of %u s",
                 f->fleet_size, want, f->ttl);
        lease_renew(f);
}

static void on_keepalive_answer(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        unsigned ttl = answer_ttl(answer);

        (void) a;
        f->keepalive_pending = false;
        if (e) {
                fleet_call_failed(f, e);
                return;
        }
        if (ttl) {
                f->ttl = f->status.lease_ttl = ttl;
                lease_check_size(f);
                return;
        }
        /* kept alive, and expired all the same: etcd answered too late. The next lease is longer (fewer
         * keepalives from every node that saw the same), not a faster retry */
        f->lease_expiries++;
        log_warning("fleet: the lease %" PRIu64 " expired; a new one of %u s", f->lease,
                    fleet_lease_ttl(f->ttl_configured, f->fleet_size, f->lease_expiries));
        lease_renew(f);
}

static int on_keepalive(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *f = userdata;
        char id[32];

        (void) sd_event_source_set_time(s, usec + f->ttl * 1000000ULL / 3);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        /* connected is etcd answering: a silence longer than a keepalive's interval says otherwise (the
         * next answer says connected again, watch.c) */
        if (fleet_now(f) - MIN(f->last_contact_usec, fleet_now(f)) > f->ttl * 1000000ULL / 3 + 1000000ULL)
                f->status.connected = false;
        /* one at a time: a busy etcd's keepalive is asked again by the client, not doubled here */
        if (f->keepalive_pending || !f->lease)
                return 0;
        f->keepalive_pending = true;
        snprintf(id, sizeof(id), "%" PRIu64, f->lease);
        fleet_call(f, "/v3/lease/keepalive", json_pack("{s:s}", "ID", id), on_keepalive_answer, NULL, f);
        return 0;
}

static void keepalive_start(Fleet *f) {
        uint64_t next = fleet_now(f) + f->ttl * 1000000ULL / 3;

        if (!f->keepalive)
                (void) sd_event_add_time(f->event, &f->keepalive, CLOCK_MONOTONIC, next, 0, on_keepalive, f);
        else {
                (void) sd_event_source_set_time(f->keepalive, next);
                (void) sd_event_source_set_enabled(f->keepalive, SD_EVENT_ON);
        }
}

/* The lease is there: the record and statuses written (those not under it yet), kept alive, and the
 * fleet read (watch.c: listed once, then watched from where it was). */
static void lease_ready(Fleet *f) {
        status_publish_record(f);
        status_later(f);
        keepalive_start(f);
        if (f->listed) {
                f->state = FLEET_WATCHING;
                watch_start(f);
                rollout_tick(f); /* what it could not say while away (its steps) */
        } else
                watch_start(f);
}

static void on_granted(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        json_t *id = json_object_get(answer, "ID");
        uint64_t lease = json_is_string(id) ? strtoull(json_string_value(id), NULL, 10) : 0;

        (void) a;
        if (e) {
                connect_failed(f, e);
                return;
        }
        if (!lease) {
                fleet_lost(f, "etcd granted no lease");
                return;
        }
        f->ttl = f->status.lease_ttl = answer_ttl(answer) ?: f->ttl;
        lease_new(f, lease);
        if (f->state == FLEET_CONNECTING)
                lease_ready(f);
        else {
                status_publish_record(f);
                status_later(f);
                rollout_tick(f);
        }
}

static void grant_sized(Fleet *f) {
        unsigned ttl = fleet_lease_ttl(f->ttl_configured, f->fleet_size, f->lease_expiries);

        fleet_call(f, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t) ttl), on_granted, NULL, f);
}

static void on_counted(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;

        (void) a;
        if (e) {
                connect_failed(f, e);
                return;
        }
        fleet_sized(f, etcd_range_count(answer));
        grant_sized(f);
}

/* A new lease, as long as the fleet's size asks: counted first when this run has not listed yet (one
 * range that only counts the nodes' records). */
static void grant(Fleet *f) {
        _cleanup_free_ char *nodes = NULL;
        json_t *body;

        if (f->sized || f->ttl_configured) {
                grant_sized(f);
                return;
        }
        nodes = fleet_key(f->prefix, "nodes", NULL, NULL);
        body = nodes ? etcd_count_body(nodes) : NULL;
        if (!body) {
                fleet_lost(f, "out of memory");
                return;
        }
        fleet_call(f, "/v3/kv/range", body, on_counted, NULL, f);
}

static void lease_renew(Fleet *f) {
        if (!f->lease)
                return; /* (a grant is under way) */
        f->lease = 0;
        f->status.lease_renewals++;
        grant(f);
}

/* A connection back: the lease it had, if etcd still has it (nothing to write again under a new one). */
static void on_lease_checked(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        unsigned ttl = answer_ttl(answer);

        (void) a;
        if (e) {
                connect_failed(f, e);
                return;
        }
        if (!ttl) {
                f->lease = 0;
                grant(f);
                return;
        }
        f->ttl = f->status.lease_ttl = ttl;
        lease_ready(f);
}

static void lease_take(Fleet *f) {
        char id[32];

        if (!f->lease) {
                grant(f);
                return;
        }
        snprintf(id, sizeof(id), "%" PRIu64, f->lease);
        fleet_call(f, "/v3/lease/keepalive", json_pack("{s:s}", "ID", id), on_lease_checked, NULL, f);
}

/* ---- who this node is to etcd ---- */

/* Whether this node's credentials could write the fleet's policies: etcd checks a transaction's put
 * even when its compare keeps it from being made. A node that can is refused: whoever took it could
 * rewrite every host (--fleet-allow-writer lets it run all the same). Asked once per run of clsd (and
 * again after authenticating anew). */
static void on_probed(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        const char *user = etcd_async_user(a);

        (void) answer;
        if (e && e->code != ERROR_ETCD_PERMISSION_DENIED) {
                connect_failed(f, e);
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
        f->probed = true;
        lease_take(f);
}

static void probe(Fleet *f) {
        _cleanup_free_ char *key = fleet_key(f->prefix, "policies", NULL, NULL);
        json_t *body = key ? etcd_write_probe_body(key) : NULL;

        if (!body) {
                fleet_lost(f, "out of memory");
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
        f->status.authentications++;
        f->probed = false; /* (its credentials may have changed: a password file read again) */
        probe(f);
}

static void connect_etcd(Fleet *f) {
        if (f->state != FLEET_IDLE)
                return;
        f->state = FLEET_CONNECTING;
        f->status.reconnects += f->listed || f->status.last_error[0];
        snprintf(f->status.endpoint, sizeof(f->status.endpoint), "%s", etcd_async_endpoint(f->etcd));
        /* a user's token is asked for once (bcrypt costs etcd tens of milliseconds a login: a fleet that
         * logged in at every connection would make etcd's comeback its own storm), and again when etcd
         * says it no longer knows it */
        if (etcd_async_user(f->etcd) && !etcd_async_has_token(f->etcd)) {
                if (etcd_async_authenticate(f->etcd, on_authenticated, NULL, f) < 0)
                        lose(f, "out of memory");
        } else if (!f->probed)
                probe(f);
        else
                lease_take(f);
        f->status.requests = etcd_async_requests(f->etcd);
}

/* What stayed unanswered while etcd was busy (fleet_call_failed()), done again. */
static int on_resync(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *f = userdata;

        (void) s, (void) usec;
        if (f->state != FLEET_WATCHING)
                return 0;
        /* a write found no lease: asked whether etcd has it (a write of an older lease's may have come
         * back late), renewed if not */
        if (f->lease_lost && f->lease && !f->keepalive_pending)
                (void) on_keepalive(f->keepalive, fleet_now(f), f);
        f->lease_lost = false;
        status_later(f);
        rollout_tick(f);
        fleet_converge_soon(f);
        return 0;
}

int session_start(Fleet *f) {
        int r = sd_event_add_defer(f->event, &f->lost, on_lost, f);

        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(f->lost, SD_EVENT_OFF);
        fleet_timer_once(f, &f->resync, UINT64_MAX / 2, on_resync);
        if (!f->resync)
                return -ENOMEM;
        (void) sd_event_source_set_enabled(f->resync, SD_EVENT_OFF);
        r = watch_setup(f);
        if (r < 0)
                return r;
        connect_etcd(f);
        return 0;
}

void session_free(Fleet *f) {
        watch_free(f);
        sd_event_source_disable_unref(f->retry);
        sd_event_source_disable_unref(f->resync);
        sd_event_source_disable_unref(f->keepalive);
        sd_event_source_disable_unref(f->lost);
}
