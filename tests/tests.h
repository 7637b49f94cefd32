/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A tiny test harness: TEST(name) { ... } defines a test; ASSERT_* abort the
 * test binary with a message naming the file, line and values. A binary that
 * wants to skip exits with EXIT_TEST_SKIP (77). */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

#define EXIT_TEST_SKIP 77

typedef void (*TestFunc)(void);
typedef struct TestEntry {
        const char *name;
        TestFunc func;
} TestEntry;

#define TEST(n)                                                                              \
        static void test_##n(void);                                                          \
        static const TestEntry test_entry_##n                                                \
                __attribute__((used, section("cgprof_tests"),                                \
                               aligned(sizeof(void *)))) = { .name = #n, .func = test_##n }; \
        static void test_##n(void)

extern const TestEntry __start_cgprof_tests[];
extern const TestEntry __stop_cgprof_tests[];

#define ASSERT_TRUE(expr)                                                                            \
        do {                                                                                         \
                if (!(expr)) {                                                                       \
                        fprintf(stderr, "%s:%d: Assertion failed: %s\n", __FILE__, __LINE__, #expr); \
                        abort();                                                                     \
                }                                                                                    \
        } while (0)
#define ASSERT_FALSE(expr) ASSERT_TRUE(!(expr))

#define ASSERT_OK(expr)                                                                             \
        do {                                                                                        \
                long long _r = (expr);                                                              \
                if (_r < 0) {                                                                       \
                        fprintf(stderr, "%s:%d: %s failed: %s (%lld)\n", __FILE__, __LINE__, #expr, \
                                strerror((int) -_r), _r);                                           \
                        abort();                                                                    \
                }                                                                                   \
        } while (0)

#define ASSERT_ERROR(expr, err)                                                                        \
        do {                                                                                           \
                long long _r = (expr);                                                                 \
                if (_r != -(err)) {                                                                    \
                        fprintf(stderr, "%s:%d: %s returned %lld, expected -%s\n", __FILE__, __LINE__, \
                                #expr, _r, #err);                                                      \
                        abort();                                                                       \
                }                                                                                      \
        } while (0)

#define ASSERT_EQ(a, b)                                                                                 \
        do {                                                                                            \
                long long _a = (long long) (a), _b = (long long) (b);                                   \
                if (_a != _b) {                                                                         \
                        fprintf(stderr, "%s:%d: Assertion failed: %s == %s (%lld != %lld)\n", __FILE__, \
                                __LINE__, #a, #b, _a, _b);                                              \
                        abort();                                                                        \
                }                                                                                       \
        } while (0)

#define ASSERT_STREQ(a, b)                                                                                  \
        do {                                                                                                \
                const char *_a = (a), *_b = (b);                                                            \
                if (!streq_ptr(_a, _b)) {                                                                   \
                        fprintf(stderr, "%s:%d: Assertion failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__, \
                                __LINE__, #a, #b, strna(_a), strna(_b));                                    \
                        abort();                                                                            \
                }                                                                                           \
        } while (0)

#define ASSERT_NOT_NULL(p) ASSERT_TRUE((p) != NULL)
#define ASSERT_NULL(p) ASSERT_TRUE((p) == NULL)

/* Runs every TEST() of the binary, or only those named on the command line. */
#define DEFINE_TEST_MAIN                                                                        \
        int main(int argc, char *argv[]) {                                                      \
                for (const TestEntry *t = __start_cgprof_tests; t < __stop_cgprof_tests; t++) { \
                        if (argc > 1) {                                                         \
                                bool want = false;                                              \
                                for (int i = 1; i < argc; i++)                                  \
                                        if (streq(argv[i], t->name))                            \
                                                want = true;                                    \
                                if (!want)                                                      \
                                        continue;                                               \
                        }                                                                       \
                        fprintf(stderr, "/* %s */\n", t->name);                                 \
                        t->func();                                                              \
                }                                                                               \
                return EXIT_SUCCESS;                                                            \
        }
