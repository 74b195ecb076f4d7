/* rollout-spec.c: the parts of a fleet policy's envelope about how it rolls out, parsed strictly:
 * "rollout" (waves, hold, confirm, max_unhealthy, spread, id), "health" (checks over the policy's
 * metrics) and the selector's kernel gates ("nodes": {"kernel", "features"}), and whether a node's facts
 * meet them. Pure. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-rollout.h"
#include "names.h"

#define HOLD_DEFAULT_USEC (60 * 1000000ULL)
#define CONFIRM_DEFAULT_USEC (20 * 1000000ULL)
#define DURATION_MAX_USEC (24 * 3600 * 1000000ULL)

/* The shortest dead-man switch: etcd is asked four times within it (the node's pings, 250 ms apart). */
#define CONFIRM_MIN_USEC 1000000ULL

int fleet_duration_parse(json_t *j, uint64_t *ret_usec) {
        const char *s = json_string_value(j);
        double v;
        char *end;

        if (json_is_integer(j) || json_is_real(j)) {
                v = json_number_value(j);
                if (v < 0 || v * 1e6 > (double) DURATION_MAX_USEC)
                        return -ERANGE;
                *ret_usec = (uint64_t) llround(v * 1e6);
                return 0;
        }
        if (!s || !*s || !isdigit((unsigned char) *s))
                return -EINVAL;
        v = strtod(s, &end);
        if (streq(end, "ms"))
                v /= 1000;
        else if (streq(end, "m"))
                v *= 60;
        else if (streq(end, "h"))
                v *= 3600;
        else if (!streq(end, "s") && *end)
                return -EINVAL;
        if (v < 0 || v * 1e6 > (double) DURATION_MAX_USEC)
                return -ERANGE;
        *ret_usec = (uint64_t) llround(v * 1e6);
        return 0;
}

/* A wave: a count (a JSON number, or on clsctl's command line a plain number) or a percentage (a string
 * ending in '%'). In a document a count is a number: "50" without '%' is neither, and refused rather than
 * guessed at. */
static int wave_parse(json_t *j, const char *s, FleetWave *ret) {
        char *end;
        long v;

        if (json_is_integer(j)) {
                if (json_integer_value(j) < 1 || json_integer_value(j) > 1000000)
                        return -EINVAL;
                *ret = (FleetWave){ .value = (unsigned) json_integer_value(j) };
                return 0;
        }
        bool from_json = !s;
        s = s ?: json_string_value(j);
        if (!s || !isdigit((unsigned char) *s))
                return -EINVAL;
        v = strtol(s, &end, 10);
        if (v < 1 || (*end == '%' && (end[1] || v > 100)) || (*end && *end != '%') || v > 1000000)
                return -EINVAL;
        if (from_json && *end != '%')
                return -EINVAL;
        *ret = (FleetWave){ .value = (unsigned) v, .percent = *end == '%' };
        return 0;
}

/* Waves grow: each reaches more nodes than the one before, whatever the fleet's size. Among counts, and
 * among percentages, that is a larger number; a percentage may follow a count (it is the fleet's share
 * from there on, and a wave that would reach no more is left out of the plan), but a count after a
 * percentage could reach fewer nodes than it on a large fleet ("100%", 1): refused, as [2, 1] is. Nothing
 * follows "100%". */
static int waves_check(const FleetWave *v, size_t n, Error *reterr) {
        if (n == 0 || n > FLEET_WAVES_MAX)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "rollout.waves: 1 to %d waves",
                                 FLEET_WAVES_MAX);
        for (size_t i = 1; i < n; i++) {
                if (v[i - 1].percent && v[i - 1].value == 100)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "rollout.waves[%zu]: \"100%%\" is the last wave (every node)", i);
                if (v[i - 1].percent && !v[i].percent)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "rollout.waves[%zu]: a count after a percentage may reach fewer "
                                         "nodes than it; counts come first (1, 5, \"50%%\", \"100%%\")",
                                         i);
                if (v[i].percent == v[i - 1].percent && v[i].value <= v[i - 1].value)
                        return error_set(
                                reterr, EINVAL, ERROR_INVALID_VALUE,
                                "rollout.waves[%zu]: each wave reaches more nodes than the one before", i);
        }
        return 0;
}

int fleet_waves_parse(const char *s, FleetWave **ret, size_t *ret_n, Error *reterr) {
        _cleanup_free_ char *copy = strdup(s ?: "");
        FleetWave *v = calloc(FLEET_WAVES_MAX + 1, sizeof(FleetWave));
        char *save = NULL;
        size_t n = 0;

        if (!copy || !v) {
                free(v);
                return error_oom(reterr);
        }
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                if (n == FLEET_WAVES_MAX || wave_parse(NULL, item, &v[n]) < 0) {
                        free(v);
                        return error_set(
                                reterr, EINVAL, ERROR_INVALID_VALUE,
                                "--waves %s: expected 1 to %d counts or percentages (\"1,10%%,100%%\")", s,
                                FLEET_WAVES_MAX);
                }
                n++;
        }
        if (waves_check(v, n, reterr) < 0) {
                free(v);
                return -EINVAL;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

json_t *fleet_waves_to_json(const FleetWave *v, size_t n) {
        json_t *a = json_array();
        char buf[16];

        for (size_t i = 0; a && i < n; i++) {
                snprintf(buf, sizeof(buf), "%u%%", v[i].value);
                if (json_array_append_new(a, v[i].percent ? json_string(buf) : json_integer(v[i].value)) <
                    0) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

static bool id_valid(const char *s) {
        return name_valid(s, FLEET_ROLLOUT_ID_MAX);
}

int fleet_rollout_parse(json_t *j, FleetRollout *ret, Error *reterr) {
        static const FleetWave defaults[] = { { 1, false }, { 10, true }, { 50, true }, { 100, true } };
        FleetRollout r = { .present = true,
                           .hold_usec = HOLD_DEFAULT_USEC,
                           .confirm_usec = CONFIRM_DEFAULT_USEC };
        const char *key;
        json_t *v;

        *ret = (FleetRollout){ 0 };
        if (!j || json_is_null(j))
                return 0;
        if (!json_is_object(j))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "rollout: expected an object");
        json_object_foreach (j, key, v) {
                if (streq(key, "waves")) {
                        if (!json_is_array(v) || json_array_size(v) == 0 ||
                            json_array_size(v) > FLEET_WAVES_MAX)
                                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                 "rollout.waves: a list of 1 to %d counts or percentages",
                                                 FLEET_WAVES_MAX);
                        free(r.waves);
                        r.waves = calloc(json_array_size(v), sizeof(FleetWave));
                        if (!r.waves)
                                return error_oom(reterr);
                        r.n_waves = json_array_size(v);
                        for (size_t i = 0; i < r.n_waves; i++)
                                if (wave_parse(json_array_get(v, i), NULL, &r.waves[i]) < 0) {
                                        free(r.waves);
                                        return error_set(
                                                reterr, EINVAL, ERROR_INVALID_VALUE,
                                                "rollout.waves[%zu]: a count (1, 2, …: a number) or a "
                                                "percentage (\"10%%\": a string)",
                                                i);
                                }
                } else if (streq(key, "hold") || streq(key, "confirm")) {
                        uint64_t *dst = streq(key, "hold") ? &r.hold_usec : &r.confirm_usec;
                        if (fleet_duration_parse(v, dst) < 0) {
                                free(r.waves);
                                return error_set(
                                        reterr, EINVAL, ERROR_INVALID_VALUE,
                                        "rollout.%s: a duration (\"60s\", \"500ms\", \"2m\") up to a day",
                                        key);
                        }
                        if (dst == &r.confirm_usec && *dst > 0 && *dst < CONFIRM_MIN_USEC) {
                                free(r.waves);
                                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                 "rollout.confirm: 0 (no dead-man switch) or at least 1s: "
                                                 "a healthy node must hear from etcd within it");
                        }
                } else if (streq(key, "max_unhealthy")) {
                        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                            json_integer_value(v) > 1000000) {
                                free(r.waves);
                                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                 "rollout.max_unhealthy: a count of nodes (0 or more)");
                        }
                        r.max_unhealthy = (unsigned) json_integer_value(v);
                } else if (streq(key, "spread")) {
                        if (!json_is_string(v) || !name_valid(json_string_value(v), FLEET_LABEL_MAX)) {
                                free(r.waves);
                                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                 "rollout.spread: a label's name");
                        }
                        snprintf(r.spread, sizeof(r.spread), "%s", json_string_value(v));
                } else if (streq(key, "id")) {
                        if (!json_is_string(v) || !id_valid(json_string_value(v))) {
                                free(r.waves);
                                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                 "rollout.id: 1 to %d characters of A-Z a-z 0-9 - _ .",
                                                 FLEET_ROLLOUT_ID_MAX);
                        }
                        snprintf(r.id, sizeof(r.id), "%s", json_string_value(v));
                } else {
                        free(r.waves);
                        return error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD, "rollout.%s: unknown field",
                                         key);
                }
        }
        if (!r.waves) {
                r.waves = malloc(sizeof(defaults));
                if (!r.waves)
                        return error_oom(reterr);
                memcpy(r.waves, defaults, sizeof(defaults));
                r.n_waves = ELEMENTSOF(defaults);
        }
        if (waves_check(r.waves, r.n_waves, reterr) < 0) {
                free(r.waves);
                return -EINVAL;
        }
        *ret = r;
        return 0;
}

static bool policy_has_metric(json_t *policy, const char *metric) {
        static const char *const hooks[] = { "ingress", "egress" };

        for (size_t h = 0; h < ELEMENTSOF(hooks); h++) {
                json_t *filter, *spec;
                size_t i, k;
                json_array_foreach (json_object_get(policy, hooks[h]), i, filter)
                        json_array_foreach (json_object_get(filter, "metrics"), k, spec)
                                if (streq(strempty(json_string_value(json_object_get(spec, "name"))),
                                          metric))
                                        return true;
        }
        return false;
}

int fleet_health_check_metrics(const FleetHealthCheck *v, size_t n, json_t *policy, Error *reterr) {
        for (size_t i = 0; i < n; i++)
                if (!policy_has_metric(policy, v[i].metric))
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "health[%zu].metric: the policy's filters have no metric %s "
                                         "(their \"metrics\": [{\"name\": …}])",
                                         i, v[i].metric);
        return 0;
}

int fleet_health_parse(json_t *j, FleetHealthCheck **ret, size_t *ret_n, Error *reterr) {
        FleetHealthCheck *v;
        size_t n;

        *ret = NULL;
        *ret_n = 0;
        if (!j || json_is_null(j))
                return 0;
        if (!json_is_array(j) || json_array_size(j) > 16)
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "health: a list of up to 16 checks");
        n = json_array_size(j);
        v = calloc(n + 1, sizeof(FleetHealthCheck));
        if (!v)
                return error_oom(reterr);
        for (size_t i = 0; i < n; i++) {
                json_t *c = json_array_get(j, i), *x;
                const char *key, *metric = json_string_value(json_object_get(c, "metric"));
                int r = 0;

                if (!json_is_object(c) || !metric || !metric[0] || strlen(metric) >= sizeof(v[i].metric))
                        r = error_set(
                                reterr, EINVAL, ERROR_INVALID_VALUE,
                                "health[%zu]: {\"metric\": NAME, \"max_rate\": N and/or \"min_rate\": N}",
                                i);
                json_object_foreach (c, key, x)
                        if (r >= 0 && !streq(key, "metric") && !streq(key, "max_rate") &&
                            !streq(key, "min_rate"))
                                r = error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD,
                                              "health[%zu].%s: unknown field", i, key);
                if (r < 0) {
                        free(v);
                        return r;
                }
                snprintf(v[i].metric, sizeof(v[i].metric), "%s", metric);
                for (int k = 0; k < 2; k++) {
                        json_t *rate = json_object_get(c, k == 0 ? "max_rate" : "min_rate");
                        if (!rate)
                                continue;
                        if (!json_is_number(rate) || json_number_value(rate) < 0) {
                                free(v);
                                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                 "health[%zu].%s: a rate per second (0 or more)", i,
                                                 k == 0 ? "max_rate" : "min_rate");
                        }
                        if (k == 0)
                                v[i].has_max = true, v[i].max_rate = json_number_value(rate);
                        else
                                v[i].has_min = true, v[i].min_rate = json_number_value(rate);
                }
                if (!v[i].has_max && !v[i].has_min) {
                        free(v);
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "health[%zu]: give \"max_rate\" or \"min_rate\"", i);
                }
                if (v[i].has_max && v[i].has_min && v[i].min_rate > v[i].max_rate) {
                        double min = v[i].min_rate, max = v[i].max_rate;

                        free(v);
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "health[%zu]: min_rate %g is above max_rate %g: no rate meets both",
                                         i, min, max);
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* "6.6", "6.1.0-57-amd64": up to three numbers. */
static int version_parse(const char *s, unsigned v[3]) {
        v[0] = v[1] = v[2] = 0;
        for (int i = 0; i < 3; i++) {
                char *end;
                if (!isdigit((unsigned char) *s))
                        return i > 0 ? 0 : -EINVAL;
                v[i] = (unsigned) strtoul(s, &end, 10);
                s = end;
                if (*s != '.')
                        return 0;
                s++;
        }
        return 0;
}

static int version_cmp(const unsigned a[3], const unsigned b[3]) {
        for (int i = 0; i < 3; i++)
                if (a[i] != b[i])
                        return a[i] < b[i] ? -1 : 1;
        return 0;
}

static const char *const cmp_names[] = {
        [FLEET_CMP_GE] = ">=", [FLEET_CMP_GT] = ">", [FLEET_CMP_LE] = "<=",
        [FLEET_CMP_LT] = "<",  [FLEET_CMP_EQ] = "=",
};

int fleet_gates_parse(json_t *nodes, FleetPolicy *p, Error *reterr) {
        const char *kernel = json_string_value(json_object_get(nodes, "kernel"));
        json_t *features = json_object_get(nodes, "features");

        if (json_object_get(nodes, "kernel")) {
                static const FleetCompare order[] = { FLEET_CMP_GE, FLEET_CMP_LE, FLEET_CMP_GT, FLEET_CMP_LT,
                                                      FLEET_CMP_EQ };
                for (size_t i = 0; kernel && i < ELEMENTSOF(order) && p->kernel_cmp == FLEET_CMP_NONE; i++)
                        if (strncmp(kernel, cmp_names[order[i]], strlen(cmp_names[order[i]])) == 0) {
                                p->kernel_cmp = order[i];
                                kernel += strlen(cmp_names[order[i]]);
                        }
                if (p->kernel_cmp == FLEET_CMP_NONE || version_parse(kernel, p->kernel) < 0)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "nodes.kernel: a comparison and a version (\">=6.6\", \"<6.1\", "
                                         "\"=6.1.0\")");
        }
        if (features && !json_is_array(features))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE,
                                 "nodes.features: a list (\"tcx\", \"act_bpf\")");
        for (size_t i = 0; i < json_array_size(features); i++) {
                const char *s = json_string_value(json_array_get(features, i));
                if (streq_ptr(s, "tcx"))
                        p->need_tcx = true;
                else if (streq_ptr(s, "act_bpf"))
                        p->need_act_bpf = true;
                else
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "nodes.features[%zu]: \"tcx\" or \"act_bpf\" (what a node records)",
                                         i);
        }
        return 0;
}

bool fleet_policy_qualifies(const FleetPolicy *p, const FleetNodeFacts *facts, char *why, size_t size) {
        unsigned have[3];

        if (p->kernel_cmp != FLEET_CMP_NONE) {
                int c = facts->kernel && version_parse(facts->kernel, have) >= 0
                                ? version_cmp(have, p->kernel)
                                : -2;
                bool ok = c != -2 && (p->kernel_cmp == FLEET_CMP_GE   ? c >= 0
                                      : p->kernel_cmp == FLEET_CMP_GT ? c > 0
                                      : p->kernel_cmp == FLEET_CMP_LE ? c <= 0
                                      : p->kernel_cmp == FLEET_CMP_LT ? c < 0
                                                                      : c == 0);
                if (!ok) {
                        snprintf(why, size, "kernel %s is not %s%u.%u%s", facts->kernel ?: "(unknown)",
                                 cmp_names[p->kernel_cmp], p->kernel[0], p->kernel[1],
                                 p->kernel[2] ? ".x" : "");
                        if (p->kernel[2])
                                snprintf(why, size, "kernel %s is not %s%u.%u.%u",
                                         facts->kernel ?: "(unknown)", cmp_names[p->kernel_cmp],
                                         p->kernel[0], p->kernel[1], p->kernel[2]);
                        return false;
                }
        }
        if (p->need_tcx && !facts->tcx) {
                snprintf(why, size, "this kernel has no tcx");
                return false;
        }
        if (p->need_act_bpf && !facts->act_bpf) {
                snprintf(why, size, "this kernel has no act_bpf");
                return false;
        }
        return true;
}
