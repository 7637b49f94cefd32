/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/* What the agent counts for its metrics (exposition.h writes them): a
 * histogram of durations, and a table of counters by a label value. Pure
 * data, no I/O, no allocation on the hot path of a histogram. */

#define HISTOGRAM_BOUNDS_MAX 16

/* Observations in microseconds; buckets[i] counts those <= bounds[i] and
 * > bounds[i-1] (buckets[n_bounds]: above the last bound). */
typedef struct Histogram {
        size_t n_bounds;
        uint64_t bounds_usec[HISTOGRAM_BOUNDS_MAX];
        uint64_t buckets[HISTOGRAM_BOUNDS_MAX + 1];
        uint64_t count;
        uint64_t sum_usec;
} Histogram;

/* Bounds strictly increasing, at most HISTOGRAM_BOUNDS_MAX: -EINVAL otherwise. */
int histogram_init(Histogram *h, const uint64_t *bounds_usec, size_t n_bounds);
void histogram_observe(Histogram *h, uint64_t usec);

/* Counters by label value (a profile, a reason, a sysctl), each with up to
 * COUNTER_TABLE_COLUMNS values. At most 'max' distinct labels: the counts
 * of any further one go to COUNTER_TABLE_OTHER, so that no input makes the
 * table (and the exposition) grow without bound. */
#define COUNTER_TABLE_COLUMNS 8
#define COUNTER_TABLE_OTHER "_other"

typedef struct CounterEntry {
        char *label;
        uint64_t values[COUNTER_TABLE_COLUMNS];
} CounterEntry;

typedef struct CounterTable {
        CounterEntry *entries; /* in order of first use */
        size_t n, max;
} CounterTable;

void counter_table_init(CounterTable *t, size_t max);
void counter_table_done(CounterTable *t);
/* The entry of a label, made when new (NULL: out of memory). */
CounterEntry *counter_table_get(CounterTable *t, const char *label);
/* Adds n to a label's column (-ENOMEM, -EINVAL for a bad column). */
int counter_table_add(CounterTable *t, const char *label, unsigned column, uint64_t n);
uint64_t counter_table_value(const CounterTable *t, const char *label, unsigned column);
/* A copy of src in *dst (an empty or done table). */
int counter_table_copy(CounterTable *dst, const CounterTable *src);

/* How long a kind of work took, over its runs (cgprofctl status), and
 * their histogram (/metrics; no buckets: not kept). */
typedef struct Timing {
        uint64_t count, usec_total, usec_max;
        Histogram histogram;
} Timing;

static inline uint64_t timing_now(void) {
        return now_usec(CLOCK_MONOTONIC);
}

/* Adds one run of 'usec'. */
static inline void timing_record(Timing *t, uint64_t usec) {
        t->count++;
        t->usec_total += usec;
        if (usec > t->usec_max)
                t->usec_max = usec;
        if (t->histogram.n_bounds > 0)
                histogram_observe(&t->histogram, usec);
}

/* Adds one run that started at 'start' (timing_now()); returns its length. */
static inline uint64_t timing_add(Timing *t, uint64_t start) {
        uint64_t usec = timing_now() - start;
        timing_record(t, usec);
        return usec;
}
