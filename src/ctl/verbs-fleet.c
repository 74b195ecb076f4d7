/* verbs-fleet.c: clsctl fleet apply|ls|rm|nodes|status: fleet policies in etcd (its v3 gateway), and
 * what each node says of them. The objects a policy names by file are uploaded under their digest
 * first, so that a node that fetches one can check it. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "etcd.h"
#include "output.h"
#include "sha256.h"

/* etcd refuses a request over 1.5 MiB by default; base64 makes an object a third bigger. */
#define FLEET_OBJECT_MAX (1024u * 1024)

static int client(const Ctl *c, EtcdClient **ret) {
        Error e = ERROR_NULL;
        EtcdTls tls = { .ca = c->fleet_ca, .cert = c->fleet_cert, .key = c->fleet_key };

        if (!c->fleet_urls)
                return ctl_error(-EINVAL, "no etcd endpoint: give --fleet URL[,URL…] or set CLSD_FLEET");
        if (etcd_client_new(c->fleet_urls, &tls, ret, &e) < 0) {
                int r = ctl_error(-EINVAL, "%s", e.message);
                error_done(&e);
                return r;
        }
        return 0;
}

static const char *prefix_of(const Ctl *c) {
        return c->fleet_prefix ?: ETCD_PREFIX_DEFAULT;
}

static int call(EtcdClient *ec, const char *path, json_t *body, json_t **ret) {
        Error e = ERROR_NULL;
        int r;

        if (!body)
                return ctl_oom();
        r = etcd_call(ec, path, body, ret, &e);
        if (r < 0) {
                r = ctl_error(r, "%s", e.message);
                error_done(&e);
        }
        return r;
}

/* A fleet policy as etcd has it, as JSON (*v; {} when it is no JSON object): one the nodes cannot read
 * (written by hand, not by clsctl) gets "_invalid", why; every node leaves it alone. */
static void policy_check(json_t **v, const char *name, const EtcdKv *kv) {
        FleetPolicy fp = { 0 };
        Error e = ERROR_NULL;

        if (fleet_policy_read(name, kv->value, kv->value_size, &fp, &e) < 0) {
                if (!json_is_object(*v)) {
                        json_decref(*v);
                        *v = json_object();
                }
                if (*v)
                        json_object_set_new(*v, "_invalid", json_string(e.message ?: "invalid"));
        }
        fleet_policy_done(&fp);
        error_done(&e);
}

/* The part of a key after its kind's prefix, printable: bytes outside visible ASCII (a NUL, 0xff) as \xNN,
 * so that no key is dropped (JSON needs UTF-8) or read as another (a NUL would end it). Whether it was
 * printable already in *ret_plain. */
static char *key_name(const EtcdKv *kv, size_t skip, bool *ret_plain) {
        size_t n = kv->key_size > skip ? kv->key_size - skip : 0;
        const unsigned char *p = (const unsigned char *) kv->key + skip;
        char *out = malloc(4 * n + 1), *o = out;

        *ret_plain = true;
        for (size_t i = 0; out && i < n; i++)
                if (p[i] > 0x20 && p[i] < 0x7f)
                        *o++ = (char) p[i];
                else {
                        o += sprintf(o, "\\x%02x", p[i]);
                        *ret_plain = false;
                }
        if (out)
                *o = 0;
        return out;
}

/* The leases etcd holds now (/v3/lease/leases): a key under one of them is bound to a live node. */
static int live_leases(EtcdClient *ec, json_t **ret) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        json_t *ids = json_array(), *l;
        size_t i;
        int r;

        if (!ids)
                return ctl_oom();
        r = call(ec, "/v3/lease/leases", json_object(), &answer);
        if (r < 0) {
                json_decref(ids);
                return r;
        }
        json_array_foreach (json_object_get(answer, "leases"), i, l)
                if (json_is_string(json_object_get(l, "ID")))
                        json_array_append(ids, json_object_get(l, "ID"));
        *ret = ids;
        return 0;
}

static bool lease_live(json_t *leases, uint64_t lease) {
        json_t *l;
        size_t i;

        json_array_foreach (leases, i, l)
                if (lease && strtoull(json_string_value(l), NULL, 10) == lease)
                        return true;
        return false;
}

/* Every key under PREFIX kind/, parsed as JSON (values that are not are skipped, with a warning; a
 * policy is kept, and said invalid: every key under policies/ has its row, whatever its bytes). With
 * leases (nodes, status), each says its lease and whether it is bound to a live one ("_bound"). */
static int range_json(EtcdClient *ec, const Ctl *c, const char *kind, json_t *leases, json_t **ret,
                      uint64_t *ret_revision) {
        _cleanup_free_ char *key = fleet_key(prefix_of(c), kind, NULL, NULL);
        _cleanup_(json_decrefp) json_t *answer = NULL;
        json_t *out = json_array();
        EtcdKv *kvs = NULL;
        size_t n = 0;
        Error e = ERROR_NULL;
        int r;

        if (!key || !out) {
                json_decref(out);
                return ctl_oom();
        }
        r = call(ec, "/v3/kv/range", etcd_range_body(key, true), &answer);
        if (r >= 0 && etcd_range_parse(answer, &kvs, &n, ret_revision, &e) < 0) {
                r = ctl_error(-EPROTO, "%s", e.message);
                error_done(&e);
        }
        for (size_t i = 0; r >= 0 && i < n; i++) {
                json_error_t jerr;
                bool plain;
                _cleanup_free_ char *name = key_name(&kvs[i], strlen(key), &plain);
                json_t *v = json_loadb(kvs[i].value, kvs[i].value_size, 0, &jerr);
                if (!name) {
                        json_decref(v);
                        r = ctl_oom();
                        break;
                }
                if ((!v || !json_is_object(v) || !plain) && !streq(kind, "policies")) {
                        fprintf(stderr, "clsctl: %s%s: %s; skipped\n", key, name,
                                plain ? "not a JSON object" : "not a key clsd writes");
                        json_decref(v);
                        continue;
                }
                if (streq(kind, "policies") && !plain) {
                        json_decref(v);
                        v = json_pack("{s:s}", "_invalid",
                                      "its name has a byte a policy's name cannot hold (a NUL, a control "
                                      "byte, a byte past ASCII): no node reads it");
                } else if (streq(kind, "policies"))
                        policy_check(&v, name, &kvs[i]);
                if (!v) {
                        r = ctl_oom();
                        break;
                }
                json_object_set_new(v, "_key", json_string(name));
                json_object_set_new(v, "_revision", json_integer((json_int_t) kvs[i].mod_revision));
                if (leases) {
                        json_object_set_new(v, "_lease", json_integer((json_int_t) kvs[i].lease));
                        json_object_set_new(v, "_bound", json_boolean(lease_live(leases, kvs[i].lease)));
                }
                json_array_append_new(out, v);
        }
        etcd_kvs_free(kvs, n);
        if (r < 0) {
                json_decref(out);
                return r;
        }
        *ret = out;
        return 0;
}

/* ---- apply ---- */

static int object_present(EtcdClient *ec, const Ctl *c, const char *digest, bool *ret) {
        _cleanup_free_ char *key = fleet_key(prefix_of(c), "objects", digest, NULL);
        _cleanup_(json_decrefp) json_t *answer = NULL;
        json_t *body;
        int r;

        if (!key || !(body = etcd_range_body(key, false)))
                return ctl_oom();
        json_object_set_new(body, "keys_only", json_true());
        r = call(ec, "/v3/kv/range", body, &answer);
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
        if (asprintf(&name, "%s.sig", digest) < 0 || !(key = fleet_key(prefix_of(c), "objects", name, NULL)))
                return ctl_oom();
        return call(ec, "/v3/kv/put", etcd_put_body(key, sig, size, 0), &answer);
}

/* An "object" value: a digest stays (it must be in etcd); a file (relative to the policy file's
 * directory when not found as given) is uploaded and becomes its digest. */
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
                return ctl_error(-EINVAL, "%s.object: expected a file or a digest", where);
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
                if (!(key = fleet_key(prefix_of(c), "objects", digest, NULL)))
                        return ctl_oom();
                r = call(ec, "/v3/kv/put", etcd_put_body(key, data, size, 0), &answer);
                if (r < 0)
                        return r;
        }
        r = put_signature(ec, c, path ?: s, digest);
        if (r < 0)
                return r;
        return json_object_set_new(holder, "object", json_string(digest)) < 0 ? ctl_oom() : 0;
}

/* The fleet policy in file, its object files uploaded (they become digests), as a put body in ret. */
static int policy_file_put(EtcdClient *ec, const Ctl *c, const char *file, char **ret_name, json_t **ret) {
        _cleanup_(json_decrefp) json_t *j = NULL;
        _cleanup_free_ char *data = NULL, *text = NULL, *key = NULL, *dir_copy = strdup(file);
        static const char *const hooks[] = { "ingress", "egress" };
        FleetPolicy fp = { 0 };
        json_error_t jerr;
        Error e = ERROR_NULL;
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
        if (fleet_policy_parse(j, &fp, &e) < 0) {
                r = ctl_error(-EINVAL, "%s: %s", file, e.message);
                error_done(&e);
                return r;
        }
        const char *base_dir = streq(file, "-") ? "." : dirname(dir_copy);
        for (size_t h = 0; r >= 0 && h < ELEMENTSOF(hooks); h++) {
                json_t *filters = json_object_get(j, hooks[h]);
                for (size_t i = 0; r >= 0 && i < json_array_size(filters); i++) {
                        json_t *f = json_array_get(filters, i), *actions = json_object_get(f, "actions");
                        snprintf(where, sizeof(where), "%s[%zu]", hooks[h], i);
                        r = resolve_object(ec, c, f, base_dir, where);
                        for (size_t k = 0; r >= 0 && k < json_array_size(actions); k++) {
                                snprintf(where, sizeof(where), "%s[%zu].actions[%zu]", hooks[h], i, k);
                                r = resolve_object(ec, c, json_array_get(actions, k), base_dir, where);
                        }
                }
        }
        if (r >= 0 &&
            (!(text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER)) ||
             !(key = fleet_key(prefix_of(c), "policies", fp.name, NULL)) ||
             !(*ret = etcd_put_body(key, text, strlen(text), 0)) || !(*ret_name = strdup(fp.name))))
                r = ctl_oom();
        fleet_policy_done(&fp);
        return r;
}

/* Writes each file's policy; several are written in one etcd transaction, so that every node applies
 * them as one. */
int verb_fleet_apply(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *puts = json_array(), *answer = NULL, *out = json_array();
        char *names[CTL_ARGS_MAX] = { 0 };
        size_t n = 0;
        int r;

        if (!puts || !out)
                return ctl_oom();
        r = client(c, &ec);
        for (; r >= 0 && args[n]; n++) {
                json_t *put = NULL;
                if (n == CTL_ARGS_MAX) {
                        r = ctl_error(-E2BIG, "at most %d files at once", CTL_ARGS_MAX);
                        break;
                }
                r = policy_file_put(ec, c, args[n], &names[n], &put);
                if (r >= 0 && json_array_append_new(puts, put) < 0)
                        r = ctl_oom();
                for (size_t k = 0; r >= 0 && k < n; k++)
                        if (streq(names[k], names[n]))
                                r = ctl_error(-EINVAL, "%s: fleet policy %s is in %s too", args[n], names[n],
                                              args[k]);
        }
        if (r >= 0)
                r = n == 1 ? call(ec, "/v3/kv/put", json_incref(json_array_get(puts, 0)), &answer)
                           : call(ec, "/v3/kv/txn", etcd_txn_body(puts), &answer);
        if (r >= 0) {
                uint64_t revision = etcd_answer_revision(answer);
                for (size_t k = 0; k < n; k++) {
                        if (c->json)
                                json_array_append_new(out, json_pack("{s:s,s:I}", "name", names[k],
                                                                     "revision", (json_int_t) revision));
                        else
                                printf("fleet policy %s: revision %llu\n", names[k],
                                       (unsigned long long) revision);
                }
                if (c->json)
                        r = ctl_print_json(n == 1 ? json_array_get(out, 0) : out);
        }
        for (size_t k = 0; k < n; k++)
                free(names[k]);
        return r;
}

/* ---- ls, rm ---- */

/* "k=v,k2=v2" of a labels object, into f. */
static void labels_print(FILE *f, json_t *labels) {
        const char *k;
        json_t *v;

        json_object_foreach (labels, k, v)
                fprintf(f, "%s%s=%s", ftell(f) ? "," : "", k, json_string_value(v));
}

static char *nodes_text(const json_t *nodes) {
        char *s = NULL;
        size_t n = 0;
        FILE *f;

        if (!nodes)
                return strdup("every node");
        f = open_memstream(&s, &n);
        if (!f)
                return NULL;
        labels_print(f, json_object_get(nodes, "labels"));
        if (json_array_size(json_object_get(nodes, "names")) > 0) {
                _cleanup_free_ char *names = json_join(json_object_get(nodes, "names"), NULL);
                fprintf(f, "%s%s", ftell(f) ? " or " : "", names ?: "");
        }
        fclose(f);
        return s;
}

/* The JSON objects under kind/ in ret (nodes: with their leases); with --json they are printed as they are
 * and 1 returned. */
static int listing(const Ctl *c, const char *kind, json_t **ret) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *leases = NULL;
        int r;

        r = client(c, &ec);
        if (r >= 0 && streq(kind, "nodes"))
                r = live_leases(ec, &leases);
        if (r >= 0)
                r = range_json(ec, c, kind, leases, ret, NULL);
        if (r < 0 || !c->json)
                return r;
        r = ctl_print_json(*ret);
        return r < 0 ? r : 1;
}

int verb_fleet_list(const Ctl *c, char **args _unused_) {
        _cleanup_(json_decrefp) json_t *policies = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        json_t *v;
        size_t i;
        int r;

        r = listing(c, "policies", &policies);
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
                else if (!invalid)
                        nodes = nodes_text(json_object_get(v, "nodes"));
                _cleanup_free_ char *match =
                        json_dumps(json_object_get(v, "match"), JSON_COMPACT | JSON_SORT_KEYS);
                r = table_add_json(t, json_object_get(v, "_key"));
                r = r ?: table_add_json(t, json_object_get(v, "_revision"));
                r = r ?: table_add(t, nodes);
                r = r ?: table_add(t, match);
                if (r < 0)
                        return ctl_oom();
        }
        if (table_rows(t) == 0) {
                puts("(no fleet policy)");
                return 0;
        }
        return table_print(t, stdout) < 0 ? ctl_error(-EIO, "cannot write to stdout") : 0;
}

int verb_fleet_remove(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_free_ char *key = fleet_key(prefix_of(c), "policies", args[0], NULL);
        json_t *deleted;
        int r;

        if (!key)
                return ctl_oom();
        r = client(c, &ec);
        if (r >= 0)
                r = call(ec, "/v3/kv/deleterange", etcd_delete_body(key, false), &answer);
        if (r < 0)
                return r;
        deleted = json_object_get(answer, "deleted");
        if (!deleted || (json_is_string(deleted) && atoll(json_string_value(deleted)) == 0))
                return ctl_error(-ENOENT, "no fleet policy %s", args[0]);
        if (c->json) {
                _cleanup_(json_decrefp) json_t *out = json_pack("{s:s,s:I}", "name", args[0], "revision",
                                                                (json_int_t) etcd_answer_revision(answer));
                return out ? ctl_print_json(out) : ctl_oom();
        }
        printf("fleet policy %s removed at revision %llu\n", args[0],
               (unsigned long long) etcd_answer_revision(answer));
        return 0;
}

/* ---- nodes ---- */

int verb_fleet_nodes(const Ctl *c, char **args _unused_) {
        _cleanup_(json_decrefp) json_t *nodes = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        json_t *v;
        size_t i;
        int r;

        r = listing(c, "nodes", &nodes);
        if (r != 0)
                return r < 0 ? r : 0;
        t = table_new("NODE", "STATE", "LABELS", "VERSION", "KERNEL", "ACT_BPF", "TCX", "REVISION", NULL);
        if (!t)
                return ctl_oom();
        json_array_foreach (nodes, i, v) {
                char *labels = NULL;
                size_t n = 0;
                FILE *f = open_memstream(&labels, &n);
                if (!f)
                        return ctl_oom();
                labels_print(f, json_object_get(v, "labels"));
                fclose(f);
                r = table_add_json(t, json_object_get(v, "node"));
                /* a record no live lease holds: its node is gone, or someone else wrote it */
                r = r ?: table_add(t, json_is_true(json_object_get(v, "_bound")) ? "live" : "unbound");
                r = r ?: table_add(t, labels);
                r = r ?: table_add_json(t, json_object_get(v, "version"));
                r = r ?: table_add_json(t, json_object_get(v, "kernel"));
                r = r ?: table_add_json(t, json_object_get(v, "act_bpf"));
                r = r ?: table_add_json(t, json_object_get(v, "tcx"));
                r = r ?: table_add_json(t, json_object_get(v, "revision"));
                free(labels);
                if (r < 0)
                        return ctl_oom();
        }
        if (table_rows(t) == 0) {
                puts("(no node)");
                return 0;
        }
        return table_print(t, stdout) < 0 ? ctl_error(-EIO, "cannot write to stdout") : 0;
}

/* ---- status: node × policy ---- */

/* The node's status of the policy: under status/NODE/POLICY, saying so, bound to the node record's own
 * (live) lease; a key anyone else wrote is none. */
static json_t *find_status(json_t *statuses, json_t *node_record, const char *node, const char *policy) {
        _cleanup_free_ char *key = NULL;
        json_int_t lease = json_integer_value(json_object_get(node_record, "_lease"));
        json_t *v;
        size_t i;

        if (asprintf(&key, "%s/%s", node, policy) < 0)
                return NULL;
        json_array_foreach (statuses, i, v)
                if (json_is_true(json_object_get(v, "_bound")) &&
                    json_integer_value(json_object_get(v, "_lease")) == lease &&
                    streq_ptr(json_string_value(json_object_get(v, "_key")), key) &&
                    streq_ptr(json_string_value(json_object_get(v, "node")), node) &&
                    streq_ptr(json_string_value(json_object_get(v, "policy")), policy))
                        return v;
        return NULL;
}

static bool node_selected(json_t *policy, json_t *node) {
        FleetPolicy fp = { 0 };
        FleetLabel *labels = NULL;
        size_t n = 0;
        const char *k;
        json_t *v;
        bool selected = false;

        json_t *copy = json_deep_copy(policy);
        json_object_del(copy, "_key");
        json_object_del(copy, "_revision");
        json_object_foreach (json_object_get(node, "labels"), k, v) {
                FleetLabel *nl = realloc(labels, (n + 1) * sizeof(FleetLabel));
                if (!nl)
                        break;
                labels = nl;
                snprintf(labels[n].key, sizeof(labels[n].key), "%s", k);
                snprintf(labels[n].value, sizeof(labels[n].value), "%s", json_string_value(v) ?: "");
                n++;
        }
        if (fleet_policy_parse(copy, &fp, NULL) >= 0)
                selected = fleet_policy_selects(&fp, json_string_value(json_object_get(node, "node")) ?: "",
                                                labels, n);
        fleet_policy_done(&fp);
        json_decref(copy);
        free(labels);
        return selected;
}

/* "2 applied" etc. of the interfaces a status lists. */
static char *ifaces_text(json_t *ifaces) {
        size_t counts[3] = { 0 }, n = json_array_size(ifaces);
        char *s = NULL;

        for (size_t i = 0; i < n; i++) {
                const char *st = json_string_value(json_object_get(json_array_get(ifaces, i), "state"));
                counts[st && streq(st, "configured") ? 0 : st && streq(st, "failed") ? 2 : 1]++;
        }
        if (asprintf(&s, "%zu (%zu configured, %zu pending, %zu failed)", n, counts[0], counts[1],
                     counts[2]) < 0)
                return NULL;
        return s;
}

int verb_fleet_status(const Ctl *c, char **args) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *policies = NULL, *nodes = NULL, *statuses = NULL, *leases = NULL,
                                       *rows = json_array();
        _cleanup_(table_freep) Table *t = NULL;
        json_t *p, *n;
        size_t i, k;
        bool failed = false, invalid = false, found = !args[0];
        int r;

        if (!rows)
                return ctl_oom();
        r = client(c, &ec);
        if (r >= 0)
                r = live_leases(ec, &leases);
        if (r >= 0)
                r = range_json(ec, c, "policies", NULL, &policies, NULL);
        if (r >= 0)
                r = range_json(ec, c, "nodes", leases, &nodes, NULL);
        if (r >= 0)
                r = range_json(ec, c, "status", leases, &statuses, NULL);
        if (r < 0)
                return r;
        /* Every (node, policy) where the policy selects the node: the node's status, or none yet. */
        json_array_foreach (policies, i, p) {
                const char *name = json_string_value(json_object_get(p, "_key"));
                json_int_t revision = json_integer_value(json_object_get(p, "_revision"));
                if (!name || (args[0] && !streq(args[0], name)))
                        continue;
                found = true;
                if (json_object_get(p, "_invalid")) {
                        /* no node can read it, nor say which nodes it selects */
                        json_t *row = json_pack("{s:n,s:s,s:s,s:I,s:n,s:n,s:O}", "node", "policy", name,
                                                "state", "invalid", "revision", revision, "held_revision",
                                                "lag", "error", json_object_get(p, "_invalid"));
                        if (!row)
                                return ctl_oom();
                        json_array_append_new(rows, row);
                        invalid = true;
                        continue;
                }
                json_array_foreach (nodes, k, n) {
                        const char *node = json_string_value(json_object_get(n, "node"));
                        /* only live nodes count: a record no live lease holds is not a node (unbound) */
                        if (!node || !json_is_true(json_object_get(n, "_bound")) ||
                            !streq_ptr(json_string_value(json_object_get(n, "_key")), node) ||
                            !node_selected(p, n))
                                continue;
                        json_t *s = find_status(statuses, n, node, name);
                        json_int_t held = json_integer_value(json_object_get(s, "revision"));
                        const char *state = s ? json_string_value(json_object_get(s, "state")) : "no status";
                        json_t *row = json_pack(
                                "{s:s,s:s,s:s,s:I,s:I,s:I,s:O*,s:O*}", "node", node, "policy", name, "state",
                                state ?: "?", "revision", revision, "held_revision", held, "lag",
                                held ? revision - held : revision, "error", json_object_get(s, "error"),
                                "interfaces", json_object_get(s, "interfaces"));
                        if (!row)
                                return ctl_oom();
                        /* a status of an older revision says the node has not caught up */
                        if (s && held != revision)
                                json_object_set_new(row, "state", json_string("behind"));
                        failed = failed || (state && streq(state, "failed"));
                        json_array_append_new(rows, row);
                }
        }
        if (!found)
                return ctl_error(-ENOENT, "no fleet policy %s", args[0]);
        if (c->json)
                r = ctl_print_json(rows);
        else {
                t = table_new("NODE", "POLICY", "STATE", "REVISION", "LAG", "INTERFACES", "ERROR", NULL);
                if (!t)
                        return ctl_oom();
                json_array_foreach (rows, i, p) {
                        _cleanup_free_ char *ifaces = json_object_get(p, "interfaces")
                                                              ? ifaces_text(json_object_get(p, "interfaces"))
                                                              : NULL;
                        r = table_add_json(t, json_object_get(p, "node"));
                        r = r ?: table_add_json(t, json_object_get(p, "policy"));
                        r = r ?: table_add_json(t, json_object_get(p, "state"));
                        r = r ?: table_add_json(t, json_object_get(p, "held_revision"));
                        r = r ?: table_add_json(t, json_object_get(p, "lag"));
                        r = r ?: table_add(t, ifaces);
                        r = r ?: table_add_json(t, json_object_get(p, "error"));
                        if (r < 0)
                                return ctl_oom();
                }
                if (table_rows(t) == 0)
                        puts("(no node is selected by a fleet policy)");
                else if (table_print(t, stdout) < 0)
                        return ctl_error(-EIO, "cannot write to stdout");
        }
        if (r >= 0 && failed)
                return ctl_error(-EIO, "a node failed to apply a fleet policy");
        if (r >= 0 && invalid)
                return ctl_error(-EINVAL, "a fleet policy is invalid: no node applies it");
        return r;
}
