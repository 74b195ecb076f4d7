/* verbs-ifaces.c: clsctl ls, get, apply, delete: interface documents and what is attached. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf(), open_memstream() */
#endif
#include <stdio.h>
#include <unistd.h>
#include <time.h>

#include "ctl.h"
#include "output.h"

static const char *const directions[] = { "ingress", "egress" };

static const json_t *find_by_name(const json_t *list, const char *name) {
        const json_t *v;
        size_t i;

        json_array_foreach (list, i, v)
                if (streq_ptr(json_string_value(json_object_get(v, "name")), name))
                        return v;
        return NULL;
}

static void add_filter_row(Table *t, const char *direction, const json_t *f, const json_t *st) {
        const json_t *prio = json_object_get(f, "priority") ?: json_object_get(st, "pref");
        const json_t *prog = json_object_get(f, "program") ?: json_object_get(st, "program");
        table_add(t, direction);
        table_add_json(t, json_object_get(f ?: st, "name"));
        table_add_json(t, prio);
        table_add_json(t, prog);
        table_add_fields(t, st, (const char *const[]){ "attached", "id", "tag", NULL });
}

/* One row per filter of the document, joined by name with its status; then any status entry the
 * document does not name (none, unless the daemon is mid-change). */
static int print_classifier(const json_t *answer, const char *ifname, bool show_error) {
        const char *state = json_string_value(json_object_get(answer, "state"));
        const char *hog = json_string_value(json_object_get(answer, "hog"));
        const json_t *generation = json_object_get(answer, "generation");
        const json_t *overridden = json_object_get(answer, "overridden");
        const json_t *document = json_object_get(answer, "document");
        const json_t *status = json_object_get(answer, "status");
        const json_t *error = json_object_get(answer, "error");
        const char *ifname_shown = json_string_value(json_object_get(answer, "ifname")) ?: ifname;
        _cleanup_free_ char *line = NULL, *escaped = NULL, *gen = NULL, *over = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        int r;

        /* "eth0: configured (generation 3, hog /etc/clsd/hogs.d/eth0.json, overriding ingress)" */
        if (json_is_integer(generation) &&
            asprintf(&gen, "generation %" JSON_INTEGER_FORMAT, json_integer_value(generation)) < 0)
                return ctl_oom();
        if (json_array_size(overridden) > 0 &&
            asprintf(&over, "overriding the API's %s%s",
                     json_string_value(json_array_get(overridden, 0)) ?: "?",
                     json_array_size(overridden) > 1 ? " and egress" : "") < 0)
                return ctl_oom();
        r = asprintf(&line, "%s: %s%s%s%s%s%s%s%s", ifname_shown, state ?: "-", gen || hog ? " (" : "",
                     strempty(gen), gen && hog ? ", " : "", hog ? "hog " : "", strempty(hog),
                     over ? ", " : "", over ? over : "");
        if (r >= 0 && (gen || hog)) {
                char *l2;
                r = asprintf(&l2, "%s)", line);
                free(line);
                line = r >= 0 ? l2 : NULL;
        }
        if (r < 0)
                return ctl_oom();
        escaped = text_escape(line, false);
        if (!escaped)
                return ctl_oom();
        puts(escaped);

        if (show_error && json_is_object(error)) {
                _cleanup_free_ char *msg = NULL, *e = NULL;

                if (asprintf(&msg, "error: %s: %s", json_string_value(json_object_get(error, "code")) ?: "-",
                             json_string_value(json_object_get(error, "message")) ?: "-") < 0)
                        return ctl_oom();
                e = text_escape(msg, false);
                if (!e)
                        return ctl_oom();
                puts(e);
        }

        t = table_new("DIRECTION", "NAME", "PRIO", "PROGRAM", "ATTACHED", "ID", "TAG", NULL);
        if (!t)
                return ctl_oom();
        for (size_t d = 0; d < ELEMENTSOF(directions); d++) {
                const json_t *wanted = json_object_get(document, directions[d]);
                const json_t *seen = json_object_get(status, directions[d]);
                const json_t *v;
                size_t i;

                json_array_foreach (wanted, i, v)
                        add_filter_row(t, directions[d], v,
                                       find_by_name(seen, json_string_value(json_object_get(v, "name"))));
                json_array_foreach (seen, i, v)
                        if (!find_by_name(wanted, json_string_value(json_object_get(v, "name"))))
                                add_filter_row(t, directions[d], NULL, v);
        }
        return ctl_table_print(t);
}

int verb_iface_get(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        r = ctl_iface_path(c, args[0], &path);
        if (r < 0)
                return r;
        r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = path }, args[0], &answer);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(answer);
        return print_classifier(answer, args[0], true);
}

/* PUTs FILE (args[1]) as the document of IFNAME (args[0]), or only asks what it would do. */
static int put_document(const Ctl *c, char **args, bool dry_run, json_t **ret_answer) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = ctl_iface_path(c, args[0], &path);
        if (r < 0)
                return r;
        if (dry_run) {
                char *p;
                if (asprintf(&p, "%s?dry_run=1", path) < 0)
                        return ctl_oom();
                free(path);
                path = p;
        }
        return ctl_put_file(c, path, args[1], args[0], ret_answer);
}

/* How many single-byte edits make a into b (at most 15 bytes each are compared; more is "far"). */
static unsigned edit_distance(const char *a, const char *b) {
        size_t n = strlen(a), m = strlen(b);
        unsigned d[16][16];

        if (n > 15 || m > 15)
                return 99;
        for (size_t i = 0; i <= n; i++)
                for (size_t j = 0; j <= m; j++)
                        d[i][j] = i == 0   ? (unsigned) j
                                  : j == 0 ? (unsigned) i
                                           : MIN(MIN(d[i - 1][j] + 1, d[i][j - 1] + 1),
                                                 d[i - 1][j - 1] + (a[i - 1] != b[j - 1]));
        return d[n][m];
}

/* A document for an interface that is not there waits for it, which is right for one that will
 * appear and wrong for a typo: said on stderr, with the names that are near. */
static void warn_pending(const Ctl *c, const char *ifname) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_free_ char *path = NULL;
        char near[256] = "";
        size_t used = 0, i;
        const json_t *v;

        Ctl quiet = *c;

        quiet.quiet = true; /* the list only adds names to the warning: its failure is not one more line */
        if (ctl_ifaces_path(c, &path) >= 0 &&
            ctl_call(&quiet, &(HttpRequest){ .method = "GET", .path = path }, NULL, &answer) >= 0)
                json_array_foreach (json_object_get(answer, "ifaces"), i, v) {
                        const char *name = json_string_value(json_object_get(v, "ifname"));
                        int k;
                        if (!name || streq(name, ifname) || edit_distance(name, ifname) > 2)
                                continue;
                        k = snprintf(near + used, sizeof(near) - used, "%s%s", used ? ", " : "", name);
                        if (k < 0 || (size_t) k >= sizeof(near) - used)
                                break;
                        used += (size_t) k;
                }
        fflush(stdout);
        fprintf(stderr,
                "clsctl: warning: %s does not exist%s; the document is stored and applies when it "
                "appears%s%s%s\n",
                ifname, c->netns ? " in that namespace" : "", near[0] ? " (did you mean " : "", near,
                near[0] ? "?)" : "");
}

/* --wait: until the document is applied (0) or failed, or the time is up (reported). */
static int wait_applied(const Ctl *c, const char *ifname, json_t **answer) {
        _cleanup_free_ char *path = NULL;
        struct timespec ts;
        double start, now;
        int r;

        r = ctl_iface_path(c, ifname, &path);
        if (r < 0)
                return r;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        start = (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
        for (;;) {
                const char *state = json_string_value(json_object_get(*answer, "state"));
                if (!streq_ptr(state, "pending"))
                        return 0;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                now = (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
                if (now - start >= c->wait_sec)
                        return ctl_error(-ETIMEDOUT,
                                         "%s: still pending after %gs (the interface has not appeared)",
                                         ifname, c->wait_sec);
                (void) usleep(100 * 1000);
                json_decref(*answer);
                *answer = NULL;
                r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = path }, ifname, answer);
                if (r < 0)
                        return r;
        }
}

int verb_iface_apply(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        const char *state;
        int r;

        r = put_document(c, args, false, &answer);
        if (r < 0)
                return r;
        state = json_string_value(json_object_get(answer, "state"));
        if (streq_ptr(state, "pending"))
                warn_pending(c, args[0]);
        if (c->wait_sec > 0) {
                r = wait_applied(c, args[0], &answer);
                if (r < 0)
                        return r;
                state = json_string_value(json_object_get(answer, "state"));
        }
        r = c->json ? ctl_print_json(answer) : print_classifier(answer, args[0], false);
        if (r < 0)
                return r;
        /* Accepted but not in force: a script must not take that for success. */
        if (streq_ptr(state, "failed"))
                return ctl_report_error_object(c, json_object_get(answer, "error"), args[0]);
        return 0;
}

int verb_iface_delete(const Ctl *c, char **args) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = ctl_iface_path(c, args[0], &path);
        if (r < 0)
                return r;
        return ctl_call(c, &(HttpRequest){ .method = "DELETE", .path = path }, args[0], NULL);
}

static void add_filter_counts(Table *t, const json_t *filters) {
        unsigned ours = 0, foreign = 0;
        const json_t *v;
        size_t i;

        json_array_foreach (filters, i, v) {
                const char *owner = json_string_value(json_object_get(v, "owner"));
                if (streq_ptr(owner, "clsd"))
                        ours++;
                else if (streq_ptr(owner, "foreign"))
                        foreign++;
        }
        if (ours && foreign)
                table_addf(t, "%u clsd, %u foreign", ours, foreign);
        else if (ours)
                table_addf(t, "%u clsd", ours);
        else if (foreign)
                table_addf(t, "%u foreign", foreign);
        else
                table_add(t, NULL);
}

int verb_ifaces_list(const Ctl *c, char **args _unused_) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        _cleanup_free_ char *path = NULL;
        const json_t *v;
        size_t i;
        int r;

        r = ctl_ifaces_path(c, &path);
        if (r < 0)
                return r;
        r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = path }, NULL, &answer);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(answer);

        t = table_new("IFINDEX", "IFNAME", "STATE", "FILTERS", NULL);
        if (!t)
                return ctl_oom();
        json_array_foreach (json_object_get(answer, "ifaces"), i, v) {
                const json_t *ifindex = json_object_get(v, "ifindex");

                /* A pending interface has no ifindex yet; the daemon may say 0, null or nothing. */
                table_add_json(t, json_integer_value(ifindex) > 0 ? ifindex : NULL);
                table_add_json(t, json_object_get(v, "ifname"));
                table_add_json(t, json_object_get(v, "state"));
                add_filter_counts(t, json_object_get(v, "filters"));
        }
        return ctl_table_print(t);
}

int verb_iface_diff(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_(table_freep) Table *progs = NULL, *steps = NULL;
        bool changed;
        int r;

        r = put_document(c, args, true, &answer);
        if (r < 0)
                return r;
        /* as diff(1) and kubectl diff: 1 when applying would change something */
        changed = json_is_true(json_object_get(answer, "changed"));
        if (c->json)
                return ctl_print_json(answer) ?: changed;
        progs = table_new("FILTER", "DIRECTION", "PROGRAM", "LOAD", NULL);
        steps = table_new("ACTION", "DIRECTION", "PREF", "NAME", "REASON", NULL);
        if (!progs || !steps)
                return ctl_oom();
        table_add_rows(progs, json_object_get(answer, "programs"),
                       (const char *const[]){ "filter", "direction", "program", "load", NULL });
        table_add_rows(steps, json_object_get(answer, "filters"),
                       (const char *const[]){ "action", "direction", "pref", "name", "reason", NULL });
        printf("%s: dry run, nothing changed; applying it %s%s\n", args[0],
               changed ? "would change what is below" : "would change nothing",
               streq_ptr(json_string_value(json_object_get(answer, "state")), "pending")
                       ? " (the interface does not exist: nothing would change in the kernel now)"
                       : "");
        if (table_rows(progs) > 0 && (r = ctl_table_print(progs)) < 0)
                return r;
        if (table_rows(steps) > 0) {
                putchar('\n');
                if ((r = ctl_table_print(steps)) < 0)
                        return r;
        }
        return changed;
}

int verb_netns_list(const Ctl *c, char **args _unused_) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        const json_t *v;
        size_t i;
        int r;

        r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = "/netns" }, NULL, &answer);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(answer);
        t = table_new("NAME", "PRESENT", "FOLLOWED", "DOCUMENTS", NULL);
        if (!t)
                return ctl_oom();
        json_array_foreach (json_object_get(answer, "netns"), i, v) {
                table_add_json(t, json_object_get(v, "name"));
                table_add(t, json_is_true(json_object_get(v, "present")) ? "yes" : "no");
                table_add(t, json_is_true(json_object_get(v, "followed")) ? "yes" : "no");
                table_add_json(t, json_object_get(v, "documents"));
        }
        return ctl_table_print(t);
}
