/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>

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

/* The oracle's symbol lookup: a defined symbol named name in .symtab or
 * .dynsym, its value and size. Returns false when there is none. */
static inline bool test_elf_find_symbol(Elf *elf, const char *name, uint64_t *ret_value,
                                        uint64_t *ret_size) {
        Elf_Scn *scn = NULL;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;
                Elf_Data *data;

                ASSERT_NOT_NULL(gelf_getshdr(scn, &shdr));
                if (shdr.sh_type != SHT_SYMTAB && shdr.sh_type != SHT_DYNSYM)
                        continue;
                data = elf_getdata(scn, NULL);
                ASSERT_NOT_NULL(data);
                for (size_t i = 0; i < shdr.sh_size / shdr.sh_entsize; i++) {
                        GElf_Sym sym;
                        const char *n;

                        ASSERT_NOT_NULL(gelf_getsym(data, (int) i, &sym));
                        n = elf_strptr(elf, shdr.sh_link, sym.st_name);
                        if (n && streq(n, name) && sym.st_shndx != SHN_UNDEF) {
                                *ret_value = sym.st_value;
                                *ret_size = sym.st_size;
                                return true;
                        }
                }
        }
        return false;
}
