/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "duration.h"
#include "tests.h"

static uint64_t parse_ok(const char *s) {
        uint64_t u = UINT64_MAX - 1;

        ASSERT_OK(parse_duration(s, &u));
        return u;
}

TEST(parse_zero) {
        ASSERT_EQ(parse_ok("0"), 0);
        ASSERT_EQ(parse_ok("0s"), 0);
        ASSERT_EQ(parse_ok("0ms"), 0);
        ASSERT_EQ(parse_ok("0.0s"), 0);
}

TEST(parse_units) {
        ASSERT_EQ(parse_ok("250us"), 250);
        ASSERT_EQ(parse_ok("500ms"), 500 * USEC_PER_MSEC);
        ASSERT_EQ(parse_ok("20s"), 20 * USEC_PER_SEC);
        ASSERT_EQ(parse_ok("5m"), 5 * 60 * USEC_PER_SEC);
        ASSERT_EQ(parse_ok("1h"), 3600 * USEC_PER_SEC);
        ASSERT_EQ(parse_ok("2d"), 2 * 86400 * USEC_PER_SEC);
        /* "ms" is milliseconds, not minutes followed by an 's'. */
        ASSERT_EQ(parse_ok("1ms"), USEC_PER_MSEC);
}

TEST(parse_combined) {
        ASSERT_EQ(parse_ok("1m30s"), 90 * USEC_PER_SEC);
        ASSERT_EQ(parse_ok("1h1m1s"), 3661 * USEC_PER_SEC);
        ASSERT_EQ(parse_ok("1s500ms"), 1500 * USEC_PER_MSEC);
        ASSERT_EQ(parse_ok("1d2h"), 26 * 3600 * USEC_PER_SEC);
        ASSERT_EQ(parse_ok("2m1ms3us"), 120 * USEC_PER_SEC + 1003);
}

TEST(parse_fractions) {
        ASSERT_EQ(parse_ok("1.5s"), 1500 * USEC_PER_MSEC);
        ASSERT_EQ(parse_ok(".5s"), 500 * USEC_PER_MSEC);
        ASSERT_EQ(parse_ok("2.s"), 2 * USEC_PER_SEC);
        ASSERT_EQ(parse_ok("0.25m"), 15 * USEC_PER_SEC);
        ASSERT_EQ(parse_ok("1.5ms"), 1500);
        ASSERT_EQ(parse_ok("0.001s"), 1000);
        ASSERT_EQ(parse_ok("1.000001s"), USEC_PER_SEC + 1);
        /* Below one microsecond is cut off... */
        ASSERT_EQ(parse_ok("1.9us"), 1);
        ASSERT_EQ(parse_ok("1.00000000000000000000000001s"), USEC_PER_SEC);
        /* ... but a non-zero value that would become 0 ("no limit") is refused. */
        ASSERT_ERROR(parse_duration("0.5us", NULL), ERANGE);
}

TEST(parse_invalid) {
        static const char *const bad[] = {
                "",     "20",  "1",     "00",    "1.5",   "s",    "ms",   ".s", ".",
                "-1s",  "+1s", " 1s",   "1s ",   "1 s",   "1x",   "1sec", "1S", "1M",
                "1m30", "1s-", "1..5s", "1.5.s", "0x10s", "1e3s", "1ns",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint64_t u = 42;

                if (parse_duration(bad[i], &u) != -EINVAL) {
                        fprintf(stderr, "\"%s\" was not refused\n", bad[i]);
                        ASSERT_TRUE(false);
                }
                ASSERT_EQ(u, 42); /* not written on failure */
        }

        ASSERT_ERROR(parse_duration(NULL, NULL), EINVAL);
}

TEST(parse_overflow) {
        /* 2^64 us ≈ 213503982 days */
        ASSERT_ERROR(parse_duration("213503983d", NULL), ERANGE);
        ASSERT_ERROR(parse_duration("99999999999999999999s", NULL), ERANGE);
        ASSERT_ERROR(parse_duration("18446744073709551616us", NULL), ERANGE);
        ASSERT_ERROR(parse_duration("18446744073709551615us1us", NULL), ERANGE);
        ASSERT_EQ(parse_ok("18446744073709551615us"), UINT64_MAX);
        ASSERT_EQ(parse_ok("213503982d"), 213503982ULL * 86400 * USEC_PER_SEC);
}

static void check_format(uint64_t usec, const char *expected) {
        char buf[DURATION_MAX];

        ASSERT_STREQ(format_duration(usec, buf, sizeof(buf)), expected);
        /* Round trip. */
        ASSERT_EQ(parse_ok(buf), usec);
}

TEST(format) {
        check_format(0, "0");
        check_format(1, "1us");
        check_format(999, "999us");
        check_format(1000, "1ms");
        check_format(1500, "1.5ms");
        check_format(1001, "1.001ms");
        check_format(500 * USEC_PER_MSEC, "500ms");
        check_format(USEC_PER_SEC, "1s");
        check_format(1500 * USEC_PER_MSEC, "1.5s");
        check_format(USEC_PER_SEC + 1, "1.000001s");
        check_format(20 * USEC_PER_SEC, "20s");
        check_format(60 * USEC_PER_SEC, "1m");
        check_format(90 * USEC_PER_SEC, "1m30s");
        check_format(3600 * USEC_PER_SEC, "1h");
        check_format(3661 * USEC_PER_SEC, "1h1m1s");
        check_format(86400 * USEC_PER_SEC, "1d");
        check_format(90000 * USEC_PER_SEC + 500, "1d1h500us");
        check_format(61 * USEC_PER_SEC + 250 * USEC_PER_MSEC, "1m1.25s");
        check_format(UINT64_MAX, "213503982d8h1m49.551615s");
}

TEST(format_small_buffer) {
        char buf[4];

        ASSERT_NULL(format_duration(90 * USEC_PER_SEC, buf, sizeof(buf))); /* "1m30s" needs 6 */
        ASSERT_STREQ(format_duration(60 * USEC_PER_SEC, buf, sizeof(buf)), "1m");
        ASSERT_NULL(format_duration(0, buf, 0));
        ASSERT_NULL(format_duration(0, NULL, 10));
}

DEFINE_TEST_MAIN
