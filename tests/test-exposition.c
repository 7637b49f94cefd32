/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The exposition writer, the histograms and counter tables behind it, and
 * the process_* metrics. */
#include <math.h>

#include "exposition.h"
#include "process-metrics.h"
#include "tests.h"

static char *finish(MetricsWriter *w) {
        char *s = NULL;
        size_t n = 0;

        ASSERT_OK(metrics_writer_finish(w, &s, &n));
        ASSERT_EQ(strlen(s), n);
        return s;
}

TEST(counter_and_gauge) {
        _cleanup_(metrics_writer_freep) MetricsWriter *w = NULL;
        _cleanup_free_ char *s = NULL;

        ASSERT_OK(metrics_writer_new(&w));
        metrics_counter_u64(w, "cgprof_x_total", "Things.", UINT64_C(18446744073709551615));
        metrics_family(w, "cgprof_g", METRIC_GAUGE, "A gauge\\with a backslash\nand a newline.");
        metrics_sample(w, METRICS_LABELS({ "a", "x\"y\\z\nw" }, { "b", NULL }), 0.1);
        metrics_sample(w, NULL, 0, NAN);
        metrics_sample(w, NULL, 0, -INFINITY);
        metrics_sample(w, NULL, 0, 1e300);
        s = finish(w);
        ASSERT_STREQ(s, "# HELP cgprof_x_total Things.\n"
                        "# TYPE cgprof_x_total counter\n"
                        "cgprof_x_total 18446744073709551615\n"
                        "# HELP cgprof_g A gauge\\\\with a backslash\\nand a newline.\n"
                        "# TYPE cgprof_g gauge\n"
                        "cgprof_g{a=\"x\\\"y\\\\z\\nw\",b=\"\"} 0.1\n"
                        "cgprof_g NaN\n"
                        "cgprof_g -Inf\n"
                        "cgprof_g 1e+300\n");
}

/* A name that is not UTF-8 (a node's): U+FFFD for each invalid byte, in
 * label values and help texts alike. */
TEST(not_utf8) {
        _cleanup_(metrics_writer_freep) MetricsWriter *w = NULL;
        _cleanup_free_ char *s = NULL, *e = NULL;

        ASSERT_OK(metrics_writer_new(&w));
        metrics_family(w, "cgprof_info", METRIC_GAUGE, "Node \xff.");
        metrics_sample(w, METRICS_LABELS({ "node", "node-\xff" }, { "profile", "caf\xc3\xa9\xe2\x82\"" }),
                       1);
        s = finish(w);
        ASSERT_STREQ(s, "# HELP cgprof_info Node \xef\xbf\xbd.\n"
                        "# TYPE cgprof_info gauge\n"
                        "cgprof_info{node=\"node-\xef\xbf\xbd\",profile="
                        "\"caf\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\\\"\"} 1\n");
        ASSERT_OK(metrics_escape("\xc0\\", true, &e));
        ASSERT_STREQ(e, "\xef\xbf\xbd\\\\");
}

TEST(histogram) {
        static const uint64_t bounds[] = { 500, 1000, 2500000 };
        _cleanup_(metrics_writer_freep) MetricsWriter *w = NULL;
        _cleanup_free_ char *s = NULL;
        Histogram h;

        ASSERT_OK(histogram_init(&h, bounds, ELEMENTSOF(bounds)));
        histogram_observe(&h, 0);
        histogram_observe(&h, 500);
        histogram_observe(&h, 501);
        histogram_observe(&h, 3000000);
        ASSERT_EQ(h.count, 4);
        ASSERT_EQ(h.buckets[0], 2);
        ASSERT_EQ(h.buckets[1], 1);
        ASSERT_EQ(h.buckets[2], 0);
        ASSERT_EQ(h.buckets[3], 1);

        ASSERT_OK(metrics_writer_new(&w));
        metrics_family(w, "cgprof_d_seconds", METRIC_HISTOGRAM, "Durations.");
        metrics_histogram(w, METRICS_LABELS({ "k", "v" }), &h);
        s = finish(w);
        ASSERT_STREQ(s, "# HELP cgprof_d_seconds Durations.\n"
                        "# TYPE cgprof_d_seconds histogram\n"
                        "cgprof_d_seconds_bucket{k=\"v\",le=\"0.0005\"} 2\n"
                        "cgprof_d_seconds_bucket{k=\"v\",le=\"0.001\"} 3\n"
                        "cgprof_d_seconds_bucket{k=\"v\",le=\"2.5\"} 3\n"
                        "cgprof_d_seconds_bucket{k=\"v\",le=\"+Inf\"} 4\n"
                        "cgprof_d_seconds_sum{k=\"v\"} 3.001001\n"
                        "cgprof_d_seconds_count{k=\"v\"} 4\n");
}

TEST(histogram_bounds) {
        static const uint64_t bad[] = { 10, 10 };
        uint64_t many[HISTOGRAM_BOUNDS_MAX + 1];
        Histogram h;

        for (size_t i = 0; i < ELEMENTSOF(many); i++)
                many[i] = i + 1;
        ASSERT_ERROR(histogram_init(&h, bad, ELEMENTSOF(bad)), EINVAL);
        ASSERT_ERROR(histogram_init(&h, many, ELEMENTSOF(many)), EINVAL);
        ASSERT_OK(histogram_init(&h, many, HISTOGRAM_BOUNDS_MAX));
        ASSERT_OK(histogram_init(&h, NULL, 0));
        histogram_observe(&h, 7);
        ASSERT_EQ(h.buckets[0], 1);
}

static int writer_error(void (*f)(MetricsWriter *w)) {
        _cleanup_(metrics_writer_freep) MetricsWriter *w = NULL;
        char *s = NULL;
        int r;

        ASSERT_OK(metrics_writer_new(&w));
        f(w);
        /* The error sticks: later good calls change nothing. */
        metrics_counter_u64(w, "cgprof_fine_total", "Fine.", 1);
        r = metrics_writer_finish(w, &s, NULL);
        ASSERT_NULL(s);
        return r;
}

static void bad_counter_name(MetricsWriter *w) {
        metrics_counter_u64(w, "cgprof_samples", "No _total.", 1);
}
static void bad_name(MetricsWriter *w) {
        metrics_gauge(w, "9cgprof", "Starts with a digit.", 1);
}
static void bad_label(MetricsWriter *w) {
        metrics_family(w, "cgprof_g", METRIC_GAUGE, "G.");
        metrics_sample(w, METRICS_LABELS({ "__reserved", "x" }), 1);
}
static void label_colon(MetricsWriter *w) {
        metrics_family(w, "cgprof_g", METRIC_GAUGE, "G.");
        metrics_sample(w, METRICS_LABELS({ "a:b", "x" }), 1);
}
static void duplicate_label(MetricsWriter *w) {
        metrics_family(w, "cgprof_g", METRIC_GAUGE, "G.");
        metrics_sample(w, METRICS_LABELS({ "a", "x" }, { "a", "y" }), 1);
}
static void le_label(MetricsWriter *w) {
        Histogram h = {};
        metrics_family(w, "cgprof_h_seconds", METRIC_HISTOGRAM, "H.");
        metrics_histogram(w, METRICS_LABELS({ "le", "1" }), &h);
}
static void twice(MetricsWriter *w) {
        metrics_gauge(w, "cgprof_g", "G.", 1);
        metrics_gauge(w, "cgprof_g", "G.", 2);
}
static void no_family(MetricsWriter *w) {
        metrics_sample(w, NULL, 0, 1);
}
static void sample_in_histogram(MetricsWriter *w) {
        metrics_family(w, "cgprof_h_seconds", METRIC_HISTOGRAM, "H.");
        metrics_sample(w, NULL, 0, 1);
}
static void histogram_in_gauge(MetricsWriter *w) {
        Histogram h = {};
        metrics_family(w, "cgprof_g", METRIC_GAUGE, "G.");
        metrics_histogram(w, NULL, 0, &h);
}

TEST(refused) {
        ASSERT_EQ(writer_error(bad_counter_name), -EINVAL);
        ASSERT_EQ(writer_error(bad_name), -EINVAL);
        ASSERT_EQ(writer_error(bad_label), -EINVAL);
        ASSERT_EQ(writer_error(label_colon), -EINVAL);
        ASSERT_EQ(writer_error(duplicate_label), -EINVAL);
        ASSERT_EQ(writer_error(le_label), -EINVAL);
        ASSERT_EQ(writer_error(twice), -EEXIST);
        ASSERT_EQ(writer_error(no_family), -EINVAL);
        ASSERT_EQ(writer_error(sample_in_histogram), -EINVAL);
        ASSERT_EQ(writer_error(histogram_in_gauge), -EINVAL);
}

TEST(names) {
        ASSERT_TRUE(metrics_name_valid("cgprof_a:b_1"));
        ASSERT_TRUE(metrics_name_valid("_x"));
        ASSERT_FALSE(metrics_name_valid(""));
        ASSERT_FALSE(metrics_name_valid("a-b"));
        ASSERT_FALSE(metrics_name_valid("a b"));
        ASSERT_TRUE(metrics_label_name_valid("profile"));
        ASSERT_FALSE(metrics_label_name_valid("1a"));
        ASSERT_FALSE(metrics_label_name_valid("__name__"));
}

TEST(counter_table) {
        _cleanup_(metrics_writer_freep) MetricsWriter *w = NULL;
        _cleanup_free_ char *s = NULL;
        CounterTable t, c;

        counter_table_init(&t, 3);
        ASSERT_OK(counter_table_add(&t, "a", 0, 1));
        ASSERT_OK(counter_table_add(&t, "b", 1, 2));
        ASSERT_OK(counter_table_add(&t, "a", 0, 5));
        /* Full: further labels count in "_other", the last place. */
        ASSERT_OK(counter_table_add(&t, "c", 0, 7));
        ASSERT_OK(counter_table_add(&t, "d", 0, 1));
        ASSERT_OK(counter_table_add(&t, "b", 0, 1));
        ASSERT_EQ(t.n, 3);
        ASSERT_EQ(counter_table_value(&t, "a", 0), 6);
        ASSERT_EQ(counter_table_value(&t, "b", 0), 1);
        ASSERT_EQ(counter_table_value(&t, "b", 1), 2);
        ASSERT_EQ(counter_table_value(&t, "c", 0), 0);
        ASSERT_EQ(counter_table_value(&t, COUNTER_TABLE_OTHER, 0), 8);
        ASSERT_ERROR(counter_table_add(&t, "a", COUNTER_TABLE_COLUMNS, 1), EINVAL);

        ASSERT_OK(counter_table_copy(&c, &t));
        ASSERT_OK(counter_table_add(&c, "a", 0, 1));
        ASSERT_EQ(counter_table_value(&t, "a", 0), 6);
        ASSERT_EQ(counter_table_value(&c, "a", 0), 7);

        ASSERT_OK(metrics_writer_new(&w));
        metrics_counter_table(w, "cgprof_t_total", "T.", "k", &c, 0);
        s = finish(w);
        ASSERT_STREQ(s, "# HELP cgprof_t_total T.\n"
                        "# TYPE cgprof_t_total counter\n"
                        "cgprof_t_total{k=\"a\"} 7\n"
                        "cgprof_t_total{k=\"b\"} 1\n"
                        "cgprof_t_total{k=\"_other\"} 8\n");
        counter_table_done(&t);
        counter_table_done(&c);
}

TEST(process_metrics) {
        _cleanup_(metrics_writer_freep) MetricsWriter *w = NULL;
        _cleanup_free_ char *s = NULL;

        ASSERT_OK(metrics_writer_new(&w));
        process_metrics_write(w, "/proc/self");
        s = finish(w);
        fprintf(stderr, "%s", s);
        ASSERT_NOT_NULL(strstr(s, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total "));
        ASSERT_NOT_NULL(strstr(s, "\nprocess_resident_memory_bytes "));
        ASSERT_NOT_NULL(strstr(s, "\nprocess_virtual_memory_bytes "));
        ASSERT_NOT_NULL(strstr(s, "\nprocess_start_time_seconds "));
        ASSERT_NOT_NULL(strstr(s, "\nprocess_open_fds "));
        ASSERT_NOT_NULL(strstr(s, "\nprocess_max_fds "));
        ASSERT_NULL(strstr(s, "process_resident_memory_bytes 0\n"));
}

TEST(process_metrics_missing) {
        _cleanup_(metrics_writer_freep) MetricsWriter *w = NULL;
        _cleanup_free_ char *s = NULL;

        /* Nothing to read: no family, and no error. */
        ASSERT_OK(metrics_writer_new(&w));
        process_metrics_write(w, "/nonexistent");
        s = finish(w);
        ASSERT_STREQ(s, "");
}

DEFINE_TEST_MAIN
