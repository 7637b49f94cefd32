/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libelf.h>

#include "macro.h"

/* elfutils' libelf, opened the one way the readers here use it. */

static inline void elf_endp(Elf **e) {
        if (*e)
                elf_end(*e);
}

/* An Elf* reading the file at fd (mmap()ed, the fd is not kept). -ENOEXEC
 * when libelf refuses it, -EOPNOTSUPP when libelf cannot be initialized. */
static inline int elf_open_fd(int fd, Elf **ret) {
        Elf *elf;

        if (fd < 0 || !ret)
                return -EINVAL;
        if (elf_version(EV_CURRENT) == EV_NONE)
                return -EOPNOTSUPP;
        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (!elf)
                return -ENOEXEC;
        *ret = elf;
        return 0;
}
