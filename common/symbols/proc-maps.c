/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "macro.h"
#include "proc-maps.h"

int proc_maps_parse_line(char *line, ProcMapsEntry *ret) {
        uint64_t start, end, pgoff, inode;
        unsigned maj, min;
        char perms[8];
        size_t len, sl = strlen(PROC_MAPS_DELETED_SUFFIX);
        bool deleted = false;
        int pos = 0;
        char *p;

        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 "%n", &start, &end, perms,
                   &pgoff, &maj, &min, &inode, &pos) < 7 ||
            pos == 0)
                return -EBADMSG;
        if (strlen(perms) != 4 || end <= start)
                return -EBADMSG;

        p = line + pos;
        p += strspn(p, " \t");
        len = strcspn(p, "\n");
        p[len] = '\0';
        if (p[0] == '/' && len > sl && streq(p + len - sl, PROC_MAPS_DELETED_SUFFIX)) {
                p[len - sl] = '\0';
                deleted = true;
        }

        *ret = (ProcMapsEntry){
                .start = start,
                .end = end,
                .pgoff = pgoff,
                .major = maj,
                .minor = min,
                .inode = inode,
                .path = p,
                .deleted = deleted,
        };
        memcpy(ret->perms, perms, 5);
        return 0;
}

int open_regular_at(int dirfd, const char *path, bool in_root) {
        _cleanup_close_ int fd = -EBADF;

        if (in_root) {
                /* Resolve absolute symlinks and ".." inside the process's
                 * root, not ours: a container's /usr/lib/debug must not lead
                 * to the host's files. */
                struct open_how how = {
                        .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
                };

                fd = (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
                if (fd < 0 && (errno == ENOSYS || errno == EPERM))
                        /* openat2() not there (before 5.6) or filtered. */
                        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        } else
                fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return negative_errno();

        /* Never a FIFO or a device, whatever a container put there. */
        return fd_take_regular(TAKE_FD(fd));
}

int fd_take_regular(int fd) {
        _cleanup_close_ int owned = fd;
        struct stat st;

        if (fstat(owned, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        return TAKE_FD(owned);
}

int proc_open_in_root(const char *proc_root, pid_t pid, const char *path) {
        _cleanup_free_ char *root = NULL;
        _cleanup_close_ int root_fd = -EBADF;

        if (asprintf(&root, "%s/%d/root", proc_root, (int) pid) < 0)
                return -ENOMEM;
        root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return negative_errno();

        path += strspn(path, "/");
        if (path[0] == '\0')
                return -EISDIR;
        return open_regular_at(root_fd, path, true);
}

int proc_maps_open_file(const char *proc_root, pid_t pid, const ProcMapsEntry *e) {
        _cleanup_free_ char *map_file = NULL;
        int fd;

        if (!proc_maps_entry_file_backed(e))
                return -EINVAL;

        /* The kernel names these "%lx-%lx": lowercase hex, no 0x, no padding. */
        if (asprintf(&map_file, "%s/%d/map_files/%" PRIx64 "-%" PRIx64, proc_root, (int) pid, e->start,
                     e->end) < 0)
                return -ENOMEM;
        fd = open_regular_at(AT_FDCWD, map_file, false);
        if (fd >= 0 || e->deleted)
                return fd;

        /* map_files needs CAP_SYS_ADMIN; the path, through the process's
         * root, works in containers too. */
        fd = proc_open_in_root(proc_root, pid, e->path);
        if (fd >= 0) {
                struct stat st;

                /* The path may name another file by now. Where the device
                 * agrees with the maps line, so must the inode (overlayfs
                 * shows different devices: no check). */
                if (fstat(fd, &st) < 0) {
                        int r = negative_errno();
                        safe_close(fd);
                        return r;
                }
                if (major(st.st_dev) == e->major && minor(st.st_dev) == e->minor &&
                    (uint64_t) st.st_ino != e->inode) {
                        safe_close(fd);
                        return -ESTALE;
                }
        }
        return fd;
}

int proc_self_vdso(const void **ret_image, size_t *ret_size) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        unsigned long base = getauxval(AT_SYSINFO_EHDR);
        size_t alloc = 0;

        if (base == 0)
                return -ENOENT;
        f = fopen("/proc/self/maps", "re");
        if (!f)
                return negative_errno();
        while (getline(&line, &alloc, f) > 0) {
                uint64_t a, b;

                if (sscanf(line, "%" SCNx64 "-%" SCNx64, &a, &b) == 2 && a == base && b > a) {
                        *ret_image = (const void *) (uintptr_t) a;
                        *ret_size = b - a;
                        return 0;
                }
        }
        return -ENOENT;
}

/* ---- one read of /proc/PID/maps for the readers of one moment ---- */

struct ProcMapsCache {
        char *proc_root;
        pid_t pid;
        bool valid;
        char *buf;
        size_t size, allocated;
        uint64_t reads, hits;
};

ProcMapsCache *proc_maps_cache_new(void) {
        return calloc(1, sizeof(ProcMapsCache));
}

ProcMapsCache *proc_maps_cache_free(ProcMapsCache *c) {
        if (!c)
                return NULL;
        free(c->proc_root);
        free(c->buf);
        free(c);
        return NULL;
}

void proc_maps_cache_clear(ProcMapsCache *c) {
        if (!c || !c->valid)
                return;
        c->valid = false;
        /* A huge one is not kept around. */
        if (c->allocated > 1024 * 1024) {
                free(c->buf);
                c->buf = NULL;
                c->allocated = 0;
        }
}

void proc_maps_cache_stats(const ProcMapsCache *c, uint64_t *ret_reads, uint64_t *ret_hits) {
        *ret_reads = c ? c->reads : 0;
        *ret_hits = c ? c->hits : 0;
}

/* The whole file into c->buf; -EFBIG past PROC_MAPS_CACHE_MAX. */
static int cache_fill(ProcMapsCache *c, int fd) {
        c->size = 0;
        for (;;) {
                ssize_t k;

                if (c->allocated - c->size < 65536) {
                        size_t want = MAX(c->allocated * 2, (size_t) 131072);
                        char *b;
                        if (want > PROC_MAPS_CACHE_MAX)
                                return -EFBIG;
                        b = realloc(c->buf, want);
                        if (!b)
                                return -ENOMEM;
                        c->buf = b;
                        c->allocated = want;
                }
                k = read(fd, c->buf + c->size, c->allocated - c->size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return 0;
                c->size += (size_t) k;
        }
}

FILE *proc_maps_fopen(ProcMapsCache *c, const char *proc_root, pid_t pid) {
        char path[PATH_MAX];
        int fd, r;

        if ((size_t) snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int) pid) >= sizeof(path)) {
                errno = ENAMETOOLONG;
                return NULL;
        }
        if (!c)
                return fopen(path, "re");
        if (c->valid && c->pid == pid && c->proc_root && strcmp(c->proc_root, proc_root) == 0) {
                c->hits++;
                /* An empty file: fmemopen() wants a size > 0 in older glibc. */
                return c->size > 0 ? fmemopen(c->buf, c->size, "r") : fopen("/dev/null", "re");
        }

        c->valid = false;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        r = cache_fill(c, fd);
        close(fd);
        c->reads++;
        if (r == -EFBIG)
                return fopen(path, "re"); /* too large to keep: read directly */
        if (r < 0) {
                errno = -r;
                return NULL;
        }
        if (!c->proc_root || strcmp(c->proc_root, proc_root) != 0) {
                free(c->proc_root);
                c->proc_root = strdup(proc_root);
                if (!c->proc_root) {
                        errno = ENOMEM;
                        return NULL;
                }
        }
        c->pid = pid;
        c->valid = true;
        return c->size > 0 ? fmemopen(c->buf, c->size, "r") : fopen("/dev/null", "re");
}
