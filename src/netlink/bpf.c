/* bpf.c: BPF objects through libbpf: inspecting an ELF, loading one program with its verifier log,
 * and taking references to programs already in the kernel. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "nl.h"
#include "nl-bpf.h"
#include "nl-map.h"
#include "nl-worker.h"

struct NlProgram {
        struct bpf_object *obj; /* NULL when adopted by id */
        int fd;
        uint32_t id;
        uint32_t type;
        char tag[NL_TAG_STRING_MAX];
};

static int libbpf_print_fn(enum libbpf_print_level level, const char *fmt, va_list ap) {
        char buf[1024];
        size_t n;

        (void) level;
        if (log_get_max_level() < LOG_DEBUG)
                return 0;
        vsnprintf(buf, sizeof(buf), fmt, ap);
        n = strlen(buf);
        if (n > 0 && buf[n - 1] == '\n')
                buf[n - 1] = 0;
        log_debug("libbpf: %s", buf);
        return 0;
}

void nl_bpf_setup_logging(void) {
        libbpf_set_print(libbpf_print_fn);
}

const char *nl_libbpf_version(void) {
        return libbpf_version_string();
}

NlObjectInfo *nl_object_info_free(NlObjectInfo *i) {
        if (!i)
                return NULL;
        for (size_t k = 0; k < i->n_programs; k++) {
                free(i->programs[k].name);
                free(i->programs[k].section);
        }
        for (size_t k = 0; k < i->n_maps; k++)
                free(i->maps[k].name);
        free(i->programs);
        free(i->maps);
        free(i);
        return NULL;
}

static struct bpf_object *open_mem(const void *data, size_t size, const char *name, Error *reterr) {
        LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = name);
        struct bpf_object *obj;

        obj = bpf_object__open_mem(data, size, &opts);
        if (!obj) {
                char msg[128];
                int e = errno;
                /* libbpf has error numbers of its own (LIBBPF_ERRNO__*): strerror() does not know them. */
                libbpf_strerror(e, msg, sizeof(msg));
                error_set(reterr, e, ERROR_INVALID_OBJECT, "not a BPF object file libbpf can open: %s", msg);
                return NULL;
        }
        return obj;
}

int nl_object_inspect(const void *data, size_t size, NlObjectInfo **ret, Error *reterr) {
        _cleanup_(nl_object_info_freep) NlObjectInfo *info = calloc(1, sizeof(*info));
        struct bpf_object *obj;
        struct bpf_program *p;
        struct bpf_map *m;
        size_t np = 0, nm = 0;

        if (!info)
                return error_oom(reterr);
        obj = open_mem(data, size, "inspect", reterr);
        if (!obj)
                return -EINVAL;
        bpf_object__for_each_program (p, obj)
                np++;
        bpf_object__for_each_map (m, obj)
                nm++;
        info->programs = calloc(np + 1, sizeof(NlProgramInfo));
        info->maps = calloc(nm + 1, sizeof(NlMapInfo));
        if (!info->programs || !info->maps) {
                bpf_object__close(obj);
                return error_oom(reterr);
        }
        bpf_object__for_each_program (p, obj) {
                NlProgramInfo *pi = &info->programs[info->n_programs++];
                enum bpf_prog_type t = bpf_program__type(p);
                pi->name = strdup(bpf_program__name(p));
                pi->section = strdup(bpf_program__section_name(p));
                pi->type = t == BPF_PROG_TYPE_UNSPEC ? NULL : libbpf_bpf_prog_type_str(t);
                if (!pi->type)
                        pi->type = "unknown";
                pi->type_id = (uint32_t) t;
        }
        bpf_object__for_each_map (m, obj) {
                NlMapInfo *mi = &info->maps[info->n_maps++];
                mi->name = strdup(bpf_map__name(m));
                mi->type = libbpf_bpf_map_type_str(bpf_map__type(m));
                if (!mi->type)
                        mi->type = "unknown";
                mi->type_id = (uint32_t) bpf_map__type(m);
                mi->key_size = bpf_map__key_size(m);
                mi->value_size = bpf_map__value_size(m);
                mi->max_entries = bpf_map__max_entries(m);
                mi->flags = bpf_map__map_flags(m);
                mi->internal = bpf_map__is_internal(m);
        }
        bpf_object__close(obj);
        *ret = TAKE_PTR(info);
        return 0;
}

const char *nl_prog_kind_to_string(NlProgKind k) {
        return k == NL_PROG_ACTION ? "action" : "classifier";
}

static enum bpf_prog_type kind_type(NlProgKind kind) {
        return kind == NL_PROG_ACTION ? BPF_PROG_TYPE_SCHED_ACT : BPF_PROG_TYPE_SCHED_CLS;
}

int nl_program_tc_rank(const NlProgramInfo *pi, NlProgKind kind) {
        if (pi->type_id == (uint32_t) kind_type(kind))
                return 0;
        if (pi->type_id == BPF_PROG_TYPE_UNSPEC)
                return 1;
        if (pi->type_id == BPF_PROG_TYPE_SCHED_CLS || pi->type_id == BPF_PROG_TYPE_SCHED_ACT)
                return 2;
        return -1;
}

const char *nl_program_tc_note(const NlProgramInfo *pi) {
        switch (pi->type_id) {
        case BPF_PROG_TYPE_SCHED_CLS:
                return "a classifier (sched_cls); as an action it is loaded as sched_act";
        case BPF_PROG_TYPE_SCHED_ACT:
                return "an action (sched_act); as a classifier it is loaded as sched_cls";
        case BPF_PROG_TYPE_UNSPEC:
                return "its section is not one libbpf knows: loaded as sched_cls for a classifier and as "
                       "sched_act for an action, as tc does";
        default:
                return "tc runs only sched_cls and sched_act programs (and those in sections libbpf does "
                       "not "
                       "know); this one's section makes it another type";
        }
}

NlProgram *nl_program_free(NlProgram *p) {
        if (!p)
                return NULL;
        safe_close(p->fd);
        bpf_object__close(p->obj);
        free(p);
        return NULL;
}

int nl_program_fd(const NlProgram *p) {
        return p->fd;
}

uint32_t nl_program_id(const NlProgram *p) {
        return p->id;
}

const char *nl_program_tag(const NlProgram *p) {
        return p->tag;
}

static int fill_info(NlProgram *p, Error *reterr) {
        struct bpf_prog_info info = { 0 };
        uint32_t len = sizeof(info);

        if (bpf_obj_get_info_by_fd(p->fd, &info, &len) < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot read program info: %m");
        p->id = info.id;
        p->type = info.type;
        for (int i = 0; i < 8; i++)
                snprintf(p->tag + 2 * i, 3, "%02x", info.tag[i]);
        return 0;
}

/* Loads only `program` of the object: the object's other programs are not the caller's concern. */
static struct bpf_object *open_for_program(const void *data, size_t size, const char *object_name,
                                           const char *program, NlProgKind kind,
                                           struct bpf_program **ret_prog, Error *reterr) {
        struct bpf_object *obj = open_mem(data, size, object_name, reterr);
        struct bpf_program *p, *target = NULL;

        if (!obj)
                return NULL;
        bpf_object__for_each_program (p, obj) {
                bool want = streq(bpf_program__name(p), program);
                if (want)
                        target = p;
                bpf_program__set_autoload(p, want);
        }
        if (!target) {
                error_set(reterr, ENOENT, ERROR_PROGRAM_NOT_FOUND, "program \"%s\" is not in the object",
                          program);
                bpf_object__close(obj);
                return NULL;
        }
        enum bpf_prog_type t = bpf_program__type(target);
        /* The use decides, as tc does: the same instructions run as either. */
        if ((t != BPF_PROG_TYPE_UNSPEC && t != BPF_PROG_TYPE_SCHED_CLS && t != BPF_PROG_TYPE_SCHED_ACT) ||
            bpf_program__set_type(target, kind_type(kind)) < 0) {
                const char *name = libbpf_bpf_prog_type_str(t);
                error_set(reterr, EINVAL, ERROR_WRONG_PROGRAM_TYPE,
                          "program \"%s\" is of type %s; tc runs sched_cls and sched_act programs "
                          "(SEC(\"tc\"), "
                          "SEC(\"action\"), or a section of its own)",
                          program, name ? name : "unknown");
                bpf_object__close(obj);
                return NULL;
        }
        *ret_prog = target;
        return obj;
}

const char *nl_map_type_name(uint32_t t) {
        const char *s = libbpf_bpf_map_type_str((enum bpf_map_type) t);
        return s ? s : "unknown";
}

/* The map of reuse that the object's map name takes over, or NULL. */
static const NlMap *reuse_find(const NlMap *reuse, size_t n_reuse, const char *name) {
        for (size_t i = 0; i < n_reuse; i++)
                if (strncmp(reuse[i].name, name, sizeof(reuse[i].name) - 1) == 0 &&
                    strlen(reuse[i].name) == MIN(strlen(name), sizeof(reuse[i].name) - 1))
                        return &reuse[i];
        return NULL;
}

/* 0 if the new definition can take over old, else "map_incompatible" naming both. */
static int reuse_compatible(const char *name, const NlMap *old, uint32_t type, uint32_t key, uint32_t value,
                            uint32_t max_entries, uint32_t flags, Error *reterr) {
        if (old->type == type && old->key_size == key && old->value_size == value &&
            old->max_entries == max_entries && old->flags == flags)
                return 0;
        return error_set(
                reterr, EINVAL, ERROR_MAP_INCOMPATIBLE,
                "map \"%s\" cannot keep its contents: the attached one (id %u) is %s, key %u, value %u "
                "bytes, max_entries %u, flags 0x%x; the new object's is %s, key %u, value %u bytes, "
                "max_entries %u, flags 0x%x. Set \"maps\": {\"%s\": {\"reuse\": false}} on the filter "
                "to start it empty",
                name, old->id, nl_map_type_name(old->type), old->key_size, old->value_size, old->max_entries,
                old->flags, nl_map_type_name(type), key, value, max_entries, flags, name);
}

int nl_maps_check_reuse(const NlObjectInfo *info, const NlMap *reuse, size_t n_reuse, Error *reterr) {
        for (size_t i = 0; i < info->n_maps; i++) {
                const NlMapInfo *m = &info->maps[i];
                const NlMap *old = m->internal ? NULL : reuse_find(reuse, n_reuse, m->name);
                int r = old ? reuse_compatible(m->name, old, m->type_id, m->key_size, m->value_size,
                                               m->max_entries, m->flags, reterr)
                            : 0;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The object's maps named like one of reuse become that map; see nl_program_load(). */
static int reuse_maps(struct bpf_object *obj, const NlMap *reuse, size_t n_reuse, Error *reterr) {
        struct bpf_map *m;

        bpf_object__for_each_map (m, obj) {
                const NlMap *old;
                char name[256];
                int r;

                /* Copied: bpf_map__reuse_fd() gives the map the reused one's name, freeing this one. */
                snprintf(name, sizeof(name), "%s", bpf_map__name(m));
                if (bpf_map__is_internal(m))
                        continue; /* .rodata is the new build's constants; .data and .bss its layout */
                old = reuse_find(reuse, n_reuse, name);
                if (!old)
                        continue;
                r = reuse_compatible(name, old, (uint32_t) bpf_map__type(m), bpf_map__key_size(m),
                                     bpf_map__value_size(m), bpf_map__max_entries(m), bpf_map__map_flags(m),
                                     reterr);
                if (r < 0)
                        return r;
                r = bpf_map__reuse_fd(m, old->fd);
                if (r < 0)
                        return error_set(reterr, r, ERROR_KERNEL_ERROR,
                                         "cannot reuse map \"%s\" (id %u): %s", name, old->id, strerror(-r));
                log_info("map %s keeps its contents: reusing map id %u", name, old->id);
        }
        return 0;
}

int nl_program_load(const void *data, size_t size, const char *object_name, const char *program,
                    NlProgKind kind, const NlMap *reuse, size_t n_reuse, NlProgram **ret, Error *reterr) {
        _cleanup_(nl_program_freep) NlProgram *np = calloc(1, sizeof(*np));
        _cleanup_free_ char *log = NULL;
        struct bpf_program *p;
        int r;

        if (!np)
                return error_oom(reterr);
        np->fd = -1;
        np->obj = open_for_program(data, size, object_name, program, kind, &p, reterr);
        if (!np->obj)
                return -EINVAL;
        r = reuse_maps(np->obj, reuse, n_reuse, reterr);
        if (r < 0)
                return r;
        /* One verifier run for a program it accepts: libbpf loads without a log first, and only after a
         * rejection once more with this buffer, which bounds the log (it is the 422's detail). */
        log = calloc(1, NL_VERIFIER_LOG_MAX);
        if (!log)
                return error_oom(reterr);
        bpf_program__set_log_buf(p, log, NL_VERIFIER_LOG_MAX);
        r = bpf_object__load(np->obj);
        if (r < 0) {
                if (log[0]) {
                        bool cut =
                                strnlen(log, NL_VERIFIER_LOG_MAX) >= NL_VERIFIER_LOG_MAX - 1 || r == -ENOSPC;
                        error_set(reterr, r, ERROR_VERIFIER_REJECTED,
                                  "program \"%s\" was rejected by the verifier: %s%s", program,
                                  strerror(r == -ENOSPC ? EACCES : -r),
                                  cut ? " (the log in detail is its first 4 MiB)" : "");
                        log[NL_VERIFIER_LOG_MAX - 1] = 0;
                        /* the detail takes the log, trimmed to its length */
                        char *detail = TAKE_PTR(log);
                        char *trimmed = realloc(detail, strlen(detail) + 1);
                        error_set_detail(reterr, trimmed ?: detail);
                } else {
                        char msg[128];
                        libbpf_strerror(r, msg, sizeof(msg));
                        error_set(reterr, r, ERROR_INVALID_OBJECT, "cannot load program \"%s\": %s", program,
                                  msg);
                }
                return r;
        }
        np->fd = fcntl(bpf_program__fd(p), F_DUPFD_CLOEXEC, 3);
        if (np->fd < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "cannot duplicate program fd: %m");
        r = fill_info(np, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(np);
        return 0;
}

int nl_program_open_id(uint32_t id, NlProgram **ret, Error *reterr) {
        _cleanup_(nl_program_freep) NlProgram *np = calloc(1, sizeof(*np));
        int r;

        if (!np)
                return error_oom(reterr);
        np->fd = bpf_prog_get_fd_by_id(id);
        if (np->fd < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot open program id %u: %m", id);
        r = fill_info(np, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(np);
        return 0;
}

static int program_from_fd(int fd, NlProgKind kind, NlProgram **ret, Error *reterr) {
        _cleanup_(nl_program_freep) NlProgram *np = calloc(1, sizeof(*np));
        int r;

        if (!np) {
                safe_close(fd);
                return error_oom(reterr);
        }
        np->fd = fd;
        r = fill_info(np, reterr);
        if (r < 0)
                return r;
        if (np->type != (uint32_t) kind_type(kind))
                return error_set(reterr, EINVAL, ERROR_WRONG_PROGRAM_TYPE, "program id %u is not %s", np->id,
                                 kind == NL_PROG_ACTION ? "sched_act" : "sched_cls");
        *ret = TAKE_PTR(np);
        return 0;
}

int nl_program_take_fd(int fd, NlProgram **ret, Error *reterr) {
        _cleanup_(nl_program_freep) NlProgram *np = calloc(1, sizeof(*np));
        int r;

        if (!np) {
                safe_close(fd);
                return error_oom(reterr);
        }
        np->fd = fd;
        r = fill_info(np, reterr);
        if (r < 0)
                return r;
        if (np->type != BPF_PROG_TYPE_SCHED_CLS && np->type != BPF_PROG_TYPE_SCHED_ACT)
                return error_set(reterr, EINVAL, ERROR_WRONG_PROGRAM_TYPE, "program id %u is no tc program",
                                 np->id);
        *ret = TAKE_PTR(np);
        return 0;
}

int nl_program_from_fd(int fd, NlProgKind kind, NlProgram **ret, Error *reterr) {
        int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);

        if (copy < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "cannot duplicate fd %d: %m", fd);
        return program_from_fd(copy, kind, ret, reterr);
}

int nl_program_pin(const NlProgram *p, const char *path, Error *reterr) {
        if (bpf_obj_pin(p->fd, path) == 0)
                return 0;
        if (errno == EEXIST && unlink(path) == 0 && bpf_obj_pin(p->fd, path) == 0)
                return 0;
        return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot pin program id %u at %s: %m", p->id,
                         path);
}

int nl_program_open_pinned(const char *path, NlProgKind kind, NlProgram **ret, Error *reterr) {
        int fd = bpf_obj_get(path);

        if (fd < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot open pinned %s: %m", path);
        return program_from_fd(fd, kind, ret, reterr);
}

static int map_fill(int fd, NlMap *ret, Error *reterr) {
        struct bpf_map_info info = { 0 };
        uint32_t len = sizeof(info);

        if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot read map info: %m");
        *ret = (NlMap){ .fd = fd,
                        .id = info.id,
                        .type = info.type,
                        .key_size = info.key_size,
                        .value_size = info.value_size,
                        .max_entries = info.max_entries,
                        .flags = info.map_flags,
                        .btf_id = info.btf_id,
                        .btf_key_type_id = info.btf_key_type_id,
                        .btf_value_type_id = info.btf_value_type_id };
        snprintf(ret->name, sizeof(ret->name), "%s", info.name);
        return 0;
}

int nl_map_from_fd(int fd, NlMap *ret, Error *reterr) {
        int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3), r;

        if (copy < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "cannot duplicate fd %d: %m", fd);
        r = map_fill(copy, ret, reterr);
        if (r < 0)
                safe_close(copy);
        return r;
}

void nl_maps_free(NlMap *maps, size_t n) {
        for (size_t i = 0; maps && i < n; i++)
                safe_close(maps[i].fd);
        free(maps);
}

int nl_program_maps(int prog_fd, NlMap **ret, size_t *ret_n, Error *reterr) {
        struct bpf_prog_info info = { 0 };
        uint32_t len = sizeof(info), n;
        _cleanup_free_ uint32_t *ids = NULL;
        NlMap *maps;
        size_t k = 0;

        if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot read program info: %m");
        n = info.nr_map_ids;
        ids = calloc(n + 1, sizeof(uint32_t));
        maps = calloc(n + 1, sizeof(NlMap));
        if (!ids || !maps) {
                free(maps);
                return error_oom(reterr);
        }
        info = (struct bpf_prog_info){ .nr_map_ids = n, .map_ids = (uint64_t) (uintptr_t) ids };
        len = sizeof(info);
        if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) < 0) {
                free(maps);
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot read the program's maps: %m");
        }
        for (uint32_t i = 0; i < MIN(n, info.nr_map_ids); i++) {
                int fd = bpf_map_get_fd_by_id(ids[i]);
                if (fd < 0)
                        continue; /* gone meanwhile */
                if (map_fill(fd, &maps[k], NULL) < 0) {
                        safe_close(fd);
                        continue;
                }
                k++;
        }
        *ret = maps;
        *ret_n = k;
        return 0;
}
