/* http.h: the listeners and their connections, shared by http.c (listening, limits, identity) and
 * http-guard.c (what libmicrohttpd would let through or answer by itself). */
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <stdarg.h>

#include "api-internal.h"

/* Per-connection memory for headers and buffering; bodies are copied out as they arrive. At most 32 KiB
 * (libmicrohttpd's default): a bigger pool is mmap()ed per connection, and its munmap() flushes the TLB
 * of every CPU clsd ran on, which waits for a CPU busy verifying a program (a /healthz took 17 ms). A
 * request line and header section must fit in it with libmicrohttpd's record of each field (414, 431). */
#define CONNECTION_MEMORY 32768
/* Header fields a request may have (431 past them): clients send about ten, Apache's LimitRequestFields is
 * 100 too. Short fields fill CONNECTION_MEMORY only at about 400: the limit is one number, whatever the
 * fields' lengths. */
#define HEADER_FIELDS_MAX 100

typedef struct Listener {
        Api *api;
        bool tcp;
        bool tls; /* HTTPS (--tls-cert) */
        bool loopback; /* a TCP listener on a loopback address */
        bool metrics_only;
        struct MHD_Daemon *mhd;
        sd_event_source *io;
        sd_event_source *timer;
        sd_event_source *kick; /* runs libmicrohttpd after a suspended connection was resumed */
        Request *suspended; /* connections waiting for the daemon's answer */
        struct Peer *peers; /* every open connection, with its peer and header deadline */
        sd_event_source *deadline_timer;
        bool progressed; /* the last run of libmicrohttpd called clsd for a request (http.c) */
        /* sockets answered before their request was read, drained meanwhile (http-guard.c) */
        struct Linger *lingering;
        unsigned n_lingering;
} Listener;

/* An open connection (libmicrohttpd's socket context): who it is, and by when its next request's
 * headers must be in (0: a request is being served). */
typedef struct Peer {
        Listener *listener;
        struct MHD_Connection *connection;
        int fd;
        char key[INET6_ADDRSTRLEN + 16]; /* "ip ADDR" or "uid N" */
        pid_t pid; /* on the unix socket: the peer's, when it connected */
        uid_t uid; /* on the unix socket: its credentials (SO_PEERCRED, SO_PEERGROUPS) */
        gid_t *gids; /* primary, then supplementary (as many as it has) */
        size_t n_gids;
        /* Over TLS: its client certificate, verified once per connection and access generation: 0
         * verified (subject, sans), -ENOENT none sent, -EPERM not trusted (why). */
        uint64_t cert_generation;
        int cert_r;
        char *subject, **sans, *cert_why;
        uint64_t deadline;
        bool headers_due; /* its next request's headers are not all in (deadline or none) */
        bool line_in; /* and its request line is (http_request_line()) */
        /* Its request waits for the daemon's answer (a change: a pull, a verification): the connection is
         * not one of the peer's --max-connections-per-peer, but one of as many requests that may wait. */
        bool waiting;
        struct Peer *prev, *next;
} Peer;

/* http-guard.c */
/* MHD_OPTION_URI_LOG_CALLBACK: the request line checked as received; the request's context. */
void *http_request_line(void *cls, const char *uri, struct MHD_Connection *c);
/* Whether the request line was refused (the 400 in resp). */
bool request_line_refused(Request *req, const char *method, Response *resp);
/* resp (a 413 while the body comes) answered at once, the connection shut down for writing. */
int request_refuse_body(Request *req, Peer *p, Response *resp);
/* After such an answer: true once enough of the rest was read and dropped (the connection closes). */
bool request_lingered_enough(Request *req, size_t more);
/* MHD_OPTION_UNESCAPE_CALLBACK: the path decoded as libmicrohttpd would, except that one with a control
 * byte becomes PATH_CONTROL_BYTE alone (answered 400). */
#define PATH_CONTROL_BYTE '\x01'
size_t http_unescape(void *cls, struct MHD_Connection *c, char *s);
/* A request whose body could be framed two ways (two Content-Lengths, or one beside chunked). */
bool framing_ambiguous(struct MHD_Connection *c);
/* Whether the request has more than HEADER_FIELDS_MAX header fields (the 431 in resp). */
bool header_fields_refused(struct MHD_Connection *c, Response *resp);
/* The sockets still drained after an early answer, closed (the listener stops). */
void listener_linger_free(Listener *l);
/* MHD_OPTION_EXTERNAL_LOGGER: MHD's messages to the log; its own error answers made clsd's. */
void http_log(void *cls, const char *fmt, va_list ap);

/* peer.c */
/* The peer's key ("ip ADDR", "uid N") and, on the unix socket, its credentials and groups. */
void peer_key(Peer *p, bool tcp);
void peer_forget_certificate(Peer *p);
/* The peer's client certificate, verified once per connection (and again after a reload). */
void peer_check_certificate(Peer *p, struct MHD_Connection *c);
Peer *connection_peer(struct MHD_Connection *c);

/* auth.c */
/* Who the request is from (req->who, for the audit), and the role that gives it. */
void request_identify(Request *req, Peer *p);
/* Whether the request may go on; if not, its 401 or 403 answer in resp. */
bool request_allowed(Request *req, Response *resp);

/* sockets.c */
/* A listening unix socket at path (a stale one replaced; one that answers refused): its fd, or <0. */
int unix_listen(const char *path, Error *reterr);
/* "ADDR:PORT" or "[ADDR6]:PORT". */
int parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len, bool *ret_loopback);
/* Everything about --listen and --token-file that can be refused, before anything is bound. */
int tcp_check(Api *a, Error *reterr);
int tcp_listen(const char *flag, const char *addr, Error *reterr);

/* http.c */
/* A listener on fd (taken) in the loop, off until the API starts. */
int listener_new(Api *a, int fd, bool tcp, bool tls, Listener **ret, Error *reterr);
void listener_free(Listener *l);
