/* access.c: the access file, and the role each identity has. */
#include "access.h"

#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <pwd.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "store.h"

#define ACCESS_FILE_MAX (1024 * 1024)

typedef enum GrantKind {
        GRANT_USER,
        GRANT_GROUP,
        GRANT_TOKEN,
        GRANT_SUBJECT,
        GRANT_SAN,
} GrantKind;

typedef struct Grant {
        Role role;
        GrantKind kind;
        unsigned id; /* a uid or gid */
        char *name; /* a token's name; a subject; a SAN */
        unsigned char hash[crypto_hash_sha256_BYTES]; /* a token's */
} Grant;

struct AccessPolicy {
        Grant *grants;
        size_t n;
};

const char *role_to_string(Role r) {
        return r == ROLE_OPERATOR ? "operator" : r == ROLE_READER ? "reader" : "none";
}

AccessPolicy *access_policy_free(AccessPolicy *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n; i++)
                free(p->grants[i].name);
        free(p->grants);
        free(p);
        return NULL;
}

/* A user or group: a name the system knows, or a number. */
static int id_of(json_t *v, bool group, unsigned *ret) {
        if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < 0xffffffff) {
                *ret = (unsigned) json_integer_value(v);
                return 0;
        }
        if (!json_is_string(v))
                return -EINVAL;
        if (group) {
                struct group *g = getgrnam(json_string_value(v));
                if (!g)
                        return -ENOENT;
                *ret = g->gr_gid;
        } else {
                struct passwd *u = getpwnam(json_string_value(v));
                if (!u)
                        return -ENOENT;
                *ret = u->pw_uid;
        }
        return 0;
}

static int grant_parse(json_t *o, size_t i, Grant *g, Error *reterr) {
        static const char *const kinds[] = { "user", "group", "token", "subject", "san" };
        const char *key, *role;
        json_t *v, *which = NULL;
        int r;

        if (!json_is_object(o))
                return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG, "grants[%zu]: expected an object", i);
        json_object_foreach (o, key, v) {
                bool known = streq(key, "role") || streq(key, "token_sha256");
                for (size_t k = 0; k < ELEMENTSOF(kinds); k++)
                        if (streq(key, kinds[k])) {
                                if (which)
                                        return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG,
                                                         "grants[%zu]: one of user, group, token, subject, "
                                                         "san per grant",
                                                         i);
                                which = v;
                                g->kind = (GrantKind) k;
                                known = true;
                        }
                if (!known)
                        return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG,
                                         "grants[%zu]: unknown field \"%s\"", i, key);
        }
        role = json_string_value(json_object_get(o, "role"));
        if (!role || (!streq(role, "reader") && !streq(role, "operator")))
                return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG,
                                 "grants[%zu].role: expected \"reader\" or \"operator\"", i);
        g->role = streq(role, "operator") ? ROLE_OPERATOR : ROLE_READER;
        if (!which)
                return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG,
                                 "grants[%zu]: expected one of user, group, token, subject, san", i);
        if ((g->kind == GRANT_TOKEN) != !!json_object_get(o, "token_sha256"))
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_CONFIG,
                        "grants[%zu]: a token is named by \"token\" and given by its \"token_sha256\" "
                        "(and only a token has one)",
                        i);
        if (g->kind == GRANT_USER || g->kind == GRANT_GROUP) {
                r = id_of(which, g->kind == GRANT_GROUP, &g->id);
                if (r < 0)
                        return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG, "grants[%zu].%s: %s", i,
                                         kinds[g->kind],
                                         r == -ENOENT ? "no such name on this host"
                                                      : "expected a name or number");
                return 0;
        }
        if (g->kind == GRANT_TOKEN) {
                const char *h = json_string_value(json_object_get(o, "token_sha256"));
                size_t got = 0;
                if (!h || strncmp(h, "sha256:", 7) != 0 || strlen(h) != 7 + 64 ||
                    sodium_hex2bin(g->hash, sizeof(g->hash), h + 7, 64, NULL, &got, NULL) != 0 ||
                    got != sizeof(g->hash))
                        return error_set(
                                reterr, EINVAL, ERROR_INVALID_CONFIG,
                                "grants[%zu].token_sha256: expected \"sha256:<64 hex>\" of the token "
                                "(printf %%s TOKEN | sha256sum)",
                                i);
        }
        if (!json_is_string(which) || !json_string_length(which))
                return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG, "grants[%zu].%s: expected a string",
                                 i, kinds[g->kind]);
        if (!(g->name = strdup(json_string_value(which))))
                return error_oom(reterr);
        return 0;
}

int access_policy_load(const char *path, AccessPolicy **ret, Error *reterr) {
        _cleanup_free_ char *text = NULL;
        AccessPolicy *p;
        json_error_t jerr;
        json_t *j, *grants;
        const char *key;
        json_t *v;
        struct stat st;
        size_t size;
        int r;

        r = read_regular_file(path, ACCESS_FILE_MAX, &text, &size);
        if (r < 0)
                return error_set(reterr, r, ERROR_INVALID_CONFIG, "--access-file %s: %s", path,
                                 strerror(-r));
        if (stat(path, &st) == 0 && (st.st_mode & S_IWOTH))
                return error_set(reterr, EPERM, ERROR_INVALID_CONFIG,
                                 "--access-file %s: every user may write it (mode %04o); chmod o-w it", path,
                                 (unsigned) st.st_mode & 07777);
        j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
        /* what jansson quotes of the text is not said: the file is read as root, whatever it is */
        if (!j) {
                char why[JSON_ERROR_TEXT_LENGTH];
                return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG,
                                 "--access-file %s:%d:%d: not JSON: %s", path, jerr.line, jerr.column,
                                 json_error_reason(&jerr, why, sizeof(why)));
        }
        json_object_foreach (j, key, v)
                if (!streq(key, "grants")) {
                        r = error_set(reterr, EINVAL, ERROR_INVALID_CONFIG,
                                      "--access-file %s: unknown field \"%s\"", path, key);
                        json_decref(j);
                        return r;
                }
        grants = json_object_get(j, "grants");
        if (!json_is_array(grants)) {
                json_decref(j);
                return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG,
                                 "--access-file %s: expected {\"grants\": [ … ]}", path);
        }
        if (!(p = calloc(1, sizeof(*p))) ||
            !(p->grants = calloc(json_array_size(grants) + 1, sizeof(Grant)))) {
                free(p);
                json_decref(j);
                return error_oom(reterr);
        }
        for (size_t i = 0; i < json_array_size(grants); i++) {
                _cleanup_error_ Error e = ERROR_NULL;
                if (grant_parse(json_array_get(grants, i), i, &p->grants[p->n], &e) < 0) {
                        free(p->grants[p->n].name);
                        access_policy_free(p);
                        json_decref(j);
                        return error_set(reterr, e.error, e.code, "--access-file %s: %s", path, e.message);
                }
                p->n++;
        }
        json_decref(j);
        *ret = p;
        return 0;
}

static Role better(Role a, Role b) {
        return a > b ? a : b;
}

Role access_role_of_unix(const AccessPolicy *p, uid_t uid, const gid_t *gids, size_t n_gids) {
        Role role = ROLE_NONE;

        if (uid == 0)
                return ROLE_OPERATOR;
        for (size_t i = 0; p && i < p->n; i++) {
                const Grant *g = &p->grants[i];
                if (g->kind == GRANT_USER && g->id == uid)
                        role = better(role, g->role);
                for (size_t k = 0; g->kind == GRANT_GROUP && k < n_gids; k++)
                        if (g->id == gids[k])
                                role = better(role, g->role);
        }
        return role;
}

Role access_role_of_token(const AccessPolicy *p, const char *token, const char **ret_name) {
        unsigned char h[crypto_hash_sha256_BYTES];

        crypto_hash_sha256(h, (const unsigned char *) token, strlen(token));
        for (size_t i = 0; p && i < p->n; i++)
                if (p->grants[i].kind == GRANT_TOKEN &&
                    sodium_memcmp(h, p->grants[i].hash, sizeof(h)) == 0) {
                        *ret_name = p->grants[i].name;
                        return p->grants[i].role;
                }
        return ROLE_NONE;
}

Role access_role_of_certificate(const AccessPolicy *p, const char *subject, char *const *sans) {
        Role role = ROLE_NONE;

        for (size_t i = 0; p && i < p->n; i++) {
                const Grant *g = &p->grants[i];
                if (g->kind == GRANT_SUBJECT && subject && streq(g->name, subject))
                        role = better(role, g->role);
                for (char *const *s = sans; g->kind == GRANT_SAN && s && *s; s++)
                        /* host names are case-insensitive; the rest is compared as it is */
                        if (startswith(*s, "DNS:") ? strcasecmp(g->name, *s) == 0 : streq(g->name, *s))
                                role = better(role, g->role);
        }
        return role;
}
