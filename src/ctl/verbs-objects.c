/* verbs-objects.c: clsctl object ls, add, show, rm: the daemon's content-addressed BPF objects. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf(), open_memstream() */
#endif
#include <ctype.h>
#include <sodium.h>
#include <stdio.h>

#include "ctl.h"
#include "output.h"

#define DIGEST_PREFIX "sha256:"
#define DIGEST_HEX_LEN 64
/* As short as docker's image ids, long enough to be unique in any real store. */
#define DIGEST_SHORT_LEN 12

static int object_path(const char *digest, char **ret) {
        _cleanup_free_ char *e = NULL;
        int r;

        /* ':' is a valid path character (RFC 3986 pchar): routes see "sha256:..." as is. */
        r = http_escape_segment(digest, ":", &e);
        if (r < 0)
                return ctl_error(r, "%s", strerror(-r));
        if (asprintf(ret, "/objects/%s", e) < 0)
                return ctl_oom();
        return 0;
}

static void print_field(const char *label, const char *value) {
        _cleanup_free_ char *e = text_escape(value && *value ? value : "-", false);

        printf("%-9s%s\n", label, strna(e));
}

static int print_tables(Table *a, Table *b) {
        int r;

        fputc('\n', stdout);
        r = ctl_table_print(a);
        if (r >= 0 && b && table_rows(b) > 0) {
                fputc('\n', stdout);
                r = ctl_table_print(b);
        }
        return r;
}

static int print_object(const json_t *o) {
        const json_t *size = json_object_get(o, "size");
        _cleanup_(table_freep) Table *programs = NULL, *maps = NULL;
        _cleanup_free_ char *used_by = json_join(json_object_get(o, "used_by"), NULL);
        _cleanup_free_ char *bytes = NULL;

        programs = table_new("PROGRAM", "SECTION", "TYPE", NULL);
        maps = table_new("MAP", "TYPE", "KEY-SIZE", "VALUE-SIZE", "MAX-ENTRIES", NULL);
        if (!programs || !maps || !used_by)
                return ctl_oom();
        if (json_is_integer(size) &&
            asprintf(&bytes, "%" JSON_INTEGER_FORMAT " bytes", json_integer_value(size)) < 0)
                return ctl_oom();

        table_add_rows(programs, json_object_get(o, "programs"),
                       (const char *const[]){ "name", "section", "type", NULL });
        table_add_rows(
                maps, json_object_get(o, "maps"),
                (const char *const[]){ "name", "type", "key_size", "value_size", "max_entries", NULL });

        print_field("Digest:", json_string_value(json_object_get(o, "digest")));
        print_field("Size:", bytes);
        print_field("Used by:", used_by);
        return print_tables(programs, maps);
}

/* The signature file beside FILE as a Clsd-Signature header in *ret; NULL when there is none. */
static int signature_header(const char *file, char **ret) {
        _cleanup_free_ char *sig = NULL;
        size_t size, len;
        int r;

        *ret = NULL;
        r = ctl_read_signature(file, &sig, &size);
        if (r < 0 || !sig)
                return r;
        len = sodium_base64_ENCODED_LEN(size, sodium_base64_VARIANT_ORIGINAL);
        if (!(*ret = malloc(strlen("Clsd-Signature: ") + len)))
                return ctl_oom();
        strcpy(*ret, "Clsd-Signature: ");
        sodium_bin2base64(*ret + strlen(*ret), len, (const unsigned char *) sig, size,
                          sodium_base64_VARIANT_ORIGINAL);
        return 0;
}

int verb_object_add(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_free_ char *data = NULL, *sig = NULL;
        const char *headers[2] = { NULL, NULL };
        size_t size = 0;
        int r;

        r = ctl_read_input(args[0], &data, &size);
        if (r < 0)
                return r;
        r = signature_header(args[0], &sig);
        if (r < 0)
                return r;
        headers[0] = sig;
        r = ctl_call(c,
                     &(HttpRequest){ .method = "POST",
                                     .path = "/objects",
                                     .content_type = "application/octet-stream",
                                     .body = data,
                                     .body_size = size,
                                     .headers = headers },
                     streq(args[0], "-") ? "stdin" : args[0], &answer);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(answer);
        return print_object(answer);
}

int verb_object_show(const Ctl *c, char **args) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_free_ char *digest = NULL, *path = NULL;
        int r;

        r = ctl_object_resolve_digest(c, args[0], &digest);
        if (r < 0)
                return r;
        r = object_path(digest, &path);
        if (r < 0)
                return r;
        r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = path }, args[0], &answer);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(answer);
        return print_object(answer);
}

int verb_object_remove(const Ctl *c, char **args) {
        _cleanup_free_ char *digest = NULL, *path = NULL;
        int r;

        r = ctl_object_resolve_digest(c, args[0], &digest);
        if (r < 0)
                return r;
        r = object_path(digest, &path);
        if (r < 0)
                return r;
        return ctl_call(c, &(HttpRequest){ .method = "DELETE", .path = path }, args[0], NULL);
}

int verb_object_list(const Ctl *c, char **args _unused_) {
        _cleanup_(json_decrefp) json_t *answer = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        const json_t *v;
        size_t i;
        int r;

        r = ctl_call(c, &(HttpRequest){ .method = "GET", .path = "/objects" }, NULL, &answer);
        if (r < 0)
                return r;
        if (c->json)
                return ctl_print_json(answer);

        t = table_new("DIGEST", "PROGRAMS", "MAPS", "USED-BY", NULL);
        if (!t)
                return ctl_oom();
        json_array_foreach (json_object_get(answer, "objects"), i, v) {
                const char *d = json_string_value(json_object_get(v, "digest"));
                _cleanup_free_ char *programs = json_join(json_object_get(v, "programs"), "name");
                _cleanup_free_ char *maps = json_join(json_object_get(v, "maps"), "name");
                _cleanup_free_ char *used_by = json_join(json_object_get(v, "used_by"), NULL);

                if (!programs || !maps || !used_by)
                        return ctl_oom();
                if (d && startswith(d, DIGEST_PREFIX))
                        d = startswith(d, DIGEST_PREFIX);
                if (d)
                        table_addf(t, "%.*s", DIGEST_SHORT_LEN, d);
                else
                        table_add(t, NULL);
                table_add(t, programs);
                table_add(t, maps);
                table_add(t, used_by);
        }
        return ctl_table_print(t);
}
