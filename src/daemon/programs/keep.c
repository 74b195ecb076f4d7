/* keep.c: where a restart finds a program again: systemd's fd store (the program and its maps, each under
 * a name that says what it is) and a pin in bpffs; what the fd store gave back at start until a document
 * takes it, and what no document took afterwards let go. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "fileio.h"
#include "keep.h"
#include "log.h"
#include "nl-bpf.h"
#include "nl-map.h"
#include "nl-tcx.h"

/* "<hex>-<program>", an action's "<hex>-act-<program>" (a C name has no '-'): bpffs refuses names with
 * a dot. */
#define PIN_ACTION_PREFIX "act-"

struct Keeper {
        char *bpffs_dir;
        bool pin_programs; /* bpffs_dir is on a bpf filesystem: programs are pinned in progs/ */
        DaemonPassedFd *passed; /* what the fd store gave back, until a document takes it */
        size_t n_passed;
};

static const char *digest_hex(const char *digest) {
        return digest + strlen("sha256:");
}

/* "prog.<hex>.<program>" and "map.<hex>.<program>.<map>" (an action's: "act." and "actmap."): what each
 * fd in the store is; an instance's "iprog.<hex>.<instance>.<program>", "imap.<hex>.<instance>.<program>.
 * <map>" ("iact.", "iactmap."). */
static bool fdname(char buf[KEEP_FDNAME_MAX + 1], const ProgramRef *ref, const char *map) {
        const char *act = ref->kind == NL_PROG_ACTION ? "act" : "", *i = ref->instance ? "i" : "";
        char inst[20] = "";
        int n;

        if (ref->instance)
                snprintf(inst, sizeof(inst), "%s.", ref->instance);
        n = map ? snprintf(buf, KEEP_FDNAME_MAX + 1, "%s%smap.%s.%s%s.%s", i, act, digest_hex(ref->digest),
                           inst, ref->program, map)
                : snprintf(buf, KEEP_FDNAME_MAX + 1, "%s%s.%s.%s%s", i,
                           ref->kind == NL_PROG_ACTION ? "act" : "prog", digest_hex(ref->digest), inst,
                           ref->program);
        return n > 0 && n <= KEEP_FDNAME_MAX;
}

/* "<hex>-<program>", an action's "<hex>-act-<program>", an instance's "…-<program>-<instance>". */
bool keeper_pin_path(const Keeper *k, char buf[PATH_MAX], const ProgramRef *ref) {
        const char *act = ref->kind == NL_PROG_ACTION ? PIN_ACTION_PREFIX : "";
        int n = snprintf(buf, PATH_MAX, "%s/progs/%s-%s%s%s%s", k->bpffs_dir, digest_hex(ref->digest), act,
                         ref->program, ref->instance ? "-" : "", strempty(ref->instance));
        return k->pin_programs && n > 0 && n < PATH_MAX &&
               strlen(ref->program) + strlen(act) + 65 + (ref->instance ? 17 : 0) <= NAME_MAX;
}

int keeper_take(Keeper *k, const ProgramRef *ref) {
        char name[KEEP_FDNAME_MAX + 1];

        if (!fdname(name, ref, NULL))
                return -1;
        for (size_t i = 0; i < k->n_passed; i++)
                if (k->passed[i].name && streq(k->passed[i].name, name)) {
                        int fd = k->passed[i].fd;
                        free(k->passed[i].name);
                        k->passed[i] = k->passed[--k->n_passed];
                        return fd;
                }
        return -1;
}

int keeper_maps(const Keeper *k, const ProgramRef *ref, NlMap **ret, size_t *ret_n) {
        char prefix[KEEP_FDNAME_MAX + 1];
        NlMap *v;
        size_t n = 0;

        *ret = NULL;
        *ret_n = 0;
        if (!fdname(prefix, ref, ""))
                return 0;
        v = calloc(k->n_passed + 1, sizeof(NlMap));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < k->n_passed; i++)
                if (strncmp(k->passed[i].name, prefix, strlen(prefix)) == 0 &&
                    nl_map_from_fd(k->passed[i].fd, &v[n], NULL) >= 0)
                        n++;
        *ret = v;
        *ret_n = n;
        return 0;
}

bool keeper_holds(const Keeper *k, const ProgramRef *ref) {
        char name[KEEP_FDNAME_MAX + 1], path[PATH_MAX];

        if (fdname(name, ref, NULL))
                for (size_t i = 0; i < k->n_passed; i++)
                        if (streq(k->passed[i].name, name))
                                return true;
        return keeper_pin_path(k, path, ref) && access(path, F_OK) == 0;
}

static void fdstore_remove(const char *name) {
        _cleanup_free_ char *msg = NULL;

        if (asprintf(&msg, "FDSTOREREMOVE=1\nFDNAME=%s", name) >= 0)
                (void) sd_notify(0, msg);
}

/* Puts fd in the fd store under name, replacing what the store held under it. */
static void fdstore_put(const char *name, int fd, bool map) {
        _cleanup_free_ char *msg = NULL;
        int r;

        fdstore_remove(name);
        /* A map fd polls as EPOLLERR: without FDPOLL=0 systemd would drop it at once. */
        if (asprintf(&msg, "FDSTORE=1\nFDNAME=%s%s", name, map ? "\nFDPOLL=0" : "") < 0)
                return;
        r = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
        if (r < 0)
                log_warning("cannot put %s in the fd store: %s", name, strerror(-r));
}

void keeper_keep(Keeper *k, const ProgramRef *ref, NlProgram *prog, const NlMap *maps, size_t n_maps,
                 bool from_store) {
        char name[KEEP_FDNAME_MAX + 1], path[PATH_MAX];
        _cleanup_error_ Error e = ERROR_NULL;
        struct stat st;

        if (!from_store && fdname(name, ref, NULL)) {
                fdstore_put(name, nl_program_fd(prog), false);
                for (size_t i = 0; i < n_maps; i++)
                        if (fdname(name, ref, maps[i].name))
                                fdstore_put(name, maps[i].fd, true);
        }
        if (keeper_pin_path(k, path, ref) && stat(path, &st) < 0 && nl_program_pin(prog, path, &e) < 0)
                log_warning("%s", e.message);
}

void keeper_unkeep(Keeper *k, const ProgramRef *ref, const NlMap *maps, size_t n_maps) {
        char name[KEEP_FDNAME_MAX + 1], path[PATH_MAX];

        if (fdname(name, ref, NULL))
                fdstore_remove(name);
        for (size_t i = 0; i < n_maps; i++)
                if (fdname(name, ref, maps[i].name))
                        fdstore_remove(name);
        if (keeper_pin_path(k, path, ref) && unlink(path) < 0 && errno != ENOENT)
                log_warning("cannot unpin %s: %m", path);
}

int keeper_new(const char *bpffs_dir, const DaemonPassedFd *passed, size_t n_passed, Keeper **ret) {
        Keeper *k = calloc(1, sizeof(*k));
        char dir[PATH_MAX];

        if (!k || (bpffs_dir && !(k->bpffs_dir = strdup(bpffs_dir))) ||
            !(k->passed = calloc(n_passed + 1, sizeof(DaemonPassedFd)))) {
                if (k)
                        free(k->bpffs_dir);
                free(k);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n_passed; i++) {
                k->passed[i].fd = passed[i].fd;
                if (!(k->passed[i].name = strdup(passed[i].name))) {
                        keeper_free(k);
                        return -ENOMEM;
                }
                k->n_passed++;
        }
        if (n_passed)
                log_info("the fd store gave back %zu fd(s)", n_passed);
        if (k->bpffs_dir) {
                snprintf(dir, sizeof(dir), "%s/progs", k->bpffs_dir);
                k->pin_programs =
                        (nl_bpffs_check(k->bpffs_dir, NULL) >= 0 || mkdir_p(k->bpffs_dir, 0700) >= 0) &&
                        nl_bpffs_check(k->bpffs_dir, NULL) >= 0 && mkdir_p(dir, 0700) >= 0;
                if (!k->pin_programs)
                        log_notice("%s is not on a bpf filesystem: programs are not pinned; a restart takes "
                                   "them "
                                   "from the fd store or by the id attached",
                                   k->bpffs_dir);
        }
        *ret = k;
        return 0;
}

Keeper *keeper_free(Keeper *k) {
        if (!k)
                return NULL;
        for (size_t i = 0; i < k->n_passed; i++) {
                safe_close(k->passed[i].fd);
                free(k->passed[i].name);
        }
        free(k->passed);
        free(k->bpffs_dir);
        free(k);
        return NULL;
}

void keeper_settle(Keeper *k, bool (*used)(const ProgramRef *ref, void *userdata), void *userdata) {
        _cleanup_(closedirp) DIR *dh = NULL;
        char dir[PATH_MAX];
        struct dirent *de;

        /* What the fd store gave back and no document took is not wanted any more. */
        for (size_t i = 0; i < k->n_passed; i++) {
                log_info("fd store: %s is not used by any document; dropped", k->passed[i].name);
                fdstore_remove(k->passed[i].name);
                safe_close(k->passed[i].fd);
                free(k->passed[i].name);
        }
        k->n_passed = 0;
        if (!k->pin_programs)
                return;
        snprintf(dir, sizeof(dir), "%s/progs", k->bpffs_dir);
        dh = opendir(dir);
        while (dh && (de = readdir(dh))) {
                const char *dash = strchr(de->d_name, '-');
                char digest[SHA256_DIGEST_STRING_MAX];
                bool in_use = false;

                if (de->d_name[0] == '.')
                        continue;
                if (dash && dash - de->d_name == 64) {
                        const char *action = startswith(dash + 1, PIN_ACTION_PREFIX);
                        char program[NAME_MAX + 1];
                        snprintf(digest, sizeof(digest), "sha256:%.64s", de->d_name);
                        snprintf(program, sizeof(program), "%s", action ?: dash + 1);
                        /* a C name has no '-': what follows one is the instance */
                        char *instance = strchr(program, '-');
                        if (instance)
                                *instance++ = 0;
                        ProgramRef ref = { .digest = digest,
                                           .program = program,
                                           .kind = action ? NL_PROG_ACTION : NL_PROG_CLASSIFIER,
                                           .instance = instance };
                        in_use = used(&ref, userdata);
                }
                if (!in_use && unlinkat(dirfd(dh), de->d_name, 0) >= 0)
                        log_info("unpinned %s/%s: no document uses it", dir, de->d_name);
        }
}
