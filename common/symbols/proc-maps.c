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

/* ---- the executable mappings of a process, bounded ---- */

void proc_maps_text_done(ProcMapsText *t) {
        free(t->buf);
        *t = (ProcMapsText){};
}

static int text_append(ProcMapsText *t, const char *line, size_t len) {
        if (t->allocated - t->size < len + 1) {
                size_t want = MAX(t->allocated * 2, MAX(t->size + len + 1, (size_t) 16384));
                char *b = realloc(t->buf, want);
                if (!b)
                        return -ENOMEM;
                t->buf = b;
                t->allocated = want;
        }
        memcpy(t->buf + t->size, line, len);
        t->size += len;
        t->buf[t->size] = '\0';
        return 0;
}

typedef struct TextFilter {
        ProcMapsText *text;
        size_t kept, run;
        bool last_file_backed;
        ProcMapsEntry last; /* path points into last_path */
        char last_path[PATH_MAX];
} TextFilter;

/* One line (with its '\n', if any) of the file: kept when executable and
 * within the bounds. */
static int filter_line(TextFilter *f, const char *line, size_t len) {
        char copy[PATH_MAX + 256];
        ProcMapsEntry e;
        bool same_file;
        const char *sp;

        /* "start-end perms ...": the permissions first (most lines are not
         * executable), the whole line only for the executable ones. */
        sp = memchr(line, ' ', len);
        if (!sp || (size_t) (sp - line) + 4 >= len || sp[3] != 'x')
                return 0;
        if (len >= sizeof(copy))
                return 0; /* not a line the kernel writes */
        memcpy(copy, line, len);
        copy[len] = '\0';
        if (proc_maps_parse_line(copy, &e) < 0)
                return 0;

        same_file = f->last_file_backed && proc_maps_entry_file_backed(&e) && e.major == f->last.major &&
                    e.minor == f->last.minor && e.inode == f->last.inode && e.deleted == f->last.deleted &&
                    streq(e.path, f->last.path);
        f->run = same_file ? f->run + 1 : 0;
        if (!same_file) {
                f->last = e;
                f->last_file_backed =
                        proc_maps_entry_file_backed(&e) && strlen(e.path) < sizeof(f->last_path);
                if (f->last_file_backed)
                        strcpy(f->last_path, e.path);
                f->last.path = f->last_path;
        }
        if (f->run >= PROC_MAPS_SAME_FILE_RUN_MAX || f->kept >= PROC_MAPS_EXECUTABLE_MAX) {
                f->text->dropped++;
                return 0;
        }
        f->kept++;
        return text_append(f->text, line, len);
}

/* Reads fd (a maps file) through the filter, in blocks: the whole file is
 * never held (65,000 mappings are 5 MB of text). */
static int text_fill(ProcMapsText *t, int fd) {
        _cleanup_free_ TextFilter *f = calloc(1, sizeof(TextFilter));
        _cleanup_free_ char *block = NULL;
        size_t block_size = 65536 + PATH_MAX + 256, have = 0;

        if (!f)
                return -ENOMEM;
        block = malloc(block_size);
        if (!block)
                return -ENOMEM;
        f->text = t;
        t->size = t->dropped = 0;
        for (;;) {
                ssize_t k = read(fd, block + have, block_size - have);
                size_t pos = 0;
                int r;

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                have += (size_t) k;
                for (;;) {
                        char *nl = memchr(block + pos, '\n', have - pos);
                        if (!nl)
                                break;
                        r = filter_line(f, block + pos, (size_t) (nl - (block + pos)) + 1);
                        if (r < 0)
                                return r;
                        pos = (size_t) (nl - block) + 1;
                }
                if (k == 0 || (pos == 0 && have == block_size)) {
                        /* The end (a last line without '\n'), or a line
                         * longer than any the kernel writes: taken as is. */
                        if (have > pos) {
                                r = filter_line(f, block + pos, have - pos);
                                if (r < 0)
                                        return r;
                        }
                        if (k == 0)
                                return 0;
                        have = pos = 0;
                        continue;
                }
                memmove(block, block + pos, have - pos);
                have -= pos;
        }
}

int proc_maps_text_read(const char *proc_root, pid_t pid, ProcMapsText *t) {
        char path[PATH_MAX];
        _cleanup_close_ int fd = -EBADF;
        int r;

        if ((size_t) snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int) pid) >= sizeof(path))
                return t->error = -ENAMETOOLONG;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return t->error = negative_errno();
        r = text_fill(t, fd);
        t->error = r < 0 ? r : 0;
        return r;
}

/* ---- one read of /proc/PID/maps for the readers of one moment ---- */

struct ProcMapsCache {
        char *proc_root;
        pid_t pid;
        bool valid;
        ProcMapsText text;
        uint64_t reads, hits, put;
};

ProcMapsCache *proc_maps_cache_new(void) {
        return calloc(1, sizeof(ProcMapsCache));
}

ProcMapsCache *proc_maps_cache_free(ProcMapsCache *c) {
        if (!c)
                return NULL;
        free(c->proc_root);
        proc_maps_text_done(&c->text);
        free(c);
        return NULL;
}

void proc_maps_cache_clear(ProcMapsCache *c) {
        if (!c || !c->valid)
                return;
        c->valid = false;
        /* A large one is not kept around. */
        if (c->text.allocated > 1024 * 1024)
                proc_maps_text_done(&c->text);
}

void proc_maps_cache_stats(const ProcMapsCache *c, uint64_t *ret_reads, uint64_t *ret_hits,
                           uint64_t *ret_put) {
        *ret_reads = c ? c->reads : 0;
        *ret_hits = c ? c->hits : 0;
        *ret_put = c ? c->put : 0;
}

static int cache_set_root(ProcMapsCache *c, const char *proc_root) {
        if (c->proc_root && streq(c->proc_root, proc_root))
                return 0;
        free(c->proc_root);
        c->proc_root = strdup(proc_root);
        return c->proc_root ? 0 : -ENOMEM;
}

static bool cache_holds(const ProcMapsCache *c, const char *proc_root, pid_t pid) {
        return c->valid && c->pid == pid && c->proc_root && streq(c->proc_root, proc_root);
}

void proc_maps_cache_put(ProcMapsCache *c, const char *proc_root, pid_t pid, ProcMapsText *t) {
        c->valid = false;
        if (cache_set_root(c, proc_root) < 0) {
                proc_maps_text_done(t);
                return;
        }
        proc_maps_text_done(&c->text);
        c->text = *t;
        *t = (ProcMapsText){};
        c->pid = pid;
        c->valid = true;
        c->put++;
}

size_t proc_maps_cache_dropped(const ProcMapsCache *c, const char *proc_root, pid_t pid) {
        return c && cache_holds(c, proc_root, pid) ? c->text.dropped : 0;
}

static FILE *cache_open(ProcMapsCache *c) {
        if (c->text.error < 0) {
                errno = -c->text.error;
                return NULL;
        }
        /* An empty text: fmemopen() wants a size > 0 in older glibc. */
        return c->text.size > 0 ? fmemopen(c->text.buf, c->text.size, "r") : fopen("/dev/null", "re");
}

FILE *proc_maps_fopen(ProcMapsCache *c, const char *proc_root, pid_t pid) {
        char path[PATH_MAX];

        if (!c) {
                if ((size_t) snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int) pid) >=
                    sizeof(path)) {
                        errno = ENAMETOOLONG;
                        return NULL;
                }
                return fopen(path, "re");
        }
        if (cache_holds(c, proc_root, pid)) {
                c->hits++;
                return cache_open(c);
        }

        c->valid = false;
        if (cache_set_root(c, proc_root) < 0) {
                errno = ENOMEM;
                return NULL;
        }
        c->reads++;
        (void) proc_maps_text_read(proc_root, pid, &c->text);
        if (c->text.error == -ENOMEM) {
                errno = ENOMEM;
                return NULL; /* not kept: another try may fare better */
        }
        c->pid = pid;
        c->valid = true;
        return cache_open(c);
}
