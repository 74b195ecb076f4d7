/* verbs-ifaces.c: clsctl ls, get, apply, delete: interface documents and what is attached. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf(), open_memstream() */
#endif
#include <stdio.h>

#include "ctl.h"
#include "output.h"

static const char *const directions[] = { "ingress", "egress" };

/* "/ifaces", or "/netns/NAME/ifaces" with --netns. */
static int ifaces_path(const Ctl *c, char **ret) {
        _cleanup_free_ char *e = NULL;
        int r;

        if (!c->netns)
                return (*ret = strdup("/ifaces")) ? 0 : ctl_oom();
        r = http_escape_segment(c->netns, NULL, &e);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        if (asprintf(ret, "/netns/%s/ifaces", e) < 0)
                return ctl_oom();
        return 0;
}

int ctl_iface_path(const Ctl *c, const char *ifname, char **ret) {
        _cleanup_free_ char *e = NULL, *base = NULL;
        int r;

        r = ifaces_path(c, &base);
        if (r < 0)
                return r;
        r = http_escape_segment(ifname, NULL, &e);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        if (asprintf(ret, "%s/%s/classifier", base, e) < 0)
                return ctl_oom();
        return 0;
}

static const json_t *find_by_name(const json_t *list, const char *name) {
        const json_t *v;
        size_t i;

        json_array_foreach (list, i, v)
                if (streq_ptr(json_string_value(json_object_get(v, "name")), name))
                        return v;
        return NULL;
}

static int add_filter_row(Table *t, const char *direction, const json_t *f, const json_t *st) {
        const json_t *prio = json_object_get(f, "priority") ?: json_object_get(st, "pref");
        const json_t *prog = json_object_get(f, "program") ?: json_object_get(st, "program");
        int r = 0;

        r = r ?: table_add(t, direction);
        r = r ?: table_add_json(t, json_object_get(f ?: st, "name"));
        r = r ?: table_add_json(t, prio);
        r = r ?: table_add_json(t, prog);
        r = r ?: table_add_json(t, json_object_get(st, "attached"));
        r = r ?: table_add_json(t, json_object_get(st, "id"));
        r = r ?: table_add_json(t, json_object_get(st, "tag"));
        return r;
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

                json_array_foreach (wanted, i, v) {
                        r = add_filter_row(
                                t, directions[d], v,
                                find_by_name(seen, json_string_value(json_object_get(v, "name"))));
                        if (r < 0)
                                return ctl_error(r, "%s", strerror(-r));
                }
                json_array_foreach (seen, i, v) {
                        if (find_by_name(wanted, json_string_value(json_object_get(v, "name"))))
                                continue;
                        r = add_filter_row(t, directions[d], NULL, v);
                        if (r < 0)
                                return ctl_error(r, "%s", strerror(-r));
                }
        }
        r = table_print(t, stdout);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        return 0;
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

int verb_iface_apply(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        const char *state;
        int r;

        r = put_document(c, args, false, &answer);
        if (r < 0)
                return r;
        state = json_string_value(json_object_get(answer, "state"));
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

static int add_filter_counts(Table *t, const json_t *filters) {
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
                return table_addf(t, "%u clsd, %u foreign", ours, foreign);
        if (ours)
                return table_addf(t, "%u clsd", ours);
        if (foreign)
                return table_addf(t, "%u foreign", foreign);
        return table_add(t, NULL);
}

int verb_ifaces_list(const Ctl *c, char **args _unused_) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        _cleanup_free_ char *path = NULL;
        const json_t *v;
        size_t i;
        int r;

        r = ifaces_path(c, &path);
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
                r = table_add_json(t, json_integer_value(ifindex) > 0 ? ifindex : NULL);
                r = r ?: table_add_json(t, json_object_get(v, "ifname"));
                r = r ?: table_add_json(t, json_object_get(v, "state"));
                r = r ?: add_filter_counts(t, json_object_get(v, "filters"));
                if (r < 0)
                        return ctl_error(r, "%s", strerror(-r));
        }
        r = table_print(t, stdout);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        return 0;
}

int verb_iface_diff(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_(table_freep) Table *progs = NULL, *steps = NULL;
        int r;

        r = put_document(c, args, true, &answer);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(answer);
        progs = table_new("FILTER", "DIRECTION", "PROGRAM", "LOAD", NULL);
        steps = table_new("ACTION", "DIRECTION", "PREF", "NAME", "REASON", NULL);
        if (!progs || !steps)
                return ctl_oom();
        r = table_add_rows(progs, json_object_get(answer, "programs"),
                           (const char *const[]){ "filter", "direction", "program", "load", NULL });
        r = r
                    ?: table_add_rows(steps, json_object_get(answer, "filters"),
                                      (const char *const[]){ "action", "direction", "pref", "name", "reason",
                                                             NULL });
        if (r < 0)
                return ctl_oom();
        printf("%s: dry run, nothing changed%s\n", args[0],
               streq_ptr(json_string_value(json_object_get(answer, "state")), "pending")
                       ? " (the interface does not exist: nothing would change in the kernel now)"
                       : "");
        if (table_rows(progs) > 0 && table_print(progs, stdout) < 0)
                return ctl_error(-EIO, "cannot write to stdout");
        if (table_rows(steps) > 0) {
                putchar('\n');
                if (table_print(steps, stdout) < 0)
                        return ctl_error(-EIO, "cannot write to stdout");
        }
        return 0;
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
                r = table_add_json(t, json_object_get(v, "name"));
                r = r ?: table_add(t, json_is_true(json_object_get(v, "present")) ? "yes" : "no");
                r = r ?: table_add(t, json_is_true(json_object_get(v, "followed")) ? "yes" : "no");
                r = r ?: table_add_json(t, json_object_get(v, "documents"));
                if (r < 0)
                        return ctl_oom();
        }
        return table_print(t, stdout) < 0 ? ctl_error(-EIO, "cannot write to stdout") : 0;
}
