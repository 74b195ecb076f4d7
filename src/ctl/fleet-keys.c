/* fleet-keys.c: what clsctl reads of the fleet's keys in etcd: the client (--fleet and its TLS files),
 * the keys of a kind as JSON rows (each name printable whatever its bytes, policies checked as nodes read
 * them, records with their lease and whether a live one holds them), the leases etcd holds. */

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "fleet-keys.h"
#include "etcd.h"
#include "output.h"
#include "sha256.h"

/* etcd refuses a request over 1.5 MiB by default; base64 makes an object a third bigger. */
#define FLEET_OBJECT_MAX (1024u * 1024)

EtcdCredentials fleet_credentials(const Ctl *c) {
        return (EtcdCredentials){ .ca = c->fleet_ca,
                                  .cert = c->fleet_cert,
                                  .key = c->fleet_key,
                                  .user = c->fleet_user,
                                  .password_file = c->fleet_password_file };
}

int fleet_client(const Ctl *c, EtcdClient **ret) {
        _cleanup_error_ Error e = ERROR_NULL;
        EtcdCredentials tls = fleet_credentials(c);

        if (!c->fleet_urls)
                return ctl_error(-EINVAL, "no etcd endpoint: give --fleet URL[,URL…] or set CLSD_FLEET");
        if (etcd_client_new(c->fleet_urls, &tls, ret, &e) < 0)
                return ctl_error(-EINVAL, "%s", e.message);
        if (c->fleet_timeout_sec > 0)
                etcd_client_set_busy_wait(*ret, (uint64_t) (c->fleet_timeout_sec * 1e6));
        return 0;
}

const char *fleet_prefix_of(const Ctl *c) {
        return c->fleet_prefix ?: ETCD_PREFIX_DEFAULT;
}

int fleet_call(EtcdClient *ec, const char *path, json_t *body, json_t **ret) {
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        if (!body)
                return ctl_oom();
        r = etcd_call(ec, path, body, ret, &e);
        if (r < 0)
                r = ctl_error(r, "%s", e.message);
        return r;
}

/* A fleet policy as etcd has it, as JSON (*v; {} when it is no JSON object): one the nodes cannot read
 * (written by hand, not by clsctl) gets "_invalid", why; every node leaves it alone. */
static void policy_check(json_t **v, const char *name, const EtcdKv *kv) {
        FleetPolicy fp = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;

        if (fleet_policy_read(name, kv->value, kv->value_size, &fp, &e) < 0) {
                if (!json_is_object(*v)) {
                        json_decref(*v);
                        *v = json_object();
                }
                if (*v)
                        json_object_set_new(*v, "_invalid", json_string(e.message ?: "invalid"));
        }
        fleet_policy_done(&fp);
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
int fleet_live_leases(EtcdClient *ec, json_t **ret) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        json_t *ids = json_array(), *l;
        size_t i;
        int r;

        if (!ids)
                return ctl_oom();
        r = fleet_call(ec, "/v3/lease/leases", json_object(), &answer);
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
int fleet_range_json(EtcdClient *ec, const Ctl *c, const char *kind, json_t *leases, json_t **ret,
                     uint64_t *ret_revision) {
        _cleanup_free_ char *key = fleet_key(fleet_prefix_of(c), kind, NULL, NULL);
        _cleanup_(json_decrefp) json_t *answer = NULL;
        json_t *out = json_array();
        EtcdKv *kvs = NULL;
        size_t n = 0;
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        if (!key || !out) {
                json_decref(out);
                return ctl_oom();
        }
        r = fleet_call(ec, "/v3/kv/range", etcd_range_body(key, true), &answer);
        if (r >= 0 && etcd_range_parse(answer, &kvs, &n, ret_revision, &e) < 0)
                r = ctl_error(-EPROTO, "%s", e.message);
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

int fleet_get_json(EtcdClient *ec, const char *key, json_t **ret, uint64_t *ret_revision) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        EtcdKv *kvs = NULL;
        size_t n = 0;
        int r;

        *ret = NULL;
        *ret_revision = 0;
        r = fleet_call(ec, "/v3/kv/range", etcd_range_body(key, false), &answer);
        if (r < 0)
                return r;
        if (etcd_range_parse(answer, &kvs, &n, NULL, NULL) >= 0 && n == 1) {
                *ret = json_loadb(kvs[0].value, kvs[0].value_size, 0, NULL);
                *ret_revision = kvs[0].mod_revision;
        }
        etcd_kvs_free(kvs, n);
        return 0;
}

static int by_mod_revision(const void *a, const void *b) {
        const EtcdKv *x = a, *y = b;
        return x->mod_revision < y->mod_revision ? -1 : x->mod_revision > y->mod_revision;
}

int fleet_range_kvs(EtcdClient *ec, const char *prefix, bool keys_only, EtcdKv **ret, size_t *ret_n) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        json_t *body = etcd_range_body(prefix, true);
        int r;

        if (!body || (keys_only && json_object_set_new(body, "keys_only", json_true()) < 0)) {
                json_decref(body);
                return ctl_oom();
        }
        r = fleet_call(ec, "/v3/kv/range", body, &answer);
        if (r < 0)
                return r;
        if (etcd_range_parse(answer, ret, ret_n, NULL, NULL) < 0)
                return ctl_error(-EPROTO, "etcd answered a range that does not parse");
        qsort(*ret, *ret_n, sizeof(EtcdKv), by_mod_revision);
        return 0;
}

/* "k=v,k2=v2" of a labels object, into f. */
void fleet_labels_print(FILE *f, json_t *labels) {
        const char *k;
        json_t *v;

        json_object_foreach (labels, k, v)
                fprintf(f, "%s%s=%s", ftell(f) ? "," : "", k, json_string_value(v));
}

/* The JSON objects under kind/ in ret (nodes: with their leases); with --json they are printed as they are
 * and 1 returned. */
int fleet_rows(const Ctl *c, const char *kind, json_t **ret) {
        _cleanup_(etcd_client_freep) EtcdClient *ec = NULL;
        _cleanup_(json_decrefp) json_t *leases = NULL;
        int r;

        r = fleet_client(c, &ec);
        if (r < 0)
                return r;
        if (streq(kind, "nodes") && (r = fleet_live_leases(ec, &leases)) < 0)
                return r;
        return fleet_range_json(ec, c, kind, leases, ret, NULL);
}

int fleet_listing(const Ctl *c, const char *kind, json_t **ret) {
        int r = fleet_rows(c, kind, ret);

        if (r < 0 || !c->json)
                return r;
        r = ctl_print_json(*ret);
        return r < 0 ? r : 1;
}
