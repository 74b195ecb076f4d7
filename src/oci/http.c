/* http.c: requests to a registry's HTTP API v2 with libcurl, and its authentication: anonymous first,
 * or with the registries file's basic credentials where it gives some, then as its 401 asks: basic, or a
 * bearer token from its token service (the credentials sent there), kept for the session's later
 * requests. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "backoff.h"
#include "oci-internal.h"

#define TOKEN_ANSWER_MAX (64 * 1024)

static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
        (void) clientp, (void) purpose;
        return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

static size_t on_write(char *p, size_t size, size_t n, void *userdata) {
        OciBuffer *b = userdata;
        size_t add = size * n;
        char *v;

        if (b->size + add > b->max) {
                b->over = true;
                return 0;
        }
        v = realloc(b->data, b->size + add + 1);
        if (!v)
                return 0;
        memcpy(v + b->size, p, add);
        b->data = v;
        b->size += add;
        v[b->size] = 0;
        return add;
}

static void header_copy(char *dst, size_t n, const char *v, size_t len) {
        while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
                len--;
        while (len > 0 && *v == ' ')
                v++, len--;
        snprintf(dst, n, "%.*s", (int) len, v);
}

static size_t on_header(char *p, size_t size, size_t n, void *userdata) {
        OciAnswer *a = userdata;
        size_t len = size * n;
        static const char ct[] = "content-type:", dd[] = "docker-content-digest:",
                          wa[] = "www-authenticate:", lo[] = "location:";

        if (len > sizeof(ct) - 1 && strncasecmp(p, ct, sizeof(ct) - 1) == 0)
                header_copy(a->content_type, sizeof(a->content_type), p + sizeof(ct) - 1,
                            len - sizeof(ct) + 1);
        else if (len > sizeof(dd) - 1 && strncasecmp(p, dd, sizeof(dd) - 1) == 0)
                header_copy(a->docker_digest, sizeof(a->docker_digest), p + sizeof(dd) - 1,
                            len - sizeof(dd) + 1);
        else if (len > sizeof(wa) - 1 && len < 2048 && strncasecmp(p, wa, sizeof(wa) - 1) == 0) {
                char v[2048];
                header_copy(v, sizeof(v), p + sizeof(wa) - 1, len - sizeof(wa) + 1);
                free(a->challenge);
                a->challenge = strdup(v);
        } else if (len > sizeof(lo) - 1 && len < 4096 && strncasecmp(p, lo, sizeof(lo) - 1) == 0) {
                char v[4096];
                header_copy(v, sizeof(v), p + sizeof(lo) - 1, len - sizeof(lo) + 1);
                free(a->location);
                a->location = strdup(v);
        } else if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
                /* a new answer (after a redirect): what the one before said goes */
                a->content_type[0] = a->docker_digest[0] = 0;
                free(a->location);
                a->location = NULL;
        }
        return len;
}

void oci_answer_done(OciAnswer *a) {
        free(a->body.data);
        free(a->challenge);
        free(a->location);
        *a = (OciAnswer){ 0 };
}

int oci_session_open(OciSession *s, const char *ref, const OciPullOptions *o, Error *reterr) {
        int r;

        *s = (OciSession){ .o = o };
        r = oci_ref_parse(ref, &s->ref, reterr);
        if (r < 0)
                return r;
        r = dl_load_curl(reterr);
        if (r < 0)
                return r;
        s->easy = curl_api.easy_init();
        if (!s->easy)
                return error_oom(reterr);
        if (o->registry && o->registry->token && !(s->bearer = strdup(o->registry->token)))
                return error_oom(reterr);
        /* credentials the registries file gives this registry go with the first request: the anonymous one
         * before them cost every pull a 401 (a request in four, and a round trip); a registry of bearer
         * tokens answers it with its challenge all the same */
        s->basic = !s->bearer && o->registry && o->registry->username;
        return 0;
}

void oci_session_close(OciSession *s) {
        if (s->easy)
                curl_api.easy_cleanup(s->easy);
        if (s->bearer)
                explicit_bzero(s->bearer, strlen(s->bearer));
        free(s->bearer);
        *s = (OciSession){ 0 };
}

static void setup(OciSession *s, const char *url, OciAnswer *a, struct curl_slist *headers, bool basic,
                  const OciSend *send) {
        const OciRegistry *reg = s->o->registry;
        CURL *e = s->easy;

        curl_api.easy_reset(e);
        curl_api.easy_setopt(e, CURLOPT_URL, url);
        curl_api.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_api.easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
        curl_api.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
        curl_api.easy_setopt(e, CURLOPT_TIMEOUT, s->o->timeout_sec > 0 ? s->o->timeout_sec : 30L);
        curl_api.easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
        curl_api.easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
        curl_api.easy_setopt(e, CURLOPT_PROTOCOLS_STR, reg && reg->plain_http ? "http,https" : "https");
        curl_api.easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR,
                             reg && reg->plain_http ? "http,https" : "https");
        curl_api.easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
        curl_api.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_api.easy_setopt(e, CURLOPT_WRITEDATA, &a->body);
        curl_api.easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_api.easy_setopt(e, CURLOPT_HEADERDATA, a);
        curl_api.easy_setopt(e, CURLOPT_HTTPHEADER, headers);
        curl_api.easy_setopt(e, CURLOPT_USERAGENT, "clsd");
        if (send && streq(send->method, "HEAD"))
                curl_api.easy_setopt(e, CURLOPT_NOBODY, 1L);
        else if (send) {
                curl_api.easy_setopt(e, CURLOPT_POSTFIELDS, send->body ?: "");
                curl_api.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) send->size);
                curl_api.easy_setopt(e, CURLOPT_CUSTOMREQUEST, send->method);
        }
        if (reg && reg->ca_file)
                curl_api.easy_setopt(e, CURLOPT_CAINFO, reg->ca_file);
        /* the CA file (the registry's, else the system's bundle) says it all: libcurl-gnutls would also
         * read each of /etc/ssl/certs' ~300 files for every pull, ~100 ms before its first byte */
        curl_api.easy_setopt(e, CURLOPT_CAPATH, NULL);
        if (send && !streq(send->method, "HEAD")) {
                /* a body of megabytes on a slow link: no deadline for the whole, but one for a stall */
                curl_api.easy_setopt(e, CURLOPT_TIMEOUT, 0L);
                curl_api.easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
                curl_api.easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                                     s->o->timeout_sec > 0 ? s->o->timeout_sec : 30L);
        }
        if (basic && reg && reg->username && !(send && send->anonymous)) {
                curl_api.easy_setopt(e, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
                curl_api.easy_setopt(e, CURLOPT_USERNAME, reg->username);
                curl_api.easy_setopt(e, CURLOPT_PASSWORD, reg->password);
        }
}

static int transfer_error(OciSession *s, CURLcode c, const OciAnswer *a, const char *url, Error *reterr) {
        if (a->body.over)
                return error_set(reterr, EFBIG, ERROR_PAYLOAD_TOO_LARGE, "%s: more than %zu bytes", url,
                                 a->body.max);
        return error_set(reterr, EHOSTUNREACH, ERROR_REGISTRY_UNREACHABLE, "registry %s: %s",
                         s->ref.registry, s->errbuf[0] ? s->errbuf : curl_api.easy_strerror(c));
}

/* An answer's Location as the URL it names: a reference relative to the URL that answered (RFC 3986: from
 * the registry's root, or, without a slash, from the request's own path, as an upload's may be) made whole.
 */
static int location_resolve(CURL *easy, OciAnswer *a) {
        const char *base = NULL;
        char *whole = NULL;
        CURLU *u;

        if (curl_api.easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &base) != CURLE_OK || !base)
                return 0;
        if (!(u = curl_api.url()))
                return -ENOMEM;
        if (curl_api.url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK &&
            curl_api.url_set(u, CURLUPART_URL, a->location, 0) == CURLUE_OK &&
            curl_api.url_get(u, CURLUPART_URL, &whole, 0) == CURLUE_OK) {
                char *copy = strdup(whole);
                curl_api.free(whole);
                if (!copy) {
                        curl_api.url_cleanup(u);
                        return -ENOMEM;
                }
                free(a->location);
                a->location = copy;
        }
        curl_api.url_cleanup(u);
        return 0;
}

/* One request: 0 with the answer, or <0 (the transfer failed). */
static int request(OciSession *s, const char *url, const char *accept, size_t max, bool basic,
                   const OciSend *send, OciAnswer *a, Error *reterr) {
        _cleanup_free_ char *auth = NULL, *acc = NULL, *ct = NULL;
        struct curl_slist *headers = NULL, *h;
        CURLcode c;

        oci_answer_done(a);
        a->body.max = max;
        s->errbuf[0] = 0;
        h = curl_api.slist_append(NULL, "Expect:");
        if (h && accept &&
            (asprintf(&acc, "Accept: %s", accept) < 0 || !(h = curl_api.slist_append(headers = h, acc))))
                h = NULL;
        if (h && send && send->content_type &&
            (asprintf(&ct, "Content-Type: %s", send->content_type) < 0 ||
             !(h = curl_api.slist_append(headers = h, ct))))
                h = NULL;
        if (h && !basic && s->bearer && !(send && send->anonymous) &&
            (asprintf(&auth, "Authorization: Bearer %s", s->bearer) < 0 ||
             !(h = curl_api.slist_append(headers = h, auth))))
                h = NULL;
        if (!h) {
                curl_api.slist_free_all(headers);
                return error_oom(reterr);
        }
        headers = h;
        setup(s, url, a, headers, basic, send);
        s->requests++;
        c = curl_api.easy_perform(s->easy);
        if (auth)
                explicit_bzero(auth, strlen(auth));
        curl_api.slist_free_all(headers);
        if (c != CURLE_OK)
                return transfer_error(s, c, a, url, reterr);
        curl_api.easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &a->status);
        if (a->location && location_resolve(s->easy, a) < 0)
                return error_oom(reterr);
        curl_off_t after = 0;
        if (curl_api.easy_getinfo(s->easy, CURLINFO_RETRY_AFTER, &after) == CURLE_OK && after > 0)
                a->retry_after = (long) MIN(after, (curl_off_t) OCI_RETRY_AFTER_MAX_SEC);
        return 0;
}

/* A registry that says it is busy (429, or 503) is asked again after its Retry-After (1 s doubling
 * without one), for up to OCI_RETRY_AFTER_MAX_SEC in all: it is paced, not given up on, nor hurried. */
static int request_paced(OciSession *s, const char *url, const char *accept, size_t max, bool basic,
                         const OciSend *send, OciAnswer *a, Error *reterr) {
        Backoff backoff = { 0 };
        long waited = 0;
        int r;

        for (;;) {
                r = request(s, url, accept, max, basic, send, a, reterr);
                if (r < 0 || (a->status != 429 && a->status != 503))
                        return r;
                long wait = a->retry_after > 0
                                    ? a->retry_after
                                    : (long) (backoff_next(&backoff, 1000000, 16000000) / 1000000);
                if (waited + wait > OCI_RETRY_AFTER_MAX_SEC)
                        return r;
                s->busy++;
                sleep((unsigned) wait);
                waited += wait;
        }
}

/* The value of param in a challenge's list (key="value", ...): NULL if absent. */
static char *challenge_param(const char *c, const char *param) {
        size_t n = strlen(param);

        for (const char *p = c; (p = strstr(p, param)); p += n) {
                const char *v, *end;
                if (p > c && p[-1] != ' ' && p[-1] != ',')
                        continue;
                if (strncmp(p + n, "=\"", 2) != 0)
                        continue;
                v = p + n + 2;
                end = strchr(v, '"');
                return end ? strndup(v, end - v) : NULL;
        }
        return NULL;
}

static int token_get(OciSession *s, const char *challenge, Error *reterr) {
        _cleanup_free_ char *realm = challenge_param(challenge, "realm"),
                            *service = challenge_param(challenge, "service"),
                            *scope = challenge_param(challenge, "scope"), *url = NULL;
        _cleanup_(oci_answer_done) OciAnswer a = { 0 };
        char *es = NULL, *esc = NULL;
        json_t *j, *t;
        int r;

        if (!realm || !(startswith(realm, "https://") || startswith(realm, "http://")))
                return error_set(reterr, EPROTO, ERROR_REGISTRY_ERROR,
                                 "registry %s: a bearer challenge without a realm to ask for a token",
                                 s->ref.registry);
        if (service)
                es = curl_api.easy_escape(s->easy, service, 0);
        if (scope)
                esc = curl_api.easy_escape(s->easy, scope, 0);
        r = asprintf(&url, "%s%s%s%s%s%s", realm, strchr(realm, '?') ? "&" : "?", es ? "service=" : "",
                     es ?: "", esc ? (es ? "&scope=" : "scope=") : "", esc ?: "");
        curl_api.free(es);
        curl_api.free(esc);
        if (r < 0)
                return error_oom(reterr);
        r = request(s, url, "application/json", TOKEN_ANSWER_MAX, true, NULL, &a, reterr);
        if (r < 0)
                return r;
        if (a.status == 401 || a.status == 403)
                return error_set(reterr, EACCES, ERROR_REGISTRY_AUTH_FAILED,
                                 "registry %s: its token service refused %s (%ld)", s->ref.registry,
                                 s->o->registry && s->o->registry->username ? "the credentials"
                                                                            : "an anonymous request",
                                 a.status);
        if (a.status != 200)
                return error_set(reterr, EPROTO, ERROR_REGISTRY_ERROR,
                                 "registry %s: its token service answered %ld", s->ref.registry, a.status);
        j = json_loadb(a.body.data ?: "", a.body.size, 0, NULL);
        t = json_object_get(j, "token");
        if (!json_is_string(t))
                t = json_object_get(j, "access_token");
        if (!json_is_string(t) || json_string_length(t) == 0) {
                json_decref(j);
                return error_set(reterr, EPROTO, ERROR_REGISTRY_ERROR,
                                 "registry %s: its token service gave no token", s->ref.registry);
        }
        free(s->bearer);
        s->bearer = strdup(json_string_value(t));
        json_decref(j);
        return s->bearer ? 0 : error_oom(reterr);
}

/* One exchange at url, authenticating as the registry asks (basic, or a bearer token from its service). */
static int exchange(OciSession *s, const char *url, const char *accept, size_t max, const OciSend *send,
                    OciAnswer *a, Error *reterr) {
        const OciRegistry *reg = s->o->registry;
        int r;

        for (int attempt = 0;; attempt++) {
                r = request_paced(s, url, accept, max, s->basic, send, a, reterr);
                if (r < 0 || a->status != 401)
                        return r;
                if (attempt > 0 || !a->challenge)
                        break;
                if (strncasecmp(a->challenge, "Bearer ", 7) == 0) {
                        s->basic = false;
                        r = token_get(s, a->challenge + 7, reterr);
                        if (r < 0)
                                return r;
                } else if (strncasecmp(a->challenge, "Basic", 5) == 0 && reg && reg->username)
                        s->basic = true;
                else
                        break;
        }
        return error_set(reterr, EACCES, ERROR_REGISTRY_AUTH_FAILED, "registry %s refused %s (401)",
                         s->ref.registry,
                         reg && (reg->username || reg->token)
                                 ? "the credentials of the registries file"
                                 : "an anonymous request: give its credentials in the registries file");
}

static const char *scheme(const OciSession *s) {
        return s->o->registry && s->o->registry->plain_http ? "http" : "https";
}

int oci_get(OciSession *s, const char *what, const char *accept, size_t max, OciAnswer *a, Error *reterr) {
        _cleanup_free_ char *url = NULL;

        if (asprintf(&url, "%s://%s/v2/%s/%s", scheme(s), s->ref.registry, s->ref.repository, what) < 0)
                return error_oom(reterr);
        return exchange(s, url, accept, max, NULL, a, reterr);
}

int oci_send(OciSession *s, const char *what, const OciSend *send, size_t max, OciAnswer *a, Error *reterr) {
        _cleanup_free_ char *url = NULL;
        OciSend own = *send;
        const char *rest;
        int r;

        if ((rest = startswith(what, "https://")) || (rest = startswith(what, "http://"))) {
                /* an upload URL on another host (a storage endpoint) gets no credentials of the
                 * registry's */
                size_t n = strlen(s->ref.registry);
                own.anonymous =
                        !(strncmp(rest, s->ref.registry, n) == 0 && (rest[n] == '/' || rest[n] == 0));
                send = &own;
                r = (url = strdup(what)) ? 0 : -ENOMEM;
        } else if (what[0] == '/')
                r = asprintf(&url, "%s://%s%s", scheme(s), s->ref.registry, what);
        else
                r = asprintf(&url, "%s://%s/v2/%s/%s", scheme(s), s->ref.registry, s->ref.repository, what);
        if (r < 0) {
                url = NULL;
                return error_oom(reterr);
        }
        return exchange(s, url, NULL, max, send, a, reterr);
}

int oci_answer_check(OciSession *s, const OciAnswer *a, const char *what, const char *digest,
                     Error *reterr) {
        char got[SHA256_DIGEST_STRING_MAX];

        if (a->status == 404)
                return error_set(reterr, ENOENT, ERROR_IMAGE_NOT_FOUND, "registry %s has no %s in %s",
                                 s->ref.registry, what, s->ref.repository);
        if (a->status == 403)
                return error_set(reterr, EACCES, ERROR_REGISTRY_AUTH_FAILED,
                                 "registry %s: %s in %s is forbidden (403)", s->ref.registry, what,
                                 s->ref.repository);
        if (a->status == 429 || a->status == 503)
                return error_set(reterr, EAGAIN, ERROR_REGISTRY_ERROR,
                                 "registry %s was busy (%ld) for %s in %s for %d s: asked again later",
                                 s->ref.registry, a->status, what, s->ref.repository,
                                 OCI_RETRY_AFTER_MAX_SEC);
        if (a->status != 200)
                return error_set(reterr, EPROTO, ERROR_REGISTRY_ERROR,
                                 "registry %s answered %ld for %s in %s", s->ref.registry, a->status, what,
                                 s->ref.repository);
        if (!digest)
                return 0;
        sha256_digest_string(a->body.data ?: "", a->body.size, got);
        if (!streq(got, digest))
                return error_set(
                        reterr, EBADMSG, ERROR_IMAGE_DIGEST_MISMATCH,
                        "registry %s: %s in %s has digest %s, not %s: its bytes are not what was named",
                        s->ref.registry, what, s->ref.repository, got, digest);
        return 0;
}
