/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <fcntl.h>
#include <libelf.h>

#include "tests.h"

/* An Elf* for a test's own reading of a file: the oracle the code under
 * test is checked against. *ret_fd stays open for the Elf's life. */
static inline Elf *test_elf_open(const char *path, int *ret_fd) {
        Elf *elf;

        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        *ret_fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(*ret_fd >= 0);
        elf = elf_begin(*ret_fd, ELF_C_READ, NULL);
        ASSERT_NOT_NULL(elf);
        return elf;
}
