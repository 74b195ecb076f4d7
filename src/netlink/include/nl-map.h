/* nl-map.h: reading and writing the maps of loaded programs */
#pragma once

#include "nl.h"
#include "nl-bpf.h"

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
