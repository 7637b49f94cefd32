/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the unwind-table builder
 * (common/symbols/unwind-table.c).
 *
 * An input is either
 *  - a whole ELF file (it starts with \177ELF), opened with elf_memory(), or
 *  - anything else: byte 0 picks the section ('D' .debug_frame, else
 *    .eh_frame), bytes 1-8 its address (little endian), the rest its
 *    contents, wrapped here into a minimal x86-64 ELF file (with a .got for
 *    DW_EH_PE_datarel). Most mutations of a whole file break the ELF
 *    headers or touch bytes that are not CFI: this form spends the effort
 *    on the parser itself.
 * Every table built is checked (sorted rows, no equal neighbours, the NONE
 * row at the end, lookups in range) and a violation traps. Built by
 * tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <elf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind-table.h"

#define CHECK(x)                          \
        do {                              \
                if (!(x))                 \
                        __builtin_trap(); \
        } while (0)

static void check_table(const UnwindTable *t) {
        CHECK(t->n_rows >= 2 && t->n_rows <= UNWIND_TABLE_ROWS_MAX);
        CHECK(t->end > t->base && t->end - t->base <= UINT32_MAX);
        CHECK(t->rows[0].pc == 0);
        CHECK(t->rows[t->n_rows - 1].pc == t->end - t->base);
        CHECK(t->rows[t->n_rows - 1].rule == CGPROF_UNWIND_RULE(CGPROF_CFA_NONE, CGPROF_FP_SAME));
        CHECK(t->stats.n_rows_raw >= t->n_rows);
        CHECK(t->stats.n_unsupported_rows <= t->n_rows);
        for (size_t i = 0; i < t->n_rows; i++) {
                const struct cgprof_unwind_row *r = &t->rows[i];

                CHECK(CGPROF_UNWIND_CFA(r->rule) <= CGPROF_CFA_SIGNAL ||
                      CGPROF_UNWIND_CFA(r->rule) == CGPROF_CFA_FP_STACK_SWITCH);
                /* A signal frame row says nothing but its rule: the walker reads the ucontext. */
                CHECK(CGPROF_UNWIND_CFA(r->rule) != CGPROF_CFA_SIGNAL ||
                      (r->cfa_offset == 0 && r->fp_offset == 0));
                CHECK(CGPROF_UNWIND_FP(r->rule) <= CGPROF_FP_UNKNOWN);
                if (i > 0) {
                        const struct cgprof_unwind_row *p = &t->rows[i - 1];

                        CHECK(p->pc < r->pc);
                        CHECK(!(p->rule == r->rule && p->cfa_offset == r->cfa_offset &&
                                p->fp_offset == r->fp_offset));
                        /* The row before holds up to here. */
                        CHECK(unwind_table_lookup(t, t->base + r->pc - 1) == p);
                }
                CHECK(unwind_table_lookup(t, t->base + r->pc) == (i + 1 < t->n_rows ? r : NULL));
        }
        CHECK(!unwind_table_lookup(t, t->base - 1));
}

static void run(char *image, size_t size) {
        UnwindTable *t = NULL;
        Elf *elf;
        int r;

        elf = elf_memory(image, size);
        if (!elf)
                return;
        r = unwind_table_build_elf(elf, &t);
        CHECK(r < 0 ? t == NULL : t != NULL);
        if (t) {
                CHECK(t->source >= UNWIND_SOURCE_EH_FRAME &&
                      t->source <= UNWIND_SOURCE_GOPCLNTAB_DEBUG_FRAME);
                check_table(t);
                unwind_table_free(t);
        }
        elf_end(elf);
}

/* A minimal ELF64 x86-64 file around one CFI section (and .got). */
static char *wrap(const uint8_t *data, size_t size, size_t *ret_size) {
        static const char shstrtab[] = "\0.eh_frame\0.debug_frame\0.got\0.shstrtab";
        const bool debug = data[0] == 'D';
        uint64_t addr = 0;
        size_t n = size - 9, off_sec, off_str, off_sh, total;
        Elf64_Ehdr *eh;
        Elf64_Shdr *sh;
        char *img;

        for (int i = 0; i < 8; i++)
                addr |= (uint64_t) data[1 + i] << (8 * i);

        off_sec = sizeof(Elf64_Ehdr);
        off_str = off_sec + n;
        off_sh = (off_str + sizeof(shstrtab) + 7) & ~(size_t) 7;
        total = off_sh + 4 * sizeof(Elf64_Shdr);
        img = calloc(1, total);
        if (!img)
                return NULL;

        eh = (Elf64_Ehdr *) img;
        memcpy(eh->e_ident, ELFMAG, SELFMAG);
        eh->e_ident[EI_CLASS] = ELFCLASS64;
        eh->e_ident[EI_DATA] = ELFDATA2LSB;
        eh->e_ident[EI_VERSION] = EV_CURRENT;
        eh->e_type = ET_DYN;
        eh->e_machine = EM_X86_64;
        eh->e_version = EV_CURRENT;
        eh->e_ehsize = sizeof(Elf64_Ehdr);
        eh->e_shentsize = sizeof(Elf64_Shdr);
        eh->e_shnum = 4;
        eh->e_shstrndx = 3;
        eh->e_shoff = off_sh;

        memcpy(img + off_sec, data + 9, n);
        memcpy(img + off_str, shstrtab, sizeof(shstrtab));
        sh = (Elf64_Shdr *) (img + off_sh);
        sh[1] = (Elf64_Shdr){
                .sh_name = debug ? 11 : 1,
                .sh_type = SHT_PROGBITS,
                .sh_flags = debug ? 0 : SHF_ALLOC,
                .sh_addr = debug ? 0 : addr,
                .sh_offset = off_sec,
                .sh_size = n,
                .sh_addralign = 1,
        };
        sh[2] = (Elf64_Shdr){
                .sh_name = 24,
                .sh_type = SHT_PROGBITS,
                .sh_flags = SHF_ALLOC | SHF_WRITE,
                .sh_addr = addr + 0x100000,
                .sh_offset = off_str,
                .sh_size = 0,
                .sh_addralign = 1,
        };
        sh[3] = (Elf64_Shdr){
                .sh_name = 29,
                .sh_type = SHT_STRTAB,
                .sh_offset = off_str,
                .sh_size = sizeof(shstrtab),
                .sh_addralign = 1,
        };
        *ret_size = total;
        return img;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static bool initialized = false;
        size_t image_size;
        char *image;

        if (!initialized) {
                if (elf_version(EV_CURRENT) == EV_NONE)
                        abort();
                initialized = true;
        }

        if (size >= SELFMAG && memcmp(data, ELFMAG, SELFMAG) == 0) {
                /* elf_memory() wants a writable image of its own. */
                image = malloc(size);
                if (!image)
                        return 0;
                memcpy(image, data, size);
                image_size = size;
        } else {
                if (size < 9)
                        return 0;
                image = wrap(data, size, &image_size);
                if (!image)
                        return 0;
        }
        run(image, image_size);
        free(image);
        return 0;
}
