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

/* Cells are added row by row, left to right. NULL or "" shows as "-". A cell that cannot be added (out
 * of memory) fails the table: nothing more is added, and table_print() answers -ENOMEM, so that a row
 * of cells is added without a check after each (ctl_table_print() says why it failed). */
void table_add(Table *t, const char *cell);
void table_addf(Table *t, const char *fmt, ...) _printf_(2, 3);
/* cell (taken: freed here) as table_add(); NULL is a cell that could not be made (out of memory). */
void table_add_taken(Table *t, char *cell);
/* A JSON value as a cell: strings as they are, integers in decimal, booleans as yes/no, else "-". */
void table_add_json(Table *t, const json_t *v);
/* The values of keys (NULL-terminated) in object, a cell each, in order (table_add_json()). */
void table_add_fields(Table *t, const json_t *object, const char *const *keys);
/* One row per element of a JSON array of objects, the cells being the values of keys
 * (NULL-terminated), in order. */
void table_add_rows(Table *t, const json_t *array, const char *const *keys);
size_t table_rows(const Table *t);
/* 0; -ENOMEM (a cell could not be added); -EINVAL (a row left incomplete); -EIO (f failed). */
int table_print(const Table *t, FILE *f);

/* Copies s with control bytes as \xNN, so that names and messages from the daemon cannot drive
 * the terminal; newline and tab are kept when keep_newlines (a verifier log is multi-line). */
char *text_escape(const char *s, bool keep_newlines);

/* Joins the strings of array (or the string member key of its objects) with ", "; "" if none. */
char *json_join(const json_t *array, const char *key);
