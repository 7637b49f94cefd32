/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for common/symbols/gopclntab.c, the reader of Go's
 * .gopclntab.
 *
 * An input is either
 *  - a whole ELF file (it starts with \177ELF): gopclntab_load() from
 *    elf_memory(), which finds the table, the moduledata and .go.buildinfo;
 *  - a .go.buildinfo section (it starts with "\xff Go buildinf:");
 *  - anything else, the raw form make-corpus.py --gopclntab writes: the
 *    table's address, go:func.*'s address and the address of a region of
 *    read-only data (8 bytes each, little endian), the table's size (4
 *    bytes), the table, then the region (where inline trees are read).
 * Every table built is probed with lookups across the functions' range and
 * by function index; their strings must lie inside the input. The pcsp
 * reader and the unwind rows built from it (go-unwind.c) are checked too:
 * runs in order inside their function, rows sorted and well-formed. */
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "go-unwind.h"
#include "gopclntab.h"

#define CHECK(x)                          \
        do {                              \
                if (!(x))                 \
                        __builtin_trap(); \
        } while (0)

static bool inside(const char *s, const void *buf, size_t size) {
        return !s || ((const uint8_t *) s >= (const uint8_t *) buf &&
                      (const uint8_t *) s + strlen(s) < (const uint8_t *) buf + size);
}

static void probe(const GoPclntab *t, const void *buf, size_t size) {
        uint64_t lo = 0, hi = 0, entry, end;
        const char *name;
        size_t n = gopclntab_count(t);

        for (size_t i = 0; i < n && i < 64; i++)
                if (gopclntab_function(t, i, &entry, &end, &name) >= 0)
                        CHECK(!buf || inside(name, buf, size));
        if (n == 0 || gopclntab_function(t, 0, &lo, NULL, NULL) < 0 ||
            gopclntab_function(t, n - 1, NULL, &hi, NULL) < 0 || hi <= lo)
                return;
        for (unsigned k = 0; k < 256; k++) {
                GoFrame f[8];
                size_t m = 0;
                uint64_t pc = lo + (hi - lo) / 256 * k + k % 7;

                if (gopclntab_lookup(t, pc, f, k % 2 ? 8 : 1, &m) < 0)
                        continue;
                CHECK(m >= 1 && m <= 8);
                for (size_t j = 0; j < m; j++) {
                        CHECK(f[j].function);
                        CHECK(!buf || inside(f[j].function, buf, size));
                        CHECK(!buf || inside(f[j].file, buf, size));
                        CHECK(f[j].inlined == (j + 1 < m) || m == 1);
                }
        }
}

/* A table's rows: sorted, no equal neighbours, known rules, a NONE row at
 * the end, lookups finding each. */
static void check_rows(const UnwindTable *u) {
        CHECK(u->n_rows >= 2);
        CHECK(u->rows[0].pc == 0 && u->rows[u->n_rows - 1].pc == u->end - u->base);
        CHECK(CGPROF_UNWIND_CFA(u->rows[u->n_rows - 1].rule) == CGPROF_CFA_NONE);
        for (size_t i = 1; i < u->n_rows; i++) {
                const struct cgprof_unwind_row *p = &u->rows[i - 1], *r = &u->rows[i];

                CHECK(p->pc < r->pc);
                CHECK(!(p->rule == r->rule && p->cfa_offset == r->cfa_offset &&
                        p->fp_offset == r->fp_offset));
                CHECK(CGPROF_UNWIND_CFA(r->rule) <= CGPROF_CFA_UNSUPPORTED ||
                      CGPROF_UNWIND_CFA(r->rule) == CGPROF_CFA_FP_STACK_SWITCH);
                CHECK(CGPROF_UNWIND_FP(r->rule) <= CGPROF_FP_UNKNOWN);
                CHECK(unwind_table_lookup(u, u->base + r->pc) == (i + 1 < u->n_rows ? r : NULL));
        }
}

/* The pcsp reader: runs in order, contiguous, inside the function, in
 * bounded steps; and the unwind rows built from them: sorted, no equal
 * neighbours, a NONE row at the end. */
static void probe_unwind(const GoPclntab *t, const GoRegion *code, size_t n_code, size_t size) {
        UnwindTable *u = NULL;
        size_t n = gopclntab_count(t);

        for (size_t i = 0; i < n && i < 256; i++) {
                uint64_t s, e, prev;
                GoPcValueIter it;
                GoFuncInfo fn;
                int32_t v;
                int r;

                if (gopclntab_func_info(t, i, &fn) < 0)
                        continue;
                CHECK(fn.entry <= fn.end && fn.name);
                if (gopclntab_pcsp_begin(t, &fn, &it) < 0)
                        continue;
                prev = fn.entry;
                while ((r = gopclntab_pcvalue_next(&it, &s, &e, &v)) > 0) {
                        CHECK(s == prev && s < e && e <= fn.end);
                        prev = e;
                }
                CHECK(r == 0 || r == -EBADMSG);
                CHECK(it.steps <= size / 2 + 1);
        }

        if (go_unwind_rows(t, code, n_code, &u) < 0) {
                CHECK(!u);
                return;
        }
        CHECK(u->source == UNWIND_SOURCE_GOPCLNTAB);
        check_rows(u);
        unwind_table_free(u);
}

static uint64_t le64(const uint8_t *p) {
        uint64_t v = 0;

        for (int i = 7; i >= 0; i--)
                v = v << 8 | p[i];
        return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        GoPclntab *t = NULL;

        if (size >= 4 && memcmp(data, "\177ELF", 4) == 0) {
                void *copy = malloc(size);
                Elf *elf;

                if (!copy || elf_version(EV_CURRENT) == EV_NONE) {
                        free(copy);
                        return 0;
                }
                memcpy(copy, data, size);
                elf = elf_memory(copy, size);
                if (elf && gopclntab_load(elf, -1, &t) >= 0) {
                        const char *v = gopclntab_go_version(t);

                        CHECK(!v || strlen(v) <= 128);
                        probe(t, NULL, 0); /* strings are in the table's own copy */
                        gopclntab_free(t);
                } else
                        CHECK(!t);
                /* The unwind rows of the file, its code recognized, alone
                 * and merged with its CFI (cgo). */
                if (elf) {
                        UnwindTable *u = NULL;

                        if (go_unwind_build_elf(elf, &u) >= 0) {
                                check_rows(u);
                                unwind_table_free(u);
                                u = NULL;
                        } else
                                CHECK(!u);
                        if (unwind_table_build_elf(elf, &u) >= 0) {
                                check_rows(u);
                                unwind_table_free(u);
                        } else
                                CHECK(!u);
                }
                if (elf)
                        elf_end(elf);
                free(copy);
                return 0;
        }

        if (size >= 14 && memcmp(data, "\xff Go buildinf:", 14) == 0) {
                char *v = NULL;
                GoRegion r = { .vaddr = 0x1000, .data = data, .size = size };

                if (gopclntab_parse_buildinfo(data, size, &r, 1, &v) >= 0)
                        CHECK(v && strlen(v) <= 128);
                else
                        CHECK(!v);
                free(v);
                return 0;
        }

        if (size < 28)
                return 0;
        uint32_t n = (uint32_t) data[24] | (uint32_t) data[25] << 8 | (uint32_t) data[26] << 16 |
                     (uint32_t) data[27] << 24;
        if (n > size - 28)
                n = (uint32_t) (size - 28);
        GoRegion region = { .vaddr = le64(data + 16), .data = data + 28 + n, .size = size - 28 - n };
        if (gopclntab_new(
                    &(GoPclntabImage){
                            .pclntab = data + 28,
                            .pclntab_size = n,
                            .pclntab_vaddr = le64(data),
                            .gofunc = le64(data + 8),
                            .regions = &region,
                            .n_regions = 1,
                    },
                    &t) < 0) {
                CHECK(!t);
                return 0;
        }
        probe(t, data + 28, n);
        /* The region doubles as code, where prologues are recognized. */
        probe_unwind(t, &region, 1, n);
        gopclntab_free(t);
        return 0;
}
