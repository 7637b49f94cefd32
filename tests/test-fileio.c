/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include "fileio.h"
#include "tests.h"

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static void rm_rf(const char *path) {
        (void) nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void rm_rfp(char **p) {
        if (*p) {
                rm_rf(*p);
                free(*p);
        }
}

/* A fresh temporary directory, removed with everything below it at scope exit. */
#define _cleanup_tmpdir_ _cleanup_(rm_rfp)
static char *make_tmpdir(void) {
        char *t = strdup("/tmp/test-fileio.XXXXXX");

        ASSERT_NOT_NULL(t);
        ASSERT_NOT_NULL(mkdtemp(t));
        return t;
}

static size_t count_entries(int dirfd, const char *prefix) {
        _cleanup_close_ int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct dirent *de;
        size_t n = 0;
        DIR *d;

        ASSERT_TRUE(fd >= 0);
        d = fdopendir(TAKE_FD(fd));
        ASSERT_NOT_NULL(d);
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") &&
                    (!prefix || strncmp(de->d_name, prefix, strlen(prefix)) == 0))
                        n++;
        closedir(d);
        return n;
}

TEST(read_full_file) {
        _cleanup_tmpdir_ char *t = make_tmpdir();
        _cleanup_free_ char *p = NULL, *buf = NULL, *line = NULL;
        _cleanup_close_ int dfd = -EBADF;
        size_t size = 0;
        FILE *f;

        ASSERT_TRUE(asprintf(&p, "%s/file", t) > 0);
        f = fopen(p, "we");
        ASSERT_NOT_NULL(f);
        fputs("first line\nsecond\n", f);
        fclose(f);

        ASSERT_OK(read_full_file(p, &buf, &size));
        ASSERT_EQ(size, 18);
        ASSERT_STREQ(buf, "first line\nsecond\n");
        free(buf);
        buf = NULL;

        dfd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(read_full_file_at(dfd, "file", &buf, NULL));
        ASSERT_STREQ(buf, "first line\nsecond\n");

        ASSERT_OK(read_one_line_file(p, &line));
        ASSERT_STREQ(line, "first line");

        ASSERT_ERROR(read_full_file_at(dfd, "missing", &buf, NULL), ENOENT);

        /* procfs reports size 0: read until EOF anyway. */
        _cleanup_free_ char *stat = NULL;
        ASSERT_OK(read_full_file("/proc/self/stat", &stat, &size));
        ASSERT_TRUE(size > 10);
        ASSERT_EQ(strlen(stat), size);

        /* Larger than the first buffer. */
        _cleanup_free_ char *big = NULL, *bigp = NULL, *back = NULL;
        big = malloc(100000);
        ASSERT_NOT_NULL(big);
        for (size_t i = 0; i < 99999; i++)
                big[i] = (char) ('a' + i % 26);
        big[99999] = 0;
        ASSERT_OK(write_string_file_atomic_at(dfd, "big", big));
        ASSERT_OK(read_full_file_at(dfd, "big", &back, &size));
        ASSERT_EQ(size, 99999);
        ASSERT_STREQ(back, big);

        /* A file without newline. */
        ASSERT_OK(write_string_file_atomic_at(dfd, "nonl", "value"));
        _cleanup_free_ char *nonl = NULL;
        ASSERT_TRUE(asprintf(&bigp, "%s/nonl", t) > 0);
        ASSERT_OK(read_one_line_file(bigp, &nonl));
        ASSERT_STREQ(nonl, "value");
}

TEST(read_regular_file) {
        _cleanup_tmpdir_ char *t = make_tmpdir();
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int dfd = -EBADF;
        size_t size = 0;

        dfd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(write_string_file_atomic_at(dfd, "summary.json", "{\"a\":1}"));
        ASSERT_OK(read_regular_file_max(dfd, "summary.json", 64, &buf, &size));
        ASSERT_STREQ(buf, "{\"a\":1}");
        ASSERT_EQ(size, 7);

        /* Too big, a symlink (even to a good file), a FIFO (without
         * blocking: nobody writes to it), a directory. */
        ASSERT_ERROR(read_regular_file_max(dfd, "summary.json", 6, &buf, NULL), EFBIG);
        ASSERT_EQ(symlinkat("summary.json", dfd, "link"), 0);
        ASSERT_ERROR(read_regular_file_max(dfd, "link", 64, &buf, NULL), ELOOP);
        ASSERT_EQ(mkfifoat(dfd, "fifo", 0600), 0);
        ASSERT_ERROR(read_regular_file_max(dfd, "fifo", 64, &buf, NULL), EBADFD);
        ASSERT_ERROR(read_regular_file_max(dfd, ".", 64, &buf, NULL), EBADFD);
        ASSERT_ERROR(read_regular_file_max(dfd, "missing", 64, &buf, NULL), ENOENT);
        /* The buffer of the first read is untouched by the failures. */
        ASSERT_STREQ(buf, "{\"a\":1}");
}

TEST(write_string_file) {
        _cleanup_tmpdir_ char *t = make_tmpdir();
        _cleanup_free_ char *p = NULL, *buf = NULL, *missing = NULL;
        FILE *f;

        ASSERT_TRUE(asprintf(&p, "%s/sysctl", t) > 0);
        ASSERT_TRUE(asprintf(&missing, "%s/missing", t) > 0);

        /* Never creates a file. */
        ASSERT_ERROR(write_string_file(missing, "1"), ENOENT);
        ASSERT_EQ(access(missing, F_OK), -1);

        f = fopen(p, "we");
        ASSERT_NOT_NULL(f);
        fputs("x", f);
        fclose(f);

        /* Exactly the string, no newline added. */
        ASSERT_OK(write_string_file(p, "2"));
        ASSERT_OK(read_full_file(p, &buf, NULL));
        ASSERT_STREQ(buf, "2");
        free(buf);
        buf = NULL;

        ASSERT_OK(write_string_file(p, "-1\n"));
        ASSERT_OK(read_full_file(p, &buf, NULL));
        ASSERT_STREQ(buf, "-1\n");
}

static int write_hello(FILE *f, void *userdata) {
        fprintf(f, "hello %s\n", (const char *) userdata);
        return 0;
}

static int write_then_fail(FILE *f, void *userdata) {
        /* More than a stdio buffer, so part of it reaches the temporary file. */
        for (int i = 0; i < 10000; i++)
                fputs("partial data ", f);
        return -EBADMSG;
}

TEST(write_file_atomic) {
        _cleanup_tmpdir_ char *t = make_tmpdir();
        _cleanup_close_ int dfd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        mode_t old_umask;

        dfd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0);

        old_umask = umask(077);
        ASSERT_OK(write_file_atomic_at(dfd, "summary.json", write_hello, (void *) "world"));
        umask(old_umask);

        ASSERT_OK(read_full_file_at(dfd, "summary.json", &buf, NULL));
        ASSERT_STREQ(buf, "hello world\n");
        ASSERT_EQ(count_entries(dfd, NULL), 1); /* no temporary file left */
        ASSERT_EQ(fstatat(dfd, "summary.json", &st, 0), 0);
        ASSERT_EQ(st.st_mode & 07777, 0644);

        /* A failing callback leaves the old file and no temporary file. */
        ASSERT_ERROR(write_file_atomic_at(dfd, "summary.json", write_then_fail, NULL), EBADMSG);
        free(buf);
        buf = NULL;
        ASSERT_OK(read_full_file_at(dfd, "summary.json", &buf, NULL));
        ASSERT_STREQ(buf, "hello world\n");
        ASSERT_EQ(count_entries(dfd, ".#"), 0);
        ASSERT_EQ(count_entries(dfd, NULL), 1);

        /* ... and creates nothing when there was no file. */
        ASSERT_ERROR(write_file_atomic_at(dfd, "new", write_then_fail, NULL), EBADMSG);
        ASSERT_EQ(count_entries(dfd, NULL), 1);

        /* Replaces an existing file. */
        ASSERT_OK(write_string_file_atomic_at(dfd, "summary.json", "{}\n"));
        free(buf);
        buf = NULL;
        ASSERT_OK(read_full_file_at(dfd, "summary.json", &buf, NULL));
        ASSERT_STREQ(buf, "{}\n");
        ASSERT_EQ(count_entries(dfd, NULL), 1);

        /* Only a plain name. */
        ASSERT_ERROR(write_string_file_atomic_at(dfd, "a/b", "x"), EINVAL);
        ASSERT_ERROR(write_string_file_atomic_at(dfd, "..", "x"), EINVAL);
        ASSERT_ERROR(write_string_file_atomic_at(dfd, "", "x"), EINVAL);

        /* A failure to create the temporary file. */
        ASSERT_ERROR(write_string_file_atomic_at(-1, "x", "x"), EBADF);
}

TEST(write_file_atomic_replaces_symlink) {
        _cleanup_tmpdir_ char *t = make_tmpdir(), *outside = make_tmpdir();
        _cleanup_close_ int dfd = -EBADF, ofd = -EBADF;
        _cleanup_free_ char *target = NULL;
        struct stat st;

        dfd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ofd = open(outside, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0 && ofd >= 0);

        /* The rename replaces a symlink at the name; it never writes through it. */
        ASSERT_TRUE(asprintf(&target, "%s/victim", outside) > 0);
        ASSERT_EQ(symlinkat(target, dfd, "profile.folded"), 0);
        ASSERT_OK(write_string_file_atomic_at(dfd, "profile.folded", "a 1\n"));
        ASSERT_EQ(fstatat(dfd, "profile.folded", &st, AT_SYMLINK_NOFOLLOW), 0);
        ASSERT_TRUE(S_ISREG(st.st_mode));
        ASSERT_EQ(count_entries(ofd, NULL), 0);
}

TEST(mkdir_below) {
        _cleanup_tmpdir_ char *t = make_tmpdir();
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF, fd2 = -EBADF;
        struct stat st;

        dfd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0);

        fd = mkdir_below(dfd, "ns/pod/container/123_abc");
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(write_string_file_atomic_at(fd, "x", "y"));
        ASSERT_EQ(fstatat(dfd, "ns/pod/container/123_abc/x", &st, AT_SYMLINK_NOFOLLOW), 0);
        ASSERT_EQ(fstatat(dfd, "ns/pod", &st, 0), 0);
        ASSERT_EQ(st.st_mode & 0777, 0755 & ~({
                                             mode_t m = umask(0);
                                             umask(m);
                                             m;
                                     }));

        /* Existing directories are fine. */
        fd2 = mkdir_below(dfd, "ns/pod");
        ASSERT_TRUE(fd2 >= 0);

        /* Refusals, before creating anything. */
        ASSERT_ERROR(mkdir_below(dfd, "a/../b"), EINVAL);
        ASSERT_ERROR(mkdir_below(dfd, ".."), EINVAL);
        ASSERT_ERROR(mkdir_below(dfd, "a/./b"), EINVAL);
        ASSERT_ERROR(mkdir_below(dfd, "."), EINVAL);
        ASSERT_ERROR(mkdir_below(dfd, "a//b"), EINVAL);
        ASSERT_ERROR(mkdir_below(dfd, "a/"), EINVAL);
        ASSERT_ERROR(mkdir_below(dfd, ""), EINVAL);
        ASSERT_ERROR(mkdir_below(dfd, "/tmp/x"), EINVAL);
        ASSERT_ERROR(mkdir_below(dfd, NULL), EINVAL);
        ASSERT_EQ(fstatat(dfd, "a", &st, 0), -1);
        ASSERT_EQ(count_entries(dfd, NULL), 1);

        /* A file in the way. */
        ASSERT_OK(write_string_file_atomic_at(dfd, "file", "x"));
        ASSERT_ERROR(mkdir_below(dfd, "file/sub"), ENOTDIR);
        ASSERT_ERROR(mkdir_below(dfd, "file"), ENOTDIR);
}

TEST(mkdir_below_symlink) {
        _cleanup_tmpdir_ char *t = make_tmpdir(), *outside = make_tmpdir();
        _cleanup_close_ int dfd = -EBADF, ofd = -EBADF;
        _cleanup_free_ char *dangling = NULL;

        dfd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ofd = open(outside, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0 && ofd >= 0);

        /* A symlink to a directory outside, as the first and as a later component. */
        ASSERT_EQ(symlinkat(outside, dfd, "evil"), 0);
        ASSERT_ERROR(mkdir_below(dfd, "evil"), ELOOP);
        ASSERT_ERROR(mkdir_below(dfd, "evil/sub/dir"), ELOOP);
        ASSERT_EQ(mkdirat(dfd, "ns", 0755), 0);
        ASSERT_EQ(symlinkat(outside, dfd, "ns/pod"), 0);
        ASSERT_ERROR(mkdir_below(dfd, "ns/pod/container"), ELOOP);

        /* A dangling symlink: mkdirat must not create its target. */
        ASSERT_TRUE(asprintf(&dangling, "%s/created", outside) > 0);
        ASSERT_EQ(symlinkat(dangling, dfd, "dangling"), 0);
        ASSERT_ERROR(mkdir_below(dfd, "dangling/x"), ELOOP);

        /* A symlink to a file. */
        ASSERT_EQ(symlinkat("/etc/hostname", dfd, "tofile"), 0);
        ASSERT_ERROR(mkdir_below(dfd, "tofile"), ELOOP);

        /* Nothing was created outside. */
        ASSERT_EQ(count_entries(ofd, NULL), 0);
}

TEST(mkdir_p) {
        _cleanup_tmpdir_ char *t = make_tmpdir();
        _cleanup_free_ char *p = NULL, *q = NULL, *f = NULL;
        struct stat st;

        ASSERT_TRUE(asprintf(&p, "%s/a/b//c/", t) > 0);
        ASSERT_OK(mkdir_p(p, 0755));
        ASSERT_OK(mkdir_p(p, 0755)); /* exists */
        ASSERT_TRUE(asprintf(&q, "%s/a/b/c", t) > 0);
        ASSERT_EQ(stat(q, &st), 0);
        ASSERT_TRUE(S_ISDIR(st.st_mode));

        ASSERT_TRUE(asprintf(&f, "%s/a/file", t) > 0);
        ASSERT_EQ(close(open(f, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)), 0);
        ASSERT_ERROR(mkdir_p(f, 0755), ENOTDIR);
        free(f);
        f = NULL;
        ASSERT_TRUE(asprintf(&f, "%s/a/file/sub", t) > 0);
        ASSERT_ERROR(mkdir_p(f, 0755), ENOTDIR);

        ASSERT_ERROR(mkdir_p("", 0755), EINVAL);
        ASSERT_OK(mkdir_p("/", 0755));
}

TEST(path_check_trusted) {
        _cleanup_tmpdir_ char *t = make_tmpdir(); /* 0700, in the sticky /tmp */
        _cleanup_free_ char *a = NULL, *ab = NULL, *where = NULL;
        const char *why = NULL;
        uid_t uid = geteuid();

        ASSERT_TRUE(asprintf(&a, "%s/a", t) > 0);
        ASSERT_TRUE(asprintf(&ab, "%s/a/b", t) > 0);
        ASSERT_OK(mkdir(a, 0755));
        ASSERT_OK(mkdir(ab, 0755));
        ASSERT_OK(path_check_trusted(ab, uid, &why, &where));

        /* The directory itself writable by others. */
        ASSERT_OK(chmod(ab, 0775));
        ASSERT_ERROR(path_check_trusted(ab, uid, &why, &where), EPERM);
        ASSERT_STREQ(where, ab);
        ASSERT_STREQ(why, "writable by group or others");
        where = mfree(where);
        ASSERT_OK(chmod(ab, 0755));

        /* One above it writable by others: not sticky, refused; sticky, trusted. */
        ASSERT_OK(chmod(a, 0777));
        ASSERT_ERROR(path_check_trusted(ab, uid, &why, &where), EPERM);
        ASSERT_STREQ(where, a);
        ASSERT_STREQ(why, "writable by group or others, and not sticky");
        where = mfree(where);
        ASSERT_OK(chmod(a, 01777));
        ASSERT_OK(path_check_trusted(ab, uid, &why, &where));

        /* Through a symlink: its target is what is checked. */
        _cleanup_free_ char *link = NULL;
        ASSERT_TRUE(asprintf(&link, "%s/link", t) > 0);
        ASSERT_OK(symlink(ab, link));
        ASSERT_OK(path_check_trusted(link, uid, &why, &where));
        ASSERT_OK(chmod(ab, 0757));
        ASSERT_ERROR(path_check_trusted(link, uid, &why, &where), EPERM);
        ASSERT_STREQ(where, ab);
        where = mfree(where);
        ASSERT_OK(chmod(ab, 0755));

        /* Owned by another user (root only can chown). */
        if (uid == 0) {
                ASSERT_OK(chown(ab, 65534, 65534));
                ASSERT_ERROR(path_check_trusted(ab, 0, &why, &where), EPERM);
                ASSERT_STREQ(why, "owned by another user");
                where = mfree(where);
                ASSERT_OK(path_check_trusted(ab, 65534, &why, &where));
        }
        ASSERT_ERROR(path_check_trusted("/nonexistent/x", uid, &why, &where), ENOENT);
}

DEFINE_TEST_MAIN
