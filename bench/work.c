/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fixed-work CPU workload for bench/overhead.
 *
 *   cgprof-bench-work [--depth N] ITERATIONS
 *
 * Runs ITERATIONS rounds of a deterministic compute loop spread over a few
 * non-inlined functions (so a profiler sees a real call chain:
 * main → run_work → work_round → bench_hash / bench_float / bench_walk),
 * single-threaded, touching no files and making no system calls while it
 * works. The amount of work depends on ITERATIONS only, so the elapsed time
 * of two runs compares the speed of the machine under two conditions (with
 * and without a profiler). Prints one line:
 *
 *   elapsed <wall seconds> cpu <CPU seconds> iterations <N> checksum <x>
 *
 * Timing covers the work only (not exec, dynamic linking or exit).
 *
 * --depth N (0 to 64, default 0) puts N more frames between main and
 * run_work (main → descend × N → run_work → ...), so that a stack walker
 * has more frames to walk; the work itself is the same. bench/overhead
 * uses it with cgprof-bench-work-nofp, the same source built with
 * -fomit-frame-pointer, to measure DWARF (.eh_frame) unwinding. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* noclone too: GCC would otherwise profile as "bench_hash.constprop.0". */
#if defined(__GNUC__) && !defined(__clang__)
#define NOINLINE __attribute__((noinline, noclone))
#else
#define NOINLINE __attribute__((noinline))
#endif

/* A small table that stays in L1/L2: the walk is about branch and load
 * latency, not memory bandwidth (which would make it sensitive to whatever
 * else runs on the machine). */
#define WALK_SIZE 4096
static uint32_t walk_table[WALK_SIZE];

static double now(clockid_t clock) {
        struct timespec ts;
        if (clock_gettime(clock, &ts) < 0)
                return 0.0;
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* Returns n, opaquely. Each compute function calls it first so that it is
 * not a leaf: GCC 12 drops the frame pointer of leaf functions that need no
 * stack even with -mno-omit-leaf-frame-pointer, which would hide the caller
 * from a frame-pointer unwinder. */
NOINLINE static unsigned bench_count(unsigned n) {
        __asm__ volatile("" : "+r"(n));
        return n;
}

/* Integer mixing (splitmix64 steps). */
NOINLINE static uint64_t bench_hash(uint64_t x, unsigned n) {
        n = bench_count(n);
        for (unsigned i = 0; i < n; i++) {
                x += UINT64_C(0x9e3779b97f4a7c15);
                uint64_t z = x;
                z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
                z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
                x ^= z ^ (z >> 31);
        }
        return x;
}

/* Dependent floating-point arithmetic (a logistic map). */
NOINLINE static double bench_float(double v, unsigned n) {
        n = bench_count(n);
        for (unsigned i = 0; i < n; i++)
                v = 3.9 * v * (1.0 - v) + 1e-9;
        return v;
}

/* A pointer-chasing walk through walk_table. */
NOINLINE static uint32_t bench_walk(uint32_t pos, unsigned n) {
        n = bench_count(n);
        for (unsigned i = 0; i < n; i++)
                pos = walk_table[pos];
        return pos;
}

/* One round: roughly equal time in the three leaves. */
NOINLINE static uint64_t work_round(uint64_t h, double *v, uint32_t *pos) {
        h = bench_hash(h, 1000);
        *v = bench_float(*v, 1200);
        *pos = bench_walk(*pos, 2700);
        return h ^ *pos;
}

NOINLINE static uint64_t run_work(uint64_t iterations) {
        uint64_t h = 1;
        double v = 0.5;
        uint32_t pos = 0;

        for (uint64_t i = 0; i < iterations; i++)
                h = work_round(h, &v, &pos);
        return h ^ (uint64_t) (v * 1e9);
}

/* depth (>= 1) frames of its own above run_work. Not a tail call (the asm
 * uses the result after the call), so each level keeps a frame on the stack. */
NOINLINE static uint64_t descend(unsigned depth, uint64_t iterations) {
        uint64_t r;

        if (depth <= 1)
                r = run_work(iterations);
        else
                r = descend(depth - 1, iterations);
        __asm__ volatile("" : "+r"(r));
        return r;
}

/* --stacks BITS: 2^BITS different call paths, BITS levels of branch()
 * calling fork_a() or fork_b(), one path picked at random for each short
 * piece of work: a profile with as many unique stacks as its samples allow
 * (bench/overhead --stacks: drain and report-writing time). */
NOINLINE static uint64_t fork_a(unsigned level, uint32_t path, uint64_t h);
NOINLINE static uint64_t fork_b(unsigned level, uint32_t path, uint64_t h);

NOINLINE static uint64_t branch(unsigned level, uint32_t path, uint64_t h) {
        uint64_t r;

        if (level == 0)
                r = bench_hash(h, 200);
        else if (path & 1)
                r = fork_a(level - 1, path >> 1, h);
        else
                r = fork_b(level - 1, path >> 1, h);
        __asm__ volatile("" : "+r"(r));
        return r;
}

NOINLINE static uint64_t fork_a(unsigned level, uint32_t path, uint64_t h) {
        uint64_t r = branch(level, path, h);
        __asm__ volatile("" : "+r"(r));
        return r;
}

NOINLINE static uint64_t fork_b(unsigned level, uint32_t path, uint64_t h) {
        uint64_t r = branch(level, path, h ^ 1);
        __asm__ volatile("" : "+r"(r));
        return r;
}

/* CGPROF_BENCH_DUTY=PCT (with --stacks): work PCT % of every 100 ms and
 * sleep the rest, like a mostly idle service (bench/end-many: hundreds of
 * targets on two CPUs). */
static double duty_fraction(void) {
        const char *e = getenv("CGPROF_BENCH_DUTY");
        double d = e ? strtod(e, NULL) : 0.0;
        return d > 0.0 && d < 100.0 ? d / 100.0 : 0.0;
}

NOINLINE static uint64_t run_stacks(unsigned bits, uint64_t iterations) {
        const double period = 0.1, duty = duty_fraction();
        double period_start = now(CLOCK_MONOTONIC);
        uint64_t h = 1, seed = 42;

        for (uint64_t i = 0; i < iterations; i++) {
                seed = seed * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
                h = branch(bits, (uint32_t) (seed >> 33) & ((UINT32_C(1) << bits) - 1), h);
                if (duty > 0.0 && (i & 63) == 0) {
                        double t = now(CLOCK_MONOTONIC);
                        if (t - period_start >= duty * period) {
                                double rest = period_start + period - t;
                                if (rest > 0) {
                                        struct timespec ts = { .tv_sec = 0, .tv_nsec = (long) (rest * 1e9) };
                                        nanosleep(&ts, NULL);
                                }
                                period_start = now(CLOCK_MONOTONIC);
                        }
                }
        }
        return h;
}

static void init_walk(void) {
        /* A fixed single-cycle permutation (Sattolo's shuffle with a fixed LCG). */
        uint32_t seed = 12345;
        for (uint32_t i = 0; i < WALK_SIZE; i++)
                walk_table[i] = i;
        for (uint32_t i = WALK_SIZE - 1; i > 0; i--) {
                seed = seed * 1103515245u + 12345u;
                uint32_t j = (seed >> 8) % i;
                uint32_t t = walk_table[i];
                walk_table[i] = walk_table[j];
                walk_table[j] = t;
        }
}

int main(int argc, char *argv[]) {
        unsigned long long iterations;
        unsigned long depth = 0, stack_bits = 0;
        double w0, c0, w1, c1;
        uint64_t sum;
        const char *arg;
        char *end;

        if (argc == 4 && strcmp(argv[1], "--depth") == 0) {
                errno = 0;
                depth = strtoul(argv[2], &end, 10);
                if (errno != 0 || end == argv[2] || *end != 0 || depth > 64) {
                        fprintf(stderr, "%s: invalid --depth '%s' (0 to 64)\n", argv[0], argv[2]);
                        return 2;
                }
                arg = argv[3];
        } else if (argc == 4 && strcmp(argv[1], "--stacks") == 0) {
                errno = 0;
                stack_bits = strtoul(argv[2], &end, 10);
                if (errno != 0 || end == argv[2] || *end != 0 || stack_bits < 1 || stack_bits > 24) {
                        fprintf(stderr, "%s: invalid --stacks '%s' (1 to 24 bits)\n", argv[0], argv[2]);
                        return 2;
                }
                arg = argv[3];
        } else if (argc == 2)
                arg = argv[1];
        else {
                fprintf(stderr, "usage: %s [--depth N | --stacks BITS] ITERATIONS\n", argv[0]);
                return 2;
        }
        errno = 0;
        iterations = strtoull(arg, &end, 10);
        if (errno != 0 || end == arg || *end != 0 || iterations == 0) {
                fprintf(stderr, "%s: invalid ITERATIONS '%s'\n", argv[0], arg);
                return 2;
        }

        init_walk();

        w0 = now(CLOCK_MONOTONIC);
        c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        if (stack_bits)
                sum = run_stacks((unsigned) stack_bits, iterations);
        else
                sum = depth ? descend((unsigned) depth, iterations) : run_work(iterations);
        c1 = now(CLOCK_PROCESS_CPUTIME_ID);
        w1 = now(CLOCK_MONOTONIC);

        printf("elapsed %.6f cpu %.6f iterations %llu checksum %016" PRIx64 "\n", w1 - w0, c1 - c0,
               iterations, sum);
        return fflush(stdout) == 0 ? 0 : 1;
}
