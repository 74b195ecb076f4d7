/* hogs.c: documents declared in configuration (hogs.d/NAME.json), like a GPIO hog wired at probe time:
 * applied at start and whenever their interface appears, read-only to the API, winning over an API
 * document on the hooks they declare; SIGHUP re-reads them and applies only what changed. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "daemon-internal.h"
#include "fileio.h"
#include "log.h"

/* A hog file is a small JSON document; anything bigger is a mistake. */
#define HOG_FILE_MAX (1024 * 1024)

typedef struct Hog {
        char *path;
        Document *doc;
} Hog;

typedef struct HogSet {
        Hog *hogs;
        size_t n_hogs;
        char **bad_paths; /* files that could not be used this time */
        size_t n_bad;
} HogSet;

static void hog_set_done(HogSet *s) {
        for (size_t i = 0; i < s->n_hogs; i++) {
                free(s->hogs[i].path);
                document_free(s->hogs[i].doc);
        }
        free(s->hogs);
        strv_free_n(s->bad_paths, s->n_bad);
        *s = (HogSet){ 0 };
}

static const Hog *hog_set_find(const HogSet *s, const char *netns, const char *ifname) {
        for (size_t i = 0; i < s->n_hogs; i++)
                if (streq(s->hogs[i].doc->ifname, ifname) && streq_ptr(s->hogs[i].doc->netns, netns))
                        return &s->hogs[i];
        return NULL;
}

static bool hog_set_is_bad(const HogSet *s, const char *path) {
        for (size_t i = 0; path && i < s->n_bad; i++)
                if (streq(s->bad_paths[i], path))
                        return true;
        return false;
}

static int is_hog_file(const struct dirent *de) {
        size_t n = strlen(de->d_name);
        return de->d_name[0] != '.' && n > 5 && streq(de->d_name + n - 5, ".json");
}

/* One hog file: parsed, its objects read (and with store, stored) and their programs resolved. */
static int hog_read(Daemon *d, const char *path, bool store, Document **ret, Error *reterr) {
        _cleanup_(document_freep) Document *doc = NULL;
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        r = read_regular_file(path, HOG_FILE_MAX, &text, &size);
        if (r < 0)
                return error_set(reterr, r, "invalid_value", "cannot read: %s",
                                 r == -EBADFD ? "not a regular file" : strerror(-r));
        r = document_hog_from_string(text, size, &doc, reterr);
        if (r < 0)
                return r;
        r = daemon_document_resolve(d, doc, store, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(doc);
        return 0;
}

/* Reads every *.json of the directory in name order; a missing directory holds no hogs. Problems are
 * reported (on stderr with check, in the log otherwise) and counted; the files stay as they are. */
static int hogs_read(Daemon *d, const char *dir, bool store, bool check, HogSet *ret, size_t *ret_problems) {
        struct dirent **entries = NULL;
        HogSet s = { 0 };
        size_t problems = 0;
        int n;

        n = scandir(dir, &entries, is_hog_file, alphasort);
        if (n < 0) {
                if (errno == ENOENT) {
                        *ret = s;
                        *ret_problems = 0;
                        return 0;
                }
                if (check)
                        fprintf(stderr, "clsd: %s: cannot read the hogs directory: %m\n", dir);
                else
                        log_error("%s: cannot read the hogs directory: %m", dir);
                *ret = s;
                *ret_problems = 1;
                return 0;
        }
        s.hogs = calloc((size_t) n + 1, sizeof(Hog));
        s.bad_paths = calloc((size_t) n + 1, sizeof(char *));
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *path = NULL;
                Document *doc = NULL;
                Error e = ERROR_NULL;
                const Hog *other;
                int r;

                if (asprintf(&path, "%s/%s", dir, entries[i]->d_name) < 0 || !s.hogs || !s.bad_paths) {
                        path = NULL;
                        error_set(&e, ENOMEM, "internal_error", "out of memory");
                        r = -ENOMEM;
                } else
                        r = hog_read(d, path, store, &doc, &e);
                if (r >= 0 && (other = hog_set_find(&s, doc->netns, doc->ifname))) {
                        r = error_set(
                                &e, EEXIST, "invalid_value",
                                "ifname: %s%s%s already has a hog, declared by %s; this file is ignored",
                                strempty(doc->netns), doc->netns ? "/" : "", doc->ifname, other->path);
                        doc = document_free(doc);
                }
                if (r < 0) {
                        problems++;
                        if (check)
                                fprintf(stderr, "clsd: %s: %s\n", strna(path), strna(e.message));
                        else
                                log_error("%s: hog not applied: %s", strna(path), strna(e.message));
                        error_done(&e);
                        if (path && s.bad_paths)
                                s.bad_paths[s.n_bad++] = TAKE_PTR(path);
                        continue;
                }
                s.hogs[s.n_hogs++] = (Hog){ .path = TAKE_PTR(path), .doc = doc };
        }
        for (int i = 0; i < n; i++)
                free(entries[i]);
        free(entries);
        *ret = s;
        *ret_problems = problems;
        return 0;
}

int daemon_hogs_check(const char *dir, size_t object_size_max) {
        Daemon d = { .config = { .hogs_dir = dir, .object_size_max = object_size_max } };
        HogSet s = { 0 };
        size_t problems = 0;

        _cleanup_(nl_socket_freep) NlSocket *rtnl = NULL;

        /* A hog is checked against this kernel: "attach":"tcx" needs tcx, "actions" act_bpf. */
        (void) nl_tcx_probe(&d.tcx);
        if (nl_socket_open(0, &rtnl, NULL) >= 0)
                (void) nl_act_bpf_probe(rtnl, &d.act_bpf);
        (void) hogs_read(&d, dir, false, true, &s, &problems);
        if (problems == 0)
                printf("%s: %zu hog(s), all valid\n", dir, s.n_hogs);
        hog_set_done(&s);
        return (int) MIN(problems, (size_t) INT32_MAX);
}

/* The interface's documents become api and hog; old (if any) is replaced. With reconcile, the kernel
 * is brought to match now (or a retry is scheduled); old's programs are released only after, so that
 * unchanged filters keep theirs. */
static int iface_set_hog(Daemon *d, Iface *old, const Document *hog, const char *hog_path, bool reconcile) {
        Iface *it;
        int r;

        r = iface_new(old ? old->api : NULL, hog, hog_path, &it);
        if (r < 0)
                return r;
        if (old)
                iface_carry_over(it, old);
        if (!old && ifaces_reserve(d) < 0) {
                iface_free(d, it);
                return -ENOMEM;
        }
        ifaces_put(d, old, it);
        if (reconcile)
                iface_reconcile_or_retry(d, it);
        iface_free(d, old);
        return 0;
}

/* On SIGHUP: a failure keeps the old runtime (and what it attached) and says so. */
static void iface_set_hog_or_log(Daemon *d, Iface *old, const Document *hog, const char *hog_path,
                                 const char *ifname) {
        int r = iface_set_hog(d, old, hog, hog_path, true);
        if (r < 0)
                log_error("%s: cannot apply the hog change: %s; the interface stays as it was", ifname,
                          strerror(-r));
}

/* A hog with what its last run attached, from hogs/ in the store, so that it is adopted. */
static void hog_keep_facts(Daemon *d, Document *hog) {
        _cleanup_(document_freep) Document *cached = NULL;

        if (store_document_load(d->store, SOURCE_HOG, hog->netns, hog->ifname, &cached, NULL) < 0)
                return;
        document_keep_facts(hog, cached);
        hog->clsact_created = cached->clsact_created;
}

int daemon_hogs_load(Daemon *d) {
        Document **cached = NULL;
        size_t n_cached = 0, problems = 0;
        HogSet s = { 0 };
        int r = 0;

        if (!d->config.hogs_dir)
                return 0;
        (void) hogs_read(d, d->config.hogs_dir, true, false, &s, &problems);
        for (size_t i = 0; i < s.n_hogs && r >= 0; i++) {
                Hog *h = &s.hogs[i];
                hog_keep_facts(d, h->doc);
                r = iface_set_hog(d, daemon_iface_get(d, h->doc->netns, h->doc->ifname), h->doc, h->path,
                                  false);
                if (r >= 0)
                        log_info("%s: hog %s", h->doc->ifname, h->path);
        }
        /* A hog whose file went while clsd was down leaves filters of clsd's behind: take them away
         * (a document the API still has for the interface is reconciled anyway, which does it). Not
         * while a file cannot be read: it may be that hog's. */
        if (r >= 0 && store_documents_load(d->store, SOURCE_HOG, &cached, &n_cached, NULL, NULL, NULL) >= 0)
                for (size_t i = 0; i < n_cached; i++) {
                        Iface *it = NULL;
                        Error e = ERROR_NULL;
                        if (problems == 0 && !daemon_iface_get(d, cached[i]->netns, cached[i]->ifname) &&
                            iface_new(NULL, cached[i], NULL, &it) >= 0) {
                                log_info("%s: its hog is gone; removing what it attached",
                                         cached[i]->ifname);
                                if (iface_forget(d, it, &e) < 0) {
                                        log_warning("%s: %s", cached[i]->ifname, strna(e.message));
                                        iface_free(d, it);
                                }
                                error_done(&e);
                        }
                        document_free(cached[i]);
                }
        free(cached);
        hog_set_done(&s);
        return r;
}

static bool hog_equal(const Iface *it, const Hog *h) {
        json_t *a, *b;
        bool eq;

        if (!it->hog || !streq(it->hog_path, h->path))
                return false;
        a = document_spec_to_json(it->hog);
        b = document_spec_to_json(h->doc);
        eq = json_equal(a, b);
        json_decref(a);
        json_decref(b);
        return eq;
}

int daemon_hogs_reload(Daemon *d) {
        HogSet s = { 0 };
        size_t problems = 0, changed = 0;

        if (!d->config.hogs_dir)
                return 0;
        (void) hogs_read(d, d->config.hogs_dir, true, false, &s, &problems);

        /* Hogs that changed or went. A file that cannot be read this time keeps its hog as it was. */
        for (size_t i = 0; i < d->n_ifaces;) {
                Iface *it = d->ifaces[i];
                const Hog *h = hog_set_find(&s, it->doc->netns, it->doc->ifname);
                Error e = ERROR_NULL;

                i++;
                if (!it->hog || hog_set_is_bad(&s, it->hog_path) || (h && hog_equal(it, h)))
                        continue;
                changed++;
                if (h) {
                        log_info("%s: hog %s changed; applying the difference", it->doc->ifname, h->path);
                        document_keep_facts(h->doc, it->hog);
                        h->doc->clsact_created = it->hog->clsact_created;
                        iface_set_hog_or_log(d, it, h->doc, h->path, h->doc->ifname);
                } else if (it->api) {
                        log_info("%s: hog %s removed; the API's document applies", it->doc->ifname,
                                 it->hog_path);
                        (void) store_document_remove(d->store, SOURCE_HOG, it->doc->netns, it->doc->ifname,
                                                     NULL);
                        iface_set_hog_or_log(d, it, NULL, NULL, it->doc->ifname);
                } else {
                        log_info("%s: hog %s removed; removing what it attached", it->doc->ifname,
                                 it->hog_path);
                        if (iface_forget(d, it, &e) >= 0)
                                i--; /* it left the list */
                        else
                                log_error("%s: %s", it->doc->ifname, strna(e.message));
                        error_done(&e);
                }
        }
        /* New hogs. */
        for (size_t i = 0; i < s.n_hogs; i++) {
                Iface *it = daemon_iface_get(d, s.hogs[i].doc->netns, s.hogs[i].doc->ifname);
                if (it && it->hog)
                        continue;
                changed++;
                log_info("%s: new hog %s", s.hogs[i].doc->ifname, s.hogs[i].path);
                iface_set_hog_or_log(d, it, s.hogs[i].doc, s.hogs[i].path, s.hogs[i].doc->ifname);
        }
        log_info("hogs re-read: %zu hog(s), %zu changed, %zu file(s) with problems", s.n_hogs, changed,
                 problems);
        hog_set_done(&s);
        return 0;
}
