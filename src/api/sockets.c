/* sockets.c: the API's listening sockets: the unix socket (a stale one replaced, a live one refused),
 * TCP on ADDR:PORT, and what --listen needs before anything is bound (TLS off loopback, a way to
 * authenticate). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fileio.h"
#include "http.h"

/* Connections waiting to be accepted: a burst of clients (a fleet's hosts at once) waits, not refused. */
#define LISTEN_BACKLOG 128

int unix_listen(const char *path, Error *reterr) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *dir = strdup(path);
        struct stat st;
        char *slash;

        if (!dir)
                return error_oom(reterr);
        if (strlen(path) >= sizeof(sa.sun_path))
                return error_set(reterr, ENAMETOOLONG, ERROR_INVALID_VALUE, "--socket %s: path too long",
                                 path);
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = 0;
                (void) mkdir_p(dir, 0755);
        }
        strcpy(sa.sun_path, path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "socket: %m");
        /* A stale socket from an earlier run is replaced; one that still answers is another daemon's
         * (a second clsd on another state directory): taking it would steal its clients. Anything
         * else at the path is not ours. */
        if (lstat(path, &st) >= 0) {
                if (!S_ISSOCK(st.st_mode))
                        return error_set(reterr, EEXIST, ERROR_INVALID_VALUE,
                                         "--socket %s: exists and is not a socket", path);
                /* non-blocking: a listener whose backlog is full answers EAGAIN at once, and is alive */
                _cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (probe >= 0 &&
                    (connect(probe, (struct sockaddr *) &sa, sizeof(sa)) == 0 || errno == EAGAIN))
                        return error_set(
                                reterr, EADDRINUSE, ERROR_INVALID_VALUE,
                                "--socket %s: another process answers there (a clsd on another state "
                                "directory?); give this one a --socket of its own",
                                path);
                (void) unlink(path);
        }
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "cannot bind %s: %m", path);
        if (chmod(path, 0660) < 0 || listen(fd, LISTEN_BACKLOG) < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "cannot listen on %s: %m", path);
        return TAKE_FD(fd);
}

/* Parses "ADDR:PORT" or "[ADDR6]:PORT". */
int parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len, bool *ret_loopback) {
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
int tcp_check(Api *a, Error *reterr) {
        struct sockaddr_storage ss;
        socklen_t len;
        bool loopback;

        if (a->config.metrics_listen && parse_listen(a->config.metrics_listen, &ss, &len, &loopback) < 0)
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_VALUE,
                        "--metrics-listen %s: expected ADDR:PORT or [ADDR6]:PORT with a numeric address",
                        a->config.metrics_listen);
        if (!a->config.tls_cert != !a->config.tls_key)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "--tls-cert and --tls-key go together");
        if (a->config.client_ca && !a->config.tls_cert)
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_VALUE,
                        "--client-ca needs TLS (--tls-cert, --tls-key): client certificates are TLS's");
        if (a->config.tls_cert && !a->config.listen)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "--tls-cert is for --listen, which is not given");
        if (!a->config.listen)
                return 0;
        if (parse_listen(a->config.listen, &ss, &len, &loopback) < 0)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "--listen %s: expected ADDR:PORT or [ADDR6]:PORT with a numeric address",
                                 a->config.listen);
        if (!loopback && !a->config.tls_cert)
                return error_set(
                        reterr, EPERM, ERROR_INVALID_VALUE,
                        "--listen %s: a non-loopback address needs TLS (--tls-cert, --tls-key): a token "
                        "would cross the network in clear text",
                        a->config.listen);
        if (!loopback && !a->config.token_file && !a->config.client_ca && !a->config.access_file)
                return error_set(
                        reterr, EPERM, ERROR_INVALID_VALUE,
                        "--listen %s: a non-loopback address needs a way to authenticate: --token-file, "
                        "--client-ca or --access-file (named tokens)",
                        a->config.listen);
        return 0;
}

int tcp_listen(const char *flag, const char *addr, Error *reterr) {
        struct sockaddr_storage ss;
        socklen_t len;
        bool loopback;
        int one = 1;

        if (parse_listen(addr, &ss, &len, &loopback) < 0)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s %s: expected ADDR:PORT or [ADDR6]:PORT with a numeric address", flag,
                                 addr);
        _cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "socket: %m");
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, LISTEN_BACKLOG) < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "%s %s: cannot listen: %m", flag,
                                 addr);
        return TAKE_FD(fd);
}
