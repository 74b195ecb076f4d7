/* http-client.c: one request to clsd through libcurl's easy interface. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf() */
#endif
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dl.h"
#include "http-client.h"

static bool is_unreserved(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-';
}

HttpResponse *http_response_free(HttpResponse *r) {
        if (!r)
                return NULL;
        free(r->body);
        free(r);
        return NULL;
}

typedef struct Sink {
        HttpResponse *resp;
        bool too_large;
} Sink;

static size_t on_data(char *p, size_t size, size_t n, void *userdata) {
        Sink *s = userdata;
        size_t len = size * n;
        char *b;

        if (s->resp->body_size + len > HTTP_RESPONSE_MAX) {
                s->too_large = true;
                return 0; /* libcurl stops with CURLE_WRITE_ERROR */
        }
        b = realloc(s->resp->body, s->resp->body_size + len + 1);
        if (!b)
                return 0;
        memcpy(b + s->resp->body_size, p, len);
        s->resp->body = b;
        s->resp->body_size += len;
        b[s->resp->body_size] = 0;
        return len;
}

/* One header line, formatted (libcurl copies it). */
static int header_add(struct curl_slist **headers, const char *fmt, const char *value) {
        _cleanup_free_ char *line = NULL;

        if (asprintf(&line, fmt, value) < 0) {
                line = NULL;
                return -ENOMEM;
        }
        *headers = curl_api.slist_append(*headers, line);
        return 0;
}

/* Whether an http:// URL's host is this host's loopback (127/8, ::1, localhost): where a token may go in
 * clear. */
static bool url_loopback(const char *url) {
        const char *h = url + strlen("http://"), *end;
        char host[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;
        struct in_addr a4;
        size_t n;

        /* "http://localhost:x@elsewhere/": the host is after the userinfo; none is taken */
        if (memchr(h, '@', strcspn(h, "/?#")))
                return false;
        if (*h == '[') {
                end = strchr(++h, ']');
                if (!end)
                        return false;
        } else
                end = h + strcspn(h, ":/");
        n = (size_t) (end - h);
        if (n == 0 || n >= sizeof(host))
                return false;
        memcpy(host, h, n);
        host[n] = 0;
        if (streq(host, "localhost"))
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* Why a transfer failed, said for people (malloc'ed). */
static char *transfer_error(const HttpTarget *t, CURL *curl, CURLcode cc, bool too_large,
                            const char *errbuf) {
        struct stat st;
        long os_errno = 0;
        char why[512];

        if (too_large)
                snprintf(why, sizeof(why), "the answer is larger than %u MiB", HTTP_RESPONSE_MAX >> 20);
        else if (cc == CURLE_COULDNT_CONNECT && !t->url)
                /* libcurl does not keep connect()'s errno for a unix socket: the path tells */
                snprintf(why, sizeof(why), "cannot connect: %s",
                         t->socket_path[0] == '@' ? "no such abstract socket"
                         : stat(t->socket_path, &st) < 0
                                 ? (errno == ENOENT ? "no socket there (is clsd running? systemctl status "
                                                      "clsd.socket clsd; or give --socket)"
                                                    : strerror(errno))
                         : !S_ISSOCK(st.st_mode) ? "not a socket"
                                                 : "nothing listens there (is clsd running?)");
        else if (cc == CURLE_COULDNT_CONNECT &&
                 curl_api.easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno > 0)
                snprintf(why, sizeof(why), "cannot connect: %s", strerror((int) os_errno));
        else
                snprintf(why, sizeof(why), "%s", errbuf[0] ? errbuf : curl_api.easy_strerror(cc));
        return strdup(why);
}

int http_perform(const HttpTarget *t, const HttpRequest *req, HttpResponse **ret, char **ret_error) {
        _cleanup_free_ char *url = NULL;
        char errbuf[CURL_ERROR_SIZE] = "";
        struct curl_slist *headers = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        HttpResponse *resp;
        Sink sink;
        CURLcode cc;
        CURL *curl;
        long status = 0;
        int r;

        *ret_error = NULL;
        if (t->token && t->url && startswith(t->url, "http://") && !url_loopback(t->url)) {
                if (asprintf(ret_error, "%s: a token is sent over https:// only (or to a loopback address)",
                             t->url) < 0)
                        *ret_error = NULL;
                return -EPERM;
        }
        if (dl_load_curl(&e) < 0) {
                *ret_error = e.message ? strdup(e.message) : NULL;
                return -ENOPKG;
        }
        if (!(resp = calloc(1, sizeof(*resp))) || !(curl = curl_api.easy_init())) {
                free(resp);
                return -ENOMEM;
        }
        sink = (Sink){ .resp = resp };
        /* the unix socket's requests name a host for the Host header only */
        if (asprintf(&url, "%s%s", t->url ?: "http://clsd", req->path) < 0) {
                url = NULL;
                r = -ENOMEM;
                goto out;
        }
        if (!t->url)
                curl_api.easy_setopt(curl,
                                     t->socket_path[0] == '@' ? CURLOPT_ABSTRACT_UNIX_SOCKET
                                                              : CURLOPT_UNIX_SOCKET_PATH,
                                     t->socket_path + (t->socket_path[0] == '@'));
        curl_api.easy_setopt(curl, CURLOPT_URL, url);
        curl_api.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_api.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
        if (streq(req->method, "HEAD"))
                curl_api.easy_setopt(curl, CURLOPT_NOBODY, 1L);
        curl_api.easy_setopt(curl, CURLOPT_TIMEOUT, (long) HTTP_TIMEOUT_SEC);
        curl_api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_api.easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
        curl_api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
        curl_api.easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
        if (t->cacert)
                curl_api.easy_setopt(curl, CURLOPT_CAINFO, t->cacert);
        if (t->cert)
                curl_api.easy_setopt(curl, CURLOPT_SSLCERT, t->cert);
        if (t->key)
                curl_api.easy_setopt(curl, CURLOPT_SSLKEY, t->key);
        /* "Expect: 100-continue" would hold a large upload back a second for an answer clsd never gives */
        headers = curl_api.slist_append(headers, "Expect:");
        if (req->content_type) {
                if (header_add(&headers, "Content-Type: %s", req->content_type) < 0) {
                        r = -ENOMEM;
                        goto out;
                }
                curl_api.easy_setopt(curl, CURLOPT_POSTFIELDS, req->body ?: "");
                curl_api.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) req->body_size);
        }
        if (t->token && header_add(&headers, "Authorization: Bearer %s", t->token) < 0) {
                r = -ENOMEM;
                goto out;
        }
        for (const char *const *h = req->headers; h && *h; h++)
                headers = curl_api.slist_append(headers, *h);
        curl_api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

        cc = curl_api.easy_perform(curl);
        if (cc != CURLE_OK) {
                r = sink.too_large ? -EFBIG : cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
                *ret_error = transfer_error(t, curl, cc, sink.too_large, errbuf);
                goto out;
        }
        curl_api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        resp->status = (unsigned) status;
        *ret = resp;
        resp = NULL;
        r = 0;
out:
        curl_api.slist_free_all(headers);
        curl_api.easy_cleanup(curl);
        http_response_free(resp);
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
