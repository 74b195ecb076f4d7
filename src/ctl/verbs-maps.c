/* verbs-maps.c: clsctl maps IFNAME|policy:NAME [MAP]: what the attached programs' maps hold, as the
 * daemon decodes them through BTF; one map is read to its end, page after page; map set|rm: one entry. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf() */
#endif
#include <stdio.h>

#include "ctl.h"
#include "output.h"

/* Pages asked of the daemon per request: large, so that most maps come in one. */
#define MAPS_PAGE 10000

/* The path the maps of target are under: "policy:NAME" is a policy's (no interface name has a colon),
 * anything else an interface's document. */
static int maps_base(const Ctl *c, const char *target, char **ret) {
        const char *policy = startswith(target, "policy:");
        _cleanup_free_ char *e = NULL;
        int r;

        if (!policy)
                return ctl_iface_path(c, target, ret);
        if (!*policy)
                return ctl_error(-EINVAL, "policy: needs a policy name (policy:NAME)");
        r = http_escape_segment(policy, NULL, &e);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        return asprintf(ret, "/policies/%s", e) < 0 ? ctl_oom() : 0;
}

static void add_compact(Table *t, const json_t *v) {
        if (json_is_string(v) || json_is_integer(v) || json_is_boolean(v) || !v)
                table_add_json(t, v);
        else
                table_add_taken(t, json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY));
}

static int print_maps(const json_t *answer) {
        bool policy = json_object_get(answer, "policy");
        _cleanup_(table_freep) Table *t =
                table_new("MAP", "ID", "TYPE", "KEY", "VALUE", "ENTRIES", "FILTERS", NULL);
        const json_t *m;
        size_t i;

        if (!t)
                return ctl_oom();
        json_array_foreach (json_object_get(answer, "maps"), i, m) {
                const json_t *btf = json_object_get(m, "btf"), *f;
                _cleanup_free_ char *users = NULL;
                size_t k, len = 0;
                FILE *u = open_memstream(&users, &len);

                if (!u)
                        return ctl_oom();
                json_array_foreach (json_object_get(m, "filters"), k, f)
                        /* a policy's maps are on many interfaces: each user says where */
                        fprintf(u, "%s%s%s%s/%s", k ? "," : "",
                                policy ? json_string_value(json_object_get(f, "ifname")) : "",
                                policy ? ":" : "", json_string_value(json_object_get(f, "direction")),
                                json_string_value(json_object_get(f, "name")));
                fclose(u);
                table_add_fields(t, m, (const char *const[]){ "name", "id", "type", NULL });
                table_add_fields(t, btf, (const char *const[]){ "key", "value", NULL });
                if (json_is_null(json_object_get(m, "entries")))
                        table_add(t, "unreadable");
                else
                        table_addf(t, "%" JSON_INTEGER_FORMAT "%s",
                                   json_integer_value(json_object_get(m, "count")),
                                   json_is_string(json_object_get(m, "next_cursor")) ? "+" : "");
                table_add(t, users);
        }
        return ctl_table_print(t);
}

static int print_entries(const json_t *entries) {
        _cleanup_(table_freep) Table *t = table_new("KEY", "VALUE", NULL);
        const json_t *e;
        size_t i;

        if (!t)
                return ctl_oom();
        json_array_foreach (entries, i, e) {
                const json_t *v = json_object_get(e, "value");
                add_compact(t, json_object_get(e, "key"));
                /* a per-CPU map: the sum, or each CPU's when they have none */
                if (!v)
                        v = json_is_null(json_object_get(e, "sum")) ? json_object_get(e, "values")
                                                                    : json_object_get(e, "sum");
                add_compact(t, v);
        }
        return ctl_table_print(t);
}

int verb_maps(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL, *entries = NULL;
        _cleanup_free_ char *base = NULL, *map = NULL, *cursor = NULL;
        int r;

        r = maps_base(c, args[0], &base);
        if (r < 0)
                return r;
        if (!args[1]) {
                _cleanup_free_ char *path = NULL;
                if (asprintf(&path, "%s/maps", base) < 0)
                        return ctl_oom();
                r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = path }, args[0], &answer);
                if (r < 0)
                        return r;
                return c->json ? ctl_print_json(answer) : print_maps(answer);
        }
        r = http_escape_segment(args[1], NULL, &map);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        entries = json_array();
        if (!entries)
                return ctl_oom();
        do {
                _cleanup_(json_decrefp) json_t *page = NULL;
                _cleanup_free_ char *path = NULL;
                const char *next;

                if (asprintf(&path, "%s/maps/%s?limit=%d%s%s", base, map, MAPS_PAGE,
                             cursor ? "&cursor=" : "", cursor ?: "") < 0)
                        return ctl_oom();
                r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = path }, args[0], &page);
                if (r < 0)
                        return r;
                json_array_extend(entries, json_object_get(page, "entries"));
                if (!answer)
                        answer = json_incref(page);
                next = json_string_value(json_object_get(page, "next_cursor"));
                free(cursor);
                /* cursors are "<id>.<hex>": nothing in them needs escaping in a query */
                cursor = next ? strdup(next) : NULL;
                if (next && !cursor)
                        return ctl_oom();
        } while (cursor);
        json_object_set(answer, "entries", entries);
        json_object_set_new(answer, "count", json_integer((json_int_t) json_array_size(entries)));
        json_object_set_new(answer, "next_cursor", json_null());
        return c->json ? ctl_print_json(answer) : print_entries(entries);
}

/* map set IFNAME|policy:NAME MAP KEY VALUE, map rm IFNAME|policy:NAME MAP KEY: KEY and VALUE in the JSON
 * "maps" shows them. */
static int map_entry(const Ctl *c, char **args, bool set) {
        _cleanup_free_ char *base = NULL, *map = NULL, *path = NULL, *body = NULL;
        _cleanup_(json_decrefp) json_t *key = NULL, *value = NULL, *j = NULL;
        json_error_t e;
        int r;

        key = json_loads(args[2], JSON_DECODE_ANY, &e);
        if (!key)
                return ctl_error(-EINVAL,
                                 "key %s: not JSON (%s); a number, a string in quotes, or an object",
                                 args[2], e.text);
        if (set && !(value = json_loads(args[3], JSON_DECODE_ANY, &e)))
                return ctl_error(-EINVAL,
                                 "value %s: not JSON (%s); a number, a string in quotes, or an object",
                                 args[3], e.text);
        r = maps_base(c, args[0], &base);
        if (r < 0)
                return r;
        r = http_escape_segment(args[1], NULL, &map);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        if (asprintf(&path, "%s/maps/%s/entries", base, map) < 0)
                return ctl_oom();
        j = set ? json_pack("{s:O,s:O}", "key", key, "value", value) : json_pack("{s:O}", "key", key);
        if (!j || !(body = json_dumps(j, JSON_COMPACT)))
                return ctl_oom();
        return ctl_call(c,
                        &(HttpRequest){ .method = set ? "PUT" : "DELETE",
                                        .path = path,
                                        .content_type = "application/json",
                                        .body = body,
                                        .body_size = strlen(body) },
                        args[0], NULL);
}

int verb_map_set(const Ctl *c, char **args) {
        return map_entry(c, args, true);
}

int verb_map_remove(const Ctl *c, char **args) {
        return map_entry(c, args, false);
}
