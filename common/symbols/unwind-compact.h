/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The compact form of an unwind table (bpf/unwind.h: pages of 64 KiB,
 * 4-byte cells, rule ids) made from the builder's rows
 * (unwind-table.h). Pure logic.
 *
 * The rules interner is shared by every table of a process: its ids are
 * never freed, its entries never change once added. One thread adds
 * (unwind_rules_intern()); any may read the first unwind_rules_count()
 * entries meanwhile (they are published with a release store). */

#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "unwind-table.h"

typedef struct UnwindRules UnwindRules;

/* A new interner holding the NONE rule (id 0). */
int unwind_rules_new(UnwindRules **ret);
UnwindRules *unwind_rules_free(UnwindRules *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(UnwindRules *, unwind_rules_free);

/* The id of the rule of row (its cfa_offset, rule, fp_offset; every
 * CGPROF_CFA_NONE row is id 0): -ENOSPC once CGPROF_UNWIND_RULES_MAX are
 * taken. */
int unwind_rules_intern(UnwindRules *r, const struct cgprof_unwind_row *row, uint16_t *ret);
size_t unwind_rules_count(const UnwindRules *r);
const struct cgprof_unwind_rule *unwind_rules_get(const UnwindRules *r, uint16_t id);
/* All of them, the first unwind_rules_count() valid. */
const struct cgprof_unwind_rule *unwind_rules_array(const UnwindRules *r);

typedef struct UnwindCompact {
        uint64_t base; /* the table's base (ELF vaddr of page 0's offset 0) */
        struct cgprof_unwind_page *pages; /* page i covers [base + i * 64 KiB, base + (i + 1) * 64 KiB) */
        size_t n_pages;
        struct cgprof_unwind_cell *cells; /* pages[i].first is an index here */
        size_t n_cells;
} UnwindCompact;

/* Converts t (at least one row) into its compact form, interning its
 * rules in rules. -ENOSPC: the interner is full; -E2BIG: more than 65536
 * pages. Equal neighbours within a page are merged. */
int unwind_compact_build(const UnwindTable *t, UnwindRules *rules, UnwindCompact **ret);
UnwindCompact *unwind_compact_free(UnwindCompact *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(UnwindCompact *, unwind_compact_free);

/* The rule id in force at vaddr (an ELF virtual address of the file): the
 * walker's lookup (page, then a binary search on pc_lo). 0 (NONE) outside
 * the table. Agrees with unwind_table_lookup(): NULL or a NONE row there is
 * id 0, any other row the id of its rule. */
uint16_t unwind_compact_lookup(const UnwindCompact *c, uint64_t vaddr);

/* The last of a page's n cells (n >= 1, sorted, the first at pc_lo 0) whose
 * pc_lo <= pc: the cell in force at pc. */
const struct cgprof_unwind_cell *unwind_cells_find(const struct cgprof_unwind_cell *cells, uint32_t n,
                                                   uint16_t pc);
