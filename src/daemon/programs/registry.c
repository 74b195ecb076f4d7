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
#include "keep.h"
#include "registry.h"
#include "sha256.h"
#include "nl-bpf.h"
#include "nl-map.h"

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
        Keeper *keeper; /* the fd store and the pins */
        bool exiting; /* registry_free(): programs are closed, not released */
        Program **programs;
        size_t n_programs;
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

/* What p is, as a reference (for its names). */
static ProgramRef program_self(const Program *p) {
        return (ProgramRef){
                .digest = p->digest, .program = p->name, .kind = p->kind, .instance = p->instance
        };
}

/* Makes p findable after a restart: fd store (unless it came from there) and bpffs pin. */
static void program_keep(Registry *r, Program *p, const FilterSpec *spec, bool from_store) {
        ProgramRef self = program_self(p);
        _cleanup_error_ Error e = ERROR_NULL;

        if (nl_program_maps(program_fd(p), &p->maps, &p->n_maps, &e) < 0)
                log_warning("program %s: %s", p->name, e.message);
        p->own = calloc(p->n_maps + 1, sizeof(bool));
        for (size_t i = 0; p->own && i < p->n_maps; i++)
                p->own[i] = p->instance && spec && !filter_map_shared(spec, p->maps[i].name);
        if (!p->own) {
                /* no room to say which are its own: none is offered to other instances */
                nl_maps_free(p->maps, p->n_maps);
                p->maps = NULL;
                p->n_maps = 0;
        }
        keeper_keep(r->keeper, &self, p->prog, p->maps, p->n_maps, from_store);
}

/* Forgets p's fd store entries and its pin: a stopped clsd keeps only what is attached. */
static void program_unkeep(Registry *r, Program *p) {
        ProgramRef self = program_self(p);
        keeper_unkeep(r->keeper, &self, p->maps, p->n_maps);
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
                int k2 = keeper_maps(r->keeper, ref, &v, &n);
                if (k2 < 0)
                        return k2;
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
                return error_oom(reterr);
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
        char path[PATH_MAX];
        const char *how = NULL;
        bool from_store = false;
        _cleanup_error_ Error e = ERROR_NULL;

        if (registry_revoked(r, ref->digest))
                return error_set(reterr, EPERM, ERROR_OBJECT_UNTRUSTED, "object %s: %s", ref->digest,
                                 registry_revoked(r, ref->digest));
        if (p) {
                p->n_ref++;
                *ret = p;
                return 0;
        }
        /* Where a restart finds the program, in order: the fd store, bpffs, the kernel's filters. */
        int fd = keeper_take(r->keeper, ref);
        if (fd >= 0) {
                if (nl_program_from_fd(fd, ref->kind, &np, &e) < 0)
                        log_warning("fd store: program %s of %s: %s", ref->program, ref->digest, e.message);
                safe_close(fd);
                if ((np = candidate(np, adopt_id)))
                        how = "from the fd store", from_store = true;
        }
        if (!np && keeper_pin_path(r->keeper, path, ref) &&
            nl_program_open_pinned(path, ref->kind, &np, NULL) >= 0 && (np = candidate(np, adopt_id)))
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
                return error_oom(reterr);
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
                return error_oom(reterr);
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
        return ref->digest && ref->program && !registry_revoked(r, ref->digest) &&
               keeper_holds(r->keeper, ref);
}

int registry_new(const char *bpffs_dir, const DaemonPassedFd *passed, size_t n_passed, Registry **ret) {
        Registry *r = calloc(1, sizeof(*r));

        if (!r || keeper_new(bpffs_dir, passed, n_passed, &r->keeper) < 0) {
                free(r);
                return -ENOMEM;
        }
        *ret = r;
        return 0;
}

void registry_exiting(Registry *r) {
        r->exiting = true;
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
        keeper_free(r->keeper);
        free(r);
        return NULL;
}

static bool registry_uses(const ProgramRef *ref, void *userdata) {
        return registry_find(userdata, ref) != NULL;
}

void registry_settle(Registry *r) {
        keeper_settle(r->keeper, registry_uses, r);
}
