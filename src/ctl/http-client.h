/* http-client.h: a minimal HTTP/1.1 client over a unix stream socket, one request per connection
 * (http-client.c), and the parser of its answers (http-response.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "macros.h"

/* Loading and verifying a large object takes seconds; a daemon silent for this long is stuck. */
#define HTTP_TIMEOUT_SEC 120
/* Far above any answer clsd gives (a verifier log is at most a few MiB); bounds our memory. */
#define HTTP_RESPONSE_MAX (64u * 1024 * 1024)
/* Limits on the header section, against a peer that is not an HTTP server. */
#define HTTP_HEADERS_MAX 100
#define HTTP_HEADER_SECTION_MAX (64u * 1024)

typedef struct HttpHeader {
        char *name;
        char *value;
} HttpHeader;

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
        char *reason;
        HttpHeader *headers;
        size_t n_headers;
        char *body; /* NUL-terminated for convenience; body_size excludes the NUL */
        size_t body_size;
} HttpResponse;

HttpResponse *http_response_free(HttpResponse *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpResponse *, http_response_free);

/* Case-insensitive lookup; the last occurrence wins. NULL if absent. */
const char *http_response_header(const HttpResponse *r, const char *name);

/* Connects to a unix socket; a path starting with '@' names an abstract socket. Returns the fd. */
int http_connect_unix(const char *path);

/* Sends req on fd, reads the answer until EOF (we ask for "Connection: close") and parses it. */
int http_request(int fd, const HttpRequest *req, HttpResponse **ret);

/* A tchar of RFC 9110 §5.6.2: what method and header names are made of. */
bool http_is_token_char(char c);

/* Parses a complete response as read until EOF. -EBADMSG if malformed or truncated. Exposed for tests. */
int http_response_parse(const char *data, size_t size, bool head, HttpResponse **ret);

/* Percent-encodes s for use as one path segment: keeps [A-Za-z0-9._-] and the bytes in keep. */
int http_escape_segment(const char *s, const char *keep, char **ret);
