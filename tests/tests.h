/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A tiny test harness: TEST(name) { ... } defines a test; ASSERT_* abort the
 * test binary with a message naming the file, line and values. The binary
 * speaks TAP (meson's protocol : 'tap') on stdout: the plan "1..N", then
 * "ok K - name", "ok K - name # SKIP reason" or "not ok K - name" per test
 * (a failed ASSERT prints the latter, then aborts). TEST_SKIP("fmt", ...)
 * (TEST_SKIP_PREREQ() for what scripts/deps installs) skips the current
 * test, from the test or any function it calls: it jumps back to the
 * harness, so call it before the test holds resources (the cleanups of
 * _cleanup_ variables do not run). Everything else the tests print goes to
 * stderr. */

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
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

/* The test running now (one translation unit per test binary). */
static struct {
        const char *name;
        unsigned number;
        pid_t pid; /* the harness's own process: a forked child's failure is not a TAP line */
        bool running;
        char skip_reason[512];
        jmp_buf skip_jmp;
} test_state _unused_;

/* A failed ASSERT: says which test failed (TAP) and aborts the binary. */
__attribute__((noreturn)) _unused_ static void test_fail(void) {
        if (test_state.running && getpid() == test_state.pid) {
                printf("not ok %u - %s\n", test_state.number, test_state.name);
                fflush(stdout);
        }
        abort();
}

/* Skips the running test: "ok K - name # SKIP reason". Outside of a test (in
 * a forked child, say) it exits with EXIT_TEST_SKIP. */
#define TEST_SKIP(...) test_skip(__VA_ARGS__)
/* Skips for want of a prerequisite that scripts/deps installs (a package, a
 * tool, a fixture built with one): "# SKIP (prerequisite) reason", which
 * scripts/test counts as a failure with CI=true. The format is a literal. */
#define TEST_SKIP_PREREQ(format, ...) test_skip("(prerequisite) " format, ##__VA_ARGS__)
__attribute__((noreturn)) _printf_(1, 2) _unused_ static void test_skip(const char *format, ...) {
        va_list ap;

        va_start(ap, format);
        vsnprintf(test_state.skip_reason, sizeof(test_state.skip_reason), format, ap);
        va_end(ap);
        fprintf(stderr, "skipped: %s\n", test_state.skip_reason);
        if (!test_state.running || getpid() != test_state.pid)
                exit(EXIT_TEST_SKIP);
        longjmp(test_state.skip_jmp, 1);
}

#define ASSERT_TRUE(expr)                                                                            \
        do {                                                                                         \
                if (!(expr)) {                                                                       \
                        fprintf(stderr, "%s:%d: Assertion failed: %s\n", __FILE__, __LINE__, #expr); \
                        test_fail();                                                                 \
                }                                                                                    \
        } while (0)
#define ASSERT_FALSE(expr) ASSERT_TRUE(!(expr))

#define ASSERT_OK(expr)                                                                             \
        do {                                                                                        \
                long long _r = (expr);                                                              \
                if (_r < 0) {                                                                       \
                        fprintf(stderr, "%s:%d: %s failed: %s (%lld)\n", __FILE__, __LINE__, #expr, \
                                strerror((int) -_r), _r);                                           \
                        test_fail();                                                                \
                }                                                                                   \
        } while (0)

#define ASSERT_ERROR(expr, err)                                                                        \
        do {                                                                                           \
                long long _r = (expr);                                                                 \
                if (_r != -(err)) {                                                                    \
                        fprintf(stderr, "%s:%d: %s returned %lld, expected -%s\n", __FILE__, __LINE__, \
                                #expr, _r, #err);                                                      \
                        test_fail();                                                                   \
                }                                                                                      \
        } while (0)

#define ASSERT_EQ(a, b)                                                                                 \
        do {                                                                                            \
                long long _a = (long long) (a), _b = (long long) (b);                                   \
                if (_a != _b) {                                                                         \
                        fprintf(stderr, "%s:%d: Assertion failed: %s == %s (%lld != %lld)\n", __FILE__, \
                                __LINE__, #a, #b, _a, _b);                                              \
                        test_fail();                                                                    \
                }                                                                                       \
        } while (0)

#define ASSERT_STREQ(a, b)                                                                                  \
        do {                                                                                                \
                const char *_a = (a), *_b = (b);                                                            \
                if (!streq_ptr(_a, _b)) {                                                                   \
                        fprintf(stderr, "%s:%d: Assertion failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__, \
                                __LINE__, #a, #b, strna(_a), strna(_b));                                    \
                        test_fail();                                                                        \
                }                                                                                           \
        } while (0)

#define ASSERT_NOT_NULL(p) ASSERT_TRUE((p) != NULL)
#define ASSERT_NULL(p) ASSERT_TRUE((p) == NULL)

_unused_ static bool test_selected(const TestEntry *t, int argc, char *argv[]) {
        if (argc <= 1)
                return true;
        for (int i = 1; i < argc; i++)
                if (streq(argv[i], t->name))
                        return true;
        return false;
}

/* Runs every TEST() of the binary, or only those named on the command line
 * (a name that is no test is an error), and reports them in TAP. */
_unused_ static int test_main(int argc, char *argv[]) {
        unsigned n = 0;

        for (int i = 1; i < argc; i++) {
                bool found = false;
                for (const TestEntry *t = __start_cgprof_tests; t < __stop_cgprof_tests; t++)
                        if (streq(argv[i], t->name))
                                found = true;
                if (!found) {
                        printf("Bail out! No test named %s\n", argv[i]);
                        return EXIT_FAILURE;
                }
        }
        for (const TestEntry *t = __start_cgprof_tests; t < __stop_cgprof_tests; t++)
                if (test_selected(t, argc, argv))
                        n++;
        printf("1..%u\n", n);
        fflush(stdout);

        test_state.pid = getpid();
        for (const TestEntry *t = __start_cgprof_tests; t < __stop_cgprof_tests; t++) {
                if (!test_selected(t, argc, argv))
                        continue;
                test_state.name = t->name;
                test_state.number++;
                fprintf(stderr, "/* %s */\n", t->name);
                if (setjmp(test_state.skip_jmp) == 0) {
                        test_state.running = true;
                        t->func();
                        test_state.running = false;
                        printf("ok %u - %s\n", test_state.number, t->name);
                } else {
                        test_state.running = false;
                        /* A reason on one line: a newline would end the TAP line. */
                        for (char *c = test_state.skip_reason; *c; c++)
                                if (*c == '\n')
                                        *c = ' ';
                        printf("ok %u - %s # SKIP %s\n", test_state.number, t->name, test_state.skip_reason);
                }
                fflush(stdout);
        }
        return EXIT_SUCCESS;
}

#define DEFINE_TEST_MAIN                      \
        int main(int argc, char *argv[]) {    \
                return test_main(argc, argv); \
        }
