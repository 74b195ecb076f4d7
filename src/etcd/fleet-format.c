/* fleet-format.c: the fleet's keys under the prefix, node names and labels, a node's lease sized by the
 * fleet, and a fleet policy's envelope (its name and node selector around a policy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-rollout.h"
#include "etcd.h"
#include "oci-ref.h"
#include "macros.h"
#include "names.h"
#include "sha256.h"

char *fleet_key(const char *prefix, const char *kind, const char *name, const char *sub) {
        char *s = NULL;

        if (asprintf(&s, "%s%s/%s%s%s", prefix, kind, name ?: "", sub ? "/" : "", sub ?: "") < 0)
                return NULL;
        return s;
}

bool fleet_prefix_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n < 2 || n > 128 || s[0] != '/' || s[n - 1] != '/')
                return false;
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p <= ' ' || *p == 0x7f)
                        return false;
        return true;
}

bool fleet_node_name_valid(const char *s) {
        return name_valid(s, FLEET_NODE_NAME_MAX);
}

unsigned fleet_lease_ttl(unsigned configured, uint64_t nodes, unsigned expiries) {
        uint64_t ttl;

        if (configured)
                return configured;
        ttl = MAX((uint64_t) FLEET_LEASE_TTL_DEFAULT,
                  (3 * nodes + FLEET_KEEPALIVES_PER_SECOND - 1) / FLEET_KEEPALIVES_PER_SECOND);
        for (unsigned i = 0; i < expiries && ttl < FLEET_LEASE_TTL_SIZED_MAX; i++)
                ttl *= 2;
        return (unsigned) MIN(ttl, (uint64_t) FLEET_LEASE_TTL_SIZED_MAX);
}

static int label_add(FleetLabel **v, size_t *n, const char *key, const char *value, Error *reterr) {
        FleetLabel *nv;

        if (!name_valid(key, FLEET_LABEL_MAX) || !(value[0] == 0 || name_valid(value, FLEET_LABEL_MAX)))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "label %s=%s: keys and values are 1 to %d characters of A-Z a-z 0-9 - _ . "
                                 "(a value may be empty)",
                                 key, value, FLEET_LABEL_MAX);
        for (size_t i = 0; i < *n; i++)
                if (streq((*v)[i].key, key))
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "label %s: given twice", key);
        if (*n >= FLEET_LABELS_MAX)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "at most %d labels", FLEET_LABELS_MAX);
        nv = realloc(*v, (*n + 1) * sizeof(FleetLabel));
        if (!nv)
                return error_oom(reterr);
        *v = nv;
        snprintf(nv[*n].key, sizeof(nv[*n].key), "%s", key);
        snprintf(nv[*n].value, sizeof(nv[*n].value), "%s", value);
        (*n)++;
        return 0;
}

int fleet_labels_parse(const char *s, FleetLabel **ret, size_t *ret_n, Error *reterr) {
        _cleanup_free_ char *copy = strdup(s ?: "");
        _cleanup_free_ FleetLabel *v = NULL;
        size_t n = 0;
        char *save = NULL;

        if (!copy)
                return error_oom(reterr);
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(item, '=');
                if (!eq)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "label \"%s\": expected KEY=VALUE", item);
                *eq = 0;
                if (label_add(&v, &n, item, eq + 1, reterr) < 0)
                        return -EINVAL;
        }
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

json_t *fleet_labels_to_json(const FleetLabel *v, size_t n) {
        json_t *j = json_object();

        for (size_t i = 0; j && i < n; i++)
                if (json_object_set_new(j, v[i].key, json_string(v[i].value)) < 0) {
                        json_decref(j);
                        return NULL;
                }
        return j;
}

void fleet_policy_done(FleetPolicy *p) {
        free(p->name);
        free(p->labels);
        for (size_t i = 0; i < p->n_names; i++)
                free(p->names[i]);
        free(p->names);
        free(p->rollout.waves);
        free(p->health);
        free(p->signature);
        free(p->signed_text);
        json_decref(p->policy);
        *p = (FleetPolicy){ 0 };
}

static int parse_nodes(json_t *nodes, FleetPolicy *p, Error *reterr) {
        const char *key;
        json_t *v;

        if (!nodes || json_is_null(nodes)) {
                p->any_node = true;
                return 0;
        }
        if (!json_is_object(nodes))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "nodes: expected an object");
        json_object_foreach (nodes, key, v)
                if (!streq(key, "labels") && !streq(key, "names") && !streq(key, "kernel") &&
                    !streq(key, "features"))
                        return error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD, "nodes.%s: unknown field",
                                         key);
        if (fleet_gates_parse(nodes, p, reterr) < 0)
                return -EINVAL;
        json_t *labels = json_object_get(nodes, "labels"), *names = json_object_get(nodes, "names");
        if (labels && !json_is_object(labels))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "nodes.labels: expected an object");
        json_object_foreach (labels, key, v) {
                if (!json_is_string(v))
                        return error_set(reterr, EINVAL, ERROR_WRONG_TYPE,
                                         "nodes.labels.%s: expected a string", key);
                if (label_add(&p->labels, &p->n_labels, key, json_string_value(v), reterr) < 0)
                        return -EINVAL;
        }
        if (names && !json_is_array(names))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "nodes.names: expected an array");
        p->names = calloc(json_array_size(names) + 1, sizeof(char *));
        if (!p->names)
                return error_oom(reterr);
        for (size_t i = 0; i < json_array_size(names); i++) {
                const char *s = json_string_value(json_array_get(names, i));
                if (!fleet_node_name_valid(s))
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "nodes.names[%zu]: expected a node name (1 to %d characters of "
                                         "A-Z a-z 0-9 - _ .)",
                                         i, FLEET_NODE_NAME_MAX);
                if (!(p->names[p->n_names++] = strdup(s)))
                        return error_oom(reterr);
        }
        if (p->n_labels == 0 && p->n_names == 0) {
                if (p->kernel_cmp != FLEET_CMP_NONE || p->need_tcx || p->need_act_bpf) {
                        p->any_node = true; /* every node the gates let in */
                        return 0;
                }
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "nodes: give \"labels\", \"names\", \"kernel\" or \"features\" (or leave "
                                 "\"nodes\" out for every node)");
        }
        return 0;
}

/* A removal ("removed": true) has its name and signature, nothing else. */
static int removal_check(json_t *j, Error *reterr) {
        const char *key;
        json_t *v;

        json_object_foreach (j, key, v)
                if (!streq(key, "name") && !streq(key, "removed") && !streq(key, "signed"))
                        return error_set(
                                reterr, EINVAL, ERROR_UNKNOWN_FIELD,
                                "%s: a removal (\"removed\": true) has only \"name\" and \"signed\"", key);
        return 0;
}

/* A field of the envelope, not of the policy within it. */
static bool envelope_field(const char *key, bool removed) {
        return streq(key, "name") || streq(key, "nodes") || streq(key, "rollout") || streq(key, "health") ||
               streq(key, "signed") || streq(key, "selected") || (removed && streq(key, "removed"));
}

/* A policy's selector, rollout, health checks and "selected" count, into p. */
static int parse_targeting(json_t *j, FleetPolicy *p, Error *reterr) {
        json_t *v;
        int r;

        r = parse_nodes(json_object_get(j, "nodes"), p, reterr);
        if (r < 0)
                return r;
        r = fleet_rollout_parse(json_object_get(j, "rollout"), &p->rollout, reterr);
        if (r < 0)
                return r;
        r = fleet_health_parse(json_object_get(j, "health"), &p->health, &p->n_health, reterr);
        if (r < 0)
                return r;
        v = json_object_get(j, "selected");
        if (v && (!json_is_integer(v) || json_integer_value(v) < 0))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "selected: the count of nodes it selected when applied");
        if (v)
                p->selected = (uint64_t) json_integer_value(v);
        return 0;
}

int fleet_policy_parse(json_t *j, FleetPolicy *ret, Error *reterr) {
        _cleanup_(fleet_policy_done) FleetPolicy p = { 0 };
        const char *key;
        json_t *v;
        int r;

        if (!json_is_object(j))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "a fleet policy is a JSON object");
        v = json_object_get(j, "name");
        if (!json_is_string(v) || !name_valid(json_string_value(v), 64))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "name: required, 1 to 64 characters of A-Z a-z 0-9 - _ .");
        const char *name = json_string_value(v);
        p.removed = p.any_node = json_is_true(json_object_get(j, "removed"));
        /* a signed removal: nothing else but its name and signature */
        r = p.removed ? removal_check(j, reterr) : parse_targeting(j, &p, reterr);
        if (r < 0)
                return r;
        r = fleet_signed_parse(j, &p, reterr);
        if (r < 0)
                return r;
        if (!(p.name = strdup(name)) || !(p.policy = json_object()))
                return error_oom(reterr);
        /* the policy as clsd's API takes it: the envelope's fields left out */
        json_object_foreach (j, key, v)
                if (!envelope_field(key, p.removed) && json_object_set(p.policy, key, v) < 0)
                        return error_oom(reterr);
        r = fleet_health_check_metrics(p.health, p.n_health, p.policy, reterr);
        if (r < 0)
                return r;
        *ret = p;
        p = (FleetPolicy){ 0 };
        return 0;
}

bool fleet_policy_selects(const FleetPolicy *p, const char *node, const FleetLabel *labels,
                          size_t n_labels) {
        if (p->any_node)
                return true;
        for (size_t i = 0; i < p->n_names; i++)
                if (streq(p->names[i], node))
                        return true;
        if (p->n_labels == 0)
                return false;
        for (size_t i = 0; i < p->n_labels; i++) {
                bool found = false;
                for (size_t k = 0; k < n_labels && !found; k++)
                        found = streq(labels[k].key, p->labels[i].key) &&
                                streq(labels[k].value, p->labels[i].value);
                if (!found)
                        return false;
        }
        return true;
}

static int digest_add(const char ***v, size_t *n, json_t *object, const char *where, Error *reterr) {
        const char *s = json_string_value(object);
        const char **nv;

        if (!object || oci_ref_is(s)) /* an image: each node pulls it from its registry */
                return 0;
        if (!s || !sha256_digest_string_valid(s))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s.object: a fleet policy names its objects by digest or by image "
                                 "(clsctl fleet apply uploads a file it names and writes its digest)",
                                 where);
        for (size_t i = 0; i < *n; i++)
                if (streq((*v)[i], s))
                        return 0;
        nv = realloc(*v, (*n + 2) * sizeof(char *));
        if (!nv)
                return error_oom(reterr);
        nv[(*n)++] = s;
        nv[*n] = NULL;
        *v = nv;
        return 0;
}

int fleet_policy_read(const char *name, const char *value, size_t size, FleetPolicy *ret, Error *reterr) {
        json_error_t jerr;
        _cleanup_(json_decrefp) json_t *j = json_loadb(value, size, JSON_REJECT_DUPLICATES, &jerr);

        if (!j)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "not JSON: %s", jerr.text);
        if (fleet_policy_parse(j, ret, reterr) < 0)
                return -EINVAL;
        if (!streq(ret->name, name)) {
                error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "its name \"%s\" is not its key's \"%s\"",
                          ret->name, name);
                fleet_policy_done(ret);
                return -EINVAL;
        }
        return 0;
}

int fleet_policy_digests(const FleetPolicy *p, const char ***ret, Error *reterr) {
        static const char *const hooks[] = { "ingress", "egress" };
        const char **v = calloc(1, sizeof(char *));
        size_t n = 0;
        char where[64];

        if (!v)
                return error_oom(reterr);
        for (size_t h = 0; h < ELEMENTSOF(hooks); h++) {
                json_t *filters = json_object_get(p->policy, hooks[h]);
                for (size_t i = 0; i < json_array_size(filters); i++) {
                        json_t *f = json_array_get(filters, i), *actions = json_object_get(f, "actions");
                        snprintf(where, sizeof(where), "%s[%zu]", hooks[h], i);
                        if (digest_add(&v, &n, json_object_get(f, "object"), where, reterr) < 0)
                                goto fail;
                        for (size_t k = 0; k < json_array_size(actions); k++) {
                                snprintf(where, sizeof(where), "%s[%zu].actions[%zu]", hooks[h], i, k);
                                if (digest_add(&v, &n, json_object_get(json_array_get(actions, k), "object"),
                                               where, reterr) < 0)
                                        goto fail;
                        }
                }
        }
        *ret = v;
        return 0;
fail:
        free(v);
        return -EINVAL;
}
