/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the JIT fuzzers check of a table: sorted, disjoint, non-empty
 * segments, each found by lookup at both ends; and two tables alike. */

#include <string.h>

#include "jit-map.h"

#define CHECK(x)                          \
        do {                              \
                if (!(x))                 \
                        __builtin_trap(); \
        } while (0)

static inline void jit_fuzz_check(const JitMap *m) {
        uint64_t prev_end = 0, start, end, off;
        const char *name;

        CHECK(jit_map_count(m) <= jit_map_segments(m));
        for (size_t i = 0; i < jit_map_segments(m); i++) {
                CHECK(jit_map_segment(m, i, &start, &end, &name) == 0);
                CHECK(start < end);
                CHECK(i == 0 || start >= prev_end);
                CHECK(name && name[0] && strlen(name) <= JIT_MAP_NAME_MAX);
                CHECK(jit_map_lookup(m, start, &off) == name);
                CHECK(jit_map_lookup(m, end - 1, &off) == name);
                prev_end = end;
        }
}

static inline void jit_fuzz_same(const JitMap *a, const JitMap *b) {
        CHECK(jit_map_segments(a) == jit_map_segments(b));
        CHECK(jit_map_count(a) == jit_map_count(b));
        for (size_t i = 0; i < jit_map_segments(a); i++) {
                uint64_t s1, e1, s2, e2, o1 = 0, o2 = 0;
                const char *n1, *n2;

                CHECK(jit_map_segment(a, i, &s1, &e1, &n1) == 0);
                CHECK(jit_map_segment(b, i, &s2, &e2, &n2) == 0);
                CHECK(s1 == s2 && e1 == e2 && strcmp(n1, n2) == 0);
                (void) jit_map_lookup(a, s1, &o1);
                (void) jit_map_lookup(b, s2, &o2);
                CHECK(o1 == o2);
        }
}
