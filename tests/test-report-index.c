/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* agent/report-index.c: the reports in memory, against a model (a plain
 * array sorted by the same key) through random puts, replaces and removals;
 * listings paged by cursor give every entry once, newest first; retention
 * takes the too old, then the oldest while too many or too large, and keeps
 * what it is told to keep. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "report-index.h"
#include "tests.h"

static ControlReport make(const char *dir, const char *session, const char *ns, uint64_t start,
                          uint64_t bytes) {
        return (ControlReport){
                .session = (char *) session,
                .report_dir = (char *) dir,
                .namespace = (char *) ns,
                .pod = (char *) "p",
                .container = (char *) "c",
                .cgroup = (char *) "cg",
                .start_usec = start,
                .samples = 1,
                .bytes = bytes,
        };
}

static int put(ReportIndex *x, const char *dir, const char *session, const char *ns, uint64_t start,
               uint64_t bytes) {
        ControlReport r = make(dir, session, ns, start, bytes);
        return report_index_put(x, &r);
}

static bool in_ns(const ControlReport *r, void *userdata) {
        return streq(r->namespace, userdata);
}

TEST(put_replace_remove) {
        _cleanup_(report_index_freep) ReportIndex *x = NULL;
        const ReportEntry **l = NULL;
        size_t n;
        bool more;

        ASSERT_OK(report_index_new(&x));
        ASSERT_OK(put(x, "/r/a", "s1", "ns1", 300, 10));
        ASSERT_OK(put(x, "/r/b", "s2", "ns2", 100, 20));
        ASSERT_OK(put(x, "/r/c", "s3", "ns1", 200, 30));
        ASSERT_EQ(report_index_count(x), 3U);
        ASSERT_EQ(report_index_bytes(x), 60U);

        /* A checkpoint written again: replaced, not added. */
        ASSERT_OK(put(x, "/r/a", "s1", "ns1", 300, 15));
        ASSERT_EQ(report_index_count(x), 3U);
        ASSERT_EQ(report_index_bytes(x), 65U);

        ASSERT_OK(report_index_list(x, NULL, NULL, NULL, 0, &l, &n, &more));
        ASSERT_EQ(n, 3U);
        ASSERT_FALSE(more);
        ASSERT_STREQ(l[0]->report.report_dir, "/r/a"); /* newest first */
        ASSERT_STREQ(l[1]->report.report_dir, "/r/c");
        ASSERT_STREQ(l[2]->report.report_dir, "/r/b");
        free(l);

        ASSERT_OK(report_index_list(x, in_ns, (void *) "ns1", NULL, 1, &l, &n, &more));
        ASSERT_EQ(n, 1U);
        ASSERT_TRUE(more);
        ASSERT_STREQ(l[0]->report.report_dir, "/r/a");
        free(l);

        ASSERT_STREQ(report_index_find_session(x, "s3")->report.report_dir, "/r/c");
        ASSERT_NULL(report_index_find_session(x, "nope"));
        ASSERT_TRUE(report_index_remove(x, "/r/c"));
        ASSERT_FALSE(report_index_remove(x, "/r/c"));
        ASSERT_NULL(report_index_find_session(x, "s3"));
        ASSERT_EQ(report_index_count(x), 2U);
        ASSERT_EQ(report_index_bytes(x), 35U);
}

TEST(cursor_text) {
        ReportCursor c = { .start_usec = 1795290117243123, .serial = 42 }, d;
        char buf[REPORT_CURSOR_STRING_MAX];

        report_cursor_format(&c, buf);
        ASSERT_STREQ(buf, "1795290117243123.42");
        ASSERT_OK(report_cursor_parse(buf, &d));
        ASSERT_EQ(d.start_usec, c.start_usec);
        ASSERT_EQ(d.serial, c.serial);
        static const char *const bad[] = { "",
                                           "1",
                                           "1.",
                                           ".1",
                                           "-1.2",
                                           "1.-2",
                                           "1.2x",
                                           " 1.2",
                                           "1.2 ",
                                           "1.+2",
                                           "18446744073709551616.1",
                                           "x.y" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_ERROR(report_cursor_parse(bad[i], &d), EINVAL);
}

/* The model: (start, serial, dir) of each entry, in a plain array. */
typedef struct Model {
        uint64_t start, bytes;
        unsigned id; /* the dir is "/r/ID" */
        bool present;
} Model;

#define N_IDS 400U

TEST(random_against_model_and_paging) {
        _cleanup_(report_index_freep) ReportIndex *x = NULL;
        Model m[N_IDS] = {};
        uint64_t serial_of[N_IDS] = {}, next_serial = 1;
        unsigned seed = 12345;

        ASSERT_OK(report_index_new(&x));
        for (unsigned step = 0; step < 20000; step++) {
                unsigned id = (unsigned) rand_r(&seed) % N_IDS, op = (unsigned) rand_r(&seed) % 3;
                char dir[32], session[32];

                snprintf(dir, sizeof(dir), "/r/%u", id);
                snprintf(session, sizeof(session), "s%u", id);
                if (op < 2) {
                        uint64_t start = m[id].present ? m[id].start : (uint64_t) (rand_r(&seed) % 50);
                        uint64_t bytes = (uint64_t) (rand_r(&seed) % 1000);
                        ASSERT_OK(put(x, dir, session, id % 2 ? "odd" : "even", start, bytes));
                        if (!m[id].present)
                                serial_of[id] = next_serial++;
                        m[id] = (Model){ .start = start, .bytes = bytes, .id = id, .present = true };
                } else {
                        ASSERT_EQ(report_index_remove(x, dir), m[id].present);
                        m[id].present = false;
                }
        }

        /* Count and bytes as the model's. */
        size_t count = 0;
        uint64_t bytes = 0;
        for (unsigned i = 0; i < N_IDS; i++)
                if (m[i].present) {
                        count++;
                        bytes += m[i].bytes;
                }
        ASSERT_EQ(report_index_count(x), count);
        ASSERT_EQ(report_index_bytes(x), bytes);

        /* Pages of 7 of the odd ones: each odd entry once, in order. */
        ReportCursor cursor, *after = NULL;
        size_t seen = 0, odd = 0;
        uint64_t last_start = UINT64_MAX, last_serial = UINT64_MAX;
        bool more = true;
        for (unsigned i = 0; i < N_IDS; i++)
                odd += m[i].present && i % 2;
        while (more) {
                const ReportEntry **l = NULL;
                size_t n;

                ASSERT_OK(report_index_list(x, in_ns, (void *) "odd", after, 7, &l, &n, &more));
                ASSERT_TRUE(n <= 7);
                for (size_t k = 0; k < n; k++) {
                        unsigned id = (unsigned) atoi(l[k]->report.report_dir + 3);
                        ASSERT_TRUE(m[id].present && id % 2 == 1);
                        ASSERT_EQ(l[k]->report.start_usec, m[id].start);
                        ASSERT_EQ(l[k]->serial, serial_of[id]);
                        /* Strictly older than the one before. */
                        ASSERT_TRUE(l[k]->report.start_usec < last_start ||
                                    (l[k]->report.start_usec == last_start && l[k]->serial < last_serial));
                        last_start = l[k]->report.start_usec;
                        last_serial = l[k]->serial;
                }
                seen += n;
                if (n > 0) {
                        cursor = (ReportCursor){ .start_usec = l[n - 1]->report.start_usec,
                                                 .serial = l[n - 1]->serial };
                        after = &cursor;
                }
                free(l);
        }
        ASSERT_EQ(seen, odd);
}

static bool keep_b(const char *report_dir, void *userdata) {
        return streq(report_dir, "/r/b");
}

TEST(retention) {
        _cleanup_(report_index_freep) ReportIndex *x = NULL;
        ReportVictim *v = NULL;
        size_t n;

        ASSERT_OK(report_index_new(&x));
        /* Start times 1000..1009 (µs), 100 bytes each: a..j. */
        for (unsigned i = 0; i < 10; i++) {
                char dir[8] = "/r/", session[8] = "s";
                dir[3] = (char) ('a' + i);
                session[1] = (char) ('a' + i);
                ASSERT_OK(put(x, dir, session, "ns", 1000 + i, 100));
        }

        /* Within every bound: nothing. */
        ASSERT_OK(
                report_index_take_victims(x, &(ReportRetention){ 10, 1000, 100 }, 1050, NULL, NULL, &v, &n));
        ASSERT_EQ(n, 0U);
        free(v);

        /* Older than 8 µs at 1010: a and b (1000, 1001) by age; then at most
         * 6 reports: c, d by count; then at most 450 bytes: e, f by bytes. */
        ASSERT_OK(report_index_take_victims(x, &(ReportRetention){ 6, 450, 8 }, 1010, NULL, NULL, &v, &n));
        ASSERT_EQ(n, 6U);
        const char *want[] = { "/r/a", "/r/b", "/r/c", "/r/d", "/r/e", "/r/f" };
        const ReportRemoval why[] = { REPORT_REMOVAL_AGE,   REPORT_REMOVAL_AGE,   REPORT_REMOVAL_COUNT,
                                      REPORT_REMOVAL_COUNT, REPORT_REMOVAL_BYTES, REPORT_REMOVAL_BYTES };
        for (size_t i = 0; i < n; i++) {
                ASSERT_STREQ(v[i].report_dir, want[i]);
                ASSERT_EQ(v[i].reason, why[i]);
                ASSERT_EQ(v[i].bytes, 100U);
        }
        report_victims_free(v, n);
        ASSERT_EQ(report_index_count(x), 4U);
        ASSERT_EQ(report_index_bytes(x), 400U);
        ASSERT_STREQ(report_removal_to_string(REPORT_REMOVAL_BYTES), "bytes");

        /* At most 2 of g, h, i, j: g and h go (keep names b, not there). */
        ASSERT_OK(report_index_take_victims(x, &(ReportRetention){ 2, 0, 0 }, 2000, keep_b, NULL, &v, &n));
        ASSERT_EQ(n, 2U);
        ASSERT_STREQ(v[0].report_dir, "/r/g");
        ASSERT_STREQ(v[1].report_dir, "/r/h");
        report_victims_free(v, n);

        ASSERT_OK(put(x, "/r/b", "sb", "ns", 1, 100));
        ASSERT_OK(report_index_take_victims(x, &(ReportRetention){ 1, 0, 0 }, 2000, keep_b, NULL, &v, &n));
        /* b again, the oldest, kept: it still counts, so at most 1 report
         * means that i and j both go, and b stays. */
        ASSERT_EQ(n, 2U);
        ASSERT_STREQ(v[0].report_dir, "/r/i");
        ASSERT_STREQ(v[1].report_dir, "/r/j");
        report_victims_free(v, n);
        ASSERT_EQ(report_index_count(x), 1U);
        ASSERT_NOT_NULL(report_index_find_session(x, "sb"));
}

DEFINE_TEST_MAIN
