/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the ELF symbol reader (common/symbols/elf-symtab.c,
 * with .gopclntab and MiniDebugInfo behind it) as the agent uses it: on a file
 * descriptor (a memfd here, mapped by libelf as a binary on disk is).
 *
 * The input is an ELF file, malformed or truncated. It loads or fails with
 * a negative errno. A table says where its symbols came from, has a
 * lowercase hex build ID or none, and its lookups (names, frames, file
 * offsets to addresses) stay within it; loaded from memory instead (as the
 * vDSO is), the file gives the same build ID and symbol count.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <ctype.h>

#include "elf-symtab.h"
#include "fuzz.h"

static void check_table(const ElfSymtab *s, const uint8_t *data, size_t size) {
        ElfFrame frames[ELF_FRAMES_MAX];
        const char *id = elf_symtab_build_id(s);
        uint64_t off, vaddr;

        CHECK(elf_symbols_source_to_string(elf_symtab_symbols_source(s)));
        CHECK((elf_symtab_count(s) == 0) == (elf_symtab_symbols_source(s) == ELF_SYMBOLS_NONE));
        CHECK(elf_symtab_minidebuginfo_error(s) <= 0 && elf_symtab_gopclntab_error(s) <= 0);
        if (id) {
                CHECK(id[0]);
                for (const char *p = id; *p; p++)
                        CHECK(isxdigit((unsigned char) *p) && !isupper((unsigned char) *p));
        }
        if (elf_symtab_go_version(s))
                CHECK(strlen(elf_symtab_go_version(s)) < 4096);

        /* Addresses near 0 and near the usual text of executables and
         * libraries, and addresses taken from the input. */
        for (uint64_t a = 0; a < 0x3000; a += 61) {
                uint64_t bases[] = { 0, 0x400000, 0x401000 };

                for (size_t b = 0; b < ELEMENTSOF(bases); b++) {
                        const char *name = elf_symtab_lookup(s, bases[b] + a, &off);
                        size_t n;

                        if (name)
                                CHECK(off <= bases[b] + a && strlen(name) < 1U << 20);
                        n = elf_symtab_lookup_frames(s, bases[b] + a, frames, ELF_FRAMES_MAX);
                        CHECK(n <= ELF_FRAMES_MAX);
                        for (size_t i = 0; i < n; i++)
                                CHECK(frames[i].name && frames[i].offset <= bases[b] + a);
                        CHECK(elf_symtab_lookup_frames(s, bases[b] + a, frames, 1) <= 1);
                }
        }
        for (size_t i = 0; i + 8 <= size && i < 32 * 8; i += 8) {
                uint64_t a;

                memcpy(&a, data + i, 8);
                if (elf_symtab_lookup(s, a, &off))
                        CHECK(off <= a);
                CHECK(elf_symtab_lookup_frames(s, a, frames, ELF_FRAMES_MAX) <= ELF_FRAMES_MAX);
                (void) elf_symtab_offset_to_vaddr(s, a, &vaddr);
        }
        for (uint64_t o = 0; o < 0x3000; o += 0x400)
                (void) elf_symtab_offset_to_vaddr(s, o, &vaddr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(elf_symtab_freep) ElfSymtab *s = NULL, *m = NULL;
        _cleanup_close_ int fd = fuzz_memfd(data, size);
        int r, rm;

        r = elf_symtab_load(fd, &s);
        if (r < 0)
                CHECK(fuzz_is_errno(r) && !s);
        else {
                CHECK(s);
                check_table(s, data, size);
        }

        if (size == 0)
                return 0;
        rm = elf_symtab_load_memory(data, size, &m);
        if (rm < 0)
                CHECK(fuzz_is_errno(rm) && !m);
        else {
                CHECK(m);
                check_table(m, data, size);
        }
        if (r == 0 && rm == 0) {
                const char *a = elf_symtab_build_id(s), *b = elf_symtab_build_id(m);

                CHECK(!a == !b && (!a || strcmp(a, b) == 0));
                CHECK(elf_symtab_count(s) == elf_symtab_count(m));
                CHECK(elf_symtab_symbols_source(s) == elf_symtab_symbols_source(m));
        }
        return 0;
}
