/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl: printing JSON, "label: value" lines and tables; formatting times. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl-output.h"
#include "duration.h"
#include "log.h"

const char *format_timespan(uint64_t usec, char *buf, size_t size) {
        if (usec < 60 * USEC_PER_SEC)
                snprintf(buf, size, "%.1fs", (double) usec / USEC_PER_SEC);
        else
                format_duration((usec + USEC_PER_SEC / 2) / USEC_PER_SEC * USEC_PER_SEC, buf, size);
        return buf;
}

const char *format_timestamp(uint64_t usec, char *buf, size_t size) {
        time_t t = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;

        if (usec == 0 || !localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                snprintf(buf, size, "-");
        return buf;
}

char *format_profiled(const char *namespace, const char *pod, const char *container, const char *cgroup) {
        char *p;

        if (isempty_str(pod))
                return strdup(isempty_str(cgroup) ? "/" : cgroup);
        if (asprintf(&p, "%s/%s%s%s", namespace, pod, isempty_str(container) ? "" : "/",
                     strempty(container)) < 0)
                return NULL;
        return p;
}

int print_json(cJSON *j) {
        _cleanup_free_ char *s = NULL;

        if (!j)
                return log_oom(), EXIT_FAILURE;
        s = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        if (!s)
                return log_oom(), EXIT_FAILURE;
        printf("%s\n", s);
        return EXIT_SUCCESS;
}

double json_number(const cJSON *o, const char *key) {
        return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

const char *json_string(const cJSON *o, const char *key) {
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

void print_kv(const cJSON *j, const char *key, const char *label) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
        if (cJSON_IsString(v))
                printf("%18s: %s\n", label, v->valuestring);
        else if (cJSON_IsNumber(v))
                printf("%18s: %.15g\n", label, v->valuedouble);
        else if (cJSON_IsBool(v))
                printf("%18s: %s\n", label, cJSON_IsTrue(v) ? "yes" : "no");
}

void table_done(Table *t) {
        for (size_t i = 0; i < t->n_cells; i++)
                free(t->cells[i]);
        free(t->cells);
}

int table_add_cells(Table *t, const char *const *cells, size_t n) {
        char **c = reallocarray(t->cells, t->n_cells + n, sizeof(char *));
        if (!c)
                return -ENOMEM;
        t->cells = c;
        for (size_t i = 0; i < n; i++) {
                t->cells[t->n_cells] = strdup(isempty_str(cells[i]) ? "-" : cells[i]);
                if (!t->cells[t->n_cells])
                        return -ENOMEM;
                t->n_cells++;
        }
        return 0;
}

void table_print(const Table *t) {
        size_t widths[16] = {};

        for (size_t i = 0; i < t->n_cells; i++)
                widths[i % t->n_columns] = MAX(widths[i % t->n_columns], strlen(t->cells[i]));
        for (size_t i = 0; i < t->n_cells; i++) {
                size_t c = i % t->n_columns;
                if (c + 1 == t->n_columns)
                        printf("%s\n", t->cells[i]);
                else
                        printf("%-*s  ", (int) widths[c], t->cells[i]);
        }
}
