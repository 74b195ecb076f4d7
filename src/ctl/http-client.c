/* http-client.c: one HTTP/1.1 request per unix-socket connection: connect, send, read until EOF (we
 * ask for "Connection: close"), hand the bytes to http_response_parse(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* open_memstream() */
#endif
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include "http-client.h"

static bool is_unreserved(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-';
}

int http_connect_unix(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = HTTP_TIMEOUT_SEC };
        size_t n = strlen(path);
        socklen_t len;

        if (n == 0)
                return -EINVAL;
        if (n >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        if (path[0] == '@') {
                memcpy(sa.sun_path + 1, path + 1, n - 1);
                len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n);
        } else {
                memcpy(sa.sun_path, path, n);
                len = (socklen_t) sizeof(sa);
        }

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* On AF_UNIX the send timeout also bounds connect() against a full listen backlog. */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, len) < 0)
                return errno == EAGAIN ? -ETIMEDOUT : -errno;
        return TAKE_FD(fd);
}

static int send_all(int fd, const void *buf, size_t size) {
        const char *p = buf;

        while (size > 0) {
                /* MSG_NOSIGNAL: a daemon closing early must give us EPIPE, not kill us with SIGPIPE. */
                ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                }
                p += n;
                size -= (size_t) n;
        }
        return 0;
}

static bool is_valid_header_line(const char *h) {
        const char *colon = strchr(h, ':');

        if (!colon || colon == h)
                return false;
        for (const char *p = h; p < colon; p++)
                if (!http_is_token_char(*p))
                        return false;
        for (const char *p = colon; *p; p++)
                if (((unsigned char) *p < 0x20 && *p != '\t') || *p == 0x7f)
                        return false;
        return true;
}

static int request_format_head(const HttpRequest *req, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;

        if (!req->method[0])
                return -EINVAL;
        for (const char *p = req->method; *p; p++)
                if (!http_is_token_char(*p))
                        return -EINVAL;
        /* The path goes verbatim on the request line: no spaces, no control bytes, no CR/LF. */
        if (req->path[0] != '/')
                return -EINVAL;
        for (const char *p = req->path; *p; p++)
                if ((unsigned char) *p <= 0x20 || (unsigned char) *p >= 0x7f)
                        return -EINVAL;
        if (req->content_type && strpbrk(req->content_type, "\r\n"))
                return -EINVAL;
        for (const char *const *h = req->headers; h && *h; h++)
                if (!is_valid_header_line(*h))
                        return -EINVAL;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        fprintf(f, "%s %s HTTP/1.1\r\n", req->method, req->path);
        fputs("Host: localhost\r\n"
              "User-Agent: clsctl\r\n"
              "Accept: application/json\r\n"
              "Connection: close\r\n",
              f);
        if (req->content_type)
                fprintf(f, "Content-Type: %s\r\nContent-Length: %zu\r\n", req->content_type, req->body_size);
        for (const char *const *h = req->headers; h && *h; h++)
                fprintf(f, "%s\r\n", *h);
        fputs("\r\n", f);
        if (ferror(f)) {
                fclose(f);
                return -ENOMEM;
        }
        if (fclose(f) != 0)
                return -ENOMEM;

        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

/* Like read_full_fd(), but a reset after the answer counts as its end: on AF_UNIX a server that
 * closes with some of our body unread resets the connection once we have read what it sent. */
static int read_until_eof(int fd, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 0;

        for (;;) {
                ssize_t n;

                if (alloc - size < 4096) {
                        size_t a = alloc ? alloc * 2 : 16384;
                        char *b;

                        if (alloc > HTTP_RESPONSE_MAX)
                                return -EFBIG;
                        b = realloc(buf, a + 1);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        alloc = a;
                }
                n = recv(fd, buf + size, alloc - size, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == ECONNRESET && size > 0)
                                break;
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                }
                if (n == 0)
                        break;
                size += (size_t) n;
                if (size > HTTP_RESPONSE_MAX)
                        return -EFBIG;
        }
        buf[size] = 0; /* the loop allocated before its first recv() */
        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

int http_request(int fd, const HttpRequest *req, HttpResponse **ret) {
        _cleanup_free_ char *head = NULL, *data = NULL;
        size_t head_size = 0, size = 0;
        int r, r_send;

        r = request_format_head(req, &head, &head_size);
        if (r < 0)
                return r;

        r_send = send_all(fd, head, head_size);
        if (r_send >= 0 && req->content_type && req->body_size > 0)
                r_send = send_all(fd, req->body, req->body_size);
        /* A server may answer (413, 401, ...) and close before reading all we send: read that answer. */
        if (r_send < 0 && r_send != -EPIPE && r_send != -ECONNRESET)
                return r_send;

        r = read_until_eof(fd, &data, &size);
        if (r < 0)
                return r_send < 0 ? r_send : r;
        if (size == 0)
                return r_send < 0 ? r_send : -ECONNRESET;

        r = http_response_parse(data, size, streq(req->method, "HEAD"), ret);
        if (r < 0 && r_send < 0)
                return r_send;
        return r;
}

int http_escape_segment(const char *s, const char *keep, char **ret) {
        static const char hex[] = "0123456789ABCDEF";
        /* "." and ".." as a segment would be taken as dot-segments by path normalisation. */
        bool dots = streq(s, ".") || streq(s, "..");
        char *e, *p;

        e = malloc(strlen(s) * 3 + 1);
        if (!e)
                return -ENOMEM;
        p = e;
        for (; *s; s++) {
                if ((is_unreserved(*s) && !(dots && *s == '.')) || (keep && strchr(keep, *s)))
                        *p++ = *s;
                else {
                        *p++ = '%';
                        *p++ = hex[(unsigned char) *s >> 4];
                        *p++ = hex[(unsigned char) *s & 15];
                }
        }
        *p = 0;
        *ret = e;
        return 0;
}
