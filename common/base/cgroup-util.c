/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cgroup-util.h"

void mountinfo_unescape(char *s) {
        char *w = s;
        for (char *r = s; *r;) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
                    r[3] >= '0' && r[3] <= '7') {
                        *w++ = (char) (((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
                        r += 4;
                } else
                        *w++ = *r++;
        }
        *w = 0;
}

int cg_find_unified_root(const char *mountinfo_path, char **ret) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t n = 0;

        f = fopen(mountinfo_path ?: "/proc/self/mountinfo", "re");
        if (!f)
                return negative_errno();

        while (getline(&line, &n, f) > 0) {
                /* id parent maj:min root mountpoint options [optional...] - fstype source superoptions */
                char *sep = strstr(line, " - ");
                if (!sep)
                        continue;
                char fstype[64];
                if (sscanf(sep + 3, "%63s", fstype) != 1 || !streq(fstype, "cgroup2"))
                        continue;

                char root[4096], mountpoint[4096];
                if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mountpoint) != 2)
                        continue;
                /* A bind mount of a sub-tree (root != "/") is not the root of the hierarchy. */
                if (!streq(root, "/"))
                        continue;
                mountinfo_unescape(mountpoint);
                /* The kernel writes absolute paths: anything else is not a mount point. */
                if (mountpoint[0] != '/')
                        continue;
                char *p = strdup(mountpoint);
                if (!p)
                        return -ENOMEM;
                *ret = p;
                return 0;
        }
        return -ENOENT;
}

int cg_get_id_at(int dirfd, const char *path, uint64_t *ret) {
        union {
                struct file_handle fh;
                char buf[sizeof(struct file_handle) + sizeof(uint64_t)];
        } h = { .fh.handle_bytes = sizeof(uint64_t) };
        int mnt_id;

        if (name_to_handle_at(dirfd, path, &h.fh, &mnt_id, path[0] ? 0 : AT_EMPTY_PATH) >= 0 &&
            h.fh.handle_bytes == sizeof(uint64_t)) {
                uint64_t id;
                memcpy(&id, h.fh.f_handle, sizeof(id));
                *ret = id;
                return 0;
        }

        struct stat st;
        if (fstatat(dirfd, path, &st, path[0] ? 0 : AT_EMPTY_PATH) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        *ret = (uint64_t) st.st_ino;
        return 0;
}

int cg_read_cpu_usage_usec(int cgroup_fd, uint64_t *ret) {
        _cleanup_close_ int fd = -EBADF;
        char buf[4096];
        ssize_t l;

        fd = openat(cgroup_fd, "cpu.stat", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        l = read(fd, buf, sizeof(buf) - 1);
        if (l < 0)
                return negative_errno();
        buf[l] = 0;

        for (char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
                unsigned long long v;
                if (sscanf(p, "usage_usec %llu", &v) == 1) {
                        *ret = v;
                        return 0;
                }
        }
        return -ENODATA;
}

int cg_attach_fd(int cgroup_fd, pid_t pid) {
        _cleanup_close_ int fd = -EBADF;
        char buf[32];
        int l;

        fd = openat(cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        l = snprintf(buf, sizeof(buf), "%d\n", (int) pid);
        if (write(fd, buf, l) != l)
                return negative_errno();
        return 0;
}

int cgroup_path_normalize(const char *path, char **ret) {
        _cleanup_free_ char *p = NULL;
        const char *b = path, *e;

        while (*b == '/')
                b++;
        e = b + strlen(b);
        while (e > b && e[-1] == '/')
                e--;
        if (e == b)
                return -EINVAL;
        p = strndup(b, (size_t) (e - b));
        if (!p)
                return -ENOMEM;
        for (const char *c = p;;) {
                const char *slash = strchr(c, '/');
                size_t len = slash ? (size_t) (slash - c) : strlen(c);
                if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
                        return -EINVAL;
                if (!slash)
                        break;
                c = slash + 1;
        }
        *ret = TAKE_PTR(p);
        return 0;
}
