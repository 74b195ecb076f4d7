/* http-response.c: parsing a whole HTTP/1.1 answer: status line, headers, identity or chunked body.
 * Strict where leniency would hide a peer that is not clsd. */
#include <stdint.h>
#include <strings.h>

#include "http-client.h"

bool http_is_token_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static void http_response_clear_head(HttpResponse *r) {
        for (size_t i = 0; i < r->n_headers; i++) {
                free(r->headers[i].name);
                free(r->headers[i].value);
        }
        free(r->headers);
        free(r->reason);
        r->headers = NULL;
        r->n_headers = 0;
        r->reason = NULL;
        r->status = 0;
}

HttpResponse *http_response_free(HttpResponse *r) {
        if (!r)
                return NULL;
        http_response_clear_head(r);
        free(r->body);
        free(r);
        return NULL;
}

const char *http_response_header(const HttpResponse *r, const char *name) {
        for (size_t i = r->n_headers; i > 0; i--)
                if (strcasecmp(r->headers[i - 1].name, name) == 0)
                        return r->headers[i - 1].value;
        return NULL;
}

/* Returns the next line without its "\r\n" (or bare "\n"); -EBADMSG if the data ends first. */
static int next_line(const char *data, size_t size, size_t *pos, const char **ret_line, size_t *ret_len) {
        const char *start = data + *pos, *nl;
        size_t len;

        nl = memchr(start, '\n', size - *pos);
        if (!nl)
                return -EBADMSG;
        len = (size_t) (nl - start);
        if (len > 0 && start[len - 1] == '\r')
                len--;
        *ret_line = start;
        *ret_len = len;
        *pos = (size_t) (nl - data) + 1;
        return 0;
}

static int parse_status_line(const char *l, size_t n, HttpResponse *resp) {
        unsigned status = 0;

        if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ')
                return -EBADMSG;
        for (size_t i = 9; i < 12; i++) {
                if (l[i] < '0' || l[i] > '9')
                        return -EBADMSG;
                status = status * 10 + (unsigned) (l[i] - '0');
        }
        if (status < 100 || (n > 12 && l[12] != ' '))
                return -EBADMSG;
        if (memchr(l, 0, n))
                return -EBADMSG;

        resp->reason = n > 13 ? strndup(l + 13, n - 13) : strdup("");
        if (!resp->reason)
                return -ENOMEM;
        resp->status = status;
        return 0;
}

static int parse_header_line(const char *l, size_t n, HttpHeader *ret) {
        const char *colon = memchr(l, ':', n), *v, *e = l + n;

        if (!colon || colon == l)
                return -EBADMSG;
        for (const char *p = l; p < colon; p++)
                if (!http_is_token_char(*p))
                        return -EBADMSG;
        v = colon + 1;
        while (v < e && (*v == ' ' || *v == '\t'))
                v++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
        for (const char *p = v; p < e; p++)
                if (((unsigned char) *p < 0x20 && *p != '\t') || *p == 0x7f)
                        return -EBADMSG;

        _cleanup_free_ char *name = strndup(l, (size_t) (colon - l));
        _cleanup_free_ char *value = strndup(v, (size_t) (e - v));
        if (!name || !value)
                return -ENOMEM;
        ret->name = TAKE_PTR(name);
        ret->value = TAKE_PTR(value);
        return 0;
}

/* Parses one status line and header section starting at *pos, up to and including the blank line. */
static int parse_head(const char *data, size_t size, size_t *pos, HttpResponse *resp) {
        size_t start = *pos, len;
        const char *line;
        int r;

        r = next_line(data, size, pos, &line, &len);
        if (r < 0)
                return r;
        r = parse_status_line(line, len, resp);
        if (r < 0)
                return r;

        for (;;) {
                HttpHeader *h;

                r = next_line(data, size, pos, &line, &len);
                if (r < 0)
                        return r;
                if (*pos - start > HTTP_HEADER_SECTION_MAX)
                        return -EBADMSG;
                if (len == 0)
                        return 0;
                /* Obsolete line folding (RFC 9112 §5.2): clsd never sends it, so the peer is not clsd. */
                if (line[0] == ' ' || line[0] == '\t')
                        return -EBADMSG;
                if (resp->n_headers >= HTTP_HEADERS_MAX)
                        return -EBADMSG;
                h = realloc(resp->headers, (resp->n_headers + 1) * sizeof(HttpHeader));
                if (!h)
                        return -ENOMEM;
                resp->headers = h;
                r = parse_header_line(line, len, &resp->headers[resp->n_headers]);
                if (r < 0)
                        return r;
                resp->n_headers++;
        }
}

static int parse_decimal(const char *s, size_t *ret) {
        size_t v = 0;

        if (!*s)
                return -EBADMSG;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EBADMSG;
                if (v > (SIZE_MAX - 9) / 10)
                        return -EBADMSG;
                v = v * 10 + (size_t) (*s - '0');
        }
        *ret = v;
        return 0;
}

/* Several Content-Length headers are allowed only if they agree (RFC 9110 §8.6). */
static int response_content_length(const HttpResponse *resp, bool *ret_found, size_t *ret) {
        bool found = false;
        size_t len = 0;

        for (size_t i = 0; i < resp->n_headers; i++) {
                size_t v;
                int r;

                if (strcasecmp(resp->headers[i].name, "Content-Length") != 0)
                        continue;
                r = parse_decimal(resp->headers[i].value, &v);
                if (r < 0)
                        return r;
                if (found && v != len)
                        return -EBADMSG;
                found = true;
                len = v;
        }
        *ret_found = found;
        *ret = len;
        return 0;
}

static int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static int decode_chunked(const char *data, size_t size, size_t pos, char **ret, size_t *ret_size) {
        /* The decoded body is never longer than what is left of the input. */
        _cleanup_free_ char *body = malloc(size - pos + 1);
        size_t n = 0, len;
        const char *line;
        int r;

        if (!body)
                return -ENOMEM;

        for (;;) {
                size_t chunk = 0, i = 0;

                r = next_line(data, size, &pos, &line, &len);
                if (r < 0)
                        return r;
                for (; i < len && hex_digit(line[i]) >= 0; i++) {
                        if (chunk > (SIZE_MAX >> 4))
                                return -EBADMSG;
                        chunk = (chunk << 4) | (size_t) hex_digit(line[i]);
                }
                if (i == 0)
                        return -EBADMSG;
                while (i < len && (line[i] == ' ' || line[i] == '\t'))
                        i++;
                if (i < len && line[i] != ';') /* chunk extensions are ignored */
                        return -EBADMSG;
                if (chunk == 0)
                        break;
                if (chunk > size - pos)
                        return -EBADMSG;
                memcpy(body + n, data + pos, chunk);
                n += chunk;
                pos += chunk;
                r = next_line(data, size, &pos, &line, &len);
                if (r < 0)
                        return r;
                if (len != 0)
                        return -EBADMSG;
        }

        /* Trailer fields, ignored. A peer closing right after the last chunk lost nothing of the body. */
        while (pos < size) {
                r = next_line(data, size, &pos, &line, &len);
                if (r < 0 || len == 0)
                        break;
        }

        body[n] = 0;
        *ret = TAKE_PTR(body);
        *ret_size = n;
        return 0;
}

int http_response_parse(const char *data, size_t size, bool head, HttpResponse **ret) {
        _cleanup_(http_response_freep) HttpResponse *resp = calloc(1, sizeof(HttpResponse));
        const char *te;
        size_t pos = 0, len;
        bool has_len;
        int r;

        if (!resp)
                return -ENOMEM;

        for (;;) {
                r = parse_head(data, size, &pos, resp);
                if (r < 0)
                        return r;
                /* Skip interim answers (100 Continue, 103 Early Hints); we never ask to switch protocols. */
                if (resp->status >= 200)
                        break;
                if (resp->status == 101)
                        return -EBADMSG;
                http_response_clear_head(resp);
        }

        te = http_response_header(resp, "Transfer-Encoding");
        r = response_content_length(resp, &has_len, &len);
        if (r < 0)
                return r;

        if (head || resp->status == 204 || resp->status == 304) {
                resp->body = strdup("");
                if (!resp->body)
                        return -ENOMEM;
        } else if (te) {
                /* We send no TE header, so "chunked" alone is the only coding a server may use. */
                if (strcasecmp(te, "chunked") != 0)
                        return -EBADMSG;
                r = decode_chunked(data, size, pos, &resp->body, &resp->body_size);
                if (r < 0)
                        return r;
        } else {
                if (has_len) {
                        if (len > size - pos)
                                return -EBADMSG; /* truncated */
                } else
                        len = size - pos;
                resp->body = malloc(len + 1);
                if (!resp->body)
                        return -ENOMEM;
                memcpy(resp->body, data + pos, len);
                resp->body[len] = 0;
                resp->body_size = len;
        }

        *ret = TAKE_PTR(resp);
        return 0;
}
