/* verbs-fleet.c: clsctl fleet apply, ls, rm: fleet policies in etcd (its v3 gateway). The objects a policy
 * names by file are uploaded under their digest first, so that a node that fetches one can check it. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "etcd.h"
#include "fleet-keys.h"
#include "fleet-rollout.h"
#include "oci.h"
#include "output.h"
#include "sha256.h"

/* etcd refuses a request over 1.5 MiB by default; base64 makes an object a third bigger. */
#define FLEET_OBJECT_MAX (1024u * 1024)
/* an image's object, checked here: each node holds it to its own --max-object-size */
#define FLEET_IMAGE_OBJECT_MAX (64u * 1024 * 1024)

/* ---- apply ---- */

static int object_present(EtcdClient *ec, const Ctl *c, const char *digest, bool *ret) {
        _cleanup_free_ char *key = fleet_key(fleet_prefix_of(c), "objects", digest, NULL);
        _cleanup_(json_decrefp) json_t *answer = NULL;
        json_t *body;
        int r;

        if (!key || !(body = etcd_range_body(key, false)))
                return ctl_oom();
        json_object_set_new(body, "keys_only", json_true());
        r = fleet_call(ec, "/v3/kv/range", body, &answer);
        if (r < 0)
                return r;
        *ret = json_array_size(json_object_get(answer, "kvs")) > 0;
        return 0;
}

/* The object file's signature, if it has one, beside it in etcd (objects/DIGEST.sig), for hosts with
 * --trusted-keys. */
static int put_signature(EtcdClient *ec, const Ctl *c, const char *file, const char *digest) {
        _cleanup_free_ char *sig = NULL, *key = NULL, *name = NULL;
        _cleanup_(json_decrefp) json_t *answer = NULL;
        size_t size;
        int r;

        r = ctl_read_signature(file, &sig, &size);
        if (r < 0 || !sig)
                return r;
        if (asprintf(&name, "%s.sig", digest) < 0 ||
            !(key = fleet_key(fleet_prefix_of(c), "objects", name, NULL)))
                return ctl_oom();
        return fleet_call(ec, "/v3/kv/put", etcd_put_body(key, sig, size, 0), &answer);
}

/* An image (oci://…) is pulled here, as every node will pull it, and checked: the policy names it by
 * the manifest digest its tag names now, with the digest of the object it holds, which every node's
 * pull must find again. Nothing of it goes to etcd. A file that pins both is taken as it is. */
static int resolve_image(const Ctl *c, json_t *holder, const char *ref, const char *where) {
        _cleanup_(oci_registries_freep) OciRegistries *regs = NULL;
        OciImage img = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        OciRef parsed;
        int r;

        r = oci_ref_parse(ref, &parsed, &e);
        if (r < 0)
                return ctl_error(r, "%s.object: %s", where, e.message);
        /* pinned whole by the file (a manifest digest and the object's): nodes check both, nothing to do */
        if (parsed.digest[0] &&
            sha256_digest_string_valid(json_string_value(json_object_get(holder, "digest")) ?: ""))
                return 0;
        r = oci_registries_load(c->registries ?: "/etc/clsd/registries.json", c->registries != NULL, &regs,
                                &e);
        if (r < 0)
                return ctl_error(r, "%s.object: %s", where, e.message);
        r = oci_pull(ref,
                     &(OciPullOptions){ .registry = oci_registries_find(regs, parsed.registry),
                                        .size_max = FLEET_IMAGE_OBJECT_MAX },
                     &img, &e);
        if (r < 0)
                return ctl_error(r, "%s.object: %s", where, e.message);
        r = json_object_set_new(holder, "object", json_string(img.pinned)) < 0 ||
                            json_object_set_new(holder, "digest", json_string(img.digest)) < 0
                    ? ctl_oom()
                    : 0;
        oci_image_done(&img);
        return r;
}

/* An "object" value: a digest stays (it must be in etcd); a file (relative to the policy file's
 * directory when not found as given) is uploaded and becomes its digest; an image is checked and
 * pinned (resolve_image()). */
static int resolve_object(EtcdClient *ec, const Ctl *c, json_t *holder, const char *base_dir,
                          const char *where) {
        json_t *v = json_object_get(holder, "object");
        const char *s = json_string_value(v);
        _cleanup_free_ char *data = NULL, *path = NULL, *key = NULL;
        char digest[SHA256_DIGEST_STRING_MAX];
        size_t size;
        bool present;
        int r;

        if (!v)
                return 0;
        if (!s || !*s)
                return ctl_error(-EINVAL, "%s.object: expected a file, a digest or an image (oci://)",
                                 where);
        if (oci_ref_is(s))
                return resolve_image(c, holder, s, where);
        if (sha256_digest_string_valid(s)) {
                r = object_present(ec, c, s, &present);
                if (r < 0)
                        return r;
                if (!present)
                        return ctl_error(-ENOENT,
                                         "%s.object: %s is not in etcd; name the object's file instead",
                                         where, s);
                return 0;
        }
        if (s[0] != '/' && access(s, R_OK) < 0 && asprintf(&path, "%s/%s", base_dir, s) < 0)
                return ctl_oom();
        r = ctl_read_input(path ?: s, &data, &size);
        if (r < 0)
                return r;
        if (size > FLEET_OBJECT_MAX)
                return ctl_error(-EFBIG, "%s: %zu bytes; etcd takes objects up to %u bytes", path ?: s, size,
                                 FLEET_OBJECT_MAX);
        sha256_digest_string(data, size, digest);
        r = object_present(ec, c, digest, &present);
        if (r < 0)
                return r;
        if (!present) {
                _cleanup_(json_decrefp) json_t *answer = NULL;
                if (!(key = fleet_key(fleet_prefix_of(c), "objects", digest, NULL)))
                        return ctl_oom();
                r = fleet_call(ec, "/v3/kv/put", etcd_put_body(key, data, size, 0), &answer);
                if (r < 0)
                        return r;
        }
        r = put_signature(ec, c, path ?: s, digest);
        if (r < 0)
                return r;
        return json_object_set_new(holder, "object", json_string(digest)) < 0 ? ctl_oom() : 0;
}

/* The fleet policy in file, its object files uploaded (they become digests), in ret. */
int fleet_policy_file_read(EtcdClient *ec, const Ctl *c, const char *file, char **ret_name, json_t **ret) {
        _cleanup_(json_decrefp) json_t *j = NULL;
        _cleanup_free_ char *data = NULL, *dir_copy = strdup(file);
        static const char *const hooks[] = { "ingress", "egress" };
        _cleanup_(fleet_policy_done) FleetPolicy fp = { 0 };
        json_error_t jerr;
        _cleanup_error_ Error e = ERROR_NULL;
        size_t size;
        char where[64];
        int r;

        if (!dir_copy)
                return ctl_oom();
        r = ctl_read_input(file, &data, &size);
        if (r < 0)
                return r;
        j = json_loadb(data, size, JSON_REJECT_DUPLICATES, &jerr);
        if (!j)
                return ctl_error(-EINVAL, "%s:%d:%d: %s", file, jerr.line, jerr.column, jerr.text);
        if (fleet_policy_parse(j, &fp, &e) < 0)
                return ctl_error(-EINVAL, "%s: %s", file, e.message);
        const char *base_dir = streq(file, "-") ? "." : dirname(dir_copy);
        for (size_t h = 0; h < ELEMENTSOF(hooks); h++) {
                json_t *filters = json_object_get(j, hooks[h]);
                for (size_t i = 0; i < json_array_size(filters); i++) {
                        json_t *f = json_array_get(filters, i), *actions = json_object_get(f, "actions");
                        snprintf(where, sizeof(where), "%s[%zu]", hooks[h], i);
                        r = resolve_object(ec, c, f, base_dir, where);
                        if (r < 0)
                                return r;
                        for (size_t k = 0; k < json_array_size(actions); k++) {
                                snprintf(where, sizeof(where), "%s[%zu].actions[%zu]", hooks[h], i, k);
                                r = resolve_object(ec, c, json_array_get(actions, k), base_dir, where);
                                if (r < 0)
                                        return r;
                        }
                }
        }
        if (!(*ret_name = strdup(fp.name)))
                return ctl_oom();
        *ret = TAKE_PTR(j);
        return 0;
}

/* The transaction of the files' policies (copies of envelopes, in out_envelopes): tried again, read
 * anew, while another writer moves a policy or a rollout it supersedes between its read and its write. */
static int apply_txn(EtcdClient *ec, const Ctl *c, json_t *const *envelopes, size_t n,
                     json_t **out_envelopes, uint64_t *ret_revision) {
        for (int attempt = 0; attempt < FLEET_TXN_ATTEMPTS; attempt++) {
                _cleanup_(json_decrefp) json_t *ops = json_array(), *compares = json_array(), *answer = NULL;
                int r;
                if (!ops || !compares)
                        return ctl_oom();
                for (size_t k = 0; k < n; k++) {
                        json_decref(out_envelopes[k]);
                        out_envelopes[k] = json_deep_copy(envelopes[k]);
                        if (!out_envelopes[k])
                                return ctl_oom();
                        r = fleet_apply_ops(ec, c, out_envelopes[k], NULL, compares, ops);
                        if (r < 0)
                                return r;
                }
                r = fleet_txn(ec, compares, ops, &answer);
                if (r < 0)
                        return r;
                if (r > 0) {
                        *ret_revision = etcd_answer_revision(answer);
                        return 0;
                }
        }
        return ctl_error(-EAGAIN, "another writer kept changing the policies (or their rollouts) between "
                                  "this apply's read and its write: try again");
}

/* Writes each file's policy, with its rollout's plan and its history entry, in one etcd transaction, so
 * that every node applies them as one; a rollout of one of them that has not ended is superseded in it. */
/* The files' policies as read (names, envelopes) and as written (with their rollouts' plans). */
typedef struct FleetApply {
        char *names[CTL_ARGS_MAX];
        json_t *envelopes[CTL_ARGS_MAX], *written[CTL_ARGS_MAX];
        size_t n;
        uint64_t revision;
} FleetApply;

static void fleet_apply_done(FleetApply *a) {
        for (size_t k = 0; k < CTL_ARGS_MAX; k++) {
                free(a->names[k]);
                json_decref(a->envelopes[k]);
                json_decref(a->written[k]);
        }
}

static int fleet_apply_print(const Ctl *c, const FleetApply *a) {
        _cleanup_(json_decrefp) json_t *out = json_array();

        if (!out)
                return ctl_oom();
        for (size_t k = 0; k < a->n; k++) {
                const char *id =
                        json_string_value(json_object_get(json_object_get(a->written[k], "rollout"), "id"));
                if (c->json)
                        json_array_append_new(out, json_pack("{s:s,s:I,s:o}", "name", a->names[k],
                                                             "revision", (json_int_t) a->revision, "rollout",
                                                             id ? json_string(id) : json_null()));
                else if (id)
                        printf("fleet policy %s: revision %llu, rollout %s\n", a->names[k],
                               (unsigned long long) a->revision, id);
                else
                        printf("fleet policy %s: revision %llu\n", a->names[k],
                               (unsigned long long) a->revision);
        }
        return c->json ? ctl_print_json(a->n == 1 ? json_array_get(out, 0) : out) : 0;
}

int verb_fleet_apply(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(fleet_apply_done) FleetApply a = { 0 };
        int r;

        r = fleet_client(c, &ec);
        if (r < 0)
                return r;
        for (; args[a.n]; a.n++) {
                if (a.n == CTL_ARGS_MAX)
                        return ctl_error(-E2BIG, "at most %d files at once", CTL_ARGS_MAX);
                r = fleet_policy_file_read(ec, c, args[a.n], &a.names[a.n], &a.envelopes[a.n]);
                if (r < 0)
                        return r;
                for (size_t k = 0; k < a.n; k++)
                        if (streq(a.names[k], a.names[a.n]))
                                return ctl_error(-EINVAL, "%s: fleet policy %s is in %s too", args[a.n],
                                                 a.names[a.n], args[k]);
        }
        r = apply_txn(ec, c, a.envelopes, a.n, a.written, &a.revision);
        if (r < 0)
                return r;
        return fleet_apply_print(c, &a);
}

/* ---- ls, rm ---- */

static char *nodes_text(const json_t *nodes) {
        char *s = NULL;
        size_t n = 0;
        FILE *f;

        if (!nodes)
                return strdup("every node");
        f = open_memstream(&s, &n);
        if (!f)
                return NULL;
        fleet_labels_print(f, json_object_get(nodes, "labels"));
        if (json_array_size(json_object_get(nodes, "names")) > 0) {
                _cleanup_free_ char *names = json_join(json_object_get(nodes, "names"), NULL);
                fprintf(f, "%s%s", ftell(f) ? " or " : "", names ?: "");
        }
        fclose(f);
        return s;
}

int verb_fleet_list(const Ctl *c, char **args _unused_) {
        _cleanup_(json_decrefp) json_t *policies = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        json_t *v;
        size_t i;
        int r;

        r = fleet_listing(c, "policies", &policies);
        if (r != 0)
                return r < 0 ? r : 0;
        t = table_new("NAME", "REVISION", "NODES", "MATCH", NULL);
        if (!t)
                return ctl_oom();
        json_array_foreach (policies, i, v) {
                json_t *invalid = json_object_get(v, "_invalid");
                _cleanup_free_ char *nodes = NULL;
                if (invalid && asprintf(&nodes, "(invalid: %s)", json_string_value(invalid)) < 0)
                        nodes = NULL;
                else if (!invalid && json_is_true(json_object_get(v, "removed")))
                        nodes = strdup("(removed, signed)");
                else if (!invalid)
                        nodes = nodes_text(json_object_get(v, "nodes"));
                _cleanup_free_ char *match =
                        json_dumps(json_object_get(v, "match"), JSON_COMPACT | JSON_SORT_KEYS);
                table_add_json(t, json_object_get(v, "_key"));
                table_add_json(t, json_object_get(v, "_revision"));
                table_add(t, nodes);
                table_add(t, match);
        }
        if (table_rows(t) == 0) {
                puts("(no fleet policy)");
                return 0;
        }
        return ctl_table_print(t);
}

/* fleet rm --sign: the key is not deleted but holds a signed removal, which nodes that require signed
 * policies take (a deletion they refuse: anyone who may write could make it). */
static int removal_op(const Ctl *c, EtcdClient *ec, const char *name, const char *key, json_t *ops) {
        _cleanup_(json_decrefp) json_t *old = NULL,
                                       *removal = json_pack("{s:s,s:b}", "name", name, "removed", 1);
        _cleanup_free_ char *text = NULL;
        uint64_t revision = 0;
        int r;

        if (!removal)
                return ctl_oom();
        r = fleet_policy_current(ec, c, name, &old, &revision);
        if (r < 0)
                return r;
        /* (a removal already there is signed again: one the nodes refused is replaced) */
        if (!old)
                return ctl_error(-ENOENT, "no fleet policy %s", name);
        r = fleet_sign(c, removal, old);
        if (r < 0)
                return r;
        if (!(text = json_dumps(removal, JSON_COMPACT)))
                return ctl_oom();
        json_t *put = etcd_put_body(key, text, strlen(text), 0);
        return put && json_array_append_new(ops, json_pack("{s:o}", "request_put", put)) >= 0 ? 0
                                                                                              : ctl_oom();
}

/* The policy (or, with --sign, a signed removal in its place), in one transaction with its removal's
 * history entry; a rollout of it that has not ended is superseded. Its history and its rollouts' states
 * stay (what each rollout came to never changes; fleet rollback --to brings a revision back); its nodes'
 * steps go. */
static int remove_txn(EtcdClient *ec, const Ctl *c, const char *name, uint64_t *ret_revision) {
        _cleanup_free_ char *key = fleet_key(fleet_prefix_of(c), "policies", name, NULL), *nodes = NULL;
        EtcdCredentials creds = fleet_credentials(c);
        char by[256];

        if (!key || asprintf(&nodes, "%srollout-nodes/%s/", fleet_prefix_of(c), name) < 0)
                return ctl_oom();
        etcd_identity(&creds, by, sizeof(by));
        for (int attempt = 0; attempt < FLEET_TXN_ATTEMPTS; attempt++) {
                _cleanup_(json_decrefp) json_t *ops = json_array(), *compares = json_array(), *answer = NULL,
                                               *old = NULL;
                uint64_t old_revision = 0;
                int r = ops && compares ? fleet_policy_current(ec, c, name, &old, &old_revision) : ctl_oom();
                if (r < 0)
                        return r;
                if (!old)
                        return ctl_error(-ENOENT, "no fleet policy %s", name);
                if (c->sign_key)
                        r = removal_op(c, ec, name, key, ops);
                else
                        r = json_array_append_new(ops, json_pack("{s:o}", "request_delete_range",
                                                                 etcd_delete_body(key, false))) < 0
                                    ? ctl_oom()
                                    : 0;
                if (r < 0)
                        return r;
                r = fleet_supersede_ops(ec, c, name, old, old_revision, NULL, by, compares, ops);
                if (r < 0)
                        return r;
                if (json_array_append_new(ops, json_pack("{s:o}", "request_delete_range",
                                                         etcd_delete_body(nodes, true))) < 0)
                        return ctl_oom();
                r = fleet_removal_ops(c, name, old_revision, ops);
                if (r < 0)
                        return r;
                r = fleet_prune_ops(ec, c, name, ops);
                if (r < 0)
                        return r;
                r = fleet_txn(ec, compares, ops, &answer);
                if (r < 0)
                        return r;
                if (r > 0) {
                        *ret_revision = etcd_answer_revision(answer);
                        return 0;
                }
        }
        return ctl_error(-EAGAIN,
                         "fleet policy %s (or its rollout) kept changing between this removal's read "
                         "and its write: try again",
                         name);
}

int verb_fleet_remove(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        uint64_t revision = 0;
        int r;

        r = fleet_client(c, &ec);
        if (r < 0)
                return r;
        r = remove_txn(ec, c, args[0], &revision);
        if (r < 0)
                return r;
        if (c->json) {
                _cleanup_(json_decrefp) json_t *out =
                        json_pack("{s:s,s:I}", "name", args[0], "revision", (json_int_t) revision);
                return out ? ctl_print_json(out) : ctl_oom();
        }
        printf("fleet policy %s removed at revision %llu\n", args[0], (unsigned long long) revision);
        return 0;
}
