/* api.h: the faces: the REST API over libmicrohttpd, driven by the daemon's sd-event loop. */
#pragma once

#include <systemd/sd-event.h>

#include "daemon.h"

/* Defaults for the limits; each has a flag. */
#define API_JSON_SIZE_MAX_DEFAULT (1u * 1024 * 1024)
#define API_OBJECT_SIZE_MAX_DEFAULT (16u * 1024 * 1024)
/* Enough for a fleet tool and a few operators; more waits in the listen backlog. */
#define API_CONNECTIONS_MAX_DEFAULT 64
/* A client that sends nothing for this long is dropped, so a slow client cannot hold a slot. */
#define API_TIMEOUT_SEC_DEFAULT 30
#define API_HEADER_TIMEOUT_SEC_DEFAULT 10
#define API_CONNECTIONS_PER_PEER_DEFAULT 16

typedef struct ApiConfig {
        const char *socket_path; /* NULL: no unix socket */
        int socket_fd; /* a listening socket systemd passed (clsd.socket), used instead of socket_path; or -1
                        */
        const char *listen; /* "ADDR:PORT" or NULL */
        const char *token_file; /* an operator's token over TCP */
        /* HTTPS on --listen (required for a non-loopback address), and client certificates verified
         * against client_ca; all reloaded on SIGHUP. NULL: none. */
        const char *tls_cert, *tls_key, *client_ca;
        /* Roles (reader, operator) of unix users and groups, named tokens and certificates. NULL: the
         * unix socket's file mode decides, and a token or certificate is an operator's. */
        const char *access_file;
        const char *metrics_listen; /* "ADDR:PORT" serving GET /metrics only, with no token; or NULL */
        size_t json_size_max;
        size_t object_size_max;
        unsigned connections_max;
        unsigned timeout_sec;
        /* A request's headers must be in within this long of the connection or of the previous
         * answer (an idle timeout alone lets a client that sends a byte a second hold a slot for ever). */
        unsigned header_timeout_sec;
        /* Connections one peer (an address over TCP, a uid on the unix socket) may hold at once, and
         * requests it may have waiting for the daemon (a change: a pull, a verification) besides them. */
        unsigned connections_per_peer;
        /* Where an object named by path in a request may be (the file's real path under one of them);
         * none: objects are named by digest only. Hogs, the host's configuration, are not bound. */
        const char *const *object_dirs; /* real paths, NULL-terminated (clsd's main resolves them) */
} ApiConfig;

typedef struct Api Api;

int api_new(Manager *d, sd_event *event, const ApiConfig *config, Api **ret, Error *reterr);
/* Starts answering: the listeners accept (api_new() binds them, so that a bad flag fails early). */
void api_start(Api *a);
Api *api_free(Api *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(Api *, api_free);
/* 1 if s is "ADDR:PORT" or "[ADDR6]:PORT" with a numeric address, for checking flags early. */
int api_listen_address_valid(const char *s);
/* Puts clsd on the system bus as org.clsd1 (DBUS_SYSTEM_BUS_ADDRESS picks another bus); without a bus,
 * or when the name cannot be owned, clsd goes on without D-Bus and says so. */
int api_dbus_start(Api *a);
/* Re-reads the token file, the access file and the TLS certificate, key and client CA (SIGHUP); on
 * failure, what was in use stays. */
int api_reload(Api *a, Error *reterr);
