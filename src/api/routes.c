/* routes.c: the route table, the one code -> HTTP status table, and sending JSON responses. */
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "api-internal.h"
#include "fileio.h"
#include "log.h"

static const struct {
        const char *code;
        unsigned status;
} status_table[] = {
        /* clang-format off */
        { "malformed_json", 400 },
        { "unknown_field", 400 },
        { "wrong_type", 400 },
        { "missing_field", 400 },
        { "invalid_value", 400 },
        { "bad_request", 400 },
        { "bad_cursor", 400 },
        { "unauthorized", 401 },
        { "object_path_refused", 403 },
        { "forbidden", 403 },
        { "route_not_found", 404 },
        { "document_not_found", 404 },
        { "netns_not_found", 404 },
        { "object_not_found", 404 },
        { "policy_not_found", 404 },
        { "object_file_not_found", 404 },
        { "unknown_map", 404 },
        { "entry_not_found", 404 },
        { "method_not_allowed", 405 },
        { "priority_taken", 409 },
        { "object_in_use", 409 },
        { "hog_owned", 409 },
        { "fleet_owned", 409 },
        { "name_taken", 409 },
        { "device_taken", 409 },
        { "repair_loop", 409 },
        { "map_ambiguous", 409 },
        { "precondition_failed", 412 },
        { "payload_too_large", 413 },
        { "unsupported_media_type", 415 },
        { "invalid_object", 422 },
        { "program_not_found", 422 },
        { "program_ambiguous", 422 },
        { "wrong_program_type", 422 },
        { "verifier_rejected", 422 },
        { "duplicate_name", 422 },
        { "duplicate_priority", 422 },
        { "act_bpf_unavailable", 422 },
        { "tcx_unavailable", 422 },
        { "duplicate_program", 422 },
        { "map_not_found", 422 },
        { "map_incompatible", 422 },
        { "map_unreadable", 422 },
        { "parent_not_found", 422 },
        { "object_unsigned", 422 },
        { "object_signature_invalid", 422 },
        { "object_untrusted", 422 },
        { "map_unwritable", 422 },
        { "map_full", 422 },
        { "quota_exceeded", 507 },
        { "kernel_error", 500 },
        { "store_error", 500 },
        { "internal_error", 500 },
        /* clang-format on */
};

unsigned api_status_of(const char *code) {
        for (size_t i = 0; code && i < ELEMENTSOF(status_table); i++)
                if (streq(status_table[i].code, code))
                        return status_table[i].status;
        return 500;
}

void response_error(Response *resp, const Error *e) {
        json_decref(resp->body);
        resp->error_code = e->code;
        resp->status = api_status_of(e->code);
        resp->body = render_error(e);
}

void response_errorf(Response *resp, const char *code, const char *fmt, ...) {
        Error e = { .code = code };
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&e.message, fmt, ap) < 0)
                e.message = NULL;
        va_end(ap);
        response_error(resp, &e);
        error_done(&e);
}

static int object_check(const Request *req, json_t *holder, const char *where, Response *resp) {
        const char *s = json_string_value(json_object_get(holder, "object"));

        /* not a path: the document's parser says what is wrong with it, if anything */
        if (!s || s[0] != '/' || path_under_dirs(req->api->config.object_dirs, s) != -EACCES)
                return 0;
        /* One answer whatever the file is (missing, unreadable, elsewhere): nothing is read. */
        response_errorf(resp, "object_path_refused",
                        "%s.object %s: over the API an object is named by digest (POST /objects) or by a "
                        "path under an object directory (--object-dir)%s",
                        where, s, req->api->config.object_dirs[0] ? "" : "; this clsd has none");
        return -1;
}

int request_check_object_paths(const Request *req, json_t *body, Response *resp) {
        static const char *const hooks[] = { "ingress", "egress" };
        char where[64];

        for (size_t h = 0; h < ELEMENTSOF(hooks); h++) {
                json_t *filters = json_object_get(body, hooks[h]);
                for (size_t i = 0; i < json_array_size(filters); i++) {
                        json_t *f = json_array_get(filters, i), *actions = json_object_get(f, "actions");
                        snprintf(where, sizeof(where), "%s[%zu]", hooks[h], i);
                        if (object_check(req, f, where, resp) < 0)
                                return -1;
                        for (size_t k = 0; k < json_array_size(actions); k++) {
                                snprintf(where, sizeof(where), "%s[%zu].actions[%zu]", hooks[h], i, k);
                                if (object_check(req, json_array_get(actions, k), where, resp) < 0)
                                        return -1;
                        }
                }
        }
        return 0;
}

const char *request_header(const Request *req, const char *name) {
        return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

int request_want_content_type(const Request *req, const char *const *types, Response *resp) {
        const char *ct = request_header(req, "Content-Type");
        size_t n;

        if (!ct)
                return 0;
        n = strcspn(ct, "; ");
        for (size_t i = 0; types[i]; i++)
                if (strlen(types[i]) == n && strncasecmp(ct, types[i], n) == 0)
                        return 0;
        response_errorf(resp, "unsupported_media_type", "Content-Type %s is not accepted here; send %s", ct,
                        types[0]);
        return -1;
}

/* A change asked (not a read, not a dry run): its audit record. */
static void audit(Request *req, const Response *resp) {
        const char *dry = MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "dry_run");
        char generation[32] = "";

        if (!method_changes_state(req->method) || req->metrics_only ||
            (resp->status < 400 && dry && (streq(dry, "1") || streq(dry, "true"))))
                return;
        if (resp->etag[0])
                snprintf(generation, sizeof(generation), "%.*s", (int) strlen(resp->etag) - 2,
                         resp->etag + 1);
        api_audit(req->api,
                  &(AuditRecord){
                          .who = req->who[0] ? req->who : "an unknown peer",
                          .method = req->method,
                          .path = req->line_refused || req->bad_line   ? "(a malformed request line)"
                                  : (unsigned char) req->url[0] < 0x20 ? "(a path with a control byte)"
                                                                       : req->url,
                          .status = resp->status,
                          .code = resp->error_code,
                          .generation = generation[0] ? generation : NULL,
                          .digest = json_string_value(json_object_get(resp->body, "digest")),
                  });
}

MHD_RESULT api_send(Request *req, Response *resp) {
        struct MHD_Response *r;
        char *text = NULL;
        MHD_RESULT ret;

        audit(req, resp);
        if (resp->body) {
                text = json_dumps(resp->body, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                json_decref(resp->body);
                resp->body = NULL;
                if (!text)
                        return MHD_NO;
                size_t l = strlen(text);
                text[l] = '\n'; /* replaces the NUL: a trailing newline for terminals */
                r = MHD_create_response_from_buffer(l + 1, text, MHD_RESPMEM_MUST_FREE);
        } else if (resp->text) {
                text = TAKE_PTR(resp->text);
                r = MHD_create_response_from_buffer(resp->text_size, text, MHD_RESPMEM_MUST_FREE);
        } else
                r = MHD_create_response_from_buffer(0, (void *) "", MHD_RESPMEM_PERSISTENT);
        if (!r) {
                free(text);
                return MHD_NO;
        }
        if (text)
                MHD_add_response_header(r, "Content-Type",
                                        resp->content_type ? resp->content_type : "application/json");
        if (resp->allow)
                MHD_add_response_header(r, "Allow", resp->allow);
        if (resp->etag[0])
                MHD_add_response_header(r, "ETag", resp->etag);
        if (resp->status == 401)
                MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
        log_debug("%s %s -> %u", req->method,
                  req->line_refused || req->bad_line ? "(a malformed request line)" : req->url,
                  resp->status);
        api_count_request(req->api, req->url, resp->status);
        if (resp->error_code)
                api_count_error(req->api, resp->error_code);
        ret = MHD_queue_response(req->connection, resp->status, r);
        MHD_destroy_response(r);
        return ret;
}

void method_not_allowed(Response *resp, const Request *req, const char *allow) {
        response_errorf(resp, "method_not_allowed", "%s is not allowed on %s; allowed: %s", req->method,
                        req->url, allow);
        resp->allow = allow;
}

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
                        response_errorf(&resp, "route_not_found",
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
                response_errorf(&resp, "route_not_found", "no route %s", req->url);
        if (req->deferring) {
                /* The daemon answers (now, or later into req->deferred). */
                if (req->answered)
                        return api_send(req, &req->deferred);
                return MHD_YES;
        }
        return api_send(req, &resp);
}
