/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the unwinding fixtures share (C and C++): a fixed unit of real work for
 * the hot leaves, attributes that keep every chain function a real frame, and
 * the command line (--seconds S of CPU time, "ready <pid>" once started).
 *
 * The fixtures are built without sanitizers and (mostly) without frame
 * pointers; tests/integration/test_unwind.py compares our DWARF unwinding of
 * them against perf record --call-graph dwarf. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A chain function: never inlined, never cloned into foo.constprop.0 or
 * foo.isra.0 (a different name), never analysed across calls (GCC's noipa).
 * The BARRIER() after each call keeps the call from being a tail call, so the
 * caller stays on the stack (the fixtures are also built with
 * -fno-optimize-sibling-calls). */
#if defined(__clang__)
#define CHAIN __attribute__((noinline))
#else
#define CHAIN __attribute__((noipa))
#endif
#define BARRIER() __asm__ volatile("" ::: "memory")

/* Loop iterations per unit of work: ~0.1 ms, so the time between units (the
 * callers, the clock) is a negligible share. */
#define UNWIND_UNIT 30000

/* A register-only, latency-bound loop (a multiply-add chain): an iteration
 * costs the same in every leaf whatever the code alignment, so equal units
 * give equal CPU time and a call ratio is a time ratio. The state goes
 * through a volatile global, so the work cannot be folded away. */
#define UNWIND_SPIN(sink, units)                                                    \
        do {                                                                        \
                uint64_t _x = (sink);                                               \
                for (uint64_t _i = 0; _i < (uint64_t) (units) *UNWIND_UNIT; _i++) { \
                        _x = _x * 6364136223846793005ULL + 1442695040888963407ULL;  \
                        __asm__ volatile("" : "+r"(_x));                            \
                }                                                                   \
                (sink) = _x;                                                        \
        } while (0)

static inline double unwind_cpu_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* Whether to go on: a fixture runs for S seconds of its own CPU time, not
 * wall time, so a busy machine does not thin its samples (~999 x S at
 * 999 Hz). The first call starts the clock. The clock is a system call:
 * read on every 8th call only (~0.3 ms of work), so it costs nothing. */
static inline int unwind_running(double seconds) {
        static double end = -1;
        static unsigned calls;

        if (end < 0)
                end = unwind_cpu_now() + seconds;
        if (calls++ % 8 != 0)
                return 1;
        return unwind_cpu_now() < end;
}

/* Parses "--seconds S" and the flags in flags[] (each sets *flag_set[i]);
 * prints usage and exits 2 on anything else. */
static inline double unwind_args(int argc, char *argv[], const char *const *flags, int *const *flag_set,
                                 int n_flags) {
        double seconds = 5;

        for (int i = 1; i < argc; i++) {
                int known = 0;

                if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
                        seconds = atof(argv[++i]);
                        continue;
                }
                for (int k = 0; k < n_flags; k++)
                        if (strcmp(argv[i], flags[k]) == 0) {
                                *flag_set[k] = 1;
                                known = 1;
                        }
                if (!known) {
                        fprintf(stderr, "usage: %s [--seconds S]", argv[0]);
                        for (int k = 0; k < n_flags; k++)
                                fprintf(stderr, " [%s]", flags[k]);
                        fprintf(stderr, "\n");
                        exit(2);
                }
        }
        return seconds;
}

static inline void unwind_ready(void) {
        printf("ready %d\n", (int) getpid());
        fflush(stdout);
}
