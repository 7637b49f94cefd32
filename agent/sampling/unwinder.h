/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>
#include <sys/types.h>

#include "macro.h"
#include "sampler.h"
#include "proc-maps.h"

/* The unwind tables of profiled processes, in the sampler's BPF maps.
 *
 * A table is built once per file (common/symbols/unwind-table.c, from
 * .eh_frame or .debug_frame), keyed by the file's build ID, else by (device,
 * inode, size, mtime), made compact (unwind-compact.h) and written once
 * into the shards (unwind-store.h) however many processes map the file.
 * Builds run on a worker thread, one at a time: a file gets its table id
 * when first seen (its mappings point at it at once) and its entry says
 * "pending" until the build is in; the walker walks such frames as without
 * a table and marks the table wanted, and wanted tables are built first,
 * the others in the order seen. A process's executable mappings go into the mappings map
 * (longest prefix match on pid and address) pointing at their file's table
 * with the load bias; then the process is marked ready, and the BPF walker
 * uses the tables for its samples (before that: frame pointers, counted as
 * pending). Processes are held by the sessions that sample them and
 * forgotten when they exit (a pidfd on the event loop) or when the last
 * session lets go. A table no live process uses stays loaded for a grace
 * period (a process of the same binary often follows), then is freed; when
 * rows run short, unused tables are freed first, and a table that still
 * does not fit is counted and its mappings walked by frame pointer. */

typedef struct Unwinder Unwinder;

typedef struct UnwinderStats {
        size_t processes; /* processes whose mappings are loaded */
        size_t tables; /* tables in the maps */
        size_t tables_unused; /* ... of which no live process uses (or pending) */
        size_t tables_pending; /* waiting for their build, or being built (on the worker) */
        uint64_t tables_wanted; /* built before their turn: a walk met them pending */
        size_t rows_used, rows_max; /* cells (4 bytes each: bpf/unwind.h) used, and the budget */
        size_t shards, shards_max, rules; /* shards created (and the most), distinct rules interned */
        uint64_t bytes_used, bytes_budget; /* the shards' memory, and the budget's */
        uint64_t bytes_fixed; /* the pages and rules maps (allocated at start) */
        uint64_t tables_built, build_usec; /* tables built so far and the time it took (on the worker) */
        uint64_t build_usec_max; /* the longest build */
        uint64_t tables_not_fitted; /* tables that did not fit in the budget */
        uint64_t files_without_table; /* files with no usable .eh_frame/.debug_frame */
        uint64_t files_bad; /* files whose tables had errors (entries skipped, or none usable) */
        uint64_t mapping_entries_failed; /* mapping entries the map refused (full) */
        uint64_t processes_capped; /* processes with more executable mappings than the walker loads */
        uint64_t reloads,
                reloads_unchanged; /* reloads of a process's mappings, and those that found them as they were */
} UnwinderStats;

int unwinder_new(sd_event *event, const SamplerUnwindMaps *maps, Unwinder **ret);
/* /proc/PID/maps through the Manager's cache (see proc-maps.h). */
void unwinder_set_maps_cache(Unwinder *x, ProcMapsCache *c);
Unwinder *unwinder_free(Unwinder *u);
DEFINE_TRIVIAL_CLEANUP_FUNC(Unwinder *, unwinder_free);

/* Takes a reference to the process (pid, start_time as the BPF program
 * sees it) and loads its mappings and their tables. Loading again (after
 * exec(), a dlopen(), ...): unwinder_process_reload(). -ESRCH: gone;
 * -EAGAIN: no executable mapping (a zombie, or in the middle of exec()). */
int unwinder_process_ref(Unwinder *u, pid_t pid, uint64_t start_time);
void unwinder_process_unref(Unwinder *u, pid_t pid, uint64_t start_time);
/* Re-reads the process's mappings (if it is held, and at most once per
 * min_interval_usec). */
int unwinder_process_reload(Unwinder *u, pid_t pid, uint64_t start_time, uint64_t min_interval_usec);

/* How the mapping holding addr in process pid is unwound, for the summary:
 * "eh_frame", "debug_frame", "none" (no table: frame pointers), "anonymous",
 * "error: ...", "not loaded: ...". NULL when unknown. Static or owned by the
 * unwinder until the process goes. */
const char *unwinder_describe(Unwinder *u, pid_t pid, uint64_t addr);

/* The rule (bpf/unwind.h CGPROF_UNWIND_RULE) of the table row covering
 * addr in process pid: -ENOENT when its mapping has no table. */
int unwinder_frame_rule(Unwinder *u, pid_t pid, uint64_t addr, uint8_t *ret_rule);

/* unwinder_describe() of a table still being built (the summary waits for
 * the final word). */
#define UNWINDER_DESCRIBE_PENDING "not loaded yet: the table is being built"

/* Call after each drain: forgets processes that exited two ticks ago and
 * frees tables unused for longer than the grace period. */
void unwinder_tick(Unwinder *u);

void unwinder_stats(const Unwinder *u, UnwinderStats *ret);
