/* registry.h: loaded programs shared by (object digest, program, classifier or action): attaching one
 * program to 500 interfaces loads and verifies it once. Each is kept where a restart finds it again:
 * systemd's fd store (with its maps) and a bpffs pin. Loading itself is not the registry's: a worker
 * loads (worker.h) and the registry takes the result. */
#pragma once

#include "daemon.h"
#include "nl-bpf.h"

typedef struct Registry Registry;
typedef struct Program Program;

/* What a program is: the filter's classifier (action -1) or its action number action. */
typedef struct ProgramRef {
        const char *digest;
        const char *program;
        NlProgKind kind;
        /* The filter's own instance (program_instance_name()) when "maps" gives it maps of its own;
         * NULL: the program every filter shares. */
        const char *instance;
        const AttachedFact *fact; /* what was attached last (NULL: nothing known) */
        const FilterSpec *filter; /* whose "maps" say which maps a new load takes over */
} ProgramRef;

/* instance NULL or "": the shared program. */
ProgramRef program_ref(const FilterSpec *f, int action, const FilterFact *fact, const char *instance);
/* The instance name of a filter with maps of its own: 16 hex digits of a hash of where it is (the
 * interface's table key, hook, filter name), the same at every start. */
void program_instance_name(const char *iface_key, Direction dir, const char *filter, char ret[17]);

/* Takes the fds systemd's fd store gave back (names copied). bpffs_dir NULL: nothing is pinned. */
int registry_new(const char *bpffs_dir, const DaemonPassedFd *passed, size_t n_passed, Registry **ret);
/* Closes every program; with exiting, their fd store entries and pins stay for the next start. */
Registry *registry_free(Registry *r, bool exiting);
/* From now on a program released is closed, not forgotten (clsd stops: the next start takes it back). */
void registry_exiting(Registry *r);

/* The program, already held, or taken back without loading: from the fd store, its pin, or the
 * program the kernel has attached (adopt_id, when it is the very one attached last: id and tag).
 * -EAGAIN when none of them has it: it must be loaded. */
int registry_acquire(Registry *r, const ProgramRef *ref, uint32_t adopt_id, Program **ret, Error *reterr);
/* The maps a new load of ref takes over: those of the program it replaces (reuse_id), or else those the
 * fd store gave back for ref's program, minus those the filter's "maps" opts out of and those whose
 * scope changed (shared, or the filter's own); and the maps the program's other loaded instances share. */
int registry_reuse_candidates(Registry *r, const ProgramRef *ref, uint32_t reuse_id, bool loading,
                              NlMap **ret, size_t *ret_n);
/* A program a worker loaded for ref becomes the registry's (and is kept for restarts). If another load
 * of the same program won the race, that one is returned and np is closed. */
int registry_add(Registry *r, const ProgramRef *ref, NlProgram *np, Program **ret, Error *reterr);
/* What loading ref would refuse when taking over reuse_id's maps (a dry run): "map_incompatible". */
int registry_check_reuse(Registry *r, const ProgramRef *ref, const NlObjectInfo *info, uint32_t reuse_id,
                         Error *reterr);
/* Whether the fd store or a pin kept ref's program from the last run. */
bool registry_kept(Registry *r, const ProgramRef *ref);
/* An object no trusted key verifies any more: none of its programs is acquired (registry_acquire():
 * "object_untrusted"), and filters that use it are left out of their interface's composition. 1 if it
 * was not revoked before. */
int registry_revoke(Registry *r, const char *digest, const char *why);
/* Whether it was revoked (a key that signed it came back). */
bool registry_unrevoke(Registry *r, const char *digest);
/* Why the object is revoked, or NULL. */
const char *registry_revoked(const Registry *r, const char *digest);
/* After the first reconcile: drops the fd store entries and pins no document took. */
void registry_settle(Registry *r);
Program *registry_ref(Program *p);
void registry_release(Registry *r, Program *p);
/* The loaded program, if any, without taking a reference. */
Program *registry_find(Registry *r, const ProgramRef *ref);
/* Whether any instance of ref's program (the shared one or a filter's own) is loaded. */
bool registry_has_sibling(Registry *r, const ProgramRef *ref);
int program_fd(const Program *p);
const char *program_tag(const Program *p);
uint32_t program_id(const Program *p);
