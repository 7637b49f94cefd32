/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>
#include <stdio.h>

#include "counters.h"
#include "macro.h"

/* Prometheus' text exposition format (version 0.0.4), written into memory:
 * one family at a time, "# HELP" and "# TYPE" first, then its samples.
 * Names and label names are checked ([a-zA-Z_:][a-zA-Z0-9_:]*, labels
 * without ':' and not starting with "__"), a counter's name must end in
 * "_total" and no family may come twice; label values and help texts are
 * escaped. The first error sticks: later calls do nothing, and
 * metrics_writer_finish() returns it. Pure logic, no I/O. */

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef enum MetricType {
        METRIC_COUNTER,
        METRIC_GAUGE,
        METRIC_HISTOGRAM,
        _METRIC_TYPE_MAX,
} MetricType;

typedef struct MetricLabel {
        const char *name;
        const char *value; /* NULL: "" */
} MetricLabel;

typedef struct MetricsWriter MetricsWriter;

int metrics_writer_new(MetricsWriter **ret);
MetricsWriter *metrics_writer_free(MetricsWriter *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(MetricsWriter *, metrics_writer_free);

/* The text so far (NUL-terminated, *ret_size without the NUL), or the
 * first error of any call. */
int metrics_writer_finish(MetricsWriter *w, char **ret, size_t *ret_size);
int metrics_writer_error(const MetricsWriter *w);

/* Starts a family: its samples follow. */
void metrics_family(MetricsWriter *w, const char *name, MetricType type, const char *help);
/* A sample of the current (counter or gauge) family. */
void metrics_sample(MetricsWriter *w, const MetricLabel *labels, size_t n_labels, double value);
void metrics_sample_u64(MetricsWriter *w, const MetricLabel *labels, size_t n_labels, uint64_t value);
/* The current histogram family's series: cumulative _bucket{le=...} (in
 * seconds, from the histogram's microsecond bounds), +Inf, _sum, _count. */
void metrics_histogram(MetricsWriter *w, const MetricLabel *labels, size_t n_labels, const Histogram *h);

/* A family with one sample of one label or none: the common cases. */
#define METRICS_LABELS(...)                     \
        ((const MetricLabel[]){ __VA_ARGS__ }), \
                (sizeof((const MetricLabel[]){ __VA_ARGS__ }) / sizeof(MetricLabel))
void metrics_counter_u64(MetricsWriter *w, const char *name, const char *help, uint64_t value);
void metrics_gauge(MetricsWriter *w, const char *name, const char *help, double value);
/* One sample per entry of a counter table, labelled label=entry's label,
 * with the value of 'column'. */
void metrics_counter_table(MetricsWriter *w, const char *name, const char *help, const char *label,
                           const CounterTable *t, unsigned column);

/* Escapes a label value (\\, \", \n) or a help text (\\, \n), made valid
 * UTF-8 first (utf8_make_valid(): each invalid byte becomes U+FFFD). */
int metrics_escape(const char *s, bool label_value, char **ret);
bool metrics_name_valid(const char *name);
bool metrics_label_name_valid(const char *name);
