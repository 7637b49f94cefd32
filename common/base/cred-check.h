/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "macro.h"

/* Whose eyes a file is read with. A file the agent reaches through a path a
 * profiled process controls (its root's /usr/lib/debug, its /tmp) is used
 * only if that process's owner could read it: otherwise a symlink there makes
 * the agent a confused deputy, and the report shows what the user could not
 * read. */

typedef struct Creds {
        uid_t uid; /* the filesystem UID: what the kernel checks files against */
        gid_t gid; /* the filesystem GID */
        gid_t *groups;
        size_t n_groups;
} Creds;

/* Parses the "Uid:", "Gid:" (real, effective, saved, filesystem) and
 * "Groups:" lines of a /proc/PID/status text (IDs as seen from the reader's
 * user namespace). -EBADMSG when one is missing or malformed. */
int creds_parse_status(const char *status, Creds *ret);

/* The same, read from PROC/PID/status; -ESRCH when the process is gone. */
int creds_from_pid(const char *proc_root, pid_t pid, Creds *ret);

void creds_done(Creds *c);

/* Whether c could open a file of that owner, group and mode for reading, by
 * its permission bits as the kernel checks them: the owner's bits for its
 * owner, else the group's for its group (primary or supplementary), else the
 * others'. UID 0 reads everything. ACLs are not looked at: a file only an ACL
 * lets the user read is refused. */
bool creds_can_read(const Creds *c, const struct stat *st);

/* 0 if c could read the file open at fd, -EACCES if not, or fstat()'s error. */
int creds_check_fd(const Creds *c, int fd);

/* Whether c could search (x) the directory st describes. UID 0 can. */
bool creds_can_search(const Creds *c, const struct stat *st);

/* Opens path (relative to root_fd, which is "/" for it: absolute symlinks and
 * ".." stay inside, as openat2()'s RESOLVE_IN_ROOT does) one component at a
 * time, as c would: every directory on the way must be searchable by c and
 * the file, regular, readable by c (-EACCES if not). Symlinks are followed
 * by hand (at most 40: -ELOOP), never a /proc magic link's target. */
int creds_open_in_root(const Creds *c, int root_fd, const char *path);
