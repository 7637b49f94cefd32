/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The compact unwind tables (common/symbols/unwind-compact.c) against the
 * builder's rows they are made from: at every row boundary and page
 * boundary, and one byte either side, the compact lookup must give the
 * rule unwind_table_lookup() gives, for hand-made tables, the fixture, libc
 * and (when python3-torch is installed) libtorch_cpu. And the rules
 * interner: one id per distinct rule, NONE is 0, full at 65536. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests.h"
#include "unwind-compact.h"

/* The rule lookup gives at vaddr, as a rule (NONE: all zero). */
static struct cgprof_unwind_rule ref_rule(const UnwindTable *t, uint64_t vaddr) {
        const struct cgprof_unwind_row *r = unwind_table_lookup(t, vaddr);

        if (!r || CGPROF_UNWIND_CFA(r->rule) == CGPROF_CFA_NONE)
                return (struct cgprof_unwind_rule){};
        return (struct cgprof_unwind_rule){ .cfa_offset = r->cfa_offset,
                                            .rule = r->rule,
                                            .fp_offset = r->fp_offset };
}

static void check_at(const UnwindTable *t, const UnwindCompact *c, const UnwindRules *rules,
                     uint64_t vaddr) {
        struct cgprof_unwind_rule want = ref_rule(t, vaddr);
        const struct cgprof_unwind_rule *got = unwind_rules_get(rules, unwind_compact_lookup(c, vaddr));

        ASSERT_NOT_NULL(got);
        if (got->cfa_offset != want.cfa_offset || got->rule != want.rule ||
            got->fp_offset != want.fp_offset) {
                fprintf(stderr, "at 0x%llx: compact %u/%u/%d, rows %u/%u/%d\n", (unsigned long long) vaddr,
                        got->cfa_offset, got->rule, got->fp_offset, want.cfa_offset, want.rule,
                        want.fp_offset);
                ASSERT_TRUE(false);
        }
}

/* Every row boundary and page boundary, +-1; returns the compact table's size. */
static void check_equal(const UnwindTable *t, UnwindRules *rules, const char *what) {
        _cleanup_(unwind_compact_freep) UnwindCompact *c = NULL;

        ASSERT_OK(unwind_compact_build(t, rules, &c));
        ASSERT_EQ(c->base, t->base);
        for (size_t i = 0; i < t->n_rows; i++)
                for (int d = -1; d <= 1; d++)
                        check_at(t, c, rules, t->base + t->rows[i].pc + (uint64_t) (int64_t) d);
        for (size_t p = 0; p <= c->n_pages; p++) {
                uint64_t a = t->base + ((uint64_t) p << CGPROF_UNWIND_PAGE_SHIFT);
                for (int d = -1; d <= 1; d++)
                        check_at(t, c, rules, a + (uint64_t) (int64_t) d);
                if (p < c->n_pages) {
                        ASSERT_TRUE(c->pages[p].n >= 1);
                        ASSERT_EQ(c->cells[c->pages[p].first].pc_lo, 0);
                        for (size_t k = 1; k < c->pages[p].n; k++) {
                                const struct cgprof_unwind_cell *x = &c->cells[c->pages[p].first + k];
                                ASSERT_TRUE(x[-1].pc_lo < x->pc_lo);
                                ASSERT_TRUE(x[-1].rule_id != x->rule_id);
                        }
                }
        }
        check_at(t, c, rules, 0);
        check_at(t, c, rules, UINT64_MAX);
        fprintf(stderr,
                "%s: %zu rows (8 bytes) -> %zu cells + %zu pages = %.2f bytes per row; %zu rules so far\n",
                what, t->n_rows, c->n_cells, c->n_pages,
                (double) (c->n_cells * sizeof(struct cgprof_unwind_cell) +
                          c->n_pages * sizeof(struct cgprof_unwind_page)) /
                        (double) t->n_rows,
                unwind_rules_count(rules));
}

static void check_file(UnwindRules *rules, const char *path) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return TEST_SKIP("%s: %m", path);
        ASSERT_OK(unwind_table_build_fd(fd, &t));
        check_equal(t, rules, path);
}

#define ROW(p, c, r, f) \
        ((struct cgprof_unwind_row){ .pc = (p), .cfa_offset = (c), .rule = (r), .fp_offset = (f) })
#define SP CGPROF_UNWIND_RULE(CGPROF_CFA_SP, CGPROF_FP_SAME)
#define FPR CGPROF_UNWIND_RULE(CGPROF_CFA_FP, CGPROF_FP_AT_CFA)
#define NONE CGPROF_UNWIND_RULE(CGPROF_CFA_NONE, CGPROF_FP_SAME)

TEST(synthetic) {
        _cleanup_(unwind_rules_freep) UnwindRules *rules = NULL;
        struct cgprof_unwind_row rows[] = {
                ROW(0, 8, SP, 0),          ROW(1, 16, SP, 0),        ROW(4, 16, FPR, -2),
                ROW(0xffff, 8, SP, 0),     ROW(0x10000, 16, SP, 0), /* at a page start */
                ROW(0x10001, 0, NONE, 0),  ROW(0x50000, 8, SP, 0), /* pages with no row of their own */
                ROW(0x5fffe, 16, FPR, -2), ROW(0x70000, 0, NONE, 0),
        };
        UnwindTable t = {
                .base = 0x401000, .end = 0x401000 + 0x70000, .rows = rows, .n_rows = ELEMENTSOF(rows)
        };
        _cleanup_(unwind_compact_freep) UnwindCompact *c = NULL;

        ASSERT_OK(unwind_rules_new(&rules));
        check_equal(&t, rules, "synthetic");
        ASSERT_EQ(unwind_rules_count(rules), 4); /* NONE, sp+8, sp+16, fp+16 */
        ASSERT_OK(unwind_compact_build(&t, rules, &c));
        ASSERT_EQ(c->n_pages, 8);
        /* Page 2 (0x20000-0x2ffff) lies in the NONE gap: one cell. */
        ASSERT_EQ(c->pages[2].n, 1);
        ASSERT_EQ(c->cells[c->pages[2].first].rule_id, 0);
        /* The last page holds the closing NONE row only. */
        ASSERT_EQ(c->pages[7].n, 1);
        /* Building again interns nothing new. */
        check_equal(&t, rules, "synthetic again");
        ASSERT_EQ(unwind_rules_count(rules), 4);
}

TEST(rules_interner) {
        _cleanup_(unwind_rules_freep) UnwindRules *rules = NULL;
        uint16_t id, id2;

        ASSERT_OK(unwind_rules_new(&rules));
        ASSERT_EQ(unwind_rules_count(rules), 1);
        ASSERT_OK(unwind_rules_intern(rules, &ROW(123, 77, NONE, 3), &id));
        ASSERT_EQ(id, 0);
        ASSERT_OK(unwind_rules_intern(rules, &ROW(0, 8, SP, 0), &id));
        ASSERT_OK(unwind_rules_intern(rules, &ROW(999, 8, SP, 0), &id2));
        ASSERT_EQ(id, 1);
        ASSERT_EQ(id2, 1);
        ASSERT_OK(unwind_rules_intern(rules, &ROW(0, 8, SP, -1), &id2));
        ASSERT_EQ(id2, 2);
        /* Fill it: 65536 ids in all, then -ENOSPC; the known ones still work. */
        for (uint32_t k = 0; unwind_rules_count(rules) < CGPROF_UNWIND_RULES_MAX; k++)
                ASSERT_OK(
                        unwind_rules_intern(rules, &ROW(0, (uint16_t) k, FPR, (int8_t) (k >> 16) + 1), &id));
        ASSERT_EQ(unwind_rules_intern(rules, &ROW(0, 5, FPR, 100), &id), -ENOSPC);
        ASSERT_OK(unwind_rules_intern(rules, &ROW(0, 8, SP, 0), &id));
        ASSERT_EQ(id, 1);
}

TEST(fixture) {
        _cleanup_(unwind_rules_freep) UnwindRules *rules = NULL;
        const char *p = getenv("CGPROF_UNWIND_TABLE_FIXTURE_NOFP");

        if (!p)
                return TEST_SKIP("CGPROF_UNWIND_TABLE_FIXTURE_NOFP not set");
        ASSERT_OK(unwind_rules_new(&rules));
        check_file(rules, p);
}

TEST(libc) {
        _cleanup_(unwind_rules_freep) UnwindRules *rules = NULL;

        ASSERT_OK(unwind_rules_new(&rules));
        check_file(rules, "/lib/x86_64-linux-gnu/libc.so.6");
}

TEST(libtorch_cpu) {
        _cleanup_(unwind_rules_freep) UnwindRules *rules = NULL;

        ASSERT_OK(unwind_rules_new(&rules));
        check_file(rules, "/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so");
}

DEFINE_TEST_MAIN
