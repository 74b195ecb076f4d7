/* nl-tcx.h: tcx: tc programs attached through bpf_link, pinned in bpffs */
#pragma once

#include "nl.h"
#include "nl-bpf.h"

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
