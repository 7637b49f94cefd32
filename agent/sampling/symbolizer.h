/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "macro.h"
#include "proc-maps.h"

/* Symbolization of sampled addresses.
 *
 * Kernel addresses: /proc/kallsyms, loaded on the first kernel frame and
 * reloaded when the loaded modules change (/proc/modules, compared at most
 * every kernel_check_usec); never because an address is in no symbol.
 * User addresses: a snapshot of a process's mappings (/proc/PID/maps) taken
 * while the process is alive, whose executable file mappings hold references
 * to cached ELF symbol tables. Files are opened through
 * /proc/PID/map_files/<start>-<end> (falling back to /proc/PID/root/<path>),
 * so binaries inside containers resolve; when the file has a build ID and a
 * separate debug file exists under <root>/usr/lib/debug/.build-id/xx/yyyy.debug
 * (the process's root first, then the host's debug directory) its .symtab is
 * used, as perf does; short of one, a file without .symtab gives the
 * symbols of its .dynsym and of its MiniDebugInfo (the .symtab compressed in
 * .gnu_debugdata, as Fedora ships it).
 * Short of those, when debuginfod is set up (symbolizer_set_debuginfod()),
 * the debug file is taken from its disk cache or asked for, and arrives
 * later (symbolizer_debuginfod_done()).
 * The cache is keyed by (device, inode) and holds at most max_files tables
 * not referenced by any snapshot (least recently used are dropped first).
 *
 * JIT code: an address in anonymous executable memory, or in no mapping of
 * the snapshot, is looked up in the process's JIT symbol files (perf map,
 * jitdump: see jit-maps.h), found through /proc/PID/root/tmp under the
 * process's own PID namespace PID. They are read when the first such address
 * asks for them and, at most once per pass (symbolizer_begin_pass(): the
 * agent starts one per drain), again for what they gained. The snapshot
 * keeps them: the frames of a process that exited still resolve. Such
 * frames have the module "[jit]", the file's path as the process sees it
 * ("/tmp/perf-1.map") and symbols_source "perf map" or "jitdump"; unnamed
 * addresses of a process with JIT files too (name NULL). File-backed
 * mappings keep their ELF symbols. */

typedef struct Symbolizer Symbolizer;
typedef struct ProcessMaps ProcessMaps;

typedef struct SymbolizerOptions {
        size_t max_files; /* 0: 256 */
        const char *kallsyms_path; /* NULL: /proc/kallsyms */
        const char *modules_path; /* NULL: /proc/modules */
        uint64_t kernel_check_usec; /* how often modules are compared; 0: 10 s */
        const char *debug_dir; /* host debug directory, NULL: /usr/lib/debug */
        const char *proc_root; /* NULL: /proc */
} SymbolizerOptions;

int symbolizer_new(const SymbolizerOptions *opts, Symbolizer **ret);
/* /proc/PID/maps through the Manager's cache (see proc-maps.h). */
void symbolizer_set_maps_cache(Symbolizer *x, ProcMapsCache *c);
Symbolizer *symbolizer_free(Symbolizer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Symbolizer *, symbolizer_free);

/* Debug files from debuginfod, for files with a build ID and neither a
 * .symtab nor a local debug file. The symbolizer does no I/O beyond
 * open_cached(): fetching is the caller's business (off the event loop). */
typedef struct SymbolizerDebuginfod {
        /* Opens the debug file of build_id if it is already at hand (a disk
         * cache): an fd, or a negative errno (-ENOENT: not there). */
        int (*open_cached)(void *userdata, const char *build_id);
        /* Asks for it: >= 0 asked (the answer comes through
         * symbolizer_debuginfod_done()), -ENOENT known to be missing,
         * another negative errno: not now (asked again when a later capture
         * maps the file). */
        int (*request)(void *userdata, const char *build_id);
        void *userdata;
} SymbolizerDebuginfod;

void symbolizer_set_debuginfod(Symbolizer *s, const SymbolizerDebuginfod *d);
/* A request ended: result 0: open_cached() has the file now; -ENOENT: no
 * server has it; another negative errno: failed (asked again later). Every
 * cached file of that build ID waiting for it takes its symbols. Returns how
 * many did. */
int symbolizer_debuginfod_done(Symbolizer *s, const char *build_id, int result);

/* Goes up each time files already loaded get new symbols (a debug file
 * that arrived late): frames unresolved before may resolve now. */
uint64_t symbolizer_generation(const Symbolizer *s);

/* Captures the mappings of pid and loads (or takes from the cache) the symbol
 * tables of its executable file mappings. -ESRCH when the process is gone. */
int symbolizer_capture(Symbolizer *s, pid_t pid, ProcessMaps **ret);
/* Re-reads the mappings of a live process (e.g. after dlopen()); keeps the
 * old snapshot when the process is gone. */
int symbolizer_refresh(Symbolizer *s, ProcessMaps *m);
ProcessMaps *process_maps_free(ProcessMaps *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProcessMaps *, process_maps_free);
/* Whether addr falls into one of the snapshot's mappings. */
bool process_maps_covers(const ProcessMaps *m, uint64_t addr);

typedef struct ResolvedFrame {
        const char *name; /* function name, NULL when unresolved */
        const char *module; /* basename of the mapped file, "[kernel.kallsyms]", "[vdso]", or NULL */
        uint64_t offset; /* addr - symbol start (resolved), or file offset / addr otherwise */
        /* The mapping the address fell into (user frames; all 0/NULL when none). */
        const char *path; /* the mapped file's path, or the special name ("[vdso]") */
        uint64_t map_start, map_end, map_pgoff;
        const char *build_id; /* lowercase hex, NULL when unknown */
        /* Where the mapping's function symbols came from: "symtab", "dynsym",
         * "minidebuginfo", "debug file", "gopclntab", "debuginfod", or
         * "none", the last three followed by " (debuginfod pending)" while a
         * debug file is being fetched (user frames in a mapping; NULL
         * otherwise); "perf map" or "jitdump" (JIT code). */
        const char *symbols_source;
        /* Where in its source the function was (Go's .gopclntab): */
        const char *file; /* source file, NULL: unknown */
        uint32_t line; /* 0: unknown */
        bool inlined; /* an inlined call: its caller is the next frame of the chain */
} ResolvedFrame;

/* Pointers in ret stay valid while m lives and until the next
 * symbolizer_resolve_user() on m, which may read more of its JIT files
 * (user), or until the next symbolizer_resolve_kernel() call, which may
 * reload the kernel's symbols (kernel). Returns 0 also for unresolved
 * addresses (name NULL). s may be NULL (no JIT file is then read). A user
 * address is resolved to the function holding it (for code where calls
 * were inlined: the physical function, with the file and line of the
 * outermost inlined call). */
int symbolizer_resolve_user(Symbolizer *s, ProcessMaps *m, uint64_t addr, ResolvedFrame *ret);
/* The frames at a user address, innermost first: the calls inlined there
 * (each with .inlined set: its caller is the next frame), then the function
 * holding them; one frame where nothing was inlined or the address is
 * unresolved (or JIT code). At most max (> 0, up to SYMBOLIZER_INLINE_MAX
 * frames are filled): when there are more, the innermost inlined calls and
 * the physical function. Everything but name, file, line, inlined and
 * offset is the same in each frame. */
#define SYMBOLIZER_INLINE_MAX 16U
int symbolizer_resolve_user_inline(Symbolizer *s, ProcessMaps *m, uint64_t addr, ResolvedFrame *frames,
                                   size_t max, size_t *ret_n);
/* Starts a pass (a drain): JIT files are checked for growth at most once
 * per pass and process. */
void symbolizer_begin_pass(Symbolizer *s);
int symbolizer_resolve_kernel(Symbolizer *s, uint64_t addr, ResolvedFrame *ret);

/* Cache statistics for tests and benchmarks. */
size_t symbolizer_cached_files(const Symbolizer *s);
/* How many times /proc/kallsyms was read. */
unsigned symbolizer_kernel_loads(const Symbolizer *s);
