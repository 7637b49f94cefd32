/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* The symbols of JIT-compiled code, as a runtime announces them (perf maps,
 * jitdump): address ranges with a name, kept as sorted, disjoint segments
 * and looked up by binary search.
 *
 * Entries are added in the order the runtime wrote them, and a later entry
 * wins over an earlier one wherever they overlap: code the runtime moved or
 * recompiled into memory that held other code names the new code. Added
 * entries are pending until jit_map_commit() merges them (O(n log n) over
 * the table; the parsers commit once per chunk they read, not per entry).
 * An entry that no segment uses any more (wholly overwritten) is freed.
 *
 * The table is bounded: at most max_entries live symbols. Entries added
 * beyond that are dropped and counted (jit_map_dropped()). */

#define JIT_MAP_MAX_ENTRIES_DEFAULT (256U * 1024U)
/* Longer names are cut (with no care for UTF-8: the report writers mend it). */
#define JIT_MAP_NAME_MAX 1024U

typedef struct JitMap JitMap;

int jit_map_new(size_t max_entries, JitMap **ret); /* max_entries 0: the default */
JitMap *jit_map_free(JitMap *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(JitMap *, jit_map_free);

/* Adds [start, start + size) named name[0..name_len) (no NUL needed).
 * -EINVAL for size 0, a range past 2^64 or an empty name; -E2BIG when the
 * table is full (the entry is dropped and counted). */
int jit_map_add(JitMap *m, uint64_t start, uint64_t size, const char *name, size_t name_len);
/* JIT_CODE_MOVE: the code at old_start now lives at new_start (same size,
 * same name). -ENOENT when no symbol starts at old_start. Commits. */
int jit_map_move(JitMap *m, uint64_t old_start, uint64_t new_start, uint64_t size);
/* Merges the pending entries into the segments. */
int jit_map_commit(JitMap *m);

/* The symbol holding addr among committed entries, and addr's offset from
 * that symbol's start; NULL when none. The name stays valid until the next
 * jit_map_commit() (or an add/move that commits). */
const char *jit_map_lookup(const JitMap *m, uint64_t addr, uint64_t *ret_offset);

/* Live symbols (committed), and entries dropped because the table was full. */
size_t jit_map_count(const JitMap *m);
uint64_t jit_map_dropped(const JitMap *m);

/* For tests and fuzzers: the i-th segment (sorted, disjoint, non-empty). */
size_t jit_map_segments(const JitMap *m);
int jit_map_segment(const JitMap *m, size_t i, uint64_t *ret_start, uint64_t *ret_end,
                    const char **ret_name);
