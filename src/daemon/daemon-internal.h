/* daemon-internal.h: the Daemon struct and what the files of src/daemon/ share. */
#pragma once

#include "daemon.h"

/* A network namespace clsd follows: its own, or a named one (/run/netns/NAME) that a document names.
 * Each has its request socket and its event socket (RTNLGRP_LINK, RTNLGRP_TC). */
typedef struct Netns {
        Daemon *daemon;
        char *name; /* NULL: clsd's own */
        int fd; /* the named namespace, held while followed; -1 for clsd's own */
        NlSocket *rtnl;
        NlSocket *events;
        sd_event_source *events_source;
} Netns;

struct Daemon {
        DaemonConfig config;
        sd_event *event;
        Store *store;
        Netns own;
        Netns **netns; /* the named ones followed */
        size_t n_netns;
        int netns_watch_fd; /* inotify on /run/netns */
        sd_event_source *netns_watch_source;
        sd_event_source *netns_scan_source; /* a namespace appeared: follow it once it is mounted */
        unsigned netns_scan_tries;
        sd_event_source *dirty_source; /* reconciles interfaces that tc events marked dirty */
        sd_event_source *resync_source; /* the periodic full resync */

        Iface **ifaces;
        size_t n_ifaces;

        DaemonObject *objects;
        size_t n_objects;

        Program **programs; /* the registry */
        size_t n_programs;
        DaemonPassedFd *passed; /* what the fd store gave back, until a document takes it */
        size_t n_passed;
        bool pin_programs; /* bpffs_dir is on a bpf filesystem: programs are pinned in progs/ */
        char status[128]; /* the last STATUS= sent to systemd */
        bool exiting; /* daemon_free(): programs are closed, not released */

        DaemonCounters counters;
        int bpf_stats_fd; /* BPF_ENABLE_STATS held, or -1 */

        char kernel_release[65];
        bool act_bpf; /* the kernel has act_bpf (probed once at start) */
        bool tcx; /* the kernel has tcx (likewise) */
};

/* registry.c: one loaded program per (digest, program), shared by every interface. adopt_id: the
 * program attached for f that may be taken back as it is (0: none); reuse_id: the program a new load
 * replaces, whose maps it takes over (0: none). */
typedef struct ProgramRef {
        const char *digest;
        const char *program;
        NlProgKind kind;
        const char *tag; /* what was attached last ("": nothing known) */
        const FilterSpec *filter; /* whose "maps" say which maps a new load takes over */
} ProgramRef;

/* The filter's classifier (action -1) or its action number action. */
ProgramRef program_ref(const FilterSpec *f, int action);
int registry_acquire(Daemon *d, const ProgramRef *ref, uint32_t adopt_id, uint32_t reuse_id, Program **ret,
                     Error *reterr);
/* Takes the fds systemd's fd store gave back, and sets up the bpffs pins. */
int registry_start(Daemon *d, const DaemonPassedFd *passed, size_t n_passed);
/* A dry run's check of what loading f would refuse: a map of reuse_id's it cannot take over. */
int registry_check_reuse(Daemon *d, const ProgramRef *ref, uint32_t reuse_id, Error *reterr);
/* Whether the fd store or a pin kept f's program from the last run. */
bool registry_kept(Daemon *d, const ProgramRef *ref);
/* After the first reconcile: drops the fd store entries and pins no document took. */
void registry_settle(Daemon *d);
void registry_free_passed(Daemon *d);
void registry_release(Daemon *d, Program *p);
/* The loaded program, if any, without taking a reference. */
Program *registry_find(Daemon *d, const char *digest, const char *program, NlProgKind kind);
int program_fd(const Program *p);
const char *program_tag(const Program *p);
uint32_t program_id(const Program *p);

/* reconcile-diff.c: the pure core of the reconciler. */
typedef struct DesiredAction {
        char name[NL_ACTION_NAME_MAX]; /* "clsd:<filter>/<n>" */
        char tag[NL_TAG_STRING_MAX];
        uint32_t prog_id;
        int prog_fd;
} DesiredAction;

typedef struct DesiredFilter {
        NlHook hook;
        uint32_t parent; /* the clsact hook's, or a classful qdisc's (classic mode) */
        uint16_t pref;
        char name[256];
        char tag[NL_TAG_STRING_MAX];
        uint32_t prog_id; /* the program to attach: two objects can share a tag (maps differ) */
        bool direct_action;
        uint32_t classid;
        int prog_fd;
        DesiredAction actions[NL_ACTIONS_MAX]; /* act_bpf, in order */
        size_t n_actions;
} DesiredFilter;

typedef enum PlanAction {
        PLAN_KEEP, /* already as desired */
        PLAN_ADD, /* nothing at the pref */
        PLAN_REPLACE, /* ours at the pref, but different: replace in place */
        PLAN_REMOVE, /* ours, no longer desired */
        PLAN_CONFLICT, /* a foreign filter holds the pref: never touched */
} PlanAction;

typedef struct PlanStep {
        PlanAction action;
        NlHook hook;
        uint32_t parent;
        uint16_t pref;
        uint32_t handle; /* of the observed filter, for REPLACE/REMOVE/CONFLICT */
        int desired; /* index into desired, or -1 */
        int observed; /* index into observed, or -1 */
} PlanStep;

typedef struct Plan {
        PlanStep *steps;
        size_t n_steps;
} Plan;

const char *plan_action_to_string(PlanAction a);
int reconcile_diff(const DesiredFilter *desired, size_t n_desired, const NlFilter *observed,
                   size_t n_observed, Plan *ret);
void plan_done(Plan *p);

/* The interface's request socket (its namespace's), or NULL while the namespace is absent. */
NlSocket *iface_rtnl(Daemon *d, const Iface *it);

/* reconcile.c */
/* clsd's filter named name at (parent, pref) in chain 0, or NULL. */
const NlFilter *find_ours(const NlFilter *observed, size_t n, uint32_t parent, uint16_t pref,
                          const char *name);
/* The kernel filter's name: the mark that makes it clsd's, "clsd:<name>". */
void filter_kernel_name(const FilterSpec *f, char buf[256]);
/* The kernel name of the filter's action k: "clsd:<name>/<k + 1>", so that `tc actions ls` says whose. */
void action_kernel_name(const FilterSpec *f, size_t k, char buf[NL_ACTION_NAME_MAX]);
NlHook hook_of(Direction dir);
/* Where a filter of the document goes: its "parent", or the clsact hook of its direction. */
uint32_t filter_parent(const FilterSpec *f, Direction dir);
/* On each hook, the hog's filters if it declares any there, else the API document's. */
int document_compose(const Document *api, const Document *hog, Document **ret,
                     DocumentSource ret_hook_source[_DIRECTION_MAX]);
bool hog_holds(const Document *hog, Direction dir);
/* api or hog may be NULL, not both; both are copied. */
int iface_new(const Document *api, const Document *hog, const char *hog_path, Iface **ret);
bool iface_facts_sync(Iface *it);
/* A new runtime for the same interface keeps what the old one knew: clsact ownership, repairs. */
void iface_carry_over(Iface *it, const Iface *old);
void document_keep_facts(Document *doc, const Document *old);
Iface *iface_free(Daemon *d, Iface *it);
int iface_acquire_programs(Daemon *d, Iface *it, const NlFilter *observed, size_t n_observed, Error *reterr);
void iface_release_programs(Daemon *d, Iface *it);
int iface_reconcile(Daemon *d, Iface *it, Error *reterr);
/* Applies doc (NULL: remove everything of ours) to ifindex; programs must be acquired. */
/* Returns the number of changes it made (0: the kernel already matched); what, if not NULL, says
 * which. */
int iface_apply(Daemon *d, Iface *it, char *what, size_t what_size, Error *reterr);
int iface_remove_all(Daemon *d, Iface *it, Error *reterr);
/* Deletes the clsact qdisc unless a filter still uses it (call only for one clsd created). */
int clsact_remove_if_unused(NlSocket *rtnl, int ifindex, const char *ifname, Error *reterr);
int iface_check_conflicts(const Daemon *d, const Iface *it, const NlFilter *observed, size_t n_observed,
                          Error *reterr);

/* snapshot.c: clsd's filters on an interface before a change, to put them back if it fails. */
typedef struct Snapshot {
        NlSocket *rtnl;
        int ifindex;
        bool had_clsact;
        NlFilter *filters; /* clsd's only */
        NlProgram **programs; /* a reference to each one's program */
        NlProgram **action_programs; /* and to its actions': NL_ACTIONS_MAX for each filter */
        size_t n_filters;
        uint32_t *tcx_links; /* the ids of clsd's tcx links */
        size_t n_tcx_links;
} Snapshot;

/* all: the interface's filters as just dumped. */
int snapshot_take(NlSocket *rtnl, int ifindex, const NlFilter *all, size_t n_all, Snapshot *ret,
                  Error *reterr);
int snapshot_restore(const Snapshot *s, const char *ifname, Error *reterr);
void snapshot_done(Snapshot *s);

/* objects.c */
int daemon_objects_load(Daemon *d);
int daemon_object_resolve(Daemon *d, FilterSpec *f, bool store, Error *reterr);
/* Every filter's object and program resolved, and what tcx cannot run refused (PUT and hogs). */
int daemon_document_resolve(Daemon *d, Document *doc, bool store, Error *reterr);

/* daemon.c */
/* What a PUT of body would store: validated, If-Match checked, objects and programs resolved (with
 * store, an object given by path is stored; without, only read), generation assigned. */
int iface_document_prepare(Daemon *d, const char *netns, const char *ifname, json_t *body,
                           const char *if_match, bool store, Document **ret, Error *reterr);
int iface_reconcile_and_save(Daemon *d, Iface *it, Error *reterr);
/* Reconciles now unless a retry is already scheduled; on failure schedules one with backoff. */
void iface_reconcile_or_retry(Daemon *d, Iface *it);

/* d->ifaces: room for one more, so that ifaces_put() of a new one cannot fail; then it takes old's
 * place (old stays the caller's to free), or with old NULL is appended. */
int ifaces_reserve(Daemon *d);
void ifaces_put(Daemon *d, Iface *old, Iface *it);

/* Makes api and hog (either may be NULL, not both; both are copied) the interface's documents:
 * programs acquired and conflicts checked first, then applied (rolled back on failure) and stored;
 * old, if any, is replaced and freed. */
int iface_replace(Daemon *d, Iface *old, const char *ifname, const Document *api, const Document *hog,
                  const char *hog_path, Iface **ret, Error *reterr);
/* Removes everything of clsd's from the interface and forgets it. */
int iface_forget(Daemon *d, Iface *it, Error *reterr);

/* Appends one finding to what, "; "-separated, cut at its size. */
void what_add(char *what, size_t size, const char *fmt, ...) _printf_(3, 4);

/* tcx.c */
typedef struct TcxOurs {
        char pin[128];
        Direction dir;
        uint16_t pref;
        char name[FILTER_NAME_MAX + 1];
        int fd; /* the link, from its pin */
        NlTcxLink link;
        bool wanted; /* a filter of the document is this one */
} TcxOurs;

/* clsd's tcx links of ifindex (every interface's with ifindex 0), sorted by (hook, pref). A pin
 * whose link no longer runs there (detached by someone, or its device gone) has link.ifindex 0. */
int tcx_ours(Daemon *d, const char *netns, int ifindex, TcxOurs **ret, size_t *ret_n, Error *reterr);
void tcx_ours_free(TcxOurs *v, size_t n);
bool filter_uses_tcx(const Daemon *d, const FilterSpec *f);
bool document_uses_tcx(const Daemon *d, const Document *doc);
/* The kernel runs a program at most once per tcx hook: 422 duplicate_program otherwise. */
int document_check_tcx(const Daemon *d, const Document *doc, Error *reterr);
/* reterr "tcx_unavailable" unless the kernel has tcx and --bpffs-dir is on bpffs (created if needed). */
int daemon_tcx_ready(Daemon *d, const char *netns, Error *reterr);
/* clsd's tcx link for the filter, attached to ifindex, or -ENOENT. */
int iface_tcx_find(Daemon *d, const char *netns, int ifindex, Direction dir, const FilterSpec *f,
                   NlTcxLink *ret);
/* Returns the number of changes, like iface_apply(). */
int iface_tcx_apply(Daemon *d, Iface *it, char *what, size_t what_size, Error *reterr);
int iface_tcx_verify(Daemon *d, Iface *it, Error *reterr);
int iface_tcx_remove_all(Daemon *d, const char *netns, int ifindex, const char *ifname, Error *reterr);
/* The ids of clsd's tcx links on ifindex, for a snapshot; and, to roll back, removing every link of
 * clsd's that is not one of them. */
int iface_tcx_link_ids(Daemon *d, const char *netns, int ifindex, uint32_t **ret, size_t *ret_n,
                       Error *reterr);
int iface_tcx_remove_added(Daemon *d, const char *netns, int ifindex, const char *ifname,
                           const uint32_t *before, size_t n_before, Error *reterr);
void daemon_tcx_sweep(Daemon *d);

/* hogs.c */
int daemon_hogs_load(Daemon *d);

/* events.c */
int daemon_events_start(Daemon *d, Error *reterr);
/* Starts reading the namespace's events. */
int netns_events_start(Daemon *d, Netns *ns, Error *reterr);

/* netns.c */
/* The request socket of the namespace (NULL: clsd's own), following a named one if needed: -ENOENT
 * when /run/netns has no such namespace, -EAGAIN while it is being created. */
int daemon_rtnl(Daemon *d, const char *netns, NlSocket **ret, Error *reterr);
/* The interface and its namespace's request socket; -ENODEV when either is absent. */
int daemon_link_by_name(Daemon *d, const char *netns, const char *ifname, NlSocket **ret_rtnl, NlLink *ret,
                        Error *reterr);
/* Enters the namespace for a call that acts on the caller's (bpf(2) for tcx); -1 in *ret_saved for
 * clsd's own. */
int daemon_netns_enter(Daemon *d, const char *netns, int *ret_saved, Error *reterr);
int daemon_netns_start(Daemon *d, Error *reterr);
/* Lets go of namespaces that went; follows those pending documents name that came. */
void daemon_netns_scan(Daemon *d);
void daemon_netns_free(Daemon *d);
/* Stops following a named namespace no document names any more. */
void netns_release_if_unused(Daemon *d, const char *netns);

/* btf-field.c: one field of a key or value by path, resolved once, read from many entries. */
typedef enum BtfFieldKind {
        BTF_FIELD_INT,
        BTF_FIELD_ENUM,
        BTF_FIELD_BYTES, /* arrays (a char array: its text), structs: hex */
} BtfFieldKind;

typedef struct BtfField {
        const struct btf *btf;
        uint32_t type_id;
        uint32_t bit_off;
        uint32_t size_bits;
        uint32_t bitfield;
        BtfFieldKind kind;
        bool is_signed;
        bool raw; /* no BTF: the whole key or value as a little-endian unsigned integer */
} BtfField;

/* bits bits at bit offset off of data, little-endian (a field may span 9 bytes). */
uint64_t btf_load_bits(const uint8_t *data, uint32_t off, uint32_t bits);
/* The type behind typedefs, const, volatile, restrict and type tags (*id becomes its id). */
const struct btf_type *btf_skip_mods(const struct btf *btf, uint32_t *id);
/* The enumerator of t (an enum or enum64) with value v, or NULL. */
const char *btf_enum_name(const struct btf *btf, const struct btf_type *t, uint64_t v, bool is_signed);
/* Whether the type is a char (what makes an array a string). */
bool btf_is_char(const struct btf *btf, uint32_t id);
/* path NULL: the whole key or value; else "a.b" through struct members. Fills why on failure. */
int btf_field_resolve(const struct btf *btf, uint32_t type_id, size_t size, const char *path, BtfField *ret,
                      char *why, size_t why_size);
bool btf_field_is_number(const BtfField *f);
uint64_t btf_field_load(const BtfField *f, const uint8_t *data);
int64_t btf_field_signed(const BtfField *f, uint64_t v);
double btf_field_number(const BtfField *f, const uint8_t *data);
/* A label value: the number, the enumerator's name, a char array's text, else hex. */
void btf_field_format(const BtfField *f, const uint8_t *data, char *buf, size_t size);
