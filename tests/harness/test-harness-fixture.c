/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The test harness's own fixture (tests.h): a test that passes, one that
 * skips from a function it calls, and one that fails when asked to
 * (CGPROF_HARNESS_FAIL=1). check-harness.py checks the TAP it prints. */
#include "tests.h"

static void need_facility(const char *name, int n) {
        TEST_SKIP("%s not installed (%d)", name, n);
}

TEST(passes) {
        ASSERT_EQ(1 + 1, 2);
}

TEST(skips) {
        need_facility("frobnicator", 42);
        ASSERT_TRUE(false); /* not reached */
}

TEST(fails_when_asked) {
        const char *v = getenv("CGPROF_HARNESS_FAIL");

        ASSERT_FALSE(v && streq(v, "1"));
}

DEFINE_TEST_MAIN
