/* routes-objects.c: /objects and /objects/{digest}: upload, list, show, delete. */
#include <sodium.h>
#include <string.h>

#include "api-internal.h"
#include "daemon-objects.h"
#include "store-policy.h"

static void on_object_added(Manager *d, const DaemonObject *o, bool created, const Error *e,
                            void *userdata) {
        Request *req = userdata;

        if (e)
                response_error(&req->deferred, e);
        else {
                req->deferred.status = created ? 201 : 200;
                req->deferred.body = render_object(d, o);
        }
        request_answer(req);
}

static void objects_post(Request *req, Response *resp) {
        static const char *const types[] = { "application/octet-stream", NULL };
        const char *sig64 = request_header(req, "Clsd-Signature");
        _cleanup_free_ char *sig = NULL;
        size_t sig_size = 0;

        if (!request_header(req, "Content-Type")) {
                response_errorf(resp, ERROR_UNSUPPORTED_MEDIA_TYPE,
                                "send the object with Content-Type: application/octet-stream");
                return;
        }
        if (request_want_content_type(req, types, resp) < 0)
                return;
        /* A signature (with --trusted-keys): the signature file, minisign's or signify's, in base64. */
        if (sig64) {
                size_t max = strlen(sig64) / 4 * 3 + 1;
                if (max > STORE_SIGNATURE_MAX || !(sig = malloc(max)) ||
                    sodium_base642bin((unsigned char *) sig, max, sig64, strlen(sig64), NULL, &sig_size,
                                      NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
                        response_errorf(resp, ERROR_INVALID_VALUE,
                                        "Clsd-Signature: not a signature file in base64 (at most %d bytes)",
                                        STORE_SIGNATURE_MAX);
                        return;
                }
        }
        /* A worker inspects the object: the answer comes later. */
        req->deferring = true;
        daemon_object_add(req->api->daemon, req->body ? req->body : "", req->body_size, sig, sig_size,
                          on_object_added, req);
}

static void objects_list(Request *req, Response *resp) {
        Manager *d = req->api->daemon;
        json_t *list = json_array();

        for (size_t i = 0; i < daemon_object_count(d); i++)
                json_array_append_new(list, render_object(d, daemon_object_at(d, i)));
        resp->status = 200;
        resp->body = json_pack("{s:o}", "objects", list);
}

static void object_one(Request *req, const char *digest, Response *resp) {
        Manager *d = req->api->daemon;
        const DaemonObject *o = daemon_object_get(d, digest);
        _cleanup_error_ Error e = ERROR_NULL;

        if (streq(req->method, "GET") || streq(req->method, "HEAD")) {
                if (!o) {
                        response_errorf(resp, ERROR_OBJECT_NOT_FOUND, "no object %s", digest);
                        return;
                }
                resp->status = 200;
                resp->body = render_object(d, o);
        } else if (streq(req->method, "DELETE")) {
                if (daemon_object_remove(d, digest, &e) < 0) {
                        response_error(resp, &e);
                        return;
                }
                resp->status = 204;
        } else {
                method_not_allowed(resp, req, "GET, HEAD, DELETE");
        }
}

void route_objects(Request *req, const char *rest, Response *resp) {
        if (rest[0] == 0 || streq(rest, "/")) {
                if (streq(req->method, "POST"))
                        objects_post(req, resp);
                else if (streq(req->method, "GET") || streq(req->method, "HEAD"))
                        objects_list(req, resp);
                else
                        method_not_allowed(resp, req, "GET, HEAD, POST");
                return;
        }
        rest++;
        if (strchr(rest, '/')) {
                response_errorf(resp, ERROR_ROUTE_NOT_FOUND, "no route %s", req->url);
                return;
        }
        object_one(req, rest, resp);
}
