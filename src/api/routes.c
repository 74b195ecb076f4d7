/* routes.c: the route table: each path to the file of its routes (healthz and version here). */
#include <string.h>

#include "api-internal.h"

static void route_simple(Request *req, Response *resp, json_t *(*render)(Manager *) ) {
        if (!streq(req->method, "GET") && !streq(req->method, "HEAD")) {
                method_not_allowed(resp, req, "GET, HEAD");
                return;
        }
        resp->status = 200;
        resp->body = render(req->api->daemon);
}

static json_t *render_health(Manager *d) {
        (void) d;
        return json_pack("{s:s}", "status", "ok");
}

MHD_RESULT api_dispatch(Request *req) {
        Response resp = { 0 };
        const char *rest;

        if (req->metrics_only) {
                /* --metrics-listen serves the scrape and nothing else */
                if (streq(req->url, "/metrics"))
                        route_metrics(req, &resp);
                else
                        response_errorf(&resp, ERROR_ROUTE_NOT_FOUND,
                                        "no route %s: this listener serves /metrics only", req->url);
        } else if (streq(req->url, "/metrics"))
                route_metrics(req, &resp);
        else if (streq(req->url, "/healthz"))
                route_simple(req, &resp, render_health);
        else if (streq(req->url, "/version"))
                route_simple(req, &resp, render_version);
        else if ((rest = startswith(req->url, "/objects")) && (rest[0] == 0 || rest[0] == '/'))
                route_objects(req, rest, &resp);
        else if ((rest = startswith(req->url, "/ifaces")) && (rest[0] == 0 || rest[0] == '/'))
                route_ifaces(req, NULL, rest, &resp);
        else if ((rest = startswith(req->url, "/netns")) && (rest[0] == 0 || rest[0] == '/'))
                route_netns(req, rest, &resp);
        else if ((rest = startswith(req->url, "/policies")) && (rest[0] == 0 || rest[0] == '/'))
                route_policies(req, rest, &resp);
        else
                response_errorf(&resp, ERROR_ROUTE_NOT_FOUND, "no route %s", req->url);
        if (req->deferring) {
                /* The daemon answers (now, or later into req->deferred). */
                if (req->answered)
                        return api_send(req, &req->deferred);
                return MHD_YES;
        }
        return api_send(req, &resp);
}
