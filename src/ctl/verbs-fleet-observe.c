/* verbs-fleet-observe.c: the fleet seen at a glance. clsctl fleet targets writes Prometheus's file_sd
 * JSON from the live nodes' records (their --advertise URL, their labels) and, with --watch, keeps it
 * current; clsctl fleet top reads every selected node's /metrics at once (a thread each, over the API
 * with the --host options: --cacert, --cert, --key, --token-file) and sums each counter of a policy per
 * node and over the fleet, with its rate between two reads. */
#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "etcd.h"
#include "fileio.h"
#include "fleet-keys.h"
#include "http-client.h"
#include "output.h"

#define TOP_NODES_MAX 4096
#define TOP_FAMILIES_MAX 64

/* A label name Prometheus takes: [a-zA-Z_][a-zA-Z0-9_]*, other characters made '_'. */
static void label_name(const char *k, char *out, size_t size) {
        size_t i = 0;

        for (; k[i] && i + 1 < size; i++)
                out[i] = isalnum((unsigned char) k[i]) || k[i] == '_' ? k[i] : '_';
        out[i] = 0;
        if (isdigit((unsigned char) out[0]))
                out[0] = '_';
}

/* file_sd's target groups: one per live node that advertises where it is, its scheme, path and labels. */
static json_t *targets_json(json_t *nodes) {
        json_t *out = json_array(), *v;
        size_t i;

        json_array_foreach (nodes, i, v) {
                const char *adv = json_string_value(json_object_get(v, "advertise"));
                const char *node = json_string_value(json_object_get(v, "node"));
                const char *rest, *slash, *lk;
                char host[300], path[300], name[128];
                json_t *labels, *lv;
                if (!adv || !node || !json_is_true(json_object_get(v, "_bound")))
                        continue;
                rest = strstr(adv, "://");
                if (!rest)
                        continue;
                rest += 3;
                slash = strchr(rest, '/');
                snprintf(host, sizeof(host), "%.*s", (int) (slash ? slash - rest : (ptrdiff_t) strlen(rest)),
                         rest);
                snprintf(path, sizeof(path), "%s/metrics", slash && slash[1] ? slash : "");
                labels = json_pack("{s:s, s:s%, s:s}", "node", node, "__scheme__", adv,
                                   (size_t) (rest - 3 - adv), "__metrics_path__", path);
                json_object_foreach (json_object_get(v, "labels"), lk, lv) {
                        label_name(lk, name, sizeof(name));
                        /* a fleet label never hides clsd's own */
                        if (json_is_string(lv) && !json_object_get(labels, name))
                                json_object_set(labels, name, lv);
                }
                json_array_append_new(out, json_pack("{s:[s], s:o}", "targets", host, "labels", labels));
        }
        return out;
}

static int write_targets(const char *path, const char *text) {
        _cleanup_free_ char *dir = strdup(path), *base = strdup(path);
        int dfd, r;

        if (!dir || !base)
                return -ENOMEM;
        char *s = strrchr(dir, '/');
        if (s) {
                *s = 0;
                memmove(base, s + 1, strlen(s + 1) + 1);
        }
        dfd = open(s ? (*dir ? dir : "/") : ".", O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        r = write_file_atomic(dfd, s ? base : path, text, strlen(text));
        close(dfd);
        return r;
}

int verb_fleet_targets(const Ctl *c, char **args _unused_) {
        _cleanup_free_ char *last = NULL;

        for (;;) {
                _cleanup_(json_decrefp) json_t *nodes = NULL, *t = NULL;
                _cleanup_free_ char *text = NULL;
                int r = fleet_rows(c, "nodes", &nodes);
                if (r < 0 && !c->watch)
                        return r;
                if (r >= 0) {
                        t = targets_json(nodes);
                        text = t ? json_dumps(t, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
                        if (!text)
                                return ctl_oom();
                        if (!last || !streq(last, text)) {
                                if (!c->out_dir) {
                                        printf("%s\n", text);
                                        fflush(stdout);
                                } else if ((r = write_targets(c->out_dir, text)) < 0)
                                        return ctl_error(r, "%s: %s", c->out_dir, strerror(-r));
                                free(last);
                                last = TAKE_PTR(text);
                        }
                }
                if (!c->watch)
                        return 0;
                sleep(1);
        }
}

/* ---- top ---- */

typedef struct Family {
        char name[128];
        double value;
} Family;

typedef struct NodeRead {
        const Ctl *c;
        const char *node, *url, *policy;
        Family families[TOP_FAMILIES_MAX];
        size_t n_families;
        char *error;
        pthread_t thread;
} NodeRead;

/* The value of a sample line's policy label (policy names need no escaping), into out: false if none. */
static bool policy_of(const char *labels, size_t len, char *out, size_t size) {
        static const char want[] = "policy=\"";

        for (const char *s = labels; (s = memmem(s, len - (size_t) (s - labels), want, sizeof(want) - 1));
             s++)
                if (s == labels || s[-1] == '{' || s[-1] == ',') {
                        const char *v = s + sizeof(want) - 1,
                                   *q = memchr(v, '"', len - (size_t) (v - labels));
                        if (!q || q == v || (size_t) (q - v) >= size)
                                return false;
                        snprintf(out, size, "%.*s", (int) (q - v), v);
                        return true;
                }
        return false;
}

/* Every counter family's samples of the policy, summed. */
static void parse_metrics(NodeRead *n, const char *text) {
        char counter[TOP_FAMILIES_MAX][128];
        size_t n_counters = 0;

        for (const char *line = text; line && *line;
             line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                const char *end = strchr(line, '\n') ?: line + strlen(line), *brace, *sp;
                char name[128];
                size_t k;
                if (startswith(line, "# TYPE ")) {
                        if (sscanf(line, "# TYPE %127s counter", name) == 1 &&
                            memmem(line, end - line, " counter", 8) && n_counters < TOP_FAMILIES_MAX)
                                snprintf(counter[n_counters++], 128, "%s", name);
                        continue;
                }
                char policy[96], key[160];
                brace = memchr(line, '{', end - line);
                sp = brace ? memchr(brace, '}', end - brace) : NULL;
                if (!brace || !sp || (size_t) (brace - line) >= 100 ||
                    !policy_of(brace, sp - brace + 1, policy, sizeof(policy)) ||
                    (n->policy && !streq(policy, n->policy)))
                        continue;
                snprintf(name, sizeof(name), "%.*s", (int) (brace - line), line);
                for (k = 0; k < n_counters && !streq(counter[k], name); k++)
                        ;
                if (k == n_counters)
                        continue; /* gauges and histograms: not what top sums */
                /* every policy's, without one: each family named with its policy */
                if (n->policy)
                        snprintf(key, sizeof(key), "%s", name);
                else
                        snprintf(key, sizeof(key), "%.90s{policy=\"%.30s\"}", name, policy);
                snprintf(name, sizeof(name), "%.127s", key);
                for (k = 0; k < n->n_families && !streq(n->families[k].name, name); k++)
                        ;
                if (k == n->n_families) {
                        if (k == TOP_FAMILIES_MAX)
                                continue;
                        snprintf(n->families[n->n_families++].name, 128, "%s", name);
                }
                n->families[k].value += strtod(sp + 1, NULL);
        }
}

static void *read_node(void *userdata) {
        NodeRead *n = userdata;
        const Ctl *c = n->c;
        HttpTarget t = {
                .url = n->url, .cacert = c->cacert, .cert = c->cert, .key = c->key, .token = c->token
        };
        HttpRequest req = { .method = "GET", .path = "/metrics" };
        _cleanup_(http_response_freep) HttpResponse *resp = NULL;

        n->n_families = 0;
        free(n->error);
        n->error = NULL;
        if (http_perform(&t, &req, &resp, &n->error) < 0)
                return NULL;
        if (resp->status != 200) {
                if (asprintf(&n->error, "GET /metrics answered %u", resp->status) < 0)
                        n->error = NULL;
                return NULL;
        }
        parse_metrics(n, resp->body);
        return NULL;
}

static void read_all(NodeRead *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (pthread_create(&v[i].thread, NULL, read_node, &v[i]) != 0)
                        read_node(&v[i]), v[i].thread = 0;
        for (size_t i = 0; i < n; i++)
                if (v[i].thread)
                        pthread_join(v[i].thread, NULL);
}

static double family_value(const NodeRead *n, const char *name, bool *found) {
        for (size_t k = 0; k < n->n_families; k++)
                if (streq(n->families[k].name, name)) {
                        *found = true;
                        return n->families[k].value;
                }
        *found = false;
        return 0;
}

/* The families any node has, in the first node's order. */
static size_t families_union(const NodeRead *v, size_t n, char (*out)[128]) {
        size_t m = 0;

        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < v[i].n_families; k++) {
                        size_t j;
                        for (j = 0; j < m && !streq(out[j], v[i].families[k].name); j++)
                                ;
                        if (j == m && m < TOP_FAMILIES_MAX)
                                snprintf(out[m++], 128, "%s", v[i].families[k].name);
                }
        return m;
}

static int top_print(const Ctl *c, const NodeRead *before, const NodeRead *after, size_t n, double secs) {
        char fam[TOP_FAMILIES_MAX][128], value[32], rate[32];
        size_t m = families_union(after, n, fam);
        _cleanup_(table_freep) Table *t = table_new("NODE", "METRIC", "VALUE", "RATE/S", NULL);
        _cleanup_(json_decrefp) json_t *rows = json_array();

        if (!t || !rows)
                return ctl_oom();
        for (size_t f = 0; f < m; f++) {
                double sum = 0, sum_rate = 0;
                for (size_t i = 0; i <= n; i++) {
                        bool fa = false, fb = false;
                        double a = 0, b = 0;
                        const char *node = i < n ? after[i].node : "(fleet)";
                        if (i < n) {
                                a = family_value(&after[i], fam[f], &fa);
                                b = family_value(&before[i], fam[f], &fb);
                                if (!fa)
                                        continue;
                                sum += a;
                                sum_rate += fb && a >= b ? (a - b) / secs : 0;
                        } else
                                a = sum;
                        double rt = i < n ? (fb && a >= b ? (a - b) / secs : 0) : sum_rate;
                        /* counts as integers; seconds and other fractions as they are */
                        snprintf(value, sizeof(value), a == (double) (uint64_t) a ? "%.0f" : "%.6f", a);
                        snprintf(rate, sizeof(rate), "%.1f", rt);
                        json_array_append_new(rows, json_pack("{s:s, s:s, s:f, s:f}", "node", node, "metric",
                                                              fam[f], "value", a, "rate", rt));
                        table_add(t, node);
                        table_add(t, fam[f]);
                        table_add(t, value);
                        table_add(t, rate);
                }
        }
        for (size_t i = 0; i < n; i++)
                if (after[i].error)
                        fprintf(stderr, "clsctl: %s (%s): %s\n", after[i].node, after[i].url,
                                after[i].error);
        if (c->json)
                return ctl_print_json(rows);
        if (table_rows(t) == 0)
                printf("(no counter of %s%s on any node)\n", before[0].policy ? "policy " : "a policy",
                       before[0].policy ?: "");
        else
                return ctl_table_print(t);
        return 0;
}

int verb_fleet_top(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *nodes = NULL, *statuses = NULL;
        _cleanup_free_ NodeRead *before = NULL, *after = NULL;
        const char *policy = args[0];
        size_t n = 0, i;
        json_t *v;
        int r;

        r = fleet_rows(c, "nodes", &nodes);
        if (r < 0)
                return r;
        r = fleet_rows(c, "status", &statuses);
        if (r < 0)
                return r;
        before = calloc(json_array_size(nodes) + 1, sizeof(NodeRead));
        after = calloc(json_array_size(nodes) + 1, sizeof(NodeRead));
        if (!before || !after)
                return ctl_oom();
        json_array_foreach (nodes, i, v) {
                const char *node = json_string_value(json_object_get(v, "node"));
                const char *url = json_string_value(json_object_get(v, "advertise"));
                bool selected = false;
                json_t *s;
                size_t k;
                if (!node || !url || !json_is_true(json_object_get(v, "_bound")) || n == TOP_NODES_MAX)
                        continue;
                /* selected: the node says something of the policy (applied, failed, waiting, …); without
                 * one, every node */
                selected = !policy;
                json_array_foreach (statuses, k, s)
                        selected = selected ||
                                   (streq_ptr(json_string_value(json_object_get(s, "node")), node) &&
                                    streq_ptr(json_string_value(json_object_get(s, "policy")), policy));
                if (!selected)
                        continue;
                before[n] = (NodeRead){ .c = c, .node = node, .url = url, .policy = policy };
                after[n++] = (NodeRead){ .c = c, .node = node, .url = url, .policy = policy };
        }
        if (n == 0)
                return ctl_error(-ENOENT, "no live node that advertises its API (--advertise) holds %s%s",
                                 policy ? "policy " : "a policy", policy ?: "");
        do {
                struct timespec t0, t1;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                read_all(before, n);
                usleep(1000 * 1000);
                read_all(after, n);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                r = top_print(c, before, after, n,
                              (double) (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
        } while (r >= 0 && c->watch);
        for (i = 0; i < n; i++) {
                free(before[i].error);
                free(after[i].error);
        }
        return r;
}
