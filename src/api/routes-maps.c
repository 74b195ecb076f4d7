/* routes-maps.c: /ifaces/{ifname}/classifier/maps and .../maps/{map}: what the attached programs'
 * maps hold, read from the kernel, a page at a time; .../maps/{map}/entries: one entry written or
 * deleted; the same under /policies/{name}/maps, over every interface the policy is applied to. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api-internal.h"
#include "log.h"
#include "daemon-maps.h"
#include "daemon-policies.h"
#include "nl-map.h"
#include "store-policy.h"

static int query_limit(Request *req, size_t *ret, Response *resp) {
        const char *s = MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "limit");
        char *end;
        unsigned long v;

        *ret = MAPS_LIMIT_DEFAULT;
        if (!s)
                return 0;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || *end || s[0] < '0' || s[0] > '9' || v == 0 || v > NL_MAP_PAGE_MAX) {
                response_errorf(resp, ERROR_INVALID_VALUE, "limit=%s: expected an integer from 1 to %u", s,
                                NL_MAP_PAGE_MAX);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

/* One map's page from cursor_s (NULL: the first), the answer in resp. */
static int map_page(Manager *d, const DaemonMap *m, const char *cursor_s, size_t limit, Response *resp,
                    Error *reterr) {
        uint8_t cursor[NL_MAP_CURSOR_MAX];
        size_t cursor_size = 0;
        json_t *j;

        if (cursor_s && map_cursor_parse(m, cursor_s, cursor, &cursor_size, reterr) < 0)
                return -EINVAL;
        j = render_map_page(d, m, cursor_s ? cursor : NULL, cursor_size, limit, reterr);
        if (!j)
                return -EIO;
        resp->status = 200;
        resp->body = j;
        return 0;
}

void route_maps(Request *req, const char *netns, const char *ifname, const char *what, Response *resp) {
        Manager *d = req->api->daemon;
        DaemonMaps maps = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        const DaemonMap *m;
        const char *cursor_s;
        size_t limit;
        Iface *it;

        if (!streq(req->method, "GET") && !streq(req->method, "HEAD")) {
                method_not_allowed(resp, req, "GET, HEAD");
                return;
        }
        if (query_limit(req, &limit, resp) < 0)
                return;
        it = daemon_iface_get(d, netns, ifname);
        if (!it) {
                response_errorf(resp, ERROR_DOCUMENT_NOT_FOUND, "no classifier document for %s", ifname);
                return;
        }
        if (daemon_iface_maps(d, it, &maps, &e) < 0)
                goto fail;
        cursor_s = MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "cursor");
        if (!what) {
                if (cursor_s) {
                        daemon_maps_done(&maps);
                        response_errorf(resp, ERROR_INVALID_VALUE,
                                        "cursor= pages one map: GET .../classifier/maps/{map}?cursor=");
                        return;
                }
                resp->status = 200;
                resp->body = render_maps_list(d, it, &maps, limit);
                daemon_maps_done(&maps);
                return;
        }
        if (daemon_maps_lookup(&maps, ifname, what, &m, &e) < 0 ||
            map_page(d, m, cursor_s, limit, resp, &e) < 0)
                goto fail;
        daemon_maps_done(&maps);
        return;
fail:
        daemon_maps_done(&maps);
        response_error(resp, &e);
}

/* The text with each integer past 2^63 - 1 outside strings written as a decimal string: jansson holds
 * int64, and a u64 key or value up to 2^64 - 1 (what reads show as such a string) is taken either way. */
static char *quote_big_integers(const char *text, size_t size, size_t *ret_size) {
        char *out = malloc(2 * size + 1), *o = out;
        bool in_string = false;

        for (size_t i = 0; out && i < size;) {
                char c = text[i];
                if (in_string) {
                        *o++ = c, i++;
                        if (c == '\\' && i < size)
                                *o++ = text[i++];
                        else if (c == '"')
                                in_string = false;
                        continue;
                }
                if (c == '"') {
                        in_string = true;
                        *o++ = c, i++;
                        continue;
                }
                size_t n = strspn(text + i, "0123456789");
                size_t more = n ? strspn(text + i + n, ".eE+-") : 0;
                if (n > 0 && more == 0 && (i == 0 || text[i - 1] != '-') &&
                    (n > 19 || (n == 19 && strncmp(text + i, "9223372036854775807", 19) > 0))) {
                        *o++ = '"';
                        memcpy(o, text + i, n), o += n;
                        *o++ = '"';
                } else {
                        n = n ?: 1;
                        memcpy(o, text + i, n), o += n;
                }
                i += n;
        }
        if (out) {
                *o = 0;
                *ret_size = (size_t) (o - out);
        }
        return out;
}

/* The body of a PUT ({"key", "value"}) or DELETE ({"key"}) of an entry, checked. */
static json_t *entry_body(Request *req, bool put, Response *resp) {
        static const char *const types[] = { "application/json", NULL };
        _cleanup_(json_decrefp) json_t *body = NULL;
        json_error_t jerr;
        const char *key;
        json_t *v;

        if (request_want_content_type(req, types, resp) < 0)
                return NULL;
        size_t size = 0;
        _cleanup_free_ char *text = quote_big_integers(req->body ? req->body : "", req->body_size, &size);
        body = text ? json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr) : NULL;
        if (!json_is_object(body)) {
                response_errorf(resp, ERROR_MALFORMED_JSON, "expected {\"key\": …%s}%s%s",
                                put ? ", \"value\": …" : "", body ? "" : ": ", body ? "" : jerr.text);
                return NULL;
        }
        json_object_foreach (body, key, v)
                if (!streq(key, "key") && !(put && streq(key, "value"))) {
                        response_errorf(resp, ERROR_UNKNOWN_FIELD, "%s: unknown field (%s)", key,
                                        put ? "\"key\" and \"value\"" : "only \"key\"");
                        return NULL;
                }
        if (!json_object_get(body, "key") || (put && !json_object_get(body, "value"))) {
                response_errorf(resp, ERROR_MISSING_FIELD, "%s: missing",
                                json_object_get(body, "key") ? "value" : "key");
                return NULL;
        }
        return TAKE_PTR(body);
}

void route_map_entries(Request *req, const char *netns, const char *ifname, const char *what,
                       Response *resp) {
        Manager *d = req->api->daemon;
        _cleanup_(json_decrefp) json_t *body = NULL;
        bool put = streq(req->method, "PUT");
        DaemonMaps maps = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        const DaemonMap *m;
        Iface *it;

        if (!put && !streq(req->method, "DELETE")) {
                method_not_allowed(resp, req, "PUT, DELETE");
                return;
        }
        body = entry_body(req, put, resp);
        if (!body)
                return;
        it = daemon_iface_get(d, netns, ifname);
        if (!it) {
                response_errorf(resp, ERROR_DOCUMENT_NOT_FOUND, "no classifier document for %s", ifname);
                return;
        }
        if (daemon_iface_maps(d, it, &maps, &e) >= 0 &&
            daemon_maps_lookup(&maps, ifname, what, &m, &e) >= 0 &&
            (put ? daemon_map_write(d, m, json_object_get(body, "key"), json_object_get(body, "value"), &e)
                 : daemon_map_delete(d, m, json_object_get(body, "key"), &e)) >= 0) {
                resp->status = 204;
                log_info("%s: map %s: entry %s", ifname, m->map.name, put ? "written" : "deleted");
        } else
                response_error(resp, &e);
        daemon_maps_done(&maps);
}

/* /policies/{name}/maps[/{map}[/entries]]: the maps of the policy's programs on every interface it is
 * applied to; an entry written by name goes into every interface's map of that name. */
void route_policy_maps(Request *req, const char *name, const char *what, bool entries, Response *resp) {
        Manager *d = req->api->daemon;
        _cleanup_(json_decrefp) json_t *body = NULL;
        bool put = streq(req->method, "PUT");
        DaemonMaps maps = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        const DaemonMap *m;
        size_t limit;
        Policy *p;

        if (entries && !put && !streq(req->method, "DELETE")) {
                method_not_allowed(resp, req, "PUT, DELETE");
                return;
        }
        if (!entries && !streq(req->method, "GET") && !streq(req->method, "HEAD")) {
                method_not_allowed(resp, req, "GET, HEAD");
                return;
        }
        if (entries && !(body = entry_body(req, put, resp)))
                return;
        if (!entries && query_limit(req, &limit, resp) < 0)
                return;
        p = daemon_policy_get(d, name);
        if (!p) {
                response_errorf(resp, ERROR_POLICY_NOT_FOUND, "no policy %s", name);
                return;
        }
        if (daemon_policy_maps(d, p, &maps, &e) < 0)
                goto fail;
        if (entries) {
                if (daemon_policy_map_write(d, p, &maps, what, json_object_get(body, "key"),
                                            put ? json_object_get(body, "value") : NULL, &e) < 0)
                        goto fail;
                resp->status = 204;
                log_info("policy %s: map %s: entry %s", name, what, put ? "written" : "deleted");
        } else if (!what) {
                if (MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "cursor")) {
                        daemon_maps_done(&maps);
                        response_errorf(resp, ERROR_INVALID_VALUE,
                                        "cursor= pages one map: GET /policies/{name}/maps/{map}?cursor=");
                        return;
                }
                resp->status = 200;
                resp->body =
                        json_pack("{s:s,s:o}", "policy", name, "maps", render_map_pages(d, &maps, limit));
        } else if (daemon_maps_lookup(&maps, name, what, &m, &e) < 0 ||
                   map_page(d, m,
                            MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "cursor"),
                            limit, resp, &e) < 0)
                goto fail;
        daemon_maps_done(&maps);
        return;
fail:
        daemon_maps_done(&maps);
        response_error(resp, &e);
}
