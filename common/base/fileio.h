/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include <sys/types.h>

#include "macro.h"

/* Reads a whole file, up to max bytes (0: 64 MiB; larger files are -EFBIG),
 * into a NUL-terminated buffer. */
int read_full_file_max(int dirfd, const char *path, size_t max, char **ret, size_t *ret_size);
/* The same, for a file someone else may have put there (a report directory):
 * a regular file only, not through a symlink (-ELOOP), never blocking on a
 * FIFO nor touching a device (-EBADFD). */
int read_regular_file_max(int dirfd, const char *path, size_t max, char **ret, size_t *ret_size);
/* Opens such a file (the same checks) for reading: its fd, and its size. */
int open_regular_file(int dirfd, const char *path, uint64_t *ret_size);
int read_full_file(const char *path, char **ret, size_t *ret_size);
int read_full_file_at(int dirfd, const char *path, char **ret, size_t *ret_size);
/* Reads the first line, without the trailing newline. */
int read_one_line_file(const char *path, char **ret);
/* Writes a string (and nothing else) to an existing file, e.g. a sysctl. */
int write_string_file(const char *path, const char *s);

/* Opens (creating as needed, mode 0755) the directory 'relpath' below the
 * directory dirfd, one component at a time with O_NOFOLLOW, so that neither a
 * ".." nor a symlink can lead outside dirfd. relpath must be relative.
 * Returns an O_DIRECTORY fd or a negative errno (-ELOOP for a symlink,
 * -EINVAL for "..", "." or an absolute path). */
int mkdir_below(int dirfd, const char *relpath);
/* The same without creating anything (-ENOENT when a component is missing). */
int open_dir_below(int dirfd, const char *relpath);

/* Creates 'path' (absolute or relative to cwd) and parents, mode 0755. */
int mkdir_p(const char *path, mode_t mode);

/* Atomic write: the file 'name' in dirfd is written through a temporary file
 * (".#name.XXXXXX" in the same directory, mode 0644) by the callback and
 * renamed into place, so readers never see a half-written file. The callback
 * writes to f and returns 0 or a negative errno; on any failure the temporary
 * file is removed and the target left untouched. */
typedef int (*WriteCallback)(FILE *f, void *userdata);
int write_file_atomic_at(int dirfd, const char *name, WriteCallback cb, void *userdata);
int write_string_file_atomic_at(int dirfd, const char *name, const char *s);

/* Whether the directory 'path' (absolute) is safe to trust, as sshd's
 * StrictModes has it: the directory and each one above it (after
 * realpath()) is owned by root or 'uid', and none is writable by group or
 * others, except a directory with the sticky bit (/tmp) above one that is
 * owned by root or 'uid' (there nobody else may rename or remove it).
 * 0 when it is; -EPERM with *ret_why (static text) and *ret_where (the
 * directory at fault, malloc()ed) when not; another negative errno when a
 * directory cannot be looked at. */
int path_check_trusted(const char *path, uid_t uid, const char **ret_why, char **ret_where);
