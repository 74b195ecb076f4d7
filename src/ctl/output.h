/* output.h: what clsctl shows people: aligned tables, and text made safe for a terminal. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "macros.h"

typedef struct Table Table;

/* The column headers, NULL-terminated. */
Table *table_new(const char *header, ...);
Table *table_free(Table *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(Table *, table_free);

/* Cells are added row by row, left to right. NULL or "" shows as "-". */
int table_add(Table *t, const char *cell);
int table_addf(Table *t, const char *fmt, ...) _printf_(2, 3);
/* A JSON value as a cell: strings as they are, integers in decimal, booleans as yes/no, else "-". */
int table_add_json(Table *t, const json_t *v);
/* One row per element of a JSON array of objects, the cells being the values of keys
 * (NULL-terminated), in order. */
int table_add_rows(Table *t, const json_t *array, const char *const *keys);
size_t table_rows(const Table *t);
int table_print(const Table *t, FILE *f);

/* Copies s with control bytes as \xNN, so that names and messages from the daemon cannot drive
 * the terminal; newline and tab are kept when keep_newlines (a verifier log is multi-line). */
char *text_escape(const char *s, bool keep_newlines);

/* Joins the strings of array (or the string member key of its objects) with ", "; "" if none. */
char *json_join(const json_t *array, const char *key);
