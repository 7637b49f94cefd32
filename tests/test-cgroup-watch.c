/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The cgroup watch recovers from a failed read of its inotify fd: a new
 * inotify instance, a rescan that reports what the lost events said, and
 * every known directory watched again. read() and inotify_init1() are
 * wrapped at link time (-Wl,--wrap=...) to fail on demand; the tree is a
 * plain directory (inotify works the same there). */
#include <errno.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "cgroup-watch.h"
#include "tests.h"

static int inotify_fd = -1;
static int fail_reads, fail_inits;

ssize_t __real_read(int fd, void *buf, size_t n);
ssize_t __wrap_read(int fd, void *buf, size_t n) {
        if (fd == inotify_fd && fail_reads > 0) {
                fail_reads--;
                errno = EIO;
                return -1;
        }
        return __real_read(fd, buf, n);
}

int __real_inotify_init1(int flags);
int __wrap_inotify_init1(int flags) {
        if (fail_inits > 0) {
                fail_inits--;
                errno = EMFILE;
                return -1;
        }
        return inotify_fd = __real_inotify_init1(flags);
}

static char root[] = "/tmp/test-cgroup-watch.XXXXXX";
static int added, removed;

static void on_change(const char *path, bool add, void *userdata) {
        if (add)
                added++;
        else
                removed++;
}

static void mkdir_at(const char *rel) {
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", root, rel);
        ASSERT_OK(mkdir(p, 0755) < 0 ? -errno : 0);
}

static void rmdir_at(const char *rel) {
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", root, rel);
        ASSERT_OK(rmdir(p) < 0 ? -errno : 0);
}

/* Runs the loop until the watch knows (or no longer knows) path, 5 s at most. */
static bool run_until(sd_event *e, CgroupWatch *w, const char *path, bool known) {
        for (int i = 0; i < 50; i++) {
                if (cgroup_watch_has(w, path) == known)
                        return true;
                ASSERT_TRUE(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
        }
        return cgroup_watch_has(w, path) == known;
}

TEST(read_error_recovers) {
        _cleanup_(cgroup_watch_freep) CgroupWatch *w = NULL;
        sd_event *e = NULL;

        ASSERT_NOT_NULL(mkdtemp(root));
        mkdir_at("a");
        ASSERT_OK(sd_event_new(&e));
        ASSERT_OK(cgroup_watch_new(e, root, on_change, NULL, &w));
        ASSERT_EQ(cgroup_watch_count(w), 2);
        int first_fd = inotify_fd;

        /* The read that would have said "b was created" fails: the rescan finds b. */
        fail_reads = 1;
        mkdir_at("b");
        ASSERT_TRUE(run_until(e, w, "b", true));
        ASSERT_EQ(fail_reads, 0);
        ASSERT_TRUE(inotify_fd >= 0 && inotify_fd != first_fd); /* a new instance */

        /* The new instance watches the directories known before (a) and found by the rescan (b). */
        mkdir_at("a/x");
        ASSERT_TRUE(run_until(e, w, "a/x", true));
        mkdir_at("b/y");
        ASSERT_TRUE(run_until(e, w, "b/y", true));
        rmdir_at("a/x");
        ASSERT_TRUE(run_until(e, w, "a/x", false));

        /* No new instance to be had (EMFILE): it tries again from a timer (1 s). */
        fail_reads = 1;
        fail_inits = 1;
        mkdir_at("c");
        ASSERT_TRUE(run_until(e, w, "c", true));
        ASSERT_EQ(fail_inits, 0);
        mkdir_at("c/z");
        ASSERT_TRUE(run_until(e, w, "c/z", true));
        ASSERT_EQ(cgroup_watch_count(w), 6);
        ASSERT_EQ(removed, 1);

        w = cgroup_watch_free(w);
        sd_event_unref(e);
        rmdir_at("c/z");
        rmdir_at("c");
        rmdir_at("b/y");
        rmdir_at("b");
        rmdir_at("a");
        ASSERT_OK(rmdir(root) < 0 ? -errno : 0);
}

DEFINE_TEST_MAIN
