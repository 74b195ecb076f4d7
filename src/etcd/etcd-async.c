/* etcd-async.c: etcd's gateway from an sd-event loop (etcd-async.h): libcurl's multi interface (curl-loop.c)
 * drives the calls and the stream; each request set up as every request to etcd is (transfer.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "etcd-async.h"
#include "etcd-curl-loop.h"
#include "dl.h"
#include "etcd-transfer.h"

typedef struct Call {
        EtcdAsync *a;
        CURL *easy;
        struct curl_slist *headers;
        char *path;
        char *url;
        char *body;
        EtcdBuffer answer;
        EtcdCallDone done;
        void (*cancel)(void *userdata);
        void *userdata;
        uint64_t first_usec; /* CLOCK_MONOTONIC: asked first */
        bool fresh; /* sent again on a new connection: the last one timed out on a kept one (a dead
                     * link fails to connect at once, a busy member connects and is busy) */
        sd_event_source *again; /* etcd was busy: sent again when this fires */
        struct Call *next;
} Call;

typedef struct Stream {
        CURL *easy;
        struct curl_slist *headers;
        char *body;
        EtcdBuffer buf;
        sd_event_source *lines; /* complete lines are taken from the loop */
        EtcdStreamMessage message;
        EtcdStreamEnd end;
        void *userdata;
} Stream;

struct EtcdAsync {
        sd_event *event;
        CurlLoop *loop;
        char **urls;
        size_t n_urls, url;
        EtcdCredentials creds;
        char *password, *token;
        uint64_t requests;
        void (*contact)(void *userdata);
        void *contact_userdata;
        Call *calls;
        Stream stream;
        /* etcd busy (etcd_overloaded): the calls are spaced, each busy answer doubling the space (with
         * jitter, up to the cap its user sizes by the fleet), each answer easing it (halved) */
        Backoff backoff;
        uint64_t backoff_cap_usec; /* 0: ETCD_BUSY_BACKOFF_MAX_USEC */
        uint64_t not_before_usec; /* CLOCK_MONOTONIC: no call goes before */
        uint64_t busy_answers, retries;
};

int etcd_async_new(sd_event *event, const char *urls, const EtcdCredentials *creds, EtcdAsync **ret,
                   Error *reterr) {
        EtcdAsync *a = calloc(1, sizeof(*a));

        if (!a)
                return error_oom(reterr);
        a->event = sd_event_ref(event);
        if (etcd_endpoints_parse(urls, &a->urls, &a->n_urls, reterr) < 0) {
                etcd_async_free(a);
                return -EINVAL;
        }
        if (etcd_password_read(creds, &a->password, reterr) < 0) {
                etcd_async_free(a);
                return -EINVAL;
        }
        if ((creds->ca && !(a->creds.ca = strdup(creds->ca))) ||
            (creds->cert && !(a->creds.cert = strdup(creds->cert))) ||
            (creds->key && !(a->creds.key = strdup(creds->key))) ||
            (creds->user && !(a->creds.user = strdup(creds->user))) ||
            (creds->password_file && !(a->creds.password_file = strdup(creds->password_file)))) {
                etcd_async_free(a);
                return error_oom(reterr);
        }
        if (dl_load_curl(reterr) < 0) {
                etcd_async_free(a);
                return -ENOENT;
        }
        if (curl_loop_new(event, &a->loop) < 0) {
                etcd_async_free(a);
                return error_set(reterr, ENOMEM, ERROR_INTERNAL_ERROR, "cannot set up libcurl");
        }
        *ret = a;
        return 0;
}

EtcdAsync *etcd_async_free(EtcdAsync *a) {
        if (!a)
                return NULL;
        etcd_async_cancel_all(a);
        sd_event_source_disable_unref(a->stream.lines);
        curl_loop_free(a->loop);
        for (size_t i = 0; i < a->n_urls; i++)
                free(a->urls[i]);
        free(a->urls);
        free((char *) a->creds.ca);
        free((char *) a->creds.cert);
        free((char *) a->creds.key);
        free((char *) a->creds.user);
        free((char *) a->creds.password_file);
        free(a->password);
        free(a->token);
        sd_event_unref(a->event);
        free(a);
        return NULL;
}

void etcd_async_set_backoff_cap(EtcdAsync *a, uint64_t usec) {
        a->backoff_cap_usec = MAX(usec, ETCD_BUSY_BACKOFF_MIN_USEC);
}

uint64_t etcd_async_busy_answers(const EtcdAsync *a) {
        return a->busy_answers;
}

uint64_t etcd_async_retries(const EtcdAsync *a) {
        return a->retries;
}

uint64_t etcd_async_backoff_usec(const EtcdAsync *a) {
        return a->backoff.usec;
}

const char *etcd_async_endpoint(const EtcdAsync *a) {
        return a->urls[a->url];
}

void etcd_async_next_endpoint(EtcdAsync *a) {
        a->url = (a->url + 1) % a->n_urls;
}

void etcd_async_set_contact(EtcdAsync *a, void (*contact)(void *userdata), void *userdata) {
        a->contact = contact;
        a->contact_userdata = userdata;
}

uint64_t etcd_async_requests(const EtcdAsync *a) {
        return a->requests;
}

const char *etcd_async_user(const EtcdAsync *a) {
        return a->password ? a->creds.user : NULL;
}

bool etcd_async_has_token(const EtcdAsync *a) {
        return a->token;
}

void etcd_async_forget_token(EtcdAsync *a) {
        free(a->token);
        a->token = NULL;
}

/* The token taken from an authenticate answer, then the caller's done. */
typedef struct Authenticating {
        EtcdCallDone done;
        void (*cancel)(void *userdata);
        void *userdata;
} Authenticating;

static void on_authenticated(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        _cleanup_free_ Authenticating *x = userdata;
        _cleanup_error_ Error e2 = ERROR_NULL;

        if (!e)
                (void) etcd_answer_token(answer, &a->token, &e2);
        x->done(a, answer, e ?: (e2.code ? &e2 : NULL), x->userdata);
}

static void on_authenticate_dropped(void *userdata) {
        _cleanup_free_ Authenticating *x = userdata;
        if (x->cancel)
                x->cancel(x->userdata);
}

int etcd_async_authenticate(EtcdAsync *a, EtcdCallDone done, void (*cancel)(void *), void *userdata) {
        Authenticating *x = calloc(1, sizeof(*x));

        if (!x)
                return -ENOMEM;
        *x = (Authenticating){ .done = done, .cancel = cancel, .userdata = userdata };
        free(a->token);
        a->token = NULL; /* the authenticate call itself goes without one */
        /* the file read again: a password changed (clsctl fleet rbac --apply sets new ones) is taken at
         * the next connection; one that cannot be read now leaves the last one read */
        char *password = NULL;
        if (etcd_password_read(&a->creds, &password, NULL) >= 0 && password) {
                free(a->password);
                a->password = password;
        }
        if (etcd_async_call(a, "/v3/auth/authenticate", etcd_authenticate_body(a->creds.user, a->password),
                            on_authenticated, on_authenticate_dropped, x) < 0) {
                free(x);
                return -ENOMEM;
        }
        return 0;
}

/* ---- calls ---- */

static uint64_t now_usec(EtcdAsync *a) {
        uint64_t now = 0;
        (void) sd_event_now(a->event, CLOCK_MONOTONIC, &now);
        return now;
}

static void call_free(Call *c) {
        if (c->easy) {
                curl_loop_remove(c->a->loop, c->easy);
                curl_api.easy_cleanup(c->easy);
        }
        sd_event_source_disable_unref(c->again);
        curl_api.slist_free_all(c->headers);
        free(c->path);
        free(c->url);
        free(c->body);
        free(c->answer.data);
        free(c);
}

static void call_unlink(EtcdAsync *a, Call *c) {
        for (Call **p = &a->calls; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        return;
                }
}

static int call_send(Call *c);

static int on_again(sd_event_source *s, uint64_t usec, void *userdata) {
        Call *c = userdata;
        _cleanup_error_ Error e = ERROR_NULL;

        (void) s, (void) usec;
        if (call_send(c) < 0) {
                /* out of memory: answered as a failure, as any that cannot be made */
                EtcdAsync *a = c->a;
                call_unlink(a, c);
                error_oom(&e);
                c->done(a, NULL, &e, c->userdata);
                call_free(c);
        }
        return 0;
}

/* The call goes (again) at the first of now + delay and the client's own spacing. */
static int call_later(Call *c, uint64_t delay) {
        EtcdAsync *a = c->a;
        uint64_t at = MAX(now_usec(a) + delay, a->not_before_usec);

        if (!c->again)
                return sd_event_add_time(a->event, &c->again, CLOCK_MONOTONIC, at, 1000, on_again, c);
        (void) sd_event_source_set_time(c->again, at);
        return sd_event_source_set_enabled(c->again, SD_EVENT_ONESHOT);
}

/* etcd said it is busy: the calls are spaced by a backoff that doubles (with jitter: a fleet's nodes do
 * not come back in step), at least what its Retry-After asked. */
static uint64_t busy(EtcdAsync *a, uint64_t retry_after) {
        a->busy_answers++;
        uint64_t delay = MAX(backoff_next_jittered(&a->backoff, ETCD_BUSY_BACKOFF_MIN_USEC,
                                                   a->backoff_cap_usec ?: ETCD_BUSY_BACKOFF_MAX_USEC),
                             retry_after);
        a->not_before_usec = MAX(a->not_before_usec, now_usec(a) + delay);
        return delay;
}

static void on_call_done(CurlLoop *l, CURL *easy, CURLcode result, void *userdata) {
        Call *c = userdata;
        EtcdAsync *a = c->a;
        _cleanup_error_ Error e = ERROR_NULL;
        json_t *answer = NULL;

        (void) l;
        (void) etcd_transfer_answer(easy, result, &c->answer, c->url, &answer, &e);
        if (e.code == ERROR_ETCD_OVERLOADED && now_usec(a) - c->first_usec < ETCD_BUSY_RETRY_USEC) {
                /* the same request later: a busy etcd gets it again once, not a new connection's many */
                uint64_t delay = busy(a, etcd_transfer_retry_after_usec(easy));
                c->fresh = result == CURLE_OPERATION_TIMEDOUT;
                curl_loop_remove(a->loop, c->easy);
                curl_api.easy_cleanup(c->easy);
                c->easy = NULL;
                free(c->answer.data);
                c->answer = (EtcdBuffer){ 0 };
                error_done(&e);
                a->retries++;
                if (call_later(c, delay) >= 0)
                        return;
                error_oom(&e);
        }
        call_unlink(a, c);
        if (!e.code) {
                backoff_ease(
                        &a->backoff,
                        ETCD_BUSY_BACKOFF_MIN_USEC); /* an answer: etcd copes again, the spacing shrinks */
                if (a->contact)
                        a->contact(a->contact_userdata);
        }
        c->done(a, e.code ? NULL : answer, e.code ? &e : NULL, c->userdata);
        json_decref(answer);
        call_free(c);
}

/* The call's transfer made and started, to the endpoint in use now (etcd's answers are the same from
 * any member). */
static int call_send(Call *c) {
        EtcdAsync *a = c->a;

        free(c->url);
        c->headers = (curl_api.slist_free_all(c->headers), NULL);
        if (asprintf(&c->url, "%s%s", a->urls[a->url], c->path) < 0) {
                c->url = NULL;
                return -ENOMEM;
        }
        if (!(c->easy = curl_api.easy_init()) ||
            etcd_transfer_setup(c->easy, c->url, c->body, &a->creds, a->token, &c->headers, &c->answer) <
                    0 ||
            (c->fresh && curl_api.easy_setopt(c->easy, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK) ||
            curl_loop_add(a->loop, c->easy, on_call_done, c) < 0) {
                if (c->easy)
                        curl_api.easy_cleanup(c->easy);
                c->easy = NULL;
                return -ENOMEM;
        }
        a->requests++;
        return 0;
}

int etcd_async_call(EtcdAsync *a, const char *path, json_t *body, EtcdCallDone done, void (*cancel)(void *),
                    void *userdata) {
        Call *c = calloc(1, sizeof(*c));
        int r;

        if (!c || !body || !(c->body = json_dumps(body, JSON_COMPACT))) {
                free(c);
                json_decref(body);
                return -ENOMEM;
        }
        json_decref(body);
        *c = (Call){ .a = a,
                     .body = c->body,
                     .done = done,
                     .cancel = cancel,
                     .userdata = userdata,
                     .first_usec = now_usec(a) };
        if (!(c->path = strdup(path))) {
                call_free(c);
                return -ENOMEM;
        }
        /* while etcd is busy, a new call waits for the spacing as the retried ones do */
        r = a->not_before_usec > c->first_usec ? call_later(c, 0) : call_send(c);
        if (r < 0) {
                call_free(c);
                return -ENOMEM;
        }
        c->next = a->calls;
        a->calls = c;
        return 0;
}

void etcd_async_cancel_all(EtcdAsync *a) {
        etcd_async_stream_stop(a);
        while (a->calls) {
                Call *c = a->calls;
                a->calls = c->next;
                if (c->cancel)
                        c->cancel(c->userdata);
                call_free(c);
        }
}

/* ---- the stream ---- */

void etcd_async_stream_stop(EtcdAsync *a) {
        Stream *s = &a->stream;

        if (s->easy) {
                curl_loop_remove(a->loop, s->easy);
                curl_api.easy_cleanup(s->easy);
        }
        curl_api.slist_free_all(s->headers);
        free(s->body);
        free(s->buf.data);
        /* (the lines' source may be the one running: kept, off, until the client goes) */
        (void) sd_event_source_set_enabled(s->lines, SD_EVENT_OFF);
        *s = (Stream){ .lines = s->lines };
}

/* The stream's complete lines, one JSON message each, taken from the loop (a message may stop the
 * stream, which libcurl does not allow from inside its own callback). */
static int on_lines(sd_event_source *src, void *userdata) {
        EtcdAsync *a = userdata;
        Stream *s = &a->stream;
        char *nl;

        (void) src;
        while (s->easy && s->buf.data && (nl = memchr(s->buf.data, '\n', s->buf.size))) {
                size_t line = (size_t) (nl - s->buf.data);
                json_error_t jerr;
                json_t *j = json_loadb(s->buf.data, line, 0, &jerr);
                memmove(s->buf.data, nl + 1, s->buf.size - line - 1);
                s->buf.size -= line + 1;
                s->buf.data[s->buf.size] = 0;
                if (!j)
                        continue;
                if (a->contact)
                        a->contact(a->contact_userdata);
                s->message(a, j, s->userdata);
                json_decref(j);
        }
        return 0;
}

static size_t on_stream_data(char *p, size_t size, size_t n, void *userdata) {
        EtcdAsync *a = userdata;
        Stream *s = &a->stream;
        size_t add = size * n;

        if (!etcd_buffer_append(&s->buf, p, add, ETCD_ANSWER_MAX))
                return 0;
        if (memchr(p, '\n', add)) {
                if (!s->lines && sd_event_add_defer(a->event, &s->lines, on_lines, a) < 0)
                        return 0;
                (void) sd_event_source_set_enabled(s->lines, SD_EVENT_ONESHOT);
        }
        return add;
}

static void on_stream_end(CurlLoop *l, CURL *easy, CURLcode result, void *userdata) {
        EtcdAsync *a = userdata;
        Stream *s = &a->stream;
        char why[128];

        (void) l, (void) easy;
        s->end(a,
               result == CURLE_OK
                       ? "etcd closed it"
                       : etcd_transfer_error(&s->buf, curl_api.easy_strerror(result), why, sizeof(why)),
               s->userdata);
}

int etcd_async_stream_start(EtcdAsync *a, const char *path, char *text, EtcdStreamMessage message,
                            EtcdStreamEnd end, void *userdata) {
        _cleanup_free_ char *url = NULL;
        Stream *s = &a->stream;

        etcd_async_stream_stop(a);
        *s = (Stream){
                .lines = s->lines, .body = text, .message = message, .end = end, .userdata = userdata
        };
        if (!text || asprintf(&url, "%s%s", a->urls[a->url], path) < 0) {
                url = NULL;
                etcd_async_stream_stop(a);
                return -ENOMEM;
        }
        if (!(s->easy = curl_api.easy_init()) ||
            etcd_transfer_setup(s->easy, url, s->body, &a->creds, a->token, &s->headers, NULL) < 0) {
                etcd_async_stream_stop(a);
                return -ENOMEM;
        }
        curl_api.easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_stream_data);
        curl_api.easy_setopt(s->easy, CURLOPT_WRITEDATA, a);
        curl_api.easy_setopt(s->easy, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_api.easy_setopt(s->easy, CURLOPT_TCP_KEEPIDLE, 5L);
        curl_api.easy_setopt(s->easy, CURLOPT_TCP_KEEPINTVL, 2L);
        if (curl_loop_add(a->loop, s->easy, on_stream_end, a) < 0) {
                etcd_async_stream_stop(a);
                return -ENOMEM;
        }
        a->requests++;
        return 0;
}
