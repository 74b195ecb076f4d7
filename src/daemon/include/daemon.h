/* daemon.h: the brain, as the faces (REST, D-Bus, /metrics) see it: a Manager of interfaces, each an
 * opaque handle read through accessors; the operations that change them; change notifications.
 * Nothing here knows of HTTP or D-Bus. */
#pragma once

#include <systemd/sd-event.h>

#include "nl.h"
#include "signature.h"
#include "store.h"

typedef struct Manager Manager;
typedef struct Iface Iface;
typedef struct Filter Filter;

/* An fd systemd's fd store passed back at start, with its FDNAME. */
typedef struct DaemonPassedFd {
        int fd;
        char *name;
} DaemonPassedFd;

typedef struct DaemonConfig {
        const char *state_dir;
        /* Hog files (*.json): documents declared in configuration, read-only to the API. */
        const char *hogs_dir;
        /* Where programs (progs/) and tcx links (tcx/) are pinned, on a bpf filesystem. */
        const char *bpffs_dir;
        /* Where named network namespaces are (ip-netns's /run/netns). */
        const char *netns_dir;
        /* An object upload, or an object file named by path, larger than this is refused. */
        size_t object_size_max;
        /* Quotas of what the API and the fleet may store (hogs, the host's own, are not held to them):
         * objects (count, and their bytes together), API documents, API policies; 0: no limit. */
        size_t objects_max, objects_bytes_max, documents_max, policies_max;
        /* Where an object a change names by path may be read from (real paths, NULL-terminated; hogs
         * are not bound): opened without following links (read_file_under_dirs()). */
        const char *const *object_dirs;
        /* With --trusted-keys: an object is loaded only if one of these keys signed it (uploads, paths,
         * hogs, the fleet's, and the store's at start); NULL: any. */
        const TrustedKeys *trusted_keys;
        /* Where they were read from: read again on SIGHUP (daemon_reload()). */
        const char *trusted_keys_dir;
        /* Credentials and CAs of the registries objects are pulled from (oci://…; --registries); NULL:
         * anonymous, the system's CAs. */
        const struct OciRegistries *registries;
        /* The periodic full resync, the backstop for lost events; 0 turns it off. */
        uint64_t resync_usec;
        /* Holds BPF_ENABLE_STATS so that programs' run_count and run_time_ns are counted. */
        bool bpf_stats;
        /* The fd store's fds (prog.*, act.*, map.*): daemon_start() takes the fds; the names are copied. */
        const DaemonPassedFd *passed;
        size_t n_passed;
        /* The program that runs the workers (clsd itself: /proc/self/exe), and its argv[1]. */
        const char *worker_exe;
} DaemonConfig;

#define DAEMON_RESYNC_SEC_DEFAULT 60
#define DAEMON_OBJECTS_MAX_DEFAULT 1024
#define DAEMON_OBJECTS_BYTES_MAX_DEFAULT ((size_t) 2048 * 1024 * 1024)
#define DAEMON_DOCUMENTS_MAX_DEFAULT 65536
#define DAEMON_POLICIES_MAX_DEFAULT 4096
#define DAEMON_HOGS_DIR_DEFAULT "/etc/clsd/hogs.d"
#define DAEMON_BPFFS_DIR_DEFAULT "/sys/fs/bpf/clsd"
#define DAEMON_NETNS_DIR_DEFAULT "/run/netns"

typedef enum IfaceState {
        IFACE_PENDING, /* the interface does not exist (yet) */
        IFACE_CONFIGURED, /* the kernel matches the document */
        IFACE_FAILED, /* the last attempt failed; see iface_error() */
        _IFACE_STATE_MAX,
} IfaceState;

const char *iface_state_to_string(IfaceState s);

int daemon_new(const DaemonConfig *config, sd_event *event, Manager **ret, Error *reterr);
Manager *daemon_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, daemon_free);
/* Loads the store and queues a reconcile of every document (adopting what is already attached);
 * starts following link and tc events. ready() is called once the first reconcile of every document
 * is done (READY=1: the kernel matches the store as far as it can). */
typedef void (*DaemonReadyFunc)(Manager *m, void *userdata);
int daemon_start(Manager *m, DaemonReadyFunc ready, void *userdata, Error *reterr);
/* Sends systemd a STATUS= line of the documents' states when it changed. */
void daemon_notify_status(Manager *m);
/* Queues a reconcile of every interface (SIGHUP, lost events, D-Bus Reconcile). */
void daemon_reconcile_all(Manager *m);
/* SIGHUP: --trusted-keys read again and every stored object verified with them (trust.c): what no key
 * verifies any more is revoked (its filters removed, their interfaces failed "object_untrusted"), what a
 * key verifies again comes back (a directory that does not read keeps the keys in use); then the hogs
 * directory read again and what changed queued; every interface reconciled. */
void daemon_reload(Manager *m);
/* The registries the pulls from now on use (the caller keeps them until it sets others). */
void daemon_set_registries(Manager *m, const struct OciRegistries *registries);
/* clsd --check: validates every hog file of dir (JSON, fields, object files), or only file when it is
 * given, without starting; prints one line per problem on stderr and returns how many there were. With
 * trusted, objects must be signed. */
int daemon_hogs_check(const char *dir, const char *file, size_t object_size_max, const TrustedKeys *trusted);
/* clsd --flush: removes every filter, tcx link and pin of clsd's from the kernel and keeps the store;
 * prints what it removed. -EBUSY when a clsd runs on the state directory. */
int daemon_flush(const DaemonConfig *config);

/* ---- change notifications: a face learns of a change where it happens ---- */
typedef enum IfaceChange {
        IFACE_CHANGED_STATE = 1 << 0, /* state, ifindex, error */
        IFACE_CHANGED_DOCUMENT = 1 << 1, /* the documents (generation, source, hog) and so the filters */
        IFACE_CHANGED_REPAIRS = 1 << 2,
        IFACE_CHANGED_FILTERS = 1 << 3, /* what the kernel has for them */
        IFACE_ADDED = 1 << 4,
        IFACE_REMOVED = 1 << 5, /* the handle is valid for the call only */
} IfaceChange;

typedef void (*DaemonChangeFunc)(Manager *m, Iface *it, unsigned changes, void *userdata);
int daemon_add_change_listener(Manager *m, DaemonChangeFunc f, void *userdata);
void daemon_remove_change_listener(Manager *m, DaemonChangeFunc f, void *userdata);

/* ---- interfaces: the runtime side of an interface's documents ---- */
size_t daemon_iface_count(Manager *m);
/* In the order the documents came (the store's at start, then each new one). */
/* Every interface the faces see, in order (good until the table changes). */
Iface *const *daemon_ifaces(Manager *m, size_t *ret_n);
Iface *daemon_iface_at(Manager *m, size_t i);
/* netns: a named network namespace (/run/netns/NAME), or NULL for clsd's own. */
Iface *daemon_iface_get(Manager *m, const char *netns, const char *ifname);

const char *iface_ifname(const Iface *it);
const char *iface_netns(const Iface *it);
IfaceState iface_state(const Iface *it);
int iface_ifindex(const Iface *it); /* 0 while pending */
/* Why the last attempt failed (state IFACE_FAILED), else NULL. */
const Error *iface_error(const Iface *it);
/* "hog" where a hog declares any hook, else "api". */
DocumentSource iface_source(const Iface *it);
const char *iface_hog_path(const Iface *it); /* NULL: no hog */
/* The API's document, or NULL (a hog only); its generation is the ETag. */
const Document *iface_api_document(const Iface *it);
/* Whether the API's filters of the hook wait for a hog that declares it. */
bool iface_overridden(const Iface *it, Direction dir);
unsigned iface_repairs(const Iface *it);
uint64_t iface_last_repair_usec(const Iface *it); /* CLOCK_REALTIME; 0: none */
const char *iface_last_repair_what(const Iface *it);

/* Each interface applies its filters: ingress then egress, each hook in its document's order. */
size_t iface_filter_count(const Iface *it);
const Filter *iface_filter_at(const Iface *it, size_t i);
size_t iface_filter_count_dir(const Iface *it, Direction dir);

/* What the kernel has for one act_bpf action of a filter. */
typedef struct ActionObserved {
        bool attached; /* at its place, with the expected program */
        uint32_t index; /* the kernel's action index (`tc actions ls`) */
        uint32_t prog_id;
        char tag[NL_TAG_STRING_MAX];
        uint64_t packets; /* through the action, as the kernel counts them */
        uint64_t bytes;
        uint32_t drops;
} ActionObserved;

/* What the kernel has for one filter. */
typedef struct FilterObserved {
        bool attached; /* clsd's filter at its place, with the expected program and actions */
        bool classifier_attached; /* the expected program, whatever its actions */
        uint32_t handle; /* cls_bpf */
        uint32_t link_id; /* tcx */
        uint32_t prog_id;
        char tag[NL_TAG_STRING_MAX];
        ActionObserved actions[NL_ACTIONS_MAX]; /* parallel to the spec's actions */
} FilterObserved;

const FilterSpec *filter_spec(const Filter *f);
Direction filter_direction(const Filter *f);
DocumentSource filter_source(const Filter *f);
bool filter_is_tcx(const Filter *f); /* "auto" resolved */

/* A reading of the kernel for an interface: each filter's FilterObserved and run statistics, in the
 * order of iface_filter_at(). */
typedef struct FilterStatus {
        FilterObserved observed;
        bool has_stats; /* the program could be asked: run_count and run_time_ns are its */
        uint64_t run_count;
        uint64_t run_time_ns;
} FilterStatus;

typedef struct IfaceStatus {
        FilterStatus *filters;
        size_t n_filters;
} IfaceStatus;

int daemon_iface_status(Manager *m, const Iface *it, IfaceStatus *ret, Error *reterr);
void iface_status_done(IfaceStatus *s);

/* ---- changes: each runs on the loop, one at a time per interface; loading a program runs in a
 * worker, so the loop keeps serving. done() is called once, with the interface (NULL after a
 * DELETE, or on failure) and the error; from within the call, or later. ---- */

/* What a change expects of the API document it replaces: the face turns HTTP's If-Match into this. */
typedef enum DaemonExpectKind {
        EXPECT_NOTHING, /* no If-Match */
        EXPECT_ANY, /* "*": a document must exist */
        EXPECT_GENERATION, /* this generation */
        EXPECT_UNMATCHABLE, /* a precondition no generation can meet (an If-Match that names none) */
} DaemonExpectKind;

typedef struct DaemonExpect {
        DaemonExpectKind kind;
        uint64_t generation;
        const char *as_given; /* the client's words, for the 412's message */
} DaemonExpect;

typedef void (*DaemonDoneFunc)(Manager *m, Iface *it, const Error *e, void *userdata);

/* The transactional PUT: every program is loaded and verified, and conflicts are checked, before the
 * store or the kernel changes; a kernel or store failure after that rolls back. expect may be NULL. */
void daemon_iface_put(Manager *m, const char *netns, const char *ifname, json_t *body,
                      const DaemonExpect *expect, DaemonDoneFunc done, void *userdata);
void daemon_iface_delete(Manager *m, const char *netns, const char *ifname, const DaemonExpect *expect,
                         DaemonDoneFunc done, void *userdata);

/* A dry run of a PUT: what it would load and change, and why; nothing is loaded or changed. */
typedef enum DryRunLoad {
        DRY_RUN_SHARED, /* already loaded for another filter or interface */
        DRY_RUN_ADOPT, /* attached here already: taken back by id */
        DRY_RUN_LOAD, /* would be loaded and verified */
} DryRunLoad;

/* A policy's state on one interface it matches, its hooks taken together. */
typedef enum PolicyIfaceState {
        POLICY_IFACE_CONFIGURED, /* its filters are attached on the hooks it holds */
        POLICY_IFACE_PENDING,
        POLICY_IFACE_FAILED, /* the interface failed (iface_error()) */
        POLICY_IFACE_CONFLICT, /* a policy of the same order on one of its hooks: neither is attached */
        POLICY_IFACE_OVERRIDDEN, /* every hook it declares is another source's */
        _POLICY_IFACE_STATE_MAX,
} PolicyIfaceState;

typedef struct DryRunProgram {
        const FilterSpec *filter; /* in DryRun.plan_doc */
        Direction direction;
        int action; /* -1: the filter's classifier; else its action number action */
        DryRunLoad load;
} DryRunProgram;

typedef struct DryRunStep {
        const char *action; /* "keep", "add", "replace", "remove", "conflict" */
        Direction direction;
        uint16_t pref;
        char name[256]; /* the kernel filter's name */
        char reason[600];
} DryRunStep;

typedef struct DryRun {
        Document *doc; /* the document as it would be stored */
        Document *plan_doc; /* what the reconciler would apply: doc, with a hog's hooks */
        bool pending; /* the interface does not exist: nothing would change in the kernel now */
        bool document_changed; /* doc differs from the stored one (or there is none) */
        bool dropped; /* nothing would be declared for the interface (no document, hog or policy): it goes */
        DryRunProgram *programs;
        size_t n_programs;
        DryRunStep *steps;
        size_t n_steps;
        Error refused; /* what the apply would refuse with (a priority a foreign filter holds), if anything
                        */
        /* a policy's dry run: the policy's state on the interface as it would be, and by or with whom */
        PolicyIfaceState policy_state;
        char *policy_by;
} DryRun;

void dry_run_done(DryRun *r);
typedef void (*DryRunDoneFunc)(Manager *m, const DryRun *dr, const Error *e, void *userdata);
void daemon_iface_dry_run(Manager *m, const char *netns, const char *ifname, json_t *body,
                          const DaemonExpect *expect, DryRunDoneFunc done, void *userdata);

/* ---- policies: one document for every interface that matches ---- */

/* What a policy change did (or would do) to one interface it matched before or matches now. */
typedef struct PolicyResult {
        char *netns;
        char ifname[IF_NAMESIZE];
        bool matched; /* the (new) policy matches it; false: it lost the policy */
        bool removed; /* nothing is declared for it any more: clsd's filters went */
        IfaceState state;
        PolicyIfaceState policy_state; /* the policy's on it (matched) */
        char *by; /* the conflict, or whose its hooks are (overridden) */
        Error error; /* its state's reason, when failed */
        DryRun dry_run; /* a dry run's plan */
} PolicyResult;

typedef struct PolicyOutcome {
        const Policy *policy; /* the new one (NULL after a DELETE) */
        bool dry_run;
        PolicyResult *results;
        size_t n_results;
} PolicyOutcome;

typedef void (*PolicyDoneFunc)(Manager *m, const PolicyOutcome *o, const Error *e, void *userdata);

size_t daemon_policy_count(Manager *m);
Policy *daemon_policy_at(Manager *m, size_t i);
Policy *daemon_policy_get(Manager *m, const char *name);
/* PUT /policies/NAME: parsed strictly, its objects resolved and programs loaded and verified before it
 * is stored (once, durably); then every interface it matches, now or no longer, is applied on its own,
 * and done tells how each ended. dry_run: the plan of each, nothing loaded, stored or changed. */
void daemon_policy_put(Manager *m, const char *name, json_t *body, const DaemonExpect *expect, bool dry_run,
                       PolicyDoneFunc done, void *userdata);
void daemon_policy_delete(Manager *m, const char *name, const DaemonExpect *expect, PolicyDoneFunc done,
                          void *userdata);
/* The fleet's (src/fleet/): policies from etcd, each put (body, at revision, kept with it) or removed
 * (body NULL), as one: every program verified before anything is stored, stored as one, applied as one;
 * one refused, none is. The API cannot change such a policy; the fleet's is refused (name_taken) where a
 * local policy holds the name. */
typedef struct FleetPolicyChange {
        const char *name;
        json_t *body;
        uint64_t revision;
        uint64_t pull_nodes; /* the nodes that pull its images about now (0: none but this one): the
                              * pulls spread over them, at their registry's pace */
} FleetPolicyChange;
void daemon_fleet_policies_change(Manager *m, const FleetPolicyChange *v, size_t n, PolicyDoneFunc done,
                                  void *userdata);
/* The interfaces holding the policy (matched), in the table's order. */
size_t daemon_policy_ifaces(Manager *m, const Policy *p, Iface ***ret);
/* What each hook of it is to p ("applied", "failed" or "pending" as the interface is when p holds the
 * hook; "overridden" by another source, "conflict" with a policy of the same order; NULL: p declares none
 * there); by: whose (overridden), or with whom (conflict). */
const char *iface_policy_state(const Iface *it, const Policy *p, Direction dir, const char **by);
const char *policy_iface_state_to_string(PolicyIfaceState s);
/* by: the conflict (conflict), or whose the hooks are (overridden), else NULL. */
PolicyIfaceState iface_policy_outcome(const Iface *it, const Policy *p, const char **by);
size_t iface_policy_count(const Iface *it);
const Policy *iface_policy_at(const Iface *it, size_t i);

/* ---- the fleet: clsd --fleet (src/fleet/) keeps its status; the daemon shows it to the faces and keeps
 * the revision applied ---- */
#define DAEMON_FLEET_ROLLOUTS_MAX 16
/* A rollout this node takes part in, as the faces show it. */
typedef struct DaemonFleetRollout {
        char policy[65];
        char id[65];
        char phase[16]; /* progressing, paused, halted, aborted, done */
        char step[16]; /* this node: waiting, applied, healthy, failed, reverted, rolled-back */
        int wave; /* this node's (-1: not in the plan) */
        unsigned current_wave, confirmed, n_waves;
        uint64_t revision; /* the one the rollout brings */
        char why[256];
} DaemonFleetRollout;

#define DAEMON_FLEET_POLICIES_MAX 64
/* What this node says of one fleet policy that selects it (its status in etcd), as the faces show it. */
typedef struct DaemonFleetPolicy {
        char policy[65];
        char state[16]; /* applied, pending, waiting, failed, conflict, overridden, unmatched, … */
        uint64_t revision; /* the one etcd asks for */
        uint64_t held; /* the one whose filters the daemon holds (0: none) */
        uint64_t committed; /* the last this node committed (0: none) */
        unsigned interfaces[_POLICY_IFACE_STATE_MAX]; /* of what it holds, by the policy's state on each */
        char why[256];
} DaemonFleetPolicy;

typedef struct DaemonFleet {
        bool enabled;
        bool connected; /* etcd answered, the node's lease is held and the watch runs */
        char node[64];
        char endpoint[256]; /* the endpoint in use, or the last tried */
        uint64_t revision; /* the etcd revision of the fleet snapshot applied (kept across restarts) */
        uint64_t seen_revision; /* the last etcd revision read */
        uint64_t changes; /* fleet policy changes applied */
        uint64_t reconnects;
        uint64_t requests; /* made to etcd (a watch counts once, a call sent again again) */
        uint64_t busy_answers; /* etcd answered busy (too many requests, no leader, no answer in time) */
        uint64_t retries; /* calls sent again after a busy answer */
        uint64_t busy_failures; /* calls still unanswered after the client's retries: done again later */
        uint64_t stream_restarts; /* the watch begun again, the connection kept */
        uint64_t lease_renewals; /* a new lease, the old one gone (etcd busy or out of reach too long) */
        uint64_t authentications; /* logins (a token is kept until etcd forgets it) */
        uint64_t lists; /* the fleet read whole (at the start, after a compaction) */
        uint64_t status_writes; /* requests that wrote the node's record or statuses */
        uint64_t foreign_keys; /* this node's own keys another writer changed or deleted, written again */
        uint64_t
                reverts; /* revisions its dead-man switch took back (etcd lost before they were confirmed) */
        uint64_t rollbacks; /* revisions taken back because their rollout halted or was aborted */
        DaemonFleetRollout rollouts[DAEMON_FLEET_ROLLOUTS_MAX];
        size_t n_rollouts;
        DaemonFleetPolicy policies[DAEMON_FLEET_POLICIES_MAX];
        size_t n_policies;
        char last_error[256]; /* "" */
} DaemonFleet;

/* The fleet's status as the fleet keeps it (borrowed: it outlives its use; NULL: no fleet any more). */
void daemon_set_fleet(Manager *m, const DaemonFleet *status);
/* The fleet's status, or one not enabled (with the revision applied) without --fleet. */
const DaemonFleet *daemon_fleet(Manager *m);
/* The fleet snapshot at revision is applied: kept durably (a start without etcd says so too). */
int daemon_fleet_applied(Manager *m, uint64_t revision, Error *reterr);
/* The revision of the fleet snapshot last applied (kept across restarts; 0: none). */
uint64_t daemon_fleet_revision(Manager *m);
/* What the fleet keeps of its rollouts in flight on this node (a JSON object; NULL: none), durably. */
int daemon_fleet_keep_save(Manager *m, json_t *keep, Error *reterr);
json_t *daemon_fleet_keep_load(Manager *m);
/* The sum on this node of one of policy's map-derived metrics (its filters' "metrics"; a histogram's
 * observations): a fleet health check's reading. */
int daemon_policy_metric_sum(Manager *m, const char *policy, const char *metric, double *ret, Error *reterr);

/* ---- objects ---- */
typedef struct DaemonObject {
        char digest[SHA256_DIGEST_STRING_MAX];
        size_t size;
        NlObjectInfo *info;
} DaemonObject;

/* Whether one more object (digest, size bytes) fits --max-objects and --max-objects-size (one stored
 * already always does): quota_exceeded (507) otherwise. */
int daemon_object_quota_check(Manager *m, const char *digest, size_t size, Error *reterr);
/* Inspected in a worker without privileges (a parser that crashes costs that worker, not clsd). With
 * trusted keys, sig (a minisign or signify signature file's text, or NULL) must sign the bytes first;
 * it is stored with the object. */
typedef void (*DaemonObjectDoneFunc)(Manager *m, const DaemonObject *o, bool created, const Error *e,
                                     void *userdata);
void daemon_object_add(Manager *m, const void *data, size_t size, const char *sig, size_t sig_size,
                       DaemonObjectDoneFunc done, void *userdata);
const DaemonObject *daemon_object_get(Manager *m, const char *digest);
size_t daemon_object_count(Manager *m);
const DaemonObject *daemon_object_at(Manager *m, size_t i);
/* Interfaces whose document uses the object, as a NULL-terminated array of borrowed names. */
int daemon_object_users(Manager *m, const char *digest, const char ***ret);
int daemon_object_remove(Manager *m, const char *digest, Error *reterr);

/* ---- the host's links, with every tc filter, clsd's and foreign ---- */
typedef struct LinkView {
        NlLink link;
        const NlFilter *filters;
        size_t n_filters;
} LinkView;

/* 404 netns_not_found for a named namespace that does not exist. */
/* From clsd's view of the namespace's links, kept by events (a dump only for what it has not seen);
 * sorted by ifindex. */
int daemon_links(Manager *m, const char *netns, LinkView **ret, size_t *ret_n, Error *reterr);
/* Changes with anything daemon_links() could show differently. */
uint64_t daemon_links_version(Manager *m);
/* Frees the views; a namespace that was only looked at (no document follows it) is let go. */
void daemon_links_done(Manager *m, const char *netns, LinkView *v);

/* The named namespaces: those in /run/netns and those documents name. */
typedef struct NetnsView {
        char name[NETNS_NAME_MAX + 1];
        bool present; /* in /run/netns */
        bool followed; /* clsd holds sockets in it (a document names it) */
        size_t documents;
} NetnsView;

int daemon_netns_list(Manager *m, NetnsView **ret, size_t *ret_n, Error *reterr);

/* ---- maps of the attached programs (maps.c), decoded through BTF (btf-json.c) ---- */
struct btf;

/* A filter whose attached program (or action) uses the map. */
typedef struct DaemonMapUser {
        const Iface *iface;
        const Filter *filter;
} DaemonMapUser;

typedef struct DaemonMap {
        NlMap map; /* with an fd of its own */
        struct btf *btf; /* NULL: the map has no BTF (or it could not be read): bytes in hex */
        DaemonMapUser *users;
        size_t n_users;
} DaemonMap;

/* Maps gathered over one or more documents, each once (programs and maps are shared), with the BTF
 * objects they use loaded once each. */
typedef struct DaemonMaps {
        DaemonMap *maps;
        size_t n;
        struct btf **btfs;
        uint32_t *btf_ids;
        size_t n_btfs;
        /* Programs whose maps are in already, each with the ids of its maps: a program shared by many
         * filters is asked for its maps once. */
        struct DaemonMapsProgram *programs;
        size_t n_programs;
} DaemonMaps;

/* Adds the maps of the programs the kernel has attached for the document (st: its status). */
int daemon_maps_add(Manager *m, const Iface *it, const IfaceStatus *st, DaemonMaps *maps, Error *reterr);
/* The document's maps: its status read from the kernel, then daemon_maps_add(). */
int daemon_iface_maps(Manager *m, const Iface *it, DaemonMaps *ret, Error *reterr);
/* The maps of the programs held for the policy's filters, on every interface it is applied to. */
int daemon_policy_maps(Manager *m, const Policy *p, DaemonMaps *ret, Error *reterr);
/* Writes (value) or deletes (NULL) one entry through the policy: by name, in every interface's map of that
 * name (one when shared) and in the policy's own set of a configuration map; by id, in that map. */
int daemon_policy_map_write(Manager *m, const Policy *p, const DaemonMaps *maps, const char *what,
                            const json_t *key, const json_t *value, Error *reterr);
void daemon_maps_done(DaemonMaps *maps);
/* A page of the map's entries as the kernel has them now (nl_map_read()). */
/* Writes one entry of a map (BPF_ANY: added or replaced; a per-CPU map gets the value on every CPU), or
 * deletes one: key and value in the JSON a read gives. -ENOENT (entry_not_found) for a key not there. */
int daemon_map_write(Manager *d, const DaemonMap *m, const json_t *key, const json_t *value, Error *reterr);
int daemon_map_delete(Manager *d, const DaemonMap *m, const json_t *key, Error *reterr);
/* Whether a user's "maps" declares the map configuration ("config": true), and how many entries are stored
 * for it (the most any of its users has). */
bool daemon_map_config(Manager *m, const DaemonMap *dm, size_t *ret_stored);
int daemon_map_read(Manager *m, const DaemonMap *dm, const uint8_t *cursor, size_t cursor_size, size_t limit,
                    NlMapPage *ret, Error *reterr);
/* By kernel name, or by id when names are ambiguous: 404 "unknown_map", 409 "map_ambiguous". */
int daemon_maps_lookup(const DaemonMaps *maps, const char *ifname, const char *what, const DaemonMap **ret,
                       Error *reterr);

/* ---- /metrics (metrics.c): families and samples for the face to write out ---- */
typedef struct MetricWriter {
        /* Once per metric name, before its samples. */
        void (*family)(void *userdata, const char *name, const char *type, const char *help);
        /* labels: n_labels (name, value) pairs. */
        void (*sample)(void *userdata, const char *name, const char *const *labels, size_t n_labels,
                       double value);
        /* Optional: a label set written out once for the samples of several families (a filter's): a
         * handle good until the scrape ends, or NULL (out of memory: sample() then). */
        const void *(*label_set)(void *userdata, const char *const *labels, size_t n_labels);
        void (*sample_set)(void *userdata, const char *name, const void *set, double value);
        void *userdata;
} MetricWriter;

typedef struct DaemonErrorCount {
        ErrorCode code;
        uint64_t n;
} DaemonErrorCount;

typedef struct DaemonCounters {
        uint64_t reconciles;
        uint64_t repairs;
        uint64_t repair_loops;
        uint64_t worker_jobs;
        uint64_t pulls, pull_failures; /* images pulled from registries (oci://…), and those that failed */
        DaemonErrorCount errors[48];
        size_t n_errors;
        uint64_t map_metric_failures;
} DaemonCounters;

/* Everything the daemon exports, read from the kernel now: its own counters, every filter's attach
 * state and run statistics, and the documents' map-derived metrics. */
int daemon_metrics(Manager *m, const MetricWriter *w);
/* Counts one more of code in v (n entries, room for max). */
void error_counts_add(DaemonErrorCount *v, size_t *n, size_t max, ErrorCode code);
/* Counts a failure by its error code (clsd_errors_total). */
void daemon_count_error(Manager *m, ErrorCode code);

const char *daemon_kernel_release(Manager *m);
bool daemon_has_act_bpf(Manager *m);
/* Whether clsd holds BPF_ENABLE_STATS (--bpf-stats): run counts and times are being counted. */
bool daemon_bpf_stats(Manager *m);
bool daemon_has_tcx(Manager *m);
