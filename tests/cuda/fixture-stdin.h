/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The GPU fixtures' handshake with their test (tests/integration/test_gpu*.py):
 * the test writes a line to go on; a fixture that must be on CPU meanwhile
 * (to be sampled) spins until the line is there. C and CUDA C++ alike. */

#include <poll.h>
#include <stdio.h>

/* Busy until standard input has a line to read (not read). */
static inline void spin_until_line(void) {
        struct pollfd p = { .fd = 0, .events = POLLIN };
        volatile unsigned long x = 0;

        while (poll(&p, 1, 0) == 0)
                for (int i = 0; i < 1000000; i++)
                        x += i;
}

/* Reads a line of standard input: 1, or 0 at its end. */
static inline int read_line(void) {
        char buf[64];
        return fgets(buf, sizeof(buf), stdin) != NULL;
}
