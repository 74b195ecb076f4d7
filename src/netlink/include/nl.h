/* nl.h: the kernel. rtnetlink through libmnl (links, clsact, cls_bpf filters) and bpf(2) through
 * libbpf (objects, programs). Returns plain structs describing kernel state; holds no policy. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "macros.h"

/* Every filter clsd installs carries TCA_BPF_NAME "clsd:<filter name>": the mark of ownership. */
#define NL_FILTER_NAME_PREFIX "clsd:"
#define NL_TAG_STRING_MAX 17
/* One request message; ours are a few hundred bytes. */
#define NL_MSG_BUFFER_SIZE 8192
/* One read of answers or events: the kernel sends dumps in chunks of up to 32 KiB. */
#define NL_RECV_BUFFER_SIZE 32768

struct nlmsghdr;

/* ---- rtnetlink socket (rtnl.c) ---- */
typedef struct NlSocket NlSocket;

/* groups: RTMGRP_* bits to join (0 for a request socket). */
int nl_socket_open(unsigned groups, NlSocket **ret, Error *reterr);
NlSocket *nl_socket_free(NlSocket *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(NlSocket *, nl_socket_free);
int nl_socket_fd(const NlSocket *s);
/* Like mnl_nlmsg_ok(), which casts nlmsg_len to int, so that a length of 2^31 or more passes its
 * check: a message header that fits in len bytes and a length that does too. */
bool nl_msg_ok(const struct nlmsghdr *nlh, size_t len);
/* Reads pending events; calls cb per message. -ENOBUFS when the kernel dropped events. */
typedef int (*NlEventFunc)(const struct nlmsghdr *nlh, void *userdata);
int nl_socket_read_events(NlSocket *s, NlEventFunc cb, void *userdata);

/* ---- links (link.c) ---- */
typedef struct NlLink {
        int ifindex;
        char ifname[IF_NAMESIZE];
        unsigned flags;
        char kind[16]; /* IFLA_INFO_KIND: "veth", "vlan", "bond", …; "" for a device without one */
        int master; /* IFLA_MASTER's ifindex (a bridge, a bond), or 0 */
} NlLink;

/* The link's kind as a policy matches it: its IFLA_INFO_KIND, "loopback", or "physical" (none). */
const char *nl_link_kind(const NlLink *l);

int nl_link_list(NlSocket *s, NlLink **ret, size_t *ret_n, Error *reterr);
/* -ENODEV when there is no such interface. */
int nl_link_by_name(NlSocket *s, const char *ifname, NlLink *ret, Error *reterr);
/* Parses an RTM_NEWLINK/RTM_DELLINK message. */
int nl_link_parse(const struct nlmsghdr *nlh, NlLink *ret);

/* ---- tc: clsact and cls_bpf filters (tc.c, tc-msg.c) ---- */
typedef enum NlHook {
        NL_HOOK_INGRESS,
        NL_HOOK_EGRESS,
        _NL_HOOK_MAX,
} NlHook;

uint32_t nl_hook_parent(NlHook h);

/* act_bpf actions after a classifier: at most this many per filter (tc allows 32); a bound on the
 * work of one filter and on the size of NlFilter. */
#define NL_ACTIONS_MAX 8
#define NL_ACTION_NAME_MAX 64

/* One action of a filter as the kernel shows it. */
typedef struct NlAction {
        char kind[16]; /* "bpf" for act_bpf */
        char name[NL_ACTION_NAME_MAX]; /* act_bpf: TCA_ACT_BPF_NAME */
        uint32_t index; /* the kernel's action index */
        int32_t control; /* act_bpf: the verdict for a program's TC_ACT_UNSPEC (TC_ACT_PIPE, …) */
        uint32_t prog_id;
        char tag[NL_TAG_STRING_MAX];
        uint64_t packets; /* what went through it (TCA_ACT_STATS) */
        uint64_t bytes;
        uint32_t drops;
        bool clsd_owned; /* name starts with NL_FILTER_NAME_PREFIX */
} NlAction;

typedef struct NlFilter {
        NlHook hook;
        uint32_t parent;
        uint16_t pref;
        uint16_t protocol; /* host order ETH_P_* */
        uint32_t handle;
        uint32_t chain; /* TCA_CHAIN; clsd's filters are all in chain 0 */
        char kind[16];
        /* cls_bpf only: */
        char name[256];
        uint32_t prog_id;
        char tag[NL_TAG_STRING_MAX];
        uint32_t flags; /* TCA_BPF_FLAGS */
        uint32_t classid;
        bool direct_action;
        bool clsd_owned; /* name starts with NL_FILTER_NAME_PREFIX */
        /* cls_bpf's actions (TCA_BPF_ACT), in the order they run; more than NL_ACTIONS_MAX set
         * actions_truncated and keep the first ones. */
        NlAction actions[NL_ACTIONS_MAX];
        size_t n_actions;
        bool actions_truncated;
} NlFilter;

/* An act_bpf action to create with a filter: runs prog_fd, named name (with the prefix); a program's
 * TC_ACT_UNSPEC goes on to the next action (TC_ACT_PIPE, as tc's default). */
typedef struct NlActionSpec {
        int prog_fd;
        const char *name;
} NlActionSpec;

typedef struct NlBpfFilterSpec {
        int ifindex;
        NlHook hook;
        uint32_t parent; /* 0: the clsact hook's; else a classful qdisc or class ("1:") */
        uint16_t pref;
        uint32_t handle;
        int prog_fd;
        const char *name; /* full TCA_BPF_NAME, with the prefix */
        bool direct_action;
        uint32_t classid; /* 0: none */
        const NlActionSpec *actions; /* act_bpf actions run when the classifier matches */
        size_t n_actions;
} NlBpfFilterSpec;

/* Builds the request into buf (at least NL_MSG_BUFFER_SIZE); exposed for tests. */
struct nlmsghdr *nl_msg_bpf_filter(void *buf, const NlBpfFilterSpec *f, bool replace, uint32_t seq);
/* Deletes exactly one filter: a pref can hold foreign filters (other handles, other protocols) too. */
struct nlmsghdr *nl_msg_filter_del(void *buf, int ifindex, uint32_t parent, uint16_t pref, uint16_t protocol,
                                   uint32_t handle, uint32_t seq);
struct nlmsghdr *nl_msg_filter_dump(void *buf, int ifindex, uint32_t parent, uint32_t seq);
struct nlmsghdr *nl_msg_clsact(void *buf, int ifindex, bool add, uint32_t seq);
/* Parses one RTM_NEWTFILTER message. 0 on success, -ENOMSG when it is not a filter message. */
int nl_filter_parse(const struct nlmsghdr *nlh, NlFilter *ret);
/* A filter or qdisc event (new or deleted): 0 and its interface, or -ENOMSG for anything else. An
 * action event (someone replaced or removed an action; actions belong to a namespace, not to an
 * interface) is 0 with ifindex 0. */
int nl_tc_event_parse(const struct nlmsghdr *nlh, int *ret_ifindex);

/* The interfaces of the namespace that have a clsact (or ingress) qdisc, from one dump of its qdiscs:
 * only those can have filters on a clsact hook. */
int nl_hook_qdiscs(NlSocket *s, int **ret, size_t *ret_n, Error *reterr);
int nl_clsact_add(NlSocket *s, int ifindex, Error *reterr);
/* nl_clsact_add() sent in one sendmsg with the socket's next request, ahead of it (one round trip for
 * both); its answer is in *ret and reterr when that request returns, or after nl_flush(). -EBUSY: a
 * request is deferred already (send this one alone). */
int nl_clsact_add_deferred(NlSocket *s, int ifindex, int *ret, Error *reterr);
/* Sends a deferred request that no other took along, and reads its answer. */
int nl_flush(NlSocket *s);
int nl_clsact_del(NlSocket *s, int ifindex, Error *reterr);
/* Dumps all filters of both clsact hooks and of the root qdisc (where classic-mode filters go). */
int nl_filter_dump(NlSocket *s, int ifindex, NlFilter **ret, size_t *ret_n, Error *reterr);
/* Only some of them: a dump per clsact hook asked for, and the root qdisc's (classic mode). */
enum {
        NL_DUMP_INGRESS = 1 << 0,
        NL_DUMP_EGRESS = 1 << 1,
        NL_DUMP_ROOT = 1 << 2,
};
int nl_filter_dump_some(NlSocket *s, int ifindex, unsigned what, NlFilter **ret, size_t *ret_n,
                        Error *reterr);
/* Adds (replace=false, NLM_F_EXCL) or replaces in place (NLM_F_REPLACE) a cls_bpf filter, with its
 * actions: a replace swaps the classifier and its actions at once. */
int nl_bpf_filter_set(NlSocket *s, const NlBpfFilterSpec *f, bool replace, Error *reterr);
/* The same, read back in the same round trip: the kernel echoes the filter as it made it (NLM_F_ECHO)
 * into *ret; -EIO when it did not. */
int nl_bpf_filter_set_echo(NlSocket *s, const NlBpfFilterSpec *f, bool replace, NlFilter *ret,
                           Error *reterr);
int nl_filter_del(NlSocket *s, int ifindex, uint32_t parent, uint16_t pref, uint16_t protocol,
                  uint32_t handle, Error *reterr);

/* ---- act_bpf (act.c) ---- */
struct nlmsghdr *nl_msg_act_bpf_probe(void *buf, uint32_t seq);
/* Whether this kernel has the act_bpf action; never creates one. */
int nl_act_bpf_probe(NlSocket *s, bool *ret_available);

/* ---- bpf objects and programs (bpf.c) ---- */
/* What a tc program is loaded as: a cls_bpf classifier (sched_cls) or an act_bpf action (sched_act).
 * As tc does, the use decides, not the ELF section: libbpf infers a type only from section names it
 * knows ("tc", "classifier", "action"), and older tc programs sit in sections of their own names. */
typedef enum NlProgKind {
        NL_PROG_CLASSIFIER,
        NL_PROG_ACTION,
        _NL_PROG_KIND_MAX,
} NlProgKind;

const char *nl_prog_kind_to_string(NlProgKind k);

typedef struct NlProgramInfo {
        char *name;
        char *section;
        const char *type; /* libbpf's name from the section: "sched_cls", "xdp", …; "unknown" */
        uint32_t type_id; /* BPF_PROG_TYPE_*; 0 (unspec) for a section libbpf does not know */
} NlProgramInfo;

/* How well the program fits a use, for picking the object's program when a document names none:
 * 0 when its section says this kind, 1 when libbpf does not know its section, 2 when it is the other
 * tc kind (still loadable as this one, as tc does); -1 when tc cannot run it at all (xdp, kprobe, …). */
int nl_program_tc_rank(const NlProgramInfo *pi, NlProgKind kind);
/* Why tc cannot run the program (rank -1), or how clsd will load it; for people. */
const char *nl_program_tc_note(const NlProgramInfo *pi);

typedef struct NlMapInfo {
        char *name;
        const char *type;
        uint32_t type_id; /* BPF_MAP_TYPE_* */
        uint32_t key_size;
        uint32_t value_size;
        uint32_t max_entries;
        uint32_t flags;
        bool internal; /* .data, .bss, .rodata, …: a build's own, never taken over */
} NlMapInfo;

typedef struct NlObjectInfo {
        NlProgramInfo *programs;
        size_t n_programs;
        NlMapInfo *maps;
        size_t n_maps;
} NlObjectInfo;

/* Opens the ELF without loading anything; reterr "invalid_object" when it is not a BPF object. */
int nl_object_inspect(const void *data, size_t size, NlObjectInfo **ret, Error *reterr);
NlObjectInfo *nl_object_info_free(NlObjectInfo *i);
DEFINE_TRIVIAL_CLEANUP_FUNC(NlObjectInfo *, nl_object_info_free);

typedef struct NlProgram NlProgram;

/* A map in the kernel, with an fd of its own. */
typedef struct NlMap {
        int fd;
        uint32_t id;
        char name[16]; /* the kernel's name: the object's, cut to 15 characters */
        uint32_t type;
        uint32_t key_size;
        uint32_t value_size;
        uint32_t max_entries;
        uint32_t flags;
        uint32_t btf_id; /* 0: the map has no BTF */
        uint32_t btf_key_type_id;
        uint32_t btf_value_type_id;
} NlMap;

/* The maps a program uses, each with a new fd. */
int nl_program_maps(int prog_fd, NlMap **ret, size_t *ret_n, Error *reterr);
/* Describes the map behind fd (duplicated). */
int nl_map_from_fd(int fd, NlMap *ret, Error *reterr);
void nl_maps_free(NlMap *maps, size_t n);
/* "hash", "percpu_array", …; "unknown" for a type libbpf does not know. */
const char *nl_map_type_name(uint32_t type);

/* ---- reading maps (map.c) ---- */
/* The most entries one read returns; larger maps are read in pages. */
#define NL_MAP_PAGE_MAX 100000u
/* A cursor: where a read stopped, to go on from there. */
#define NL_MAP_CURSOR_MAX 65

typedef struct NlMapPage {
        uint8_t *keys; /* n × key_size */
        uint8_t *values; /* n × value_stride */
        size_t n;
        size_t value_stride; /* value_size, or for a per-CPU map value_size rounded up to 8, × n_cpus */
        unsigned n_cpus; /* 1, or the possible CPUs of a per-CPU map */
        bool batched; /* read with BPF_MAP_LOOKUP_BATCH (else key by key) */
        bool more; /* a next page may have entries: cursor says where it starts */
        uint8_t cursor[NL_MAP_CURSOR_MAX];
        size_t cursor_size;
} NlMapPage;

/* Whether the kernel lets user space read this type's values (ring buffers, perf arrays, … do not). */
bool nl_map_readable(uint32_t type);
bool nl_map_percpu(uint32_t type);
/* One entry written (BPF_ANY; value: one CPU's, written to every CPU of a per-CPU map) or deleted.
 * reterr: "map_unwritable" for a type whose entries are not plain data (program arrays, …),
 * "entry_not_found", "map_full", "kernel_error". */
int nl_map_update(const NlMap *m, const void *key, const void *value, Error *reterr);
int nl_map_delete(const NlMap *m, const void *key, Error *reterr);
bool nl_map_writable(uint32_t type);

/* Up to limit entries (at most NL_MAP_PAGE_MAX) from cursor (NULL: from the start), batched where the
 * map type supports it. reterr "bad_cursor" for a cursor that is not one of this map's. */
int nl_map_read(const NlMap *m, const uint8_t *cursor, size_t cursor_size, size_t limit, NlMapPage *ret,
                Error *reterr);
void nl_map_page_done(NlMapPage *p);
/* nl_program_maps() of the program with this id; -ENOENT once it is gone. */
int nl_program_maps_by_id(uint32_t prog_id, NlMap **ret, size_t *ret_n, Error *reterr);
/* The kernel's BTF object of this id (a map's or a program's), or NULL. */
struct btf;
struct btf *nl_btf_load(uint32_t btf_id);
void nl_btf_free(struct btf *b);
/* The program's statistics, counted while BPF_ENABLE_STATS is held (0 otherwise). */
typedef struct NlProgramStats {
        uint32_t id; /* the kernel's id of the program */
        uint64_t run_count;
        uint64_t run_time_ns;
        uint64_t recursion_misses;
} NlProgramStats;

int nl_program_stats(uint32_t prog_id, NlProgramStats *ret, Error *reterr);
/* The same through a program fd clsd holds: one system call. */
int nl_program_stats_fd(int fd, NlProgramStats *ret, Error *reterr);

/* What clsd has asked rtnetlink, since it started: dumps (reads of a whole table) and the rest (gets and
 * changes), and the sendmsg calls that carried them (two requests can go in one). Reads served from
 * clsd's own view ask nothing. */
typedef struct NlRequestCounts {
        uint64_t dumps;
        uint64_t others;
        uint64_t sends;
} NlRequestCounts;

NlRequestCounts nl_request_counts(void);
/* Holds BPF_ENABLE_STATS(BPF_STATS_RUN_TIME) while the fd is open. */
int nl_bpf_stats_enable(int *ret_fd, Error *reterr);

/* A rejected program's verifier log, in a 422's detail, is at most this long: its first bytes. */
#define NL_VERIFIER_LOG_MAX (4u * 1024 * 1024)

/* Loads one program of an object (the others are not loaded); on a verifier rejection reterr is
 * "verifier_rejected" with the verifier's log as detail. The verifier runs once for a program it
 * accepts, and once more, with a log of at most NL_VERIFIER_LOG_MAX, for one it rejects. Each map of the
 * object (not .data, .bss or .rodata) named like one of reuse is that map, contents and all; one whose type,
 * key size, value size, max_entries or flags differ is refused with reterr "map_incompatible". */
int nl_program_load(const void *data, size_t size, const char *object_name, const char *program,
                    NlProgKind kind, const NlMap *reuse, size_t n_reuse, NlProgram **ret, Error *reterr);
/* What nl_program_load() would refuse when taking over reuse, from the object's description alone
 * (a dry run): reterr "map_incompatible". */
int nl_maps_check_reuse(const NlObjectInfo *info, const NlMap *reuse, size_t n_reuse, Error *reterr);
/* Takes a reference to a program already in the kernel, by id, without loading anything. */
int nl_program_open_id(uint32_t id, NlProgram **ret, Error *reterr);
/* Takes fd (the caller's no more): a tc program a worker loaded. */
int nl_program_take_fd(int fd, NlProgram **ret, Error *reterr);
/* Takes a reference to the program behind fd (duplicated), e.g. one systemd's fd store gave back;
 * reterr "wrong_program_type" unless it is of the kind's type (sched_cls, sched_act). */
int nl_program_from_fd(int fd, NlProgKind kind, NlProgram **ret, Error *reterr);
/* bpffs pins: the program outlives every fd of it. Pinning replaces what is at path. */
int nl_program_pin(const NlProgram *p, const char *path, Error *reterr);
int nl_program_open_pinned(const char *path, NlProgKind kind, NlProgram **ret, Error *reterr);
NlProgram *nl_program_free(NlProgram *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(NlProgram *, nl_program_free);
int nl_program_fd(const NlProgram *p);
uint32_t nl_program_id(const NlProgram *p);
const char *nl_program_tag(const NlProgram *p);

/* ---- named network namespaces (netns.c) ---- */
/* An fd of the namespace dir/name; -ENOENT when there is none, -EAGAIN while it is only a placeholder
 * (ip-netns creates the file, then mounts the namespace on it). */
int nl_netns_open(const char *dir, const char *name, int *ret_fd, Error *reterr);
/* Moves the calling thread into the namespace; nl_netns_leave() goes back (-1: nothing to do). */
int nl_netns_enter(int netns_fd, int *ret_saved_fd);
void nl_netns_leave(int saved_fd);
/* nl_socket_open() inside the namespace (netns_fd -1: the caller's); the socket stays there. */
int nl_socket_open_in(int netns_fd, unsigned groups, NlSocket **ret, Error *reterr);

/* ---- tcx: tc programs through bpf_link, pinned in bpffs (tcx.c) ---- */
/* The most entries one hook's query reads; more than clsd would ever put there with others. */
#define NL_TCX_MAX 256

typedef struct NlTcxEntry {
        uint32_t prog_id;
        uint32_t link_id; /* 0 for a program attached without a link */
} NlTcxEntry;

typedef struct NlTcxLink {
        uint32_t link_id;
        uint32_t prog_id;
        int ifindex; /* 0 once detached (by someone else, or the device went) */
        NlHook hook;
} NlTcxLink;

/* Whether the kernel has tcx (6.6+). */
int nl_tcx_probe(bool *ret_available);
/* The hook's programs in the order they run. */
int nl_tcx_query(int ifindex, NlHook hook, NlTcxEntry **ret, size_t *ret_n, Error *reterr);
/* A new link; with relative_link_fd >= 0, placed just before (or after) that link. */
int nl_tcx_attach(int prog_fd, int ifindex, NlHook hook, int relative_link_fd, bool before, int *ret_link_fd,
                  Error *reterr);
/* Replaces the link's program in place: its position is kept. */
int nl_tcx_update(int link_fd, int prog_fd, Error *reterr);
int nl_tcx_detach(int link_fd, Error *reterr);
/* -EMEDIUMTYPE when the fd is not a tcx link. */
int nl_tcx_link_info(int link_fd, NlTcxLink *ret);
/* reterr "tcx_unavailable" unless dir is on a bpf filesystem. */
int nl_bpffs_check(const char *dir, Error *reterr);
/* Pins fd as dir/name, replacing what was pinned there. */
int nl_pin(int fd, const char *dir, const char *name, Error *reterr);
/* An fd of what is pinned at dir/name, or -errno. */
int nl_pin_open(const char *dir, const char *name);
int nl_unpin(const char *dir, const char *name);
/* The names in dir (none if it does not exist), NULL-terminated. */
int nl_pins_list(const char *dir, char ***ret, size_t *ret_n);

/* ---- workers (worker.c): parsing objects and loading programs in a process of their own ---- */
/* Maps a load may take over (more: the rest start empty); objects' programs and maps a description
 * may hold; an inspection's answer; an object a worker reads. */
#define NL_JOB_REUSE_MAX 64
#define NL_OBJECT_PROGRAMS_MAX 4096
#define NL_OBJECT_MAPS_MAX 4096
#define NL_INSPECT_REPLY_MAX (8u * 1024 * 1024)
#define NL_OBJECT_SIZE_MAX (256u * 1024 * 1024)
/* What a worker answers when the inspection's seccomp filter trapped a system call (its number as the
 * message); nl_job_read_reply() makes it an internal_error that names the call. */
#define NL_SANDBOX_REFUSED "sandbox_refused"

typedef enum NlJobKind {
        NL_JOB_INSPECT = 1, /* describe an object: no privileges, a tight seccomp filter */
        NL_JOB_LOAD = 2, /* load one program of it */
        NL_JOB_NEXT = 3, /* the socket of the worker's next job (one fd): a spare's first, or after a load
                          * the next load of the same object */
} NlJobKind;

typedef struct NlJobReply {
        int r; /* 0, or -errno with error */
        Error error;
        NlObjectInfo *info; /* an inspection's */
        NlProgram *program; /* a load's */
} NlJobReply;

int nl_job_send_inspect(int sock, const void *data, size_t size);
/* What a worker loads: program of the object in object_fd as kind, the object named object_name (libbpf
 * names its maps after it), taking over the maps of reuse by name (at most NL_JOB_REUSE_MAX). */
typedef struct NlLoadSpec {
        int object_fd;
        const char *object_name;
        const char *program;
        NlProgKind kind;
        const NlMap *reuse;
        size_t n_reuse;
} NlLoadSpec;
int nl_job_send_load(int sock, const NlLoadSpec *spec);
/* Hands a worker that answered a load the socket of the next load job of the same object, in which its
 * request already waits: one process for several loads. */
int nl_job_send_next(int sock, int next_sock);
/* The worker's answer (one message): -EBADMSG when it is not one. */
int nl_job_read_reply(int sock, NlJobKind kind, NlJobReply *ret);
void nl_job_reply_done(NlJobReply *r);
/* The worker's side: reads one job from sock, does it, answers; the exit status. */
int nl_worker_serve(int sock);
/* Workers yield to clsd's loop (and to everything else on the host). */
#define NL_WORKER_NICE 10
/* A worker process's whole life (clsd-worker, or clsd --worker): dies with its parent, niced, serves
 * the job on fd and exits; never returns. */
_noreturn_ int nl_worker_main(int fd);
/* An object's description as an inspection sends it back; parse checks every field (names printable). */
int nl_object_info_serialize(const NlObjectInfo *info, char **ret, size_t *ret_size);
int nl_object_info_parse(const void *buf, size_t size, NlObjectInfo **ret, Error *reterr);
/* An inspection in a forked worker, waited for: a parser that crashes is reterr "invalid_object". */
int nl_object_inspect_forked(const void *data, size_t size, NlObjectInfo **ret, Error *reterr);

/* Sends libbpf's output to our log at debug level. */
void nl_bpf_setup_logging(void);
const char *nl_libbpf_version(void);
