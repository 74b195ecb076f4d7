/* json-writer.c: JSON straight into a memory stream, laid out as jansson's JSON_INDENT(2). */
#include <inttypes.h>

#include "json-writer.h"

static void indent(JsonWriter *w) {
        fputc_unlocked('\n', w->f);
        for (unsigned i = 0; i < w->depth * 2; i++)
                fputc_unlocked(' ', w->f);
}

/* Before a value: after a key nothing; in an array a separator and a new line. */
static void value_start(JsonWriter *w) {
        if (w->after_key) {
                w->after_key = false;
                return;
        }
        if (w->depth == 0)
                return;
        if (!w->first)
                fputc_unlocked(',', w->f);
        indent(w);
        w->first = false;
}

static void begin(JsonWriter *w, char c) {
        value_start(w);
        fputc_unlocked(c, w->f);
        w->depth++;
        w->first = true;
}

static void end(JsonWriter *w, char c) {
        w->depth--;
        if (!w->first)
                indent(w);
        fputc_unlocked(c, w->f);
        w->first = false;
}

void jw_begin_object(JsonWriter *w) {
        begin(w, '{');
}

void jw_end_object(JsonWriter *w) {
        end(w, '}');
}

void jw_begin_array(JsonWriter *w) {
        begin(w, '[');
}

void jw_end_array(JsonWriter *w) {
        end(w, ']');
}

static void put_string(FILE *f, const char *s) {
        fputc_unlocked('"', f);
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                switch (*p) {
                case '"':
                        fputs_unlocked("\\\"", f);
                        break;
                case '\\':
                        fputs_unlocked("\\\\", f);
                        break;
                case '\n':
                        fputs_unlocked("\\n", f);
                        break;
                case '\r':
                        fputs_unlocked("\\r", f);
                        break;
                case '\t':
                        fputs_unlocked("\\t", f);
                        break;
                case '\b':
                        fputs_unlocked("\\b", f);
                        break;
                case '\f':
                        fputs_unlocked("\\f", f);
                        break;
                default:
                        if (*p < 0x20)
                                fprintf(f, "\\u%04x", *p);
                        else
                                fputc_unlocked(*p, f);
                }
        }
        fputc_unlocked('"', f);
}

void jw_key(JsonWriter *w, const char *key) {
        value_start(w);
        put_string(w->f, key);
        fputs_unlocked(": ", w->f);
        w->after_key = true;
}

void jw_string(JsonWriter *w, const char *s) {
        value_start(w);
        put_string(w->f, s);
}

void jw_int(JsonWriter *w, int64_t v) {
        value_start(w);
        fprintf(w->f, "%" PRId64, v);
}

void jw_bool(JsonWriter *w, bool v) {
        value_start(w);
        fputs_unlocked(v ? "true" : "false", w->f);
}

void jw_null(JsonWriter *w) {
        value_start(w);
        fputs_unlocked("null", w->f);
}
