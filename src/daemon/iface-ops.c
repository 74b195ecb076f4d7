/* iface-ops.c: what the faces ask of an interface (PUT, dry run, DELETE) and what a hog's change asks,
 * checked as far as can be at once (names, the document's syntax, one device one owner), then queued
 * as a change. */
#include <stdio.h>
#include <string.h>

#include "change.h"
#include "iface-ops.h"
#include "reconcile.h"
#include "log.h"
#include "daemon-changes.h"

static int check_names(const char *netns, const char *ifname, Error *reterr) {
        if (netns && !netns_name_valid(netns))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "\"%s\" is not a valid network namespace name (1 to %d characters of A-Z "
                                 "a-z 0-9 _ . -)",
                                 netns, NETNS_NAME_MAX);
        if (!ifname_valid(ifname))
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_VALUE,
                        "\"%s\" is not a valid interface name (1 to 15 characters, no '/', ':' or space)",
                        ifname);
        return 0;
}

/* A new API document (not one replaced) fits --max-documents. */
static int check_documents_quota(Manager *m, const char *netns, const char *ifname, Error *reterr) {
        Iface *it = iface_table_get(m->ifaces, netns, ifname);
        size_t n = 0;

        if (!m->config.documents_max || (it && it->visible && it->api))
                return 0;
        for (size_t i = 0; i < iface_table_size(m->ifaces); i++) {
                Iface *o = iface_table_at(m->ifaces, i);
                n += o->visible && o->api;
        }
        if (n >= m->config.documents_max)
                return error_set(
                        reterr, ENOSPC, ERROR_QUOTA_EXCEEDED,
                        "%zu documents are stored, the most --max-documents allows; delete one first", n);
        return 0;
}

/* The change of a PUT or its dry run, its document checked (a dry run says what the PUT would: refused);
 * NULL, with reterr set, if refused. */
static Change *put_change(Manager *m, ChangeKind kind, const char *netns, const char *ifname, json_t *body,
                          const DaemonExpect *expect, Error *reterr) {
        _cleanup_(document_unrefp) Document *doc = NULL;
        Change *c;

        if (check_names(netns, ifname, reterr) < 0 || document_from_json(ifname, body, &doc, reterr) < 0)
                return NULL;
        if (netns && !(doc->netns = strdup(netns))) {
                error_oom(reterr);
                return NULL;
        }
        if (iface_check_owner(m, netns, ifname, reterr) < 0 ||
            check_documents_quota(m, netns, ifname, reterr) < 0)
                return NULL;
        c = change_new(m, kind, expect);
        if (!c) {
                error_oom(reterr);
                return NULL;
        }
        c->doc = TAKE_PTR(doc);
        return c;
}

static void put_or_dry_run(Manager *m, ChangeKind kind, const char *netns, const char *ifname, json_t *body,
                           const DaemonExpect *expect, DaemonDoneFunc done, DryRunDoneFunc dry_done,
                           void *userdata) {
        _cleanup_error_ Error e = ERROR_NULL;
        Change *c = put_change(m, kind, netns, ifname, body, expect, &e);

        if (!c) {
                if (kind == CHANGE_DRY_RUN)
                        dry_done(m, NULL, &e, userdata);
                else
                        done(m, NULL, &e, userdata);
                return;
        }
        c->done = done;
        c->dry_done = dry_done;
        c->userdata = userdata;
        change_queue(m, c, netns, ifname);
}

void daemon_iface_put(Manager *m, const char *netns, const char *ifname, json_t *body,
                      const DaemonExpect *expect, DaemonDoneFunc done, void *userdata) {
        put_or_dry_run(m, CHANGE_PUT, netns, ifname, body, expect, done, NULL, userdata);
}

void daemon_iface_dry_run(Manager *m, const char *netns, const char *ifname, json_t *body,
                          const DaemonExpect *expect, DryRunDoneFunc done, void *userdata) {
        put_or_dry_run(m, CHANGE_DRY_RUN, netns, ifname, body, expect, NULL, done, userdata);
}

void daemon_iface_delete(Manager *m, const char *netns, const char *ifname, const DaemonExpect *expect,
                         DaemonDoneFunc done, void *userdata) {
        Iface *it = iface_table_get(m->ifaces, netns, ifname);
        _cleanup_error_ Error e = ERROR_NULL;
        Change *c;

        if (!it || !it->visible || (!it->api && !it->hog)) {
                error_set(&e, ENOENT, ERROR_DOCUMENT_NOT_FOUND, "no classifier document for %s", ifname);
                done(m, NULL, &e, userdata);
                return;
        }
        c = change_new(m, CHANGE_DELETE, expect);
        if (!c) {
                error_oom(&e);
                done(m, NULL, &e, userdata);
                return;
        }
        c->done = done;
        c->userdata = userdata;
        change_queue(m, c, netns, ifname);
}

typedef struct HogDone {
        char *ifname;
        DaemonDoneFunc done;
        void *userdata;
} HogDone;

static void on_hog_changed(Manager *m, Iface *it, const Error *e, void *userdata) {
        HogDone *h = userdata;

        if (e)
                log_error("%s: cannot apply the hog change: %s; the interface stays as it was", h->ifname,
                          strna(e->message));
        if (h->done)
                h->done(m, it, e, h->userdata);
        free(h->ifname);
        free(h);
}

void iface_hog_change(Manager *m, const char *netns, const char *ifname, Document *hog, const char *hog_path,
                      DaemonDoneFunc done, void *userdata) {
        Change *c = change_new(m, CHANGE_HOG, NULL);
        HogDone *h = calloc(1, sizeof(*h));

        if (!c || !h || !(h->ifname = strdup(ifname)) || (hog_path && !(c->hog_path = strdup(hog_path)))) {
                _cleanup_error_ Error e = ERROR_NULL;
                log_error("%s: out of memory applying a hog change", ifname);
                if (c)
                        change_free(&c->op);
                if (h)
                        free(h->ifname);
                free(h);
                error_oom(&e);
                if (done)
                        done(m, NULL, &e, userdata);
                return;
        }
        h->done = done;
        h->userdata = userdata;
        c->doc = document_ref(hog);
        c->done = on_hog_changed;
        c->userdata = h;
        change_queue(m, c, netns, ifname);
}
