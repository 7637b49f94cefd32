/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The integration tests' workload: spends its CPU time in three functions in
 * a known 5:3:2 ratio, called through a known caller chain:
 *   main -> run_workload -> work_cycle -> hot_alpha (5) / hot_beta (3) / hot_gamma (2)
 * (each hot function runs the same loop body for its share: self time).
 *
 * cgprof-workload [--seconds S] [--name NAME] [--depth N]
 *   --seconds S  run for S seconds (fractions allowed; default 5)
 *   --name NAME  set the process name (comm) to NAME first
 *   --depth N    recurse N frames deep (descend) before working
 * It prints "ready <pid>" once running. Built with frame pointers and no
 * inlining so stacks are exact. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

/* Loop iterations per unit of work: a cycle of 10 units takes ~25 µs, far
 * shorter than a sampling period (~1 ms at 999 Hz), so the samples fall
 * at phases of the cycle that the timer's and the scheduler's jitter spread
 * evenly. With ~2.5 ms cycles (200000) the period and the cycle could
 * lock in step on a steady CPU, and a function got 22 % instead of 30 %. */
#define UNIT 2000

/* The loop is in each hot function itself (self time), the same body everywhere. */
/* A register-only, latency-bound loop (a multiply-add chain), so an
 * iteration costs the same in every function whatever the code alignment.
 * The stack local gives each hot function a real frame: GCC omits the frame
 * pointer setup in frameless leaf functions even with
 * -mno-omit-leaf-frame-pointer, and the caller would vanish from the stack. */
#define SPIN(units)                                                                \
        do {                                                                       \
                volatile uint64_t _frame = 0;                                      \
                uint64_t _x = sink;                                                \
                for (uint64_t _i = 0; _i < (uint64_t) (units) *UNIT; _i++) {       \
                        _x = _x * 6364136223846793005ULL + 1442695040888963407ULL; \
                        __asm__ volatile("" : "+r"(_x));                           \
                }                                                                  \
                _frame = _x;                                                       \
                sink = _frame;                                                     \
        } while (0)

__attribute__((noinline)) void hot_alpha(void) {
        SPIN(5);
}

__attribute__((noinline)) void hot_beta(void) {
        SPIN(3);
}

__attribute__((noinline)) void hot_gamma(void) {
        SPIN(2);
}

__attribute__((noinline)) void work_cycle(void) {
        hot_alpha();
        hot_beta();
        hot_gamma();
}

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void run_workload(double seconds) {
        double end = now() + seconds;
        while (now() < end)
                work_cycle();
}

/* Recurses n levels, then works: stacks deeper than the kernel records. */
__attribute__((noinline)) void descend(int n, double seconds) {
        volatile int frame = n;
        if (frame > 0)
                descend(n - 1, seconds);
        else
                run_workload(seconds);
}

int main(int argc, char *argv[]) {
        double seconds = 5;
        int depth = 0;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
                        seconds = atof(argv[++i]);
                else if (strcmp(argv[i], "--depth") == 0 && i + 1 < argc)
                        depth = atoi(argv[++i]);
                else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
                        prctl(PR_SET_NAME, argv[++i], 0, 0, 0);
                else {
                        fprintf(stderr, "usage: %s [--seconds S] [--name NAME] [--depth N]\n", argv[0]);
                        return 2;
                }
        }
        printf("ready %d\n", (int) getpid());
        fflush(stdout);
        if (depth > 0)
                descend(depth, seconds);
        else
                run_workload(seconds);
        return 0;
}
