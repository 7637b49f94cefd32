/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cred-check.h"
#include "tests.h"

static const char STATUS[] = "Name:\tworkload\n"
                             "Umask:\t0022\n"
                             "State:\tR (running)\n"
                             "Uid:\t1000\t1001\t1002\t1003\n"
                             "Gid:\t2000\t2001\t2002\t2003\n"
                             "FDSize:\t64\n"
                             "Groups:\t24 27 100 \n"
                             "NStgid:\t42\n";

TEST(parse_status) {
        Creds c = {};

        ASSERT_OK(creds_parse_status(STATUS, &c));
        /* The filesystem IDs, the last of the four. */
        ASSERT_EQ(c.uid, (uid_t) 1003);
        ASSERT_EQ(c.gid, (gid_t) 2003);
        ASSERT_EQ(c.n_groups, (size_t) 3);
        ASSERT_EQ(c.groups[0], (gid_t) 24);
        ASSERT_EQ(c.groups[2], (gid_t) 100);
        creds_done(&c);
        ASSERT_NULL(c.groups);
        creds_done(&c);
}

TEST(parse_status_no_groups) {
        Creds c = {};

        ASSERT_OK(creds_parse_status("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n", &c));
        ASSERT_EQ(c.uid, (uid_t) 0);
        ASSERT_EQ(c.n_groups, (size_t) 0);
        creds_done(&c);
        /* The last line, without its newline. */
        ASSERT_OK(creds_parse_status("Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:", &c));
        ASSERT_EQ(c.uid, (uid_t) 5);
        ASSERT_EQ(c.n_groups, (size_t) 0);
        creds_done(&c);
}

TEST(parse_status_malformed) {
        Creds c = {};

        ASSERT_ERROR(creds_parse_status("", &c), EBADMSG);
        /* No Groups: line. */
        ASSERT_ERROR(creds_parse_status("Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n", &c), EBADMSG);
        /* Three fields only. */
        ASSERT_ERROR(creds_parse_status("Uid:\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\n", &c), EBADMSG);
        ASSERT_ERROR(creds_parse_status("Uid:\t1\t1\t1\tx\nGid:\t1\t1\t1\t1\nGroups:\n", &c), EBADMSG);
        /* (uid_t) -1 is nobody's ID, and larger ones are none. */
        ASSERT_ERROR(creds_parse_status("Uid:\t1\t1\t1\t4294967295\nGid:\t1\t1\t1\t1\nGroups:\n", &c),
                     EBADMSG);
        ASSERT_ERROR(creds_parse_status("Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t1 -2\n", &c), EBADMSG);
        /* "XUid:" is not "Uid:". */
        ASSERT_ERROR(creds_parse_status("XUid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\n", &c), EBADMSG);
        ASSERT_ERROR(creds_parse_status(NULL, &c), EINVAL);
}

static struct stat file(uid_t uid, gid_t gid, mode_t mode) {
        return (struct stat){ .st_uid = uid, .st_gid = gid, .st_mode = S_IFREG | mode };
}

TEST(can_read) {
        gid_t groups[] = { 24, 100 };
        Creds user = { .uid = 1000, .gid = 1000, .groups = groups, .n_groups = 2 };
        Creds root = { .uid = 0, .gid = 0 };
        struct stat st;

        /* A root-only file: not for the user, for root. */
        st = file(0, 0, 0600);
        ASSERT_FALSE(creds_can_read(&user, &st));
        ASSERT_TRUE(creds_can_read(&root, &st));
        st = file(0, 0, 0000);
        ASSERT_TRUE(creds_can_read(&root, &st));

        /* World-readable. */
        st = file(0, 0, 0644);
        ASSERT_TRUE(creds_can_read(&user, &st));
        st = file(0, 0, 0004);
        ASSERT_TRUE(creds_can_read(&user, &st));

        /* Its own. */
        st = file(1000, 1000, 0400);
        ASSERT_TRUE(creds_can_read(&user, &st));
        /* Its own, owner bits without r: refused even though others may. */
        st = file(1000, 5, 0044);
        ASSERT_FALSE(creds_can_read(&user, &st));

        /* Primary group, supplementary group, another group. */
        st = file(0, 1000, 0640);
        ASSERT_TRUE(creds_can_read(&user, &st));
        st = file(0, 100, 0640);
        ASSERT_TRUE(creds_can_read(&user, &st));
        st = file(0, 24, 0040);
        ASSERT_TRUE(creds_can_read(&user, &st));
        st = file(0, 42, 0640);
        ASSERT_FALSE(creds_can_read(&user, &st));
        /* A group member without the group's r: the others' bits do not help. */
        st = file(0, 100, 0604);
        ASSERT_FALSE(creds_can_read(&user, &st));

        /* Someone else's, group and others without r. */
        st = file(1001, 1001, 0600);
        ASSERT_FALSE(creds_can_read(&user, &st));

        ASSERT_FALSE(creds_can_read(NULL, &st));
        ASSERT_FALSE(creds_can_read(&user, NULL));

        /* Searching a directory: the x bits, by the same classes. */
        st = file(0, 0, 0700);
        ASSERT_FALSE(creds_can_search(&user, &st));
        ASSERT_TRUE(creds_can_search(&root, &st));
        st = file(0, 0, 0711);
        ASSERT_TRUE(creds_can_search(&user, &st));
        st = file(0, 100, 0750);
        ASSERT_TRUE(creds_can_search(&user, &st));
        st = file(1000, 0, 0677);
        ASSERT_FALSE(creds_can_search(&user, &st));
        st = file(0, 0, 0744);
        ASSERT_FALSE(creds_can_search(&user, &st));
}

TEST(from_pid_self) {
        Creds c = {};

        ASSERT_OK(creds_from_pid("/proc", getpid(), &c));
        ASSERT_EQ(c.uid, getuid()); /* no setfsuid() here */
        ASSERT_EQ(c.gid, getgid());
        creds_done(&c);
        ASSERT_ERROR(creds_from_pid("/proc", 0x7ffffffe, &c), ESRCH);
}

TEST(check_fd) {
        Creds nobody = { .uid = 65534, .gid = 65534 };
        char path[] = "/tmp/test-cred-check.XXXXXX";
        int fd = mkstemp(path);

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(fchmod(fd, 0600));
        if (geteuid() == 65534)
                ASSERT_OK(creds_check_fd(&nobody, fd));
        else
                ASSERT_ERROR(creds_check_fd(&nobody, fd), EACCES);
        ASSERT_OK(fchmod(fd, 0644));
        ASSERT_OK(creds_check_fd(&nobody, fd));
        ASSERT_ERROR(creds_check_fd(&nobody, -1), EBADF);
        (void) unlink(path);
        close(fd);
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static void mk(int dfd, const char *path, mode_t mode) {
        ASSERT_EQ(mkdirat(dfd, path, 0755), 0);
        ASSERT_EQ(fchmodat(dfd, path, mode, 0), 0);
}

static void put(int dfd, const char *path, mode_t mode) {
        int fd = openat(dfd, path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);

        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(write(fd, "x", 1) == 1);
        ASSERT_OK(fchmod(fd, mode));
        close(fd);
}

static void assert_same_file(int fd, int dfd, const char *path) {
        struct stat a, b;

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(fstat(fd, &a));
        ASSERT_OK(fstatat(dfd, path, &b, 0));
        ASSERT_EQ(a.st_ino, b.st_ino);
        close(fd);
}

TEST(open_in_root) {
        /* A fake root: what a user in its own mount namespace could plant.
         * The test's own UID owns everything; "user" is someone else. */
        Creds user = { .uid = 4000001, .gid = 4000001 }; /* nobody here */
        Creds owner = { .uid = getuid(), .gid = getgid() };
        char t[] = "/tmp/test-cred-check-root.XXXXXX";
        int root;

        ASSERT_NOT_NULL(mkdtemp(t));
        ASSERT_OK(chmod(t, 0755));
        root = open(t, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(root >= 0);

        mk(root, "usr", 0755);
        mk(root, "usr/lib", 0755);
        put(root, "usr/lib/open.debug", 0644);
        put(root, "usr/lib/secret.debug", 0600);
        mk(root, "private", 0700);
        put(root, "private/readable.debug", 0644);
        ASSERT_OK(symlinkat("/usr/lib/open.debug", root, "usr/abs"));
        ASSERT_OK(symlinkat("lib/open.debug", root, "usr/rel"));
        ASSERT_OK(symlinkat("../../../../usr/lib/open.debug", root, "usr/dotdot"));
        ASSERT_OK(symlinkat("/usr/lib/secret.debug", root, "usr/to-secret"));
        ASSERT_OK(symlinkat("/private/readable.debug", root, "usr/to-private"));
        ASSERT_OK(symlinkat("/usr/loop", root, "usr/loop"));
        ASSERT_OK(symlinkat("/usr/lib", root, "usr/libdir"));
        ASSERT_OK(symlinkat("/etc/passwd", root, "usr/outside")); /* not in the fake root */

        /* Readable, through absolute, relative and ".." symlinks (".." of
         * the root stays there) and a symlinked directory. */
        assert_same_file(creds_open_in_root(&user, root, "/usr/lib/open.debug"), root, "usr/lib/open.debug");
        assert_same_file(creds_open_in_root(&user, root, "usr/abs"), root, "usr/lib/open.debug");
        assert_same_file(creds_open_in_root(&user, root, "/usr/rel"), root, "usr/lib/open.debug");
        assert_same_file(creds_open_in_root(&user, root, "/usr/dotdot"), root, "usr/lib/open.debug");
        assert_same_file(creds_open_in_root(&user, root, "/../usr/./libdir//open.debug"), root,
                         "usr/lib/open.debug");

        /* Its mode, or a directory on the way, shuts the user out; not its owner. */
        ASSERT_ERROR(creds_open_in_root(&user, root, "/usr/to-secret"), EACCES);
        ASSERT_ERROR(creds_open_in_root(&user, root, "/usr/to-private"), EACCES);
        ASSERT_ERROR(creds_open_in_root(&user, root, "/private/readable.debug"), EACCES);
        assert_same_file(creds_open_in_root(&owner, root, "/usr/to-secret"), root, "usr/lib/secret.debug");
        assert_same_file(creds_open_in_root(&owner, root, "/usr/to-private"), root,
                         "private/readable.debug");

        /* Loops, directories, what is not there. */
        ASSERT_ERROR(creds_open_in_root(&user, root, "/usr/loop"), ELOOP);
        ASSERT_ERROR(creds_open_in_root(&user, root, "/usr/lib"), EBADFD);
        ASSERT_ERROR(creds_open_in_root(&user, root, "/"), EISDIR);
        ASSERT_ERROR(creds_open_in_root(&user, root, "/usr/lib/open.debug/x"), ENOTDIR);
        ASSERT_ERROR(creds_open_in_root(&user, root, "/usr/outside"), ENOENT);
        ASSERT_ERROR(creds_open_in_root(&user, root, "/nothing"), ENOENT);

        close(root);
        ASSERT_EQ(nftw(t, rm_cb, 16, FTW_DEPTH | FTW_PHYS), 0);
}

DEFINE_TEST_MAIN
