/* routes-ifaces.c: /ifaces and /ifaces/{ifname}/classifier: the desired state per interface; the same
 * under /netns/{name}/ for a named network namespace. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api-internal.h"
#include "hashmap.h"
#include "daemon-changes.h"
#include "daemon-objects.h"

/* Copies the URL segment [start, end) into buf; a segment too long for it is 400 invalid_value. */
static int path_segment(const char *start, const char *end, char *buf, size_t size, const char *what,
                        int max, Response *resp) {
        if ((size_t) (end - start) >= size) {
                response_errorf(resp, ERROR_INVALID_VALUE, "the %s name is longer than %d characters", what,
                                max);
                return -EINVAL;
        }
        memcpy(buf, start, (size_t) (end - start));
        buf[end - start] = 0;
        return 0;
}

/* What GET /ifaces of the namespace is made of: the links' version, and each of its interfaces' name,
 * state, source, generation and ifindex (FNV-1a). */
static uint64_t ifaces_made_of(Manager *d, const char *netns) {
        uint64_t h = 1469598103934665603ULL, v = daemon_links_version(d);
        size_t n;
        Iface *const *ifaces = daemon_ifaces(d, &n);

        h = hash_bytes(&v, sizeof(v), h);
        for (size_t i = 0; i < n; i++) {
                const Iface *it = ifaces[i];
                const Document *api;
                uint64_t x[4];
                if (!streq_ptr(iface_netns(it), netns))
                        continue;
                api = iface_api_document(it);
                x[0] = iface_state(it);
                x[1] = iface_source(it);
                x[2] = api ? api->generation : 0;
                x[3] = (uint64_t) iface_ifindex(it);
                h = hash_bytes(iface_ifname(it), strlen(iface_ifname(it)) + 1, h);
                h = hash_bytes(x, sizeof(x), h);
        }
        return h;
}

static struct IfacesAnswer *ifaces_answer(Api *a, const char *netns) {
        for (size_t i = 0; i < a->n_ifaces_answers; i++)
                if (streq_ptr(a->ifaces_answers[i].netns, netns))
                        return &a->ifaces_answers[i];
        if (a->n_ifaces_answers == ELEMENTSOF(a->ifaces_answers))
                return NULL; /* only the first few namespaces are kept */
        struct IfacesAnswer *x = &a->ifaces_answers[a->n_ifaces_answers];
        *x = (struct IfacesAnswer){ 0 };
        if (netns && !(x->netns = strdup(netns)))
                return NULL;
        a->n_ifaces_answers++;
        return x;
}

static void ifaces_list(Request *req, const char *netns, Response *resp) {
        Manager *d = req->api->daemon;
        LinkView *links = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        size_t n = 0, n_docs = 0, size = 0;
        char *text = NULL;
        JsonWriter w = { 0 };

        for (size_t i = 0; i < daemon_iface_count(d); i++)
                n_docs += streq_ptr(iface_netns(daemon_iface_at(d, i)), netns);
        if (daemon_links(d, netns, &links, &n, &e) < 0) {
                /* A namespace that is gone still has its (pending) documents to show. */
                if (e.code != ERROR_NETNS_NOT_FOUND || n_docs == 0) {
                        response_error(resp, &e);
                        return;
                }
        }
        /* Read at every poll of a dashboard, with hundreds of links: the last answer when nothing it
         * was made of changed, else written straight out, no tree. */
        uint64_t made_of = ifaces_made_of(d, netns);
        struct IfacesAnswer *last = ifaces_answer(req->api, netns);
        if (last && last->text && last->made_of == made_of) {
                daemon_links_done(d, netns, links);
                resp->text = malloc(last->size);
                if (!resp->text) {
                        response_errorf(resp, ERROR_INTERNAL_ERROR, "out of memory");
                        return;
                }
                memcpy(resp->text, last->text, last->size);
                resp->status = 200;
                resp->text_size = last->size;
                resp->content_type = "application/json";
                return;
        }
        w.f = open_memstream(&text, &size);
        if (!w.f) {
                daemon_links_done(d, netns, links);
                response_errorf(resp, ERROR_INTERNAL_ERROR, "out of memory");
                return;
        }
        jw_begin_object(&w);
        jw_key(&w, "ifaces");
        jw_begin_array(&w);
        for (size_t i = 0; i < n; i++)
                write_link(&w, d, netns, &links[i]);
        /* Documents of interfaces that do not exist (yet) are part of the picture too. */
        for (size_t i = 0; i < daemon_iface_count(d); i++) {
                Iface *it = daemon_iface_at(d, i);
                bool seen = false;
                if (!streq_ptr(iface_netns(it), netns))
                        continue;
                if (iface_ifindex(it) > 0) {
                        /* daemon_links() lists them by ifindex */
                        size_t lo = 0, hi = n;
                        while (lo < hi) {
                                size_t mid = lo + (hi - lo) / 2;
                                if (links[mid].link.ifindex < iface_ifindex(it))
                                        lo = mid + 1;
                                else
                                        hi = mid;
                        }
                        seen = lo < n && links[lo].link.ifindex == iface_ifindex(it) &&
                               streq(links[lo].link.ifname, iface_ifname(it));
                }
                if (!seen) {
                        LinkView v = { 0 };
                        snprintf(v.link.ifname, sizeof(v.link.ifname), "%s", iface_ifname(it));
                        write_link(&w, d, netns, &v);
                }
        }
        jw_end_array(&w);
        jw_end_object(&w);
        fputc('\n', w.f);
        daemon_links_done(d, netns, links);
        if (fclose(w.f) != 0 || !text) {
                free(text);
                response_errorf(resp, ERROR_INTERNAL_ERROR, "out of memory");
                return;
        }
        if (last) {
                free(last->text);
                last->text = malloc(size);
                last->size = size;
                last->made_of = made_of;
                if (last->text)
                        memcpy(last->text, text, size);
        }
        resp->status = 200;
        resp->text = text;
        resp->text_size = size;
        resp->content_type = "application/json";
}

static void respond_iface(Request *req, const Iface *it, unsigned status, Response *resp) {
        Manager *d = req->api->daemon;
        IfaceStatus st = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;

        if (daemon_iface_status(d, it, &st, &e) < 0) {
                response_error(resp, &e);
                return;
        }
        resp->status = status;
        resp->body = render_iface(d, it, &st);
        if (iface_api_document(it))
                snprintf(resp->etag, sizeof(resp->etag), "\"%" PRIu64 "\"",
                         iface_api_document(it)->generation);
        iface_status_done(&st);
}

/* The daemon's answers to a change, into the request's deferred response. */
static void on_changed(Manager *d, Iface *it, const Error *e, void *userdata) {
        Request *req = userdata;

        (void) d;
        if (e)
                response_error(&req->deferred, e);
        else
                respond_iface(req, it, iface_state(it) == IFACE_PENDING ? 202 : 200, &req->deferred);
        request_answer(req);
}

/* A DELETE's answer: 204 whether a hog's document stays on the interface or nothing does. */
static void on_deleted(Manager *d, Iface *it, const Error *e, void *userdata) {
        Request *req = userdata;

        (void) d, (void) it;
        if (e)
                response_error(&req->deferred, e);
        else
                req->deferred.status = 204;
        request_answer(req);
}

static void on_dry_run(Manager *d, const DryRun *dr, const Error *e, void *userdata) {
        Request *req = userdata;

        if (e)
                response_error(&req->deferred, e);
        else if (dr->refused.code) {
                /* the apply's answer (a priority a foreign filter holds: 409), and the plan beside it */
                response_error(&req->deferred, &dr->refused);
                json_object_set_new(req->deferred.body, "plan", render_dry_run(d, dr));
        } else {
                req->deferred.status = 200;
                req->deferred.body = render_dry_run(d, dr);
        }
        request_answer(req);
}

static void classifier_put(Request *req, const char *netns, const char *ifname, Response *resp) {
        static const char *const types[] = { "application/json",
                                             /* curl's default for --data: accepted so that the README's
                                              * one-liner works as written */
                                             "application/x-www-form-urlencoded", NULL };
        Manager *d = req->api->daemon;
        json_t *body;
        bool dry_run;

        if (request_change_body(req, types, &body, &dry_run, resp) < 0)
                return;
        /* The change waits for its interface's turn (and for workers): the answer comes later. */
        DaemonExpect expect = request_expect(req);
        req->deferring = true;
        if (dry_run)
                daemon_iface_dry_run(d, netns, ifname, body, &expect, on_dry_run, req);
        else
                daemon_iface_put(d, netns, ifname, body, &expect, on_changed, req);
        json_decref(body);
}

static void classifier(Request *req, const char *netns, const char *ifname, Response *resp) {
        Manager *d = req->api->daemon;
        Iface *it;

        /* PUT checks the name after the body's syntax, in daemon_iface_put(), as openapi/ documents. */
        if (!streq(req->method, "PUT") && !ifname_valid(ifname)) {
                response_errorf(
                        resp, ERROR_INVALID_VALUE,
                        "\"%s\" is not a valid interface name (1 to 15 characters, no '/', ':' or space)",
                        ifname);
                return;
        }
        if (streq(req->method, "PUT")) {
                classifier_put(req, netns, ifname, resp);
        } else if (streq(req->method, "GET") || streq(req->method, "HEAD")) {
                it = daemon_iface_get(d, netns, ifname);
                if (!it) {
                        response_errorf(resp, ERROR_DOCUMENT_NOT_FOUND, "no classifier document for %s",
                                        ifname);
                        return;
                }
                respond_iface(req, it, 200, resp);
        } else if (streq(req->method, "DELETE")) {
                DaemonExpect expect = request_expect(req);
                req->deferring = true;
                daemon_iface_delete(d, netns, ifname, &expect, on_deleted, req);
        } else {
                method_not_allowed(resp, req, "GET, HEAD, PUT, DELETE");
        }
}

void route_ifaces(Request *req, const char *netns, const char *rest, Response *resp) {
        char ifname[IFNAME_MAX + 2]; /* one more than a valid name, to tell too long apart */
        char map[32];
        const char *slash, *sub, *maps = NULL;

        if (rest[0] == 0 || streq(rest, "/")) {
                if (streq(req->method, "GET") || streq(req->method, "HEAD"))
                        ifaces_list(req, netns, resp);
                else
                        method_not_allowed(resp, req, "GET, HEAD");
                return;
        }
        rest++;
        slash = strchr(rest, '/');
        sub = slash ? startswith(slash, "/classifier") : NULL;
        if (!sub || slash == rest || (sub[0] != 0 && !(maps = startswith(sub, "/maps")))) {
                response_errorf(resp, ERROR_ROUTE_NOT_FOUND, "no route %s", req->url);
                return;
        }
        if (path_segment(rest, slash, ifname, sizeof(ifname), "interface", IFNAME_MAX, resp) < 0)
                return;
        if (!maps) {
                classifier(req, netns, ifname, resp);
                return;
        }
        if (!ifname_valid(ifname)) {
                response_errorf(resp, ERROR_INVALID_VALUE, "\"%s\" is not a valid interface name", ifname);
                return;
        }
        if (maps[0] == 0 || streq(maps, "/"))
                route_maps(req, netns, ifname, NULL, resp);
        else if (maps[0] == '/' && !strchr(maps + 1, '/') && strlen(maps + 1) < sizeof(map))
                route_maps(req, netns, ifname, strcpy(map, maps + 1), resp);
        else if (maps[0] == '/' && (slash = strchr(maps + 1, '/')) && streq(slash, "/entries") &&
                 (size_t) (slash - maps - 1) < sizeof(map) && slash > maps + 1) {
                memcpy(map, maps + 1, (size_t) (slash - maps - 1));
                map[slash - maps - 1] = 0;
                route_map_entries(req, netns, ifname, map, resp);
        } else
                response_errorf(resp, ERROR_ROUTE_NOT_FOUND, "no route %s", req->url);
}

static void netns_list(Request *req, Response *resp) {
        NetnsView *v = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        size_t n = 0;

        if (!streq(req->method, "GET") && !streq(req->method, "HEAD")) {
                method_not_allowed(resp, req, "GET, HEAD");
                return;
        }
        if (daemon_netns_list(req->api->daemon, &v, &n, &e) < 0) {
                response_error(resp, &e);
                return;
        }
        resp->status = 200;
        resp->body = render_netns_list(v, n);
        free(v);
}

void route_netns(Request *req, const char *rest, Response *resp) {
        char name[NETNS_NAME_MAX + 2];
        const char *slash, *sub;

        if (rest[0] == 0 || streq(rest, "/")) {
                netns_list(req, resp);
                return;
        }
        rest++;
        slash = strchr(rest, '/');
        sub = slash ? startswith(slash, "/ifaces") : NULL;
        if (!sub || (sub[0] != 0 && sub[0] != '/') || slash == rest) {
                response_errorf(resp, ERROR_ROUTE_NOT_FOUND, "no route %s", req->url);
                return;
        }
        if (path_segment(rest, slash, name, sizeof(name), "namespace", NETNS_NAME_MAX, resp) < 0)
                return;
        if (!netns_name_valid(name)) {
                response_errorf(
                        resp, ERROR_INVALID_VALUE,
                        "\"%s\" is not a valid network namespace name (1 to %d characters of A-Z a-z 0-9 _ "
                        ". -)",
                        name, NETNS_NAME_MAX);
                return;
        }
        route_ifaces(req, name, sub, resp);
}
