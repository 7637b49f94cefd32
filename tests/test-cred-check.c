/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
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

DEFINE_TEST_MAIN
