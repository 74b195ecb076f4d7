/* http-guard.c: what libmicrohttpd 0.9.75 would let through or answer by itself, caught where its API
 * reaches: a request line with a byte it may not hold (a NUL cuts the path short in every C string MHD
 * hands on), its own answers to a header section it refuses (sent with the status line and headers
 * twice, or in HTML), and a body that passes its limit while MHD reads it (MHD queues no answer before
 * the end). */
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "api-internal.h"
#include "http.h"
#include "log.h"

/* After an answer sent before the body's end, this much more of it is read and dropped (a client that
 * reads answers while it sends stops on its own), then the connection is closed: its unread bytes would
 * make the kernel reset the connection before the client has read the answer (a lingering close). */
#define LINGER_BYTES_MAX (4u * 1024 * 1024)
/* A header section refused is answered before the rest of the request is read, and MHD closes its socket
 * at once: clsd reads the rest on a copy of the socket and drops it (LINGER_BYTES_MAX, for at most this
 * long), so that a client that sends its whole request before it reads (http.client) is not reset. At most
 * LINGERING_MAX such sockets per listener; past them, a socket is closed as MHD closes it. */
#define LINGER_USEC (5 * 1000 * 1000ULL)
#define LINGERING_MAX 16

typedef struct Linger {
        Listener *listener;
        int fd;
        size_t dropped;
        sd_event_source *io, *timer;
        struct Linger *next;
} Linger;

/* A byte a request-target may hold (RFC 9112 3.2, RFC 3986 2): visible ASCII; anything else is sent
 * percent-encoded. */
static bool target_byte_ok(unsigned char c) {
        return c > 0x20 && c < 0x7f;
}

/* libmicrohttpd's URI log callback: the request line as it was received, before MHD splits off the query
 * and decodes the path in place. The request-target ends where MHD ended it, at the space before the
 * version ("/x\0HTTP/1.1"); a NUL before that cut the C string short ("/policies/tp5\0junk" would be
 * served as "/policies/tp5"). The request is refused (request_line_refused()) before any handler runs. */
void *http_request_line(void *cls, const char *uri, struct MHD_Connection *c) {
        Request *req = calloc(1, sizeof(*req));
        size_t n = strlen(uri);
        Peer *p = connection_peer(c);

        (void) cls;
        if (p)
                p->line_in = true; /* a header section refused now is this connection's (431) */
        if (!req)
                return NULL; /* access_handler() makes it; the line goes unchecked */
        for (size_t i = 0; i < n && !req->line_refused; i++)
                if (!target_byte_ok((unsigned char) uri[i]))
                        req->line_refused = uri[i] == ' ' ? "a space" : "a byte that is not visible ASCII";
        if (!req->line_refused && strncmp(uri + n + 1, "HTTP/", 5) != 0)
                req->line_refused = "a NUL byte";
        req->raw_target = uri;
        return req;
}

/* The method as received: MHD ended it at the first space, so a NUL inside it leaves bytes between the
 * end of the C string and the request-target (only spaces may be there). */
static bool method_whole(const char *method, const char *target) {
        const char *p = method + strlen(method) + 1;

        if (target <= method || target - method > 64)
                return true; /* not the layout MHD 0.9.75 parses in: nothing to compare */
        while (p < target && *p == ' ')
                p++;
        return p == target;
}

bool request_line_refused(Request *req, const char *method, Response *resp) {
        const char *why = req->line_refused;

        if (!why && req->raw_target && !method_whole(method, req->raw_target))
                why = "a NUL byte in the method";
        if (!why)
                return false;
        req->bad_line = true;
        response_errorf(resp, ERROR_BAD_REQUEST,
                        "the request line has %s: a request-target is visible ASCII, anything else "
                        "percent-encoded (RFC 9112 3.2), and no byte of the line may be NUL",
                        why);
        return true;
}

/* Writes resp (an error) onto the connection as a whole HTTP answer, "Connection: close", then shuts the
 * connection down for writing: what MHD still has to send for it fails, and MHD closes it. Used where MHD
 * cannot queue an answer itself. */
static int answer_raw(Listener *l, struct MHD_Connection *c, int fd, Response *resp) {
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        _cleanup_free_ char *body = NULL, *out = NULL;
        int n;

        (void) l;
        body = json_dumps(resp->body, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(resp->body);
        resp->body = NULL;
        if (!body)
                return -ENOMEM;
        n = asprintf(&out,
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s\n",
                     resp->status,
                     resp->status == 413   ? "Content Too Large"
                     : resp->status == 431 ? "Request Header Fields Too Large"
                                           : "Bad Request",
                     strlen(body) + 1, body);
        if (n < 0)
                return -ENOMEM;
        if (info && info->tls_session)
                (void) gnutls_record_send(info->tls_session, out, (size_t) n);
        else
                (void) send(fd, out, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void) shutdown(fd, SHUT_WR);
        return 0;
}

int request_refuse_body(Request *req, Peer *p, Response *resp) {
        if (!p)
                return -ENOTCONN;
        log_info("%s: %s %s: %s; answered %u before the body's end", p->key, req->method, req->url,
                 json_string_value(json_object_get(json_object_get(resp->body, "error"), "message")),
                 resp->status);
        api_count_request(req->api, req->url, resp->status);
        if (resp->error_code)
                api_count_error(req->api, resp->error_code);
        return answer_raw(req->listener, req->connection, p->fd, resp);
}

bool request_lingered_enough(Request *req, size_t more) {
        req->lingered += more;
        return req->lingered > LINGER_BYTES_MAX;
}

static Linger *linger_free(Linger *g) {
        Listener *l = g->listener;

        for (Linger **p = &l->lingering; *p; p = &(*p)->next)
                if (*p == g) {
                        *p = g->next;
                        l->n_lingering--;
                        break;
                }
        sd_event_source_disable_unref(g->io);
        sd_event_source_disable_unref(g->timer);
        safe_close(g->fd);
        free(g);
        return NULL;
}

void listener_linger_free(Listener *l) {
        while (l->lingering)
                linger_free(l->lingering);
}

/* One read per turn of the loop: the client's end, an error or enough ends it. */
static int on_linger_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Linger *g = userdata;
        char buf[16384];
        ssize_t n;

        (void) s, (void) revents;
        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n > 0 && (g->dropped += (size_t) n) <= LINGER_BYTES_MAX)
                return 0;
        linger_free(g);
        return 0;
}

static int on_linger_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        linger_free(userdata);
        return 0;
}

/* fd (MHD's, answered and shut down for writing) is read and dropped on a copy of its own. */
static void linger_start(Listener *l, int fd) {
        uint64_t now;
        Linger *g;

        if (l->n_lingering >= LINGERING_MAX || !(g = calloc(1, sizeof(*g))))
                return;
        *g = (Linger){ .listener = l, .fd = fcntl(fd, F_DUPFD_CLOEXEC, 3), .next = l->lingering };
        l->lingering = g;
        l->n_lingering++;
        (void) sd_event_now(l->api->event, CLOCK_MONOTONIC, &now);
        if (g->fd < 0 || sd_event_add_io(l->api->event, &g->io, g->fd, EPOLLIN, on_linger_io, g) < 0 ||
            sd_event_add_time(l->api->event, &g->timer, CLOCK_MONOTONIC, now + LINGER_USEC, 0,
                              on_linger_timer, g) < 0)
                linger_free(g);
}

/* The connection MHD refused a header section of, before clsd saw its request: with a Content-Length MHD
 * cannot read, the one whose header section MHD has; too large (431), the one whose request line is in and
 * whose header section is not. Two such: which one is not known (NULL). */
static Peer *header_error_peer(Listener *l, unsigned status) {
        Peer *found = NULL;

        for (Peer *p = l->peers; p; p = p->next) {
                bool in = MHD_get_connection_info(p->connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
                if (!p->headers_due || (status == 431 ? !p->line_in || in : !in))
                        continue;
                if (found)
                        return NULL;
                found = p;
        }
        return found;
}

/* MHD refused a header section (a Content-Length that is no number, or past 2^64; one that does not fit
 * in the connection's memory). MHD would answer with its status line and headers twice, or an HTML page;
 * clsd answers first, once, as every other error, and drains what the client still sends. Two connections
 * in that state at once: which one is not known, and MHD answers. */
static void answer_header_error(Listener *l, unsigned status) {
        Peer *found = header_error_peer(l, status);
        Response resp = { 0 };
        const char *cl;

        if (!found)
                return;
        cl = MHD_lookup_connection_value(found->connection, MHD_HEADER_KIND, "Content-Length");
        if (status == 431)
                response_errorf(&resp, ERROR_HEADERS_TOO_LARGE,
                                "the request line and header section are over the %d bytes a connection "
                                "holds (with a record of each header field)",
                                CONNECTION_MEMORY);
        else if (status == 413)
                response_errorf(&resp, ERROR_PAYLOAD_TOO_LARGE,
                                "Content-Length %.40s is more than any body can be", strna(cl));
        else if (cl && strspn(cl, "0123456789") != strlen(cl))
                response_errorf(&resp, ERROR_BAD_REQUEST,
                                "Content-Length \"%.40s\" is not a number of bytes", cl);
        else
                response_errorf(&resp, ERROR_BAD_REQUEST, "the request's header section is malformed (%u)",
                                status);
        log_info("%s: %s; answered %u", found->key,
                 json_string_value(json_object_get(json_object_get(resp.body, "error"), "message")),
                 resp.status);
        api_count_error(l->api, resp.error_code);
        found->headers_due = false, found->deadline = 0; /* answered: no header deadline */
        if (answer_raw(l, found->connection, found->fd, &resp) >= 0)
                linger_start(l, found->fd);
}

/* libmicrohttpd's messages go to clsd's log (debug); the one that says it answers a request by itself
 * ("Error processing request (HTTP response code is %u ('%s'))") is answered by clsd instead where the
 * connection can be told. */
void http_log(void *cls, const char *fmt, va_list ap) {
        Listener *l = cls;
        char buf[512];
        va_list copy;

        if (!fmt)
                return;
        va_copy(copy, ap);
        (void) vsnprintf(buf, sizeof(buf), fmt, copy);
        va_end(copy);
        buf[strcspn(buf, "\n")] = 0;
        log_debug("libmicrohttpd: %s", buf);
        if (strstr(fmt, "HTTP response code is %u")) {
                va_copy(copy, ap);
                unsigned status = va_arg(copy, unsigned);
                va_end(copy);
                answer_header_error(l, status);
        }
}

typedef struct FramingHeaders {
        unsigned content_length, transfer_encoding;
} FramingHeaders;

/* The path (and query values) decoded as libmicrohttpd would, except that one with a control byte
 * (%00 to %1f, %7f) becomes "\x01": a NUL would cut "/classifier%00zzz" short, and a route would
 * serve (or delete) "/classifier". access_handler() answers such a path 400. */
size_t http_unescape(void *cls, struct MHD_Connection *c, char *s) {
        size_t n = MHD_http_unescape(s);

        (void) cls, (void) c;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f) {
                        s[0] = PATH_CONTROL_BYTE, s[1] = 0;
                        return 1;
                }
        return n;
}

static MHD_RESULT count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        FramingHeaders *h = cls;

        (void) kind, (void) value;
        h->content_length += strcasecmp(key, "Content-Length") == 0;
        h->transfer_encoding += strcasecmp(key, "Transfer-Encoding") == 0;
        return MHD_YES;
}

bool header_fields_refused(struct MHD_Connection *c, Response *resp) {
        int n = MHD_get_connection_values(c, MHD_HEADER_KIND, NULL, NULL);

        if (n <= HEADER_FIELDS_MAX)
                return false;
        response_errorf(resp, ERROR_HEADERS_TOO_LARGE,
                        "the request has %d header fields; at most %d are taken", n, HEADER_FIELDS_MAX);
        return true;
}

/* A request whose body could be framed two ways (two Content-Lengths, or one beside chunked) is a
 * smuggling attempt or a broken client: refused before anything is read (RFC 9112 6.3). */
bool framing_ambiguous(struct MHD_Connection *c) {
        FramingHeaders h = { 0 };

        (void) MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &h);
        return h.content_length > 1 || h.transfer_encoding > 1 || (h.content_length && h.transfer_encoding);
}
