/* fleet-internal.h: what the fleet's files share: the Fleet, what etcd wants of this node (Wanted), and
 * each part's functions. The parts, from the bottom: wanted.c (the fleet's policies as etcd has them),
 * trust.c (with --fleet-require-signed: a policy's signature and serial taken or refused), plan.c (what
 * differs from the daemon, as the next change to apply: pure), own-write.c (whose write a key's revision
 * is), fleet-call.c (a call to etcd, its failure, the backoff), rollouts.c (the fleet's rollouts
 * as etcd has them), node-rollouts.c (this node's part in each, kept on disk), rollout-wave.c (its
 * steps written, a wave judged, the state moved on), rollout.c (what the node holds for a rollout: its
 * wave, its hold, its dead-man switch), status.c (this node's record and status, and its own keys
 * kept), apply.c (converging the daemon on etcd), watch.c (list and watch), session.c (login, lease,
 * keepalive, reconnect), fleet.c (made, started, freed). */
#pragma once

#include "backoff.h"
#include "etcd-async.h"
#include "etcd-rollout.h"
#include "fleet.h"
#include "daemon-fleet.h"
#include "daemon-objects.h"

#define FAILED_RETRY_USEC (5 * 1000 * 1000ULL)
#define FAILED_RETRY_MAX_USEC (300 * 1000 * 1000ULL)

/* What this node is to hold of a wanted policy (rollout.c decides it for a policy that rolls out). */
typedef enum Desire {
        DESIRE_ETCD, /* its revision in etcd, if it selects this node */
        DESIRE_KEEP, /* whatever the daemon holds now (its wave has not come) */
        DESIRE_BODY, /* body at revision (a revision it held before; NULL body: none) */
} Desire;

/* A fleet policy as etcd has it. */
typedef struct Wanted {
        char *name;
        uint64_t revision; /* its key's mod_revision */
        FleetPolicy fp;
        bool selected; /* selects this node */
        bool gone; /* deleted in etcd at revision (kept until the daemon has removed it) */
        char *invalid; /* its envelope or JSON is malformed: why */
        char *ineligible; /* selected, but the kernel gates keep this node out: why */
        char *refused; /* --fleet-require-signed: its signature or serial is not taken (trust.c): why */
        char *error; /* applying it at error_revision failed: why */
        uint64_t error_revision;
        uint64_t retry_usec; /* CLOCK_MONOTONIC: when a failed revision is tried again */
        Backoff retry; /* its failures in a row */
        Desire desire; /* set before each converge (rollout_desire()) */
        uint64_t desire_revision;
        json_t *desire_body; /* borrowed */
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

/* A rollout as etcd has it (rollouts.c). */
typedef struct RolloutView {
        char *policy;
        char id[FLEET_ROLLOUT_ID_MAX + 1];
        bool has_plan;
        FleetRolloutPlan plan;
        FleetRolloutState state; /* wave 0, progressing, until its key is written */
        uint64_t state_revision; /* the state key's mod_revision (0: none yet): a transition compares it */
        uint64_t plan_created_usec; /* CLOCK_MONOTONIC when this node first saw the plan */
} RolloutView;

typedef struct RolloutViews {
        RolloutView *v;
        size_t n;
} RolloutViews;

/* This node's part in a rollout of one policy (rollout.c): kept across restarts (what it held before,
 * whether it reverted), and its step. */
typedef struct NodeRollout {
        char *policy;
        char id[FLEET_ROLLOUT_ID_MAX + 1];
        uint64_t to_revision; /* the revision the rollout brings */
        uint64_t from_revision; /* what this node held before it (0: none) */
        json_t *from_body; /* its policy, as the daemon took it (NULL: none) */
        bool reverted; /* its dead-man switch went back to from: it stays there */
        bool rolled_back; /* the rollout halted: back to from */
        bool committed; /* its wave was confirmed: the dead-man switch is off */
        int wave; /* in the plan (-1: not in it) */
        uint64_t confirm_usec; /* the plan's: the dead-man switch works before etcd is read again */
        char why[256];
        /* not kept */
        uint64_t hold_from_usec; /* CLOCK_MONOTONIC: applied, connected since (0: not applied) */
        double *samples; /* the health checks' readings at hold_from_usec */
        bool step_set;
        FleetNodeStep step;
        char step_why[256];
        bool publishing; /* a step's transaction is under way: the next waits for its answer (two under way
                          * could land in either order) */
        bool published_set; /* the step etcd has (under the current lease) */
        FleetNodeStep published;
        bool evaluated; /* the wave was looked at after the step was published */
} NodeRollout;

typedef struct NodeRollouts {
        NodeRollout *v;
        size_t n;
} NodeRollouts;

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

typedef struct DiffJob DiffJob; /* diff.c */
/* A fleet diff request's id, at most this long; the last requests answered a node remembers. */
#define FLEET_DIFF_ID_MAX 64
#define FLEET_DIFF_ANSWERED_MAX 8

struct Fleet {
        Manager *m;
        sd_event *event;
        EtcdAsync *etcd;
        char *prefix, *node;
        char *advertise; /* --advertise, or NULL */
        FleetLabel *labels;
        size_t n_labels;
        unsigned ttl_configured; /* --fleet-lease-ttl, or 0: sized (fleet_lease_ttl()) */
        unsigned ttl; /* the lease's, as etcd granted it (a third of it between keepalives) */
        unsigned lease_expiries; /* leases etcd let expire while this node kept them alive */
        bool sized; /* the fleet's size is known (counted or listed in this run) */
        char kernel[65];
        FleetNodeFacts facts; /* the kernel's, for the selectors' gates (set at the start) */
        DaemonFleet status; /* what the faces show of the fleet (daemon_set_fleet()) */

        /* session.c */
        bool allow_writer; /* --fleet-allow-writer */
        bool require_signed; /* --fleet-require-signed: by one of trusted_keys */
        const TrustedKeys *trusted_keys;
        json_t *accepted; /* trust.c: per policy, the highest serial accepted and its text's digest */
        bool writer_said; /* that its credentials can write policies was logged */
        FleetState state;
        uint64_t lease;
        uint64_t revision; /* of the last list or policies' watch message */
        uint64_t
                rollouts_revision; /* the rollouts' watch's: each watch of the stream resumes from its own */
        bool listed; /* wanted is a snapshot of etcd (not before the first list) */
        bool probed; /* its credentials were found unable to write policies (once a run, and after a login)
                      */
        bool keepalive_pending;
        bool lease_lost; /* a write found the lease gone: a new one (session.c) */
        Backoff backoff; /* the comebacks after a lost connection (fleet_backoff_next()) */
        uint64_t fleet_size; /* nodes with a record at the last list, or the most a policy said it selected
                                since: it sizes the backoffs and the lease */
        sd_event_source *retry, *keepalive, *lost, *resync;

        /* watch.c */
        unsigned watches_created; /* the stream's watches etcd said it made (a bit each) */
        bool watching_all; /* all of them */
        uint64_t watch_deadline_usec; /* how long etcd may take to make them (doubling while it is slow) */
        unsigned stream_failures; /* streams that ended in a row without a message */
        sd_event_source *watch_check, *stream_retry;

        /* wanted.c */
        WantedSet wanted;

        /* diff.c: the request being answered, and the next one (the newest); the last ones answered */
        DiffJob *diff, *diff_next;
        char diff_answered[FLEET_DIFF_ANSWERED_MAX][FLEET_DIFF_ID_MAX + 1];
        bool diffs_denied; /* its etcd user may not read diffs/ (made before them): said once */
        uint64_t diffs_revision; /* the diffs' watch's: where it resumes */

        /* apply.c */
        bool busy; /* a change (group) is being applied, or an object of it fetched */
        char **group; /* the names the change puts or removes */
        size_t n_group;
        uint64_t group_revision;
        /* the last change that failed, tried again only after a delay (its puts keep theirs too): a
         * removal the daemon keeps refusing does not hold up the changes after it */
        uint64_t failed_revision, failed_retry_usec;
        Backoff failed;
        sd_event_source *kick, *converge_timer;

        /* rollouts.c, rollout.c */
        RolloutViews rollouts;
        NodeRollouts mine;
        uint64_t last_contact_usec; /* CLOCK_MONOTONIC: etcd's last answer */
        uint64_t last_ping_usec; /* CLOCK_MONOTONIC: asked while a dead-man switch is armed */
        bool ping_pending;
        uint64_t connected_usec; /* CLOCK_MONOTONIC: the watch of this connection began (0: none) */
        sd_event_source *deadman, *hold_timer, *wave_timer, *plan_timer, *ping_timer;

        /* status.c */
        Published published;
        char *record; /* the node record last written */
        OwnWrite record_write;
        bool own_checked; /* this connection's keys under status/NODE/ were looked at (own_keys_check()) */
        bool publishing, publish_again; /* a publish's transaction under way; another asked for meanwhile */
        uint64_t publishing_lease; /* the lease it writes under */
        sd_event_source *status_timer, *status_kick;
};

/* ---- apply.c: what a diff shares with an apply ---- */
/* The range (serializable) of an object's key and its signature's (objects/DIGEST, .sig). */
json_t *fleet_object_range(const char *key);
/* The object want, from that range's answer, checked against its digest and handed to the daemon's store
 * with its signature: done() is then called as daemon_object_add() calls it; <0 (and no call): it is not
 * there, or not what its digest says. */
int fleet_object_store(Fleet *f, const char *want, json_t *answer, DaemonObjectDoneFunc done, void *userdata,
                       Error *reterr);

/* ---- diff.c: clsctl fleet diff's requests (diffs/ID), answered by this node (diff-answers/NODE/ID) ---- */
/* A request's key changed (put, or deleted: this node's answer goes too). */
void diff_seen(Fleet *f, const EtcdKv *kv, bool deleted);
void diff_free(Fleet *f);

/* ---- wanted.c ---- */
void wanted_clear(WantedSet *s);
Wanted *wanted_find(const WantedSet *s, const char *name);
/* The policy name of a key under PREFIX policies/, or NULL (a key with a NUL in it is no policy's). */
const char *wanted_name_of(const char *prefix, const EtcdKv *kv);
/* The key (of a policy, under prefix) as etcd has it now: parsed, and whether it selects the node (by its
 * name and labels, and by its facts for the kernel gates: NULL, none checked). */
int wanted_set(WantedSet *s, const char *prefix, const EtcdKv *kv, const char *node,
               const FleetLabel *labels, size_t n_labels, const FleetNodeFacts *facts);
/* The rollout id of a wanted policy's revision ("" without a rollout; "r" + the revision when its
 * writer gave none). */
const char *wanted_rollout_id(const Wanted *w, char buf[FLEET_ROLLOUT_ID_MAX + 1]);
/* A wanted entry for a policy etcd no longer has that the node keeps (held at revision, refused set by
 * the caller): -ENOMEM, or 0. */
int wanted_add_kept(WantedSet *s, const char *name, uint64_t revision);
/* The policy was deleted in etcd at revision (kept until the daemon has removed it). */
void wanted_gone(WantedSet *s, const char *name, uint64_t revision);
/* A policy deleted in etcd is forgotten once has() says the daemon has none of that name. */
void wanted_forget_gone(WantedSet *s, bool (*has)(const char *name, void *userdata), void *userdata);

/* ---- own-write.c: pure ---- */
/* The watch says the key changed at revision: true if another writer did it (after this node's last
 * write, none under way). */
bool own_write_foreign(OwnWrite *w, uint64_t revision);
/* A put was answered at revision: true if another writer changed the key after it (said meanwhile). */
bool own_write_answered(OwnWrite *w, uint64_t revision);

/* ---- trust.c ---- */
/* With --fleet-require-signed: whether the wanted policy name may be applied (its refused set or
 * cleared); a higher serial accepted is kept on disk. */
void trust_judge(Fleet *f, const char *name);
/* The key of policy name was deleted at revision: true if this node keeps it all the same (it requires
 * signed policies, and holds it: an unsigned removal), said refused. */
bool trust_keeps_deleted(Fleet *f, const char *name, uint64_t revision);
/* After a list: each fleet policy the daemon holds that etcd no longer has is kept so (as above). */
void trust_keep_unlisted(Fleet *f, uint64_t revision);
