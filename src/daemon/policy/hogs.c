/* hogs.c: documents declared in configuration (hogs.d/NAME.json), like a GPIO hog wired at probe time:
 * applied at start and whenever their interface appears, read-only to the API, winning over an API
 * document on the hooks they declare; SIGHUP re-reads them and applies only what changed. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "fileio.h"
#include "log.h"
#include "hogs.h"
#include "oci.h"
#include "iface-ops.h"
#include "policy-match.h"
#include "reconcile.h"
#include "resolution.h"
#include "resolve.h"
#include "nl-bpf.h"
#include "nl-tcx.h"
#include "nl-worker.h"
#include "store-policy.h"

/* A hog file is a small JSON document; anything bigger is a mistake. */
#define HOG_FILE_MAX (1024 * 1024)

typedef struct Hog {
        char *path;
        Document *doc;
} Hog;

typedef struct HogSet {
        Hog *hogs;
        size_t n_hogs;
        Policy **policies; /* hogs with "match": policies of the configuration */
        size_t n_policies;
        char **bad_paths; /* files that could not be used this time */
        size_t n_bad;
} HogSet;

static void hog_set_done(HogSet *s) {
        for (size_t i = 0; i < s->n_hogs; i++) {
                free(s->hogs[i].path);
                document_unref(s->hogs[i].doc);
        }
        free(s->hogs);
        for (size_t i = 0; i < s->n_policies; i++)
                policy_unref(s->policies[i]);
        free(s->policies);
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

/* A hog's images pulled in place (a hog is read at start and on a reload, not on the way of traffic). */
static int hog_pull(Manager *m, Resolver *rs, Error *reterr) {
        for (size_t i = 0; i < rs->n_pulls; i++) {
                OciImage img = { 0 };
                OciPullOptions o;
                int r;
                resolution_pull_options(m, rs->pulls[i], &o);
                r = oci_pull(rs->pulls[i], &o, &img, reterr);
                if (r >= 0 && resolver_add_pulled(rs, rs->pulls[i], &img) < 0)
                        r = error_oom(reterr);
                oci_image_done(&img);
                if (r < 0)
                        return r;
        }
        resolver_pulls_clear(rs);
        return -EAGAIN;
}

/* Resolves a hog's objects: a hog is the host's configuration, named by path or by OCI reference; an
 * object clsd has not seen is inspected (in a forked worker, waited for) and, with store, stored. */
static int hog_resolve(Manager *m, ObjectCache *cache, Store *store, Document *doc, Error *reterr) {
        Resolver rs = { .cache = cache,
                        .object_size_max = m->config.object_size_max,
                        .act_bpf = m->kernel.act_bpf,
                        .tcx = m->kernel.tcx,
                        .trusted = m->trust.keys };
        int r;

        for (;;) {
                r = resolver_document(&rs, doc, reterr);
                if (r == -EAGAIN && rs.n_pulls > 0) {
                        r = hog_pull(m, &rs, reterr);
                        if (r != -EAGAIN)
                                break;
                        continue;
                }
                if (r != -EAGAIN)
                        break;
                for (size_t i = 0; i < rs.n_pending && r == -EAGAIN; i++) {
                        PendingObject *p = &rs.pending[i];
                        NlObjectInfo *info = NULL;
                        char digest[SHA256_DIGEST_STRING_MAX];
                        int k = nl_object_inspect_forked(p->data, p->size, &info, reterr);
                        if (k < 0) {
                                r = k;
                                break;
                        }
                        if (store && (store_object_put(store, p->data, p->size, digest, NULL, reterr) < 0 ||
                                      (p->sig && store_object_signature_put(store, digest, p->sig,
                                                                            p->sig_size, reterr) < 0))) {
                                nl_object_info_free(info);
                                r = -EIO;
                                break;
                        }
                        if (store)
                                k = object_cache_add(cache, p->digest, p->size, info, NULL);
                        else
                                k = resolver_add_extra(&rs, p->digest, p->size, info);
                        if (k < 0 && k != -EEXIST) {
                                r = error_oom(reterr);
                                break;
                        }
                        if (k == -EEXIST)
                                nl_object_info_free(info);
                }
                if (r != -EAGAIN)
                        break;
                pending_objects_free(rs.pending, rs.n_pending);
                rs.pending = NULL;
                rs.n_pending = 0;
        }
        resolver_done(&rs);
        return r;
}

/* A hog with "match" instead of "ifname": a policy of the configuration, named by its file (its name
 * without ".json"). */
static int hog_policy_read(Manager *m, ObjectCache *cache, Store *store, const char *path, json_t *j,
                           Policy **ret, Error *reterr) {
        _cleanup_(policy_unrefp) Policy *p = NULL;
        _cleanup_free_ char *name = NULL;
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        int r;

        name = strndup(base, strlen(base) - 5);
        if (!name)
                return error_oom(reterr);
        r = policy_from_json(name, j, &p, reterr);
        if (r < 0)
                return r;
        r = hog_resolve(m, cache, store, p->doc, reterr);
        if (r < 0)
                return r;
        p->generation = 1;
        p->doc->generation = 1;
        if (!(p->hog_path = strdup(path)))
                return error_oom(reterr);
        *ret = TAKE_PTR(p);
        return 0;
}

/* One hog file: parsed, its objects read (and with store, stored) and their programs resolved; one
 * with "match" is a policy (*ret_policy), any other a document of one interface (*ret). */
static int hog_read(Manager *m, ObjectCache *cache, Store *store, const char *path, Document **ret,
                    Policy **ret_policy, Error *reterr) {
        _cleanup_(document_freep) Document *doc = NULL;
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        r = read_regular_file(path, HOG_FILE_MAX, &text, &size);
        if (r < 0)
                return error_set(reterr, r, ERROR_INVALID_VALUE, "cannot read: %s",
                                 r == -EBADFD ? "not a regular file" : strerror(-r));
        {
                json_t *j = json_loadb(text, size, JSON_REJECT_DUPLICATES, NULL);
                if (json_is_object(j) && json_object_get(j, "match")) {
                        r = hog_policy_read(m, cache, store, path, j, ret_policy, reterr);
                        json_decref(j);
                        if (r >= 0)
                                *ret = NULL;
                        return r;
                }
                json_decref(j);
        }
        r = document_hog_from_string(text, size, &doc, reterr);
        if (r < 0)
                return r;
        r = hog_resolve(m, cache, store, doc, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(doc);
        return 0;
}

/* Reads every *.json of the directory in name order; a missing directory holds no hogs. Problems are
 * reported (on stderr with check, in the log otherwise) and counted; the files stay as they are. */
static int hogs_read(Manager *m, ObjectCache *cache, Store *store, const char *dir, bool check, HogSet *ret,
                     size_t *ret_problems) {
        struct dirent **entries = NULL;
        HogSet s = { 0 };
        size_t problems = 0;
        int n;

        n = scandir(dir, &entries, is_hog_file, alphasort);
        if (n < 0) {
                if (errno != ENOENT) {
                        if (check)
                                fprintf(stderr, "clsd: %s: cannot read the hogs directory: %m\n", dir);
                        else
                                log_error("%s: cannot read the hogs directory: %m", dir);
                        problems = 1;
                }
                *ret = s;
                *ret_problems = problems;
                return 0;
        }
        s.hogs = calloc((size_t) n + 1, sizeof(Hog));
        s.policies = calloc((size_t) n + 1, sizeof(Policy *));
        s.bad_paths = calloc((size_t) n + 1, sizeof(char *));
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *path = NULL;
                Document *doc = NULL;
                Policy *policy = NULL;
                _cleanup_error_ Error e = ERROR_NULL;
                const Hog *other;
                int r;

                if (asprintf(&path, "%s/%s", dir, entries[i]->d_name) < 0 || !s.hogs || !s.bad_paths ||
                    !s.policies) {
                        path = NULL;
                        error_oom(&e);
                        r = -ENOMEM;
                } else
                        r = hog_read(m, cache, store, path, &doc, &policy, &e);
                if (r >= 0 && policy) {
                        s.policies[s.n_policies++] = policy;
                        continue;
                }
                if (r >= 0 && (other = hog_set_find(&s, doc->netns, doc->ifname))) {
                        r = error_set(
                                &e, EEXIST, ERROR_INVALID_VALUE,
                                "ifname: %s%s%s already has a hog, declared by %s; this file is ignored",
                                strempty(doc->netns), doc->netns ? "/" : "", doc->ifname, other->path);
                        doc = document_unref(doc);
                }
                if (r < 0) {
                        problems++;
                        if (check)
                                fprintf(stderr, "clsd: %s: %s\n", strna(path), strna(e.message));
                        else
                                log_error("%s: hog not applied: %s", strna(path), strna(e.message));
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

int daemon_hogs_check(const char *dir, const char *file, size_t object_size_max,
                      const TrustedKeys *trusted) {
        Manager m = {
                .config = { .hogs_dir = dir, .object_size_max = object_size_max, .trusted_keys = trusted },
                .trust = { .keys = trusted },
        };
        _cleanup_(nl_socket_freep) NlSocket *rtnl = NULL;
        ObjectCache *cache = NULL;
        HogSet s = { 0 };
        size_t problems = 0;

        /* A hog is checked against this kernel: "attach":"tcx" needs tcx, "actions" act_bpf. */
        (void) nl_tcx_probe(&m.kernel.tcx);
        if (nl_socket_open(0, &rtnl, NULL) >= 0)
                (void) nl_act_bpf_probe(rtnl, &m.kernel.act_bpf);
        if (object_cache_new(&cache) < 0) {
                fprintf(stderr, "clsd: out of memory\n");
                return 1;
        }
        if (file) {
                /* one file, whatever its name (Ansible's validate: hands a temporary one) */
                Document *doc = NULL;
                Policy *policy = NULL;
                _cleanup_error_ Error e = ERROR_NULL;
                if (hog_read(&m, cache, NULL, file, &doc, &policy, &e) < 0) {
                        fprintf(stderr, "clsd: %s: %s\n", file, strna(e.message));
                        problems = 1;
                } else
                        printf("%s: a valid hog\n", file);
                document_unref(doc);
                policy_unref(policy);
        } else {
                (void) hogs_read(&m, cache, NULL, dir, true, &s, &problems);
                if (problems == 0)
                        printf("%s: %zu hog(s), all valid\n", dir, s.n_hogs + s.n_policies);
        }
        hog_set_done(&s);
        object_cache_free(cache);
        return (int) MIN(problems, (size_t) INT32_MAX);
}

/* The interface of a hog at start: its documents set now, reconciled with the rest. */
static int hog_set_at_start(Manager *m, Hog *h) {
        StoredDocument cached = { 0 };
        Iface *it = iface_table_get(m->ifaces, h->doc->netns, h->doc->ifname);
        bool new = !it;
        int r;

        /* What its last run attached, from hogs/ in the store, so that it is adopted. */
        (void) store_document_load(m->store, SOURCE_HOG, h->doc->netns, h->doc->ifname, &cached, NULL);
        if (new &&
            (iface_new(h->doc->netns, h->doc->ifname, &it) < 0 || iface_table_reserve(m->ifaces) < 0)) {
                iface_free(it, NULL);
                r = -ENOMEM;
                goto finish;
        }
        r = iface_set_documents(it, it->api, &it->facts[SOURCE_API], h->doc, h->path,
                                cached.doc ? &cached.facts : NULL, m->kernel.tcx, m->registry);
        if (r < 0) {
                if (new)
                        iface_free(it, m->registry);
                goto finish;
        }
        it->visible = true;
        iface_table_touch(m->ifaces);
        if (new)
                iface_table_add(m->ifaces, it);
        log_info("%s: hog %s", h->doc->ifname, h->path);
finish:
        document_unref(cached.doc);
        document_facts_done(&cached.facts);
        return r;
}

int hogs_load(Manager *m) {
        StoredDocument *cached = NULL;
        size_t n_cached = 0, problems = 0;
        _cleanup_(hog_set_done) HogSet s = { 0 };
        int r;

        if (!m->config.hogs_dir)
                return 0;
        (void) hogs_read(m, m->objects, m->store, m->config.hogs_dir, false, &s, &problems);
        for (size_t i = 0; i < s.n_hogs; i++) {
                r = hog_set_at_start(m, &s.hogs[i]);
                if (r < 0)
                        return r;
        }
        r = policies_set_hogs(m, s.policies, s.n_policies, false);
        if (r < 0)
                return r;
        /* A hog whose file went while clsd was down leaves filters of clsd's behind: take them away (a
         * document the API still has for the interface is reconciled anyway, which does it). Not while a
         * file cannot be read: it may be that hog's. */
        if (store_documents_load(m->store, SOURCE_HOG, &cached, &n_cached, NULL, NULL, NULL) >= 0)
                for (size_t i = 0; i < n_cached; i++) {
                        Document *d = cached[i].doc;
                        Iface *it = NULL;
                        NlSocket *rtnl;
                        NlLink link;
                        _cleanup_error_ Error e = ERROR_NULL;

                        if (problems > 0 || iface_table_get(m->ifaces, d->netns, d->ifname))
                                continue;
                        log_info("%s: its hog is gone; removing what it attached", d->ifname);
                        if (iface_new(d->netns, d->ifname, &it) >= 0 &&
                            iface_set_documents(it, NULL, NULL, d, NULL, &cached[i].facts, m->kernel.tcx,
                                                NULL) >= 0 &&
                            manager_link(m, d->netns, d->ifname, &rtnl, &link, &e) >= 0) {
                                it->ifindex = link.ifindex;
                                if (iface_remove_all(m, it, rtnl, &e) < 0)
                                        log_warning("%s: %s", d->ifname, strna(e.message));
                        }
                        (void) store_document_remove(m->store, SOURCE_HOG, d->netns, d->ifname, NULL);
                        iface_free(it, NULL);
                        manager_release_netns(m, d->netns);
                }
        stored_documents_free(cached, n_cached);
        return 0;
}

static bool hog_equal(const Iface *it, const Hog *h) {
        return it->hog && streq_ptr(it->hog_path, h->path) && document_spec_equal(it->hog, h->doc);
}

/* A SIGHUP's changes, said once they are all applied. */
typedef struct HogReload {
        Manager *m;
        size_t waiting, n_hogs, changed, problems;
} HogReload;

static void reload_said(HogReload *rl) {
        log_info("hogs re-read: %zu hog(s) of one interface, %zu changed, %zu file(s) with problems",
                 rl->n_hogs, rl->changed, rl->problems);
        free(rl);
}

static void on_hog_applied(Manager *m, Iface *it, const Error *e, void *userdata) {
        HogReload *rl = userdata;

        (void) m, (void) it, (void) e;
        if (--rl->waiting == 0)
                reload_said(rl);
}

int hogs_reload(Manager *m) {
        HogReload *rl;
        HogSet s = { 0 };
        size_t problems = 0;

        if (!m->config.hogs_dir)
                return 0;
        rl = calloc(1, sizeof(*rl));
        if (!rl)
                return -ENOMEM;
        (void) hogs_read(m, m->objects, m->store, m->config.hogs_dir, false, &s, &problems);
        *rl = (HogReload){ .m = m, .n_hogs = s.n_hogs, .problems = problems, .waiting = 1 };

        /* Hogs that changed or went. A file that cannot be read this time keeps its hog as it was. */
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                const Hog *h = hog_set_find(&s, it->netns, it->ifname);

                if (!it->hog || hog_set_is_bad(&s, it->hog_path) || (h && hog_equal(it, h)))
                        continue;
                rl->changed++;
                rl->waiting++;
                if (h)
                        log_info("%s: hog %s changed; applying the difference", it->ifname, h->path);
                else if (it->api)
                        log_info("%s: hog %s removed; the API's document applies", it->ifname, it->hog_path);
                else
                        log_info("%s: hog %s removed; removing what it attached", it->ifname, it->hog_path);
                iface_hog_change(m, it->netns, it->ifname, h ? h->doc : NULL, h ? h->path : NULL,
                                 on_hog_applied, rl);
        }
        /* New hogs. */
        for (size_t i = 0; i < s.n_hogs; i++) {
                Iface *it = daemon_iface_get(m, s.hogs[i].doc->netns, s.hogs[i].doc->ifname);
                if (it && it->hog)
                        continue;
                rl->changed++;
                rl->waiting++;
                log_info("%s: new hog %s", s.hogs[i].doc->ifname, s.hogs[i].path);
                iface_hog_change(m, s.hogs[i].doc->netns, s.hogs[i].doc->ifname, s.hogs[i].doc,
                                 s.hogs[i].path, on_hog_applied, rl);
        }
        /* Hogs with "match": the policies of the configuration, only those that changed applied. */
        (void) policies_set_hogs(m, s.policies, s.n_policies, true);
        hog_set_done(&s);
        if (--rl->waiting == 0)
                reload_said(rl);
        return 0;
}
