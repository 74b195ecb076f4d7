/* keep.h: where a restart finds a program again (keep.c): systemd's fd store and bpffs pins. */
#pragma once

#include <limits.h>

#include "registry.h"
#include "nl-bpf.h"

/* systemd refuses an FDNAME longer than this. */
#define KEEP_FDNAME_MAX 255

typedef struct Keeper Keeper;

/* Takes the fds systemd's fd store gave back (names copied). bpffs_dir NULL: nothing is pinned. */
int keeper_new(const char *bpffs_dir, const DaemonPassedFd *passed, size_t n_passed, Keeper **ret);
Keeper *keeper_free(Keeper *k);
/* The fd the store gave back for the program, now the caller's; -1 when there is none. */
int keeper_take(Keeper *k, const ProgramRef *ref);
/* The maps the fd store gave back under the program's names (dups the caller frees). */
int keeper_maps(const Keeper *k, const ProgramRef *ref, NlMap **ret, size_t *ret_n);
/* Whether the fd store gave it back or a pin holds it (a restart may take it without a load). */
bool keeper_holds(const Keeper *k, const ProgramRef *ref);
/* The program's pin (false: programs are not pinned, or the name does not fit). */
bool keeper_pin_path(const Keeper *k, char buf[PATH_MAX], const ProgramRef *ref);
/* Makes the program (and its maps) findable after a restart: fd store (unless it came from there), pin. */
void keeper_keep(Keeper *k, const ProgramRef *ref, NlProgram *prog, const NlMap *maps, size_t n_maps,
                 bool from_store);
/* Forgets its fd store entries and its pin: a stopped clsd keeps only what is attached. */
void keeper_unkeep(Keeper *k, const ProgramRef *ref, const NlMap *maps, size_t n_maps);
/* After the first reconcile: what the fd store gave back and no one took goes, and every pin used()
 * does not want. */
void keeper_settle(Keeper *k, bool (*used)(const ProgramRef *ref, void *userdata), void *userdata);
