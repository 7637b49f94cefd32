/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Where the compact unwind tables live in the sampler's maps
 * (bpf/unwind.h, bpf/profile.h): their cells in shards (inner arrays of the
 * unwind_shards map of maps, created as tables come and released once
 * empty, up to the budget of cells), their pages in the pages map, the
 * rules they use in the rules map; all written through mmap(). Free space:
 * first fit over the free extents of each shard, and of the pages map. A
 * page's cells are never split between two shards; a table's pages may be
 * in several. Event loop only. */

#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "sampler.h"
#include "unwind-compact.h"

typedef struct UnwindStore UnwindStore;

typedef struct UnwindStoreExtent {
        uint32_t shard, start, len;
} UnwindStoreExtent;

/* A table in the store: what to release. */
typedef struct UnwindPlacement {
        uint32_t first_page, n_pages;
        UnwindStoreExtent *extents; /* of its cells */
        size_t n_extents;
        size_t n_cells;
} UnwindPlacement;

typedef struct UnwindStoreStats {
        size_t cells_used, cells_max; /* the budget */
        size_t shards, shards_max, shard_cells;
        size_t pages_used, pages_max;
        size_t rules; /* rules written (interned so far) */
        uint64_t bytes_used; /* the shards' memory */
        uint64_t bytes_budget; /* cells_max * 4 */
        uint64_t bytes_fixed; /* the pages and rules maps, allocated at load */
} UnwindStoreStats;

int unwind_store_new(const SamplerUnwindMaps *maps, UnwindStore **ret);
UnwindStore *unwind_store_free(UnwindStore *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(UnwindStore *, unwind_store_free);

/* Writes table c into the store: the rules interned so far (those c uses
 * among them) first, then its cells and pages. -ENOSPC: the budget, the
 * shards or the pages map cannot take it (nothing is kept). */
int unwind_store_put(UnwindStore *s, const UnwindCompact *c, const UnwindRules *rules, UnwindPlacement *ret);
/* Gives a table's space back (a shard left empty is released). */
void unwind_store_release(UnwindStore *s, UnwindPlacement *p);

/* The rule of the table at p at offset rel from its base, read back from
 * the maps (what the walker finds): -ENOENT outside it. */
int unwind_store_rule(const UnwindStore *s, const UnwindPlacement *p, uint32_t rel,
                      struct cgprof_unwind_rule *ret);

void unwind_store_stats(const UnwindStore *s, UnwindStoreStats *ret);
