/* daemon.h: the brain: the Daemon (event loop, store, kernel sockets, registry of loaded programs),
 * the reconciler and what the faces (REST, later D-Bus) may ask of it. */
#pragma once

#include <systemd/sd-event.h>

#include "nl.h"
#include "store.h"

typedef struct Daemon Daemon;

/* An fd systemd's fd store passed back at start, with its FDNAME. */
typedef struct DaemonPassedFd {
        int fd;
        char *name;
} DaemonPassedFd;

typedef struct DaemonConfig {
        const char *state_dir;
        /* Hog files (*.json): documents declared in configuration, read-only to the API. */
        const char *hogs_dir;
        /* Where tcx links are pinned (BPFFS_DIR/tcx/), on a bpf filesystem, so they outlive clsd. */
        const char *bpffs_dir;
        /* Where named network namespaces are (ip-netns's /run/netns). */
        const char *netns_dir;
        /* An object upload, or an object file named by path, larger than this is refused. */
        size_t object_size_max;
        /* The periodic full resync, the backstop for lost events; 0 turns it off. */
        uint64_t resync_usec;
        /* Holds BPF_ENABLE_STATS so that programs' run_count and run_time_ns are counted. */
        bool bpf_stats;
        /* The fd store's fds (prog.*, map.*): daemon_start() takes the fds; the names are copied. */
        const DaemonPassedFd *passed;
        size_t n_passed;
} DaemonConfig;

#define DAEMON_RESYNC_SEC_DEFAULT 60
#define DAEMON_HOGS_DIR_DEFAULT "/etc/clsd/hogs.d"
#define DAEMON_BPFFS_DIR_DEFAULT "/sys/fs/bpf/clsd"
#define DAEMON_NETNS_DIR_DEFAULT "/run/netns"

typedef enum IfaceState {
        IFACE_PENDING, /* the interface does not exist (yet) */
        IFACE_CONFIGURED, /* the kernel matches the document */
        IFACE_FAILED, /* the last attempt failed; see Iface.error */
        _IFACE_STATE_MAX,
} IfaceState;

const char *iface_state_to_string(IfaceState s);

typedef struct Program Program; /* a loaded program, shared by every filter that uses it */

/* The runtime side of one interface's documents: the API's and a hog's, composed. */
typedef struct Iface {
        Document *doc; /* what the reconciler applies: on each hook, the hog's filters or the API's */
        Document *api; /* the API's document as stored, or NULL */
        Document *hog; /* the hog's, or NULL */
        char *hog_path; /* the file that declares the hog */
        DocumentSource hook_source[_DIRECTION_MAX]; /* whose filters doc has on each hook */
        IfaceState state;
        int ifindex; /* 0 while pending */
        Error error; /* why the last reconcile failed, when state is IFACE_FAILED */
        Program **programs[_DIRECTION_MAX]; /* parallel to doc->filters */
        /* Each filter's act_bpf action programs, parallel to its spec's actions. */
        Program ***action_programs[_DIRECTION_MAX];
        /* Drift repaired while the document was configured: how often, when, and what was wrong. */
        unsigned repairs;
        uint64_t last_repair_usec; /* CLOCK_REALTIME */
        char last_repair_what[256];
        bool dirty; /* a tc event asked for a reconcile */
        /* After a failed reconcile, events do not retry at once: a timer does, with backoff, so that
         * a flapping link cannot make clsd reload and re-verify on every event. */
        unsigned failures;
        sd_event_source *retry_source;
} Iface;

/* One act_bpf action of a filter as the kernel shows it now. */
typedef struct ActionStatus {
        bool attached; /* at its place, with the expected program */
        uint32_t index; /* the kernel's action index (`tc actions ls`) */
        uint32_t prog_id;
        char tag[NL_TAG_STRING_MAX];
        uint64_t packets; /* through the action, as the kernel counts them */
        uint64_t bytes;
        uint32_t drops;
} ActionStatus;

/* One filter of a document as the kernel shows it now. */
typedef struct FilterStatus {
        bool attached; /* a clsd filter at the pref, with the expected program (and actions) */
        bool classifier_attached; /* the expected program, whatever its actions */
        bool tcx; /* attached through a tcx link (link_id) rather than as a cls_bpf filter */
        uint32_t link_id;
        uint16_t pref;
        uint32_t handle;
        uint32_t prog_id;
        char tag[NL_TAG_STRING_MAX];
        bool has_stats; /* the program could be asked: run_count and run_time_ns are its */
        uint64_t run_count;
        uint64_t run_time_ns;
        ActionStatus actions[NL_ACTIONS_MAX]; /* parallel to the spec's actions */
} FilterStatus;

typedef struct IfaceStatus {
        FilterStatus *filters[_DIRECTION_MAX]; /* parallel to doc->filters */
} IfaceStatus;

void iface_status_done(IfaceStatus *s);

typedef struct DaemonObject {
        char digest[SHA256_DIGEST_STRING_MAX];
        size_t size;
        NlObjectInfo *info;
} DaemonObject;

typedef struct LinkView {
        NlLink link;
        NlFilter *filters;
        size_t n_filters;
} LinkView;

int daemon_new(const DaemonConfig *config, sd_event *event, Daemon **ret, Error *reterr);
Daemon *daemon_free(Daemon *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(Daemon *, daemon_free);
/* Loads the store and reconciles every document (adopting what is already attached); starts
 * following link events. */
int daemon_start(Daemon *d, Error *reterr);
/* Sends systemd a STATUS= line of the documents' states when it changed. */
void daemon_notify_status(Daemon *d);
/* Reconciles every document now (SIGHUP, or lost events). */
int daemon_reconcile_all(Daemon *d);
/* SIGHUP: re-reads the hogs directory and applies only what changed. */
int daemon_hogs_reload(Daemon *d);
/* clsd --check: validates every hog file (JSON, fields, object files) without starting; prints one
 * line per problem on stderr and returns how many there were. */
int daemon_hogs_check(const char *dir, size_t object_size_max);
/* clsd --flush: removes every filter, tcx link and pin of clsd's from the kernel and keeps the store;
 * prints what it removed. -EBUSY when a clsd runs on the state directory. */
int daemon_flush(const DaemonConfig *config);

/* Objects. */
int daemon_object_add(Daemon *d, const void *data, size_t size, const DaemonObject **ret, bool *ret_created,
                      Error *reterr);
const DaemonObject *daemon_object_get(Daemon *d, const char *digest);
size_t daemon_object_count(Daemon *d);
const DaemonObject *daemon_object_at(Daemon *d, size_t i);
/* Interfaces whose document uses the object, as a NULL-terminated array of borrowed names. */
int daemon_object_users(Daemon *d, const char *digest, const char ***ret);
int daemon_object_remove(Daemon *d, const char *digest, Error *reterr);

/* Documents. if_match: NULL, "*", or a generation the current document must have. */
/* netns: a named network namespace (/run/netns/NAME), or NULL for clsd's own. */
int daemon_iface_put(Daemon *d, const char *netns, const char *ifname, json_t *body, const char *if_match,
                     Iface **ret, Error *reterr);
Iface *daemon_iface_get(Daemon *d, const char *netns, const char *ifname);
int daemon_iface_delete(Daemon *d, const char *netns, const char *ifname, const char *if_match,
                        Error *reterr);
/* Reads what the kernel has now for the document's filters. */
int daemon_iface_status(Daemon *d, const Iface *it, IfaceStatus *ret, Error *reterr);
size_t daemon_iface_count(Daemon *d);
Iface *daemon_iface_at(Daemon *d, size_t i);

/* A dry run of a PUT: what it would load and change, and why; nothing is loaded or changed. */
typedef enum DryRunLoad {
        DRY_RUN_SHARED, /* already loaded for another filter or interface */
        DRY_RUN_ADOPT, /* attached here already: taken back by id */
        DRY_RUN_LOAD, /* would be loaded and verified */
} DryRunLoad;

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
        DryRunProgram *programs;
        size_t n_programs;
        DryRunStep *steps;
        size_t n_steps;
} DryRun;

int daemon_iface_dry_run(Daemon *d, const char *netns, const char *ifname, json_t *body,
                         const char *if_match, DryRun *ret, Error *reterr);
void dry_run_done(DryRun *r);

/* Every interface of the namespace with all its tc filters, clsd's and foreign; 404 netns_not_found
 * for a named namespace that does not exist. */
int daemon_links(Daemon *d, const char *netns, LinkView **ret, size_t *ret_n, Error *reterr);

/* The named namespaces: those in /run/netns and those documents name. */
typedef struct NetnsView {
        char name[NETNS_NAME_MAX + 1];
        bool present; /* in /run/netns */
        bool followed; /* clsd holds sockets in it (a document names it) */
        size_t documents;
} NetnsView;

int daemon_netns_list(Daemon *d, NetnsView **ret, size_t *ret_n, Error *reterr);
void link_views_free(LinkView *v, size_t n);

/* ---- maps of the attached programs (maps.c), decoded through BTF (btf-json.c) ---- */
struct btf;

/* A filter whose attached program uses the map. */
typedef struct DaemonMapUser {
        const Iface *iface;
        Direction direction;
        const FilterSpec *filter;
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
} DaemonMaps;

/* Adds the maps of the programs the kernel has attached for the document (st: its status). */
int daemon_maps_add(Daemon *d, const Iface *it, const IfaceStatus *st, DaemonMaps *m, Error *reterr);
/* The document's maps: its status read from the kernel, then daemon_maps_add(). */
int daemon_iface_maps(Daemon *d, const Iface *it, DaemonMaps *ret, Error *reterr);
void daemon_maps_done(DaemonMaps *m);
/* A page of the map's entries as the kernel has them now (nl_map_read()). */
int daemon_map_read(Daemon *d, const DaemonMap *m, const uint8_t *cursor, size_t cursor_size, size_t limit,
                    NlMapPage *ret, Error *reterr);
/* By kernel name, or by id when names are ambiguous: 404 "unknown_map", 409 "map_ambiguous". */
int daemon_maps_lookup(const DaemonMaps *m, const char *ifname, const char *what, const DaemonMap **ret,
                       Error *reterr);

json_t *btf_json_hex(const uint8_t *data, size_t size);
/* The value of type type_id at data (size bytes) as typed JSON; hex when btf is NULL or disagrees. */
json_t *btf_json_decode(const struct btf *btf, uint32_t type_id, const uint8_t *data, size_t size);
/* A per-CPU value (n_cpus slots of value_size rounded up to 8): the list of each CPU's, and in
 * *ret_sum their sum leaf by leaf when every leaf is an integer (else NULL). */
json_t *btf_json_percpu(const struct btf *btf, uint32_t type_id, const uint8_t *data, size_t value_size,
                        unsigned n_cpus, json_t **ret_sum);
void btf_json_type_name(const struct btf *btf, uint32_t type_id, char *buf, size_t size);

/* ---- /metrics (metrics.c): families and samples for the face to write out ---- */
typedef struct MetricWriter {
        /* Once per metric name, before its samples. */
        void (*family)(void *userdata, const char *name, const char *type, const char *help);
        /* labels: n_labels (name, value) pairs. */
        void (*sample)(void *userdata, const char *name, const char *const *labels, size_t n_labels,
                       double value);
        void *userdata;
} MetricWriter;

typedef struct DaemonErrorCount {
        const char *code; /* static */
        uint64_t n;
} DaemonErrorCount;

typedef struct DaemonCounters {
        uint64_t reconciles;
        uint64_t repairs;
        DaemonErrorCount errors[48];
        size_t n_errors;
        uint64_t map_metric_failures;
} DaemonCounters;

/* Everything the daemon exports, read from the kernel now: its own counters, every filter's attach
 * state and run statistics, and the documents' map-derived metrics. */
int daemon_metrics(Daemon *d, const MetricWriter *w);
const DaemonCounters *daemon_counters(Daemon *d);
/* Counts one more of code in v (n entries, room for max). */
void error_counts_add(DaemonErrorCount *v, size_t *n, size_t max, const char *code);
/* Counts a failure by its error code (clsd_errors_total). */
void daemon_count_error(Daemon *d, const char *code);

const char *daemon_kernel_release(Daemon *d);
bool daemon_has_act_bpf(Daemon *d);
/* Whether clsd holds BPF_ENABLE_STATS (--bpf-stats): run counts and times are being counted. */
bool daemon_bpf_stats(Daemon *d);
bool daemon_has_tcx(Daemon *d);
