/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure parts of the control API (agent/control/manager-control.c): target
 * specs, and listing reports from summary.json files. */
#include <fcntl.h>
#include <sys/stat.h>

#include "fileio.h"
#include "manager.h"
#include "manager-control.h"
#include "tests.h"

static void parse_ok(const char *s, ControlTargetKind kind, const char *ns, const char *pod,
                     const char *container, const char *cgroup) {
        _cleanup_(control_target_spec_done) ControlTargetSpec spec = {};
        _cleanup_free_ char *error = NULL;

        ASSERT_OK(control_target_spec_parse(s, &spec, &error));
        ASSERT_NULL(error);
        ASSERT_EQ(spec.kind, kind);
        ASSERT_STREQ(spec.namespace, ns);
        ASSERT_STREQ(spec.pod, pod);
        ASSERT_STREQ(spec.container, container);
        ASSERT_STREQ(spec.cgroup, cgroup);
}

static void parse_bad(const char *s) {
        ControlTargetSpec spec = {};
        _cleanup_free_ char *error = NULL;

        ASSERT_ERROR(control_target_spec_parse(s, &spec, &error), EINVAL);
        ASSERT_NOT_NULL(error);
        ASSERT_NOT_NULL(strstr(error, "Invalid target"));
        ASSERT_NULL(spec.namespace);
        ASSERT_NULL(spec.cgroup);
}

TEST(target_spec_pod) {
        parse_ok("pod:ml/trainer-0", CONTROL_TARGET_POD, "ml", "trainer-0", NULL, NULL);
        parse_ok("pod:ml/trainer-0/main", CONTROL_TARGET_POD, "ml", "trainer-0", "main", NULL);
        parse_bad("pod:");
        parse_bad("pod:ml");
        parse_bad("pod:ml/");
        parse_bad("pod:/trainer-0");
        parse_bad("pod:ml//main");
        parse_bad("pod:ml/trainer-0/");
        parse_bad("pod:ml/trainer-0/main/x");
}

TEST(target_spec_cgroup) {
        parse_ok("cgroup:system.slice/nginx.service", CONTROL_TARGET_CGROUP, NULL, NULL, NULL,
                 "system.slice/nginx.service");
        parse_ok("cgroup:/system.slice/nginx.service/", CONTROL_TARGET_CGROUP, NULL, NULL, NULL,
                 "system.slice/nginx.service");
        parse_ok("cgroup:a", CONTROL_TARGET_CGROUP, NULL, NULL, NULL, "a");
        parse_ok("cgroup:..a/b..", CONTROL_TARGET_CGROUP, NULL, NULL, NULL, "..a/b..");
        parse_bad("cgroup:");
        parse_bad("cgroup:/");
        parse_bad("cgroup://");
        parse_bad("cgroup:a//b");
        parse_bad("cgroup:a/../b");
        parse_bad("cgroup:..");
        parse_bad("cgroup:./a");
        parse_bad("cgroup:a/.");
}

TEST(target_spec_other) {
        parse_bad("");
        parse_bad(NULL);
        parse_bad("ml/trainer-0");
        parse_bad("Pod:ml/trainer-0");
        parse_bad("container:ml/trainer-0");
}

/* ---- reports ---- */

static char *tmp_dir(void) {
        char *d = strdup("/tmp/test-control-XXXXXX");
        ASSERT_NOT_NULL(d);
        ASSERT_NOT_NULL(mkdtemp(d));
        return d;
}

static void rm_rf(const char *path) {
        char *cmd = NULL;
        ASSERT_TRUE(asprintf(&cmd, "rm -rf '%s'", path) > 0);
        ASSERT_EQ(system(cmd), 0);
        free(cmd);
}

static void write_summary(int root, const char *rel, const char *session, const char *ns, const char *pod,
                          const char *cgroup, uint64_t start, uint64_t samples) {
        _cleanup_close_ int dfd = mkdir_below(root, rel);
        char buf[1024];

        ASSERT_OK(dfd);
        if (ns)
                snprintf(buf, sizeof(buf),
                         "{\"session\":\"%s\",\"namespace\":\"%s\",\"pod\":\"%s\",\"container\":\"main\","
                         "\"cgroup\":\"%s\",\"startUsec\":%" PRIu64 ",\"samples\":{\"total\":%" PRIu64 "}}",
                         session, ns, pod, cgroup, start, samples);
        else
                snprintf(buf, sizeof(buf),
                         "{\"session\":\"%s\",\"cgroup\":\"%s\",\"startUsec\":%" PRIu64
                         ",\"samples\":{\"total\":%" PRIu64 "}}",
                         session, cgroup, start, samples);
        ASSERT_OK(write_string_file_atomic_at(dfd, "summary.json", buf));
}

static size_t list(int fd, const char *path, const char *filter, uint64_t since, ControlReport **ret) {
        _cleanup_free_ char *error = NULL;
        size_t n = 0;

        ASSERT_OK(control_list_reports(fd, path, filter, since, ret, &n, &error));
        ASSERT_NULL(error);
        return n;
}

TEST(list_reports) {
        _cleanup_free_ char *dir = tmp_dir(), *outside = tmp_dir(), *p = NULL;
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ControlReport *r = NULL;
        size_t n;

        ASSERT_OK(fd);
        write_summary(fd, "ml/trainer-0/main/1000_a", "s1", "ml", "trainer-0", "kubepods/x", 1000, 10);
        write_summary(fd, "ml/trainer-0/main/3000_b", "s2", "ml", "trainer-0", "kubepods/x", 3000, 30);
        write_summary(fd, "ml/other-0/main/2000_c", "s3", "ml", "other-0", "kubepods/y", 2000, 20);
        write_summary(fd, "web/front-0/main/4000_d", "s4", "web", "front-0", "kubepods/z", 4000, 40);
        write_summary(fd, "system.slice_nginx.service/5000_e", "s5", NULL, NULL,
                      "system.slice/nginx.service", 5000, 50);
        /* Not reports: a directory without summary.json, a malformed one. */
        _cleanup_close_ int empty = mkdir_below(fd, "ml/empty");
        ASSERT_OK(empty);
        _cleanup_close_ int bad = mkdir_below(fd, "bad");
        ASSERT_OK(bad);
        ASSERT_OK(write_string_file_atomic_at(bad, "summary.json", "{not json"));
        /* A symlink to a report elsewhere is not followed. */
        _cleanup_close_ int out = open(outside, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        write_summary(out, "r", "s-outside", "ml", "trainer-0", "kubepods/x", 9000, 90);
        ASSERT_TRUE(asprintf(&p, "%s/r", outside) > 0);
        ASSERT_OK(symlinkat(p, fd, "ml/link"));

        n = list(fd, dir, "", 0, &r);
        ASSERT_EQ(n, 5U);
        /* Newest first. */
        ASSERT_STREQ(r[0].session, "s5");
        ASSERT_STREQ(r[0].namespace, "");
        ASSERT_STREQ(r[0].pod, "");
        ASSERT_STREQ(r[0].container, "");
        ASSERT_STREQ(r[0].cgroup, "system.slice/nginx.service");
        ASSERT_EQ(r[0].start_usec, 5000U);
        ASSERT_EQ(r[0].samples, 50U);
        ASSERT_STREQ(r[1].session, "s4");
        ASSERT_STREQ(r[2].session, "s2");
        ASSERT_STREQ(r[3].session, "s3");
        ASSERT_STREQ(r[4].session, "s1");
        free(p);
        ASSERT_TRUE(asprintf(&p, "%s/ml/trainer-0/main/3000_b", dir) > 0);
        ASSERT_STREQ(r[2].report_dir, p);
        ASSERT_STREQ(r[2].namespace, "ml");
        ASSERT_STREQ(r[2].pod, "trainer-0");
        ASSERT_STREQ(r[2].container, "main");
        control_reports_free(r, n);

        n = list(fd, dir, "ml", 0, &r);
        ASSERT_EQ(n, 3U);
        control_reports_free(r, n);

        n = list(fd, dir, "ml/trainer-0", 0, &r);
        ASSERT_EQ(n, 2U);
        ASSERT_STREQ(r[0].session, "s2");
        ASSERT_STREQ(r[1].session, "s1");
        control_reports_free(r, n);

        n = list(fd, dir, "ml/trainer-0", 1001, &r);
        ASSERT_EQ(n, 1U);
        ASSERT_STREQ(r[0].session, "s2");
        control_reports_free(r, n);

        n = list(fd, dir, "", 3000, &r);
        ASSERT_EQ(n, 3U);
        control_reports_free(r, n);

        n = list(fd, dir, "cgroup:/system.slice/nginx.service", 0, &r);
        ASSERT_EQ(n, 1U);
        ASSERT_STREQ(r[0].session, "s5");
        control_reports_free(r, n);

        n = list(fd, dir, "nope", 0, &r);
        ASSERT_EQ(n, 0U);
        control_reports_free(r, n);

        /* Bad filters. */
        const char *bad_filters[] = { "a/b/c", "a//b", "/a", "cgroup:", "cgroup:a/../b" };
        for (size_t i = 0; i < ELEMENTSOF(bad_filters); i++) {
                _cleanup_free_ char *error = NULL;
                r = NULL;
                ASSERT_ERROR(control_list_reports(fd, dir, bad_filters[i], 0, &r, &n, &error), EINVAL);
                ASSERT_NOT_NULL(error);
                ASSERT_NULL(r);
        }

        rm_rf(dir);
        rm_rf(outside);
}

TEST(list_reports_depth) {
        _cleanup_free_ char *dir = tmp_dir();
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ControlReport *r = NULL;
        size_t n;

        ASSERT_OK(fd);
        /* At the deepest level walked, and one below it. */
        write_summary(fd, "1/2/3/4/5/6/7/8", "deep", NULL, NULL, "a", 1, 1);
        write_summary(fd, "1/2/3/4/5/6/7/8/9", "too-deep", NULL, NULL, "a", 2, 1);
        n = list(fd, dir, "", 0, &r);
        ASSERT_EQ(n, 1U);
        ASSERT_STREQ(r[0].session, "deep");
        control_reports_free(r, n);
        rm_rf(dir);
}

DEFINE_TEST_MAIN;
