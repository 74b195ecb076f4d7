/* listeners.c: the listeners: a unix socket (default) and optional TCP, each a libmicrohttpd daemon in
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

static void peer_expect_request(Peer *p, bool due);

void listener_free(Listener *l) {
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
        listener_linger_free(l);
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
        Peer *p = connection_peer(req->connection);

        if (p)
                p->waiting = false;
        req->suspended = false;
        l->api->requests_waiting--;
        suspended_remove(l, req);
        MHD_resume_connection(req->connection);
        /* libmicrohttpd serves a resumed connection on its next run: soon, from the loop (not from
         * within whatever called us). */
        (void) sd_event_source_set_enabled(l->kick, SD_EVENT_ONESHOT);
}

/* The daemon answers later: the connection waits, and the loop serves others. */
static MHD_RESULT request_suspend(Request *req) {
        Listener *l = req->listener;
        Peer *p = connection_peer(req->connection);

        MHD_suspend_connection(req->connection);
        if (p)
                p->waiting = true;
        l->api->requests_waiting++;
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
        if (req->suspended) {
                suspended_remove(req->listener, req);
                req->api->requests_waiting--;
        }
        json_decref(req->deferred.body);
        free(req->deferred.text);
        free(req->body);
        free(req);
        *con_cls = NULL;
}

/* ---- peers: connections per peer, header deadlines ---- */

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
        p->line_in = false;
        p->deadline = due && l->api->config.header_timeout_sec
                              ? now + l->api->config.header_timeout_sec * 1000000ULL
                              : 0;
        deadline_arm(l);
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
                same += streq(q->key, p->key) && !q->waiting;
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

/* A change from a peer with as many requests waiting for the daemon as it may hold connections: 429, where
 * one more would hold a connection for as long as a pull or a verification takes. Reads never wait. */
static bool waiting_refused(Request *req, Peer *p, Response *resp) {
        unsigned max = req->api->config.connections_per_peer, n = 0;

        if (!p || !max || !method_changes_state(req->method))
                return false;
        for (Peer *q = req->listener->peers; q; q = q->next)
                n += q->waiting && streq(q->key, p->key);
        if (n < max)
                return false;
        response_errorf(
                resp, ERROR_TOO_MANY_REQUESTS,
                "%s has %u requests waiting for the changes they asked (a pull, a verification), the "
                "most it may (--max-connections-per-peer); retry once one is answered",
                p->key, n);
        return true;
}

/* A request's first call, its headers in: the request is made (if the request line did not make it) and
 * refused at once when it must be, before its body is read. */
static MHD_RESULT request_begin(Listener *l, struct MHD_Connection *c, const char *url, const char *method,
                                Request *req, void **con_cls) {
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
        req->body_max =
                startswith(url, "/objects") ? l->api->config.object_size_max : l->api->config.json_size_max;
        *con_cls = req;
        request_identify(req, p);

        if (request_line_refused(req, method, &resp))
                return api_send(req, &resp);
        if (url[0] == PATH_CONTROL_BYTE) {
                response_errorf(&resp, ERROR_BAD_REQUEST,
                                "the path has a control byte (%%00 to %%1f, %%7f): no route has one");
                return api_send(req, &resp);
        }
        if (header_fields_refused(c, &resp))
                return api_send(req, &resp);
        if (framing_ambiguous(c)) {
                response_errorf(
                        &resp, ERROR_BAD_REQUEST,
                        "the body's length is given twice (two Content-Length headers, or one beside "
                        "Transfer-Encoding): refused");
                return api_send(req, &resp);
        }
        /* Refuse early, before reading a body we will not use. The metrics listener changes nothing, so it
         * asks for no token. */
        if (!request_allowed(req, &resp) || waiting_refused(req, p, &resp))
                return api_send(req, &resp);
        cl = request_header(req, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > req->body_max) {
                response_errorf(&resp, ERROR_PAYLOAD_TOO_LARGE,
                                "the body (%s bytes) is over the limit of %zu bytes", cl, req->body_max);
                return api_send(req, &resp);
        }
        return MHD_YES;
}

/* n more bytes of the body, into the request's buffer within its limit. */
static MHD_RESULT request_upload(Request *req, struct MHD_Connection *c, const char *data, size_t n) {
        req->api->body_bytes += n;
        if (req->refused_early)
                return request_lingered_enough(req, n) ? MHD_NO : MHD_YES;
        if (req->too_large || req->body_size + n > req->body_max) {
                /* A body whose length was not said (chunked) passed the limit: answered now, not after
                 * reading it all (libmicrohttpd queues no answer before its end). */
                Response resp = { 0 };
                response_errorf(&resp, ERROR_PAYLOAD_TOO_LARGE,
                                "the body is over the limit of %zu bytes; refused at byte %zu",
                                req->body_max, req->body_size + n);
                req->too_large = req->refused_early = true;
                return request_refuse_body(req, connection_peer(c), &resp) < 0 ? MHD_NO : MHD_YES;
        }
        if (req->body_size + n + 1 > req->body_capacity) {
                /* the size said (Content-Length) at once, else doubling: no copy per 16 KiB */
                const char *cl = request_header(req, "Content-Length");
                size_t want = req->body_size + n + 1, said = cl ? strtoull(cl, NULL, 10) + 1 : 0;
                size_t cap = MIN(said >= want ? said : MAX(want, 2 * req->body_capacity), req->body_max + 1);
                char *b = realloc(req->body, cap);
                if (!b)
                        return MHD_NO;
                req->body = b;
                req->body_capacity = cap;
        }
        memcpy(req->body + req->body_size, data, n);
        req->body_size += n;
        req->body[req->body_size] = 0;
        return MHD_YES;
}

/* The body is in: the route answers, now or (a change) once the daemon has (suspended meanwhile). */
static MHD_RESULT request_end(Request *req) {
        Response resp = { 0 };
        MHD_RESULT ret;

        if (req->refused_early)
                return MHD_NO; /* answered; the connection closes */
        if (req->too_large) {
                response_errorf(&resp, ERROR_PAYLOAD_TOO_LARGE, "the body is over the limit of %zu bytes",
                                req->body_max);
                return api_send(req, &resp);
        }
        if (req->deferring) /* resumed: the daemon's answer is in */
                return req->answered ? api_send(req, &req->deferred) : request_suspend(req);
        /* again, now that the body is in: others may have begun to wait meanwhile */
        if (waiting_refused(req, connection_peer(req->connection), &resp))
                return api_send(req, &resp);
        ret = api_dispatch(req);
        if (req->deferring && !req->answered)
                return request_suspend(req);
        return ret;
}

static MHD_RESULT access_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
        Listener *l = cls;
        Request *req = *con_cls;

        (void) version;
        l->progressed = true;
        if (!req || !req->api) /* the first call: made (or not) when the request line came */
                return request_begin(l, c, url, method, req, con_cls);
        if (*upload_data_size > 0) {
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                return request_upload(req, c, upload_data, n);
        }
        return request_end(req);
}

/* The server's epoll fd, its timer, the deadline of slow requests and the kick, on the loop. */
static int listener_add_sources(Listener *l, sd_event *event, int epoll_fd) {
        int r;

        r = sd_event_add_io(event, &l->io, epoll_fd, EPOLLIN, on_io, l);
        if (r < 0)
                return r;
        r = sd_event_add_time(event, &l->timer, CLOCK_MONOTONIC, 0, 0, on_timer, l);
        if (r < 0)
                return r;
        r = sd_event_add_time(event, &l->deadline_timer, CLOCK_MONOTONIC, 0, 100 * 1000, on_deadline, l);
        if (r < 0)
                return r;
        r = sd_event_add_defer(event, &l->kick, on_kick, l);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(l->kick, SD_EVENT_OFF);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(l->deadline_timer, SD_EVENT_OFF);
}

int listener_new(Api *a, int fd, bool tcp, bool tls, Listener **ret, Error *reterr) {
        Listener *l = calloc(1, sizeof(*l));
        const union MHD_DaemonInfo *info;
        int r;

        if (!l) {
                safe_close(fd);
                return error_oom(reterr);
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
                MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, NULL, MHD_OPTION_NOTIFY_CONNECTION,
                on_connection, l, MHD_OPTION_URI_LOG_CALLBACK, http_request_line, l,
                MHD_OPTION_EXTERNAL_LOGGER, http_log, l, MHD_OPTION_END);
        if (!l->mhd) {
                safe_close(fd);
                free(l);
                return error_set(reterr, EIO, ERROR_INTERNAL_ERROR, "cannot start the HTTP server");
        }
        info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        r = listener_add_sources(l, a->event, info->epoll_fd);
        if (r < 0) {
                listener_free(l);
                return error_set(reterr, r, ERROR_INTERNAL_ERROR,
                                 "cannot add the HTTP server to the event loop");
        }
        (void) sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
        /* Nothing is accepted before the API starts: a client waits in the backlog until clsd is ready. */
        (void) sd_event_source_set_enabled(l->io, SD_EVENT_OFF);
        *ret = l;
        return 0;
}
