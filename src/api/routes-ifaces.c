/* routes-ifaces.c: /ifaces and /ifaces/{ifname}/classifier: the desired state per interface; the same
 * under /netns/{name}/ for a named network namespace. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api-internal.h"

/* Copies the URL segment [start, end) into buf; a segment too long for it is 400 invalid_value. */
static int path_segment(const char *start, const char *end, char *buf, size_t size, const char *what,
                        int max, Response *resp) {
        if ((size_t) (end - start) >= size) {
                response_errorf(resp, "invalid_value", "the %s name is longer than %d characters", what,
                                max);
                return -EINVAL;
        }
        memcpy(buf, start, (size_t) (end - start));
        buf[end - start] = 0;
        return 0;
}

static void ifaces_list(Request *req, const char *netns, Response *resp) {
        Daemon *d = req->api->daemon;
        LinkView *links = NULL;
        Error e = ERROR_NULL;
        json_t *list;
        size_t n = 0, n_docs = 0;

        for (size_t i = 0; i < daemon_iface_count(d); i++)
                n_docs += streq_ptr(daemon_iface_at(d, i)->doc->netns, netns);
        if (daemon_links(d, netns, &links, &n, &e) < 0) {
                /* A namespace that is gone still has its (pending) documents to show. */
                if (!streq(e.code, "netns_not_found") || n_docs == 0) {
                        response_error(resp, &e);
                        error_done(&e);
                        return;
                }
                error_done(&e);
        }
        list = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(list, render_link(d, netns, &links[i]));
        /* Documents of interfaces that do not exist (yet) are part of the picture too. */
        for (size_t i = 0; i < daemon_iface_count(d); i++) {
                Iface *it = daemon_iface_at(d, i);
                bool seen = false;
                if (!streq_ptr(it->doc->netns, netns))
                        continue;
                for (size_t k = 0; k < n; k++)
                        seen = seen || streq(links[k].link.ifname, it->doc->ifname);
                if (!seen) {
                        LinkView v = { 0 };
                        snprintf(v.link.ifname, sizeof(v.link.ifname), "%s", it->doc->ifname);
                        json_array_append_new(list, render_link(d, netns, &v));
                }
        }
        link_views_free(links, n);
        resp->status = 200;
        resp->body = json_pack("{s:o}", "ifaces", list);
}

static void respond_iface(Request *req, const Iface *it, unsigned status, Response *resp) {
        Daemon *d = req->api->daemon;
        IfaceStatus st = { 0 };
        Error e = ERROR_NULL;

        if (daemon_iface_status(d, it, &st, &e) < 0) {
                response_error(resp, &e);
                error_done(&e);
                return;
        }
        resp->status = status;
        resp->body = render_iface(d, it, &st);
        if (it->api)
                snprintf(resp->etag, sizeof(resp->etag), "\"%" PRIu64 "\"", it->api->generation);
        iface_status_done(&st);
}

static void classifier_put(Request *req, const char *netns, const char *ifname, Response *resp) {
        static const char *const types[] = { "application/json",
                                             /* curl's default for --data: accepted so that the README's
                                              * one-liner works as written */
                                             "application/x-www-form-urlencoded", NULL };
        Daemon *d = req->api->daemon;
        json_error_t jerr;
        Error e = ERROR_NULL;
        const char *dry;
        Iface *it;
        json_t *body;
        int r;

        if (request_want_content_type(req, types, resp) < 0)
                return;
        body = json_loadb(req->body ? req->body : "", req->body_size, JSON_REJECT_DUPLICATES, &jerr);
        if (!body) {
                response_errorf(resp, "malformed_json", "malformed JSON at line %d, column %d: %s",
                                jerr.line, jerr.column, jerr.text);
                return;
        }
        dry = MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "dry_run");
        if (dry && !streq(dry, "1") && !streq(dry, "true") && !streq(dry, "0") && !streq(dry, "false")) {
                json_decref(body);
                response_errorf(resp, "invalid_value", "dry_run=%s: expected 1, true, 0 or false", dry);
                return;
        }
        if (dry && (streq(dry, "1") || streq(dry, "true"))) {
                DryRun dr = { 0 };
                r = daemon_iface_dry_run(d, netns, ifname, body, request_header(req, "If-Match"), &dr, &e);
                json_decref(body);
                if (r < 0) {
                        response_error(resp, &e);
                        error_done(&e);
                        return;
                }
                resp->status = 200;
                resp->body = render_dry_run(d, &dr);
                dry_run_done(&dr);
                return;
        }
        if (daemon_iface_put(d, netns, ifname, body, request_header(req, "If-Match"), &it, &e) < 0) {
                json_decref(body);
                response_error(resp, &e);
                error_done(&e);
                return;
        }
        json_decref(body);
        respond_iface(req, it, it->state == IFACE_PENDING ? 202 : 200, resp);
}

static void classifier(Request *req, const char *netns, const char *ifname, Response *resp) {
        Daemon *d = req->api->daemon;
        Error e = ERROR_NULL;
        Iface *it;

        /* PUT checks the name after the body's syntax, in daemon_iface_put(), as openapi/ documents. */
        if (!streq(req->method, "PUT") && !ifname_valid(ifname)) {
                response_errorf(
                        resp, "invalid_value",
                        "\"%s\" is not a valid interface name (1 to 15 characters, no '/', ':' or space)",
                        ifname);
                return;
        }
        if (streq(req->method, "PUT")) {
                classifier_put(req, netns, ifname, resp);
        } else if (streq(req->method, "GET") || streq(req->method, "HEAD")) {
                it = daemon_iface_get(d, netns, ifname);
                if (!it) {
                        response_errorf(resp, "document_not_found", "no classifier document for %s", ifname);
                        return;
                }
                respond_iface(req, it, 200, resp);
        } else if (streq(req->method, "DELETE")) {
                if (daemon_iface_delete(d, netns, ifname, request_header(req, "If-Match"), &e) < 0) {
                        response_error(resp, &e);
                        error_done(&e);
                        return;
                }
                resp->status = 204;
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
                response_errorf(resp, "route_not_found", "no route %s", req->url);
                return;
        }
        if (path_segment(rest, slash, ifname, sizeof(ifname), "interface", IFNAME_MAX, resp) < 0)
                return;
        if (!maps) {
                classifier(req, netns, ifname, resp);
                return;
        }
        if (!ifname_valid(ifname)) {
                response_errorf(resp, "invalid_value", "\"%s\" is not a valid interface name", ifname);
                return;
        }
        if (maps[0] == 0 || streq(maps, "/"))
                route_maps(req, netns, ifname, NULL, resp);
        else if (maps[0] == '/' && !strchr(maps + 1, '/') && strlen(maps + 1) < sizeof(map))
                route_maps(req, netns, ifname, strcpy(map, maps + 1), resp);
        else
                response_errorf(resp, "route_not_found", "no route %s", req->url);
}

static void netns_list(Request *req, Response *resp) {
        NetnsView *v = NULL;
        Error e = ERROR_NULL;
        size_t n = 0;

        if (!streq(req->method, "GET") && !streq(req->method, "HEAD")) {
                method_not_allowed(resp, req, "GET, HEAD");
                return;
        }
        if (daemon_netns_list(req->api->daemon, &v, &n, &e) < 0) {
                response_error(resp, &e);
                error_done(&e);
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
                response_errorf(resp, "route_not_found", "no route %s", req->url);
                return;
        }
        if (path_segment(rest, slash, name, sizeof(name), "namespace", NETNS_NAME_MAX, resp) < 0)
                return;
        if (!netns_name_valid(name)) {
                response_errorf(
                        resp, "invalid_value",
                        "\"%s\" is not a valid network namespace name (1 to %d characters of A-Z a-z 0-9 _ "
                        ". -)",
                        name, NETNS_NAME_MAX);
                return;
        }
        route_ifaces(req, name, sub, resp);
}
