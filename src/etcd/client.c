/* client.c: a blocking etcd client for clsctl: one libcurl handle, POSTs of JSON to the gateway, the
 * endpoints tried in turn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd-dl.h"
#include "etcd.h"

#define ETCD_CALL_TIMEOUT_MS 10000L

struct EtcdClient {
        char **urls;
        size_t n_urls, current;
        EtcdTls tls;
        CURL *curl;
};

static bool url_valid(const char *u) {
        return (strncmp(u, "http://", 7) == 0 && u[7]) || (strncmp(u, "https://", 8) == 0 && u[8]);
}

int etcd_client_new(const char *urls, const EtcdTls *tls, EtcdClient **ret, Error *reterr) {
        EtcdClient *c = calloc(1, sizeof(*c));

        if (!c)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        c->n_urls = etcd_urls_split(urls, &c->urls);
        if (tls)
                c->tls = *tls;
        if (c->n_urls == 0) {
                etcd_client_free(c);
                return error_set(reterr, EINVAL, "invalid_value", "no etcd endpoint given (URL[,URL…])");
        }
        for (size_t i = 0; i < c->n_urls; i++)
                if (!url_valid(c->urls[i])) {
                        error_set(reterr, EINVAL, "invalid_value",
                                  "%s: expected http://HOST:PORT or https://…", c->urls[i]);
                        etcd_client_free(c);
                        return -EINVAL;
                }
        if (etcd_dl_load(reterr) < 0) {
                etcd_client_free(c);
                return -ENOENT;
        }
        if (curl_api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(c->curl = curl_api.easy_init())) {
                etcd_client_free(c);
                return error_set(reterr, ENOMEM, "internal_error", "cannot set up libcurl");
        }
        *ret = c;
        return 0;
}

EtcdClient *etcd_client_free(EtcdClient *c) {
        if (!c)
                return NULL;
        if (c->curl)
                curl_api.easy_cleanup(c->curl);
        for (size_t i = 0; i < c->n_urls; i++)
                free(c->urls[i]);
        free(c->urls);
        free(c);
        return NULL;
}

/* an answer beyond any etcd request limit is refused */
#define ANSWER_MAX (64u * 1024 * 1024)

static size_t on_write(char *p, size_t size, size_t n, void *userdata) {
        return etcd_buffer_append(userdata, p, size * n, ANSWER_MAX) ? size * n : 0;
}

static int call_one(EtcdClient *c, const char *url, const char *text, json_t **ret, Error *reterr) {
        struct curl_slist *headers = curl_api.slist_append(NULL, "Content-Type: application/json");
        EtcdBuffer b = { 0 };
        long status = 0;
        CURLcode cr;
        json_error_t jerr;
        json_t *answer;
        int r;

        if (!headers) {
                curl_api.slist_free_all(headers);
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        }
        curl_api.easy_reset(c->curl);
        curl_api.easy_setopt(c->curl, CURLOPT_URL, url);
        curl_api.easy_setopt(c->curl, CURLOPT_POSTFIELDS, text);
        curl_api.easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
        curl_api.easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_write);
        curl_api.easy_setopt(c->curl, CURLOPT_WRITEDATA, &b);
        curl_api.easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, ETCD_CALL_TIMEOUT_MS);
        curl_api.easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
        curl_api.easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
        /* etcd is talked to directly: an http_proxy meant for the web is not its way */
        curl_api.easy_setopt(c->curl, CURLOPT_NOPROXY, "*");
        if (c->tls.ca)
                curl_api.easy_setopt(c->curl, CURLOPT_CAINFO, c->tls.ca);
        if (c->tls.cert)
                curl_api.easy_setopt(c->curl, CURLOPT_SSLCERT, c->tls.cert);
        if (c->tls.key)
                curl_api.easy_setopt(c->curl, CURLOPT_SSLKEY, c->tls.key);
        cr = curl_api.easy_perform(c->curl);
        curl_api.slist_free_all(headers);
        if (cr != CURLE_OK) {
                char why[128];
                free(b.data);
                return error_set(reterr, b.over ? EFBIG : EHOSTUNREACH,
                                 b.over ? "etcd_error" : "etcd_unreachable", "%s: %s", url,
                                 etcd_transfer_error(&b, curl_api.easy_strerror(cr), why, sizeof(why)));
        }
        curl_api.easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
        answer = json_loadb(b.data ?: "", b.size, 0, &jerr);
        free(b.data);
        if (status != 200) {
                Error e = ERROR_NULL;
                etcd_answer_error(status, answer, &e);
                json_decref(answer);
                /* etcd without a leader for a moment (an election): worth another try */
                r = error_set(reterr, status == 503 ? EAGAIN : EPROTO, e.code, "%s: %s", url, e.message);
                error_done(&e);
                return r;
        }
        if (!answer)
                return error_set(reterr, EPROTO, "etcd_error", "%s: the answer is not JSON: %s", url,
                                 jerr.text);
        *ret = answer;
        return 0;
}

/* Tries over this long while etcd is unreachable or between leaders (an election takes a second). */
#define ETCD_RETRY_USEC (5 * 1000 * 1000ULL)

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

int etcd_call(EtcdClient *c, const char *path, json_t *body, json_t **ret, Error *reterr) {
        _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        uint64_t deadline = now_usec() + ETCD_RETRY_USEC;
        int r = -EHOSTUNREACH;

        json_decref(body);
        if (!text)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        /* The endpoint that answered last first; an unreachable one, or one without a leader, passes
         * to the next, round after round until the deadline. */
        for (size_t k = 0;; k++) {
                size_t i = (c->current + k) % c->n_urls;
                _cleanup_free_ char *url = NULL;
                Error e = ERROR_NULL;

                if (asprintf(&url, "%s%s", c->urls[i], path) < 0)
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                r = call_one(c, url, text, ret, &e);
                if (r >= 0) {
                        c->current = i;
                        return 0;
                }
                bool again = (r == -EHOSTUNREACH || r == -EAGAIN) && now_usec() < deadline;
                if (!again) {
                        if (reterr && !reterr->code)
                                *reterr = e;
                        else
                                error_done(&e);
                        return r;
                }
                error_done(&e);
                if ((k + 1) % c->n_urls == 0)
                        (void) usleep(200 * 1000);
        }
}
