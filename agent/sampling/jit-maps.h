/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "proc-maps.h"

/* The JIT symbol files of one process, found where its runtime writes them
 * and read as they grow:
 *  - /tmp/perf-<NSPID>.map (node --perf-basic-prof, the JVM's jcmd PID
 *    Compiler.perfmap, CPython -X perf),
 *  - /tmp/jit-<NSPID>.dump, and a jit-<N>.dump the process maps (perf's JVMTI
 *    agent and node --perf-prof mmap() theirs so perf sees them),
 * where NSPID is the process's PID in its own PID namespace (the last field
 * of NSpid: in /proc/PID/status) and /tmp is the process's own, reached
 * through /proc/PID/root: a container's files, not the host's.
 *
 * Opening never follows a symlink: root/tmp and the file are opened with
 * O_NOFOLLOW, one component at a time, and only regular files are read. A
 * mapped jitdump is opened through /proc/PID/map_files (the very file mapped)
 * or its path inside the process's root.
 *
 * Files stay open while the JitMaps lives, so a process that exited keeps
 * its symbols (and a file that still grows is still read). Each update reads
 * at most JIT_MAPS_READ_MAX bytes per file (the rest waits for the next
 * update), and no file past JIT_MAPS_FILE_MAX. */

#define JIT_MAPS_READ_MAX (16U << 20)
#define JIT_MAPS_FILE_MAX (UINT64_C(1) << 30)

typedef struct JitMaps JitMaps;

int jit_maps_new(const char *proc_root, pid_t pid, JitMaps **ret);
JitMaps *jit_maps_free(JitMaps *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(JitMaps *, jit_maps_free);

/* Reads what the files found gained since the last update. discover: also
 * look for files not found yet (only while the process lives: the caller
 * knows the PID is still its process). mapped_dump: a jit-*.dump mapping
 * of the process, or NULL. */
int jit_maps_update(JitMaps *j, bool discover, const ProcMapsEntry *mapped_dump);

typedef struct JitSymbolInfo {
        const char *name; /* NULL: no file names addr */
        uint64_t offset; /* from the symbol's start */
        /* The file that named it (or, when none did, the first file found;
         * NULL when none was): its path as the process sees it
         * ("/tmp/perf-1.map"), and "perf map" or "jitdump". */
        const char *path;
        const char *source;
} JitSymbolInfo;

/* Jitdump files first, then the perf map. Returns whether any file was
 * found (ret is filled either way). The strings stay valid until the next
 * update. */
bool jit_maps_lookup(const JitMaps *j, uint64_t addr, JitSymbolInfo *ret);

/* "jit-<digits>.dump": the basename of a jitdump file. */
bool jit_dump_file_name(const char *path);

/* For tests: the PID in the process's namespace (0: not read yet). */
pid_t jit_maps_nspid(const JitMaps *j);
