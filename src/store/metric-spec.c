/* metric-spec.c: a filter's "metrics": Prometheus metrics derived from its program's maps, in the spirit
 * of ebpf_exporter (a map, a metric name and type, labels decoded from the key, the value summed over
 * CPUs), parsed strictly and written back normalised. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "store.h"

static const char *const metric_types[_METRIC_TYPE_MAX] = {
        [METRIC_COUNTER] = "counter",
        [METRIC_GAUGE] = "gauge",
        [METRIC_HISTOGRAM] = "histogram",
};

const char *metric_type_to_string(MetricType t) {
        return t < _METRIC_TYPE_MAX ? metric_types[t] : NULL;
}

/* Field paths for messages: cut short rather than overflow (they quote what the client sent). */
_printf_(3, 4) static void pathf(char *buf, size_t size, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(buf, size, fmt, ap);
        va_end(ap);
}

/* The labels clsd puts on every series of a map-derived metric itself. */
static const char *const reserved_labels[] = { "netns", "ifname", "direction", "name", "pref", "le", NULL };

void metric_specs_free(MetricSpec *v, size_t n) {
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].map);
                free(v[i].name);
                free(v[i].help);
                free(v[i].value);
                free(v[i].bucket);
                for (size_t k = 0; k < v[i].n_labels; k++) {
                        free(v[i].labels[k].name);
                        free(v[i].labels[k].from);
                }
                free(v[i].labels);
                free(v[i].buckets);
        }
        free(v);
}

bool metric_name_valid(const char *s) {
        if (!s[0] || strlen(s) > METRIC_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
                return false;
        for (const char *c = s; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      *c == '_' || *c == ':'))
                        return false;
        return true;
}

static bool label_name_valid(const char *s) {
        return metric_name_valid(s) && !strchr(s, ':') && strncmp(s, "__", 2) != 0;
}

/* "key", "key.a.b" (from the key) or, for a value path, "a.b" inside the value. */
static bool field_path_valid(const char *s, bool key) {
        const char *rest = s;

        if (key) {
                if (strncmp(s, "key", 3) != 0 || (s[3] && s[3] != '.'))
                        return false;
                if (!s[3])
                        return true;
                rest = s + 4;
        }
        if (!rest[0] || strlen(rest) > METRIC_NAME_MAX)
                return false;
        for (const char *c = rest; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      *c == '_' || (*c == '.' && c != rest && c[1] && c[1] != '.')))
                        return false;
        return true;
}

static int bad(Error *reterr, ErrorCode code, const char *path, const char *what) {
        return error_set(reterr, EINVAL, code, "%s: %s", path, what);
}

static int string_field(json_t *m, const char *field, const char *path, bool required, char **ret,
                        Error *reterr) {
        json_t *v = json_object_get(m, field);
        char p[600];

        pathf(p, sizeof(p), "%s.%s", path, field);
        if (!v || json_is_null(v))
                return required ? bad(reterr, ERROR_MISSING_FIELD, p, "is required") : 0;
        if (!json_is_string(v))
                return bad(reterr, ERROR_WRONG_TYPE, p, "expected a string");
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : error_oom(reterr);
}

static int parse_labels(json_t *j, const char *path, MetricSpec *s, Error *reterr) {
        char p[600];
        size_t i;
        json_t *l;

        if (!json_is_array(j))
                return bad(reterr, ERROR_WRONG_TYPE, path, "expected an array of {\"name\", \"from\"}");
        if (json_array_size(j) > METRIC_LABELS_MAX)
                return bad(reterr, ERROR_INVALID_VALUE, path, "at most 8 labels");
        s->labels = calloc(json_array_size(j) + 1, sizeof(MetricLabel));
        if (!s->labels)
                return error_oom(reterr);
        json_array_foreach (j, i, l) {
                MetricLabel *ml = &s->labels[s->n_labels];
                const char *k;
                json_t *x;
                int r;

                pathf(p, sizeof(p), "%s[%zu]", path, i);
                if (!json_is_object(l))
                        return bad(reterr, ERROR_WRONG_TYPE, p, "expected {\"name\", \"from\"}");
                json_object_foreach (l, k, x)
                        if (!streq(k, "name") && !streq(k, "from"))
                                return error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD,
                                                 "%s.%s: unknown field (known: name, from)", p, k);
                s->n_labels++;
                r = string_field(l, "name", p, true, &ml->name, reterr);
                if (r < 0)
                        return r;
                r = string_field(l, "from", p, true, &ml->from, reterr);
                if (r < 0)
                        return r;
                pathf(p, sizeof(p), "%s[%zu].name", path, i);
                if (!label_name_valid(ml->name))
                        return bad(reterr, ERROR_INVALID_VALUE, p,
                                   "not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not __*)");
                for (const char *const *rl = reserved_labels; *rl; rl++)
                        if (streq(ml->name, *rl))
                                return bad(
                                        reterr, ERROR_INVALID_VALUE, p,
                                        "netns, ifname, direction, name, pref and le are clsd's own labels");
                for (size_t k2 = 0; k2 + 1 < s->n_labels; k2++)
                        if (streq(s->labels[k2].name, ml->name))
                                return bad(reterr, ERROR_INVALID_VALUE, p, "two labels of this name");
                pathf(p, sizeof(p), "%s[%zu].from", path, i);
                if (!field_path_valid(ml->from, true))
                        return bad(reterr, ERROR_INVALID_VALUE, p,
                                   "expected \"key\" or \"key.FIELD[.FIELD...]\"");
        }
        return 0;
}

static int parse_buckets(json_t *j, const char *path, MetricSpec *s, Error *reterr) {
        size_t i;
        json_t *b;

        if (!json_is_array(j) || json_array_size(j) == 0)
                return bad(reterr, ERROR_WRONG_TYPE, path,
                           "expected a non-empty array of bucket upper bounds");
        if (json_array_size(j) > METRIC_BUCKETS_MAX)
                return bad(reterr, ERROR_INVALID_VALUE, path, "at most 64 buckets");
        s->buckets = calloc(json_array_size(j) + 1, sizeof(double));
        if (!s->buckets)
                return error_oom(reterr);
        json_array_foreach (j, i, b) {
                if (!json_is_number(b))
                        return bad(reterr, ERROR_WRONG_TYPE, path, "bucket bounds are numbers");
                s->buckets[i] = json_number_value(b);
                if (i > 0 && s->buckets[i] <= s->buckets[i - 1])
                        return bad(reterr, ERROR_INVALID_VALUE, path, "bucket bounds must increase");
                s->n_buckets++;
        }
        return 0;
}

static int parse_one(json_t *m, const char *path, MetricSpec *s, Error *reterr) {
        static const char *const known[] = { "map",   "name",    "type",   "help", "labels",
                                             "value", "buckets", "bucket", NULL };
        _cleanup_free_ char *type = NULL;
        char p[600];
        const char *k;
        json_t *x;
        int r;

        if (!json_is_object(m))
                return bad(reterr, ERROR_WRONG_TYPE, path, "expected an object");
        json_object_foreach (m, k, x) {
                bool ok = false;
                for (const char *const *kn = known; *kn; kn++)
                        ok = ok || streq(*kn, k);
                if (!ok)
                        return error_set(
                                reterr, EINVAL, ERROR_UNKNOWN_FIELD,
                                "%s.%s: unknown field (known: map, name, type, help, labels, value, "
                                "buckets, bucket)",
                                path, k);
        }
        if ((r = string_field(m, "map", path, true, &s->map, reterr)) < 0 ||
            (r = string_field(m, "name", path, true, &s->name, reterr)) < 0 ||
            (r = string_field(m, "type", path, true, &type, reterr)) < 0 ||
            (r = string_field(m, "help", path, false, &s->help, reterr)) < 0 ||
            (r = string_field(m, "value", path, false, &s->value, reterr)) < 0 ||
            (r = string_field(m, "bucket", path, false, &s->bucket, reterr)) < 0)
                return r;
        pathf(p, sizeof(p), "%s.name", path);
        if (strlen(s->name) > METRIC_NAME_MAX)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: %zu characters, more than the %d a metric name "
                                 "may have here",
                                 p, strlen(s->name), METRIC_NAME_MAX);
        if (!metric_name_valid(s->name))
                return bad(reterr, ERROR_INVALID_VALUE, p,
                           "not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
        if (strncmp(s->name, "clsd_", 5) == 0)
                return bad(reterr, ERROR_INVALID_VALUE, p,
                           "names starting with clsd_ are clsd's own metrics");
        pathf(p, sizeof(p), "%s.type", path);
        s->type = _METRIC_TYPE_MAX;
        for (MetricType t = 0; t < _METRIC_TYPE_MAX; t++)
                if (streq(type, metric_types[t]))
                        s->type = t;
        if (s->type == _METRIC_TYPE_MAX)
                return bad(reterr, ERROR_INVALID_VALUE, p,
                           "expected \"counter\", \"gauge\" or \"histogram\"");
        pathf(p, sizeof(p), "%s.value", path);
        if (s->value && !field_path_valid(s->value, false))
                return bad(reterr, ERROR_INVALID_VALUE, p,
                           "expected a field of the map's value, like \"bytes\"");
        x = json_object_get(m, "labels");
        pathf(p, sizeof(p), "%s.labels", path);
        if (x && !json_is_null(x) && (r = parse_labels(x, p, s, reterr)) < 0)
                return r;
        x = json_object_get(m, "buckets");
        pathf(p, sizeof(p), "%s.buckets", path);
        if (s->type == METRIC_HISTOGRAM) {
                if (!x || json_is_null(x))
                        return bad(reterr, ERROR_MISSING_FIELD, p,
                                   "a histogram needs the upper bound of each bucket (its key's index)");
                if ((r = parse_buckets(x, p, s, reterr)) < 0)
                        return r;
                pathf(p, sizeof(p), "%s.bucket", path);
                if (s->bucket && !field_path_valid(s->bucket, true))
                        return bad(reterr, ERROR_INVALID_VALUE, p, "expected \"key\" or \"key.FIELD\"");
        } else if ((x && !json_is_null(x)) || s->bucket)
                return bad(reterr, ERROR_INVALID_VALUE, p, "buckets and bucket are for histograms");
        return 0;
}

int metric_specs_parse(json_t *j, const char *path, MetricSpec **ret, size_t *ret_n, Error *reterr) {
        MetricSpec *v;
        char p[600];
        size_t i, n = 0;
        json_t *m;

        if (!json_is_array(j))
                return bad(reterr, ERROR_WRONG_TYPE, path, "expected an array of metrics");
        if (json_array_size(j) > METRICS_PER_FILTER_MAX)
                return bad(reterr, ERROR_INVALID_VALUE, path, "at most 16 metrics per filter");
        v = calloc(json_array_size(j) + 1, sizeof(MetricSpec));
        if (!v)
                return error_oom(reterr);
        json_array_foreach (j, i, m) {
                int r;

                pathf(p, sizeof(p), "%s[%zu]", path, i);
                n++;
                r = parse_one(m, p, &v[i], reterr);
                for (size_t k = 0; r >= 0 && k < i; k++)
                        if (streq(v[k].name, v[i].name))
                                r = bad(reterr, ERROR_INVALID_VALUE, p,
                                        "two metrics of this name in one filter");
                if (r < 0) {
                        metric_specs_free(v, n);
                        return r;
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

json_t *metric_specs_to_json(const MetricSpec *v, size_t n) {
        json_t *list = json_array();

        for (size_t i = 0; i < n; i++) {
                const MetricSpec *s = &v[i];
                json_t *j = json_pack("{s:s,s:s,s:s}", "map", s->map, "name", s->name, "type",
                                      metric_type_to_string(s->type));
                if (s->help)
                        json_object_set_new(j, "help", json_string(s->help));
                if (s->n_labels) {
                        json_t *labels = json_array();
                        for (size_t k = 0; k < s->n_labels; k++)
                                json_array_append_new(labels,
                                                      json_pack("{s:s,s:s}", "name", s->labels[k].name,
                                                                "from", s->labels[k].from));
                        json_object_set_new(j, "labels", labels);
                }
                if (s->value)
                        json_object_set_new(j, "value", json_string(s->value));
                if (s->type == METRIC_HISTOGRAM) {
                        json_t *b = json_array();
                        for (size_t k = 0; k < s->n_buckets; k++)
                                json_array_append_new(b, json_real(s->buckets[k]));
                        json_object_set_new(j, "buckets", b);
                        if (s->bucket)
                                json_object_set_new(j, "bucket", json_string(s->bucket));
                }
                json_array_append_new(list, j);
        }
        return list;
}
