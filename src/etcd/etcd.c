/* etcd.c: etcd's v3 gateway bodies and answers (keys and values base64, revisions as decimal strings). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl.h"
#include "etcd.h"

int etcd_b64_encode(const void *data, size_t size, char **ret) {
        gnutls_datum_t in = { .data = (unsigned char *) data, .size = (unsigned) size }, out = { 0 };
        char *s;

        if (size == 0)
                return (*ret = strdup("")) ? 0 : -ENOMEM;
        if (dl_load_curl(NULL) < 0)
                return -ENOENT;
        if (size > UINT32_MAX / 2 || gnutls_api.base64_encode2(&in, &out) < 0)
                return -ENOMEM;
        s = malloc(out.size + 1);
        if (s) {
                memcpy(s, out.data, out.size);
                s[out.size] = 0;
        }
        (*gnutls_api.free)(out.data);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int etcd_b64_decode(const char *s, char **ret, size_t *ret_size) {
        size_t n = strlen(s);
        gnutls_datum_t in = { .data = (unsigned char *) s, .size = (unsigned) n }, out = { 0 };
        char *v;

        if (n > UINT32_MAX / 2)
                return -EINVAL;
        if (dl_load_curl(NULL) < 0)
                return -ENOENT;
        if (n > 0 && gnutls_api.base64_decode2(&in, &out) < 0)
                return -EINVAL;
        v = malloc(out.size + 1);
        if (v) {
                if (out.size)
                        memcpy(v, out.data, out.size);
                v[out.size] = 0;
        }
        (*gnutls_api.free)(out.data);
        if (!v)
                return -ENOMEM;
        *ret = v;
        *ret_size = out.size;
        return 0;
}

char *etcd_prefix_end(const char *prefix) {
        char *end = strdup(prefix);
        size_t n = end ? strlen(end) : 0;

        /* the key after every key with the prefix: its last byte below 0xff incremented */
        while (n > 0) {
                if ((unsigned char) end[n - 1] < 0xff) {
                        end[n - 1]++;
                        end[n] = 0;
                        return end;
                }
                n--;
        }
        free(end);
        return strdup("\0"); /* every key: etcd's "\0" range end */
}

void etcd_kvs_free(EtcdKv *v, size_t n) {
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].key);
                free(v[i].value);
        }
        free(v);
}

static json_t *b64_string(const void *data, size_t size) {
        char *s = NULL;
        json_t *j;

        if (etcd_b64_encode(data, size, &s) < 0)
                return NULL;
        j = json_string(s);
        free(s);
        return j;
}

static json_t *key_body(const char *key, bool prefix) {
        json_t *j = json_object();
        _cleanup_free_ char *end = prefix ? etcd_prefix_end(key) : NULL;

        if (!j || json_object_set_new(j, "key", b64_string(key, strlen(key))) < 0 ||
            (prefix && (!end || json_object_set_new(j, "range_end", b64_string(end, strlen(end))) < 0))) {
                json_decref(j);
                return NULL;
        }
        return j;
}

json_t *etcd_range_body(const char *key, bool prefix) {
        return key_body(key, prefix);
}

json_t *etcd_count_body(const char *prefix) {
        json_t *j = key_body(prefix, true);

        if (j && json_object_set_new(j, "count_only", json_true()) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

uint64_t etcd_range_count(json_t *range_answer) {
        json_t *c = json_object_get(range_answer, "count");

        return json_is_string(c) ? strtoull(json_string_value(c), NULL, 10) : 0; /* (0 is left out) */
}

json_t *etcd_delete_body(const char *key, bool prefix) {
        return key_body(key, prefix);
}

json_t *etcd_put_body(const char *key, const void *value, size_t size, uint64_t lease) {
        json_t *j = key_body(key, false);

        if (!j || json_object_set_new(j, "value", b64_string(value, size)) < 0 ||
            (lease && json_object_set_new(j, "lease", json_sprintf("%" PRIu64, lease)) < 0)) {
                json_decref(j);
                return NULL;
        }
        return j;
}

json_t *etcd_authenticate_body(const char *user, const char *password) {
        return json_pack("{s:s,s:s}", "name", user, "password", password);
}

int etcd_answer_token(json_t *answer, char **token, Error *reterr) {
        const char *t = json_string_value(json_object_get(answer, "token"));

        free(*token);
        *token = t && *t ? strdup(t) : NULL;
        if (!*token)
                return t && *t ? error_oom(reterr)
                               : error_set(reterr, EPROTO, ERROR_ETCD_ERROR,
                                           "etcd gave no token (is its authentication on?)");
        return 0;
}

json_t *etcd_write_probe_body(const char *key) {
        json_t *put = etcd_put_body(key, "", 0, 0), *cmp = key_body(key, false);

        if (!put || !cmp || json_object_set_new(cmp, "target", json_string("VERSION")) < 0 ||
            json_object_set_new(cmp, "result", json_string("LESS")) < 0 ||
            json_object_set_new(cmp, "version", json_string("0")) < 0) {
                json_decref(put);
                json_decref(cmp);
                return NULL;
        }
        /* a key's version is never below 0: the put is never made, but etcd checks it is permitted */
        return json_pack("{s:[o],s:[{s:o}]}", "compare", cmp, "success", "request_put", put);
}

json_t *etcd_watch_body(const char *key, bool prefix, uint64_t start_revision, uint64_t watch_id) {
        json_t *req = key_body(key, prefix);

        if (!req ||
            json_object_set_new(req, "start_revision", json_sprintf("%" PRIu64, start_revision)) < 0 ||
            json_object_set_new(req, "progress_notify", json_true()) < 0 ||
            json_object_set_new(req, "watch_id", json_sprintf("%" PRIu64, watch_id)) < 0) {
                json_decref(req);
                return NULL;
        }
        return json_pack("{s:o}", "create_request", req);
}

/* The gateway writes int64 fields as decimal strings (and omits zeros). */
static uint64_t number(json_t *j) {
        if (json_is_integer(j))
                return json_integer_value(j) > 0 ? (uint64_t) json_integer_value(j) : 0;
        if (json_is_string(j)) {
                char *end;
                unsigned long long v = strtoull(json_string_value(j), &end, 10);
                return *end ? 0 : (uint64_t) v;
        }
        return 0;
}

uint64_t etcd_answer_revision(json_t *answer) {
        return number(json_object_get(json_object_get(answer, "header"), "revision"));
}

static int kv_parse(json_t *j, EtcdKv *ret, Error *reterr) {
        const char *key = json_string_value(json_object_get(j, "key"));
        const char *value = json_string_value(json_object_get(j, "value"));
        EtcdKv kv = { 0 };
        size_t n;

        if (!key || etcd_b64_decode(key, &kv.key, &n) < 0)
                return error_set(reterr, EPROTO, ERROR_ETCD_ERROR, "etcd answered a key that is not base64");
        kv.key_size = n;
        if (etcd_b64_decode(value ?: "", &kv.value, &kv.value_size) < 0) {
                free(kv.key);
                return error_set(reterr, EPROTO, ERROR_ETCD_ERROR,
                                 "etcd answered a value that is not base64");
        }
        kv.create_revision = number(json_object_get(j, "create_revision"));
        kv.mod_revision = number(json_object_get(j, "mod_revision"));
        kv.lease = number(json_object_get(j, "lease"));
        *ret = kv;
        return 0;
}

int etcd_range_parse(json_t *answer, EtcdKv **ret, size_t *ret_n, uint64_t *ret_revision, Error *reterr) {
        json_t *kvs = json_object_get(answer, "kvs");
        size_t n = json_array_size(kvs);
        EtcdKv *v = calloc(n + 1, sizeof(EtcdKv));

        if (!v)
                return error_oom(reterr);
        for (size_t i = 0; i < n; i++)
                if (kv_parse(json_array_get(kvs, i), &v[i], reterr) < 0) {
                        etcd_kvs_free(v, i);
                        return -EPROTO;
                }
        *ret = v;
        *ret_n = n;
        if (ret_revision)
                *ret_revision = etcd_answer_revision(answer);
        return 0;
}

int etcd_watch_parse(json_t *msg, EtcdWatchMessage *ret, Error *reterr) {
        json_t *result = json_object_get(msg, "result"), *events;
        EtcdWatchMessage m = { 0 };
        size_t n;

        if (!result) {
                json_t *error = json_object_get(msg, "error");
                return error_set(reterr, EPROTO, ERROR_ETCD_ERROR, "watch: %s",
                                 json_string_value(json_object_get(error, "message"))
                                         ?: "an answer without a result");
        }
        m.revision = etcd_answer_revision(result);
        m.watch_id = number(json_object_get(result, "watch_id"));
        m.created = json_is_true(json_object_get(result, "created"));
        m.canceled = json_is_true(json_object_get(result, "canceled"));
        m.compact_revision = number(json_object_get(result, "compact_revision"));
        if (json_is_string(json_object_get(result, "cancel_reason")))
                m.cancel_reason = strdup(json_string_value(json_object_get(result, "cancel_reason")));
        events = json_object_get(result, "events");
        n = json_array_size(events);
        m.events = calloc(n + 1, sizeof(EtcdKv));
        m.deleted = calloc(n + 1, sizeof(bool));
        if (!m.events || !m.deleted) {
                etcd_watch_message_done(&m);
                return error_oom(reterr);
        }
        for (size_t i = 0; i < n; i++) {
                json_t *ev = json_array_get(events, i);
                if (kv_parse(json_object_get(ev, "kv"), &m.events[i], reterr) < 0) {
                        etcd_watch_message_done(&m);
                        return -EPROTO;
                }
                m.n_events++;
                m.deleted[i] = json_is_string(json_object_get(ev, "type")) &&
                               streq(json_string_value(json_object_get(ev, "type")), "DELETE");
        }
        *ret = m;
        return 0;
}

void etcd_watch_message_done(EtcdWatchMessage *m) {
        etcd_kvs_free(m->events, m->n_events);
        free(m->deleted);
        free(m->cancel_reason);
        *m = (EtcdWatchMessage){ 0 };
}

int etcd_answer_error(long http_status, json_t *answer, Error *reterr) {
        const char *message = json_string_value(json_object_get(answer, "message"))
                                      ?: json_string_value(json_object_get(answer, "error"));
        json_int_t code = json_integer_value(json_object_get(answer, "code"));

        /* gRPC's codes: 7 permission denied; 16 unauthenticated (a token etcd no longer knows); 3 with
         * these messages: a user or password it does not know, no token where it wants one, or a token
         * older than etcd's users and roles (a JWT token carries the revision of the auth store it was
         * given at, and every user or role made since, as clsctl fleet rbac does for each new node, makes
         * it old: a new login, as etcd's own client does) */
        if (message && code == 7)
                return error_set(reterr, EACCES, ERROR_ETCD_PERMISSION_DENIED, "etcd: %s (HTTP %ld)",
                                 message, http_status);
        if (message &&
            (code == 16 || http_status == 401 || strstr(message, "user name is empty") ||
             strstr(message, "invalid auth token") || strstr(message, "revision of auth store is old")))
                return error_set(reterr, EKEYEXPIRED, ERROR_ETCD_TOKEN_INVALID, "etcd: %s (HTTP %ld)",
                                 message, http_status);
        if (message && strstr(message, "authentication failed"))
                return error_set(reterr, EACCES, ERROR_ETCD_AUTH_FAILED, "etcd: %s (HTTP %ld)", message,
                                 http_status);
        if (message && strstr(message, "requested lease not found"))
                return error_set(reterr, ENOENT, ERROR_ETCD_LEASE_NOT_FOUND, "etcd: %s (HTTP %ld)", message,
                                 http_status);
        /* gRPC's 4 deadline exceeded ("request timed out"), 8 resource exhausted ("too many requests"),
         * 14 unavailable (no leader, leader changed), or the gateway's 429 and 503: etcd is there and
         * busy: a later try of the same request, never a new connection (that is more load). etcd 3.4's
         * gateway also answers its server's own busy errors as HTTP 500 with gRPC's 2 (unknown): known
         * by their message. */
        if (code == 4 || code == 8 || code == 14 || http_status == 429 || http_status == 503 ||
            (message && (strstr(message, "too many requests") || strstr(message, "request timed out") ||
                         strstr(message, "leader changed") || strstr(message, "no leader") ||
                         strstr(message, "server is likely overloaded"))))
                return error_set(reterr, EAGAIN, ERROR_ETCD_OVERLOADED, "etcd: %s (HTTP %ld)",
                                 strna(message), http_status);
        if (message)
                return error_set(reterr, EPROTO, ERROR_ETCD_ERROR, "etcd: %s (HTTP %ld)", message,
                                 http_status);
        return error_set(reterr, EPROTO, ERROR_ETCD_ERROR, "etcd answered HTTP %ld without an error message",
                         http_status);
}

size_t etcd_urls_split(const char *urls, char ***ret) {
        _cleanup_free_ char *copy = strdup(urls ?: "");
        char **v = NULL, *save = NULL;
        size_t n = 0;

        if (!copy)
                return 0;
        for (char *u = strtok_r(copy, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
                char **nv = realloc(v, (n + 2) * sizeof(char *));
                if (!nv)
                        break;
                v = nv;
                /* without a trailing "/": paths are appended */
                size_t len = strlen(u);
                while (len > 0 && u[len - 1] == '/')
                        u[--len] = 0;
                if (!(v[n] = strdup(u)))
                        break;
                v[++n] = NULL;
        }
        *ret = v;
        return n;
}

const char *etcd_transfer_error(const EtcdBuffer *b, const char *curl_error, char *buf, size_t size) {
        if (!b->over)
                return curl_error;
        snprintf(buf, size, "etcd's answer is longer than %zu MiB, the most clsd reads; not read on",
                 b->over >> 20);
        return buf;
}

bool etcd_buffer_append(EtcdBuffer *b, const void *p, size_t n, size_t max) {
        char *nd;

        if (b->size + n > max) {
                b->over = max;
                return false;
        }
        nd = realloc(b->data, b->size + n + 1);
        if (!nd)
                return false;
        memcpy(nd + b->size, p, n);
        b->data = nd;
        b->size += n;
        b->data[b->size] = 0;
        return true;
}
