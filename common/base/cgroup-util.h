/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* cgroup v2 helpers. Paths "relative to the cgroup root" have no leading
 * '/'; the root itself is "". */

/* Finds the cgroup2 mount point in a mountinfo file (NULL:
 * /proc/self/mountinfo): /sys/fs/cgroup on unified hosts,
 * /sys/fs/cgroup/unified on hybrid ones. -ENOENT when none is mounted. */
int cg_find_unified_root(const char *mountinfo_path, char **ret);

/* The cgroup ID of the directory 'path' below dirfd (what
 * bpf_get_current_cgroup_id() returns): its kernfs node ID, read with
 * name_to_handle_at(), falling back to the inode number. */
int cg_get_id_at(int dirfd, const char *path, uint64_t *ret);

/* usage_usec of cpu.stat of the cgroup directory fd. */
int cg_read_cpu_usage_usec(int cgroup_fd, uint64_t *ret);

/* Moves pid into the cgroup directory fd (writes cgroup.procs). */
int cg_attach_fd(int cgroup_fd, pid_t pid);

/* Unescapes mountinfo's octal escapes (\040 for a space) in place. */
void mountinfo_unescape(char *s);

/* A cgroup path relative to the root: leading and trailing slashes
 * dropped; the components left must be names (no "", "." or ".."), and
 * there must be one at least (not the root). -EINVAL otherwise. */
int cgroup_path_normalize(const char *path, char **ret);
