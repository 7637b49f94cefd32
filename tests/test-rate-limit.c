/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* agent/http/rate-limit.c: token buckets driven by explicit timestamps
 * (no clock, no sleep), their bound, and the keys of client addresses. */
#include <arpa/inet.h>
#include <sys/un.h>

#include "rate-limit.h"
#include "tests.h"

#define T0 (1000 * USEC_PER_SEC)

/* How many takes of key succeed in a row at now. */
static unsigned takes(RateLimit *l, const char *key, uint64_t now, unsigned max) {
        unsigned n = 0;

        while (n < max && rate_limit_take(l, key, now, NULL))
                n++;
        return n;
}

TEST(burst_then_rate) {
        _cleanup_(rate_limit_freep) RateLimit *l = NULL;
        uint64_t wait = 0;

        /* 20 a second (one each 50 ms), 100 at once. */
        ASSERT_OK(rate_limit_new(20, 100, 16, &l));
        ASSERT_EQ(takes(l, "a", T0, 1000), 100);
        ASSERT_FALSE(rate_limit_take(l, "a", T0, &wait));
        ASSERT_EQ(wait, 50 * USEC_PER_MSEC);
        ASSERT_EQ(rate_limit_retry_after_sec(wait), 1);
        /* Just before the next one: none; at it: one, and only one. */
        ASSERT_FALSE(rate_limit_take(l, "a", T0 + 50 * USEC_PER_MSEC - 1, &wait));
        ASSERT_EQ(wait, 1);
        ASSERT_EQ(takes(l, "a", T0 + 50 * USEC_PER_MSEC, 1000), 1);
        /* One second later: 20 more. */
        ASSERT_EQ(takes(l, "a", T0 + 1050 * USEC_PER_MSEC, 1000), 20);
        /* Idle for the whole burst's time (100 / 20 s): full again, no more. */
        ASSERT_EQ(takes(l, "a", T0 + 7 * USEC_PER_SEC, 1000), 100);
        ASSERT_EQ(takes(l, "a", T0 + 100 * USEC_PER_SEC, 1000), 100);

        /* A steady 20 a second never waits: each 50 ms for 10 s. */
        for (unsigned i = 0; i < 200; i++)
                ASSERT_TRUE(rate_limit_take(l, "steady", T0 + i * 50 * USEC_PER_MSEC, NULL));
        /* 40 a second for 5 s (0..4.975 s) gets the burst, then one each 50 ms: 100 + 99. */
        unsigned ok = 0;
        for (unsigned i = 0; i < 200; i++)
                ok += rate_limit_take(l, "fast", T0 + i * 25 * USEC_PER_MSEC, NULL);
        ASSERT_EQ(ok, 100 + 99);
}

TEST(keys_apart) {
        _cleanup_(rate_limit_freep) RateLimit *l = NULL;

        ASSERT_OK(rate_limit_new(1, 3, 16, &l));
        ASSERT_EQ(takes(l, "a", T0, 10), 3);
        ASSERT_EQ(takes(l, "b", T0, 10), 3);
        ASSERT_EQ(takes(l, "a", T0 + USEC_PER_SEC, 10), 1);
        ASSERT_EQ(rate_limit_keys(l), 2);
}

TEST(fractional) {
        _cleanup_(rate_limit_freep) RateLimit *l = NULL;
        uint64_t wait = 0;

        /* One each 4 s. */
        ASSERT_OK(rate_limit_new(0.25, 1, 4, &l));
        ASSERT_TRUE(rate_limit_take(l, "a", T0, NULL));
        ASSERT_FALSE(rate_limit_take(l, "a", T0 + USEC_PER_SEC, &wait));
        ASSERT_EQ(wait, 3 * USEC_PER_SEC);
        ASSERT_EQ(rate_limit_retry_after_sec(wait), 3);
        ASSERT_EQ(rate_limit_retry_after_sec(wait + 1), 4);
        ASSERT_TRUE(rate_limit_take(l, "a", T0 + 4 * USEC_PER_SEC, NULL));
}

TEST(unlimited) {
        _cleanup_(rate_limit_freep) RateLimit *l = NULL;

        ASSERT_OK(rate_limit_new(0, 1, 4, &l));
        ASSERT_EQ(takes(l, "a", T0, 10000), 10000);
        ASSERT_EQ(rate_limit_keys(l), 0);
        /* No limit at all (NULL) takes too. */
        ASSERT_TRUE(rate_limit_take(NULL, "a", T0, NULL));
        ASSERT_ERROR(rate_limit_new(-1, 1, 4, &l), EINVAL);
        ASSERT_ERROR(rate_limit_new(1, 0, 4, &l), EINVAL);
        ASSERT_ERROR(rate_limit_new(1, 1, 0, &l), EINVAL);
}

TEST(bounded_lru) {
        _cleanup_(rate_limit_freep) RateLimit *l = NULL;
        char key[32];

        ASSERT_OK(rate_limit_new(1, 2, 4, &l));
        /* "a" drained, then used again (most recent), while 3 others come. */
        ASSERT_EQ(takes(l, "a", T0, 10), 2);
        ASSERT_EQ(takes(l, "b", T0, 1), 1);
        ASSERT_EQ(takes(l, "c", T0, 1), 1);
        ASSERT_EQ(takes(l, "a", T0, 10), 0); /* still empty: "a" is the most recent now */
        ASSERT_EQ(takes(l, "d", T0, 1), 1);
        ASSERT_EQ(rate_limit_keys(l), 4);
        /* A fifth key evicts the least recently used ("b"), not "a". */
        ASSERT_EQ(takes(l, "e", T0, 1), 1);
        ASSERT_EQ(rate_limit_keys(l), 4);
        ASSERT_EQ(takes(l, "a", T0, 10), 0);
        ASSERT_EQ(takes(l, "b", T0, 10), 2); /* forgotten: a full bucket */
        /* 1,000 keys later the map holds 4. */
        for (unsigned i = 0; i < 1000; i++) {
                snprintf(key, sizeof(key), "k%u", i);
                ASSERT_TRUE(rate_limit_take(l, key, T0, NULL));
        }
        ASSERT_EQ(rate_limit_keys(l), 4);
}

TEST(long_keys) {
        _cleanup_(rate_limit_freep) RateLimit *l = NULL;
        char a[RATE_LIMIT_KEY_MAX + 10], b[RATE_LIMIT_KEY_MAX + 10];

        memset(a, 'x', sizeof(a) - 1);
        a[sizeof(a) - 1] = 0;
        memcpy(b, a, sizeof(b));
        b[sizeof(b) - 2] = 'y';
        ASSERT_OK(rate_limit_new(1, 1, 4, &l));
        /* Cut to RATE_LIMIT_KEY_MAX bytes: the same bucket. */
        ASSERT_TRUE(rate_limit_take(l, a, T0, NULL));
        ASSERT_FALSE(rate_limit_take(l, b, T0, NULL));
        ASSERT_EQ(rate_limit_keys(l), 1);
}

TEST(source_key) {
        char buf[RATE_LIMIT_SOURCE_MAX];
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(1234) };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };
        struct sockaddr_un un = { .sun_family = AF_UNIX };

        ASSERT_EQ(inet_pton(AF_INET, "10.1.2.3", &in.sin_addr), 1);
        ASSERT_STREQ(rate_limit_source_key((struct sockaddr *) &in, buf), "10.1.2.3");
        ASSERT_EQ(inet_pton(AF_INET6, "::ffff:10.1.2.3", &in6.sin6_addr), 1);
        ASSERT_STREQ(rate_limit_source_key((struct sockaddr *) &in6, buf), "10.1.2.3");
        ASSERT_EQ(inet_pton(AF_INET6, "2001:db8:1:2:aaaa:bbbb:cccc:dddd", &in6.sin6_addr), 1);
        ASSERT_STREQ(rate_limit_source_key((struct sockaddr *) &in6, buf), "2001:db8:1:2::/64");
        ASSERT_EQ(inet_pton(AF_INET6, "2001:db8:1:2::1", &in6.sin6_addr), 1);
        ASSERT_STREQ(rate_limit_source_key((struct sockaddr *) &in6, buf), "2001:db8:1:2::/64");
        ASSERT_EQ(inet_pton(AF_INET6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", &in6.sin6_addr), 1);
        ASSERT_STREQ(rate_limit_source_key((struct sockaddr *) &in6, buf), "ffff:ffff:ffff:ffff::/64");
        ASSERT_EQ(inet_pton(AF_INET6, "::1", &in6.sin6_addr), 1);
        ASSERT_STREQ(rate_limit_source_key((struct sockaddr *) &in6, buf), "::1");
        ASSERT_STREQ(rate_limit_source_key((struct sockaddr *) &un, buf), "local");
        ASSERT_STREQ(rate_limit_source_key(NULL, buf), "local");
}

DEFINE_TEST_MAIN
