/* fleet-internal.h: what the fleet's files share: the Fleet, what etcd wants of this node (Wanted), and
 * each part's functions. The parts, from the bottom: wanted.c (the fleet's policies as etcd has them),
 * plan.c (what differs from the daemon, as the next change to apply: pure), own-write.c (whose write a
 * key's revision is), fleet-call.c (a call to etcd; a failure is the connection's), status.c (this
 * node's record and status, and its own keys kept), apply.c (converging the daemon on etcd),
 * session.c (lease, list, watch, keepalive, reconnect), fleet.c (made, started, freed). */
#pragma once

#include "etcd-async.h"
#include "fleet.h"

#define FAILED_RETRY_USEC (5 * 1000 * 1000ULL)
#define FAILED_RETRY_MAX_USEC (300 * 1000 * 1000ULL)

/* A fleet policy as etcd has it. */
typedef struct Wanted {
        char *name;
        uint64_t revision; /* its key's mod_revision */
        FleetPolicy fp;
        bool selected; /* selects this node */
        bool gone; /* deleted in etcd at revision (kept until the daemon has removed it) */
        char *invalid; /* its envelope or JSON is malformed: why */
        char *error; /* applying it at error_revision failed: why */
        uint64_t error_revision;
        uint64_t retry_usec; /* CLOCK_MONOTONIC: when a failed revision is tried again */
        uint64_t retry_delay_usec;
} Wanted;

/* The fleet's policies as last seen in etcd. */
typedef struct WantedSet {
        Wanted *v;
        size_t n;
} WantedSet;

/* The writes of one of this node's own keys: which revision is its last, so that a later one (its watch
 * says) is another writer's. A put not answered yet has no revision: what the watch says meanwhile is
 * judged when it is answered. */
typedef struct OwnWrite {
        unsigned inflight; /* puts not answered yet */
        uint64_t written; /* the revision of the last put answered */
        uint64_t seen; /* a later revision the watch said while a put was under way */
} OwnWrite;

typedef enum FleetState {
        FLEET_IDLE,
        FLEET_CONNECTING, /* lease, record, list */
        FLEET_WATCHING,
} FleetState;

/* The status keys written (status/NODE/POLICY), and what. */
typedef struct Published {
        char **names;
        char **texts;
        OwnWrite *writes;
        size_t n;
} Published;

struct Fleet {
        Manager *m;
        sd_event *event;
        EtcdAsync *etcd;
        char *prefix, *node;
        FleetLabel *labels;
        size_t n_labels;
        unsigned ttl;
        DaemonFleet status; /* what the faces show of the fleet (daemon_set_fleet()) */

        /* session.c */
        FleetState state;
        uint64_t lease;
        uint64_t revision; /* of the last list or watch message */
        bool listed; /* wanted is a snapshot of etcd (not before the first list) */
        uint64_t backoff_usec;
        sd_event_source *retry, *keepalive, *lost;

        /* wanted.c */
        WantedSet wanted;

        /* apply.c */
        bool busy; /* a change (group) is being applied, or an object of it fetched */
        char **group; /* the names the change puts or removes */
        size_t n_group;
        uint64_t group_revision;
        /* the last change that failed, tried again only after a delay (its puts keep theirs too): a
         * removal the daemon keeps refusing does not hold up the changes after it */
        uint64_t failed_revision, failed_retry_usec, failed_delay_usec;
        sd_event_source *kick, *converge_timer;

        /* status.c */
        Published published;
        char *record; /* the node record last written */
        OwnWrite record_write;
        bool own_checked; /* this connection's keys under status/NODE/ were looked at (own_keys_check()) */
        sd_event_source *status_timer;
};

/* ---- wanted.c ---- */
void wanted_clear(WantedSet *s);
Wanted *wanted_find(const WantedSet *s, const char *name);
/* The policy name of a key under PREFIX policies/, or NULL (a key with a NUL in it is no policy's). */
const char *wanted_name_of(const char *prefix, const EtcdKv *kv);
/* The key (of a policy, under prefix) as etcd has it now: parsed, and whether it selects the node. */
int wanted_set(WantedSet *s, const char *prefix, const EtcdKv *kv, const char *node,
               const FleetLabel *labels, size_t n_labels);
/* The policy was deleted in etcd at revision (kept until the daemon has removed it). */
void wanted_gone(WantedSet *s, const char *name, uint64_t revision);
/* A policy deleted in etcd is forgotten once has() says the daemon has none of that name. */
void wanted_forget_gone(WantedSet *s, bool (*has)(const char *name, void *userdata), void *userdata);

/* ---- plan.c: pure ---- */
/* A fleet policy the daemon holds: its name and the etcd revision it was applied at. */
typedef struct FleetHeld {
        const char *name;
        uint64_t revision;
} FleetHeld;

/* One change to apply: a put (of put) or a removal of name, at revision. */
typedef struct Pending {
        const char *name;
        uint64_t revision;
        const Wanted *put; /* NULL: a removal */
} Pending;

/* What converging does next. */
typedef struct FleetStep {
        Pending *changes; /* the next group: every pending change of its revision (n_changes 0: none) */
        size_t n_changes;
        uint64_t retry_usec; /* a blocked group's (UINT64_MAX: none blocked) */
} FleetStep;

/* What differs between etcd (wanted, as last seen at revision) and the daemon (held), by revision: the
 * first group not held back by a retry delay (a failed put's, or failed: the last failed revision's until
 * failed_retry_usec), at now. */
int fleet_plan(const WantedSet *wanted, const FleetHeld *held, size_t n_held, uint64_t revision,
               uint64_t failed_revision, uint64_t failed_retry_usec, uint64_t now, FleetStep *ret);
void fleet_step_done(FleetStep *s);

/* ---- own-write.c: pure ---- */
/* The watch says the key changed at revision: true if another writer did it (after this node's last
 * write, none under way). */
bool own_write_foreign(OwnWrite *w, uint64_t revision);
/* A put was answered at revision: true if another writer changed the key after it (said meanwhile). */
bool own_write_answered(OwnWrite *w, uint64_t revision);

/* ---- fleet-call.c ---- */
/* The connection is lost (why): the session disconnects from the loop and reconnects with backoff. */
void fleet_lost(Fleet *f, const char *fmt, ...) _printf_(2, 3);
/* POSTs body (taken) to path; done gets the answer of a 200 or an error; cancel (may be NULL) is called
 * instead if the connection goes first. Out of memory: the connection is lost. */
void fleet_call(Fleet *f, const char *path, json_t *body, EtcdCallDone done, void (*cancel)(void *),
                void *userdata);
/* A write that needs no answer beyond success (status, record): a failure is the connection's. */
void fleet_on_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata);
uint64_t fleet_now(Fleet *f);
/* A timer source of f's loop (made at first) set to fire once, usec from now. */
void fleet_timer_once(Fleet *f, sd_event_source **s, uint64_t usec, sd_event_time_handler_t handler);

/* ---- status.c ---- */
/* This node's status of its policies, written soon (changes come in bursts) or now. */
void status_later(Fleet *f);
void status_publish(Fleet *f);
/* The node's record (labels, kernel, the revision applied), written when it changed. */
void status_publish_record(Fleet *f);
/* Once a connection has published: keys under status/NODE/ it did not write go. */
void status_own_keys_check(Fleet *f);
/* The watch says one of this node's own keys changed (deleted: went). */
void status_own_key_seen(Fleet *f, const EtcdKv *kv, bool deleted);
/* The connection went: what was published is forgotten (written again on the next). */
void status_reset(Fleet *f);
void status_free(Fleet *f);

/* ---- apply.c ---- */
/* Converges the daemon on what etcd wants, from the loop: soon, or after usec. */
void apply_later(Fleet *f);
void apply_after(Fleet *f, uint64_t usec);
void apply_free(Fleet *f);

/* ---- session.c ---- */
int session_start(Fleet *f);
void session_free(Fleet *f);
