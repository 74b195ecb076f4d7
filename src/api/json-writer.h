/* json-writer.h: JSON written straight into a memory stream, for the answers that are read often and
 * are large (GET /ifaces): no tree built and freed per request. The layout is jansson's JSON_INDENT(2),
 * as every other answer's. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct JsonWriter {
        FILE *f;
        unsigned depth;
        bool first; /* nothing written yet in the current object or array */
        bool after_key;
} JsonWriter;

void jw_begin_object(JsonWriter *w);
void jw_end_object(JsonWriter *w);
void jw_begin_array(JsonWriter *w);
void jw_end_array(JsonWriter *w);
void jw_key(JsonWriter *w, const char *key);
void jw_string(JsonWriter *w, const char *s);
void jw_int(JsonWriter *w, int64_t v);
void jw_bool(JsonWriter *w, bool v);
void jw_null(JsonWriter *w);
