/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The large-library fixture (test_unwind_scale.py): dlopen()s the shared
 * libraries it is given (the CUDA libraries, libtorch_cpu: millions of
 * unwind rows together), then spins in a function of its own,
 *   main -> scale_spin -> scale_leaf
 * for S seconds of CPU time.
 *
 * Some libraries need others loaded first: the failures are tried again,
 * round after round, until a round loads none. RTLD_LAZY | RTLD_GLOBAL:
 * what a framework's loader does; nothing in them is called.
 *
 * cgprof-unwind-dlopen [--seconds S] LIB...: prints "loaded N of M" and the
 * last error of each library that would not load (stderr), then
 * "ready <pid>" (stdout). */
#include <dlfcn.h>

#include "unwind-common.h"

static volatile uint64_t sink;

CHAIN void scale_leaf(void) {
        UNWIND_SPIN(sink, 1);
}

CHAIN void scale_spin(void) {
        scale_leaf();
        BARRIER();
}

/* One round over the libraries not loaded yet: how many it loaded. */
static int load_round(char **libs, int n, int *loaded) {
        int progress = 0;

        for (int i = 0; i < n; i++) {
                if (loaded[i])
                        continue;
                if (dlopen(libs[i], RTLD_LAZY | RTLD_GLOBAL)) {
                        loaded[i] = 1;
                        progress++;
                }
        }
        return progress;
}

int main(int argc, char *argv[]) {
        double seconds = 5;
        char **libs = argv + 1;
        int n = argc - 1, n_loaded = 0, *loaded;

        if (n >= 2 && strcmp(argv[1], "--seconds") == 0) {
                seconds = atof(argv[2]);
                libs += 2;
                n -= 2;
        }
        loaded = calloc((size_t) n + 1, sizeof(int));
        if (!loaded)
                return 1;
        for (int p; (p = load_round(libs, n, loaded)) > 0;)
                n_loaded += p;
        fprintf(stderr, "loaded %d of %d\n", n_loaded, n);
        for (int i = 0; i < n; i++)
                if (!loaded[i] && !dlopen(libs[i], RTLD_LAZY | RTLD_GLOBAL))
                        fprintf(stderr, "not loaded: %s\n", dlerror());
        fflush(stderr);

        unwind_ready();
        while (unwind_running(seconds))
                scale_spin();
        return 0;
}
