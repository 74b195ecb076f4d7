/* output.c: aligned tables like ip/networkctl print (header in capitals, two spaces between columns,
 * no trailing blanks) and escaping of text that came from the daemon. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf(), open_memstream() */
#endif
#include <stdarg.h>
#include <stdio.h>

#include "output.h"

struct Table {
        size_t n_columns;
        char **cells; /* row-major, headers first */
        size_t n_cells;
        bool failed; /* a cell could not be added (out of memory): nothing more is, and it prints nothing */
};

Table *table_free(Table *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_cells; i++)
                free(t->cells[i]);
        free(t->cells);
        free(t);
        return NULL;
}

static void table_take(Table *t, char *cell) {
        char **c;

        if (!cell || t->failed) {
                free(cell);
                t->failed = true;
                return;
        }
        c = realloc(t->cells, (t->n_cells + 1) * sizeof(char *));
        if (!c) {
                free(cell);
                t->failed = true;
                return;
        }
        t->cells = c;
        t->cells[t->n_cells++] = cell;
}

void table_add(Table *t, const char *cell) {
        table_take(t, text_escape(cell && *cell ? cell : "-", false));
}

void table_add_taken(Table *t, char *cell) {
        if (!cell) {
                t->failed = true;
                return;
        }
        table_add(t, cell);
        free(cell);
}

void table_addf(Table *t, const char *fmt, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0) {
                s = NULL;
                t->failed = true;
                return;
        }
        table_add(t, s);
}

Table *table_new(const char *header, ...) {
        _cleanup_(table_freep) Table *t = calloc(1, sizeof(Table));
        va_list ap;

        if (!t)
                return NULL;
        va_start(ap, header);
        for (const char *h = header; h; h = va_arg(ap, const char *)) {
                table_add(t, h);
                t->n_columns++;
        }
        va_end(ap);
        if (t->failed || t->n_columns == 0)
                return NULL;
        return TAKE_PTR(t);
}

void table_add_json(Table *t, const json_t *v) {
        if (json_is_string(v))
                table_add(t, json_string_value(v));
        else if (json_is_integer(v))
                table_addf(t, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else if (json_is_boolean(v))
                table_add(t, json_is_true(v) ? "yes" : "no");
        else
                table_add(t, NULL);
}

size_t table_rows(const Table *t) {
        return t->n_cells / t->n_columns - 1;
}

/* Columns on the terminal: UTF-8 continuation bytes take none. Escaping left no control bytes. */
static size_t text_width(const char *s) {
        size_t w = 0;

        for (; *s; s++)
                if (((unsigned char) *s & 0xc0) != 0x80)
                        w++;
        return w;
}

int table_print(const Table *t, FILE *f) {
        _cleanup_free_ size_t *width = calloc(t->n_columns, sizeof(size_t));

        if (!width || t->failed)
                return -ENOMEM;
        if (t->n_cells % t->n_columns != 0)
                return -EINVAL; /* a row was left incomplete: a bug in the caller */

        for (size_t i = 0; i < t->n_cells; i++)
                width[i % t->n_columns] = MAX(width[i % t->n_columns], text_width(t->cells[i]));

        for (size_t i = 0; i < t->n_cells; i++) {
                size_t col = i % t->n_columns;

                fputs(t->cells[i], f);
                if (col + 1 == t->n_columns)
                        fputc('\n', f);
                else
                        fprintf(f, "%*s", (int) (width[col] - text_width(t->cells[i]) + 2), "");
        }
        return fflush(f) != 0 || ferror(f) ? -EIO : 0;
}

char *text_escape(const char *s, bool keep_newlines) {
        char *e = malloc(strlen(s) * 4 + 1), *p = e;

        if (!e)
                return NULL;
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;

                if ((c < 0x20 && !(keep_newlines && (c == '\n' || c == '\t'))) || c == 0x7f)
                        p += sprintf(p, "\\x%02x", c);
                else
                        *p++ = (char) c;
        }
        *p = 0;
        return e;
}

char *json_join(const json_t *array, const char *key) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, i;
        const json_t *v;
        bool first = true;
        FILE *f;

        f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        json_array_foreach (array, i, v) {
                const char *s = json_string_value(key ? json_object_get(v, key) : v);
                if (!s)
                        continue;
                fprintf(f, "%s%s", first ? "" : ", ", s);
                first = false;
        }
        if (fclose(f) != 0)
                return NULL;
        return TAKE_PTR(buf);
}

void table_add_fields(Table *t, const json_t *object, const char *const *keys) {
        for (size_t k = 0; keys[k]; k++)
                table_add_json(t, json_object_get(object, keys[k]));
}

void table_add_rows(Table *t, const json_t *array, const char *const *keys) {
        const json_t *v;
        size_t i;

        json_array_foreach (array, i, v)
                table_add_fields(t, v, keys);
}
