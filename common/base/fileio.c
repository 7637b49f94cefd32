/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "fileio.h"

#define READ_FULL_FILE_MAX ((size_t) 64 * 1024 * 1024)

int open_regular_file(int dirfd, const char *path, uint64_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if (ret_size)
                *ret_size = (uint64_t) st.st_size;
        return TAKE_FD(fd);
}

static int read_full_file_flags(int dirfd, const char *path, size_t max, bool regular, char **ret,
                                size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, allocated = 0;

        if (!path || !ret)
                return -EINVAL;
        if (max == 0)
                max = READ_FULL_FILE_MAX;

        if (regular)
                fd = open_regular_file(dirfd, path, NULL);
        else {
                fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        fd = negative_errno();
        }
        if (fd < 0)
                return fd;

        /* Read until EOF rather than trusting st_size: procfs and sysfs files
         * report 0. */
        for (;;) {
                ssize_t k;

                if (allocated - len < 2) {
                        size_t a = allocated == 0 ? 4096 : allocated * 2;
                        char *b;

                        if (allocated >= max + 1)
                                return -EFBIG;
                        a = MIN(a, max + 2);
                        b = realloc(buf, a);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        allocated = a;
                }

                k = read(fd, buf + len, allocated - len - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                len += (size_t) k;
                if (len > max)
                        return -EFBIG;
        }

        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = len;
        return 0;
}

int read_full_file_max(int dirfd, const char *path, size_t max, char **ret, size_t *ret_size) {
        return read_full_file_flags(dirfd, path, max, false, ret, ret_size);
}

int read_regular_file_max(int dirfd, const char *path, size_t max, char **ret, size_t *ret_size) {
        return read_full_file_flags(dirfd, path, max, true, ret, ret_size);
}

int read_full_file_at(int dirfd, const char *path, char **ret, size_t *ret_size) {
        return read_full_file_max(dirfd, path, 0, ret, ret_size);
}

int read_full_file(const char *path, char **ret, size_t *ret_size) {
        return read_full_file_max(AT_FDCWD, path, 0, ret, ret_size);
}

int read_one_line_file(const char *path, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size;
        char *nl;
        int r;

        if (!ret)
                return -EINVAL;

        r = read_full_file(path, &buf, &size);
        if (r < 0)
                return r;

        nl = memchr(buf, '\n', size);
        if (nl)
                *nl = 0;

        *ret = TAKE_PTR(buf);
        return 0;
}

int write_string_file(const char *path, const char *s) {
        _cleanup_close_ int fd = -EBADF;
        size_t n;
        ssize_t k;

        if (!path || !s)
                return -EINVAL;

        /* No O_CREAT, no O_TRUNC: the file must exist (a sysctl, a cgroup
         * attribute), and it receives exactly one write() so that the kernel
         * parses the whole value at once. */
        fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();

        n = strlen(s);
        do
                k = write(fd, s, n);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return negative_errno();
        if ((size_t) k != n)
                return -EIO;

        if (close(TAKE_FD(fd)) < 0)
                return negative_errno();
        return 0;
}

static bool component_is_valid(const char *s, size_t n) {
        if (n == 0)
                return false;
        if (n == 1 && s[0] == '.')
                return false;
        if (n == 2 && s[0] == '.' && s[1] == '.')
                return false;
        return true;
}

/* Opens the directory 'name' (one component) below dirfd, without following
 * a symlink. */
static int open_dir_nofollow(int dirfd, const char *name) {
        struct stat st;
        int fd;

        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
                return fd;
        if (errno != ELOOP && errno != ENOTDIR)
                return negative_errno();

        /* O_NOFOLLOW|O_DIRECTORY on a symlink gives ELOOP or ENOTDIR depending
         * on the kernel: say -ELOOP for every symlink, -ENOTDIR for anything
         * else that is not a directory. */
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISLNK(st.st_mode))
                return -ELOOP;
        return -ENOTDIR;
}

static int walk_below(int dirfd, const char *relpath, bool create) {
        _cleanup_free_ char *copy = NULL;
        _cleanup_close_ int fd = -EBADF;
        char *p;

        if (!relpath || !*relpath || relpath[0] == '/')
                return -EINVAL;
        if (dirfd < 0 && dirfd != AT_FDCWD)
                return -EBADF;

        /* Check every component before creating anything. */
        for (const char *s = relpath;;) {
                size_t n = strcspn(s, "/");

                if (!component_is_valid(s, n))
                        return -EINVAL;
                if (s[n] == 0)
                        break;
                s += n + 1;
        }

        copy = strdup(relpath);
        if (!copy)
                return -ENOMEM;

        p = copy;
        for (;;) {
                char *slash = strchr(p, '/');
                int parent = fd >= 0 ? fd : dirfd;
                int nfd = -EBADF;

                if (slash)
                        *slash = 0;

                /* Try to open first, create on ENOENT. Someone else may create
                 * (EEXIST) or even remove the directory meanwhile: retry a few
                 * times. */
                for (unsigned attempt = 0;; attempt++) {
                        nfd = open_dir_nofollow(parent, p);
                        if (nfd != -ENOENT || attempt >= 3 || !create)
                                break;

                        if (mkdirat(parent, p, 0755) < 0 && errno != EEXIST)
                                return negative_errno();
                }
                if (nfd < 0)
                        return nfd;

                safe_close(fd);
                fd = nfd;

                if (!slash)
                        break;
                p = slash + 1;
        }

        return TAKE_FD(fd);
}

int mkdir_below(int dirfd, const char *relpath) {
        return walk_below(dirfd, relpath, true);
}

int open_dir_below(int dirfd, const char *relpath) {
        return walk_below(dirfd, relpath, false);
}

int mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *copy = NULL;
        struct stat st;
        char *p;

        if (!path || !*path)
                return -EINVAL;

        copy = strdup(path);
        if (!copy)
                return -ENOMEM;

        /* Create every prefix ending before a '/', then the path itself. */
        for (p = copy + strspn(copy, "/");; p++) {
                p += strcspn(p, "/");
                if (*p == 0)
                        break;

                *p = 0;
                if (mkdir(copy, mode) < 0 && errno != EEXIST)
                        return negative_errno();
                *p = '/';
                p += strspn(p, "/") - 1;
        }

        if (mkdir(copy, mode) >= 0)
                return 0;
        if (errno != EEXIST)
                return negative_errno();

        if (stat(copy, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        return 0;
}

static void random_suffix(char buf[static 7]) {
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        static uint64_t counter = 0;
        uint8_t bytes[6];
        uint64_t x = 0;

        if (getrandom(bytes, sizeof(bytes), GRND_NONBLOCK) != (ssize_t) sizeof(bytes)) {
                /* Uniqueness is enforced by O_EXCL; this only has to differ between attempts. */
                x = ((uint64_t) getpid() << 20) ^ __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) ^
                    (uint64_t) (uintptr_t) &x;
                for (size_t i = 0; i < sizeof(bytes); i++) {
                        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
                        bytes[i] = (uint8_t) (x >> 56);
                }
        }

        for (size_t i = 0; i < 6; i++)
                buf[i] = alphabet[bytes[i] % (sizeof(alphabet) - 1)];
        buf[6] = 0;
}

/* A FILE on an fd that remembers why a write failed: stdio keeps only an
 * error flag, and the writers report that as EIO, so a full disk would be
 * logged as an I/O error. */
typedef struct ErrnoStream {
        int fd;
        int error; /* errno of the first failed write, 0: none */
} ErrnoStream;

static ssize_t errno_stream_write(void *cookie, const char *buf, size_t size) {
        ErrnoStream *s = cookie;
        size_t done = 0;

        while (done < size) {
                ssize_t n = write(s->fd, buf + done, size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (s->error == 0)
                                s->error = errno;
                        return done > 0 ? (ssize_t) done : -1;
                }
                done += (size_t) n;
        }
        return (ssize_t) done;
}

static int errno_stream_close(void *cookie) {
        (void) cookie; /* the fd is closed by its owner */
        return 0;
}

int write_file_atomic_at(int dirfd, const char *name, WriteCallback cb, void *userdata) {
        /* fd before f: cleanups run in reverse, so the FILE (which may still
         * flush into fd) goes first. */
        _cleanup_close_ int fd = -EBADF;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *tmp = NULL;
        ErrnoStream stream = {};
        int r;

        if (!name || !cb || strchr(name, '/') || !component_is_valid(name, strlen(name)))
                return -EINVAL;

        for (unsigned attempt = 0;; attempt++) {
                char suffix[7];

                random_suffix(suffix);
                free(tmp);
                if (asprintf(&tmp, ".#%s.%s", name, suffix) < 0) {
                        tmp = NULL;
                        return -ENOMEM;
                }

                fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOCTTY, 0644);
                if (fd >= 0)
                        break;
                if (errno != EEXIST || attempt >= 16)
                        return negative_errno();
        }

        /* The mode does not depend on the umask: reports are meant to be read. */
        if (fchmod(fd, 0644) < 0) {
                r = negative_errno();
                goto fail;
        }

        stream.fd = fd;
        f = fopencookie(&stream, "w",
                        (cookie_io_functions_t){ .write = errno_stream_write, .close = errno_stream_close });
        if (!f) {
                r = negative_errno();
                goto fail;
        }

        r = cb(f, userdata);
        if (r >= 0) {
                errno = 0;
                if (fflush(f) != 0 || ferror(f))
                        r = errno > 0 ? -errno : -EIO;
        }
        if (stream.error != 0)
                r = -stream.error; /* the real reason (ENOSPC, EDQUOT, ...), not EIO */
        if (r < 0)
                goto fail;
        if (fsync(fd) < 0) {
                r = negative_errno();
                goto fail;
        }
        (void) fclose(TAKE_PTR(f));
        if (close(TAKE_FD(fd)) < 0) {
                r = negative_errno();
                goto fail;
        }

        if (renameat(dirfd, tmp, dirfd, name) < 0) {
                r = negative_errno();
                goto fail;
        }

        /* Make the rename durable too; best effort (dirfd may be an O_PATH fd). */
        if (dirfd >= 0)
                (void) fsync(dirfd);
        return 0;

fail:
        (void) unlinkat(dirfd, tmp, 0);
        return r;
}

static int write_string_cb(FILE *f, void *userdata) {
        if (fputs(userdata, f) == EOF)
                return negative_errno();
        return 0;
}

int write_string_file_atomic_at(int dirfd, const char *name, const char *s) {
        if (!s)
                return -EINVAL;
        return write_file_atomic_at(dirfd, name, write_string_cb, (void *) s);
}

/* Why the directory at 'dir' is not to be trusted, or NULL ('last': the
 * directory itself, not one above it). */
static int untrusted_reason(const char *dir, bool last, uid_t uid, const char **ret) {
        struct stat st;

        if (stat(dir, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                *ret = "not a directory";
        else if (st.st_uid != 0 && st.st_uid != uid)
                *ret = "owned by another user";
        else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && (last || !(st.st_mode & S_ISVTX)))
                /* Sticky above: only the owner (root or uid, checked for
                 * the next one) may rename or remove what lies in it. */
                *ret = last ? "writable by group or others" : "writable by group or others, and not sticky";
        else
                *ret = NULL;
        return 0;
}

int path_check_trusted(const char *path, uid_t uid, const char **ret_why, char **ret_where) {
        _cleanup_free_ char *real = realpath(path, NULL);
        size_t n;

        if (!real)
                return negative_errno();
        n = strlen(real);
        /* Each directory from "/" down: the prefixes that end before a '/', and the whole. */
        for (size_t i = 0; i <= n; i++) {
                _cleanup_free_ char *dir = NULL;
                const char *why;
                int r;

                if ((i > 0 && i < n && real[i] != '/') || (i == n && n == 1))
                        continue;
                dir = strndup(real, i == 0 ? 1 : i);
                if (!dir)
                        return -ENOMEM;
                r = untrusted_reason(dir, i == n, uid, &why);
                if (r < 0)
                        return r;
                if (why) {
                        *ret_why = why;
                        *ret_where = TAKE_PTR(dir);
                        return -EPERM;
                }
        }
        return 0;
}
