/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <sys/stat.h>

#include "cgroup-util.h"
#include "tests.h"

static char *write_tmp(const char *content) {
        char *path = strdup("/tmp/test-cgroup-util.XXXXXX");
        int fd = mkstemp(path);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(write(fd, content, strlen(content)), (long long) strlen(content));
        close(fd);
        return path;
}

TEST(find_unified_root_hybrid) {
        _cleanup_free_ char *p =
                write_tmp("31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                          "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
                          "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n");
        _cleanup_free_ char *root = NULL;
        ASSERT_OK(cg_find_unified_root(p, &root));
        ASSERT_STREQ(root, "/sys/fs/cgroup/unified");
        unlink(p);
}

TEST(find_unified_root_unified_escaped) {
        _cleanup_free_ char *p =
                write_tmp("50 23 0:40 /sub /mnt/bind rw - cgroup2 cgroup2 rw\n"
                          "51 23 0:40 / /sys/fs/my\\040cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
        _cleanup_free_ char *root = NULL;
        ASSERT_OK(cg_find_unified_root(p, &root));
        ASSERT_STREQ(root, "/sys/fs/my cgroup");
        unlink(p);
}

TEST(find_unified_root_relative) {
        /* Not a mount point the kernel writes: skipped, the next one is taken. */
        _cleanup_free_ char *p = write_tmp("35 24 0:30 / 1root rw,relatime - cgroup2 none rw\n"
                                           "36 24 0:30 / /sys/fs/cgroup rw,relatime - cgroup2 none rw\n");
        _cleanup_free_ char *root = NULL;
        ASSERT_OK(cg_find_unified_root(p, &root));
        ASSERT_STREQ(root, "/sys/fs/cgroup");
        unlink(p);
}

TEST(find_unified_root_none) {
        _cleanup_free_ char *p =
                write_tmp("32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n");
        char *root = NULL;
        ASSERT_ERROR(cg_find_unified_root(p, &root), ENOENT);
        ASSERT_NULL(root);
        unlink(p);
}

TEST(live_root_and_id) {
        _cleanup_free_ char *root = NULL;
        if (cg_find_unified_root(NULL, &root) < 0)
                TEST_SKIP("no cgroup2 mount");
        _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        uint64_t id;
        ASSERT_OK(cg_get_id_at(fd, "", &id));
        /* The root cgroup's ID is 1 on every kernel with kernfs node IDs. */
        ASSERT_EQ(id, 1);
        uint64_t usage;
        ASSERT_OK(cg_read_cpu_usage_usec(fd, &usage));
}

DEFINE_TEST_MAIN
