/* etcd.h: etcd's v3 API as its gateway serves it (JSON over HTTP, keys and values base64): the request
 * bodies and the answers clsd and clsctl use, the fleet's key layout and formats under a prefix, and a
 * blocking client (libcurl) for clsctl; the client on an event loop (clsd --fleet) is etcd-async.h. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "signing.h"

#define ETCD_PREFIX_DEFAULT "/clsd/"
#define FLEET_NODE_NAME_MAX 63
#define FLEET_LABELS_MAX 32
#define FLEET_LABEL_MAX 63

/* ---- keys and values ---- */
int etcd_b64_encode(const void *data, size_t size, char **ret);
/* -EINVAL on a malformed string; ret is NUL-terminated beyond ret_size. */
int etcd_b64_decode(const char *s, char **ret, size_t *ret_size);
/* The end of the range of every key that starts with prefix (etcd's "range_end"), malloc'ed. */
char *etcd_prefix_end(const char *prefix);

typedef struct EtcdKv {
        char *key; /* NUL-terminated beyond key_size: a key with a NUL in it is longer than strlen() */
        size_t key_size;
        char *value; /* NUL-terminated beyond value_size */
        size_t value_size;
        uint64_t create_revision, mod_revision, lease;
} EtcdKv;
void etcd_kvs_free(EtcdKv *v, size_t n);

/* Request bodies (NULL: out of memory). prefix: the range of every key under key. */
json_t *etcd_range_body(const char *key, bool prefix);
/* A range that only counts the keys under prefix, and the count of such a range's answer (0: none). */
json_t *etcd_count_body(const char *prefix);
uint64_t etcd_range_count(json_t *range_answer);
json_t *etcd_put_body(const char *key, const void *value, size_t size, uint64_t lease);
json_t *etcd_delete_body(const char *key, bool prefix);
/* A watch's create_request of key (every key under it, with prefix) from start_revision, as watch_id:
 * several go in one /v3/watch stream, one JSON text after another, and its messages say theirs. */
json_t *etcd_watch_body(const char *key, bool prefix, uint64_t start_revision, uint64_t watch_id);

/* An answer of /v3/kv/range: its kvs and the store's revision. */
int etcd_range_parse(json_t *answer, EtcdKv **ret, size_t *ret_n, uint64_t *ret_revision, Error *reterr);
/* The header's revision of any answer (0: none). */
uint64_t etcd_answer_revision(json_t *answer);

/* One message of a /v3/watch stream. */
typedef struct EtcdWatchMessage {
        uint64_t revision; /* the header's */
        uint64_t watch_id; /* which watch of the stream (0 is omitted by the gateway) */
        bool created, canceled;
        uint64_t compact_revision; /* > 0: the watch fell behind a compaction (canceled) */
        char *cancel_reason;
        EtcdKv *events; /* a DELETE event has value NULL, value_size 0 */
        bool *deleted; /* parallel to events */
        size_t n_events;
} EtcdWatchMessage;
int etcd_watch_parse(json_t *msg, EtcdWatchMessage *ret, Error *reterr);
void etcd_watch_message_done(EtcdWatchMessage *m);

/* A gateway's error answer ({"error", "code", "message"}) as an Error, or a non-JSON answer. */
int etcd_answer_error(long http_status, json_t *answer, Error *reterr);

/* ---- the fleet's keys, under the prefix (a "/"-terminated path, "/clsd/" by default) ----
 *   PREFIX policies/NAME          a fleet policy (JSON, fleet_policy_parse())
 *   PREFIX objects/DIGEST         an object's bytes, named by their sha256
 *   PREFIX objects/DIGEST.sig     its signature file (minisign, signify), for hosts with --trusted-keys
 *   PREFIX nodes/NODE             a node's record (JSON; bound to the node's lease)
 *   PREFIX status/NODE/POLICY     a node's status of a policy it is selected by (JSON; its lease) */
char *fleet_key(const char *prefix, const char *kind, const char *name, const char *sub);
bool fleet_prefix_valid(const char *s);
bool fleet_node_name_valid(const char *s);

/* A node's lease (the seconds its record and statuses outlive it), kept alive every third of it. etcd
 * answers each keepalive through its JSON gateway (a few ms of its CPU each), so a fleet's nodes ask for
 * leases long enough that their keepalives stay under FLEET_KEEPALIVES_PER_SECOND together, and twice as
 * long after each lease etcd let expire while they kept it alive (an overloaded etcd): configured if set,
 * else at least FLEET_LEASE_TTL_DEFAULT, at most FLEET_LEASE_TTL_SIZED_MAX. */
#define FLEET_LEASE_TTL_DEFAULT 20
#define FLEET_LEASE_TTL_SIZED_MAX 300
#define FLEET_KEEPALIVES_PER_SECOND 100
unsigned fleet_lease_ttl(unsigned configured, uint64_t nodes, unsigned expiries);

typedef struct FleetLabel {
        char key[FLEET_LABEL_MAX + 1];
        char value[FLEET_LABEL_MAX + 1];
} FleetLabel;

/* "k=v,k2=v2" (empty: none); -EINVAL with a message naming the bad one. */
int fleet_labels_parse(const char *s, FleetLabel **ret, size_t *ret_n, Error *reterr);
json_t *fleet_labels_to_json(const FleetLabel *v, size_t n);

/* A wave of a rollout: a count of nodes, or a percentage of the selected ones (rounded up). */
typedef struct FleetWave {
        unsigned value;
        bool percent;
} FleetWave;

/* "rollout": how a revision reaches the selected nodes (rollout.c). */
typedef struct FleetRollout {
        bool present; /* no "rollout": every selected node at once */
        char id[65]; /* this rollout's, unique (clsctl fleet apply writes one; else "r" + the revision) */
        FleetWave *waves;
        size_t n_waves;
        uint64_t hold_usec; /* a node stays connected and healthy this long before it counts healthy */
        uint64_t confirm_usec; /* a node that applied and cannot reach etcd this long reverts */
        unsigned max_unhealthy; /* of a wave, before the rollout halts */
        char spread[FLEET_LABEL_MAX + 1]; /* a label whose values the waves cover in turn ("": none) */
} FleetRollout;

/* "health": [{"metric": NAME, "max_rate": N, "min_rate": N}]: a check over one of the policy's metrics
 * (its filters' "metrics"), per second, on this node. */
typedef struct FleetHealthCheck {
        char metric[129];
        bool has_max, has_min;
        double max_rate, min_rate;
} FleetHealthCheck;

/* "nodes": {"kernel": ">=6.6", "features": ["tcx"]}: what a node must have to qualify. */
typedef enum FleetCompare {
        FLEET_CMP_NONE,
        FLEET_CMP_GE,
        FLEET_CMP_GT,
        FLEET_CMP_LE,
        FLEET_CMP_LT,
        FLEET_CMP_EQ,
} FleetCompare;

/* A fleet policy: a policy (match, order, ingress, egress) with a name and a node selector, and how it
 * rolls out. */
typedef struct FleetPolicy {
        char *name;
        FleetLabel *labels; /* "nodes": {"labels": {...}}: every one must match */
        size_t n_labels;
        char **names; /* "nodes": {"names": [...]} */
        size_t n_names;
        bool any_node; /* no "nodes" (or only kernel gates): every node */
        FleetCompare kernel_cmp; /* "nodes": {"kernel": ">=6.6"} */
        unsigned kernel[3];
        bool need_tcx, need_act_bpf; /* "nodes": {"features": [...]} */
        FleetRollout rollout;
        uint64_t selected; /* "selected": the live nodes it selected when applied (clsctl's count; 0: not
                            * said): their pulls of its images spread at their registry's pace */
        FleetHealthCheck *health;
        size_t n_health;
        /* "removed": true: a signed removal (clsctl fleet rm --sign), the name and "signed" only: the
         * policy goes from every node as a deleted key would */
        bool removed;
        /* "signed" (fleet-signed.c): its serial and signature, and the text they sign (NULL: unsigned) */
        uint64_t serial;
        char *signature, *signed_text;
        size_t signed_size;
        json_t *policy; /* the rest, as PUT /policies/NAME takes it */
} FleetPolicy;

/* The text a signed envelope's signature signs (its "signed" left out; fleet-signed.c says how), malloc'ed,
 * or NULL (out of memory, no name). */
char *fleet_signed_message(json_t *envelope, uint64_t serial, size_t *ret_size);
/* The envelope's "signed", checked and read into p (none: p unsigned). */
int fleet_signed_parse(json_t *envelope, FleetPolicy *p, Error *reterr);
/* Signs the envelope (its "signed" set) with k at serial. */
int fleet_policy_sign(json_t *envelope, const SecretKey *k, uint64_t serial, Error *reterr);

/* What a node records of itself that a selector's kernel gates read. */
typedef struct FleetNodeFacts {
        const char *kernel; /* uname's release */
        bool tcx, act_bpf;
} FleetNodeFacts;

/* Checks the envelope strictly (name, nodes); the policy itself is checked by clsd as a PUT is. */
int fleet_policy_parse(json_t *j, FleetPolicy *ret, Error *reterr);
/* A fleet policy's value as etcd holds it under PREFIX policies/NAME: parsed (0), or why no node can
 * read it (-EINVAL in reterr: not JSON, its envelope, a name that is not its key's). */
int fleet_policy_read(const char *name, const char *value, size_t size, FleetPolicy *ret, Error *reterr);
void fleet_policy_done(FleetPolicy *p);
/* Whether the node (its name and labels) is selected: labels all match, or its name is listed (both
 * given: either). */
bool fleet_policy_selects(const FleetPolicy *p, const char *node, const FleetLabel *labels, size_t n_labels);
/* Whether the node qualifies by the selector's kernel gates: false with why ("kernel 6.1.0 is not >=
 * 6.6") in buf. */
bool fleet_policy_qualifies(const FleetPolicy *p, const FleetNodeFacts *facts, char *why, size_t size);
/* The digests the policy's filters and actions name ("object"), as a NULL-terminated list of borrowed
 * strings; -EINVAL for an "object" that is not a digest (clsctl uploads files and writes digests). */
int fleet_policy_digests(const FleetPolicy *p, const char ***ret, Error *reterr);

/* An answer as it arrives (libcurl's write callback), NUL-terminated; at most max bytes. */
typedef struct EtcdBuffer {
        char *data;
        size_t size;
        size_t over; /* the answer was longer than this limit: not read on */
} EtcdBuffer;
/* What a transfer that failed says: an answer over the buffer's limit as such (libcurl says only that
 * writing it failed), else libcurl's reason. */
const char *etcd_transfer_error(const EtcdBuffer *b, const char *curl_error, char *buf, size_t size);
/* false when it would pass max, or out of memory */
bool etcd_buffer_append(EtcdBuffer *b, const void *p, size_t n, size_t max);

/* ---- who a client is to etcd ---- */
/* TLS files (a CA to verify etcd by, a client certificate and its key), and an etcd user whose password
 * is the first line of a file (etcd's authentication: a token, asked for at each connection, goes with
 * every request). NULL: none. */
typedef struct EtcdCredentials {
        const char *ca, *cert, *key;
        const char *user, *password_file;
} EtcdCredentials;
/* The password of a user (the first line of creds->password_file), malloc'ed; *ret NULL without a user.
 * invalid_value: a user without a file, a file without a user, one that cannot be read or is empty. */
int etcd_password_read(const EtcdCredentials *creds, char **ret, Error *reterr);
/* /v3/auth/authenticate's body for user and password. */
json_t *etcd_authenticate_body(const char *user, const char *password);
/* The token of an authenticate answer into *token (the one there freed; NULL on failure): EPROTO when
 * the answer has none (etcd's authentication is off), ENOMEM. */
int etcd_answer_token(json_t *answer, char **token, Error *reterr);
/* etcd's gateway errors that a client acts on, which etcd_answer_error() sets as the Error's code (entries
 * of error-code.h's one list):
 * - ERROR_ETCD_PERMISSION_DENIED (EACCES): the user may not;
 * - ERROR_ETCD_AUTH_FAILED (EACCES): a user or password etcd does not know;
 * - ERROR_ETCD_TOKEN_INVALID (EKEYEXPIRED): authenticate again (expired, or none);
 * - ERROR_ETCD_OVERLOADED (EAGAIN): etcd is there but cannot serve it now (too many requests, no leader, the
 *   request timed out in etcd or took longer than the call may): the same request later, not another
 *   connection;
 * - ERROR_ETCD_LEASE_NOT_FOUND (ENOENT): a put under a lease etcd no longer has (it expired): a new lease,
 *   not a new connection. */
/* A transaction that changes nothing (its compare is never true) but whose put under key etcd checks
 * the permission of all the same: whether a client may write key (etcd answers permission denied). */
json_t *etcd_write_probe_body(const char *key);

/* ---- a blocking client (clsctl) ---- */

typedef struct EtcdClient EtcdClient;
/* urls: "http://h:2379[,https://h2:2379…]"; tried in turn, the first that answers is kept. With a user,
 * the first call authenticates (and again when etcd says the token is no longer valid). */
int etcd_client_new(const char *urls, const EtcdCredentials *creds, EtcdClient **ret, Error *reterr);
EtcdClient *etcd_client_free(EtcdClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(EtcdClient *, etcd_client_free);
/* How long a call asks a busy etcd again, with backoff (default ETCD_BUSY_RETRY_USEC, etcd-transfer.h); an
 * unreachable one is tried for at most 5 s of it. The call then fails with the last answer's error. */
void etcd_client_set_busy_wait(EtcdClient *c, uint64_t usec);
/* Who the client is to etcd, for the fleet's history: user (etcd's, when given), else its client
 * certificate's common name, else "user@host". */
void etcd_identity(const EtcdCredentials *creds, char *buf, size_t size);
/* POSTs body (taken) to path ("/v3/kv/range") and returns the JSON answer of a 200. */
int etcd_call(EtcdClient *c, const char *path, json_t *body, json_t **ret, Error *reterr);
/* Every endpoint's URL, and how many. */
size_t etcd_urls_split(const char *urls, char ***ret);
