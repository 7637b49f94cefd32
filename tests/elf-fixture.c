/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ELF fixture for test-elf-symtab and test-symbolizer: a few functions with
 * known names, two exported (fixture_alpha, fixture_beta) and two static
 * (fixture_static_gamma, fixture_static_delta), which only a full .symtab or
 * a separate debug file names.
 *
 * elf-fixture            call each function once and exit 0
 * elf-fixture --print    print "NAME 0xADDR" for each function (and getpid in
 *                        libc), then "ready", and exit
 * elf-fixture --wait     print as --print, then block until stdin reaches EOF
 *                        (so a test that dies takes its fixture with it)
 * elf-fixture --loop     print as --print, then call the functions forever
 * elf-fixture --sleep S  print as --print, then sleep S seconds
 *
 * Built with -O0 -g and a sha1 build ID; the build also makes a stripped copy
 * and a separate debug file of it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile uint64_t sink;

__attribute__((noinline, used)) static uint64_t fixture_static_gamma(uint64_t n) {
        uint64_t x = n;

        for (uint64_t i = 0; i < n; i++)
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        return x;
}

__attribute__((noinline, used)) static uint64_t fixture_static_delta(uint64_t n) {
        return fixture_static_gamma(n) ^ (n << 7);
}

__attribute__((noinline)) uint64_t fixture_alpha(uint64_t n) {
        return fixture_static_gamma(n) + 1;
}

__attribute__((noinline)) uint64_t fixture_beta(uint64_t n) {
        return fixture_static_delta(n) + fixture_alpha(n / 2);
}

static void print_addresses(void) {
        /* getpid comes from libc: its address (through the GOT in a PIE) lies
         * in libc's text. */
        pid_t (*libc_fn)(void) = getpid;

        printf("fixture_alpha %p\n", (void *) fixture_alpha);
        printf("fixture_beta %p\n", (void *) fixture_beta);
        printf("fixture_static_gamma %p\n", (void *) fixture_static_gamma);
        printf("fixture_static_delta %p\n", (void *) fixture_static_delta);
        printf("getpid %p\n", (void *) libc_fn);
        printf("ready %d\n", (int) getpid());
        fflush(stdout);
}

int main(int argc, char *argv[]) {
        if (argc <= 1) {
                sink = fixture_beta(1000);
                return 0;
        }

        if (strcmp(argv[1], "--print") == 0) {
                print_addresses();
                return 0;
        }

        if (strcmp(argv[1], "--wait") == 0) {
                char buf[256];

                print_addresses();
                while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
                        ;
                return 0;
        }

        if (strcmp(argv[1], "--loop") == 0) {
                print_addresses();
                for (;;)
                        sink += fixture_beta(100000);
        }

        if (strcmp(argv[1], "--sleep") == 0 && argc > 2) {
                print_addresses();
                sleep((unsigned) atoi(argv[2]));
                return 0;
        }

        fprintf(stderr, "usage: %s [--print | --wait | --loop | --sleep SECONDS]\n", argv[0]);
        return 2;
}
