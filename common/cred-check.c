/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
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
                if (n == alloc) {
                        size_t a = alloc ? alloc * 2 : 8;
                        gid_t *p = reallocarray(groups, a, sizeof(gid_t));

                        if (!p)
                                return -ENOMEM;
                        groups = p;
                        alloc = a;
                }
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

bool creds_can_read(const Creds *c, const struct stat *st) {
        if (!c || !st)
                return false;
        if (c->uid == 0)
                return true;
        /* As the kernel does: the first class that applies decides, even
         * when a later one would allow more (an owner with 0044 cannot). */
        if (st->st_uid == c->uid)
                return st->st_mode & S_IRUSR;
        if (creds_in_group(c, st->st_gid))
                return st->st_mode & S_IRGRP;
        return st->st_mode & S_IROTH;
}

int creds_check_fd(const Creds *c, int fd) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        return creds_can_read(c, &st) ? 0 : -EACCES;
}
