/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The JIT symbol table (common/symbols/jit-map.c) and the perf map parser
 * (common/symbols/perf-map.c). */
#include <time.h>

#include "jit-map.h"
#include "perf-map.h"
#include "tests.h"

static void assert_lookup(const JitMap *m, uint64_t addr, const char *name, uint64_t offset) {
        uint64_t off = UINT64_MAX;
        const char *n = jit_map_lookup(m, addr, &off);

        if (!name) {
                if (n)
                        fprintf(stderr, "0x%" PRIx64 ": expected nothing, got %s\n", addr, n);
                ASSERT_NULL(n);
                return;
        }
        if (!streq_ptr(n, name))
                fprintf(stderr, "0x%" PRIx64 ": expected %s\n", addr, name);
        ASSERT_STREQ(n, name);
        ASSERT_EQ(off, offset);
}

/* Segments are sorted, disjoint and not empty. */
static void assert_segments_sane(const JitMap *m) {
        uint64_t prev_end = 0, start, end;
        const char *name;

        for (size_t i = 0; i < jit_map_segments(m); i++) {
                ASSERT_OK(jit_map_segment(m, i, &start, &end, &name));
                ASSERT_TRUE(start < end);
                ASSERT_TRUE(i == 0 || start >= prev_end);
                ASSERT_NOT_NULL(name);
                prev_end = end;
        }
        ASSERT_TRUE(jit_map_count(m) <= jit_map_segments(m));
}

static void add(JitMap *m, uint64_t start, uint64_t size, const char *name) {
        ASSERT_OK(jit_map_add(m, start, size, name, strlen(name)));
}

TEST(jit_map_later_wins) {
        _cleanup_(jit_map_freep) JitMap *m = NULL;

        ASSERT_OK(jit_map_new(0, &m));
        add(m, 0x1000, 0x100, "a");
        add(m, 0x1100, 0x100, "b");
        add(m, 0x3000, 0x10, "c");
        /* Nothing is visible before a commit. */
        assert_lookup(m, 0x1000, NULL, 0);
        ASSERT_OK(jit_map_commit(m));
        assert_lookup(m, 0x1000, "a", 0);
        assert_lookup(m, 0x10ff, "a", 0xff);
        assert_lookup(m, 0x1100, "b", 0);
        assert_lookup(m, 0x1200, NULL, 0);
        assert_lookup(m, 0xfff, NULL, 0);
        assert_lookup(m, 0x300f, "c", 0xf);
        assert_lookup(m, 0x3010, NULL, 0);
        ASSERT_EQ(jit_map_count(m), 3);

        /* Recompiled into the middle of a: a keeps both sides, offsets
         * from its own start. */
        add(m, 0x1040, 0x20, "a2");
        ASSERT_OK(jit_map_commit(m));
        assert_lookup(m, 0x103f, "a", 0x3f);
        assert_lookup(m, 0x1040, "a2", 0);
        assert_lookup(m, 0x105f, "a2", 0x1f);
        assert_lookup(m, 0x1060, "a", 0x60);
        assert_segments_sane(m);

        /* Over a and b whole, and into c: a and b are gone. */
        add(m, 0x0800, 0x2808, "big");
        ASSERT_OK(jit_map_commit(m));
        assert_lookup(m, 0x1040, "big", 0x840);
        assert_lookup(m, 0x3007, "big", 0x2807);
        assert_lookup(m, 0x3008, "c", 0x8);
        ASSERT_EQ(jit_map_count(m), 2);
        assert_segments_sane(m);

        /* Within one commit, the later of two identical ranges wins. */
        add(m, 0x5000, 0x10, "first");
        add(m, 0x5000, 0x10, "second");
        ASSERT_OK(jit_map_commit(m));
        assert_lookup(m, 0x5008, "second", 8);
        ASSERT_EQ(jit_map_count(m), 3);

        /* Bad entries. */
        ASSERT_ERROR(jit_map_add(m, 0x1, 0, "x", 1), EINVAL);
        ASSERT_ERROR(jit_map_add(m, UINT64_MAX - 1, 2, "x", 1), EINVAL);
        ASSERT_OK(jit_map_add(m, UINT64_MAX - 2, 2, "top", 3));
        ASSERT_ERROR(jit_map_add(m, 0x1, 1, "", 0), EINVAL);
        ASSERT_ERROR(jit_map_add(m, 0x1, 1, "\0x", 2), EINVAL);
        ASSERT_OK(jit_map_commit(m));
        assert_lookup(m, UINT64_MAX - 1, "top", 1);
        assert_lookup(m, UINT64_MAX, NULL, 0);
}

TEST(jit_map_move) {
        _cleanup_(jit_map_freep) JitMap *m = NULL;

        ASSERT_OK(jit_map_new(0, &m));
        add(m, 0x1000, 0x100, "f");
        ASSERT_OK(jit_map_move(m, 0x1000, 0x8000, 0x100));
        ASSERT_OK(jit_map_commit(m));
        assert_lookup(m, 0x8010, "f", 0x10);
        ASSERT_ERROR(jit_map_move(m, 0x1001, 0x9000, 0x100), ENOENT);
        ASSERT_ERROR(jit_map_move(m, 0x1000, 0x9000, 0), EINVAL);
}

TEST(jit_map_bounded) {
        _cleanup_(jit_map_freep) JitMap *m = NULL;
        char name[32];

        ASSERT_OK(jit_map_new(4, &m));
        for (unsigned i = 0; i < 4; i++) {
                snprintf(name, sizeof(name), "f%u", i);
                add(m, 0x1000 * (i + 1), 0x100, name);
        }
        /* Full: the fifth entry is dropped and counted. */
        ASSERT_ERROR(jit_map_add(m, 0x9000, 0x100, "f4", 2), E2BIG);
        ASSERT_EQ(jit_map_dropped(m), 1);
        ASSERT_OK(jit_map_commit(m));
        assert_lookup(m, 0x9000, NULL, 0);
        ASSERT_EQ(jit_map_count(m), 4);

        /* Still full: dropped too, even an entry that would overwrite an
         * older one (the table cannot know without taking it). */
        ASSERT_ERROR(jit_map_add(m, 0x1000, 0x100, "f0-new", 6), E2BIG);
        ASSERT_EQ(jit_map_dropped(m), 2);
}

TEST(jit_map_bounded_compaction) {
        _cleanup_(jit_map_freep) JitMap *m = NULL;

        /* Recompiled over and over at the same place: overwritten entries
         * are freed, so the table never fills. */
        ASSERT_OK(jit_map_new(8, &m));
        for (unsigned i = 0; i < 1000; i++) {
                char name[32];

                snprintf(name, sizeof(name), "gen%u", i);
                add(m, 0x1000, 0x100, name);
        }
        ASSERT_OK(jit_map_commit(m));
        ASSERT_EQ(jit_map_dropped(m), 0);
        ASSERT_EQ(jit_map_count(m), 1);
        assert_lookup(m, 0x1001, "gen999", 1);
}

/* A simple model: for each address, the last entry added that covers it. */
TEST(jit_map_random_against_model) {
        enum {
                SPACE = 512,
                ROUNDS = 200
        };
        static int model[SPACE];
        static uint64_t model_start[SPACE];
        char names[ROUNDS * 8][16];
        unsigned seed = 12345, id = 0;
        _cleanup_(jit_map_freep) JitMap *m = NULL;

        ASSERT_OK(jit_map_new(0, &m));
        for (size_t a = 0; a < SPACE; a++)
                model[a] = -1;
        for (unsigned round = 0; round < ROUNDS; round++) {
                unsigned n = 1 + rand_r(&seed) % 8;

                for (unsigned k = 0; k < n; k++, id++) {
                        uint64_t start = (uint64_t) (rand_r(&seed) % SPACE);
                        uint64_t size = 1 + (uint64_t) (rand_r(&seed) % 40);

                        if (start + size > SPACE)
                                size = SPACE - start;
                        snprintf(names[id], sizeof(names[id]), "s%u", id);
                        add(m, 0x10000 + start, size, names[id]);
                        for (uint64_t a = start; a < start + size; a++) {
                                model[a] = (int) id;
                                model_start[a] = start;
                        }
                }
                ASSERT_OK(jit_map_commit(m));
                assert_segments_sane(m);
                for (size_t a = 0; a < SPACE; a++)
                        if (model[a] < 0)
                                assert_lookup(m, 0x10000 + a, NULL, 0);
                        else
                                assert_lookup(m, 0x10000 + a, names[model[a]], a - model_start[a]);
        }
}

TEST(perf_map_lines) {
        static const struct {
                const char *line;
                int r;
                uint64_t start, size;
                const char *name;
        } cases[] = {
                /* V8 (node --perf-basic-prof) */
                { "7fb3e77c6780 2c8 JS:*hotAlpha /var/tmp/app.js:2:18", 0, 0x7fb3e77c6780, 0x2c8,
                  "JS:*hotAlpha /var/tmp/app.js:2:18" },
                /* the JVM (jcmd PID Compiler.perfmap) */
                { "0x00007f7b14ed21a0 0x00000000000000d8 long Hot.hotAlpha(long)", 0, 0x7f7b14ed21a0, 0xd8,
                  "long Hot.hotAlpha(long)" },
                /* CPython -X perf */
                { "7f0a1c2b3000 b py::hot_alpha:/app/work.py", 0, 0x7f0a1c2b3000, 0xb,
                  "py::hot_alpha:/app/work.py" },
                { "0X10 0Xa upper", 0, 0x10, 0xa, "upper" },
                { "ABCDEF 1 caps", 0, 0xabcdef, 1, "caps" },
                { "10\t20\ttabs and  spaces  ", 0, 0x10, 0x20, "tabs and  spaces" },
                { "10 20 crlf\r", 0, 0x10, 0x20, "crlf" },
                { "00000000000000000000010 1 leading zeros", 0, 0x10, 1, "leading zeros" },
                { "ffffffffffffffff 1 x", -ERANGE },
                { "fffffffffffffff0 f fits", 0, 0xfffffffffffffff0, 0xf, "fits" },
                { "fffffffffffffff0 10 up to 2^64", -ERANGE },
                { "10 0 empty", -ERANGE },
                { "10000000000000000 1 too wide", -EBADMSG },
                { "", -EBADMSG },
                { "10", -EBADMSG },
                { "10 20", -EBADMSG },
                { "10 20 ", -EBADMSG },
                { "10 20    ", -EBADMSG },
                { " 10 20 leading space", -EBADMSG },
                { "0x 20 nodigits", -EBADMSG },
                { "10 0x nodigits", -EBADMSG },
                { "g10 20 x", -EBADMSG },
                { "10g 20 x", -EBADMSG },
                { "10 20g x", -EBADMSG },
                { "-10 20 x", -EBADMSG },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint64_t start = 0, size = 0;
                const char *name = NULL;
                size_t len = 0;
                int r = perf_map_parse_line(cases[i].line, strlen(cases[i].line), &start, &size, &name,
                                            &len);

                if (r != cases[i].r)
                        fprintf(stderr, "\"%s\": %d, expected %d\n", cases[i].line, r, cases[i].r);
                ASSERT_EQ(r, cases[i].r);
                if (r < 0)
                        continue;
                ASSERT_EQ(start, cases[i].start);
                ASSERT_EQ(size, cases[i].size);
                ASSERT_EQ(len, strlen(cases[i].name));
                ASSERT_TRUE(memcmp(name, cases[i].name, len) == 0);
        }

        /* A NUL inside a line. */
        {
                const char line[] = "10 20 a\0b";
                uint64_t start, size;
                const char *name;
                size_t len;

                ASSERT_ERROR(perf_map_parse_line(line, sizeof(line) - 1, &start, &size, &name, &len),
                             EBADMSG);
        }
}

static const char SAMPLE[] = "1000 100 first\n"
                             "garbage line\n"
                             "\n"
                             "1100 100 second one\n"
                             "2000 0 empty\n"
                             "1040 20 recompiled\n"
                             "0x3000 0x10 java.lang.String.hashCode()\n"
                             "partial 1";

static void assert_sample(const JitMap *m, const PerfMapParser *p) {
        assert_lookup(m, 0x1000, "first", 0);
        assert_lookup(m, 0x1050, "recompiled", 0x10);
        assert_lookup(m, 0x1060, "first", 0x60);
        assert_lookup(m, 0x11ff, "second one", 0xff);
        assert_lookup(m, 0x2000, NULL, 0);
        assert_lookup(m, 0x3008, "java.lang.String.hashCode()", 8);
        ASSERT_EQ(p->lines, 7);
        ASSERT_EQ(p->malformed, 2);
        ASSERT_EQ(p->skipped, 1);
        /* The partial last line is left for later. */
        ASSERT_EQ(p->offset, strlen(SAMPLE) - strlen("partial 1"));
}

TEST(perf_map_feed) {
        _cleanup_(jit_map_freep) JitMap *m = NULL;
        PerfMapParser p = {};

        ASSERT_OK(jit_map_new(0, &m));
        ASSERT_OK(perf_map_feed(&p, m, SAMPLE, strlen(SAMPLE)));
        assert_sample(m, &p);

        /* Nothing new: nothing changes. */
        ASSERT_OK(perf_map_feed(&p, m, SAMPLE + p.offset, strlen(SAMPLE) - p.offset));
        assert_sample(m, &p);
}

TEST(perf_map_feed_incremental) {
        /* The file as the writer grows it, cut at every byte: the same
         * table as when read at once. */
        for (size_t cut = 0; cut <= strlen(SAMPLE); cut++) {
                _cleanup_(jit_map_freep) JitMap *m = NULL;
                PerfMapParser p = {};

                ASSERT_OK(jit_map_new(0, &m));
                ASSERT_OK(perf_map_feed(&p, m, SAMPLE, cut));
                ASSERT_TRUE(p.offset <= cut);
                ASSERT_OK(perf_map_feed(&p, m, SAMPLE + p.offset, strlen(SAMPLE) - p.offset));
                assert_sample(m, &p);
        }
}

TEST(perf_map_long_lines) {
        _cleanup_(jit_map_freep) JitMap *m = NULL;
        _cleanup_free_ char *buf = NULL;
        PerfMapParser p = {};
        size_t n = 3 * PERF_MAP_LINE_MAX, half;

        /* A line longer than the bound, fed in two pieces without its
         * newline in the first: skipped and counted once, and the line
         * after it is read. */
        buf = malloc(n + 64);
        ASSERT_NOT_NULL(buf);
        memcpy(buf, "10 20 ", 6);
        memset(buf + 6, 'x', n - 6);
        strcpy(buf + n, "\n30 10 after\n");
        ASSERT_OK(jit_map_new(0, &m));
        half = n / 2;
        ASSERT_OK(perf_map_feed(&p, m, buf, half));
        ASSERT_EQ(p.offset, half);
        ASSERT_EQ(p.malformed, 1);
        ASSERT_OK(perf_map_feed(&p, m, buf + p.offset, strlen(buf) - p.offset));
        ASSERT_EQ(p.offset, strlen(buf));
        ASSERT_EQ(p.malformed, 1);
        assert_lookup(m, 0x10, NULL, 0);
        assert_lookup(m, 0x30, "after", 0);

        /* Whole but too long: also malformed. */
        {
                _cleanup_(jit_map_freep) JitMap *m2 = NULL;
                PerfMapParser q = {};

                ASSERT_OK(jit_map_new(0, &m2));
                ASSERT_OK(perf_map_feed(&q, m2, buf, strlen(buf)));
                ASSERT_EQ(q.malformed, 1);
                assert_lookup(m2, 0x30, "after", 0);
        }
}

static uint64_t now_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
}

TEST(perf_map_speed) {
        /* A large map as node writes one (a quarter million functions, each
         * recompiled once elsewhere), fed in 1 MiB chunks as the agent
         * reads it. Prints the rate; asserts only the result. */
        enum {
                N = 250000
        };
        _cleanup_(jit_map_freep) JitMap *m = NULL;
        _cleanup_free_ char *buf = NULL;
        PerfMapParser p = {};
        size_t len = 0, alloc = (size_t) N * 2 * 96;
        uint64_t t0, t1;

        buf = malloc(alloc);
        ASSERT_NOT_NULL(buf);
        for (unsigned i = 0; i < 2 * N; i++) {
                unsigned f = i % N;
                uint64_t addr = (i < N ? 0x100000000ULL : 0x200000000ULL) + (uint64_t) f * 0x200;

                len += (size_t) snprintf(buf + len, alloc - len,
                                         "%" PRIx64 " %x JS:*fn%u /srv/app/lib/m%u.js:%u:%u\n", addr, 0x180,
                                         f, f % 97, f % 1000, f % 80);
        }
        ASSERT_OK(jit_map_new(2 * N, &m));
        t0 = now_nsec();
        while (p.offset < len)
                ASSERT_OK(perf_map_feed(&p, m, buf + p.offset, MIN(len - p.offset, (size_t) 1 << 20)));
        t1 = now_nsec();
        fprintf(stderr, "perf map: %zu bytes, %u lines in %.1f ms (%.0f MB/s); %zu live entries\n", len,
                2 * N, (double) (t1 - t0) / 1e6, (double) len / ((double) (t1 - t0) / 1e3),
                jit_map_count(m));
        ASSERT_EQ(p.malformed, 0);
        ASSERT_EQ(jit_map_count(m), 2 * N);
        assert_lookup(m, 0x200000000ULL + 7 * 0x200 + 5, "JS:*fn7 /srv/app/lib/m7.js:7:7", 5);
}

DEFINE_TEST_MAIN;
