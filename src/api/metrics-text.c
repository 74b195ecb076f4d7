/* metrics-text.c: GET /metrics, Prometheus' text exposition format 0.0.4: the daemon's families and samples
 * written out, and the API's own request counts. Served on every listener and, alone, on
 * --metrics-listen. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api-internal.h"
#include "daemon-metrics.h"

/* The exposition's text, grown in place: a scrape of a thousand filters is some 200 KiB written a few
 * bytes at a time, which a FILE stream (open_memstream) copies through its generic path. */
typedef struct Text {
        char *s;
        size_t n, size;
        bool oom;
} Text;

static bool grow(Text *t, size_t n) {
        size_t size = MAX(MAX(t->size * 2, t->n + n + 1), 4096u);
        char *x = t->oom ? NULL : realloc(t->s, size);

        if (!x) {
                t->oom = true;
                return false;
        }
        t->s = x;
        t->size = size;
        return true;
}

static inline void put(Text *t, const char *s, size_t n) {
        if (t->n + n + 1 > t->size && !grow(t, n))
                return;
        memcpy(t->s + t->n, s, n);
        t->n += n;
}

static void puts_(Text *t, const char *s) {
        put(t, s, strlen(s));
}

/* Plain runs go out whole; \ \n and (in a label value) " escaped. Values are short: a loop of our
 * own, not strcspn() per value. */
static void put_escaped(Text *t, const char *s, bool quote) {
        const char *run = s;

        for (; *s; s++) {
                if (*s != '\\' && *s != '\n' && (*s != '"' || !quote))
                        continue;
                put(t, run, (size_t) (s - run));
                puts_(t, *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : "\\\"");
                run = s + 1;
        }
        put(t, run, (size_t) (s - run));
}

static void put_value(Text *t, double value) {
        char buf[32], *p = buf + sizeof(buf);
        uint64_t u;
        bool negative = value < 0;

        if (isnan(value)) {
                puts_(t, " NaN\n");
                return;
        }
        if (isinf(value)) {
                puts_(t, value > 0 ? " +Inf\n" : " -Inf\n");
                return;
        }
        if (value != floor(value) || fabs(value) >= 9007199254740992.0) {
                int n = snprintf(buf, sizeof(buf), " %.17g\n", value);
                put(t, buf, (size_t) MIN(n, (int) sizeof(buf) - 1));
                return;
        }
        /* an integer (counters nearly always are): its digits by hand */
        u = (uint64_t) (negative ? -value : value);
        *--p = '\n';
        do {
                *--p = (char) ('0' + u % 10);
                u /= 10;
        } while (u);
        if (negative)
                *--p = '-';
        *--p = ' ';
        put(t, p, (size_t) (buf + sizeof(buf) - p));
}

/* A scrape: the text, and the label sets written once for several samples (each its length, then its
 * text, named by the length's offset + 1). */
typedef struct Scrape {
        Text out;
        Text sets;
} Scrape;

static void on_family(void *userdata, const char *name, const char *type, const char *help) {
        Text *t = &((Scrape *) userdata)->out;

        puts_(t, "# HELP ");
        puts_(t, name);
        put(t, " ", 1);
        put_escaped(t, help, false);
        puts_(t, "\n# TYPE ");
        puts_(t, name);
        put(t, " ", 1);
        puts_(t, type);
        put(t, "\n", 1);
}

static void put_labels(Text *t, const char *const *labels, size_t n_labels) {
        if (n_labels == 0)
                return;
        put(t, "{", 1);
        for (size_t i = 0; i < n_labels; i++) {
                if (i)
                        put(t, ",", 1);
                puts_(t, labels[2 * i]);
                put(t, "=\"", 2);
                put_escaped(t, labels[2 * i + 1], true);
                put(t, "\"", 1);
        }
        put(t, "}", 1);
}

static void on_sample(void *userdata, const char *name, const char *const *labels, size_t n_labels,
                      double value) {
        Text *t = &((Scrape *) userdata)->out;

        puts_(t, name);
        put_labels(t, labels, n_labels);
        put_value(t, value);
}

static const void *on_label_set(void *userdata, const char *const *labels, size_t n_labels) {
        Text *sets = &((Scrape *) userdata)->sets;
        size_t at = sets->n, len;

        put(sets, (const char *) &(size_t){ 0 }, sizeof(size_t));
        put_labels(sets, labels, n_labels);
        if (sets->oom)
                return NULL;
        len = sets->n - at - sizeof(size_t);
        memcpy(sets->s + at, &len, sizeof(len));
        return (const void *) (uintptr_t) (at + 1);
}

static void on_sample_set(void *userdata, const char *name, const void *set, double value) {
        Scrape *sc = userdata;
        const char *at = sc->sets.s + ((uintptr_t) set - 1);
        size_t len;

        memcpy(&len, at, sizeof(len));
        puts_(&sc->out, name);
        put(&sc->out, at + sizeof(len), len);
        put_value(&sc->out, value);
}

void route_metrics(Request *req, Response *resp) {
        Api *a = req->api;
        MetricWriter w = { .family = on_family,
                           .sample = on_sample,
                           .label_set = on_label_set,
                           .sample_set = on_sample_set };
        Scrape sc = { 0 };
        Text *t = &sc.out;
        char code[8];

        if (!streq(req->method, "GET") && !streq(req->method, "HEAD")) {
                method_not_allowed(resp, req, "GET, HEAD");
                return;
        }
        w.userdata = &sc;
        if (a->metrics_size && !(t->s = malloc(t->size = a->metrics_size + 4096)))
                t->size = 0;
        (void) daemon_metrics(a->daemon, &w);
        free(sc.sets.s);
        /* this request is counted once it is answered: the scrape shows the ones before it */
        on_family(&sc, "clsd_api_requests_total", "counter",
                  "API requests answered, by route and HTTP status");
        for (size_t i = 0; i < a->n_requests; i++) {
                snprintf(code, sizeof(code), "%u", a->requests[i].status);
                on_sample(&sc, "clsd_api_requests_total",
                          (const char *const[]){ "route", a->requests[i].route, "code", code }, 2,
                          (double) a->requests[i].n);
        }
        on_family(&sc, "clsd_api_errors_total", "counter", "API error answers, by error code");
        for (size_t i = 0; i < a->n_errors; i++)
                on_sample(&sc, "clsd_api_errors_total",
                          (const char *const[]){ "code", error_code_to_string(a->errors[i].code) }, 1,
                          (double) a->errors[i].n);
        on_family(&sc, "clsd_api_body_bytes_total", "counter",
                  "Bytes of request bodies read, those kept and those dropped after an early answer");
        on_sample(&sc, "clsd_api_body_bytes_total", NULL, 0, (double) a->body_bytes);
        on_family(&sc, "clsd_api_requests_waiting", "gauge",
                  "API requests waiting for the daemon's answer (a change: a pull, a verification)");
        on_sample(&sc, "clsd_api_requests_waiting", NULL, 0, a->requests_waiting);
        on_family(&sc, "clsd_audit_records_total", "counter",
                  "Changes asked of clsd (API and D-Bus), audited, by result: ok, refused (4xx), failed "
                  "(5xx)");
        static const char *const results[] = { "ok", "refused", "failed" };
        for (size_t i = 0; i < ELEMENTSOF(results); i++)
                on_sample(&sc, "clsd_audit_records_total", (const char *const[]){ "result", results[i] }, 1,
                          (double) a->audits[i]);
        put(t, "", 0); /* an empty scrape still has its buffer */
        if (t->oom) {
                free(t->s);
                response_errorf(resp, ERROR_INTERNAL_ERROR, "out of memory");
                return;
        }
        t->s[t->n] = 0;
        a->metrics_size = t->n;
        resp->status = 200;
        resp->text = t->s;
        resp->text_size = t->n;
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}
