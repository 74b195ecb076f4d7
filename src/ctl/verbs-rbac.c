/* verbs-rbac.c: clsctl fleet rbac: the etcd roles and users of least privilege for a fleet. Each node is
 * an etcd user whose one role reads the fleet's intent and writes only its own keys; operators' role
 * writes everything under the prefix. Printed (what would be made), or made (--apply), each node's
 * password generated and written to --out DIR/USER.password (0600). An existing role or user is made
 * exactly so: permissions and roles beyond the plan are taken away, the password set anew. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "etcd.h"
#include "fleet-keys.h"
#include "output.h"

#define OPERATOR_ROLE "clsd-operator"
#define NODE_ROLE "clsd-node-"

/* One permission of a role: a key, or every key under it (prefix). */
typedef struct Perm {
        const char *type; /* etcd's: READ, WRITE, READWRITE */
        char *key;
        bool prefix;
} Perm;

/* A node's: the fleet's intent read, its own keys written. The rollouts' keys are written by every node
 * (the waves are judged by the nodes themselves; etcd's permissions are by key prefix): a node can
 * disturb a rollout, never what a policy or an object says. A fleet diff's requests are read, its own
 * answers written (diff-answers/NODE/). */
#define NODE_PERMS_MAX 12
static int node_perms(const char *prefix, const char *node, Perm v[NODE_PERMS_MAX]) {
        static const struct {
                const char *type, *kind;
                bool own, prefix;
        } plan[] = {
                { "READ", "policies", false, true },
                { "READ", "objects", false, true },
                { "READ", "nodes", false, true },
                { "READWRITE", "nodes", true, false },
                { "READWRITE", "status", true, true },
                { "READWRITE", "rollouts", false, true },
                { "READWRITE", "rollout-nodes", false, true },
                { "READ", "diffs", false, true },
                { "READWRITE", "diff-answers", true, true },
        };
        size_t n = sizeof(plan) / sizeof(plan[0]);

        for (size_t i = 0; i < n; i++) {
                v[i] = (Perm){ .type = plan[i].type, .prefix = plan[i].prefix };
                v[i].key = fleet_key(prefix, plan[i].kind, plan[i].own ? node : NULL,
                                     plan[i].own && plan[i].prefix ? "" : NULL);
                if (!v[i].key)
                        return -ENOMEM;
        }
        return (int) n;
}

static void perms_free(Perm *v, int n) {
        for (int i = 0; i < n; i++)
                free(v[i].key);
}

/* The names under prefix: a node's user is its name (with "@PREFIX" under another prefix than the
 * default, so that fleets on one etcd do not share users). */
static char *name_for(const char *prefix, const char *base, const char *node) {
        char *s = NULL;
        bool other = !streq(prefix, ETCD_PREFIX_DEFAULT);

        if (asprintf(&s, "%s%s%s%s", base, node ?: "", other ? "@" : "", other ? prefix : "") < 0)
                return NULL;
        return s;
}

static json_t *perm_json(const Perm *p) {
        return json_pack("{s:s,s:s,s:b}", "permission", p->type, "key", p->key, "prefix", p->prefix);
}

static json_t *perm_body(const char *role, const Perm *p) {
        _cleanup_free_ char *end = p->prefix ? etcd_prefix_end(p->key) : NULL, *key64 = NULL, *end64 = NULL;
        json_t *perm;

        if ((p->prefix && !end) || etcd_b64_encode(p->key, strlen(p->key), &key64) < 0 ||
            (end && etcd_b64_encode(end, strlen(end), &end64) < 0))
                return NULL;
        perm = json_pack("{s:s,s:s}", "permType", p->type, "key", key64);
        if (perm && end64 && json_object_set_new(perm, "range_end", json_string(end64)) < 0) {
                json_decref(perm);
                return NULL;
        }
        return perm ? json_pack("{s:s,s:o}", "name", role, "perm", perm) : NULL;
}

/* A call whose "already exists" answer is no failure. */
static int call_may_exist(EtcdClient *ec, const char *path, json_t *body) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        if (!body)
                return ctl_oom();
        r = etcd_call(ec, path, body, &answer, &e);
        if (r < 0 && e.message && strstr(e.message, "already exists"))
                r = 1;
        else if (r < 0)
                r = ctl_error(r, "%s", e.message);
        return r;
}

static bool perm_wanted(json_t *have, const Perm *v, int n) {
        const char *key64 = json_string_value(json_object_get(have, "key"));
        const char *end64 = json_string_value(json_object_get(have, "range_end"));
        const char *type = json_string_value(json_object_get(have, "permType")) ?: "READ";
        _cleanup_free_ char *key = NULL, *end = NULL;
        size_t ks = 0, es = 0;

        if (!key64 || etcd_b64_decode(key64, &key, &ks) < 0 ||
            (end64 && etcd_b64_decode(end64, &end, &es) < 0))
                return false;
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *want_end = v[i].prefix ? etcd_prefix_end(v[i].key) : NULL;
                if (streq(v[i].type, type) && streq(v[i].key, key) &&
                    (want_end ? end && streq(want_end, end) : !end))
                        return true;
        }
        return false;
}

/* The role exactly so: made, granted each permission, and any other one taken away. */
static int role_make(EtcdClient *ec, const char *role, const Perm *v, int n) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        json_t *p;
        size_t i;
        int r;

        r = call_may_exist(ec, "/v3/auth/role/add", json_pack("{s:s}", "name", role));
        if (r < 0)
                return r;
        r = fleet_call(ec, "/v3/auth/role/get", json_pack("{s:s}", "role", role), &answer);
        if (r < 0)
                return r;
        json_array_foreach (json_object_get(answer, "perm"), i, p)
                if (!perm_wanted(p, v, n)) {
                        _cleanup_(json_decrefp) json_t *a2 = NULL;
                        json_t *body =
                                json_pack("{s:s,s:O}", "role", role, "key", json_object_get(p, "key"));
                        if (body && json_object_get(p, "range_end"))
                                json_object_set(body, "range_end", json_object_get(p, "range_end"));
                        r = fleet_call(ec, "/v3/auth/role/revoke", body, &a2);
                        if (r < 0)
                                return r;
                }
        for (int k = 0; k < n; k++) {
                _cleanup_(json_decrefp) json_t *a2 = NULL;
                r = fleet_call(ec, "/v3/auth/role/grant", perm_body(role, &v[k]), &a2);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A password of 128 random bits, in hex, into DIR/USER.password (0600, written anew). */
static int password_make(const char *dir, const char *user, char out[33]) {
        unsigned char raw[16];
        _cleanup_free_ char *path = NULL, *file = strdup(user);
        int fd;

        if (!file)
                return ctl_oom();
        for (char *p = file; *p; p++)
                if (*p == '/')
                        *p = '_';
        if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
                return ctl_error(-errno, "cannot make a password: %s", strerror(errno));
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(out + 2 * i, 3, "%02x", raw[i]);
        if (asprintf(&path, "%s/%s.password", dir, file) < 0)
                return ctl_oom();
        (void) unlink(path);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || dprintf(fd, "%s\n", out) < 0 || close(fd) < 0)
                return ctl_error(-EIO, "%s: %s", path, strerror(errno));
        return 0;
}

/* The user with this role only, its password set anew. */
static int user_make(const Ctl *c, EtcdClient *ec, const char *user, const char *role) {
        _cleanup_(json_decrefp) json_t *answer = NULL, *a2 = NULL;
        char password[33];
        json_t *have;
        size_t i;
        int r;

        r = password_make(c->out_dir, user, password);
        if (r < 0)
                return r;
        r = call_may_exist(ec, "/v3/auth/user/add",
                           json_pack("{s:s,s:s}", "name", user, "password", password));
        if (r == 1)
                r = fleet_call(ec, "/v3/auth/user/changepw",
                               json_pack("{s:s,s:s}", "name", user, "password", password), &a2);
        if (r < 0)
                return r;
        r = fleet_call(ec, "/v3/auth/user/get", json_pack("{s:s}", "name", user), &answer);
        if (r < 0)
                return r;
        json_array_foreach (json_object_get(answer, "roles"), i, have)
                if (json_is_string(have) && !streq(json_string_value(have), role)) {
                        _cleanup_(json_decrefp) json_t *a3 = NULL;
                        r = fleet_call(ec, "/v3/auth/user/revoke",
                                       json_pack("{s:s,s:O}", "name", user, "role", have), &a3);
                        if (r < 0)
                                return r;
                }
        json_decref(a2);
        a2 = NULL;
        return fleet_call(ec, "/v3/auth/user/grant", json_pack("{s:s,s:s}", "user", user, "role", role),
                          &a2);
}

static void print_role(const char *role, const Perm *v, int n) {
        printf("role %s\n", role);
        for (int i = 0; i < n; i++)
                printf("  %-9s %s%s\n", v[i].type, v[i].key, v[i].prefix ? " (and every key under it)" : "");
}

int verb_fleet_rbac(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *out = json_array();
        const char *prefix = fleet_prefix_of(c);
        _cleanup_free_ char *operator_role = name_for(prefix, OPERATOR_ROLE, NULL);
        Perm all = { .type = "READWRITE", .key = (char *) prefix, .prefix = true };
        int r;

        if (!out || !operator_role)
                return ctl_oom();
        for (size_t i = 0; args[i]; i++)
                if (!fleet_node_name_valid(args[i]))
                        return ctl_error(-EINVAL,
                                         "%s: not a node name (1 to %d characters of A-Z a-z 0-9 - _ .)",
                                         args[i], FLEET_NODE_NAME_MAX);
        if (c->rbac_apply) {
                struct stat st;
                if (!c->out_dir)
                        return ctl_error(-EINVAL, "fleet rbac --apply needs --out DIR, where each user's "
                                                  "password goes");
                if (stat(c->out_dir, &st) < 0 || !S_ISDIR(st.st_mode))
                        return ctl_error(-ENOTDIR, "--out %s: not a directory", c->out_dir);
                r = fleet_client(c, &ec);
                if (r < 0)
                        return r;
                r = role_make(ec, operator_role, &all, 1);
                if (r < 0)
                        return r;
        }
        json_array_append_new(
                out, json_pack("{s:s,s:[o]}", "role", operator_role, "permissions", perm_json(&all)));
        if (!c->json && !c->quiet)
                print_role(operator_role, &all, 1);
        for (size_t i = 0; args[i]; i++) {
                _cleanup_free_ char *role = name_for(prefix, NODE_ROLE, args[i]),
                                    *user = name_for(prefix, "", args[i]);
                Perm v[NODE_PERMS_MAX];
                int n = node_perms(prefix, args[i], v);
                json_t *perms = json_array();

                if (n < 0 || !role || !user || !perms) {
                        json_decref(perms);
                        return ctl_oom();
                }
                for (int k = 0; k < n; k++)
                        json_array_append_new(perms, perm_json(&v[k]));
                json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:o}", "node", args[i], "user", user,
                                                     "role", role, "permissions", perms));
                if (!c->json) {
                        print_role(role, v, n);
                        printf("user %s: role %s (clsd --node %s --fleet-user %s --fleet-password-file "
                               "FILE)\n",
                               user, role, args[i], user);
                }
                r = c->rbac_apply ? role_make(ec, role, v, n) : 0;
                if (r >= 0 && c->rbac_apply)
                        r = user_make(c, ec, user, role);
                perms_free(v, n);
                if (r < 0)
                        return r;
        }
        if (c->json)
                return ctl_print_json(out);
        if (c->rbac_apply)
                printf("made in etcd; the passwords are in %s/USER.password. Grant role %s to the "
                       "operators' "
                       "users; with a root user, \"etcdctl auth enable\" turns authentication on.\n",
                       c->out_dir, operator_role);
        else
                printf("(printed only: --apply --out DIR makes them)\n");
        return 0;
}
