/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* agent/http/http-slots.c: which connection waits longest for its head,
 * through requests that start and end, and what expires when. */
#include "http-slots.h"
#include "tests.h"

TEST(oldest_waiting) {
        HttpSlots l = {};
        HttpSlot a, b, c;

        ASSERT_NULL(http_slots_oldest_waiting(&l, NULL));
        ASSERT_EQ(http_slots_next_expiry(&l, 10), UINT64_MAX);
        http_slots_add(&l, &a, 3, 100);
        http_slots_add(&l, &b, 4, 200);
        http_slots_add(&l, &c, 5, 300);
        ASSERT_EQ(l.n, 3U);
        ASSERT_EQ(l.n_waiting, 3U);
        ASSERT_TRUE(http_slots_oldest_waiting(&l, NULL) == &a);
        ASSERT_TRUE(http_slots_oldest_waiting(&l, &a) == &b);
        ASSERT_EQ(http_slots_next_expiry(&l, 10), 110U);

        /* a serves a request (a pull that waits long): b is the oldest waiting. */
        http_slots_set_busy(&l, &a, true, 400);
        ASSERT_EQ(l.n_waiting, 2U);
        ASSERT_TRUE(http_slots_oldest_waiting(&l, NULL) == &b);
        ASSERT_EQ(http_slots_next_expiry(&l, 10), 210U);

        /* a answered: it waits for its next request since 500, the latest. */
        http_slots_set_busy(&l, &a, false, 500);
        ASSERT_EQ(l.n_waiting, 3U);
        ASSERT_TRUE(http_slots_oldest_waiting(&l, NULL) == &b);
        http_slots_remove(&l, &b);
        ASSERT_TRUE(http_slots_oldest_waiting(&l, NULL) == &c);
        http_slots_remove(&l, &c);
        ASSERT_TRUE(http_slots_oldest_waiting(&l, NULL) == &a);
        ASSERT_EQ(http_slots_next_expiry(&l, 10), 510U);

        /* Busy ones never are. */
        http_slots_set_busy(&l, &a, true, 600);
        ASSERT_NULL(http_slots_oldest_waiting(&l, NULL));
        ASSERT_EQ(http_slots_next_expiry(&l, 10), UINT64_MAX);
        http_slots_remove(&l, &a);
        ASSERT_EQ(l.n, 0U);
        ASSERT_EQ(l.n_waiting, 0U);
        ASSERT_NULL(l.head);
        ASSERT_NULL(l.tail);
}

TEST(many) {
        HttpSlots l = {};
        HttpSlot s[100];

        for (unsigned i = 0; i < 100; i++)
                http_slots_add(&l, &s[i], (int) i, 1000 + i);
        /* Every even one serves a request, then the odd ones go oldest first. */
        for (unsigned i = 0; i < 100; i += 2)
                http_slots_set_busy(&l, &s[i], true, 2000);
        for (unsigned i = 1; i < 100; i += 2) {
                HttpSlot *o = http_slots_oldest_waiting(&l, NULL);
                ASSERT_TRUE(o == &s[i]);
                http_slots_remove(&l, o);
        }
        ASSERT_EQ(l.n, 50U);
        ASSERT_EQ(l.n_waiting, 0U);
        for (unsigned i = 0; i < 100; i += 2)
                http_slots_remove(&l, &s[i]);
        ASSERT_EQ(l.n, 0U);
}

DEFINE_TEST_MAIN
