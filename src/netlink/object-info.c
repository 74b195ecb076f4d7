/* object-info.c: an object's description (its programs and maps) as an inspection sends it back to
 * clsd: length-prefixed, every field checked on the way in, for the worker is as untrusted as what it
 * read. Fuzzed (tests/fuzz/fuzz-inspect.c). */
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <string.h>

#include "nl-internal.h"
#include "nl-bpf.h"
#include "nl-worker.h"

/* ---- an object's description, as the inspection sends it back: length-prefixed, every field checked
 * by the parent (the worker that wrote it may have been subverted) ---- */

typedef struct Writer {
        char *buf;
        size_t size, cap;
        bool failed;
} Writer;

static void put(Writer *w, const void *data, size_t n) {
        if (w->failed)
                return;
        if (w->size + n > w->cap) {
                size_t cap = MAX(w->cap * 2, w->size + n + 256);
                char *b = realloc(w->buf, cap);
                if (!b) {
                        w->failed = true;
                        return;
                }
                w->buf = b;
                w->cap = cap;
        }
        memcpy(w->buf + w->size, data, n);
        w->size += n;
}

static void put_u32(Writer *w, uint32_t v) {
        put(w, &v, sizeof(v));
}

static void put_str(Writer *w, const char *s) {
        uint32_t n = (uint32_t) strlen(s);
        put_u32(w, n);
        put(w, s, n);
}

int nl_object_info_serialize(const NlObjectInfo *info, char **ret, size_t *ret_size) {
        Writer w = { 0 };

        put_u32(&w, (uint32_t) info->n_programs);
        for (size_t i = 0; i < info->n_programs; i++) {
                put_str(&w, info->programs[i].name);
                put_str(&w, info->programs[i].section);
                put_u32(&w, info->programs[i].type_id);
        }
        put_u32(&w, (uint32_t) info->n_maps);
        for (size_t i = 0; i < info->n_maps; i++) {
                const NlMapInfo *m = &info->maps[i];
                put_str(&w, m->name);
                put_u32(&w, m->type_id);
                put_u32(&w, m->key_size);
                put_u32(&w, m->value_size);
                put_u32(&w, m->max_entries);
                put_u32(&w, m->flags);
                put_u32(&w, m->internal);
        }
        if (w.failed) {
                free(w.buf);
                return -ENOMEM;
        }
        *ret = w.buf;
        *ret_size = w.size;
        return 0;
}

typedef struct Reader {
        const uint8_t *p;
        size_t left;
} Reader;

static int get_u32(Reader *r, uint32_t *ret) {
        if (r->left < sizeof(uint32_t))
                return -EBADMSG;
        memcpy(ret, r->p, sizeof(uint32_t));
        r->p += sizeof(uint32_t);
        r->left -= sizeof(uint32_t);
        return 0;
}

/* A name clsd will show and store: printable ASCII, 1 to max bytes. */
static int get_name(Reader *r, size_t max, char **ret) {
        uint32_t n;

        if (get_u32(r, &n) < 0 || n == 0 || n > r->left)
                return -EBADMSG;
        if (n > max)
                return -E2BIG;
        for (uint32_t i = 0; i < n; i++)
                if (r->p[i] < 0x21 || r->p[i] > 0x7e)
                        return -EILSEQ;
        *ret = strndup((const char *) r->p, n);
        if (!*ret)
                return -ENOMEM;
        r->p += n;
        r->left -= n;
        return 0;
}

int nl_object_info_parse(const void *buf, size_t size, NlObjectInfo **ret, Error *reterr) {
        _cleanup_(nl_object_info_freep) NlObjectInfo *info = calloc(1, sizeof(*info));
        Reader rd = { .p = buf, .left = size };
        uint32_t n;
        int r;

        if (!info)
                return error_oom(reterr);
        r = get_u32(&rd, &n);
        if (r >= 0 && n > NL_OBJECT_PROGRAMS_MAX)
                r = -E2BIG;
        if (r < 0)
                goto bad;
        info->programs = calloc(n + 1, sizeof(NlProgramInfo));
        if (!info->programs)
                return error_oom(reterr);
        for (uint32_t i = 0; i < n; i++) {
                NlProgramInfo *p = &info->programs[info->n_programs];
                if ((r = get_name(&rd, 255, &p->name)) < 0 || (r = get_name(&rd, 255, &p->section)) < 0 ||
                    (r = get_u32(&rd, &p->type_id)) < 0) {
                        free(p->name);
                        free(p->section);
                        goto bad;
                }
                info->n_programs++;
                p->type = p->type_id == BPF_PROG_TYPE_UNSPEC
                                  ? NULL
                                  : libbpf_bpf_prog_type_str((enum bpf_prog_type) p->type_id);
                if (!p->type)
                        p->type = "unknown";
        }
        r = get_u32(&rd, &n);
        if (r >= 0 && n > NL_OBJECT_MAPS_MAX)
                r = -E2BIG;
        if (r < 0)
                goto bad;
        info->maps = calloc(n + 1, sizeof(NlMapInfo));
        if (!info->maps)
                return error_oom(reterr);
        for (uint32_t i = 0; i < n; i++) {
                NlMapInfo *m = &info->maps[info->n_maps];
                uint32_t internal = 0;
                if ((r = get_name(&rd, 255, &m->name)) < 0 || (r = get_u32(&rd, &m->type_id)) < 0 ||
                    (r = get_u32(&rd, &m->key_size)) < 0 || (r = get_u32(&rd, &m->value_size)) < 0 ||
                    (r = get_u32(&rd, &m->max_entries)) < 0 || (r = get_u32(&rd, &m->flags)) < 0 ||
                    (r = get_u32(&rd, &internal)) < 0 || internal > 1) {
                        free(m->name);
                        r = r < 0 ? r : -EBADMSG;
                        goto bad;
                }
                info->n_maps++;
                m->internal = internal;
                m->type = nl_map_type_name(m->type_id);
        }
        if (rd.left != 0) {
                r = -EBADMSG;
                goto bad;
        }
        *ret = TAKE_PTR(info);
        return 0;
bad:
        if (r == -ENOMEM)
                return error_oom(reterr);
        if (r == -EILSEQ)
                return error_set(reterr, EINVAL, ERROR_INVALID_OBJECT,
                                 "a program, section or map name of the object is not printable ASCII");
        if (r == -E2BIG)
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_OBJECT,
                        "the object has more than %d programs or maps, or a name longer than 255 bytes",
                        NL_OBJECT_PROGRAMS_MAX);
        return error_set(reterr, EBADMSG, ERROR_INTERNAL_ERROR, "the object's inspection answered nonsense");
}
