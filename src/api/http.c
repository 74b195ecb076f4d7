/* http.c: the listeners: a unix socket (default) and optional TCP, each a libmicrohttpd daemon in
 * external epoll mode whose fd sits in the sd-event loop: one thread, no locks. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "access.h"
#include "api-internal.h"
#include "http.h"
#include "fileio.h"
#include "log.h"
#include "tls.h"

#define LISTEN_BACKLOG 128
/* Per-connection memory for headers and buffering; bodies are copied out as they arrive. At most 32 KiB
 * (libmicrohttpd's default): a bigger pool is mmap()ed per connection, and its munmap() flushes the TLB
 * of every CPU clsd ran on, which waits for a CPU busy verifying a program (a /healthz took 17 ms). */
#define CONNECTION_MEMORY 32768
#define TOKEN_SIZE_MAX 4096
#define PATH_CONTROL_BYTE '\x01'

static void peer_expect_request(Peer *p, bool due);
static Peer *connection_peer(struct MHD_Connection *c);

static void listener_free(Listener *l) {
        if (!l)
                return;
        /* libmicrohttpd stops only with every connection resumed. */
        for (Request *r = l->suspended; r; r = r->next_suspended)
                MHD_resume_connection(r->connection);
        l->suspended = NULL;
        sd_event_source_disable_unref(l->io);
        sd_event_source_disable_unref(l->timer);
        sd_event_source_disable_unref(l->kick);
        if (l->mhd)
                MHD_stop_daemon(l->mhd); /* closes the connections: on_connection() still sees the timer */
        sd_event_source_disable_unref(l->deadline_timer);
        free(l);
}

static void listener_arm(Listener *l);

static unsigned listener_connections(Listener *l) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        return info ? info->num_connections : 0;
}

/* Runs libmicrohttpd while it has work already in (MHD_get_timeout() says 0: a connection's buffer was
 * full, a body is coming), up to this many times before the loop's other sources get their turn. */
#define LISTENER_RUNS_MAX 64

static void listener_run(Listener *l) {
        unsigned before = listener_connections(l);
        MHD_UNSIGNED_LONG_LONG ms;

        l->progressed = false;
        MHD_run(l->mhd);
        for (unsigned i = 1;
             i < LISTENER_RUNS_MAX && l->progressed && MHD_get_timeout(l->mhd, &ms) == MHD_YES && ms == 0;
             i++) {
                l->progressed = false;
                MHD_run(l->mhd);
        }
        /* At the connection limit libmicrohttpd takes the listening socket out of its epoll set and puts
         * it back at the start of a later run; when connections closed in this run, nothing else would
         * wake us for that later run, and new clients would wait in the backlog for ever. */
        if (listener_connections(l) < before)
                MHD_run(l->mhd);
        listener_arm(l);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void) s, (void) fd, (void) revents;
        listener_run(userdata);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        listener_run(userdata);
        return 0;
}

static int on_kick(sd_event_source *s, void *userdata) {
        Listener *l = userdata;
        (void) s;
        /* The first run takes the resumed connections back and sends their answers; only a second one
         * watches them for the client's next request again (libmicrohttpd 0.9.75, external epoll):
         * without it a keep-alive client's next request waited for the connection timer, 250 ms. */
        MHD_run(l->mhd);
        listener_run(l);
        return 0;
}

static void suspended_remove(Listener *l, Request *req) {
        for (Request **p = &l->suspended; *p; p = &(*p)->next_suspended)
                if (*p == req) {
                        *p = req->next_suspended;
                        return;
                }
}

static void listener_resume(Request *req) {
        Listener *l = req->listener;

        req->suspended = false;
        suspended_remove(l, req);
        MHD_resume_connection(req->connection);
        /* libmicrohttpd serves a resumed connection on its next run: soon, from the loop (not from
         * within whatever called us). */
        (void) sd_event_source_set_enabled(l->kick, SD_EVENT_ONESHOT);
}

/* The daemon answers later: the connection waits, and the loop serves others. */
static MHD_RESULT request_suspend(Request *req) {
        Listener *l = req->listener;

        MHD_suspend_connection(req->connection);
        req->suspended = true;
        req->next_suspended = l->suspended;
        l->suspended = req;
        return MHD_YES;
}

/* libmicrohttpd tells how long it may sleep: connection timeouts need a timer; 0 is work already in. A
 * body or a header section that filled the connection's buffer (which its edge-triggered epoll will not
 * signal again) is run again at the loop's next turn, not at a timer's: sd-event lets a timer of the
 * default accuracy fire up to 250 ms late, and a body was read one 16 KiB buffer per 250 ms (90 KB/s).
 * MHD also says 0 for a TLS handshake that waits for the client's next bytes (it cannot tell that gnutls
 * found none): run again at once only when the last run moved a request on or bytes wait to be read,
 * else at the timer, as before. */
/* Whether a connection has bytes libmicrohttpd has not read: in its socket, or decrypted in its TLS
 * session. */
static bool listener_input_waiting(Listener *l) {
        for (Peer *p = l->peers; p; p = p->next) {
                const union MHD_ConnectionInfo *info;
                int n = 0;
                if (ioctl(p->fd, FIONREAD, &n) == 0 && n > 0)
                        return true;
                info = l->tls ? MHD_get_connection_info(p->connection, MHD_CONNECTION_INFO_GNUTLS_SESSION)
                              : NULL;
                if (info && info->tls_session && gnutls_record_check_pending(info->tls_session) > 0)
                        return true;
        }
        return false;
}

static void listener_arm(Listener *l) {
        MHD_UNSIGNED_LONG_LONG ms;
        uint64_t now;

        if (MHD_get_timeout(l->mhd, &ms) != MHD_YES) {
                (void) sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
                return;
        }
        if (ms == 0 && (l->progressed || listener_input_waiting(l))) {
                (void) sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
                (void) sd_event_source_set_enabled(l->kick, SD_EVENT_ONESHOT);
                return;
        }
        (void) sd_event_now(l->api->event, CLOCK_MONOTONIC, &now);
        (void) sd_event_source_set_time(l->timer, now + (uint64_t) ms * 1000);
        (void) sd_event_source_set_enabled(l->timer, SD_EVENT_ONESHOT);
}

static void request_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode toe) {
        Request *req = *con_cls;

        (void) cls, (void) toe;
        Peer *p = connection_peer(c);
        if (p)
                peer_expect_request(p, true);
        if (!req)
                return;
        if (req->suspended)
                suspended_remove(req->listener, req);
        json_decref(req->deferred.body);
        free(req->deferred.text);
        free(req->body);
        free(req);
        *con_cls = NULL;
}

/* ---- peers: connections per peer, header deadlines ---- */

/* The unix peer's primary group and its supplementary groups, which group grants count: SO_PEERGROUPS
 * says how much room they need (ERANGE) when 64 are not enough. */
static void peer_groups(Peer *p, gid_t primary) {
        socklen_t glen = 64 * sizeof(gid_t);

        for (int tries = 0; tries < 3; tries++) {
                gid_t *v = realloc(p->gids, sizeof(gid_t) + glen);
                if (!v)
                        break;
                p->gids = v;
                if (getsockopt(p->fd, SOL_SOCKET, SO_PEERGROUPS, p->gids + 1, &glen) == 0) {
                        p->gids[0] = primary;
                        p->n_gids = 1 + glen / sizeof(gid_t);
                        return;
                }
                if (errno != ERANGE)
                        break;
        }
        /* the primary group at least */
        if (p->gids || (p->gids = malloc(sizeof(gid_t)))) {
                p->gids[0] = primary;
                p->n_gids = 1;
        }
}

static void peer_key(Peer *p, bool tcp) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof(sa);
        struct ucred cred;
        socklen_t clen = sizeof(cred);
        char addr[INET6_ADDRSTRLEN] = "?";
        char *key = p->key;
        size_t size = sizeof(p->key);

        if (!tcp) {
                p->uid = (uid_t) -1;
                if (getsockopt(p->fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
                        snprintf(key, size, "uid %u", (unsigned) cred.uid);
                        p->pid = cred.pid;
                        p->uid = cred.uid;
                        peer_groups(p, cred.gid);
                } else
                        snprintf(key, size, "uid ?");
                return;
        }
        if (getpeername(p->fd, (struct sockaddr *) &sa, &len) == 0) {
                if (sa.ss_family == AF_INET)
                        inet_ntop(AF_INET, &((struct sockaddr_in *) &sa)->sin_addr, addr, sizeof(addr));
                else if (sa.ss_family == AF_INET6)
                        inet_ntop(AF_INET6, &((struct sockaddr_in6 *) &sa)->sin6_addr, addr, sizeof(addr));
        }
        snprintf(key, size, "ip %s", addr);
}

static void deadline_arm(Listener *l) {
        uint64_t next = UINT64_MAX;

        if (!l->deadline_timer)
                return;
        for (Peer *p = l->peers; p; p = p->next)
                if (p->deadline && p->deadline < next)
                        next = p->deadline;
        if (next == UINT64_MAX) {
                (void) sd_event_source_set_enabled(l->deadline_timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(l->deadline_timer, next);
        (void) sd_event_source_set_enabled(l->deadline_timer, SD_EVENT_ONESHOT);
}

/* A connection past its header deadline is shut down: libmicrohttpd reads its end and closes it. */
static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        Listener *l = userdata;

        (void) s;
        for (Peer *p = l->peers; p; p = p->next)
                if (p->deadline && p->deadline <= usec) {
                        log_info("%s: no request within %us; connection closed", p->key,
                                 l->api->config.header_timeout_sec);
                        p->deadline = 0;
                        (void) shutdown(p->fd, SHUT_RDWR);
                }
        deadline_arm(l);
        listener_run(l);
        return 0;
}

/* The next request's headers are due (a connection opened, or an answer sent), or in (not due). */
static void peer_expect_request(Peer *p, bool due) {
        Listener *l = p->listener;
        uint64_t now;

        (void) sd_event_now(l->api->event, CLOCK_MONOTONIC, &now);
        p->headers_due = due;
        p->deadline = due && l->api->config.header_timeout_sec
                              ? now + l->api->config.header_timeout_sec * 1000000ULL
                              : 0;
        deadline_arm(l);
}

static void peer_forget_certificate(Peer *p) {
        for (size_t i = 0; p->sans && p->sans[i]; i++)
                free(p->sans[i]);
        free(p->sans);
        free(p->subject);
        free(p->cert_why);
        p->sans = NULL;
        p->subject = p->cert_why = NULL;
        p->cert_generation = 0;
}

/* The peer's client certificate, verified once per connection (and again after a reload). */
static void peer_check_certificate(Peer *p, struct MHD_Connection *c) {
        Api *a = p->listener->api;
        const union MHD_ConnectionInfo *info;

        if (p->cert_generation == a->access_generation)
                return;
        peer_forget_certificate(p);
        p->cert_generation = a->access_generation;
        info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        p->cert_r = info && info->tls_session ? tls_peer_certificate(a->tls, info->tls_session, &p->subject,
                                                                     &p->sans, &p->cert_why)
                                              : -ENOENT;
}

/* A connection opened or closed: the peer's count, and its first request's deadline. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
        Listener *l = cls;
        Peer *p = *socket_context;
        const union MHD_ConnectionInfo *info;
        unsigned same = 0;

        if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                if (!p)
                        return;
                if (p->prev)
                        p->prev->next = p->next;
                else
                        l->peers = p->next;
                if (p->next)
                        p->next->prev = p->prev;
                peer_forget_certificate(p);
                free(p->gids);
                free(p);
                *socket_context = NULL;
                deadline_arm(l);
                return;
        }
        info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info || !(p = calloc(1, sizeof(*p))))
                return;
        *p = (Peer){ .listener = l, .connection = c, .fd = info->connect_fd };
        peer_key(p, l->tcp);
        for (Peer *q = l->peers; q; q = q->next)
                same += streq(q->key, p->key);
        p->next = l->peers;
        if (l->peers)
                l->peers->prev = p;
        l->peers = p;
        *socket_context = p;
        if (l->api->config.connections_per_peer && same >= l->api->config.connections_per_peer) {
                log_info("%s: already %u connections; another refused", p->key, same);
                (void) shutdown(p->fd, SHUT_RDWR);
                return;
        }
        peer_expect_request(p, true);
}

static Peer *connection_peer(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return info ? info->socket_context : NULL;
}

static bool token_matches(const char *want, const char *got) {
        size_t a = strlen(want), b = strlen(got);
        unsigned char diff = a != b;

        /* Constant time in the token's length, so the comparison does not leak a prefix. */
        for (size_t i = 0; i < a; i++)
                diff |= (unsigned char) want[i] ^ (unsigned char) (i < b ? got[i] : 0);
        return diff == 0;
}

/* Who the request is from (req->who, for the audit), and the role that gives it: on the unix socket its
 * credentials; over TCP a verified client certificate and a bearer token, the better of the two. */
static void request_identify(Request *req, Peer *p) {
        Api *a = req->api;
        Listener *l = req->listener;
        const char *h = request_header(req, "Authorization"), *token_name = NULL;
        char cert[160] = "";
        Role role = ROLE_NONE;

        if (!p) {
                snprintf(req->who, sizeof(req->who), "an unknown peer");
                return;
        }
        if (!l->tcp) {
                req->role = a->access ? access_role_of_unix(a->access, p->uid, p->gids, p->n_gids)
                                      : ROLE_OPERATOR;
                snprintf(req->who, sizeof(req->who), "%s pid %d (unix socket)", p->key, (int) p->pid);
                return;
        }
        if (l->tls && a->tls) {
                peer_check_certificate(p, req->connection);
                if (p->cert_r == 0) {
                        req->authenticated = true;
                        role = a->access ? access_role_of_certificate(a->access, p->subject, p->sans)
                                         : ROLE_OPERATOR;
                        snprintf(cert, sizeof(cert), " with certificate \"%.120s\"", p->subject);
                }
        }
        if (h && strncasecmp(h, "Bearer ", 7) == 0) { /* the scheme is case-insensitive (RFC 9110 11.1) */
                Role t = ROLE_NONE;
                if (a->token && token_matches(a->token, h + 7)) {
                        t = ROLE_OPERATOR;
                        token_name = "the token of --token-file";
                } else if (a->access &&
                           (t = access_role_of_token(a->access, h + 7, &token_name)) == ROLE_NONE)
                        token_name = NULL;
                req->bad_token = t == ROLE_NONE;
                req->authenticated = req->authenticated || t != ROLE_NONE;
                role = role > t ? role : t;
        }
        req->role = role;
        snprintf(req->who, sizeof(req->who), "%s%s%s%s%s (%s)", p->key + 3, cert, token_name ? " with " : "",
                 token_name && !streq(token_name, "the token of --token-file") ? "token " : "",
                 token_name ? token_name : (cert[0] ? "" : " without the token"), l->tls ? "TLS" : "TCP");
}

/* Whether the request may go on; if not, its 401 or 403 answer in resp. A reader may read, an operator
 * change too. Without an access file, the unix socket is its file mode's, and a loopback TCP listener
 * serves reads to anyone, as before roles. */
static bool request_allowed(Request *req, Response *resp) {
        Api *a = req->api;
        Listener *l = req->listener;
        bool change = method_changes_state(req->method);
        Role need = change ? ROLE_OPERATOR : ROLE_READER;
        Peer *p = connection_peer(req->connection);

        if (req->bad_token && !l->metrics_only) { /* a wrong token is said, whatever else authenticated */
                response_errorf(resp, "unauthorized", "the bearer token is not one clsd knows");
                return false;
        }
        if (l->metrics_only || (!change && streq(req->url, "/healthz")) || req->role >= need)
                return true;
        if (!change && l->tcp && !a->access && l->loopback && !req->bad_token)
                return true;
        if (l->tcp && !req->authenticated) {
                if (p && p->cert_r == -EPERM)
                        response_errorf(resp, "unauthorized",
                                        "the client certificate is not trusted (--client-ca): %s",
                                        strna(p->cert_why));
                else
                        response_errorf(resp, "unauthorized",
                                        "%s over TCP needs \"Authorization: Bearer <token>\"%s%s",
                                        change ? "a change" : "a read",
                                        a->tls && tls_client_ca_pem(a->tls) ? " or a client certificate"
                                                                            : "",
                                        req->bad_token ? "; the token given is not one clsd knows" : "");
                return false;
        }
        response_errorf(resp, "forbidden", "%s %s needs the %s role; %s has %s", req->method, req->url,
                        role_to_string(need), req->who,
                        req->role == ROLE_NONE ? "no role (--access-file)" : "the reader role");
        return false;
}

/* The path (and query values) decoded as libmicrohttpd would, except that one with a control byte
 * (%00 to %1f, %7f) becomes "\x01": a NUL would cut "/classifier%00zzz" short, and a route would
 * serve (or delete) "/classifier". access_handler() answers such a path 400. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s) {
        size_t n = MHD_http_unescape(s);

        (void) cls, (void) c;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f) {
                        s[0] = PATH_CONTROL_BYTE, s[1] = 0;
                        return 1;
                }
        return n;
}

typedef struct FramingHeaders {
        unsigned content_length, transfer_encoding;
} FramingHeaders;

static MHD_RESULT count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        FramingHeaders *h = cls;

        (void) kind, (void) value;
        h->content_length += strcasecmp(key, "Content-Length") == 0;
        h->transfer_encoding += strcasecmp(key, "Transfer-Encoding") == 0;
        return MHD_YES;
}

/* A request whose body could be framed two ways (two Content-Lengths, or one beside chunked) is a
 * smuggling attempt or a broken client: refused before anything is read (RFC 9112 6.3). */
static bool framing_ambiguous(struct MHD_Connection *c) {
        FramingHeaders h = { 0 };

        (void) MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &h);
        return h.content_length > 1 || h.transfer_encoding > 1 || (h.content_length && h.transfer_encoding);
}

static MHD_RESULT access_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
        Listener *l = cls;
        Request *req = *con_cls;

        (void) version;
        l->progressed = true;
        if (!req || !req->api) { /* the first call: made (or not) when the request line came */
                Response resp = { 0 };
                const char *cl;

                Peer *p = connection_peer(c);
                if (p)
                        peer_expect_request(p, false); /* its headers are in */
                if (!req && !(req = calloc(1, sizeof(*req))))
                        return MHD_NO;
                req->api = l->api;
                req->listener = l;
                req->tcp = l->tcp;
                req->metrics_only = l->metrics_only;
                req->method = method;
                req->url = url;
                req->connection = c;
                req->resume = listener_resume;
                req->body_max = startswith(url, "/objects") ? l->api->config.object_size_max
                                                            : l->api->config.json_size_max;
                *con_cls = req;
                request_identify(req, p);

                if (request_line_refused(req, method, &resp))
                        return api_send(req, &resp);
                if (url[0] == PATH_CONTROL_BYTE) {
                        response_errorf(
                                &resp, "bad_request",
                                "the path has a control byte (%%00 to %%1f, %%7f): no route has one");
                        return api_send(req, &resp);
                }
                if (framing_ambiguous(c)) {
                        response_errorf(
                                &resp, "bad_request",
                                "the body's length is given twice (two Content-Length headers, or one "
                                "beside Transfer-Encoding): refused");
                        return api_send(req, &resp);
                }
                /* Refuse early, before reading a body we will not use. The metrics listener changes
                 * nothing, so it asks for no token. */
                if (!request_allowed(req, &resp))
                        return api_send(req, &resp);
                cl = request_header(req, "Content-Length");
                if (cl && strtoull(cl, NULL, 10) > req->body_max) {
                        response_errorf(&resp, "payload_too_large",
                                        "the body (%s bytes) is over the limit of %zu bytes", cl,
                                        req->body_max);
                        return api_send(req, &resp);
                }
                return MHD_YES;
        }

        if (*upload_data_size > 0) {
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                if (req->refused_early)
                        return request_lingered_enough(req, n) ? MHD_NO : MHD_YES;
                if (req->too_large || req->body_size + n > req->body_max) {
                        /* A body whose length was not said (chunked) passed the limit: answered now,
                         * not after reading it all (libmicrohttpd queues no answer before its end). */
                        Response resp = { 0 };
                        response_errorf(&resp, "payload_too_large",
                                        "the body is over the limit of %zu bytes; refused at byte %zu",
                                        req->body_max, req->body_size + n);
                        req->too_large = req->refused_early = true;
                        if (request_refuse_body(req, connection_peer(c), &resp) < 0)
                                return MHD_NO;
                        return MHD_YES;
                }
                if (req->body_size + n + 1 > req->body_capacity) {
                        /* the size said (Content-Length) at once, else doubling: no copy per 16 KiB */
                        const char *cl = request_header(req, "Content-Length");
                        size_t want = req->body_size + n + 1, said = cl ? strtoull(cl, NULL, 10) + 1 : 0;
                        size_t cap = said >= want ? said : MAX(want, 2 * req->body_capacity);
                        char *b = realloc(req->body, MIN(cap, req->body_max + 1));
                        if (!b)
                                return MHD_NO;
                        req->body = b;
                        req->body_capacity = MIN(cap, req->body_max + 1);
                }
                memcpy(req->body + req->body_size, upload_data, n);
                req->body_size += n;
                req->body[req->body_size] = 0;
                return MHD_YES;
        }

        if (req->refused_early)
                return MHD_NO; /* answered; the connection closes */
        if (req->too_large) {
                Response resp = { 0 };
                response_errorf(&resp, "payload_too_large", "the body is over the limit of %zu bytes",
                                req->body_max);
                return api_send(req, &resp);
        }
        if (req->deferring) {
                /* Resumed: the daemon's answer is in. */
                if (!req->answered)
                        return request_suspend(req);
                return api_send(req, &req->deferred);
        }
        {
                MHD_RESULT ret = api_dispatch(req);
                if (req->deferring && !req->answered)
                        return request_suspend(req);
                return ret;
        }
}

static int listener_new(Api *a, int fd, bool tcp, bool tls, Listener **ret, Error *reterr) {
        Listener *l = calloc(1, sizeof(*l));
        const union MHD_DaemonInfo *info;
        int r;

        if (!l) {
                safe_close(fd);
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        }
        l->api = a;
        l->tcp = tcp;
        l->tls = tls;
        /* HTTPS: the certificate comes from tls.c's callback (reloaded on SIGHUP); a client CA makes
         * libmicrohttpd ask for client certificates, which tls.c verifies against its own trust list. */
        struct MHD_OptionItem tls_options[] = {
                { MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *) tls_retrieve_certificate },
                { tls && tls_client_ca_pem(a->tls) ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0,
                  tls ? (void *) tls_client_ca_pem(a->tls) : NULL },
                { MHD_OPTION_END, 0, NULL },
        };
        l->mhd = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME | (tls ? MHD_USE_TLS : 0), 0,
                NULL, NULL, access_handler, l, MHD_OPTION_ARRAY, tls ? tls_options : &tls_options[2],
                MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, a->config.connections_max,
                MHD_OPTION_CONNECTION_TIMEOUT, a->config.timeout_sec, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                (size_t) CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
                MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, l,
                MHD_OPTION_URI_LOG_CALLBACK, http_request_line, l, MHD_OPTION_EXTERNAL_LOGGER, http_log, l,
                MHD_OPTION_END);
        if (!l->mhd) {
                safe_close(fd);
                free(l);
                return error_set(reterr, EIO, "internal_error", "cannot start the HTTP server");
        }
        info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        r = sd_event_add_io(a->event, &l->io, info->epoll_fd, EPOLLIN, on_io, l);
        if (r >= 0)
                r = sd_event_add_time(a->event, &l->timer, CLOCK_MONOTONIC, 0, 0, on_timer, l);
        if (r >= 0)
                r = sd_event_add_time(a->event, &l->deadline_timer, CLOCK_MONOTONIC, 0, 100 * 1000,
                                      on_deadline, l);
        if (r >= 0)
                r = sd_event_add_defer(a->event, &l->kick, on_kick, l);
        if (r >= 0)
                r = sd_event_source_set_enabled(l->kick, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_source_set_enabled(l->deadline_timer, SD_EVENT_OFF);
        if (r < 0) {
                listener_free(l);
                return error_set(reterr, r, "internal_error",
                                 "cannot add the HTTP server to the event loop");
        }
        (void) sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
        /* Nothing is accepted before api_start(): a client waits in the backlog until clsd is ready. */
        (void) sd_event_source_set_enabled(l->io, SD_EVENT_OFF);
        *ret = l;
        return 0;
}

static int unix_listen(const char *path, Error *reterr) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *dir = strdup(path);
        struct stat st;
        char *slash;

        if (!dir)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        if (strlen(path) >= sizeof(sa.sun_path))
                return error_set(reterr, ENAMETOOLONG, "invalid_value", "--socket %s: path too long", path);
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = 0;
                (void) mkdir_p(dir, 0755);
        }
        strcpy(sa.sun_path, path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return error_set(reterr, errno, "internal_error", "socket: %m");
        /* A stale socket from an earlier run is replaced; one that still answers is another daemon's
         * (a second clsd on another state directory): taking it would steal its clients. Anything
         * else at the path is not ours. */
        if (lstat(path, &st) >= 0) {
                if (!S_ISSOCK(st.st_mode))
                        return error_set(reterr, EEXIST, "invalid_value",
                                         "--socket %s: exists and is not a socket", path);
                /* non-blocking: a listener whose backlog is full answers EAGAIN at once, and is alive */
                _cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (probe >= 0 &&
                    (connect(probe, (struct sockaddr *) &sa, sizeof(sa)) == 0 || errno == EAGAIN))
                        return error_set(
                                reterr, EADDRINUSE, "invalid_value",
                                "--socket %s: another process answers there (a clsd on another state "
                                "directory?); give this one a --socket of its own",
                                path);
                (void) unlink(path);
        }
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return error_set(reterr, errno, "internal_error", "cannot bind %s: %m", path);
        if (chmod(path, 0660) < 0 || listen(fd, LISTEN_BACKLOG) < 0)
                return error_set(reterr, errno, "internal_error", "cannot listen on %s: %m", path);
        return TAKE_FD(fd);
}

/* Parses "ADDR:PORT" or "[ADDR6]:PORT". */
static int parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len,
                        bool *ret_loopback) {
        char host[INET6_ADDRSTRLEN + 2];
        const char *colon = strrchr(s, ':');
        unsigned long port;
        char *end;

        if (!colon || (size_t) (colon - s) >= sizeof(host))
                return -EINVAL;
        memcpy(host, s, (size_t) (colon - s));
        host[colon - s] = 0;
        port = strtoul(colon + 1, &end, 10);
        if (*end || end == colon + 1 || port == 0 || port > 65535)
                return -EINVAL;
        memset(ret, 0, sizeof(*ret));
        if (host[0] == '[') {
                struct sockaddr_in6 *sa = (struct sockaddr_in6 *) ret;
                size_t l = strlen(host);
                if (l < 3 || host[l - 1] != ']')
                        return -EINVAL;
                host[l - 1] = 0;
                if (inet_pton(AF_INET6, host + 1, &sa->sin6_addr) != 1)
                        return -EINVAL;
                sa->sin6_family = AF_INET6;
                sa->sin6_port = htons((uint16_t) port);
                *ret_len = sizeof(*sa);
                *ret_loopback = IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr);
                return 0;
        }
        struct sockaddr_in *sa = (struct sockaddr_in *) ret;
        if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
                return -EINVAL;
        sa->sin_family = AF_INET;
        sa->sin_port = htons((uint16_t) port);
        *ret_len = sizeof(*sa);
        *ret_loopback = (ntohl(sa->sin_addr.s_addr) >> 24) == 127;
        return 0;
}

int api_listen_address_valid(const char *s) {
        struct sockaddr_storage ss;
        socklen_t len;
        bool loopback;

        return parse_listen(s, &ss, &len, &loopback) >= 0;
}

/* Everything about --listen and --token-file that can be refused is refused before anything is bound. */
static int tcp_check(Api *a, Error *reterr) {
        struct sockaddr_storage ss;
        socklen_t len;
        bool loopback;

        if (a->config.metrics_listen && parse_listen(a->config.metrics_listen, &ss, &len, &loopback) < 0)
                return error_set(
                        reterr, EINVAL, "invalid_value",
                        "--metrics-listen %s: expected ADDR:PORT or [ADDR6]:PORT with a numeric address",
                        a->config.metrics_listen);
        if (!a->config.tls_cert != !a->config.tls_key)
                return error_set(reterr, EINVAL, "invalid_value", "--tls-cert and --tls-key go together");
        if (a->config.client_ca && !a->config.tls_cert)
                return error_set(
                        reterr, EINVAL, "invalid_value",
                        "--client-ca needs TLS (--tls-cert, --tls-key): client certificates are TLS's");
        if (a->config.tls_cert && !a->config.listen)
                return error_set(reterr, EINVAL, "invalid_value",
                                 "--tls-cert is for --listen, which is not given");
        if (!a->config.listen)
                return 0;
        if (parse_listen(a->config.listen, &ss, &len, &loopback) < 0)
                return error_set(reterr, EINVAL, "invalid_value",
                                 "--listen %s: expected ADDR:PORT or [ADDR6]:PORT with a numeric address",
                                 a->config.listen);
        if (!loopback && !a->config.tls_cert)
                return error_set(
                        reterr, EPERM, "invalid_value",
                        "--listen %s: a non-loopback address needs TLS (--tls-cert, --tls-key): a token "
                        "would cross the network in clear text",
                        a->config.listen);
        if (!loopback && !a->config.token_file && !a->config.client_ca && !a->config.access_file)
                return error_set(
                        reterr, EPERM, "invalid_value",
                        "--listen %s: a non-loopback address needs a way to authenticate: --token-file, "
                        "--client-ca or --access-file (named tokens)",
                        a->config.listen);
        return 0;
}

static int tcp_listen(const char *flag, const char *addr, Error *reterr) {
        struct sockaddr_storage ss;
        socklen_t len;
        bool loopback;
        int one = 1;

        if (parse_listen(addr, &ss, &len, &loopback) < 0)
                return error_set(reterr, EINVAL, "invalid_value",
                                 "%s %s: expected ADDR:PORT or [ADDR6]:PORT with a numeric address", flag,
                                 addr);
        _cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return error_set(reterr, errno, "internal_error", "socket: %m");
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, LISTEN_BACKLOG) < 0)
                return error_set(reterr, errno, "internal_error", "%s %s: cannot listen: %m", flag, addr);
        return TAKE_FD(fd);
}

/* The token of --token-file, read and checked (NULL without one); the caller makes it the one in use. */
static int token_load(Api *a, char **ret, Error *reterr) {
        _cleanup_free_ char *token = NULL;
        size_t size;
        int r;

        *ret = NULL;
        if (!a->config.token_file)
                return 0;
        struct stat st;
        if (stat(a->config.token_file, &st) == 0 && (st.st_mode & (S_IROTH | S_IWOTH)))
                return error_set(
                        reterr, EPERM, "invalid_value",
                        "--token-file %s: every user may read or write it (mode %04o); chmod o-rw it",
                        a->config.token_file, (unsigned) st.st_mode & 07777);
        r = read_full_file(a->config.token_file, TOKEN_SIZE_MAX, &token, &size);
        if (r < 0)
                return error_set(reterr, r, "invalid_value", "--token-file %s: %s", a->config.token_file,
                                 strerror(-r));
        while (size > 0 && (token[size - 1] == '\n' || token[size - 1] == '\r' || token[size - 1] == ' '))
                token[--size] = 0;
        /* one line of visible characters: a second line (or a NUL) would make a token no client sends */
        for (size_t i = 0; i < size && size >= 16; i++)
                if ((unsigned char) token[i] <= 0x20 || (unsigned char) token[i] == 0x7f)
                        return error_set(reterr, EINVAL, "invalid_value",
                                         "--token-file %s: the token must be one line of visible characters "
                                         "(byte %zu is 0x%02x)",
                                         a->config.token_file, i + 1, (unsigned char) token[i]);
        if (size < 16)
                return error_set(reterr, EINVAL, "invalid_value",
                                 "--token-file %s: the token must be one line of at least 16 characters",
                                 a->config.token_file);
        *ret = TAKE_PTR(token);
        return 0;
}

int api_reload(Api *a, Error *reterr) {
        _cleanup_free_ char *token = NULL;
        AccessPolicy *access = NULL;
        int r;

        /* each read whole before anything changes: a file that does not parse leaves the old in use */
        if (a->config.access_file) {
                r = access_policy_load(a->config.access_file, &access, reterr);
                if (r < 0)
                        return r;
        }
        r = token_load(a, &token, reterr);
        /* the TLS files last: tls_reload() changes nothing unless they load, and nothing fails after it */
        if (r >= 0 && a->tls)
                r = tls_reload(a->tls, reterr);
        if (r < 0) {
                access_policy_free(access);
                return r;
        }
        if (a->config.token_file) {
                free(a->token);
                a->token = TAKE_PTR(token);
        }
        if (a->config.access_file) {
                access_policy_free(a->access);
                a->access = access;
        }
        a->access_generation++; /* every connection's certificate is looked at again */
        return 0;
}

int api_new(Manager *d, sd_event *event, const ApiConfig *config, Api **ret, Error *reterr) {
        _cleanup_(api_freep) Api *a = calloc(1, sizeof(*a));
        int r, fd;

        if (!a)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        a->daemon = d;
        a->event = event;
        a->config = *config;
        r = tcp_check(a, reterr);
        if (r < 0)
                return r;
        r = api_reload(a, reterr);
        if (r < 0)
                return r;
        if (config->tls_cert) {
                r = tls_new(config->tls_cert, config->tls_key, config->client_ca, &a->tls, reterr);
                if (r < 0)
                        return r;
        }
        if (config->socket_fd >= 0) {
                /* Socket activation: clients connected while clsd (re)started wait in its backlog. */
                r = listener_new(a, config->socket_fd, false, false, &a->listeners[a->n_listeners], reterr);
                if (r < 0)
                        return r;
                a->n_listeners++;
                log_info("listening on the socket systemd passed");
        } else if (config->socket_path) {
                fd = unix_listen(config->socket_path, reterr);
                if (fd < 0)
                        return fd;
                a->socket_created = true;
                r = listener_new(a, fd, false, false, &a->listeners[a->n_listeners], reterr);
                if (r < 0)
                        return r;
                a->n_listeners++;
                log_info("listening on %s", config->socket_path);
        }
        if (config->listen) {
                struct sockaddr_storage ss;
                socklen_t len;
                bool loopback = false;
                (void) parse_listen(config->listen, &ss, &len, &loopback);
                fd = tcp_listen("--listen", config->listen, reterr);
                if (fd < 0)
                        return fd;
                r = listener_new(a, fd, true, !!a->tls, &a->listeners[a->n_listeners], reterr);
                if (r < 0)
                        return r;
                a->listeners[a->n_listeners++]->loopback = loopback;
                log_info("listening on %s (%s%s%s)", config->listen, a->tls ? "TLS" : "TCP",
                         a->tls && config->client_ca ? ", client certificates verified" : "",
                         a->access  ? ", roles from the access file"
                         : a->token ? ", token required for changes"
                                    : "");
        }
        if (config->metrics_listen) {
                fd = tcp_listen("--metrics-listen", config->metrics_listen, reterr);
                if (fd < 0)
                        return fd;
                r = listener_new(a, fd, true, false, &a->listeners[a->n_listeners], reterr);
                if (r < 0)
                        return r;
                a->listeners[a->n_listeners++]->metrics_only = true;
                log_info("serving /metrics on %s (TCP, nothing else)", config->metrics_listen);
        }
        *ret = TAKE_PTR(a);
        return 0;
}

void api_start(Api *a) {
        for (size_t i = 0; i < a->n_listeners; i++)
                (void) sd_event_source_set_enabled(a->listeners[i]->io, SD_EVENT_ON);
}

Api *api_free(Api *a) {
        if (!a)
                return NULL;
        for (size_t i = 0; i < a->n_listeners; i++)
                listener_free(a->listeners[i]);
        api_dbus_free(a->dbus);
        for (size_t i = 0; i < a->n_ifaces_answers; i++) {
                free(a->ifaces_answers[i].netns);
                free(a->ifaces_answers[i].text);
        }
        /* our own socket goes with us (systemd's, passed in, stays for the next start) */
        if (a->socket_created)
                (void) unlink(a->config.socket_path);
        free(a->token);
        access_policy_free(a->access);
        tls_free(a->tls);
        free(a);
        return NULL;
}
