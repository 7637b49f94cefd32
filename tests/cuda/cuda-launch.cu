// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA launch fixture (tests/integration/test_gpu.py): three kernels
// launched 5:3:2 from three distinct host call paths. It runs without a
// GPU: every launch fails with "insufficient driver" (35), but the launch
// entry point is called, once per launch, which is what the agent counts.
//
// Protocol on stdin/stdout: prints "ready", spins (so the sampler sees it
// and the agent attaches its launch probes) until a line arrives, then
// launches ROUNDS * (5, 3, 2) kernels, prints "done LAUNCHES", and waits
// for another line (or EOF) to exit. ROUNDS --loop: the same protocol, then
// launches alpha only, ROUNDS times as fast as it can, and prints the ns
// per launch (bench/gpu-launch).
// Built as a library (-DCUDA_LAUNCH_LIBRARY) it exports launch_alpha(n)
// for the Python (ctypes) caller, and no main().
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__global__ void k_alpha(float *x, int n) {
        if (x)
                x[threadIdx.x] = n;
}

__global__ void k_beta(float *x, int n) {
        if (x)
                x[blockIdx.x] = n;
}

__global__ void k_gamma(int *x) {
        if (x)
                x[0] = 1;
}

// The three call paths: noinline, each its own frame above the launch.
extern "C" __attribute__((noinline)) void path_alpha(int n) {
        for (int i = 0; i < n; i++)
                k_alpha<<<4, 128>>>(NULL, i);
        asm volatile("" ::: "memory");
}

extern "C" __attribute__((noinline)) void path_beta(int n) {
        for (int i = 0; i < n; i++)
                k_beta<<<dim3(2, 3, 1), dim3(32, 4, 1)>>>(NULL, i);
        asm volatile("" ::: "memory");
}

extern "C" __attribute__((noinline)) void path_gamma(int n) {
        for (int i = 0; i < n; i++)
                k_gamma<<<1, 64>>>(NULL);
        asm volatile("" ::: "memory");
}

extern "C" __attribute__((visibility("default"))) int launch_alpha(int n) {
        path_alpha(n);
        return (int) cudaGetLastError();
}

#ifndef CUDA_LAUNCH_LIBRARY
#include "fixture-stdin.h"

static long long now_ns(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
        int rounds = argc > 1 ? atoi(argv[1]) : 100;

        if (argc > 2 && strcmp(argv[2], "--loop") == 0) {
                printf("ready\n");
                fflush(stdout);
                spin_until_line();
                read_line();
                path_alpha(1); /* the runtime's first call (its setup) outside the timing */
                long long t0 = now_ns();
                path_alpha(rounds);
                long long t1 = now_ns();
                printf("%d launches %.1f ns/launch (last error %d)\n", rounds, (double) (t1 - t0) / rounds,
                       (int) cudaGetLastError());
                return 0;
        }
        if (argc > 2 && strcmp(argv[2], "--dlclose") == 0) {
                // A library that launches through libcudart, loaded, used and
                // unloaded: the agent must take it in its stride.
                void *h = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
                if (!h) {
                        fprintf(stderr, "dlopen: %s\n", dlerror());
                        return 1;
                }
                int (*f)(int) = (int (*)(int)) dlsym(h, "launch_alpha");
                printf("ready\n");
                fflush(stdout);
                spin_until_line();
                read_line();
                f(rounds);
                dlclose(h);
                path_beta(rounds); // this program's own runtime, still there
                printf("done %d\n", 2 * rounds);
                fflush(stdout);
                spin_until_line();
                read_line();
                return 0;
        }

        if (argc > 2 && strcmp(argv[2], "--dlopen") == 0) {
                // A library loaded just before its launches, and the session
                // ended right after them: the agent's last look at the
                // process's mappings predates the library.
                printf("ready\n");
                fflush(stdout);
                spin_until_line();
                read_line();
                void *h = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
                if (!h) {
                        fprintf(stderr, "dlopen: %s\n", dlerror());
                        return 1;
                }
                int (*f)(int) = (int (*)(int)) dlsym(h, "launch_alpha");
                f(rounds);
                path_beta(rounds);
                printf("done %d\n", 2 * rounds);
                fflush(stdout);
                read_line();
                return 0;
        }

        printf("ready\n");
        fflush(stdout);
        spin_until_line();
        read_line();
        path_alpha(5 * rounds);
        path_beta(3 * rounds);
        path_gamma(2 * rounds);
        printf("done %d (last error %d)\n", 10 * rounds, (int) cudaGetLastError());
        fflush(stdout);
        read_line();
        return 0;
}
#endif
