/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The text exposition format:
 * https://prometheus.io/docs/instrumenting/exposition_formats/ */
#include <inttypes.h>
#include <math.h>

#include "exposition.h"
#include "template.h"

struct MetricsWriter {
        FILE *f;
        char *buf;
        size_t size;
        int error;
        char *family; /* the current family's name */
        MetricType type;
        char **seen; /* the families written */
        size_t n_seen;
};

static const char *const type_names[_METRIC_TYPE_MAX] = {
        [METRIC_COUNTER] = "counter",
        [METRIC_GAUGE] = "gauge",
        [METRIC_HISTOGRAM] = "histogram",
};

int metrics_writer_new(MetricsWriter **ret) {
        _cleanup_(metrics_writer_freep) MetricsWriter *w = calloc(1, sizeof(MetricsWriter));

        if (!w)
                return -ENOMEM;
        w->f = open_memstream(&w->buf, &w->size);
        if (!w->f)
                return -ENOMEM;
        *ret = TAKE_PTR(w);
        return 0;
}

MetricsWriter *metrics_writer_free(MetricsWriter *w) {
        if (!w)
                return NULL;
        if (w->f)
                fclose(w->f);
        free(w->buf);
        free(w->family);
        for (size_t i = 0; i < w->n_seen; i++)
                free(w->seen[i]);
        free(w->seen);
        free(w);
        return NULL;
}

int metrics_writer_error(const MetricsWriter *w) {
        return w->error;
}

static void fail(MetricsWriter *w, int error) {
        if (w->error == 0)
                w->error = error;
}

int metrics_writer_finish(MetricsWriter *w, char **ret, size_t *ret_size) {
        if (w->error < 0)
                return w->error;
        if (fflush(w->f) != 0 || ferror(w->f))
                return -ENOMEM;
        fclose(w->f);
        w->f = NULL;
        *ret = TAKE_PTR(w->buf);
        if (ret_size)
                *ret_size = w->size;
        return 0;
}

static bool name_char(char c, bool first, bool colon) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
               (!first && c >= '0' && c <= '9');
}

bool metrics_name_valid(const char *name) {
        if (!name || !name[0])
                return false;
        for (const char *c = name; *c; c++)
                if (!name_char(*c, c == name, true))
                        return false;
        return true;
}

bool metrics_label_name_valid(const char *name) {
        if (!name || !name[0] || strncmp(name, "__", 2) == 0)
                return false;
        for (const char *c = name; *c; c++)
                if (!name_char(*c, c == name, false))
                        return false;
        return true;
}

int metrics_escape(const char *s, bool label_value, char **ret) {
        _cleanup_free_ char *valid = NULL;
        size_t n = 0;
        char *o, *p;

        /* The exposition is UTF-8: a name that is not (a node's, a
         * profile's) gets U+FFFD for each invalid byte, as on D-Bus. */
        s = s ?: "";
        if (utf8_ensure_valid(&s, &valid) < 0)
                return -ENOMEM;
        for (const char *c = s; *c; c++)
                n += (*c == '\\' || *c == '\n' || (label_value && *c == '"')) ? 2 : 1;
        o = p = malloc(n + 1);
        if (!o)
                return -ENOMEM;
        for (const char *c = s; *c; c++) {
                if (*c == '\\' || (label_value && *c == '"')) {
                        *p++ = '\\';
                        *p++ = *c;
                } else if (*c == '\n') {
                        *p++ = '\\';
                        *p++ = 'n';
                } else
                        *p++ = *c;
        }
        *p = 0;
        *ret = o;
        return 0;
}

static bool ends_with(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && streq(s + a - b, suffix);
}

void metrics_family(MetricsWriter *w, const char *name, MetricType type, const char *help) {
        _cleanup_free_ char *h = NULL;
        char **l;

        if (w->error < 0)
                return;
        if (!metrics_name_valid(name) || (unsigned) type >= _METRIC_TYPE_MAX || !help ||
            (type == METRIC_COUNTER && !ends_with(name, "_total")))
                return fail(w, -EINVAL);
        for (size_t i = 0; i < w->n_seen; i++)
                if (streq(w->seen[i], name))
                        return fail(w, -EEXIST);
        l = reallocarray(w->seen, w->n_seen + 1, sizeof(char *));
        if (!l)
                return fail(w, -ENOMEM);
        w->seen = l;
        l[w->n_seen] = strdup(name);
        if (!l[w->n_seen])
                return fail(w, -ENOMEM);
        w->n_seen++;
        free(w->family);
        w->family = strdup(name);
        if (!w->family)
                return fail(w, -ENOMEM);
        w->type = type;
        if (metrics_escape(help, false, &h) < 0)
                return fail(w, -ENOMEM);
        fprintf(w->f, "# HELP %s %s\n# TYPE %s %s\n", name, h, name, type_names[type]);
}

/* name{labels[,extra="value"]} */
static int write_series(MetricsWriter *w, const char *suffix, const MetricLabel *labels, size_t n,
                        const char *extra_name, const char *extra_value) {
        bool any = n > 0 || extra_name;

        fprintf(w->f, "%s%s", w->family, suffix);
        if (any)
                fputc('{', w->f);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *v = NULL;

                if (!metrics_label_name_valid(labels[i].name) ||
                    (extra_name && streq(labels[i].name, extra_name)))
                        return -EINVAL;
                for (size_t k = 0; k < i; k++)
                        if (streq(labels[k].name, labels[i].name))
                                return -EINVAL;
                if (metrics_escape(labels[i].value, true, &v) < 0)
                        return -ENOMEM;
                fprintf(w->f, "%s%s=\"%s\"", i > 0 ? "," : "", labels[i].name, v);
        }
        if (extra_name)
                fprintf(w->f, "%s%s=\"%s\"", n > 0 ? "," : "", extra_name, extra_value);
        if (any)
                fputc('}', w->f);
        fputc(' ', w->f);
        return 0;
}

/* The shortest of %.15g and %.17g that reads back as the same double. */
static void write_double(FILE *f, double v) {
        char buf[64];

        if (isnan(v))
                fputs("NaN", f);
        else if (isinf(v))
                fputs(v > 0 ? "+Inf" : "-Inf", f);
        else {
                snprintf(buf, sizeof(buf), "%.15g", v);
                if (strtod(buf, NULL) != v)
                        snprintf(buf, sizeof(buf), "%.17g", v);
                fputs(buf, f);
        }
}

/* Writes a sample's series (name and labels) when one may be written:
 * after a family that is not a histogram, and no error so far. */
static bool sample_begin(MetricsWriter *w, const MetricLabel *labels, size_t n_labels) {
        int r;

        if (w->error < 0)
                return false;
        if (!w->family || w->type == METRIC_HISTOGRAM) {
                fail(w, -EINVAL);
                return false;
        }
        r = write_series(w, "", labels, n_labels, NULL, NULL);
        if (r < 0) {
                fail(w, r);
                return false;
        }
        return true;
}

void metrics_sample(MetricsWriter *w, const MetricLabel *labels, size_t n_labels, double value) {
        if (!sample_begin(w, labels, n_labels))
                return;
        write_double(w->f, value);
        fputc('\n', w->f);
}

void metrics_sample_u64(MetricsWriter *w, const MetricLabel *labels, size_t n_labels, uint64_t value) {
        if (!sample_begin(w, labels, n_labels))
                return;
        fprintf(w->f, "%" PRIu64 "\n", value);
}

static void usec_to_string(uint64_t usec, char buf[static 32]) {
        /* Exact in decimal: seconds and the microseconds, trailing zeros dropped. */
        int n = snprintf(buf, 32, "%" PRIu64 ".%06" PRIu64, usec / USEC_PER_SEC, usec % USEC_PER_SEC);
        while (n > 0 && buf[n - 1] == '0')
                buf[--n] = 0;
        if (n > 0 && buf[n - 1] == '.')
                buf[n - 1] = 0;
}

void metrics_histogram(MetricsWriter *w, const MetricLabel *labels, size_t n_labels, const Histogram *h) {
        uint64_t cumulative = 0;
        char le[32];
        int r;

        if (w->error < 0)
                return;
        if (!w->family || w->type != METRIC_HISTOGRAM || !h || h->n_bounds > HISTOGRAM_BOUNDS_MAX)
                return fail(w, -EINVAL);
        for (size_t i = 0; i <= h->n_bounds; i++) {
                cumulative += h->buckets[i];
                if (i < h->n_bounds)
                        usec_to_string(h->bounds_usec[i], le);
                else
                        strcpy(le, "+Inf");
                r = write_series(w, "_bucket", labels, n_labels, "le", le);
                if (r < 0)
                        return fail(w, r);
                fprintf(w->f, "%" PRIu64 "\n", cumulative);
        }
        r = write_series(w, "_sum", labels, n_labels, NULL, NULL);
        if (r < 0)
                return fail(w, r);
        usec_to_string(h->sum_usec, le);
        fprintf(w->f, "%s\n", le);
        r = write_series(w, "_count", labels, n_labels, NULL, NULL);
        if (r < 0)
                return fail(w, r);
        fprintf(w->f, "%" PRIu64 "\n", h->count);
}

void metrics_counter_u64(MetricsWriter *w, const char *name, const char *help, uint64_t value) {
        metrics_family(w, name, METRIC_COUNTER, help);
        metrics_sample_u64(w, NULL, 0, value);
}

void metrics_gauge(MetricsWriter *w, const char *name, const char *help, double value) {
        metrics_family(w, name, METRIC_GAUGE, help);
        metrics_sample(w, NULL, 0, value);
}

void metrics_counter_table(MetricsWriter *w, const char *name, const char *help, const char *label,
                           const CounterTable *t, unsigned column) {
        metrics_family(w, name, METRIC_COUNTER, help);
        if (column >= COUNTER_TABLE_COLUMNS)
                return fail(w, -EINVAL);
        for (size_t i = 0; t && i < t->n; i++)
                metrics_sample_u64(w, METRICS_LABELS({ label, t->entries[i].label }),
                                   t->entries[i].values[column]);
}
