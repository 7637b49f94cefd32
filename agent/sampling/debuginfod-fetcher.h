/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>

#include "macro.h"

/* Fetching debug files from debuginfod servers (elfutils' libdebuginfod),
 * off the event loop.
 *
 * One worker thread takes build IDs from a bounded queue (a request beyond
 * it is dropped and counted) and calls debuginfod_find_debuginfo(), which
 * keeps what it fetched in the disk cache (cache_dir, libdebuginfod's
 * layout); each fetch is bounded in time and size (a progress callback
 * that cancels past the deadline, beyond the cache's bound, or when the
 * fetcher is freed), and the cache in size (least recently used files are pruned by
 * the worker after each download). Answers reach the event loop through an
 * eventfd watched by sd-event, and the callback runs there. The worker
 * touches nothing but its queue, the libdebuginfod client and the cache
 * directory: no Manager state.
 *
 * A build ID is never fetched twice at once (a request for one in flight is
 * joined), nor again within miss_expiry_usec after no server had it (an
 * in-memory negative cache, and libdebuginfod's own on disk, cache_miss_s,
 * which survives restarts), nor within failure_retry_usec after a failure.
 *
 * libdebuginfod reads its servers, cache directory and time limits from the
 * environment at each fetch, and setenv() is not safe while other threads
 * may read the environment: debuginfod_fetcher_new() sets them, once, and
 * must be called before the process starts any other thread. */

typedef struct DebuginfodFetcher DebuginfodFetcher;

#define DEBUGINFOD_CACHE_MAX_BYTES_DEFAULT (UINT64_C(1) << 30) /* 1 GiB */
#define DEBUGINFOD_QUEUE_MAX_DEFAULT 64U
#define DEBUGINFOD_TIMEOUT_USEC_DEFAULT (30 * USEC_PER_SEC)
#define DEBUGINFOD_MISS_EXPIRY_USEC_DEFAULT (600 * USEC_PER_SEC)
#define DEBUGINFOD_FAILURE_RETRY_USEC_DEFAULT (60 * USEC_PER_SEC)

typedef struct DebuginfodFetcherOptions {
        char *const *urls; /* http(s) URLs, at least one */
        const char *cache_dir; /* absolute; created (0700) with its parents */
        uint64_t cache_max_bytes; /* 0: DEBUGINFOD_CACHE_MAX_BYTES_DEFAULT */
        unsigned queue_max; /* 0: DEBUGINFOD_QUEUE_MAX_DEFAULT */
        uint64_t timeout_usec; /* per fetch, whole seconds; 0: DEBUGINFOD_TIMEOUT_USEC_DEFAULT */
        uint64_t miss_expiry_usec; /* 0: DEBUGINFOD_MISS_EXPIRY_USEC_DEFAULT */
        uint64_t failure_retry_usec; /* 0: DEBUGINFOD_FAILURE_RETRY_USEC_DEFAULT */
} DebuginfodFetcherOptions;

/* On the event loop, when a fetch ended: result 0, the debug file is in the
 * cache (debuginfod_fetcher_open_cached()); -ENOENT, no server has it;
 * another negative errno, it failed (-ETIME: timed out). */
typedef void (*DebuginfodFetchedFunc)(DebuginfodFetcher *f, const char *build_id, int result, uint64_t usec,
                                      void *userdata);

int debuginfod_fetcher_new(sd_event *event, const DebuginfodFetcherOptions *opts,
                           DebuginfodFetchedFunc callback, void *userdata, DebuginfodFetcher **ret);
/* Cancels the fetch in progress and joins the worker (at most about a
 * second: libdebuginfod polls its progress callback every second). */
DebuginfodFetcher *debuginfod_fetcher_free(DebuginfodFetcher *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(DebuginfodFetcher *, debuginfod_fetcher_free);

/* Asks for the debug file of build_id (lowercase hex). 1: queued; 0:
 * already being fetched (the same answer will do); -ENOENT: no server had
 * it lately; -EAGAIN: it failed lately; -ENOBUFS: the queue is full
 * (dropped, counted); -EINVAL: not a build ID. */
int debuginfod_fetcher_request(DebuginfodFetcher *f, const char *build_id);
/* Opens the cached debug file of build_id and marks it used (its atime,
 * for the size bound's LRU): an fd, or -ENOENT when the cache has none. */
int debuginfod_fetcher_open_cached(DebuginfodFetcher *f, const char *build_id);

typedef struct DebuginfodFetcherStats {
        uint64_t requested; /* requests made */
        uint64_t queued; /* of which queued */
        uint64_t joined; /* joined a fetch in flight */
        uint64_t dropped; /* refused: the queue was full */
        uint64_t skipped; /* refused: missing or failed lately (the negative cache) */
        uint64_t fetched; /* downloaded from a server */
        uint64_t from_cache; /* found in the disk cache */
        uint64_t not_found; /* no server had it */
        uint64_t failed; /* errors, time-outs */
        size_t pending; /* queued or being fetched now */
        uint64_t fetch_usec_max; /* the longest download */
        uint64_t cache_bytes; /* the cache's size after the last prune */
        uint64_t cache_pruned; /* files pruned to keep the size bound */
} DebuginfodFetcherStats;
void debuginfod_fetcher_stats(const DebuginfodFetcher *f, DebuginfodFetcherStats *ret);
const char *debuginfod_fetcher_cache_dir(const DebuginfodFetcher *f);
uint64_t debuginfod_fetcher_cache_max_bytes(const DebuginfodFetcher *f);
