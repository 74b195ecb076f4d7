/* verbs-policies.c: clsctl policy ls|get|apply|diff|rm: one document for every interface that matches. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "output.h"

static int policy_path(const char *name, bool dry_run, char **ret) {
        if (asprintf(ret, "/policies/%s%s", name, dry_run ? "?dry_run=1" : "") < 0)
                return ctl_oom();
        return 0;
}

/* One row per interface: its state, and what each hook is to the policy. */
static int print_ifaces(const json_t *ifaces, bool results) {
        _cleanup_(table_freep) Table *t =
                table_new("NETNS", "IFNAME", "STATE", results ? "MATCHED" : "INGRESS",
                          results ? "ERROR" : "EGRESS", NULL);
        const json_t *v;
        size_t i;

        if (!t)
                return ctl_oom();
        json_array_foreach (ifaces, i, v) {
                const json_t *netns = json_object_get(v, "netns");
                table_add(t, json_is_string(netns) ? json_string_value(netns) : "-");
                table_add_json(t, json_object_get(v, "ifname"));
                /* the policy's state on it (a result's; GET's policy_state), not the interface's */
                table_add_json(t, json_object_get(v, results ? "state" : "policy_state"));
                if (results) {
                        const json_t *e = json_object_get(v, "error");
                        const char *with = json_string_value(json_object_get(v, "with"));
                        table_add(t, json_is_true(json_object_get(v, "matched")) ? "yes" : "no");
                        if (e)
                                table_addf(t, "%s: %s", json_string_value(json_object_get(e, "code")),
                                           json_string_value(json_object_get(e, "message")));
                        else if (with)
                                table_addf(t, "conflict: %s", with);
                        else
                                table_add(t, NULL);
                        continue;
                }
                for (int k = 0; k < 2; k++) {
                        const json_t *h = json_object_get(v, k == 0 ? "ingress" : "egress");
                        const char *st = json_string_value(json_object_get(h, "state"));
                        const char *by = json_string_value(json_object_get(h, "by"))
                                                 ?: json_string_value(json_object_get(h, "with"));
                        if (st && by)
                                table_addf(t, "%s (%s)", st, by);
                        else
                                table_add(t, st);
                }
        }
        if (table_rows(t) == 0) {
                puts("(no interface matches)");
                return 0;
        }
        return ctl_table_print(t);
}

int verb_policy_list(const Ctl *c, char **args _unused_) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        const json_t *v;
        size_t i;
        int r;

        r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = "/policies" }, NULL, &answer);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(answer);
        t = table_new("NAME", "GENERATION", "ORDER", "MATCHED", "CONFIGURED", "PENDING", "FAILED",
                      "CONFLICT", "OVERRIDDEN", NULL);
        if (!t)
                return ctl_oom();
        json_array_foreach (json_object_get(answer, "policies"), i, v) {
                const json_t *s = json_object_get(v, "summary");
                table_add_fields(t, v, (const char *const[]){ "name", "generation", "order", NULL });
                table_add_fields(t, s,
                                 (const char *const[]){ "matched", "configured", "pending", "failed",
                                                        "conflict", "overridden", NULL });
        }
        return ctl_table_print(t);
}

int verb_policy_get(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        r = policy_path(args[0], false, &path);
        if (r < 0)
                return r;
        r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = path }, args[0], &answer);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(answer);
        printf("%s: generation %lld, order %lld\n", args[0],
               (long long) json_integer_value(json_object_get(answer, "generation")),
               (long long) json_integer_value(json_object_get(answer, "order")));
        return print_ifaces(json_object_get(answer, "ifaces"), false);
}

static int put_policy(const Ctl *c, char **args, bool dry_run, json_t **ret_answer) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = policy_path(args[0], dry_run, &path);
        if (r < 0)
                return r;
        return ctl_put_file(c, path, args[1], args[0], ret_answer);
}

/* Exit 1 when an interface failed or is in conflict: accepted but not in force everywhere is not success
 * for a script. */
static int report_failed(const Ctl *c, const json_t *answer, const char *name) {
        const json_t *v;
        size_t i, failed = 0;
        const json_t *first = NULL;

        json_array_foreach (json_object_get(answer, "results"), i, v)
                if (json_object_get(v, "error") ||
                    streq_ptr(json_string_value(json_object_get(v, "state")), "conflict")) {
                        failed++;
                        first = first ?: v;
                }
        if (!failed)
                return 0;
        (void) c;
        const json_t *e = json_object_get(first, "error");
        return ctl_error(-EREMOTEIO, "%s: %zu interface(s) failed or in conflict, %s first: %s", name,
                         failed, json_string_value(json_object_get(first, "ifname")),
                         e ? json_string_value(json_object_get(e, "code")) : "conflict");
}

int verb_policy_apply(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        int r;

        r = put_policy(c, args, false, &answer);
        if (r < 0)
                return r;
        r = c->json ? ctl_print_json(answer) : print_ifaces(json_object_get(answer, "results"), true);
        if (r < 0)
                return r;
        return report_failed(c, answer, args[0]);
}

int verb_policy_diff(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        const json_t *v, *s;
        bool changed;
        size_t i, k;
        int r;

        r = put_policy(c, args, true, &answer);
        if (r < 0)
                return r;
        /* as diff(1) and kubectl diff: 1 when applying would change something */
        changed = json_is_true(json_object_get(answer, "changed"));
        if (c->json)
                return ctl_print_json(answer) ?: changed;
        printf("%s: dry run, nothing changed; applying it %s\n", args[0],
               changed ? "would change what is below" : "would change nothing");
        t = table_new("IFNAME", "ACTION", "DIRECTION", "PREF", "NAME", "REASON", NULL);
        if (!t)
                return ctl_oom();
        json_array_foreach (json_object_get(answer, "results"), i, v) {
                const json_t *e = json_object_get(v, "error");
                /* a refusal the plan shows (a priority held: its conflict step) is shown as the plan */
                if (e && json_array_size(json_object_get(json_object_get(v, "plan"), "filters")) == 0) {
                        table_add_json(t, json_object_get(v, "ifname"));
                        table_add(t, "fail");
                        table_add(t, NULL);
                        table_add(t, NULL);
                        table_add_fields(t, e, (const char *const[]){ "code", "message", NULL });
                        continue;
                }
                json_array_foreach (json_object_get(json_object_get(v, "plan"), "filters"), k, s) {
                        table_add_json(t, json_object_get(v, "ifname"));
                        table_add_fields(t, s,
                                         (const char *const[]){ "action", "direction", "pref", "name",
                                                                "reason", NULL });
                }
        }
        if (table_rows(t) == 0) {
                puts("(no interface would change)");
                return changed;
        }
        return ctl_table_print(t) ?: changed;
}

int verb_policy_remove(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        r = policy_path(args[0], false, &path);
        if (r < 0)
                return r;
        r = ctl_call(c, &(HttpRequest){ .method = "DELETE", .path = path }, args[0], &answer);
        if (r < 0)
                return r;
        return c->json ? ctl_print_json(answer) : 0;
}
