/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* /proc/PID/maps lines, and opening the file a mapping maps. Shared by the
 * symbolizer and the unwinder. */

#define PROC_MAPS_DELETED_SUFFIX " (deleted)"

typedef struct ProcMapsEntry {
        uint64_t start, end, pgoff;
        unsigned major, minor;
        uint64_t inode;
        char perms[5]; /* "r-xp" */
        /* Points into the parsed line (with " (deleted)" cut off); "" for
         * anonymous memory; "[vdso]", "[anon:name]", ... for special ones. */
        const char *path;
        bool deleted;
} ProcMapsEntry;

static inline bool proc_maps_entry_executable(const ProcMapsEntry *e) {
        return e->perms[2] == 'x';
}

static inline bool proc_maps_entry_file_backed(const ProcMapsEntry *e) {
        return e->path[0] == '/';
}

/* "start-end perms offset major:minor inode   path": modifies line (the
 * path is cut at its end). -EBADMSG for a malformed line. */
int proc_maps_parse_line(char *line, ProcMapsEntry *ret);

/* What the readers of /proc/PID/maps keep of a process (the unwinder, the
 * symbolizer, the CPython finder): its executable mappings, at most
 * PROC_MAPS_EXECUTABLE_MAX, and at most PROC_MAPS_SAME_FILE_RUN_MAX of one
 * file in a row. A process that maps one file 65,000 times (and forks
 * children that inherit them) would otherwise cost a file open and 5 MB of
 * memory per mapping, in every child. */
#define PROC_MAPS_EXECUTABLE_MAX 2048
#define PROC_MAPS_SAME_FILE_RUN_MAX 32

/* The executable lines of PROC/PID/maps within those bounds, as text (the
 * same lines, in the same order), and how many executable mappings the
 * bounds left out. Read anywhere: a worker thread reads it for the loop. */
typedef struct ProcMapsText {
        char *buf;
        size_t size, allocated;
        size_t dropped;
        int error; /* negative errno of the read (-ENOENT: no such process), 0 */
} ProcMapsText;

/* Reads the file; on failure t->error is set too. */
int proc_maps_text_read(const char *proc_root, pid_t pid, ProcMapsText *t);
void proc_maps_text_done(ProcMapsText *t);

/* /proc/PID/maps read once for the readers of one moment: the unwinder,
 * the symbolizer and the CPython finder each read a new process's
 * mappings, in the same loop iteration; with tens of thousands of mappings
 * each read costs tens of ms. Between two proc_maps_cache_clear() calls,
 * the first proc_maps_fopen() of a process reads the file (its executable
 * lines, as proc_maps_text_read()) into memory and the next ones read that
 * copy; or a text read off the loop is handed to the cache
 * (proc_maps_cache_put()), and no reader of that moment reads the file.
 * One process at a time (the last one read). The owner clears it whenever
 * a process may have changed (a process event: an exec() between two reads
 * of the same PID). */
typedef struct ProcMapsCache ProcMapsCache;
ProcMapsCache *proc_maps_cache_new(void);
ProcMapsCache *proc_maps_cache_free(ProcMapsCache *c);
/* The mappings may have changed: read the file again next time. */
void proc_maps_cache_clear(ProcMapsCache *c);
/* The text of pid, read elsewhere (t->error set: what reading it said):
 * the cache takes t's buffer (t is left empty), until the next clear. */
void proc_maps_cache_put(ProcMapsCache *c, const char *proc_root, pid_t pid, ProcMapsText *t);
/* PROC/PID/maps as a FILE to read lines from (fclose() it, before the next
 * clear): with a cache, only its executable lines within the bounds; c
 * NULL: the file itself. NULL with errno set on failure. */
FILE *proc_maps_fopen(ProcMapsCache *c, const char *proc_root, pid_t pid);
/* The executable mappings the cached text of pid left out (0 when pid is
 * not the process in the cache). */
size_t proc_maps_cache_dropped(const ProcMapsCache *c, const char *proc_root, pid_t pid);
/* Reads (from the file), hits (from memory) and texts put (read off the
 * loop), for tests and status. */
void proc_maps_cache_stats(const ProcMapsCache *c, uint64_t *ret_reads, uint64_t *ret_hits,
                           uint64_t *ret_put);

/* Opens the file of a file-backed mapping of pid: through
 * PROC/PID/map_files/START-END (needs CAP_SYS_ADMIN, works for deleted
 * files), else its path inside the process's root (containers), checking
 * that the path still names the mapped file (-ESTALE when the device agrees
 * but the inode does not). Regular files only. */
int proc_maps_open_file(const char *proc_root, pid_t pid, const ProcMapsEntry *e);

/* Takes fd if it is a regular file (returns it), else closes it and
 * returns -EBADFD (a FIFO, a device, a directory) or the fstat() error. */
int fd_take_regular(int fd);

/* Opens a regular file (never a FIFO or a device) for reading; in_root:
 * path is resolved with dirfd as the root directory (openat2
 * RESOLVE_IN_ROOT), so a container's symlinks stay in the container. */
int open_regular_at(int dirfd, const char *path, bool in_root);

/* Opens path inside the process's root directory (PROC/PID/root). */
int proc_open_in_root(const char *proc_root, pid_t pid, const char *path);

/* Our own vDSO (the kernel maps the same image into every 64-bit process):
 * its address and size, from getauxval(AT_SYSINFO_EHDR) and
 * /proc/self/maps. -ENOENT when there is none. */
int proc_self_vdso(const void **ret_image, size_t *ret_size);
