/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The shared-library unwinding fixture: a program built without frame
 * pointers calling into a library built without them (unwind-lib.c):
 *   main -> lib_entry -> lib_mid -> lib_hot_x (6) | lib_hot_y (4)
 * so an unwinder must switch from the library's .eh_frame to the program's
 * at the return into main.
 *
 * cgprof-unwind-shlib [--seconds S]: runs for S seconds of CPU time;
 * prints "ready <pid>" once started. */
#include "unwind-common.h"
#include "unwind-lib.h"

int main(int argc, char *argv[]) {
        double seconds = unwind_args(argc, argv, NULL, NULL, 0);

        unwind_ready();
        for (unsigned i = 0; unwind_running(seconds); i++) {
                lib_entry(i);
                BARRIER();
        }
        return 0;
}
