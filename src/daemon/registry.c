/* registry.c: loaded programs shared by (object digest, program name, kind): attaching one program to
 * 500 interfaces loads and verifies it once; a classifier and an action of the same program are two
 * loads (sched_cls and sched_act), each with its own maps. A filter whose "maps" gives it maps of its own
 * ("shared": false) has a program instance of its own (one more load), named by the filter; its other
 * maps are those every instance of the program shares: a load takes them over from a program already
 * here. Each program is kept where a restart finds it
 * again: in systemd's fd store (with its maps) and pinned in bpffs. A restart takes a program back from
 * there, or by the id the kernel shows attached; only when none of them has it is it loaded (by a
 * worker), reusing the maps of the program it replaces. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "registry.h"
#include "sha256.h"

/* systemd refuses an FDNAME longer than this. */
#define FDNAME_MAX 255
/* "<hex>-<program>", an action's "<hex>-act-<program>" (a C name has no '-'): bpffs refuses names with
 * a dot. */
#define PIN_ACTION_PREFIX "act-"

struct Program {
        char *digest;
        char *name;
        NlProgKind kind;
        char *instance; /* the filter's, when it has maps of its own; NULL: shared by every filter */
        NlProgram *prog;
        NlMap *maps; /* in the fd store beside the program */
        bool *own; /* per map: this instance's own, not shared with the program's other instances */
        size_t n_maps;
        unsigned n_ref;
};

struct Registry {
        char *bpffs_dir;
        bool pin_programs; /* bpffs_dir is on a bpf filesystem: programs are pinned in progs/ */
        bool exiting; /* registry_free(): programs are closed, not released */
        Program **programs;
        size_t n_programs;
        DaemonPassedFd *passed; /* what the fd store gave back, until a document takes it */
        size_t n_passed;
        /* Stored objects no trusted key verifies any more (--trusted-keys, a key removed): no program of
         * theirs is handed out, adopted or loaded. Digest and why, by twos. */
        char **revoked;
        size_t n_revoked;
};

const char *registry_revoked(const Registry *r, const char *digest) {
        for (size_t i = 0; r && digest && i < r->n_revoked; i++)
                if (streq(r->revoked[2 * i], digest))
                        return r->revoked[2 * i + 1];
        return NULL;
}

int registry_revoke(Registry *r, const char *digest, const char *why) {
        char **v, *d, *w;

        if (registry_revoked(r, digest))
                return 0;
        v = realloc(r->revoked, (r->n_revoked + 1) * 2 * sizeof(char *));
        if (!v)
                return -ENOMEM;
        r->revoked = v;
        d = strdup(digest), w = strdup(why);
        if (!d || !w) {
                free(d), free(w);
                return -ENOMEM;
        }
        v[2 * r->n_revoked] = d, v[2 * r->n_revoked + 1] = w;
        r->n_revoked++;
        return 1;
}

bool registry_unrevoke(Registry *r, const char *digest) {
        for (size_t i = 0; i < r->n_revoked; i++)
                if (streq(r->revoked[2 * i], digest)) {
                        free(r->revoked[2 * i]), free(r->revoked[2 * i + 1]);
                        r->n_revoked--;
                        memmove(&r->revoked[2 * i], &r->revoked[2 * i + 2],
                                (r->n_revoked - i) * 2 * sizeof(char *));
                        return true;
                }
        return false;
}

int program_fd(const Program *p) {
        return nl_program_fd(p->prog);
}

const char *program_tag(const Program *p) {
        return nl_program_tag(p->prog);
}

uint32_t program_id(const Program *p) {
        return nl_program_id(p->prog);
}

ProgramRef program_ref(const FilterSpec *f, int action, const FilterFact *fact, const char *instance) {
        const char *inst = instance && instance[0] ? instance : NULL;

        if (action < 0)
                return (ProgramRef){ .digest = f->digest,
                                     .program = f->program,
                                     .kind = NL_PROG_CLASSIFIER,
                                     .instance = inst,
                                     .fact = fact ? &fact->program : NULL,
                                     .filter = f };
        return (ProgramRef){ .digest = f->actions[action].digest,
                             .program = f->actions[action].program,
                             .kind = NL_PROG_ACTION,
                             .instance = inst,
                             .fact = fact && (size_t) action < fact->n_actions ? &fact->actions[action]
                                                                               : NULL,
                             .filter = f };
}

void program_instance_name(const char *iface_key, Direction dir, const char *filter, char ret[17]) {
        char digest[SHA256_DIGEST_STRING_MAX], *s = NULL;

        if (asprintf(&s, "%s/%s/%s", iface_key, direction_to_string(dir), filter) < 0) {
                snprintf(ret, 17, "%016x", 0u);
                return;
        }
        sha256_digest_string(s, strlen(s), digest);
        free(s);
        snprintf(ret, 17, "%.16s", digest + strlen("sha256:"));
}

/* Whether p is an instance (any) of ref's program: same object, program and kind. */
static bool program_of(const Program *p, const ProgramRef *ref) {
        return streq(p->digest, ref->digest) && streq(p->name, ref->program) && p->kind == ref->kind;
}

Program *registry_find(Registry *r, const ProgramRef *ref) {
        for (size_t i = 0; i < r->n_programs; i++)
                if (program_of(r->programs[i], ref) && streq_ptr(r->programs[i]->instance, ref->instance))
                        return r->programs[i];
        return NULL;
}

bool registry_has_sibling(Registry *r, const ProgramRef *ref) {
        for (size_t i = 0; i < r->n_programs; i++)
                if (program_of(r->programs[i], ref))
                        return true;
        return false;
}

/* The map of this name that ref's program shares with its other instances, from one here, or NULL. */
static const NlMap *sibling_shared_map(Registry *r, const ProgramRef *ref, const char *name) {
        for (size_t i = 0; i < r->n_programs; i++) {
                Program *p = r->programs[i];
                if (!program_of(p, ref))
                        continue;
                for (size_t k = 0; k < p->n_maps; k++)
                        if (!p->own[k] && streq(p->maps[k].name, name))
                                return &p->maps[k];
        }
        return NULL;
}

static Program *registry_find_id(Registry *r, uint32_t id) {
        for (size_t i = 0; i < r->n_programs; i++)
                if (program_id(r->programs[i]) == id)
                        return r->programs[i];
        return NULL;
}

static const char *digest_hex(const char *digest) {
        return digest + strlen("sha256:");
}

/* "prog.<hex>.<program>" and "map.<hex>.<program>.<map>" (an action's: "act." and "actmap."): what each
 * fd in the store is; an instance's "iprog.<hex>.<instance>.<program>", "imap.<hex>.<instance>.<program>.
 * <map>" ("iact.", "iactmap."). */
static bool fdname(char buf[FDNAME_MAX + 1], const ProgramRef *ref, const char *map) {
        const char *act = ref->kind == NL_PROG_ACTION ? "act" : "", *i = ref->instance ? "i" : "";
        char inst[20] = "";
        int n;

        if (ref->instance)
                snprintf(inst, sizeof(inst), "%s.", ref->instance);
        n = map ? snprintf(buf, FDNAME_MAX + 1, "%s%smap.%s.%s%s.%s", i, act, digest_hex(ref->digest), inst,
                           ref->program, map)
                : snprintf(buf, FDNAME_MAX + 1, "%s%s.%s.%s%s", i,
                           ref->kind == NL_PROG_ACTION ? "act" : "prog", digest_hex(ref->digest), inst,
                           ref->program);
        return n > 0 && n <= FDNAME_MAX;
}

/* "<hex>-<program>", an action's "<hex>-act-<program>", an instance's "…-<program>-<instance>". */
static bool pin_path(Registry *r, char buf[PATH_MAX], const ProgramRef *ref) {
        const char *act = ref->kind == NL_PROG_ACTION ? PIN_ACTION_PREFIX : "";
        int n = snprintf(buf, PATH_MAX, "%s/progs/%s-%s%s%s%s", r->bpffs_dir, digest_hex(ref->digest), act,
                         ref->program, ref->instance ? "-" : "", strempty(ref->instance));
        return r->pin_programs && n > 0 && n < PATH_MAX &&
               strlen(ref->program) + strlen(act) + 65 + (ref->instance ? 17 : 0) <= NAME_MAX;
}

/* What p is, as a reference (for its names). */
static ProgramRef program_self(const Program *p) {
        return (ProgramRef){
                .digest = p->digest, .program = p->name, .kind = p->kind, .instance = p->instance
        };
}

/* The fd the store gave back under name, now the caller's; -1 when there is none. */
static int passed_take(Registry *r, const char *name) {
        for (size_t i = 0; i < r->n_passed; i++)
                if (r->passed[i].name && streq(r->passed[i].name, name)) {
                        int fd = r->passed[i].fd;
                        free(r->passed[i].name);
                        r->passed[i] = r->passed[--r->n_passed];
                        return fd;
                }
        return -1;
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

/* Makes p findable after a restart: fd store (unless it came from there) and bpffs pin. */
static void program_keep(Registry *r, Program *p, const FilterSpec *spec, bool from_store) {
        char name[FDNAME_MAX + 1], path[PATH_MAX];
        ProgramRef self = program_self(p);
        Error e = ERROR_NULL;
        struct stat st;

        if (nl_program_maps(program_fd(p), &p->maps, &p->n_maps, &e) < 0) {
                log_warning("program %s: %s", p->name, e.message);
                error_done(&e);
        }
        p->own = calloc(p->n_maps + 1, sizeof(bool));
        for (size_t i = 0; p->own && i < p->n_maps; i++)
                p->own[i] = p->instance && spec && !filter_map_shared(spec, p->maps[i].name);
        if (!p->own) {
                /* no room to say which are its own: none is offered to other instances */
                nl_maps_free(p->maps, p->n_maps);
                p->maps = NULL;
                p->n_maps = 0;
        }
        if (!from_store && fdname(name, &self, NULL)) {
                fdstore_put(name, program_fd(p), false);
                for (size_t i = 0; i < p->n_maps; i++)
                        if (fdname(name, &self, p->maps[i].name))
                                fdstore_put(name, p->maps[i].fd, true);
        }
        if (pin_path(r, path, &self) && stat(path, &st) < 0 && nl_program_pin(p->prog, path, &e) < 0) {
                log_warning("%s", e.message);
                error_done(&e);
        }
}

/* Forgets p's fd store entries and its pin: a stopped clsd keeps only what is attached. */
static void program_unkeep(Registry *r, Program *p) {
        char name[FDNAME_MAX + 1], path[PATH_MAX];
        ProgramRef self = program_self(p);

        if (fdname(name, &self, NULL))
                fdstore_remove(name);
        for (size_t i = 0; i < p->n_maps; i++)
                if (fdname(name, &self, p->maps[i].name))
                        fdstore_remove(name);
        if (pin_path(r, path, &self) && unlink(path) < 0 && errno != ENOENT)
                log_warning("cannot unpin %s: %m", path);
}

/* Whether p shares its map of this name with the program's other instances. */
static bool program_map_shared(const Program *p, const char *name) {
        for (size_t i = 0; i < p->n_maps; i++)
                if (streq(p->maps[i].name, name))
                        return !p->own[i];
        return true;
}

int registry_reuse_candidates(Registry *r, const ProgramRef *ref, uint32_t reuse_id, bool loading,
                              NlMap **ret, size_t *ret_n) {
        _cleanup_(nl_program_freep) NlProgram *old = NULL;
        const FilterSpec *f = ref->filter;
        const Program *was = reuse_id ? registry_find_id(r, reuse_id) : NULL;
        NlMap *v = NULL, *out;
        size_t n = 0, k = 0, room = 0;
        bool from_store = false;

        if (reuse_id && nl_program_open_id(reuse_id, &old, NULL) >= 0)
                (void) nl_program_maps(nl_program_fd(old), &v, &n, NULL);
        if (!v) {
                from_store = true; /* kept under this very instance's names: its maps as they were */
                char prefix[FDNAME_MAX + 1];
                if (fdname(prefix, ref, "")) {
                        v = calloc(r->n_passed + 1, sizeof(NlMap));
                        if (!v)
                                return -ENOMEM;
                        for (size_t i = 0; i < r->n_passed; i++) {
                                if (strncmp(r->passed[i].name, prefix, strlen(prefix)) != 0)
                                        continue;
                                if (nl_map_from_fd(r->passed[i].fd, &v[n], NULL) >= 0)
                                        n++;
                        }
                }
        }
        for (size_t i = 0; i < r->n_programs; i++)
                room += r->programs[i]->n_maps;
        out = calloc(n + room + 1, sizeof(NlMap));
        if (!out) {
                nl_maps_free(v, n);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                bool shared = filter_map_shared(f, v[i].name);
                /* a program not held any more (a restart between): shared, as programs are unless
                 * told otherwise, so that no map of everyone's becomes one filter's own */
                bool was_shared = was ? program_map_shared(was, v[i].name) : from_store ? shared : true;
                const char *why = !filter_map_reused(f, v[i].name) ? "\"reuse\": false"
                                  : shared != was_shared ? (shared ? "now shared" : "now the filter's own")
                                                         : NULL;

                if (!why && !(shared && sibling_shared_map(r, ref, v[i].name))) {
                        out[k++] = v[i];
                        continue;
                }
                if (why && loading)
                        log_info("filter %s: map %s starts empty (%s)", f->name, v[i].name, why);
                safe_close(v[i].fd);
        }
        free(v);
        /* What the program's other instances share, this one shares too. */
        for (size_t i = 0; i < r->n_programs; i++) {
                Program *p = r->programs[i];
                if (!program_of(p, ref))
                        continue;
                for (size_t m = 0; m < p->n_maps; m++) {
                        bool have = false;
                        if (p->own[m] || !filter_map_shared(f, p->maps[m].name))
                                continue;
                        for (size_t j = 0; j < k && !have; j++)
                                have = streq(out[j].name, p->maps[m].name);
                        if (!have && nl_map_from_fd(p->maps[m].fd, &out[k], NULL) >= 0)
                                k++;
                }
        }
        *ret = out;
        *ret_n = k;
        return 0;
}

int registry_check_reuse(Registry *r, const ProgramRef *ref, const NlObjectInfo *info, uint32_t reuse_id,
                         Error *reterr) {
        NlMap *reuse = NULL;
        size_t n_reuse = 0;
        int k;

        if (!info || !reuse_id)
                return 0; /* an object not stored yet is only inspected by a dry run */
        if (registry_reuse_candidates(r, ref, reuse_id, false, &reuse, &n_reuse) < 0)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        k = nl_maps_check_reuse(info, reuse, n_reuse, reterr);
        nl_maps_free(reuse, n_reuse);
        return k;
}

/* np if it is the program wanted: the attached one when adopt_id is given. */
static NlProgram *candidate(NlProgram *np, uint32_t adopt_id) {
        if (np && adopt_id && nl_program_id(np) != adopt_id)
                return nl_program_free(np); /* the attached one holds the maps that count */
        return np;
}

static int program_add(Registry *r, const ProgramRef *ref, NlProgram *np, bool from_store, Program **ret) {
        Program *p = calloc(1, sizeof(*p)),
                **n = realloc(r->programs, (r->n_programs + 1) * sizeof(Program *));

        if (n)
                r->programs = n;
        if (!p || !n || !(p->digest = strdup(ref->digest)) || !(p->name = strdup(ref->program)) ||
            (ref->instance && !(p->instance = strdup(ref->instance)))) {
                if (p) {
                        free(p->digest);
                        free(p->name);
                }
                free(p);
                nl_program_free(np);
                return -ENOMEM;
        }
        p->kind = ref->kind;
        p->prog = np;
        p->n_ref = 1;
        r->programs[r->n_programs++] = p;
        program_keep(r, p, ref->filter, from_store);
        *ret = p;
        return 0;
}

int registry_acquire(Registry *r, const ProgramRef *ref, uint32_t adopt_id, Program **ret, Error *reterr) {
        _cleanup_(nl_program_freep) NlProgram *np = NULL;
        Program *p = registry_find(r, ref);
        const char *what = ref->kind == NL_PROG_ACTION ? " as an action" : "";
        char name[FDNAME_MAX + 1], path[PATH_MAX];
        const char *how = NULL;
        bool from_store = false;
        Error e = ERROR_NULL;

        if (registry_revoked(r, ref->digest))
                return error_set(reterr, EPERM, "object_untrusted", "object %s: %s", ref->digest,
                                 registry_revoked(r, ref->digest));
        if (p) {
                p->n_ref++;
                *ret = p;
                return 0;
        }
        /* Where a restart finds the program, in order: the fd store, bpffs, the kernel's filters. */
        if (fdname(name, ref, NULL)) {
                int fd = passed_take(r, name);
                if (fd >= 0 && nl_program_from_fd(fd, ref->kind, &np, &e) < 0) {
                        log_warning("fd store: %s: %s", name, e.message);
                        error_done(&e);
                }
                safe_close(fd);
                if ((np = candidate(np, adopt_id)))
                        how = "from the fd store", from_store = true;
        }
        if (!np && pin_path(r, path, ref) && nl_program_open_pinned(path, ref->kind, &np, NULL) >= 0 &&
            (np = candidate(np, adopt_id)))
                how = "from its bpffs pin";
        if (!np && adopt_id) {
                /* The kernel holds a program with the tag we attached last time: take it, do not reload. */
                if (nl_program_open_id(adopt_id, &np, NULL) >= 0 && ref->fact && ref->fact->tag[0] &&
                    !streq(nl_program_tag(np), ref->fact->tag))
                        np = nl_program_free(np);
                if (np)
                        how = "attached";
        }
        if (!np)
                return -EAGAIN;
        log_info("adopted program %s%s%s%s (id %u, tag %s) of %s, %s", ref->program, what,
                 ref->instance ? ", instance " : "", strempty(ref->instance), nl_program_id(np),
                 nl_program_tag(np), ref->digest, how);
        if (program_add(r, ref, TAKE_PTR(np), from_store, ret) < 0)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        return 0;
}

int registry_add(Registry *r, const ProgramRef *ref, NlProgram *np, Program **ret, Error *reterr) {
        Program *p = registry_find(r, ref);

        if (p) {
                /* Two loads of one program raced; the one the registry has won. */
                nl_program_free(np);
                p->n_ref++;
                *ret = p;
                return 0;
        }
        log_info("loaded program %s%s%s%s (id %u, tag %s) of %s", ref->program,
                 ref->kind == NL_PROG_ACTION ? " as an action" : "", ref->instance ? ", instance " : "",
                 strempty(ref->instance), nl_program_id(np), nl_program_tag(np), ref->digest);
        if (program_add(r, ref, np, false, ret) < 0)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        return 0;
}

Program *registry_ref(Program *p) {
        if (p)
                p->n_ref++;
        return p;
}

static void program_free(Program *p) {
        nl_maps_free(p->maps, p->n_maps);
        free(p->own);
        free(p->instance);
        nl_program_free(p->prog);
        free(p->digest);
        free(p->name);
        free(p);
}

void registry_release(Registry *r, Program *p) {
        if (!p || --p->n_ref > 0)
                return;
        /* The kernel's filters hold their own reference: closing ours detaches nothing. */
        for (size_t i = 0; i < r->n_programs; i++)
                if (r->programs[i] == p) {
                        r->programs[i] = r->programs[--r->n_programs];
                        break;
                }
        if (!r->exiting)
                program_unkeep(r, p);
        program_free(p);
}

bool registry_kept(Registry *r, const ProgramRef *ref) {
        char name[FDNAME_MAX + 1], path[PATH_MAX];

        if (!ref->digest || !ref->program)
                return false;
        if (fdname(name, ref, NULL))
                for (size_t i = 0; i < r->n_passed; i++)
                        if (streq(r->passed[i].name, name))
                                return true;
        return pin_path(r, path, ref) && access(path, F_OK) == 0;
}

int registry_new(const char *bpffs_dir, const DaemonPassedFd *passed, size_t n_passed, Registry **ret) {
        Registry *r = calloc(1, sizeof(*r));
        char dir[PATH_MAX];

        if (!r || (bpffs_dir && !(r->bpffs_dir = strdup(bpffs_dir))) ||
            !(r->passed = calloc(n_passed + 1, sizeof(DaemonPassedFd)))) {
                if (r)
                        free(r->bpffs_dir);
                free(r);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n_passed; i++) {
                r->passed[i].fd = passed[i].fd;
                if (!(r->passed[i].name = strdup(passed[i].name))) {
                        registry_free(r, true);
                        return -ENOMEM;
                }
                r->n_passed++;
        }
        if (n_passed)
                log_info("the fd store gave back %zu fd(s)", n_passed);
        if (r->bpffs_dir) {
                snprintf(dir, sizeof(dir), "%s/progs", r->bpffs_dir);
                r->pin_programs =
                        (nl_bpffs_check(r->bpffs_dir, NULL) >= 0 || mkdir_p(r->bpffs_dir, 0700) >= 0) &&
                        nl_bpffs_check(r->bpffs_dir, NULL) >= 0 && mkdir_p(dir, 0700) >= 0;
                if (!r->pin_programs)
                        log_notice("%s is not on a bpf filesystem: programs are not pinned; a restart takes "
                                   "them from the fd store or by the id attached",
                                   r->bpffs_dir);
        }
        *ret = r;
        return 0;
}

void registry_exiting(Registry *r) {
        r->exiting = true;
}

static void passed_free(Registry *r) {
        for (size_t i = 0; i < r->n_passed; i++) {
                safe_close(r->passed[i].fd);
                free(r->passed[i].name);
        }
        free(r->passed);
        r->passed = NULL;
        r->n_passed = 0;
}

Registry *registry_free(Registry *r, bool exiting) {
        if (!r)
                return NULL;
        /* Exiting is not releasing: the fd store entries and pins stay for the next start. */
        r->exiting = exiting;
        for (size_t i = 0; i < r->n_programs; i++) {
                if (!exiting)
                        program_unkeep(r, r->programs[i]);
                program_free(r->programs[i]);
        }
        free(r->programs);
        strv_free_n(r->revoked, 2 * r->n_revoked);
        passed_free(r);
        free(r->bpffs_dir);
        free(r);
        return NULL;
}

void registry_settle(Registry *r) {
        _cleanup_(closedirp) DIR *dh = NULL;
        char dir[PATH_MAX];
        struct dirent *de;

        /* What the fd store gave back and no document took is not wanted any more. */
        for (size_t i = 0; i < r->n_passed; i++) {
                log_info("fd store: %s is not used by any document; dropped", r->passed[i].name);
                fdstore_remove(r->passed[i].name);
                safe_close(r->passed[i].fd);
                free(r->passed[i].name);
        }
        r->n_passed = 0;

        if (!r->pin_programs)
                return;
        snprintf(dir, sizeof(dir), "%s/progs", r->bpffs_dir);
        dh = opendir(dir);
        while (dh && (de = readdir(dh))) {
                const char *dash = strchr(de->d_name, '-');
                char digest[SHA256_DIGEST_STRING_MAX];
                bool used = false;

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
                        used = registry_find(r, &ref) != NULL;
                }
                if (!used && unlinkat(dirfd(dh), de->d_name, 0) >= 0)
                        log_info("unpinned %s/%s: no document uses it", dir, de->d_name);
        }
}
