/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The C unwinding fixture, built twice: cgprof-unwind-nofp (-O2
 * -fomit-frame-pointer: a frame pointer walk gets one frame) and
 * cgprof-unwind-fp (-O2 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer).
 *
 * Default mode: the CPU time is in three leaves, 5:3:2, under a fixed chain
 *   main -> run_all -> stage_outer -> descend (x7) -> stage_inner
 *        -> hot_alpha (5) | hot_beta (3) | hot_gamma (2)
 * Every iteration goes down the whole chain and runs one unit of work in one
 * leaf, chosen by a counter (5 of 10 iterations alpha, 3 beta, 2 gamma).
 *
 * --frameless: a frame pointer build whose hot leaf sets up no frame hides
 * that leaf's caller from a frame pointer walk:
 *   main -> work_unit -> hot_leaf
 * While hot_leaf runs, %rbp still holds work_unit's frame, whose return
 * address leads to main: perf -g shows main;hot_leaf, DWARF unwinding (the
 * leaf's CFA is %rsp+8) shows main;work_unit;hot_leaf.
 *
 * cgprof-unwind-{fp,nofp} [--seconds S] [--frameless]: runs for S seconds of
 * CPU time; prints "ready <pid>" once started. */
#include "unwind-common.h"

#define DEPTH 7

static volatile uint64_t sink;
static unsigned counter;

/* The chain's leaves, with a stack slot (the volatile local) so that in the
 * frame pointer build each sets up a frame: GCC sets up none in a leaf that
 * needs no stack, even with -mno-omit-leaf-frame-pointer (see hot_leaf). */
CHAIN void hot_alpha(void) {
        volatile uint64_t frame = sink;
        UNWIND_SPIN(frame, 1);
        sink = frame;
}

CHAIN void hot_beta(void) {
        volatile uint64_t frame = sink;
        UNWIND_SPIN(frame, 1);
        sink = frame;
}

CHAIN void hot_gamma(void) {
        volatile uint64_t frame = sink;
        UNWIND_SPIN(frame, 1);
        sink = frame;
}

CHAIN void stage_inner(void) {
        unsigned k = counter++ % 10;

        if (k < 5)
                hot_alpha();
        else if (k < 8)
                hot_beta();
        else
                hot_gamma();
        BARRIER();
}

/* level 1..DEPTH: exactly DEPTH descend frames between stage_outer and
 * stage_inner. */
CHAIN void descend(int level) {
        if (level < DEPTH)
                descend(level + 1);
        else
                stage_inner();
        BARRIER();
}

CHAIN void stage_outer(void) {
        descend(1);
        BARRIER();
}

CHAIN void run_all(double seconds) {
        while (unwind_running(seconds))
                stage_outer();
        BARRIER();
}

/* No stack slot, no calls: GCC (12) compiles this without a frame even in the
 * -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer build (it only sets up
 * %rbp in functions that need a stack frame). The attribute makes the same
 * happen with compilers that would set one up; clang has no such attribute
 * and keeps the frame, which test_unwind.py would report (perf -g then shows
 * work_unit). */
#if defined(__clang__)
CHAIN void hot_leaf(void)
#else
CHAIN __attribute__((optimize("omit-frame-pointer"))) void hot_leaf(void)
#endif
{
        UNWIND_SPIN(sink, 1);
}

CHAIN void work_unit(void) {
        hot_leaf();
        BARRIER();
}

int main(int argc, char *argv[]) {
        static const char *const flags[] = { "--frameless" };
        int frameless = 0;
        int *const set[] = { &frameless };
        double seconds = unwind_args(argc, argv, flags, set, 1);

        unwind_ready();
        if (frameless) {
                while (unwind_running(seconds))
                        work_unit();
        } else
                run_all(seconds);
        BARRIER();
        return 0;
}
