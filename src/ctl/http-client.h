/* http-client.h: clsctl's requests to clsd over libcurl (opened with dlopen(), src/etcd/dl.c): the unix
 * socket, or HTTPS to another host (--host) with a CA, a client certificate or a bearer token. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "macros.h"

/* Loading and verifying a large object takes seconds; a daemon silent for this long is stuck. */
#define HTTP_TIMEOUT_SEC 120
/* Far above any answer clsd gives (a verifier log is at most a few MiB); bounds our memory. */
#define HTTP_RESPONSE_MAX (64u * 1024 * 1024)

/* Where clsd is. */
typedef struct HttpTarget {
        const char *socket_path; /* the unix socket ('@NAME': abstract), when url is NULL */
        const char *url; /* "https://host:port" (or http:// on loopback) */
        const char *cacert, *cert, *key; /* PEM files: the CA to trust, a client certificate and key */
        const char *token; /* a bearer token, or NULL */
} HttpTarget;

typedef struct HttpRequest {
        const char *method;
        const char *path; /* already percent-encoded, see http_escape_segment() */
        const char *content_type; /* NULL: no body */
        const void *body;
        size_t body_size;
        const char *const *headers; /* extra "Name: value" lines, NULL-terminated; may be NULL */
} HttpRequest;

typedef struct HttpResponse {
        unsigned status;
        char *body; /* NUL-terminated for convenience; body_size excludes the NUL */
        size_t body_size;
} HttpResponse;

HttpResponse *http_response_free(HttpResponse *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpResponse *, http_response_free);

/* Sends req to t and reads the answer: 0, or a negative errno with what went wrong in *ret_error
 * (libcurl's words: cannot connect, a certificate not trusted, …). */
int http_perform(const HttpTarget *t, const HttpRequest *req, HttpResponse **ret, char **ret_error);

/* Percent-encodes s for use as one path segment: keeps [A-Za-z0-9._-] and the bytes in keep. */
int http_escape_segment(const char *s, const char *keep, char **ret);
