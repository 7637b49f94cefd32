/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The deep-recursion unwinding fixture, -O2 -fomit-frame-pointer: every
 * sample is 110 recursive frames deep,
 *   main -> deep_start -> recurse (x110) -> deep_leaf
 * (116 frames with libc's three below main: under the kernel's 127 and
 * cgprofd's walk limit of at least 128).
 *
 * cgprof-unwind-deep [--seconds S]: runs for S seconds of CPU time;
 * prints "ready <pid>" once started. */
#include "unwind-common.h"

#define DEPTH 110

static volatile uint64_t sink;

CHAIN void deep_leaf(void) {
        UNWIND_SPIN(sink, 1);
}

/* n..1: exactly DEPTH recurse frames. The barrier after the call keeps GCC
 * from turning the recursion into a loop. */
CHAIN void recurse(int n) {
        if (n > 1)
                recurse(n - 1);
        else
                deep_leaf();
        BARRIER();
}

CHAIN void deep_start(void) {
        recurse(DEPTH);
        BARRIER();
}

int main(int argc, char *argv[]) {
        double seconds = unwind_args(argc, argv, NULL, NULL, 0);

        unwind_ready();
        while (unwind_running(seconds))
                deep_start();
        BARRIER();
        return 0;
}
