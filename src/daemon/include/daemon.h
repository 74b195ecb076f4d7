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
/* SIGHUP: --trusted-keys read again and every stored object verified with them (object-trust.c): what no key
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
const char *filter_attach(const Filter *f); /* "cls_bpf" or "tcx": "auto" resolved */

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

/* A policy's state on one interface it matches, its hooks taken together. */
typedef enum PolicyIfaceState {
        POLICY_IFACE_CONFIGURED, /* its filters are attached on the hooks it holds */
        POLICY_IFACE_PENDING,
        POLICY_IFACE_FAILED, /* the interface failed (iface_error()) */
        POLICY_IFACE_CONFLICT, /* a policy of the same order on one of its hooks: neither is attached */
        POLICY_IFACE_OVERRIDDEN, /* every hook it declares is another source's */
        _POLICY_IFACE_STATE_MAX,
} PolicyIfaceState;

/* ---- the kernel's features ---- */
const char *daemon_kernel_release(Manager *m);
bool daemon_has_act_bpf(Manager *m);
/* Whether clsd holds BPF_ENABLE_STATS (--bpf-stats): run counts and times are being counted. */
bool daemon_bpf_stats(Manager *m);
bool daemon_has_tcx(Manager *m);
