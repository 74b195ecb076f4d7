/* registries.c: the registries file, credentials and trust per registry (oci.h). */
#include <jansson.h>
#include <string.h>

#include "fileio.h"
#include "oci-internal.h"

struct OciRegistries {
        OciRegistry *v;
        size_t n;
};

#define REGISTRIES_FILE_MAX (1024 * 1024)

void oci_registry_done(OciRegistry *r) {
        free(r->host);
        free(r->username);
        if (r->password)
                explicit_bzero(r->password, strlen(r->password));
        free(r->password);
        if (r->token)
                explicit_bzero(r->token, strlen(r->token));
        free(r->token);
        free(r->ca_file);
}

OciRegistries *oci_registries_free(OciRegistries *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n; i++)
                oci_registry_done(&r->v[i]);
        free(r->v);
        free(r);
        return NULL;
}

static int string_field(json_t *e, const char *key, char **ret, const char *path, const char *host,
                        Error *reterr) {
        json_t *v = json_object_get(e, key);

        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v) || json_string_length(v) == 0)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: registry %s: \"%s\" must be a string", path, host, key);
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

static int registry_parse(const char *path, const char *host, json_t *e, OciRegistry *r, Error *reterr) {
        static const char *const keys[] = { "username", "password",   "password_file",   "token",
                                            "ca_file",  "plain_http", "pulls_per_second" };
        _cleanup_free_ char *password_file = NULL;
        const char *key;
        json_t *v;
        OciRef probe;
        char ref[300];

        snprintf(ref, sizeof(ref), OCI_REF_PREFIX "%s/x:x", host);
        if (oci_ref_parse(ref, &probe, NULL) < 0 || !streq(probe.registry, host))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: \"%s\" is not a registry (host[:port])", path, host);
        if (!json_is_object(e))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: registry %s: expected an object",
                                 path, host);
        json_object_foreach (e, key, v) {
                bool known = false;
                for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                        known = known || streq(keys[i], key);
                if (!known)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "%s: registry %s: unknown key \"%s\"", path, host, key);
        }
        if (!(r->host = strdup(host)) || string_field(e, "username", &r->username, path, host, reterr) < 0 ||
            string_field(e, "password", &r->password, path, host, reterr) < 0 ||
            string_field(e, "password_file", &password_file, path, host, reterr) < 0 ||
            string_field(e, "token", &r->token, path, host, reterr) < 0 ||
            string_field(e, "ca_file", &r->ca_file, path, host, reterr) < 0)
                return error_oom(reterr);
        v = json_object_get(e, "plain_http");
        if (v && !json_is_boolean(v))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: registry %s: \"plain_http\" is true or false", path, host);
        r->plain_http = json_is_true(v);
        v = json_object_get(e, "pulls_per_second");
        if (v && (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100000))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: registry %s: \"pulls_per_second\" is a count from 1 to 100000", path,
                                 host);
        r->pulls_per_second = v ? (unsigned) json_integer_value(v) : 0;
        if (password_file) {
                size_t size;
                int k;
                if (r->password)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "%s: registry %s: \"password\" or \"password_file\", not both",
                                         path, host);
                k = read_regular_file(password_file, 4096, &r->password, &size);
                if (k < 0)
                        return error_set(reterr, -k, ERROR_INVALID_VALUE,
                                         "%s: registry %s: cannot read %s: %s", path, host, password_file,
                                         strerror(-k));
                while (size > 0 && (r->password[size - 1] == '\n' || r->password[size - 1] == '\r'))
                        r->password[--size] = 0;
        }
        if (!!r->username != !!r->password)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: registry %s: \"username\" and a password go together", path, host);
        if (r->token && r->username)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: registry %s: a \"token\" or a username and password, not both", path,
                                 host);
        return 0;
}

int oci_registries_load(const char *path, bool required, OciRegistries **ret, Error *reterr) {
        _cleanup_free_ char *text = NULL;
        json_error_t jerr;
        json_t *j, *regs;
        OciRegistries *r;
        const char *host;
        json_t *e;
        size_t size;
        int k;

        k = read_regular_file(path, REGISTRIES_FILE_MAX, &text, &size);
        if (k == -ENOENT && !required) {
                *ret = NULL;
                return 0;
        }
        if (k < 0)
                return error_set(reterr, -k, ERROR_INVALID_VALUE, "cannot read the registries file %s: %s",
                                 path, strerror(-k));
        j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
        explicit_bzero(text, size);
        if (!j)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: line %d: %s", path, jerr.line,
                                 jerr.text);
        regs = json_object_get(j, "registries");
        if (!json_is_object(j) || json_object_size(j) != 1 || !json_is_object(regs)) {
                json_decref(j);
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: expected {\"registries\": {\"HOST[:PORT]\": {...}}}", path);
        }
        r = calloc(1, sizeof(*r));
        if (r)
                r->v = calloc(json_object_size(regs) + 1, sizeof(OciRegistry));
        if (!r || !r->v) {
                json_decref(j);
                oci_registries_free(r);
                return error_oom(reterr);
        }
        json_object_foreach (regs, host, e) {
                k = registry_parse(path, host, e, &r->v[r->n++], reterr);
                if (k < 0) {
                        json_decref(j);
                        oci_registries_free(r);
                        return error_set(reterr, -k, ERROR_INTERNAL_ERROR, "out of memory");
                }
        }
        json_decref(j);
        *ret = r;
        return 0;
}

static int dup_or_null(const char *s, char **ret) {
        *ret = NULL;
        return s && !(*ret = strdup(s)) ? -ENOMEM : 0;
}

int oci_registry_copy(const OciRegistry *from, OciRegistry *to) {
        *to = (OciRegistry){ .plain_http = from->plain_http, .pulls_per_second = from->pulls_per_second };
        if (dup_or_null(from->host, &to->host) < 0 || dup_or_null(from->username, &to->username) < 0 ||
            dup_or_null(from->password, &to->password) < 0 || dup_or_null(from->token, &to->token) < 0 ||
            dup_or_null(from->ca_file, &to->ca_file) < 0) {
                oci_registry_done(to);
                return -ENOMEM;
        }
        return 0;
}

unsigned oci_pull_spread_msec(const OciRegistry *registry, uint64_t nodes) {
        unsigned rate = registry && registry->pulls_per_second ? registry->pulls_per_second
                                                               : OCI_PULLS_PER_SECOND_DEFAULT;
        uint64_t share = MAX((uint64_t) rate * OCI_PULLS_SHARE_PERCENT / 100, 1u);

        if (nodes <= share)
                return 0;
        return (unsigned) MIN(nodes * 1000 / share, 3600 * 1000ULL);
}

const OciRegistry *oci_registries_find(const OciRegistries *r, const char *host) {
        for (size_t i = 0; r && i < r->n; i++)
                if (streq(r->v[i].host, host))
                        return &r->v[i];
        return NULL;
}

size_t oci_registries_count(const OciRegistries *r) {
        return r ? r->n : 0;
}
