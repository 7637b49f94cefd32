/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the compact unwind tables
 * (common/symbols/unwind-compact.c).
 *
 * An input is a list of rows, 5 bytes each: the pc step to the row (18
 * bits, plus 1: the rows are sorted; large steps make pages with no row of
 * their own), the rule (CFA kind, frame pointer kind) and the offsets. The
 * table ends with a NONE row, as the builder's do. The compact table must
 * give the rule unwind_table_lookup() gives at every row and page
 * boundary, one byte either side, and its pages must be well formed.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind-compact.h"

#define CHECK(x)                          \
        do {                              \
                if (!(x))                 \
                        __builtin_trap(); \
        } while (0)

static UnwindRules *rules;

static void check_at(const UnwindTable *t, const UnwindCompact *c, uint64_t vaddr) {
        const struct cgprof_unwind_row *r = unwind_table_lookup(t, vaddr);
        const struct cgprof_unwind_rule *got = unwind_rules_get(rules, unwind_compact_lookup(c, vaddr));

        CHECK(got);
        if (!r || CGPROF_UNWIND_CFA(r->rule) == CGPROF_CFA_NONE) {
                CHECK(got->rule == 0 && got->cfa_offset == 0 && got->fp_offset == 0);
                return;
        }
        CHECK(got->rule == r->rule && got->cfa_offset == r->cfa_offset && got->fp_offset == r->fp_offset);
}

static void check(const UnwindTable *t, const UnwindCompact *c) {
        CHECK(c->base == t->base);
        CHECK(c->n_pages == (t->rows[t->n_rows - 1].pc >> CGPROF_UNWIND_PAGE_SHIFT) + 1);
        for (size_t p = 0; p < c->n_pages; p++) {
                const struct cgprof_unwind_page *pg = &c->pages[p];
                CHECK(pg->n >= 1 && pg->first + pg->n <= c->n_cells);
                CHECK(c->cells[pg->first].pc_lo == 0);
                for (size_t k = 1; k < pg->n; k++)
                        CHECK(c->cells[pg->first + k - 1].pc_lo < c->cells[pg->first + k].pc_lo);
                for (int d = -1; d <= 1; d++)
                        check_at(t, c,
                                 t->base + ((uint64_t) p << CGPROF_UNWIND_PAGE_SHIFT) +
                                         (uint64_t) (int64_t) d);
        }
        for (size_t i = 0; i < t->n_rows; i++)
                for (int d = -1; d <= 1; d++)
                        check_at(t, c, t->base + t->rows[i].pc + (uint64_t) (int64_t) d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t n = size / 5, k = 0;
        struct cgprof_unwind_row *rows = calloc(n + 1, sizeof(*rows));
        UnwindTable t = { .base = 0x400000, .rows = rows };
        UnwindCompact *c = NULL;
        uint64_t pc = 0;
        int r;

        if (!rows)
                return 0;
        if (!rules && unwind_rules_new(&rules) < 0)
                abort();
        for (size_t i = 0; i < n; i++) {
                const uint8_t *b = data + 5 * i;
                uint8_t cfa = b[3] % 8, fp = (b[3] >> 3) % 3; /* any CFA kind, Go's stack switch (7) too */

                if (i > 0)
                        pc += 1 + ((uint64_t) b[0] | (uint64_t) b[1] << 8 | (uint64_t) (b[2] & 3) << 16);
                if (pc > UINT32_MAX - 1)
                        break;
                rows[k++] = (struct cgprof_unwind_row){
                        .pc = (uint32_t) pc,
                        .rule = CGPROF_UNWIND_RULE(cfa, fp),
                        .cfa_offset = cfa == CGPROF_CFA_NONE ? 0 : (uint16_t) (b[4] | (b[2] >> 2) << 8),
                        .fp_offset = (int8_t) (b[4] ^ b[3]),
                };
        }
        /* The closing NONE row. */
        rows[k] = (struct cgprof_unwind_row){ .pc = (uint32_t) (k > 0 ? pc + 1 : 0) };
        k++;
        t.n_rows = k;
        t.end = t.base + rows[k - 1].pc;

        r = unwind_compact_build(&t, rules, &c);
        if (r == -ENOSPC) {
                /* The interner filled up over the runs: start another. */
                CHECK(unwind_rules_count(rules) == CGPROF_UNWIND_RULES_MAX);
                rules = unwind_rules_free(rules);
        } else {
                CHECK(r == 0);
                check(&t, c);
        }
        unwind_compact_free(c);
        free(rows);
        return 0;
}
