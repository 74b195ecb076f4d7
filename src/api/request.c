/* request.c: what every route does with a request: its headers and body (content type, a change's JSON
 * and dry run, If-Match), its answer (sent once, counted, audited) or its error ({"error": {code,
 * message}}, its status from the code: error_code_status()), and the answer of a change the daemon gives
 * later. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api-internal.h"
#include "fileio.h"
#include "log.h"
#include "daemon-changes.h"

void response_error(Response *resp, const Error *e) {
        json_decref(resp->body);
        resp->error_code = e->code;
        resp->status = error_code_status(e->code);
        resp->body = render_error(e);
}

void response_errorf(Response *resp, ErrorCode code, const char *fmt, ...) {
        _cleanup_error_ Error e = { .code = code };
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&e.message, fmt, ap) < 0)
                e.message = NULL;
        va_end(ap);
        response_error(resp, &e);
}

static int object_check(const Request *req, json_t *holder, const char *where, Response *resp) {
        const char *s = json_string_value(json_object_get(holder, "object"));

        /* not a path: the document's parser says what is wrong with it, if anything */
        if (!s || s[0] != '/' || path_under_dirs(req->api->config.object_dirs, s) != -EACCES)
                return 0;
        /* One answer whatever the file is (missing, unreadable, elsewhere): nothing is read. */
        response_errorf(resp, ERROR_OBJECT_PATH_REFUSED,
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
        response_errorf(resp, ERROR_UNSUPPORTED_MEDIA_TYPE, "Content-Type %s is not accepted here; send %s",
                        ct, types[0]);
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
                          .code = error_code_to_string(resp->error_code),
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
        response_errorf(resp, ERROR_METHOD_NOT_ALLOWED, "%s is not allowed on %s; allowed: %s", req->method,
                        req->url, allow);
        resp->allow = allow;
}

int request_change_body(Request *req, const char *const *types, json_t **ret_body, bool *ret_dry_run,
                        Response *resp) {
        json_error_t jerr;
        const char *dry;
        json_t *body;

        if (request_want_content_type(req, types, resp) < 0)
                return -EINVAL;
        body = json_loadb(req->body ? req->body : "", req->body_size, JSON_REJECT_DUPLICATES, &jerr);
        if (!body) {
                response_errorf(resp, ERROR_MALFORMED_JSON, "malformed JSON at line %d, column %d: %s",
                                jerr.line, jerr.column, jerr.text);
                return -EINVAL;
        }
        if (request_check_object_paths(req, body, resp) < 0) {
                json_decref(body);
                return -EPERM;
        }
        dry = MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "dry_run");
        if (dry && !streq(dry, "1") && !streq(dry, "true") && !streq(dry, "0") && !streq(dry, "false")) {
                json_decref(body);
                response_errorf(resp, ERROR_INVALID_VALUE, "dry_run=%s: expected 1, true, 0 or false", dry);
                return -EINVAL;
        }
        *ret_body = body;
        *ret_dry_run = dry && (streq(dry, "1") || streq(dry, "true"));
        return 0;
}

/* HTTP's If-Match as the daemon's precondition: "*", or the entity tag "N" (quoted, as clsd sends
 * it, or bare) of a generation; anything else is a precondition no generation meets. */
DaemonExpect request_expect(const Request *req) {
        const char *h = request_header(req, "If-Match");
        DaemonExpect e = { .kind = EXPECT_NOTHING, .as_given = h };
        char *end;
        size_t n;

        if (!h)
                return e;
        if (streq(h, "*")) {
                e.kind = EXPECT_ANY;
                return e;
        }
        n = strlen(h);
        if (n >= 2 && h[0] == '"' && h[n - 1] == '"') {
                h++;
                n -= 2;
        }
        e.kind = EXPECT_UNMATCHABLE;
        if (n == 0 || n > 20 || h[0] < '0' || h[0] > '9')
                return e;
        errno = 0;
        e.generation = strtoull(h, &end, 10);
        if (errno == 0 && (size_t) (end - h) == n)
                e.kind = EXPECT_GENERATION;
        return e;
}

bool method_changes_state(const char *method) {
        return !streq(method, "GET") && !streq(method, "HEAD");
}

void request_answer(Request *req) {
        req->answered = true;
        /* a suspended connection is resumed by its listener (http.c), which set resume */
        if (req->suspended && req->resume)
                req->resume(req);
}
