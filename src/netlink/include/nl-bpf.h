/* nl-bpf.h: bpf(2) through libbpf: objects, their inspection, programs loaded and held */
#pragma once

#include "nl.h"

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
