/* metrics.c: GET /metrics, Prometheus' text exposition format 0.0.4: the daemon's families and samples
 * written out, and the API's own request counts. Served on every listener and, alone, on
 * --metrics-listen. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api-internal.h"

/* Route labels are templates, never what the client sent, so that a scanner cannot make the label
 * set grow without bound. */
const char *api_route_label(const char *url) {
        const char *rest;
        bool netns = false;

        static const char *const fixed[] = { "/healthz", "/version", "/metrics" };

        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                if (streq(url, fixed[i]))
                        return fixed[i]; /* never url: it lives only as long as the request */
        if ((rest = startswith(url, "/objects")))
                return rest[0] == 0 || streq(rest, "/") ? "/objects" : "/objects/{digest}";
        if ((rest = startswith(url, "/policies")))
                return rest[0] == 0 || streq(rest, "/") ? "/policies" : "/policies/{name}";
        if ((rest = startswith(url, "/netns"))) {
                if (rest[0] == 0 || streq(rest, "/"))
                        return "/netns";
                rest = strchr(rest + 1, '/');
                if (!rest || !(rest = startswith(rest, "/ifaces")))
                        return "other";
                netns = true;
        } else if (!(rest = startswith(url, "/ifaces")))
                return "other";
        if (rest[0] == 0 || streq(rest, "/"))
                return netns ? "/netns/{netns}/ifaces" : "/ifaces";
        rest = strchr(rest + 1, '/');
        if (rest && streq(rest, "/classifier"))
                return netns ? "/netns/{netns}/ifaces/{ifname}/classifier" : "/ifaces/{ifname}/classifier";
        if (rest && streq(rest, "/classifier/maps"))
                return netns ? "/netns/{netns}/ifaces/{ifname}/classifier/maps"
                             : "/ifaces/{ifname}/classifier/maps";
        if (rest && startswith(rest, "/classifier/maps/"))
                return netns ? "/netns/{netns}/ifaces/{ifname}/classifier/maps/{map}"
                             : "/ifaces/{ifname}/classifier/maps/{map}";
        return "other";
}

void api_count_request(Api *a, const char *url, unsigned status) {
        const char *route = api_route_label(url);

        for (size_t i = 0; i < a->n_requests; i++)
                if (a->requests[i].status == status && streq(a->requests[i].route, route)) {
                        a->requests[i].n++;
                        return;
                }
        if (a->n_requests < ELEMENTSOF(a->requests))
                a->requests[a->n_requests++] = (ApiRequestCount){ .route = route, .status = status, .n = 1 };
}

void api_count_error(Api *a, const char *code) {
        error_counts_add(a->errors, &a->n_errors, ELEMENTSOF(a->errors), code);
}

/* A scrape of a million series is mostly this: plain runs go out whole, unlocked (the stream is ours). */
static void put_escaped(FILE *f, const char *s, bool quote) {
        const char *special = quote ? "\\\n\"" : "\\\n";

        for (;;) {
                size_t n = strcspn(s, special);
                fwrite_unlocked(s, 1, n, f);
                s += n;
                if (!*s)
                        return;
                fputs_unlocked(*s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : "\\\"", f);
                s++;
        }
}

static void put_value(FILE *f, double value) {
        char buf[32], *p = buf + sizeof(buf);
        uint64_t u;
        bool negative = value < 0;

        if (isnan(value)) {
                fputs_unlocked(" NaN\n", f);
                return;
        }
        if (isinf(value)) {
                fputs_unlocked(value > 0 ? " +Inf\n" : " -Inf\n", f);
                return;
        }
        if (value != floor(value) || fabs(value) >= 9007199254740992.0) {
                fprintf(f, " %.17g\n", value);
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
        fwrite_unlocked(p, 1, (size_t) (buf + sizeof(buf) - p), f);
}

static void on_family(void *userdata, const char *name, const char *type, const char *help) {
        FILE *f = userdata;

        fprintf(f, "# HELP %s ", name);
        put_escaped(f, help, false);
        fprintf(f, "\n# TYPE %s %s\n", name, type);
}

static void on_sample(void *userdata, const char *name, const char *const *labels, size_t n_labels,
                      double value) {
        FILE *f = userdata;

        fputs_unlocked(name, f);
        if (n_labels) {
                fputc_unlocked('{', f);
                for (size_t i = 0; i < n_labels; i++) {
                        if (i)
                                fputc_unlocked(',', f);
                        fputs_unlocked(labels[2 * i], f);
                        fputs_unlocked("=\"", f);
                        put_escaped(f, labels[2 * i + 1], true);
                        fputc_unlocked('"', f);
                }
                fputc_unlocked('}', f);
        }
        put_value(f, value);
}

void route_metrics(Request *req, Response *resp) {
        Api *a = req->api;
        MetricWriter w = { .family = on_family, .sample = on_sample };
        char *text = NULL, code[8];
        size_t size = 0;
        FILE *f;

        if (!streq(req->method, "GET") && !streq(req->method, "HEAD")) {
                method_not_allowed(resp, req, "GET, HEAD");
                return;
        }
        f = open_memstream(&text, &size);
        if (!f) {
                response_errorf(resp, "internal_error", "out of memory");
                return;
        }
        w.userdata = f;
        (void) daemon_metrics(a->daemon, &w);
        /* this request is counted once it is answered: the scrape shows the ones before it */
        on_family(f, "clsd_api_requests_total", "counter",
                  "API requests answered, by route and HTTP status");
        for (size_t i = 0; i < a->n_requests; i++) {
                snprintf(code, sizeof(code), "%u", a->requests[i].status);
                on_sample(f, "clsd_api_requests_total",
                          (const char *const[]){ "route", a->requests[i].route, "code", code }, 2,
                          (double) a->requests[i].n);
        }
        on_family(f, "clsd_api_errors_total", "counter", "API error answers, by error code");
        for (size_t i = 0; i < a->n_errors; i++)
                on_sample(f, "clsd_api_errors_total", (const char *const[]){ "code", a->errors[i].code }, 1,
                          (double) a->errors[i].n);
        if (fclose(f) != 0 || !text) {
                free(text);
                response_errorf(resp, "internal_error", "out of memory");
                return;
        }
        resp->status = 200;
        resp->text = text;
        resp->text_size = size;
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}
