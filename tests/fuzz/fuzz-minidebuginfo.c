/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the MiniDebugInfo path of common/symbols/elf-symtab.c.
 *
 * An input is either
 *  - a whole ELF file (it starts with \177ELF), loaded with
 *    elf_symtab_load_memory(): without .symtab, its .gnu_debugdata is
 *    decompressed and its .symtab read; or
 *  - anything else, taken as the contents of a .gnu_debugdata section:
 *    decompressed within the bound a real section of that size gets, and
 *    the result loaded as an ELF file.
 * Lookups across every table built must stay within it; a violation traps.
 * Built by tests/fuzz/meson.build with clang
 * -fsanitize=fuzzer,address,undefined. */
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf-symtab.h"

#define CHECK(x)                          \
        do {                              \
                if (!(x))                 \
                        __builtin_trap(); \
        } while (0)

static void load(const void *image, size_t size) {
        ElfSymtab *s = NULL;
        uint64_t off;

        if (elf_symtab_load_memory(image, size, &s) < 0) {
                CHECK(!s);
                return;
        }
        CHECK(elf_symbols_source_to_string(elf_symtab_symbols_source(s)));
        CHECK(elf_symtab_minidebuginfo_error(s) <= 0);
        CHECK((elf_symtab_count(s) == 0) == (elf_symtab_symbols_source(s) == ELF_SYMBOLS_NONE));
        for (uint64_t a = 0; a < 0x4000; a += 61) {
                const char *name = elf_symtab_lookup(s, a, &off);
                if (name)
                        CHECK(off <= a && strlen(name) < 1U << 20);
        }
        elf_symtab_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        void *out = NULL;
        size_t out_size = 0;
        int r;

        if (size >= 4 && memcmp(data, "\177ELF", 4) == 0) {
                load(data, size);
                return 0;
        }

        r = elf_minidebuginfo_decompress(data, size, elf_minidebuginfo_max_size(size), &out, &out_size);
        if (r < 0) {
                CHECK(!out);
                return 0;
        }
        CHECK(out_size <= elf_minidebuginfo_max_size(size));
        if (out_size > 0)
                load(out, out_size);
        free(out);
        return 0;
}
