/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The deep-recursion unwinding fixture, -O2 -fomit-frame-pointer: every
 * sample is DEPTH recursive frames deep,
 *   main -> deep_start -> recurse (x DEPTH) -> deep_leaf
 * DEPTH is 110 by default (116 frames with libc's three below main: under
 * the kernel's 127, so perf's walk sees them all), 400 with --deep (406
 * frames: past the 128 of stacks' short tier, under cgprofd's walk limit of
 * 512).
 *
 * cgprof-unwind-deep [--seconds S] [--deep]: runs for S seconds of CPU
 * time; prints "ready <pid>" once started. */
#include "unwind-common.h"

#define DEPTH 110
#define DEPTH_DEEP 400

static volatile uint64_t sink;

CHAIN void deep_leaf(void) {
        UNWIND_SPIN(sink, 1);
}

/* n..1: exactly n recurse frames. The barrier after the call keeps GCC
 * from turning the recursion into a loop. */
CHAIN void recurse(int n) {
        if (n > 1)
                recurse(n - 1);
        else
                deep_leaf();
        BARRIER();
}

CHAIN void deep_start(int depth) {
        recurse(depth);
        BARRIER();
}

int main(int argc, char *argv[]) {
        static const char *const flags[] = { "--deep" };
        int deep = 0;
        int *const set[] = { &deep };
        double seconds = unwind_args(argc, argv, flags, set, 1);

        unwind_ready();
        while (unwind_running(seconds))
                deep_start(deep ? DEPTH_DEEP : DEPTH);
        BARRIER();
        return 0;
}
