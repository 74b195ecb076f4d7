/* document-file.c: documents on disk: one file each (by namespace and interface, under api/ or hogs/)
 * with what clsd attached for it, written atomically and durably, read back strictly (format checked),
 * and at start read and parsed by a thread while the loop's thread does other work. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "fileio.h"
#include "store-internal.h"
#include "store-policy.h"

/* A document file larger than this is not one clsd wrote. */
#define DOCUMENT_FILE_MAX (4u * 1024 * 1024)

/* Interface names may hold characters that are awkward in file names; keep the file name safe. An
 * interface of a named namespace is "<netns>@<ifname>.json" ('@' is always escaped in names). */
static char *escape_name(const char *in, char *p) {
        for (const char *c = in; *c; c++) {
                if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                    *c == '-' || *c == '_' || *c == '.')
                        *p++ = *c;
                else
                        p += sprintf(p, "%%%02x", (unsigned char) *c);
        }
        return p;
}

#define DOCUMENT_FILE_NAME_MAX (3 * (NETNS_NAME_MAX + IFNAME_MAX) + 8)

static void document_file_name(const char *netns, const char *ifname, char buf[DOCUMENT_FILE_NAME_MAX]) {
        char *p = buf;
        if (netns) {
                p = escape_name(netns, p);
                *p++ = '@';
        }
        p = escape_name(ifname, p);
        strcpy(p, ".json");
}

/* The lowest format that holds the document: 5 with maps of a filter's own ("shared": false), 4 with
 * "actions", 3 with "metrics", 2 with "maps", else 1. */
static int document_format(const Document *d) {
        int format = 1;

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < d->n_filters[dir]; i++) {
                        if (filter_has_own_maps(&d->filters[dir][i]))
                                format = MAX(format, 5);
                        if (d->filters[dir][i].n_actions > 0)
                                format = MAX(format, 4);
                        if (d->filters[dir][i].n_metrics > 0)
                                format = MAX(format, 3);
                        if (d->filters[dir][i].n_maps > 0)
                                format = MAX(format, 2);
                }
        return format;
}

static json_t *fact_to_json(const AttachedFact *a) {
        return json_pack("{s:s,s:I}", "tag", a->tag, "id", (json_int_t) a->prog_id);
}

static json_t *document_file_to_json(const Document *d, const DocumentFacts *facts) {
        json_t *j = json_object();
        json_t *attached = json_object();

        json_object_set_new(j, "format", json_integer(document_format(d)));
        if (d->netns)
                json_object_set_new(j, "netns", json_string(d->netns));
        json_object_set_new(j, "ifname", json_string(d->ifname));
        json_object_set_new(j, "generation", json_integer((json_int_t) d->generation));
        json_object_set_new(j, "clsact_created", json_boolean(facts && facts->clsact_created));
        json_object_set_new(j, "spec", document_spec_to_json(d));
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < d->n_filters[dir]; i++) {
                        const FilterSpec *f = &d->filters[dir][i];
                        const FilterFact *ff = document_facts_find(facts, f->name);
                        json_t *a;
                        if (!ff || !ff->program.tag[0])
                                continue;
                        a = fact_to_json(&ff->program);
                        if (ff->instance[0])
                                json_object_set_new(a, "instance", json_string(ff->instance));
                        if (ff->n_actions > 0) {
                                json_t *acts = json_array();
                                for (size_t k = 0; k < ff->n_actions; k++)
                                        json_array_append_new(acts, fact_to_json(&ff->actions[k]));
                                json_object_set_new(a, "actions", acts);
                        }
                        json_object_set_new(attached, f->name, a);
                }
        /* What clsd attached last, so that a restart adopts exactly that program, not one that only
         * shares its tag (the tag hashes instructions with map references zeroed). */
        json_object_set_new(j, "attached", attached);
        return j;
}

static int source_fd(const Store *s, DocumentSource source, const char **ret_subdir) {
        *ret_subdir = source == SOURCE_HOG ? "hogs" : "documents";
        return source == SOURCE_HOG ? s->hogs_fd : s->documents_fd;
}

int store_document_save(Store *s, const Document *d, const DocumentFacts *facts, Error *reterr) {
        json_t *j = document_file_to_json(d, facts);
        _cleanup_free_ char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        const char *subdir;
        int fd = source_fd(s, d->source, &subdir);
        char name[DOCUMENT_FILE_NAME_MAX];
        int r;

        json_decref(j);
        if (!text)
                return error_oom(reterr);
        document_file_name(d->netns, d->ifname, name);
        r = write_file_atomic(fd, name, text, strlen(text));
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot write %s/%s/%s: %s", s->dir, subdir,
                                 name, strerror(-r));
        return 0;
}

int store_document_remove(Store *s, DocumentSource source, const char *netns, const char *ifname,
                          Error *reterr) {
        const char *subdir;
        int fd = source_fd(s, source, &subdir);
        char name[DOCUMENT_FILE_NAME_MAX];

        document_file_name(netns, ifname, name);
        if (unlinkat(fd, name, 0) < 0) {
                if (errno == ENOENT)
                        return 0;
                return error_set(reterr, errno, ERROR_STORE_ERROR, "cannot remove %s/%s/%s: %m", s->dir,
                                 subdir, name);
        }
        if (fsync(fd) < 0)
                return error_set(reterr, errno, ERROR_STORE_ERROR, "cannot sync %s/%s: %m", s->dir, subdir);
        return 0;
}

int store_document_load(Store *s, DocumentSource source, const char *netns, const char *ifname,
                        StoredDocument *ret, Error *reterr) {
        _cleanup_free_ char *text = NULL;
        const char *subdir;
        int fd = source_fd(s, source, &subdir);
        _cleanup_close_ int file_fd = -1;
        StoredDocument d = { 0 };
        char name[DOCUMENT_FILE_NAME_MAX];
        size_t size;
        int r;

        document_file_name(netns, ifname, name);
        file_fd = openat(fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (file_fd < 0)
                return errno == ENOENT ? -ENOENT
                                       : error_set(reterr, errno, ERROR_STORE_ERROR,
                                                   "cannot open %s/%s/%s: %m", s->dir, subdir, name);
        r = read_full_fd(file_fd, DOCUMENT_FILE_MAX, &text, &size);
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot read %s/%s/%s: %s", s->dir, subdir,
                                 name, strerror(-r));
        r = document_file_parse(text, size, &d, reterr);
        if (r < 0)
                return r;
        d.doc->source = source;
        *ret = d;
        return 0;
}

void stored_documents_free(StoredDocument *v, size_t n) {
        for (size_t i = 0; v && i < n; i++) {
                document_unref(v[i].doc);
                document_facts_done(&v[i].facts);
        }
        free(v);
}

/* What clsd attached last for a filter or action: a tag and a program id, kept only when both are sound. */
static void attached_parse(json_t *a, AttachedFact *ret) {
        json_t *tag = json_object_get(a, "tag"), *id = json_object_get(a, "id");
        if (json_is_string(tag) && strlen(json_string_value(tag)) == 16 && json_is_integer(id) &&
            json_integer_value(id) > 0 && json_integer_value(id) <= UINT32_MAX) {
                memcpy(ret->tag, json_string_value(tag), 17);
                ret->prog_id = (uint32_t) json_integer_value(id);
        }
}

/* Parses one document file; the reason for refusing it goes into reterr. */
int document_file_parse(const char *text, size_t size, StoredDocument *ret, Error *reterr) {
        DocumentFacts facts = { 0 };
        _cleanup_(document_freep) Document *d = NULL;
        json_error_t jerr;
        json_t *j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr), *v, *tags;
        int r = 0;

        if (!j)
                return error_set(reterr, EINVAL, ERROR_CORRUPT, "malformed JSON at line %d: %s", jerr.line,
                                 jerr.text);
        v = json_object_get(j, "format");
        if (!json_is_integer(v))
                r = error_set(reterr, EINVAL, ERROR_CORRUPT, "no \"format\" field");
        else if (json_integer_value(v) > STORE_FORMAT)
                r = error_set(reterr, EPROTONOSUPPORT, ERROR_FORMAT_TOO_NEW,
                              "format %" JSON_INTEGER_FORMAT " is newer than this clsd understands (%d)",
                              json_integer_value(v), STORE_FORMAT);
        else if (!json_is_string(json_object_get(j, "ifname")) ||
                 !ifname_valid(json_string_value(json_object_get(j, "ifname"))))
                r = error_set(reterr, EINVAL, ERROR_CORRUPT, "missing or invalid \"ifname\"");
        else if (json_object_get(j, "netns") &&
                 (!json_is_string(json_object_get(j, "netns")) ||
                  !netns_name_valid(json_string_value(json_object_get(j, "netns")))))
                r = error_set(reterr, EINVAL, ERROR_CORRUPT, "invalid \"netns\"");
        else if (!json_is_integer(json_object_get(j, "generation")))
                r = error_set(reterr, EINVAL, ERROR_CORRUPT, "missing \"generation\"");
        else {
                _cleanup_error_ Error e = ERROR_NULL;
                r = document_from_json(json_string_value(json_object_get(j, "ifname")),
                                       json_object_get(j, "spec"), &d, &e);
                if (r < 0)
                        error_set(reterr, r, ERROR_CORRUPT, "spec: %s", strna(e.message));
        }
        if (r < 0) {
                json_decref(j);
                return r;
        }
        /* Stored documents are resolved: a file without digest and program (written by hand, or
         * damaged) is refused, not guessed at. */
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < d->n_filters[dir]; i++) {
                        const FilterSpec *f = &d->filters[dir][i];
                        bool resolved = f->digest && f->program;
                        for (size_t k = 0; k < f->n_actions; k++)
                                resolved = resolved && f->actions[k].digest && f->actions[k].program;
                        if (!resolved) {
                                json_decref(j);
                                return error_set(reterr, EINVAL, ERROR_CORRUPT,
                                                 "spec: %s[%zu]: a stored filter and its actions need "
                                                 "\"digest\" and \"program\"",
                                                 direction_to_string(dir), i);
                        }
                }
        if (json_is_string(json_object_get(j, "netns")) &&
            !(d->netns = strdup(json_string_value(json_object_get(j, "netns"))))) {
                json_decref(j);
                return error_oom(reterr);
        }
        d->generation = (uint64_t) json_integer_value(json_object_get(j, "generation"));
        facts.clsact_created = json_is_true(json_object_get(j, "clsact_created"));
        tags = json_object_get(j, "attached");
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < d->n_filters[dir]; i++) {
                        const FilterSpec *f = &d->filters[dir][i];
                        json_t *a = json_object_get(tags, f->name), *acts = json_object_get(a, "actions");
                        FilterFact ff = { 0 };

                        if (!a)
                                continue;
                        snprintf(ff.name, sizeof(ff.name), "%s", f->name);
                        attached_parse(a, &ff.program);
                        json_t *inst = json_object_get(a, "instance");
                        if (json_is_string(inst) && strlen(json_string_value(inst)) == 16)
                                memcpy(ff.instance, json_string_value(inst), 17);
                        for (size_t k = 0; k < f->n_actions && k < json_array_size(acts); k++)
                                attached_parse(json_array_get(acts, k), &ff.actions[ff.n_actions++]);
                        if (document_facts_set(&facts, &ff) < 0) {
                                document_facts_done(&facts);
                                json_decref(j);
                                return error_oom(reterr);
                        }
                }
        json_decref(j);
        *ret = (StoredDocument){ .doc = TAKE_PTR(d), .facts = facts };
        return 0;
}

/* One document file read and parsed, or why not. */
typedef struct LoadSlot {
        char *name;
        StoredDocument d;
        Error e;
        int r;
} LoadSlot;

struct StoreLoad {
        Store *store;
        DocumentSource source;
        int dir_fd;
        const char *subdir;
        LoadSlot *slots;
        size_t n;
        size_t next; /* the next slot to take, by either thread (atomic) */
        pthread_t helper;
        bool helping;
};

static void load_one(int dir_fd, LoadSlot *slot) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = openat(dir_fd, slot->name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        size_t size;
        int r;

        r = fd < 0 ? -errno : read_full_fd(fd, DOCUMENT_FILE_MAX, &text, &size);
        if (r < 0)
                /* Too big is corrupt; anything else (EMFILE, EIO, ENOMEM) says nothing of the file. */
                error_set(&slot->e, r, r == -EFBIG ? ERROR_CORRUPT : ERROR_UNREADABLE, "cannot read: %s",
                          strerror(-r));
        else
                r = document_file_parse(text, size, &slot->d, &slot->e);
        slot->r = r;
}

/* Takes slots until none is left; run by the helper thread and, in store_documents_load_end(), by the
 * caller's. Each slot is written by the one thread that took it. */
static void *load_slots(void *userdata) {
        StoreLoad *l = userdata;
        size_t i;

        while ((i = __atomic_fetch_add(&l->next, 1, __ATOMIC_RELAXED)) < l->n)
                load_one(l->dir_fd, &l->slots[i]);
        return NULL;
}

/* Below this many documents, a thread costs more than it saves. */
#define LOAD_THREAD_MIN 32

int store_documents_load_begin(Store *s, DocumentSource source, StoreLoad **ret, Error *reterr) {
        _cleanup_free_ StoreLoad *l = calloc(1, sizeof(*l));
        char **names = NULL;
        size_t n = 0;
        int r;

        if (!l)
                return error_oom(reterr);
        l->store = s;
        l->source = source;
        l->dir_fd = source_fd(s, source, &l->subdir);
        r = store_list_dir(l->dir_fd, ".json", &names, &n);
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot list %s/%s: %s", s->dir, l->subdir,
                                 strerror(-r));
        l->slots = calloc(n + 1, sizeof(LoadSlot));
        if (!l->slots) {
                strv_free_n(names, n);
                return error_oom(reterr);
        }
        for (size_t i = 0; i < n; i++)
                l->slots[i].name = names[i];
        free(names);
        l->n = n;
        l->helping = n >= LOAD_THREAD_MIN && pthread_create(&l->helper, NULL, load_slots, l) == 0;
        *ret = TAKE_PTR(l);
        return 0;
}

int store_documents_load_end(StoreLoad *l, StoredDocument **ret, size_t *ret_n, StoreProblemFunc problem,
                             void *userdata, Error *reterr) {
        StoredDocument *docs = calloc(l->n + 1, sizeof(StoredDocument));
        size_t n_docs = 0;

        load_slots(l);
        if (l->helping)
                (void) pthread_join(l->helper, NULL);
        for (size_t i = 0; i < l->n; i++) {
                LoadSlot *slot = &l->slots[i];
                _cleanup_free_ char *qpath = NULL, *path = NULL;

                if (slot->r >= 0 && docs) {
                        slot->d.doc->source = l->source;
                        docs[n_docs++] = slot->d;
                } else if (slot->r >= 0)
                        stored_documents_free(&slot->d, 1);
                else {
                        if (asprintf(&path, "%s/%s/%s", l->store->dir, l->subdir, slot->name) < 0)
                                path = NULL;
                        /* Only a file known to be corrupt moves; one from a newer clsd stays for that clsd.
                         */
                        if (slot->e.code == ERROR_CORRUPT &&
                            store_quarantine(l->store, l->dir_fd, slot->name, &qpath) >= 0)
                                log_problem(problem, userdata, path, slot->e.message, qpath);
                        else
                                log_problem(problem, userdata, path, slot->e.message, NULL);
                        error_done(&slot->e);
                }
                free(slot->name);
        }
        free(l->slots);
        free(l);
        if (!docs)
                return error_oom(reterr);
        *ret = docs;
        *ret_n = n_docs;
        return 0;
}

int store_documents_load(Store *s, DocumentSource source, StoredDocument **ret, size_t *ret_n,
                         StoreProblemFunc problem, void *userdata, Error *reterr) {
        StoreLoad *l;
        int r;

        r = store_documents_load_begin(s, source, &l, reterr);
        if (r < 0)
                return r;
        return store_documents_load_end(l, ret, ret_n, problem, userdata, reterr);
}
