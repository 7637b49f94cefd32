/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl's output: JSON, "label: value" lines, aligned tables, and the
 * formats of times and of what a session profiles. */
#pragma once

#include <cjson/cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

#define TIMESPAN_MAX 32
#define TIMESTAMP_MAX 32
#define UINT64_DECIMAL_MAX 21 /* "18446744073709551615" and its NUL */

static inline bool isempty_str(const char *s) {
        return !s || !*s;
}

/* "12.3s" below a minute, else whole seconds as "1h2m3s". */
const char *format_timespan(uint64_t usec, char *buf, size_t size);

/* "2026-11-21 20:45:21" in local time; "-" for 0. */
const char *format_timestamp(uint64_t usec, char *buf, size_t size);

/* What a session or report profiles: "ns/pod/container", "ns/pod", or the
 * cgroup path ("/" for the root). NULL: out of memory. */
char *format_profiled(const char *namespace, const char *pod, const char *container, const char *cgroup);

/* Prints j on one line and deletes it; j NULL: out of memory. Returns an
 * exit status. */
int print_json(cJSON *j);

/* A JSON object's member as a number (NaN if it is none) or a string (NULL). */
double json_number(const cJSON *o, const char *key);
const char *json_string(const cJSON *o, const char *key);

/* "             Label: value" for a string, number or boolean member of j;
 * nothing if it has no such member. */
void print_kv(const cJSON *j, const char *key, const char *label);

/* A table printed with aligned columns; the last column is not padded. */
typedef struct Table {
        size_t n_columns;
        char **cells; /* row-major, the header first */
        size_t n_cells;
} Table;

void table_done(Table *t);

/* Adds cells; NULL or "" shows as "-". Returns 0 or -ENOMEM. */
int table_add_cells(Table *t, const char *const *cells, size_t n);
#define table_add(t, ...)                                        \
        table_add_cells(t, (const char *const[]){ __VA_ARGS__ }, \
                        ELEMENTSOF(((const char *const[]){ __VA_ARGS__ })))

/* Whether the table has rows below its header. */
static inline bool table_has_rows(const Table *t) {
        return t->n_cells > t->n_columns;
}

void table_print(const Table *t);
