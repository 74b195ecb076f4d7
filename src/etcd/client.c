/* client.c: a blocking etcd client for clsctl: one libcurl handle, POSTs of JSON to the gateway, the
 * endpoints tried in turn; with an etcd user, authenticated at the first call (and again when etcd no
 * longer knows the token). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backoff.h"
#include "dl.h"
#include "etcd-transfer.h"

struct EtcdClient {
        char **urls;
        size_t n_urls, current;
        EtcdCredentials creds;
        char *password, *token;
        CURL *curl;
        uint64_t busy_wait_usec; /* how long a busy etcd is asked again (etcd_client_set_busy_wait()) */
};

int etcd_client_new(const char *urls, const EtcdCredentials *creds, EtcdClient **ret, Error *reterr) {
        EtcdClient *c = calloc(1, sizeof(*c));

        if (!c)
                return error_oom(reterr);
        if (creds)
                c->creds = *creds;
        c->busy_wait_usec = ETCD_BUSY_RETRY_USEC;
        if (etcd_endpoints_parse(urls, &c->urls, &c->n_urls, reterr) < 0 ||
            etcd_password_read(&c->creds, &c->password, reterr) < 0) {
                etcd_client_free(c);
                return -EINVAL;
        }
        if (dl_load_curl(reterr) < 0) {
                etcd_client_free(c);
                return -ENOENT;
        }
        if (curl_api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(c->curl = curl_api.easy_init())) {
                etcd_client_free(c);
                return error_set(reterr, ENOMEM, ERROR_INTERNAL_ERROR, "cannot set up libcurl");
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
        free(c->password);
        free(c->token);
        free(c);
        return NULL;
}

static int call_one(EtcdClient *c, const char *url, const char *text, json_t **ret, Error *reterr) {
        struct curl_slist *headers = NULL;
        EtcdBuffer b = { 0 };
        CURLcode cr;
        int r;

        curl_api.easy_reset(c->curl);
        if (etcd_transfer_setup(c->curl, url, text, &c->creds, c->token, &headers, &b) < 0) {
                curl_api.slist_free_all(headers);
                return error_oom(reterr);
        }
        cr = curl_api.easy_perform(c->curl);
        curl_api.slist_free_all(headers);
        r = etcd_transfer_answer(c->curl, cr, &b, url, ret, reterr);
        free(b.data);
        return r;
}

/* Tries over this long while etcd is unreachable or between leaders (an election takes a second). */
#define ETCD_RETRY_USEC (5 * 1000 * 1000ULL)

void etcd_client_set_busy_wait(EtcdClient *c, uint64_t usec) {
        c->busy_wait_usec = usec;
}

/* The pause after a busy answer, as a node's (etcd-async.h): the backoff's, at least a Retry-After, never
 * past the deadline. */
static uint64_t busy_pause(Backoff *backoff, uint64_t retry_after, uint64_t now, uint64_t deadline) {
        uint64_t pause =
                MAX(backoff_next_jittered(backoff, ETCD_BUSY_BACKOFF_MIN_USEC, ETCD_BUSY_BACKOFF_MAX_USEC),
                    retry_after);
        return MIN(pause, deadline > now ? deadline - now : 0);
}

/* text POSTed to path: the endpoint that answered last first; an unreachable one, or one without a
 * leader, passes to the next, round after round for ETCD_RETRY_USEC. A busy etcd (etcd_overloaded: too
 * many requests, or no answer within the call's time) is asked again after a backoff for as long as the
 * client waits for it: a CLI that gave up at once, run by a script in a loop, would add to the load. */
static int call_any(EtcdClient *c, const char *path, const char *text, json_t **ret, Error *reterr) {
        uint64_t start = clock_usec(CLOCK_MONOTONIC);
        Backoff backoff = { 0 };
        uint64_t unreachable_deadline = start + MIN(ETCD_RETRY_USEC, c->busy_wait_usec);
        uint64_t busy_deadline = start + c->busy_wait_usec;
        int r = -EHOSTUNREACH;

        for (size_t k = 0;; k++) {
                size_t i = (c->current + k) % c->n_urls;
                _cleanup_free_ char *url = NULL;
                _cleanup_error_ Error e = ERROR_NULL;

                if (asprintf(&url, "%s%s", c->urls[i], path) < 0)
                        return error_oom(reterr);
                r = call_one(c, url, text, ret, &e);
                if (r >= 0) {
                        c->current = i;
                        return 0;
                }
                uint64_t now = clock_usec(CLOCK_MONOTONIC);
                bool busy = e.code == ERROR_ETCD_OVERLOADED;
                bool again = busy ? now < busy_deadline : r == -EHOSTUNREACH && now < unreachable_deadline;
                if (!again) {
                        if (busy && k > 0)
                                return error_set(reterr, -r, e.code, "etcd stayed busy for %.0f s: %s",
                                                 (double) (now - start) / 1e6, strna(e.message));
                        if (reterr && !reterr->code) {
                                *reterr = e;
                                e = ERROR_NULL;
                        }
                        return r;
                }
                if (busy)
                        (void) usleep(busy_pause(&backoff, etcd_transfer_retry_after_usec(c->curl), now,
                                                 busy_deadline));
                else if ((k + 1) % c->n_urls == 0)
                        (void) usleep(200 * 1000);
        }
}

/* body (taken) POSTed to path, as call_any(). */
static int call_body(EtcdClient *c, const char *path, json_t *body, json_t **ret, Error *reterr) {
        _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

        json_decref(body);
        if (!text)
                return error_oom(reterr);
        return call_any(c, path, text, ret, reterr);
}

/* A token for the user: etcd checks the password (bcrypt: tens of milliseconds of its CPU). */
static int authenticate(EtcdClient *c, Error *reterr) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        r = call_body(c, "/v3/auth/authenticate", etcd_authenticate_body(c->creds.user, c->password),
                      &answer, &e);
        if (r < 0 || (r = etcd_answer_token(answer, &c->token, &e)) < 0)
                return error_set(reterr, -r, e.code, "etcd user %s: %s", c->creds.user, strna(e.message));
        return r;
}

int etcd_call(EtcdClient *c, const char *path, json_t *body, json_t **ret, Error *reterr) {
        _cleanup_(json_decrefp) json_t *taken = body;
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        if (!taken)
                return error_oom(reterr);
        if (c->password && !c->token && (r = authenticate(c, reterr)) < 0)
                return r;
        r = call_body(c, path, json_incref(body), ret, &e);
        /* a token etcd no longer knows (it expired, or etcd restarted): once more with a new one */
        if (r == -EKEYEXPIRED && c->password) {
                error_done(&e);
                if ((r = authenticate(c, reterr)) < 0)
                        return r;
                r = call_body(c, path, json_incref(body), ret, &e);
        }
        if (r < 0 && reterr && !reterr->code) {
                *reterr = e;
                e = ERROR_NULL;
        }
        return r;
}
