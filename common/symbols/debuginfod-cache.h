/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "macro.h"

/* The disk cache of debug files fetched from debuginfod servers, in
 * libdebuginfod's own layout (DEBUGINFOD_CACHE_PATH): <cache>/<build ID>/
 * holds "debuginfo" (an empty one is a negative entry: no server had it,
 * asked at its mtime), and libdebuginfod keeps its settings in files at the
 * top (cache_miss_s, max_unused_age_s, cache_clean_interval_s).
 * libdebuginfod drops files unused for a week but bounds no size: this
 * bounds it, least recently used first. "Used" is the atime, which the
 * agent sets whenever it opens a debug file there. Pure file work on a
 * directory fd: no daemon state. */

/* Whether s is a build ID as the cache names it: lowercase hex, an even
 * number of 2..128 digits (the cache directory's name; never "..", "/"). */
bool debuginfod_build_id_valid(const char *s);

typedef struct DebuginfodCacheFile {
        const char *name; /* "<build ID>/debuginfo"; only for ties and messages */
        uint64_t size;
        uint64_t last_use_nsec; /* atime */
} DebuginfodCacheFile;

/* Chooses which files to delete so that the others add up to at most
 * max_bytes: least recently used first (ties: by name). Empty files (the
 * negative entries) take no room and are never chosen. *ret (malloc()ed,
 * NULL when *ret_n is 0) lists their indices in deletion order. */
int debuginfod_cache_prune_plan(const DebuginfodCacheFile *files, size_t n, uint64_t max_bytes, size_t **ret,
                                size_t *ret_n);

typedef struct DebuginfodCachePruneResult {
        size_t files; /* regular files found below build-ID directories */
        uint64_t bytes; /* their size before */
        size_t removed;
        uint64_t removed_bytes;
} DebuginfodCachePruneResult;

/* Applies the plan to the cache at dir_fd: only regular files directly
 * below directories named like build IDs are considered (the settings
 * files, anything else, and symlinks are left alone); build-ID directories
 * left empty go too. */
int debuginfod_cache_prune(int dir_fd, uint64_t max_bytes, DebuginfodCachePruneResult *ret);
