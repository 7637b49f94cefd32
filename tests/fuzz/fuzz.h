/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the parser fuzzers share: CHECK() (a failed invariant says which and
 * traps, which libFuzzer reports as a crash with the input), a NUL-terminated copy of the
 * input, and the input as a file (a memfd, named by /proc/self/fd/N) for
 * parsers that read a path or an fd. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHECK(x)                                                                              \
        do {                                                                                  \
                if (!(x)) {                                                                   \
                        fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #x); \
                        __builtin_trap();                                                     \
                }                                                                             \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A malloc()ed NUL-terminated copy of data (which may hold NULs: C string
 * parsers then see the part before the first one). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        CHECK(s);
        memcpy(s, data, size);
        s[size] = 0;
        return s;
}

/* A memfd holding data, its offset at 0. */
static inline int fuzz_memfd(const uint8_t *data, size_t size) {
        int fd = memfd_create("fuzz-input", MFD_CLOEXEC);

        CHECK(fd >= 0);
        for (size_t done = 0; done < size;) {
                ssize_t n = write(fd, data + done, size - done);

                CHECK(n > 0);
                done += (size_t) n;
        }
        CHECK(lseek(fd, 0, SEEK_SET) == 0);
        return fd;
}

/* Whether r is a negative errno. */
static inline bool fuzz_is_errno(int r) {
        return r < 0 && r > -4096;
}
