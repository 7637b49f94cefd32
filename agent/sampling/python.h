/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"
#include "proc-maps.h"

/* Python frames, the agent's half (bpf/python.h for the walk):
 * - finds CPython in a process (the python executable or a libpython it
 *   maps, opened through /proc/PID/map_files or the process's root, so a
 *   container's own interpreter is read), its version and _PyRuntime's
 *   address, and registers the process with the walk (python_procs) when
 *   there are offsets for that version;
 * - names the frames the walk recorded: reads the code objects from the
 *   process's memory (process_vm_readv()), caches them per process (at most
 *   PYTHON_CODE_CACHE_MAX code objects), and checks a cached one again once
 *   per drain while the process lives (its type, first line and name must
 *   be the same, or it was freed and the address reused: read it again). */

typedef struct Python Python;
typedef struct PythonProcess PythonProcess;

#define PYTHON_CODE_CACHE_MAX 16384

int python_new(int procs_fd, int threads_fd, const char *proc_root, Python **ret);
/* /proc/PID/maps through the Manager's cache (see proc-maps.h). */
void python_set_maps_cache(Python *x, ProcMapsCache *c);
Python *python_free(Python *py);
DEFINE_TRIVIAL_CLEANUP_FUNC(Python *, python_free);

/* Looks at the process's mappings for CPython. Returns 1 and a reference
 * when it runs CPython (registered with the walk if its version is
 * supported), 0 when it does not (*ret NULL), negative errno on errors. */
int python_process_ref(Python *py, pid_t pid, uint64_t start_time, uint32_t exec_id, PythonProcess **ret);
/* A forked child of (ppid, parent_start_time) that runs its parent's
 * program still (the same exec_id): when the parent is known to run
 * CPython, the child does, at the same addresses; it is registered with
 * the walk without looking at its mappings (it may have exited already),
 * and frames it can no longer read (it exited) are named from its parent's
 * code objects. -ENOENT: the parent is not known (look at the child's own
 * mappings). */
int python_process_ref_forked(Python *py, pid_t pid, uint64_t start_time, uint32_t exec_id, pid_t ppid,
                              uint64_t parent_start_time, PythonProcess **ret);
void python_process_unref(Python *py, PythonProcess *pp);

/* "3.12" (walked), "unsupported version 3.99", "unsupported version 3.14
 * (_Py_DebugOffsets: no FIELD)", "unknown version". */
const char *python_process_status(const PythonProcess *pp);
bool python_process_supported(const PythonProcess *pp);

typedef struct PythonFrame {
        const char *name; /* co_qualname; NULL when the code object could not be read */
        const char *file; /* co_filename */
        int line; /* 0: unknown */
} PythonFrame;

/* Names a frame of the walk (CGPROF_PY_FRAME value). seq: the drain
 * sequence number (a cached code object is checked once per drain).
 * Pointers in ret live as long as the PythonProcess (or the next call
 * that drops its cache). */
int python_process_resolve(Python *py, PythonProcess *pp, uint64_t frame, uint64_t seq, PythonFrame *ret);

typedef struct PythonStats {
        uint64_t processes, registered, code_reads, code_read_errors, cache_drops;
        /* Code objects found freed when checked again, whose names were kept
         * for the frames of that drain. */
        uint64_t code_freed;
        /* Processes registered as forked children of a known one. */
        uint64_t forked;
} PythonStats;
void python_stats(const Python *py, PythonStats *ret);
