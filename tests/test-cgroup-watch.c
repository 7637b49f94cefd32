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

/* ---- the tree: what a walk below a cgroup sees, and removals of subtrees ---- */

typedef struct Log {
        char paths[64][64];
        bool added[64];
        size_t n;
} Log;

static void on_log(const char *path, bool add, void *userdata) {
        Log *l = userdata;
        ASSERT_TRUE(l->n < ELEMENTSOF(l->paths));
        snprintf(l->paths[l->n], sizeof(l->paths[l->n]), "%s", path);
        l->added[l->n++] = add;
}

static void log_path(const char *path, void *userdata) {
        on_log(path, true, userdata);
}

static ssize_t log_index(const Log *l, size_t from, const char *path) {
        for (size_t i = from; i < l->n; i++)
                if (streq(l->paths[i], path))
                        return (ssize_t) i;
        return -1;
}

/* Entries from..n of the log are want (each once, nothing else, all added
 * or all removed), parents before children (or, removed, after). */
static void check_log(const Log *l, size_t from, const char *const *want, bool added) {
        size_t n = 0;

        for (; want[n]; n++)
                ASSERT_TRUE(log_index(l, from, want[n]) >= 0);
        ASSERT_EQ(l->n - from, n);
        for (size_t i = from; i < l->n; i++) {
                char parent[64];
                char *slash;
                ssize_t k;

                ASSERT_EQ(l->added[i], added);
                snprintf(parent, sizeof(parent), "%s", l->paths[i]);
                slash = strrchr(parent, '/');
                if (!slash)
                        continue;
                *slash = 0;
                k = log_index(l, from, parent);
                if (k >= 0)
                        ASSERT_TRUE(added ? k < (ssize_t) i : k > (ssize_t) i);
        }
}

/* The cgroups cgroup_watch_foreach_below() walks. */
static void check_below(const CgroupWatch *w, const char *path, const char *const *want) {
        Log l = {};

        cgroup_watch_foreach_below(w, path, log_path, &l);
        check_log(&l, 0, want, true);
}

/* Runs the loop until the log has n entries (5 s at most), and a little more for any extra. */
static void run_until_logged(sd_event *e, const Log *l, size_t n) {
        for (int i = 0; i < 50 && l->n < n; i++)
                ASSERT_TRUE(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
        ASSERT_TRUE(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
        ASSERT_EQ(l->n, n);
}

static void dir_op(int (*op)(const char *, mode_t), const char *base, const char *rel) {
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", base, rel);
        ASSERT_OK(op(p, 0755) < 0 ? -errno : 0);
}

static int rmdir_mode(const char *p, mode_t mode) {
        return rmdir(p);
}

TEST(tree) {
        char base[] = "/tmp/test-cgroup-watch-tree.XXXXXX", tree[64], aside[64], from[128], to[128];
        _cleanup_(cgroup_watch_freep) CgroupWatch *w = NULL;
        sd_event *e = NULL;
        Log l = {};
        size_t mark;

        ASSERT_NOT_NULL(mkdtemp(base));
        snprintf(tree, sizeof(tree), "%s/tree", base);
        snprintf(aside, sizeof(aside), "%s/aside", base);
        ASSERT_OK(mkdir(tree, 0755) < 0 ? -errno : 0);
        for (const char *const *d = (const char *const[]){ "a", "a/b", "a/b/c", "a/d", "e", NULL }; *d; d++)
                dir_op(mkdir, tree, *d);

        ASSERT_OK(sd_event_new(&e));
        ASSERT_OK(cgroup_watch_new(e, tree, on_log, &l, &w));
        check_log(&l, 0, (const char *const[]){ "", "a", "a/b", "a/b/c", "a/d", "e", NULL }, true);
        ASSERT_EQ(cgroup_watch_count(w), 6);

        check_below(w, "", (const char *const[]){ "", "a", "a/b", "a/b/c", "a/d", "e", NULL });
        check_below(w, "a", (const char *const[]){ "a", "a/b", "a/b/c", "a/d", NULL });
        check_below(w, "a/b/c", (const char *const[]){ "a/b/c", NULL });
        check_below(w, "a/b/", (const char *const[]){ NULL });
        check_below(w, "x", (const char *const[]){ NULL });

        /* A subtree moved away: removed, children first; moved back: added, parents first. */
        snprintf(from, sizeof(from), "%s/a", tree);
        snprintf(to, sizeof(to), "%s", aside);
        ASSERT_OK(rename(from, to) < 0 ? -errno : 0);
        mark = l.n;
        run_until_logged(e, &l, mark + 4);
        check_log(&l, mark, (const char *const[]){ "a", "a/b", "a/b/c", "a/d", NULL }, false);
        ASSERT_EQ(cgroup_watch_count(w), 2);
        check_below(w, "", (const char *const[]){ "", "e", NULL });
        check_below(w, "a", (const char *const[]){ NULL });

        snprintf(from, sizeof(from), "%s/f", tree);
        ASSERT_OK(rename(to, from) < 0 ? -errno : 0);
        mark = l.n;
        run_until_logged(e, &l, mark + 4);
        check_log(&l, mark, (const char *const[]){ "f", "f/b", "f/b/c", "f/d", NULL }, true);
        check_below(w, "f", (const char *const[]){ "f", "f/b", "f/b/c", "f/d", NULL });
        check_below(w, "", (const char *const[]){ "", "e", "f", "f/b", "f/b/c", "f/d", NULL });

        /* Lost events (a failed read): the rescan forgets what went meanwhile. */
        fail_reads = 1;
        dir_op(rmdir_mode, tree, "f/b/c");
        dir_op(rmdir_mode, tree, "f/b");
        mark = l.n;
        run_until_logged(e, &l, mark + 2);
        check_log(&l, mark, (const char *const[]){ "f/b", "f/b/c", NULL }, false);
        check_below(w, "f", (const char *const[]){ "f", "f/d", NULL });
        dir_op(mkdir, tree, "f/d/g");
        mark = l.n;
        run_until_logged(e, &l, mark + 1);
        check_below(w, "f", (const char *const[]){ "f", "f/d", "f/d/g", NULL });

        w = cgroup_watch_free(w);
        sd_event_unref(e);
        for (const char *const *d = (const char *const[]){ "f/d/g", "f/d", "f", "e", NULL }; *d; d++)
                dir_op(rmdir_mode, tree, *d);
        ASSERT_OK(rmdir(tree) < 0 ? -errno : 0);
        ASSERT_OK(rmdir(base) < 0 ? -errno : 0);
}

DEFINE_TEST_MAIN
