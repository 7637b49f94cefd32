/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "counters.h"

int histogram_init(Histogram *h, const uint64_t *bounds_usec, size_t n_bounds) {
        if (!h || n_bounds > HISTOGRAM_BOUNDS_MAX || (n_bounds > 0 && !bounds_usec))
                return -EINVAL;
        for (size_t i = 1; i < n_bounds; i++)
                if (bounds_usec[i] <= bounds_usec[i - 1])
                        return -EINVAL;
        *h = (Histogram){ .n_bounds = n_bounds };
        if (n_bounds > 0)
                memcpy(h->bounds_usec, bounds_usec, n_bounds * sizeof(uint64_t));
        return 0;
}

void histogram_observe(Histogram *h, uint64_t usec) {
        size_t i = 0;

        while (i < h->n_bounds && usec > h->bounds_usec[i])
                i++;
        h->buckets[i]++;
        h->count++;
        h->sum_usec += usec;
}

void counter_table_init(CounterTable *t, size_t max) {
        *t = (CounterTable){ .max = MAX(max, (size_t) 1) };
}

void counter_table_done(CounterTable *t) {
        for (size_t i = 0; i < t->n; i++)
                free(t->entries[i].label);
        free(t->entries);
        t->entries = NULL;
        t->n = 0;
}

static CounterEntry *find(const CounterTable *t, const char *label) {
        for (size_t i = 0; i < t->n; i++)
                if (streq(t->entries[i].label, label))
                        return &t->entries[i];
        return NULL;
}

CounterEntry *counter_table_get(CounterTable *t, const char *label) {
        CounterEntry *e, *l;

        if (!label)
                label = "";
        e = find(t, label);
        if (e)
                return e;
        /* The last place is the overflow's: any label past max - 1 goes there. */
        if (t->n + 1 >= t->max && !streq(label, COUNTER_TABLE_OTHER))
                return counter_table_get(t, COUNTER_TABLE_OTHER);
        l = reallocarray(t->entries, t->n + 1, sizeof(CounterEntry));
        if (!l)
                return NULL;
        t->entries = l;
        e = &l[t->n];
        *e = (CounterEntry){ .label = strdup(label) };
        if (!e->label)
                return NULL;
        t->n++;
        return e;
}

int counter_table_add(CounterTable *t, const char *label, unsigned column, uint64_t n) {
        CounterEntry *e;

        if (column >= COUNTER_TABLE_COLUMNS)
                return -EINVAL;
        e = counter_table_get(t, label);
        if (!e)
                return -ENOMEM;
        e->values[column] += n;
        return 0;
}

uint64_t counter_table_value(const CounterTable *t, const char *label, unsigned column) {
        const CounterEntry *e = find(t, label ?: "");

        return e && column < COUNTER_TABLE_COLUMNS ? e->values[column] : 0;
}

int counter_table_copy(CounterTable *dst, const CounterTable *src) {
        counter_table_init(dst, src->max);
        if (src->n == 0)
                return 0;
        dst->entries = calloc(src->n, sizeof(CounterEntry));
        if (!dst->entries)
                return -ENOMEM;
        for (size_t i = 0; i < src->n; i++) {
                dst->entries[i] = src->entries[i];
                dst->entries[i].label = strdup(src->entries[i].label);
                if (!dst->entries[i].label) {
                        counter_table_done(dst);
                        return -ENOMEM;
                }
                dst->n++;
        }
        return 0;
}
