/* api.c: the API as the daemon's face: its listeners (the unix socket or systemd's, TCP, the metrics-only
 * one) made from the configuration, the files it reads (the token, the access file, TLS's), read again on
 * SIGHUP whole or not at all. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access.h"
#include "fileio.h"
#include "http.h"
#include "log.h"
#include "tls.h"

/* A token file is one line: anything longer is not one. */
#define TOKEN_SIZE_MAX 4096

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
                        reterr, EPERM, ERROR_INVALID_VALUE,
                        "--token-file %s: every user may read or write it (mode %04o); chmod o-rw it",
                        a->config.token_file, (unsigned) st.st_mode & 07777);
        r = read_full_file(a->config.token_file, TOKEN_SIZE_MAX, &token, &size);
        if (r < 0)
                return error_set(reterr, r, ERROR_INVALID_VALUE, "--token-file %s: %s", a->config.token_file,
                                 strerror(-r));
        while (size > 0 && (token[size - 1] == '\n' || token[size - 1] == '\r' || token[size - 1] == ' '))
                token[--size] = 0;
        /* one line of visible characters: a second line (or a NUL) would make a token no client sends */
        for (size_t i = 0; i < size && size >= 16; i++)
                if ((unsigned char) token[i] <= 0x20 || (unsigned char) token[i] == 0x7f)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "--token-file %s: the token must be one line of visible characters "
                                         "(byte %zu is 0x%02x)",
                                         a->config.token_file, i + 1, (unsigned char) token[i]);
        if (size < 16)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
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
                return error_oom(reterr);
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
