/* map-metrics.c: the metrics documents derive from their programs' maps ("metrics": counters, gauges,
 * histograms over a map's entries, labelled from their keys): each resolved once through BTF per scrape,
 * summed over the filters that share a map, written as families and samples. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btf.h"
#include "log.h"
#include "manager.h"
#include "map-metrics.h"
#include "daemon-fleet.h"
#include "daemon-maps.h"
#include "daemon-metrics.h"
#include "daemon-policies.h"
#include "nl-map.h"
#include "store-policy.h"

#define LABEL_VALUE_MAX 256

size_t metric_filter_labels(const Iface *it, const Filter *f, char pref[8],
                            const char *v[2 * FILTER_LABELS]) {
        const Policy *policy = f->source == SOURCE_POLICY ? it->hook_policy[f->dir] : NULL;
        char *p = pref + 7;
        uint32_t x = MIN(f->spec->priority, 9999999u); /* 1 to 65535 */

        *p = 0;
        do
                *--p = (char) ('0' + x % 10);
        while ((x /= 10) && p > pref);
        memmove(pref, p, (size_t) (pref + 8 - p));
        v[0] = "netns", v[1] = it->netns ? it->netns : "";
        v[2] = "ifname", v[3] = it->ifname;
        v[4] = "direction", v[5] = direction_to_string(f->dir);
        v[6] = "name", v[7] = f->spec->name;
        /* a fleet's (or the API's) policy: one label sums it over every interface and node */
        v[8] = "policy", v[9] = policy ? policy->name : "";
        return policy ? 5 : 4;
}

/* A map's series carry its filter's labels; a map its filters share (the default "maps") is one set of
 * series, and a label its users disagree on reads "*" (not the first user's: an egress filter's counts
 * are not ingress ones). */
static size_t map_labels(const DaemonMap *map, char pref[8], const char *v[2 * FILTER_LABELS]) {
        metric_filter_labels(map->users[0].iface, map->users[0].filter, pref, v);
        for (size_t u = 1; u < map->n_users; u++) {
                const char *w[2 * FILTER_LABELS];
                char p[8];
                metric_filter_labels(map->users[u].iface, map->users[u].filter, p, w);
                for (size_t k = 1; k < 2 * FILTER_LABELS; k += 2)
                        if (!streq(v[k], w[k]))
                                v[k] = "*";
        }
        return v[9][0] ? 5 : 4;
}

/* A map-derived metric to fill: the spec, the map it reads, and the filter it is labelled with. */
typedef struct MapMetricTask {
        const MetricSpec *spec;
        const DaemonMap *map;
        const DaemonMapUser *user;
} MapMetricTask;

/* Whether the map's kernel name is the object's name for it (the kernel keeps 15 characters). */
static bool map_named(const DaemonMap *m, const char *name) {
        size_t n = strlen(name);
        return strncmp(m->map.name, name, 15) == 0 && strlen(m->map.name) == MIN(n, 15u);
}

static int task_compare(const void *a, const void *b) {
        const MapMetricTask *x = a, *y = b;
        int c = strcmp(x->spec->name, y->spec->name);
        return c ? c : (x->map->map.id > y->map->map.id) - (x->map->map.id < y->map->map.id);
}

/* One resolved metric: the fields it reads, for every entry. */
typedef struct Resolved {
        BtfField labels[METRIC_LABELS_MAX];
        BtfField value;
        BtfField bucket;
} Resolved;

static int resolve_task(const MapMetricTask *t, Resolved *r, char *why, size_t why_size) {
        const DaemonMap *m = t->map;
        int k;

        for (size_t i = 0; i < t->spec->n_labels; i++) {
                const char *from = t->spec->labels[i].from;
                k = btf_field_resolve(m->btf, m->map.btf_key_type_id, m->map.key_size,
                                      from[3] ? from + 4 : NULL, &r->labels[i], why, why_size);
                if (k < 0)
                        return k;
        }
        k = btf_field_resolve(m->btf, m->map.btf_value_type_id, m->map.value_size, t->spec->value, &r->value,
                              why, why_size);
        if (k < 0)
                return k;
        if (!btf_field_is_number(&r->value)) {
                snprintf(why, why_size,
                         "the value%s%s is not a number; name an integer field with \"value\"",
                         t->spec->value ? " field " : "", t->spec->value ? t->spec->value : "");
                return -EINVAL;
        }
        if (t->spec->type == METRIC_HISTOGRAM) {
                const char *b = t->spec->bucket;
                k = btf_field_resolve(m->btf, m->map.btf_key_type_id, m->map.key_size,
                                      b && b[3] ? b + 4 : NULL, &r->bucket, why, why_size);
                if (k < 0)
                        return k;
                if (!btf_field_is_number(&r->bucket)) {
                        snprintf(why, why_size, "the bucket index is not an integer");
                        return -EINVAL;
                }
        }
        return 0;
}

/* The entry's value: per-CPU values summed. */
static double entry_value(const Resolved *r, const NlMapPage *p, size_t i, size_t value_size) {
        const uint8_t *v = p->values + i * p->value_stride;
        double sum = 0;

        if (p->n_cpus <= 1)
                return btf_field_number(&r->value, v);
        for (unsigned c = 0; c < p->n_cpus; c++)
                sum += btf_field_number(&r->value, v + c * ((value_size + 7) / 8 * 8));
        return sum;
}

/* Every entry's label values (NUL-separated, in one arena) and value, so that entries whose labels come
 * out equal (two keys differing only in a field no label reads) make one series, their values summed:
 * the exposition may not have a series twice. */
typedef struct Collected {
        size_t off, len;
        double value;
        size_t bucket; /* histograms: the bucket the entry counts in (n_buckets: above every bound) */
} Collected;

typedef struct Collector {
        char *arena;
        size_t arena_len, arena_cap;
        Collected *v;
        size_t n, cap;
} Collector;

static int collector_add(Collector *c, const char *labels, size_t len, double value, size_t bucket) {
        /* allocated even for metrics without labels (len 0): memcmp() and memcpy() want a pointer */
        if (!c->arena || c->arena_len + len > c->arena_cap) {
                size_t cap = MAX(c->arena_cap * 2, c->arena_len + len + 4096);
                char *a = realloc(c->arena, cap);
                if (!a)
                        return -ENOMEM;
                c->arena = a;
                c->arena_cap = cap;
        }
        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 256;
                Collected *v = realloc(c->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                c->v = v;
                c->cap = cap;
        }
        memcpy(c->arena + c->arena_len, labels, len);
        c->v[c->n++] = (Collected){ .off = c->arena_len, .len = len, .value = value, .bucket = bucket };
        c->arena_len += len;
        return 0;
}

static int collected_compare(const void *a, const void *b, void *userdata) {
        const Collected *x = a, *y = b;
        const char *arena = userdata;
        int c = memcmp(arena + x->off, arena + y->off, MIN(x->len, y->len));

        return c ? c : (x->len > y->len) - (x->len < y->len);
}

static bool collected_same(const Collector *c, const Collected *x, const Collected *y) {
        return x->len == y->len && memcmp(c->arena + x->off, c->arena + y->off, x->len) == 0;
}

/* The declared labels' names and values after clsd's own (base of them), from a joined label string. */
static size_t labels_fill(const MetricSpec *s, size_t base, const char *lab, const char **v,
                          char (*values)[LABEL_VALUE_MAX]) {
        for (size_t k = 0; k < s->n_labels; k++) {
                v[2 * base + 2 * k] = s->labels[k].name;
                snprintf(values[k], LABEL_VALUE_MAX, "%s", lab);
                v[2 * base + 1 + 2 * k] = values[k];
                lab += strlen(lab) + 1;
        }
        return base + s->n_labels;
}

/* The shortest decimal that reads back as the bound: le="0.1", not "0.10000000000000001". */
static void format_bound(double b, char *buf, size_t size) {
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(buf, size, "%.*g", prec, b);
                if (strtod(buf, NULL) == b)
                        return;
        }
}

static void emit_collected(const MapMetricTask *t, Collector *c, size_t base, const char **v,
                           char (*values)[LABEL_VALUE_MAX], const MetricWriter *w) {
        const MetricSpec *s = t->spec;
        char name[METRIC_NAME_MAX + 16], le[32];

        if (c->n == 0)
                return;
        qsort_r(c->v, c->n, sizeof(Collected), collected_compare, c->arena);
        for (size_t i = 0, j; i < c->n; i = j) {
                size_t nl = labels_fill(s, base, c->arena + c->v[i].off, v, values);
                double total = 0;

                if (s->type != METRIC_HISTOGRAM) {
                        for (j = i; j < c->n && collected_same(c, &c->v[i], &c->v[j]); j++)
                                total += c->v[j].value;
                        w->sample(w->userdata, s->name, v, nl, total);
                        continue;
                }
                double counts[METRIC_BUCKETS_MAX + 1] = { 0 }, cum = 0, sum = 0;
                for (j = i; j < c->n && collected_same(c, &c->v[i], &c->v[j]); j++)
                        counts[c->v[j].bucket] += c->v[j].value;
                v[2 * nl] = "le";
                v[2 * nl + 1] = le;
                snprintf(name, sizeof(name), "%s_bucket", s->name);
                for (size_t b = 0; b <= s->n_buckets; b++) {
                        cum += counts[b];
                        /* the sum is not in the map: each observation counts at its bucket's bound */
                        sum += counts[b] * s->buckets[b < s->n_buckets ? b : s->n_buckets - 1];
                        if (b < s->n_buckets)
                                format_bound(s->buckets[b], le, sizeof(le));
                        else
                                snprintf(le, sizeof(le), "+Inf");
                        w->sample(w->userdata, name, v, nl + 1, cum);
                }
                snprintf(name, sizeof(name), "%s_sum", s->name);
                w->sample(w->userdata, name, v, nl, sum);
                snprintf(name, sizeof(name), "%s_count", s->name);
                w->sample(w->userdata, name, v, nl, cum);
        }
}

static void emit_task(Manager *d, const MapMetricTask *t, const MetricWriter *w) {
        const MetricSpec *s = t->spec;
        const char *v[2 * (FILTER_LABELS + 1 + METRIC_LABELS_MAX)];
        char values[METRIC_LABELS_MAX][LABEL_VALUE_MAX], pref[8], why[256];
        char joined[METRIC_LABELS_MAX * LABEL_VALUE_MAX];
        uint8_t cursor[NL_MAP_CURSOR_MAX];
        size_t cursor_size = 0;
        Collector c = { 0 };
        bool more = true, unique = false;
        Resolved r = { 0 };

        if (resolve_task(t, &r, why, sizeof(why)) < 0) {
                d->counters.map_metric_failures++;
                log_debug("%s: metric %s: %s", t->user->iface->ifname, s->name, why);
                return;
        }
        size_t base = map_labels(t->map, pref, v);
        /* A label of the whole key makes every entry's labels different (keys are unique, and their
         * text tells them apart): no merging needed, each entry goes straight out. */
        for (size_t k = 0; k < s->n_labels && s->type != METRIC_HISTOGRAM; k++)
                unique = unique || streq(s->labels[k].from, "key");
        while (more) {
                NlMapPage p = { 0 };
                _cleanup_error_ Error e = ERROR_NULL;

                if (nl_map_read(&t->map->map, cursor_size ? cursor : NULL, cursor_size, NL_MAP_PAGE_MAX, &p,
                                &e) < 0) {
                        d->counters.map_metric_failures++;
                        log_debug("%s: metric %s: %s", t->user->iface->ifname, s->name, strna(e.message));
                        goto done;
                }
                for (size_t i = 0; i < p.n; i++) {
                        const uint8_t *key = p.keys + i * t->map->map.key_size;
                        size_t len = 0, bucket = 0;

                        for (size_t k = 0; k < s->n_labels; k++) {
                                btf_field_format(&r.labels[k], key, joined + len, LABEL_VALUE_MAX);
                                len += strlen(joined + len) + 1;
                        }
                        if (unique) {
                                labels_fill(s, base, joined, v, values);
                                w->sample(w->userdata, s->name, v, base + s->n_labels,
                                          entry_value(&r, &p, i, t->map->map.value_size));
                                continue;
                        }
                        if (s->type == METRIC_HISTOGRAM) {
                                double idx = btf_field_number(&r.bucket, key);
                                bucket = idx >= 0 && idx < (double) s->n_buckets ? (size_t) idx
                                                                                 : s->n_buckets;
                        }
                        if (collector_add(&c, joined, len, entry_value(&r, &p, i, t->map->map.value_size),
                                          bucket) < 0) {
                                d->counters.map_metric_failures++;
                                nl_map_page_done(&p);
                                goto done;
                        }
                }
                more = p.more;
                memcpy(cursor, p.cursor, p.cursor_size);
                cursor_size = p.cursor_size;
                nl_map_page_done(&p);
        }
        emit_collected(t, &c, base, v, values, w);
done:
        free(c.arena);
        free(c.v);
}

void map_metrics_emit(Manager *d, const MetricWriter *w, DaemonMaps *maps) {
        _cleanup_free_ MapMetricTask *tasks = NULL;
        size_t n = 0, cap = 0;

        for (size_t i = 0; i < maps->n; i++)
                for (size_t u = 0; u < maps->maps[i].n_users; u++) {
                        const DaemonMapUser *user = &maps->maps[i].users[u];
                        for (size_t k = 0; k < user->filter->spec->n_metrics; k++) {
                                const MetricSpec *s = &user->filter->spec->metrics[k];
                                bool dup = false;
                                if (!map_named(&maps->maps[i], s->map))
                                        continue;
                                /* a map shared by several filters is exported once (map_labels()) */
                                for (size_t j = 0; j < n && !dup; j++)
                                        dup = tasks[j].map == &maps->maps[i] &&
                                              streq(tasks[j].spec->name, s->name);
                                if (dup)
                                        continue;
                                if (n == cap) {
                                        MapMetricTask *nt =
                                                realloc(tasks, (cap = cap ? cap * 2 : 16) * sizeof(*nt));
                                        if (!nt)
                                                return;
                                        tasks = nt;
                                }
                                tasks[n++] =
                                        (MapMetricTask){ .spec = s, .map = &maps->maps[i], .user = user };
                        }
                }
        if (n == 0)
                return;
        qsort(tasks, n, sizeof(*tasks), task_compare);
        for (size_t i = 0; i < n;) {
                size_t j = i;
                const MetricSpec *first = tasks[i].spec;

                char help[160];

                snprintf(help, sizeof(help), "From BPF map %s (declared in a clsd document)", first->map);
                w->family(w->userdata, first->name, metric_type_to_string(first->type),
                          first->help ? first->help : help);
                for (; j < n && streq(tasks[j].spec->name, first->name); j++) {
                        const MetricSpec *s = tasks[j].spec;
                        /* one name, one type and label set: a document that disagrees with the first is left
                         * out */
                        bool same = s->type == first->type && s->n_labels == first->n_labels;
                        for (size_t k = 0; same && k < s->n_labels; k++)
                                same = streq(s->labels[k].name, first->labels[k].name);
                        if (!same) {
                                d->counters.map_metric_failures++;
                                continue;
                        }
                        emit_task(d, &tasks[j], w);
                }
                i = j;
        }
}

/* ---- a fleet health check's sum ---- */

typedef struct MetricSum {
        const char *name;
        double total;
        size_t samples;
} MetricSum;

static void sum_family(void *userdata, const char *name, const char *type, const char *help) {
        (void) userdata, (void) name, (void) type, (void) help;
}

static void sum_sample(void *userdata, const char *name, const char *const *labels, size_t n_labels,
                       double value) {
        MetricSum *s = userdata;
        size_t l = strlen(s->name);

        (void) labels, (void) n_labels;
        /* a counter or gauge by its name; a histogram by its observations (NAME_count) */
        if (streq(name, s->name) || (strncmp(name, s->name, l) == 0 && streq(name + l, "_count"))) {
                s->total += value;
                s->samples++;
        }
}

int daemon_policy_metric_sum(Manager *m, const char *policy, const char *metric, double *ret,
                             Error *reterr) {
        const Policy *p = daemon_policy_get(m, policy);
        MetricSum sum = { .name = metric };
        MetricWriter w = { .family = sum_family, .sample = sum_sample, .userdata = &sum };
        DaemonMaps maps = { 0 };
        int r;

        if (!p)
                return error_set(reterr, ENOENT, ERROR_POLICY_NOT_FOUND, "no policy %s here", policy);
        r = daemon_policy_maps(m, p, &maps, reterr);
        if (r < 0)
                return r;
        map_metrics_emit(m, &w, &maps);
        daemon_maps_done(&maps);
        if (sum.samples == 0)
                return error_set(reterr, ENOENT, ERROR_METRIC_NOT_FOUND,
                                 "policy %s: no metric %s (its filters' \"metrics\", from maps of programs "
                                 "attached here)",
                                 policy, metric);
        *ret = sum.total;
        return 0;
}
