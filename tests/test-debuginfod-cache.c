/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "debuginfod-cache.h"
#include "tests.h"

TEST(build_id_valid) {
        ASSERT_TRUE(debuginfod_build_id_valid("ab"));
        ASSERT_TRUE(debuginfod_build_id_valid("d0a583126e50c1bf9edff7185d74fb10d3be85e2"));
        ASSERT_FALSE(debuginfod_build_id_valid(NULL));
        ASSERT_FALSE(debuginfod_build_id_valid(""));
        ASSERT_FALSE(debuginfod_build_id_valid("a"));
        ASSERT_FALSE(debuginfod_build_id_valid("abc"));
        ASSERT_FALSE(debuginfod_build_id_valid("AB"));
        ASSERT_FALSE(debuginfod_build_id_valid(".."));
        ASSERT_FALSE(debuginfod_build_id_valid("ab/cd"));
        ASSERT_FALSE(debuginfod_build_id_valid("cache_miss_s"));
        char long_id[131];
        memset(long_id, 'a', 130);
        long_id[130] = '\0';
        ASSERT_FALSE(debuginfod_build_id_valid(long_id));
        long_id[128] = '\0';
        ASSERT_TRUE(debuginfod_build_id_valid(long_id));
}

TEST(prune_plan) {
        const DebuginfodCacheFile files[] = {
                { "aa/debuginfo", 100, 50 }, /* 0 */
                { "bb/debuginfo", 300, 10 }, /* 1: least recently used */
                { "cc/debuginfo", 0, 1 }, /* 2: a negative entry: never chosen */
                { "dd/debuginfo", 200, 90 }, /* 3: most recently used */
                { "ee/debuginfo", 100, 50 }, /* 4: as old as aa: after it, by name */
        };
        _cleanup_free_ size_t *v = NULL;
        size_t n = 99;

        /* 700 bytes in all. Within the bound: nothing. */
        ASSERT_OK(debuginfod_cache_prune_plan(files, ELEMENTSOF(files), 700, &v, &n));
        ASSERT_EQ(n, 0);
        ASSERT_NULL(v);
        ASSERT_OK(debuginfod_cache_prune_plan(files, ELEMENTSOF(files), UINT64_MAX, &v, &n));
        ASSERT_EQ(n, 0);

        /* 699: the least recently used goes, and is enough. */
        ASSERT_OK(debuginfod_cache_prune_plan(files, ELEMENTSOF(files), 699, &v, &n));
        ASSERT_EQ(n, 1);
        ASSERT_EQ(v[0], 1);
        free(v);

        /* 300: bb (400 left), aa (300 left). */
        ASSERT_OK(debuginfod_cache_prune_plan(files, ELEMENTSOF(files), 300, &v, &n));
        ASSERT_EQ(n, 2);
        ASSERT_EQ(v[0], 1);
        ASSERT_EQ(v[1], 0);
        free(v);

        /* 250: then ee too (200 left: dd, the newest, stays). */
        ASSERT_OK(debuginfod_cache_prune_plan(files, ELEMENTSOF(files), 250, &v, &n));
        ASSERT_EQ(n, 3);
        ASSERT_EQ(v[2], 4);
        free(v);

        /* 0: every file with a size; the negative entry stays. */
        ASSERT_OK(debuginfod_cache_prune_plan(files, ELEMENTSOF(files), 0, &v, &n));
        ASSERT_EQ(n, 4);
        ASSERT_EQ(v[3], 3);
        for (size_t i = 0; i < n; i++)
                ASSERT_TRUE(v[i] != 2);
        free(v);
        v = NULL;

        /* Nothing, or only negative entries. */
        ASSERT_OK(debuginfod_cache_prune_plan(NULL, 0, 0, &v, &n));
        ASSERT_EQ(n, 0);
        ASSERT_OK(debuginfod_cache_prune_plan(files + 2, 1, 0, &v, &n));
        ASSERT_EQ(n, 0);
        ASSERT_ERROR(debuginfod_cache_prune_plan(NULL, 1, 0, &v, &n), EINVAL);
}

static void make_file(int dir_fd, const char *dir, const char *name, size_t size, time_t atime) {
        char path[256];
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = calloc(1, size + 1);

        ASSERT_NOT_NULL(buf);
        (void) mkdirat(dir_fd, dir, 0700);
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        fd = openat(dir_fd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0400);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(write(fd, buf, size), (ssize_t) size);
        struct timespec ts[2] = { { .tv_sec = atime }, { .tv_nsec = UTIME_OMIT } };
        ASSERT_EQ(futimens(fd, ts), 0);
}

static bool exists(int dir_fd, const char *path) {
        struct stat st;
        return fstatat(dir_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

TEST(prune_directory) {
        char tmp[] = "/tmp/test-debuginfod-cache.XXXXXX", cmd[128];
        _cleanup_close_ int dir_fd = -EBADF;
        DebuginfodCachePruneResult res;

        ASSERT_NOT_NULL(mkdtemp(tmp));
        dir_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dir_fd >= 0);

        make_file(dir_fd, "aa01", "debuginfo", 1000, 1000); /* oldest */
        make_file(dir_fd, "bb02", "debuginfo", 1000, 3000);
        make_file(dir_fd, "cc03", "debuginfo", 1000, 2000);
        make_file(dir_fd, "cc03", "debuginfo.Ab12Cd", 500, 500); /* a download cut short, long ago */
        make_file(dir_fd, "dd04", "debuginfo", 0, 10); /* a negative entry */
        /* Not the cache's to prune: libdebuginfod's settings, other names, symlinks. */
        ASSERT_EQ(mkdirat(dir_fd, "notes", 0700), 0);
        make_file(dir_fd, "notes", "big", 100000, 1);
        make_file(dir_fd, ".", "cache_miss_s", 3, 1);
        ASSERT_EQ(symlinkat("notes", dir_fd, "ee05"), 0);

        /* 3500 bytes: within 4000, nothing goes. */
        ASSERT_OK(debuginfod_cache_prune(dir_fd, 4000, &res));
        ASSERT_EQ(res.files, 5);
        ASSERT_EQ(res.bytes, 3500);
        ASSERT_EQ(res.removed, 0);

        /* 1500: the partial download, aa01 (its directory too), cc03. */
        ASSERT_OK(debuginfod_cache_prune(dir_fd, 1500, &res));
        ASSERT_EQ(res.removed, 3);
        ASSERT_EQ(res.removed_bytes, 2500);
        ASSERT_FALSE(exists(dir_fd, "cc03/debuginfo.Ab12Cd"));
        ASSERT_FALSE(exists(dir_fd, "aa01/debuginfo"));
        ASSERT_FALSE(exists(dir_fd, "aa01"));
        ASSERT_FALSE(exists(dir_fd, "cc03"));
        ASSERT_TRUE(exists(dir_fd, "bb02/debuginfo"));
        ASSERT_TRUE(exists(dir_fd, "dd04/debuginfo"));
        ASSERT_TRUE(exists(dir_fd, "notes/big"));
        ASSERT_TRUE(exists(dir_fd, "cache_miss_s"));
        ASSERT_TRUE(exists(dir_fd, "ee05"));

        /* 0: the rest with a size; the negative entry stays. */
        ASSERT_OK(debuginfod_cache_prune(dir_fd, 0, &res));
        ASSERT_EQ(res.removed, 1);
        ASSERT_FALSE(exists(dir_fd, "bb02"));
        ASSERT_TRUE(exists(dir_fd, "dd04/debuginfo"));
        ASSERT_TRUE(exists(dir_fd, "notes/big"));

        ASSERT_ERROR(debuginfod_cache_prune(-1, 0, &res), EBADF);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        ASSERT_EQ(system(cmd), 0);
}

DEFINE_TEST_MAIN
