/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cred-check.h"
#include "fileio.h"

/* The line starting with "\n<key>:" (or key at the start), after the colon. */
static const char *status_field(const char *status, const char *key) {
        size_t n = strlen(key);

        for (const char *p = status; p; p = strchr(p, '\n')) {
                if (*p == '\n')
                        p++;
                if (strncmp(p, key, n) == 0 && p[n] == ':')
                        return p + n + 1;
        }
        return NULL;
}

/* One decimal ID at *p (after blanks); advances *p. */
static int parse_id(const char **p, uint32_t *ret) {
        const char *s = *p + strspn(*p, " \t");
        unsigned long long v;
        char *end;

        if (*s < '0' || *s > '9')
                return -EBADMSG;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || v >= UINT32_MAX) /* (uid_t) -1 is no ID */
                return -EBADMSG;
        *ret = (uint32_t) v;
        *p = end;
        return 0;
}

/* The 4th of "real effective saved filesystem". */
static int parse_fs_id(const char *line, uint32_t *ret) {
        uint32_t v = 0;
        int r;

        if (!line)
                return -EBADMSG;
        for (int i = 0; i < 4; i++) {
                r = parse_id(&line, &v);
                if (r < 0)
                        return r;
        }
        *ret = v;
        return 0;
}

int creds_parse_status(const char *status, Creds *ret) {
        _cleanup_free_ gid_t *groups = NULL;
        const char *line;
        size_t n = 0, alloc = 0;
        uint32_t uid, gid;
        int r;

        if (!status || !ret)
                return -EINVAL;

        r = parse_fs_id(status_field(status, "Uid"), &uid);
        if (r < 0)
                return r;
        r = parse_fs_id(status_field(status, "Gid"), &gid);
        if (r < 0)
                return r;

        line = status_field(status, "Groups");
        if (!line)
                return -EBADMSG;
        for (;;) {
                uint32_t g;

                line += strspn(line, " \t");
                if (*line == '\n' || *line == '\0')
                        break;
                r = parse_id(&line, &g);
                if (r < 0)
                        return r;
                if (GREEDY_REALLOC(groups, alloc, n + 1, 8) < 0)
                        return -ENOMEM;
                groups[n++] = (gid_t) g;
        }

        *ret = (Creds){
                .uid = (uid_t) uid,
                .gid = (gid_t) gid,
                .groups = TAKE_PTR(groups),
                .n_groups = n,
        };
        return 0;
}

int creds_from_pid(const char *proc_root, pid_t pid, Creds *ret) {
        _cleanup_free_ char *path = NULL, *buf = NULL;
        int r;

        if (asprintf(&path, "%s/%d/status", proc_root, (int) pid) < 0)
                return -ENOMEM;
        r = read_full_file_max(AT_FDCWD, path, 64 * 1024, &buf, NULL);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        return creds_parse_status(buf, ret);
}

void creds_done(Creds *c) {
        if (!c)
                return;
        free(c->groups);
        c->groups = NULL;
        c->n_groups = 0;
}

static bool creds_in_group(const Creds *c, gid_t g) {
        if (c->gid == g)
                return true;
        for (size_t i = 0; i < c->n_groups; i++)
                if (c->groups[i] == g)
                        return true;
        return false;
}

/* mask: the owner's bits of the permission asked for (S_IRUSR, S_IXUSR). */
static bool creds_can(const Creds *c, const struct stat *st, mode_t mask) {
        if (!c || !st)
                return false;
        if (c->uid == 0)
                return true;
        /* As the kernel does: the first class that applies decides, even
         * when a later one would allow more (an owner with 0044 cannot). */
        if (st->st_uid == c->uid)
                return st->st_mode & mask;
        if (creds_in_group(c, st->st_gid))
                return st->st_mode & (mask >> 3);
        return st->st_mode & (mask >> 6);
}

bool creds_can_read(const Creds *c, const struct stat *st) {
        return creds_can(c, st, S_IRUSR);
}

bool creds_can_search(const Creds *c, const struct stat *st) {
        return creds_can(c, st, S_IXUSR);
}

int creds_check_fd(const Creds *c, int fd) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        return creds_can_read(c, &st) ? 0 : -EACCES;
}

#define CREDS_SYMLINKS_MAX 40

/* *to = *from (closing what *to held), *from = -EBADF. */
static void fd_move(int *to, int *from) {
        safe_close(*to);
        *to = *from;
        *from = -EBADF;
}

int creds_open_in_root(const Creds *c, int root_fd, const char *path) {
        _cleanup_free_ char *todo = NULL;
        _cleanup_close_ int cur = -EBADF;
        struct stat root_st, st;
        unsigned n_links = 0;
        char *p;

        if (!c || root_fd < 0 || !path)
                return -EINVAL;
        if (fstat(root_fd, &root_st) < 0)
                return negative_errno();
        todo = strdup(path);
        if (!todo)
                return -ENOMEM;
        cur = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return negative_errno();

        p = todo;
        for (;;) {
                _cleanup_close_ int next = -EBADF;
                char *comp;
                bool last;

                p += strspn(p, "/");
                if (*p == '\0')
                        return -EISDIR; /* the path names a directory */
                comp = p;
                p += strcspn(p, "/");
                last = p[strspn(p, "/")] == '\0';
                if (*p)
                        *p++ = '\0';

                if (streq(comp, "."))
                        continue;

                /* cur is a directory: to look a name up in it, c must be
                 * able to search it. */
                if (fstat(cur, &st) < 0)
                        return negative_errno();
                if (!creds_can_search(c, &st))
                        return -EACCES;

                if (streq(comp, "..")) {
                        if (st.st_dev == root_st.st_dev && st.st_ino == root_st.st_ino)
                                continue; /* ".." of the root is the root */
                        next = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                        if (next < 0)
                                return negative_errno();
                        fd_move(&cur, &next);
                        continue;
                }

                next = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0)
                        return negative_errno();
                if (fstat(next, &st) < 0)
                        return negative_errno();

                if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        _cleanup_free_ char *joined = NULL;
                        ssize_t n;

                        if (++n_links > CREDS_SYMLINKS_MAX)
                                return -ELOOP;
                        n = readlinkat(next, "", target, sizeof(target) - 1);
                        if (n < 0)
                                return negative_errno();
                        target[n] = '\0';
                        if (asprintf(&joined, "%s/%s", target, p) < 0)
                                return -ENOMEM;
                        free(todo);
                        todo = TAKE_PTR(joined);
                        p = todo;
                        if (target[0] == '/') {
                                next = safe_close(next);
                                next = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
                                if (next < 0)
                                        return negative_errno();
                                fd_move(&cur, &next);
                        }
                        continue;
                }

                if (!last) {
                        if (!S_ISDIR(st.st_mode))
                                return -ENOTDIR;
                        fd_move(&cur, &next);
                        continue;
                }

                /* The file itself: opened for reading, not through a
                 * symlink swapped in since; whatever it is now, it must be
                 * a regular file c could read. */
                next = safe_close(next);
                next = openat(cur, comp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                if (next < 0)
                        return negative_errno();
                if (fstat(next, &st) < 0)
                        return negative_errno();
                if (!S_ISREG(st.st_mode))
                        return -EBADFD;
                if (!creds_can_read(c, &st))
                        return -EACCES;
                return TAKE_FD(next);
        }
}
