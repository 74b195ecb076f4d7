/* tcx-pins.h: clsd's tcx links as pinned in bpffs (tcx-pins.c). */
#pragma once

#include <limits.h>

#include "iface.h"
#include "nl-tcx.h"

typedef struct TcxOurs {
        char pin[128];
        Direction dir;
        uint16_t pref;
        char name[FILTER_NAME_MAX + 1];
        int fd; /* the link, from its pin */
        NlTcxLink link; /* link.ifindex 0: its link no longer runs there (only the pin is left) */
} TcxOurs;

/* Where clsd pins the tcx links of a namespace (NULL: its own). */
void tcx_dir(const char *bpffs_dir, const char *netns, char buf[PATH_MAX]);
/* The pin's name of a link. */
void tcx_pin_name(int ifindex, Direction dir, uint16_t pref, const char *name, char buf[128]);
/* clsd's links of ifindex (every interface's with ifindex 0) in dir, sorted by (hook, pref). */
int tcx_ours_list(const char *dir, int ifindex, TcxOurs **ret, size_t *ret_n, Error *reterr);
void tcx_ours_free(TcxOurs *v, size_t n);
/* At start: pins whose links no longer run anywhere go. */
void tcx_sweep(const char *bpffs_dir, const char *netns_dir);
