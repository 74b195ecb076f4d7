/* ctl.c: what clsctl's verbs share: one request to the daemon with its errors turned into the single
 * "clsctl: ..." line (or a JSON object with --json), inputs read from files or stdin, documents PUT with
 * their object paths made absolute, and the daemon's paths of an interface. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf(), open_memstream() */
#endif
#include <ctype.h>
#include <limits.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctl.h"
#include "fileio.h"
#include "output.h"
#include "signature.h"

#define DIGEST_PREFIX "sha256:"
#define DIGEST_HEX_LEN 64

/* --json: errors too are JSON, one object on one line of stderr ({"error":{"code","message"}}), as
 * bpftool -j does, for scripts that parse what clsctl says. */
static bool json_errors;

void ctl_errors_as_json(bool on) {
        json_errors = on;
}

static void report_json(const char *code, const char *message, const json_t *detail) {
        _cleanup_(json_decrefp) json_t *e = json_pack("{s:s}", "message", message ?: ""), *all = NULL;
        _cleanup_free_ char *text = NULL;

        if (e && code)
                json_object_set_new(e, "code", json_string(code));
        if (e && detail)
                json_object_set(e, "detail", (json_t *) detail);
        if (e && (all = json_pack("{s:O}", "error", e)))
                text = json_dumps(all, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fflush(stdout);
        fprintf(stderr, "%s\n", text ?: "{\"error\":{\"message\":\"out of memory\"}}");
}

int ctl_verror(int r, const char *fmt, va_list ap) {
        _cleanup_free_ char *msg = NULL, *escaped = NULL;

        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        if (json_errors) {
                report_json(NULL, msg ?: "out of memory", NULL);
                return r;
        }
        /* Exactly one line, whatever the daemon put in its message. */
        escaped = msg ? text_escape(msg, false) : NULL;
        /* What was already printed on stdout comes first, as in a terminal. */
        fflush(stdout);
        fprintf(stderr, "clsctl: %s\n", escaped ?: "out of memory");
        return r;
}

int ctl_error(int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        r = ctl_verror(r, fmt, ap);
        va_end(ap);
        return r;
}

int ctl_table_print(const Table *t) {
        int r = table_print(t, stdout);

        if (r == -ENOMEM)
                return ctl_oom();
        if (r < 0)
                return ctl_error(r, "cannot write to stdout: %s", strerror(-r));
        return 0;
}

static void print_detail(const Ctl *c, const json_t *error) {
        const char *detail = json_string_value(json_object_get(error, "detail"));
        _cleanup_free_ char *escaped = NULL;
        size_t n;

        if (!c->verbose || !detail || !*detail)
                return;
        escaped = text_escape(detail, true);
        if (!escaped)
                return;
        n = strlen(escaped);
        fputs(escaped, stderr);
        if (escaped[n - 1] != '\n')
                fputc('\n', stderr);
}

int ctl_report_error_object(const Ctl *c, const json_t *error, const char *context) {
        const char *code = json_string_value(json_object_get(error, "code"));
        const char *message = json_string_value(json_object_get(error, "message"));

        if (!code && !message)
                message = "failed, no reason given";
        if (json_errors) {
                _cleanup_free_ char *m = NULL;
                if (asprintf(&m, "%s%s%s", context ?: "", context ? ": " : "", message ?: "") < 0)
                        m = NULL;
                report_json(code, m ?: message, json_object_get(error, "detail"));
                return -EREMOTEIO;
        }
        ctl_error(-EREMOTEIO, "%s%s%s%s%s", context ?: "", context ? ": " : "", code ?: "",
                  code && message ? ": " : "", message ?: "");
        print_detail(c, error);
        return -EREMOTEIO;
}

static int report_http_error(const Ctl *c, const HttpResponse *resp, const char *context) {
        _cleanup_(json_decrefp) json_t *body = json_loadb(resp->body ?: "", resp->body_size, 0, NULL);
        const json_t *error = json_object_get(body, "error");

        if (json_is_string(json_object_get(error, "code")) ||
            json_is_string(json_object_get(error, "message")))
                return ctl_report_error_object(c, error, context);
        /* Not clsd's error shape (a proxy, a stray server on the socket): the status must do. */
        return ctl_error(-EREMOTEIO, "%s%sHTTP %u", context ?: "", context ? ": " : "", resp->status);
}

int ctl_call(const Ctl *c, const HttpRequest *req, const char *context, json_t **ret_json) {
        _cleanup_(http_response_freep) HttpResponse *resp = NULL;
        _cleanup_(json_decrefp) json_t *body = NULL;
        _cleanup_free_ char *why = NULL;
        const HttpTarget t = { .socket_path = c->socket_path,
                               .url = c->host,
                               .cacert = c->cacert,
                               .cert = c->cert,
                               .key = c->key,
                               .token = c->token };
        const char *where = c->host ?: c->socket_path;
        json_error_t e;
        int r;

        r = http_perform(&t, req, &resp, &why);
        if (c->quiet && (r < 0 || resp->status < 200 || resp->status >= 300))
                return r < 0 ? r : -EIO;
        if (r == -ENOMEM)
                return ctl_oom();
        if (r < 0)
                return ctl_error(r, "%s %s on %s: %s", req->method, req->path, where, why ?: strerror(-r));
        if (resp->status < 200 || resp->status >= 300)
                return report_http_error(c, resp, context);

        if (resp->body_size > 0) {
                body = json_loadb(resp->body, resp->body_size, 0, &e);
                if (!body)
                        return ctl_error(-EBADMSG, "invalid JSON in answer to %s %s: %s", req->method,
                                         req->path, e.text);
        }
        if (ret_json)
                *ret_json = TAKE_PTR(body);
        return 0;
}

int ctl_print_json(const json_t *v) {
        if (!v)
                return 0;
        if (json_dumpf(v, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
                return ctl_error(-EIO, "cannot write JSON");
        fputc('\n', stdout);
        return 0;
}

int ctl_read_input(const char *path, char **ret_data, size_t *ret_size) {
        bool is_stdin = streq(path, "-");
        int r;

        r = is_stdin ? read_full_fd(STDIN_FILENO, CTL_INPUT_MAX, ret_data, ret_size)
                     : read_full_file(path, CTL_INPUT_MAX, ret_data, ret_size);
        if (r == -EFBIG)
                return ctl_error(r, "%s: larger than %u MiB", is_stdin ? "stdin" : path,
                                 CTL_INPUT_MAX >> 20);
        if (r < 0)
                return ctl_error(r, "%s: %s", is_stdin ? "stdin" : path, strerror(-r));
        return 0;
}

int ctl_read_signature(const char *file, char **ret, size_t *ret_size) {
        *ret = NULL;
        *ret_size = 0;
        if (streq(file, "-"))
                return 0;
        for (const char *const *suffix = SIGNATURE_SUFFIXES; *suffix; suffix++) {
                _cleanup_free_ char *p = NULL;
                if (asprintf(&p, "%s%s", file, *suffix) < 0)
                        return ctl_oom();
                if (access(p, F_OK) == 0)
                        return ctl_read_input(p, ret, ret_size);
        }
        return 0;
}

/* An "object" given as a relative path, made absolute as clsd needs it (relative to the working
 * directory, else to the document's own); or as a digest prefix ("sha256:55c5ed83"), made the stored
 * object's whole digest. 1 if one was changed, < 0 on failure (reported). */
static int absolute_object(const Ctl *c, json_t *holder, const char *file) {
        const char *o = json_string_value(json_object_get(holder, "object"));
        _cleanup_free_ char *dir = NULL, *joined = NULL, *digest = NULL;
        char real[PATH_MAX];
        int r;

        if (o && startswith(o, "sha256:") && strlen(o) < strlen("sha256:") + 64) {
                r = ctl_object_resolve_digest(c, o, &digest);
                if (r < 0)
                        return r;
                return json_object_set_new(holder, "object", json_string(digest)) == 0;
        }
        if (!o || !*o || o[0] == '/' || startswith(o, "sha256:") || startswith(o, "oci://") || c->host ||
            c->hosts_file)
                return 0;
        if (!realpath(o, real)) {
                if (streq(file, "-") || !(dir = strdup(file)))
                        return 0;
                if (asprintf(&joined, "%s/%s", dirname(dir), o) < 0) {
                        joined = NULL;
                        return 0;
                }
                if (!realpath(joined, real))
                        return 0;
        }
        return json_object_set_new(holder, "object", json_string(real)) == 0;
}

static int absolute_objects(const Ctl *c, json_t *doc, const char *file) {
        static const char *const hooks[] = { "ingress", "egress" };
        int n = 0, r;

        for (size_t h = 0; h < ELEMENTSOF(hooks); h++) {
                json_t *f, *a;
                size_t i, k;
                json_array_foreach (json_object_get(doc, hooks[h]), i, f) {
                        if ((r = absolute_object(c, f, file)) < 0)
                                return r;
                        n += r;
                        json_array_foreach (json_object_get(f, "actions"), k, a) {
                                if ((r = absolute_object(c, a, file)) < 0)
                                        return r;
                                n += r;
                        }
                }
        }
        return n;
}

int ctl_put_file(const Ctl *c, const char *path, const char *file, const char *context, json_t **ret_json) {
        _cleanup_free_ char *data = NULL, *if_match = NULL;
        _cleanup_(json_decrefp) json_t *doc = NULL;
        const char *headers[2] = { NULL, NULL };
        json_error_t e;
        size_t size = 0;
        int r;

        r = ctl_read_input(file, &data, &size);
        if (r < 0)
                return r;
        /* The daemon would refuse it too, but only we can point at the line and column in the file. */
        doc = json_loadb(data, size, 0, &e);
        if (!doc)
                return ctl_error(-EINVAL, "%s:%d:%d: %s", streq(file, "-") ? "stdin" : file, e.line,
                                 e.column, e.text);
        /* clsd reads an object named by path on its own host, by absolute path: a relative one is made
         * so here, when clsd is on this host; a digest prefix becomes the stored object's digest */
        r = absolute_objects(c, doc, file);
        if (r < 0)
                return r;
        if (r > 0) {
                free(data);
                data = json_dumps(doc, JSON_COMPACT);
                if (!data)
                        return ctl_oom();
                size = strlen(data);
        }
        if (c->if_match) {
                if (asprintf(&if_match, "If-Match: \"%s\"", c->if_match) < 0)
                        return ctl_oom();
                headers[0] = if_match;
        }
        return ctl_call(c,
                        &(HttpRequest){ .method = "PUT",
                                        .path = path,
                                        .content_type = "application/json",
                                        .body = data,
                                        .body_size = size,
                                        .headers = headers },
                        context, ret_json);
}

/* "/ifaces", or "/netns/NAME/ifaces" with --netns. */
int ctl_ifaces_path(const Ctl *c, char **ret) {
        _cleanup_free_ char *e = NULL;
        int r;

        if (!c->netns)
                return (*ret = strdup("/ifaces")) ? 0 : ctl_oom();
        r = http_escape_segment(c->netns, NULL, &e);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        if (asprintf(ret, "/netns/%s/ifaces", e) < 0)
                return ctl_oom();
        return 0;
}

int ctl_iface_path(const Ctl *c, const char *ifname, char **ret) {
        _cleanup_free_ char *e = NULL, *base = NULL;
        int r;

        r = ctl_ifaces_path(c, &base);
        if (r < 0)
                return r;
        r = http_escape_segment(ifname, NULL, &e);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        if (asprintf(ret, "%s/%s/classifier", base, e) < 0)
                return ctl_oom();
        return 0;
}

/* Accepts "sha256:<64 hex>", bare hex, or a unique prefix of the hex (looked up in the store). */
int ctl_object_resolve_digest(const Ctl *c, const char *arg, char **ret) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_free_ char *hex = strdup(startswith(arg, DIGEST_PREFIX) ?: arg);
        const char *match = NULL;
        size_t n, matches = 0, i;
        const json_t *v;
        int r;

        if (!hex)
                return ctl_oom();
        n = strlen(hex);
        if (n == 0 || n > DIGEST_HEX_LEN || strspn(hex, "0123456789abcdefABCDEF") != n)
                return ctl_error(-EINVAL, "invalid digest '%s': expected sha256:<64 hex digits> or a prefix",
                                 arg);
        for (char *p = hex; *p; p++)
                *p = (char) tolower((unsigned char) *p);

        if (n < DIGEST_HEX_LEN) {
                r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = "/objects" }, NULL, &answer);
                if (r < 0)
                        return r;
                json_array_foreach (json_object_get(answer, "objects"), i, v) {
                        const char *d = json_string_value(json_object_get(v, "digest"));
                        const char *h = d ? startswith(d, DIGEST_PREFIX) : NULL;
                        if (h && strncmp(h, hex, n) == 0 && strlen(h) == DIGEST_HEX_LEN) {
                                match = h;
                                matches++;
                        }
                }
                if (matches == 0)
                        return ctl_error(-ENOENT, "%s: no stored object has this digest prefix", arg);
                if (matches > 1)
                        return ctl_error(-EINVAL, "%s: digest prefix is ambiguous, %zu objects match", arg,
                                         matches);
        }
        if (asprintf(ret, DIGEST_PREFIX "%s", match ?: hex) < 0)
                return ctl_oom();
        return 0;
}
