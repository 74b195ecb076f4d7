/* transfer.c: one request to etcd's gateway as libcurl makes it, for both clients (the blocking one of
 * clsctl, the one on clsd's event loop): a JSON POST to an endpoint, directly (never through a web
 * proxy), with the TLS files given, its answer read up to a limit and taken as JSON or as the
 * gateway's error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dl.h"
#include "etcd-transfer.h"

/* Sockets close on exec: clsd spawns workers while transfers run, and a socket a worker inherited would
 * outlive its close here, and its epoll registration with it (sd-event then finds a freed source). */
static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
        (void) clientp, (void) purpose;
        return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

static size_t on_write(char *p, size_t size, size_t n, void *userdata) {
        return etcd_buffer_append(userdata, p, size * n, ETCD_ANSWER_MAX) ? size * n : 0;
}

/* How long a call waits for its answer: a login longer (ETCD_LOGIN_TIMEOUT_MS). */
static long call_timeout_ms(const char *url) {
        static const char login[] = "/v3/auth/authenticate";
        size_t n = strlen(url);

        return n >= sizeof(login) - 1 && streq(url + n - (sizeof(login) - 1), login) ? ETCD_LOGIN_TIMEOUT_MS
                                                                                     : ETCD_CALL_TIMEOUT_MS;
}

int etcd_transfer_setup(CURL *easy, const char *url, const char *body, const EtcdCredentials *creds,
                        const char *token, struct curl_slist **headers, EtcdBuffer *answer) {
        if (!*headers) {
                _cleanup_free_ char *auth = NULL;
                struct curl_slist *h = curl_api.slist_append(NULL, "Content-Type: application/json");
                /* A stream's body is its watches' create requests, which the gateway reads one by one
                 * while it answers the first. Without "Expect: 100-continue", etcd's Go HTTP server takes
                 * the first answer written for the end of the handler's reading and discards the body's
                 * unread rest: under load a stream had only its first watches made (1 or 2 of 5, once in
                 * some hundred streams). With it the server leaves the body to the handler. A call asks
                 * for no 100 (a round trip of its own; libcurl's default for a body over 1 KiB). */
                struct curl_slist *h2 =
                        h ? curl_api.slist_append(h, answer ? "Expect:" : "Expect: 100-continue") : NULL;
                /* etcd's token goes as the gateway takes it: the header's whole value */
                if (h2 && token &&
                    (asprintf(&auth, "Authorization: %s", token) < 0 ||
                     !(h2 = curl_api.slist_append(h2, auth))))
                        h2 = NULL;
                if (!h2) {
                        curl_api.slist_free_all(h);
                        return -ENOMEM;
                }
                *headers = h2;
        }
        curl_api.easy_setopt(easy, CURLOPT_URL, url);
        curl_api.easy_setopt(easy, CURLOPT_POSTFIELDS, body);
        curl_api.easy_setopt(easy, CURLOPT_HTTPHEADER, *headers);
        curl_api.easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        /* etcd is talked to directly: an http_proxy meant for the web is not its way */
        curl_api.easy_setopt(easy, CURLOPT_NOPROXY, "*");
        curl_api.easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
        curl_api.easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
        if (creds && creds->ca)
                curl_api.easy_setopt(easy, CURLOPT_CAINFO, creds->ca);
        /* the CA file says it all: libcurl-gnutls would also read each of /etc/ssl/certs' files for every
         * new connection */
        curl_api.easy_setopt(easy, CURLOPT_CAPATH, NULL);
        if (creds && creds->cert)
                curl_api.easy_setopt(easy, CURLOPT_SSLCERT, creds->cert);
        if (creds && creds->key)
                curl_api.easy_setopt(easy, CURLOPT_SSLKEY, creds->key);
        if (answer) {
                curl_api.easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write);
                curl_api.easy_setopt(easy, CURLOPT_WRITEDATA, answer);
                curl_api.easy_setopt(easy, CURLOPT_TIMEOUT_MS, call_timeout_ms(url));
        }
        return 0;
}

int etcd_transfer_answer(CURL *easy, CURLcode result, const EtcdBuffer *b, const char *url, json_t **ret,
                         Error *reterr) {
        json_error_t jerr;
        json_t *answer;
        long status = 0;

        if (result == CURLE_OPERATION_TIMEDOUT && !b->over) {
                /* connected (or on a connection kept), asked, and not answered in time: a busy member, as
                 * etcd's own timeouts; not connected in time is a member out of reach */
                curl_off_t connected = 0;
                curl_api.easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connected);
                long made = 0; /* connections this transfer made: none, it used one kept */
                curl_api.easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &made);
                if (connected > 0 || made == 0)
                        return error_set(reterr, EAGAIN, ERROR_ETCD_OVERLOADED,
                                         "%s: no answer within %ld ms", url, call_timeout_ms(url));
        }
        if (result != CURLE_OK) {
                char why[128];
                return error_set(reterr, b->over ? EFBIG : EHOSTUNREACH,
                                 b->over ? ERROR_ETCD_ERROR : ERROR_ETCD_UNREACHABLE, "%s: %s", url,
                                 etcd_transfer_error(b, curl_api.easy_strerror(result), why, sizeof(why)));
        }
        curl_api.easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        answer = json_loadb(b->data ?: "", b->size, 0, &jerr);
        if (status != 200) {
                _cleanup_error_ Error e = ERROR_NULL;
                etcd_answer_error(status, answer, &e);
                json_decref(answer);
                return error_set(reterr, e.error, e.code, "%s: %s", url, e.message);
        }
        if (!answer)
                return error_set(reterr, EPROTO, ERROR_ETCD_ERROR, "%s: the answer is not JSON: %s", url,
                                 jerr.text);
        *ret = answer;
        return 0;
}

uint64_t etcd_transfer_retry_after_usec(CURL *easy) {
        curl_off_t s = 0;

        if (curl_api.easy_getinfo(easy, CURLINFO_RETRY_AFTER, &s) != CURLE_OK || s <= 0)
                return 0;
        return (uint64_t) MIN(s, (curl_off_t) ETCD_RETRY_AFTER_MAX_S) * 1000000ULL;
}

int etcd_endpoints_parse(const char *urls, char ***ret, size_t *ret_n, Error *reterr) {
        char **v = NULL;
        size_t n = etcd_urls_split(urls, &v);
        int r = 0;

        if (n == 0)
                r = error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "no etcd endpoint given (URL[,URL…])");
        for (size_t i = 0; i < n && r >= 0; i++)
                if (!(strncmp(v[i], "http://", 7) == 0 && v[i][7]) &&
                    !(strncmp(v[i], "https://", 8) == 0 && v[i][8]))
                        r = error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                      "%s: expected http://HOST:PORT or https://HOST:PORT", v[i]);
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        free(v[i]);
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
