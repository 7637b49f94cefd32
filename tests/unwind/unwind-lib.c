/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The shared library of the shared-library unwinding fixture
 * (libcgprof-unwind-lib.so, -O2 -fomit-frame-pointer): the CPU time is in two
 * leaves, 6:4, under
 *   lib_entry (exported) -> lib_mid -> lib_hot_x (6) | lib_hot_y (4)
 * lib_mid and the leaves are static: only the library's .symtab names them,
 * and only its .eh_frame says how to leave them. */
#include "unwind-common.h"
#include "unwind-lib.h"

static volatile uint64_t sink;

static CHAIN void lib_hot_x(void) {
        UNWIND_SPIN(sink, 1);
}

static CHAIN void lib_hot_y(void) {
        UNWIND_SPIN(sink, 1);
}

static CHAIN void lib_mid(unsigned i) {
        if (i % 10 < 6)
                lib_hot_x();
        else
                lib_hot_y();
        BARRIER();
}

CHAIN void lib_entry(unsigned i) {
        lib_mid(i);
        BARRIER();
}
