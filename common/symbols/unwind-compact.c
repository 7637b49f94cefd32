/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unwind-compact.h"

#define PAGE_SIZE_PC (UINT64_C(1) << CGPROF_UNWIND_PAGE_SHIFT)
#define PAGES_MAX (UINT64_C(1) << (32 - CGPROF_UNWIND_PAGE_SHIFT))
#define HASH_SLOTS (2 * CGPROF_UNWIND_RULES_MAX) /* a power of two, at most half full */

struct UnwindRules {
        struct cgprof_unwind_rule rules[CGPROF_UNWIND_RULES_MAX];
        size_t n; /* published with a release store */
        /* Open addressing on the packed rule: id + 1, 0 for an empty slot. */
        uint32_t slots[HASH_SLOTS];
};

static uint32_t rule_pack(const struct cgprof_unwind_rule *r) {
        return (uint32_t) r->cfa_offset | (uint32_t) r->rule << 16 | (uint32_t) (uint8_t) r->fp_offset << 24;
}

static uint32_t rule_hash(uint32_t k) {
        k ^= k >> 16;
        k *= 0x7feb352dU;
        k ^= k >> 15;
        k *= 0x846ca68bU;
        k ^= k >> 16;
        return k;
}

int unwind_rules_new(UnwindRules **ret) {
        UnwindRules *r = calloc(1, sizeof(*r));

        if (!r)
                return -ENOMEM;
        /* Id 0: NONE, all zero (never in the hash: NONE rows are mapped
         * to it before the lookup). */
        r->n = 1;
        *ret = r;
        return 0;
}

UnwindRules *unwind_rules_free(UnwindRules *r) {
        free(r);
        return NULL;
}

int unwind_rules_intern(UnwindRules *r, const struct cgprof_unwind_row *row, uint16_t *ret) {
        struct cgprof_unwind_rule v = {
                .cfa_offset = row->cfa_offset,
                .rule = row->rule,
                .fp_offset = row->fp_offset,
        };
        uint32_t k, h;

        if (CGPROF_UNWIND_CFA(row->rule) == CGPROF_CFA_NONE) {
                *ret = CGPROF_UNWIND_RULE_NONE_ID;
                return 0;
        }
        k = rule_pack(&v);
        for (h = rule_hash(k) & (HASH_SLOTS - 1);; h = (h + 1) & (HASH_SLOTS - 1)) {
                uint32_t s = r->slots[h];
                if (s == 0)
                        break;
                if (rule_pack(&r->rules[s - 1]) == k) {
                        *ret = (uint16_t) (s - 1);
                        return 0;
                }
        }
        if (r->n >= CGPROF_UNWIND_RULES_MAX)
                return -ENOSPC;
        r->rules[r->n] = v;
        r->slots[h] = (uint32_t) r->n + 1;
        *ret = (uint16_t) r->n;
        __atomic_store_n(&r->n, r->n + 1, __ATOMIC_RELEASE);
        return 0;
}

size_t unwind_rules_count(const UnwindRules *r) {
        return __atomic_load_n(&r->n, __ATOMIC_ACQUIRE);
}

const struct cgprof_unwind_rule *unwind_rules_get(const UnwindRules *r, uint16_t id) {
        return id < unwind_rules_count(r) ? &r->rules[id] : NULL;
}

const struct cgprof_unwind_rule *unwind_rules_array(const UnwindRules *r) {
        return r->rules;
}

/* ---- tables ---- */

UnwindCompact *unwind_compact_free(UnwindCompact *c) {
        if (!c)
                return NULL;
        free(c->pages);
        free(c->cells);
        free(c);
        return NULL;
}

/* Appends the cell (pc_lo, id) to the page begun at cell first: merged
 * with the one before when equal, replacing it at the same pc_lo. */
static void cell_add(UnwindCompact *c, size_t first, uint16_t pc_lo, uint16_t id) {
        if (c->n_cells > first) {
                struct cgprof_unwind_cell *last = &c->cells[c->n_cells - 1];
                if (last->rule_id == id)
                        return;
                if (last->pc_lo == pc_lo) {
                        last->rule_id = id;
                        /* Now perhaps equal to the one before it. */
                        if (c->n_cells - 1 > first && c->cells[c->n_cells - 2].rule_id == id)
                                c->n_cells--;
                        return;
                }
        }
        c->cells[c->n_cells++] = (struct cgprof_unwind_cell){ .pc_lo = pc_lo, .rule_id = id };
}

int unwind_compact_build(const UnwindTable *t, UnwindRules *rules, UnwindCompact **ret) {
        _cleanup_(unwind_compact_freep) UnwindCompact *c = NULL;
        uint16_t *ids = NULL;
        uint16_t in_force = CGPROF_UNWIND_RULE_NONE_ID;
        size_t i = 0;
        int r = 0;

        if (!t->rows || t->n_rows == 0)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->base = t->base;
        c->n_pages = ((uint64_t) t->rows[t->n_rows - 1].pc >> CGPROF_UNWIND_PAGE_SHIFT) + 1;
        if (c->n_pages > PAGES_MAX)
                return -E2BIG;
        ids = malloc(t->n_rows * sizeof(*ids));
        c->pages = calloc(c->n_pages, sizeof(*c->pages));
        /* At most one cell per row, plus the first of each page. */
        c->cells = malloc((t->n_rows + c->n_pages) * sizeof(*c->cells));
        if (!ids || !c->pages || !c->cells) {
                free(ids);
                return -ENOMEM;
        }
        for (size_t k = 0; k < t->n_rows && r >= 0; k++)
                r = unwind_rules_intern(rules, &t->rows[k], &ids[k]);
        if (r < 0) {
                free(ids);
                return r;
        }

        for (size_t p = 0; p < c->n_pages; p++) {
                uint64_t start = (uint64_t) p << CGPROF_UNWIND_PAGE_SHIFT, end = start + PAGE_SIZE_PC;
                size_t first = c->n_cells;

                /* The rule in force at the page's start. */
                while (i < t->n_rows && t->rows[i].pc <= start)
                        in_force = ids[i++];
                cell_add(c, first, 0, in_force);
                while (i < t->n_rows && t->rows[i].pc < end) {
                        in_force = ids[i];
                        cell_add(c, first, (uint16_t) (t->rows[i].pc - start), in_force);
                        i++;
                }
                c->pages[p] = (struct cgprof_unwind_page){ .first = (uint32_t) first,
                                                           .n = (uint32_t) (c->n_cells - first) };
        }
        free(ids);
        *ret = TAKE_PTR(c);
        return 0;
}

uint16_t unwind_compact_lookup(const UnwindCompact *c, uint64_t vaddr) {
        uint64_t rel, p;
        uint16_t pc;

        if (vaddr < c->base)
                return CGPROF_UNWIND_RULE_NONE_ID;
        rel = vaddr - c->base;
        p = rel >> CGPROF_UNWIND_PAGE_SHIFT;
        if (p >= c->n_pages || c->pages[p].n == 0)
                return CGPROF_UNWIND_RULE_NONE_ID;
        pc = (uint16_t) (rel & (PAGE_SIZE_PC - 1));
        return unwind_cells_find(c->cells + c->pages[p].first, c->pages[p].n, pc)->rule_id;
}

const struct cgprof_unwind_cell *unwind_cells_find(const struct cgprof_unwind_cell *cells, uint32_t n,
                                                   uint16_t pc) {
        uint32_t lo = 0, hi = n;

        /* The last cell whose pc_lo <= pc (cell 0's is 0). */
        while (hi - lo > 1) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (cells[mid].pc_lo <= pc)
                        lo = mid;
                else
                        hi = mid;
        }
        return &cells[lo];
}
