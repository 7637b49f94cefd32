/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUPTI fixture (tests/integration/test_gpu_durations.py): plays the part
 * CUPTI plays on a GPU node, without a GPU. It links the real
 * libcgprof-cupti.so and calls its cgprof_cupti_launch(correlation), as the
 * library's CUPTI callback does at a launch's entry (the agent's uprobe
 * takes the stack and the ID there), from three call paths, each through a
 * function named as nvcc names a kernel's device stub (the agent names the
 * kernel after it). Then it sends the kernel records a GPU would have
 * produced, with known durations, as the library does: cupti-wire.h
 * datagrams on the agent's socket.
 *
 *   cupti-fixture ROUNDS SOCKET
 *     prints "ready", spins (so the sampler sees it and the agent attaches
 *     its probe) until a line; launches ROUNDS * (5, 3, 2) kernels with
 *     correlation IDs 1..10*ROUNDS (alpha first, then beta, then gamma) and
 *     prints "launched"; at the next line sends their records (alpha
 *     1,000 ns, beta 2,000 ns, gamma 3,000 ns each), UNKNOWN records of
 *     correlation IDs it never launched (500 ns each) and DROPPED dropped
 *     in a header, prints "done", and exits at the next line (or EOF).
 *   cupti-fixture loop N
 *     prints "ready", spins until a line, then calls the alpha stub N times
 *     as fast as it can and prints "ns PER_CALL" (the probe's cost per
 *     launch, without CUPTI: docs/gpu.md).
 *   cupti-fixture claim SOCKET PID FIRST N
 *     sends N records of correlation IDs FIRST.. (1 s each) claiming to be
 *     PID in the header, prints "sent", and exits at the next line: the
 *     agent must credit them to the sender, which launched nothing. */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cupti-wire.h"
#include "fixture-stdin.h"

#define UNKNOWN 7
#define DROPPED 5

void cgprof_cupti_launch(uint32_t correlation); /* libcgprof-cupti.so */

static uint32_t next_correlation = 1;

/* As nvcc names the host stubs of k_alpha(float*, int), k_beta(float*,
 * int) and k_gamma(int*). */
__attribute__((noinline)) void __device_stub__Z7k_alphaPfi(void) {
        cgprof_cupti_launch(next_correlation++);
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void __device_stub__Z6k_betaPfi(void) {
        cgprof_cupti_launch(next_correlation++);
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void __device_stub__Z7k_gammaPi(void) {
        cgprof_cupti_launch(next_correlation++);
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void path_alpha(int n) {
        for (int i = 0; i < n; i++)
                __device_stub__Z7k_alphaPfi();
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void path_beta(int n) {
        for (int i = 0; i < n; i++)
                __device_stub__Z6k_betaPfi();
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void path_gamma(int n) {
        for (int i = 0; i < n; i++)
                __device_stub__Z7k_gammaPi();
        __asm__ volatile("" ::: "memory");
}

static int sock = -1;
static struct sockaddr_un addr = { .sun_family = AF_UNIX };
static CuptiWireKernel batch[CUPTI_WIRE_MAX_KERNELS];
static size_t n_batch;

static void flush(uint32_t pid, uint32_t dropped) {
        uint8_t buf[CUPTI_WIRE_MAX_SIZE];
        CuptiWireHeader h = { .pid = pid, .dropped = dropped };
        int len = cupti_wire_encode(&h, batch, n_batch, buf, sizeof(buf));

        /* Blocking here: the test wants every record there. */
        if (len < 0 || sendto(sock, buf, (size_t) len, 0, (struct sockaddr *) &addr, sizeof(addr)) != len) {
                perror("sendto");
                exit(1);
        }
        n_batch = 0;
}

static void record(uint32_t pid, uint32_t correlation, uint64_t ns) {
        static uint64_t clock = 1000000;

        batch[n_batch++] =
                (CuptiWireKernel){ .start_ns = clock, .end_ns = clock + ns, .correlation = correlation };
        clock += ns + 100;
        if (n_batch == CUPTI_WIRE_MAX_KERNELS)
                flush(pid, 0);
}

static int open_socket(const char *path) {
        if (strlen(path) >= sizeof(addr.sun_path))
                return -1;
        strcpy(addr.sun_path, path);
        sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        return sock;
}

static int claim(int argc, char **argv) {
        uint32_t pid, first, n;

        if (argc != 6 || open_socket(argv[2]) < 0)
                return 2;
        pid = (uint32_t) atoi(argv[3]);
        first = (uint32_t) atoi(argv[4]);
        n = (uint32_t) atoi(argv[5]);
        for (uint32_t i = 0; i < n; i++)
                record(pid, first + i, 1000000000);
        flush(pid, 0);
        printf("sent %u\n", n);
        fflush(stdout);
        read_line();
        return 0;
}

static int loop(int argc, char **argv) {
        struct timespec a, b;
        long n;

        if (argc != 3)
                return 2;
        n = atol(argv[2]);
        printf("ready\n");
        fflush(stdout);
        spin_until_line();
        read_line();
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++)
                __device_stub__Z7k_alphaPfi();
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("ns %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double) n);
        fflush(stdout);
        read_line();
        return 0;
}

int main(int argc, char **argv) {
        uint32_t pid = (uint32_t) getpid(), c = 1;
        int rounds;

        if (argc > 1 && strcmp(argv[1], "claim") == 0)
                return claim(argc, argv);
        if (argc > 1 && strcmp(argv[1], "loop") == 0)
                return loop(argc, argv);
        if (argc != 3 || open_socket(argv[2]) < 0)
                return 2;
        rounds = atoi(argv[1]);
        printf("ready\n");
        fflush(stdout);
        spin_until_line();
        read_line();
        path_alpha(5 * rounds);
        path_beta(3 * rounds);
        path_gamma(2 * rounds);
        printf("launched %u\n", next_correlation - 1);
        fflush(stdout);
        read_line();
        for (int i = 0; i < 5 * rounds; i++)
                record(pid, c++, 1000);
        for (int i = 0; i < 3 * rounds; i++)
                record(pid, c++, 2000);
        for (int i = 0; i < 2 * rounds; i++)
                record(pid, c++, 3000);
        for (int i = 0; i < UNKNOWN; i++)
                record(pid, 1000000 + i, 500);
        flush(pid, DROPPED);
        printf("done\n");
        fflush(stdout);
        read_line();
        return 0;
}
