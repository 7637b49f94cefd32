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
 * by function index; their strings must lie inside the input. */
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
        gopclntab_free(t);
        return 0;
}
