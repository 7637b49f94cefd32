/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The wall-clock view of off-CPU sessions (report-wallclock.c,
 * profile_data_wall_clock(), profile_data_without_threads()): thread frames
 * at the root of the stacks, kept in wallclock.* only; per thread, CPU
 * samples × period plus off-CPU time, its run-queue time and short waits;
 * summary.json "wallClock". */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "profile-fixture.h"
#include "report.h"
#include "tests.h"

static char *folded(const ProfileData *d) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ASSERT_NOT_NULL(f);
        ASSERT_OK(report_write_folded(f, d));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_NOT_NULL(buf);
        return buf;
}

/* app (pid 100): thread "ow-worker" (tid 101) 3 CPU samples in main;work
 * and 20 ms off CPU in main;wait; thread "ow-helper" (tid 102) 10 ms off
 * CPU in main;wait; the same stacks without threads: 1 sample. */
static ProfileData *fixture(void) {
        ProfileData *d = profile_data_new();
        uint32_t p, worker, helper, m, work, wait, frames[3];

        ASSERT_NOT_NULL(d);
        p = fixture_process(d, 100, "app", "app");
        worker = frame(d, "ow-worker", NULL, FRAME_THREAD);
        helper = frame(d, "ow-helper", NULL, FRAME_THREAD);
        m = frame(d, "main", "app", FRAME_USER);
        work = frame(d, "work", "app", FRAME_USER);
        wait = frame(d, "futex_wait", "[kernel.kallsyms]", FRAME_KERNEL);
        frames[0] = worker, frames[1] = m, frames[2] = work;
        ASSERT_OK(profile_data_add_stack_values(d, p, frames, NULL, 3, false, 3, 0));
        frames[2] = wait;
        ASSERT_OK(profile_data_add_stack_values(d, p, frames, NULL, 3, false, 0, 20000000));
        frames[0] = helper;
        ASSERT_OK(profile_data_add_stack_values(d, p, frames, NULL, 3, false, 0, 10000000));
        frames[0] = m, frames[1] = work;
        ASSERT_OK(profile_data_add_stack_values(d, p, frames, NULL, 2, false, 1, 0));
        return d;
}

TEST(without_threads) {
        _cleanup_(profile_data_freep) ProfileData *d = fixture(), *plain = NULL;
        _cleanup_free_ char *out = NULL;

        ASSERT_TRUE(profile_data_has_threads(d));
        plain = profile_data_without_threads(d);
        ASSERT_NOT_NULL(plain);
        ASSERT_FALSE(profile_data_has_threads(plain));
        /* The threads' equal stacks merged, values kept. */
        ASSERT_EQ(plain->n_stacks, 2);
        ASSERT_EQ(profile_data_total(plain), 4);
        ASSERT_EQ(profile_data_offcpu_total(plain), 30000000);
        out = folded(plain);
        ASSERT_STREQ(out, "app;main;work 4\n"); /* the off-CPU stack counts no sample */
}

TEST(wall_clock) {
        _cleanup_(profile_data_freep) ProfileData *d = fixture(), *w = NULL;
        _cleanup_free_ char *out = NULL;

        /* 100 Hz: a sample is 10 ms. */
        w = profile_data_wall_clock(d, 10000000);
        ASSERT_NOT_NULL(w);
        out = folded(w);
        ASSERT_STREQ(out, "app;main;work 10000\n"
                          "app;ow-helper;main;futex_wait_[k] 10000\n"
                          "app;ow-worker;main;futex_wait_[k] 20000\n"
                          "app;ow-worker;main;work 30000\n");
}

static const ReportThread threads[] = {
        { .pid = 100,
          .tid = 101,
          .name = "ow-worker",
          .oncpu_ns = 31000000,
          .offcpu_ns = 20500000,
          .unstacked_ns = 500000,
          .runqueue_ns = 2000000 },
        { .pid = 100, .tid = 102, .name = "ow-helper", .oncpu_ns = 0, .offcpu_ns = 10000000 },
        /* A thread with no stack of a process with none: added. */
        { .pid = 300, .tid = 300, .name = "idle", .offcpu_ns = 7000000, .unstacked_ns = 7000000 },
};

static ReportSummaryInfo info_of(void) {
        return (ReportSummaryInfo){
                .session_id = "0123456789abcdef0123456789abcdef",
                .frequency = 100,
                .offcpu = { .enabled = true,
                            .min_usec = 1000,
                            .probability = 1,
                            .threads = (ReportThread *) threads,
                            .n_threads = ELEMENTSOF(threads) },
        };
}

TEST(wallclock_data) {
        _cleanup_(profile_data_freep) ProfileData *d = fixture(), *w = NULL;
        _cleanup_free_ char *out = NULL;
        ReportSummaryInfo info = info_of();

        ASSERT_OK(report_wallclock_data(d, &info, &w));
        out = folded(w);
        /* Per thread: its stacks, its run-queue time, its short waits. */
        ASSERT_STREQ(out, "app;main;work 10000\n"
                          "app;ow-helper;main;futex_wait_[k] 10000\n"
                          "app;ow-worker;[run queue] 2000\n"
                          "app;ow-worker;[short waits] 500\n"
                          "app;ow-worker;main;futex_wait_[k] 20000\n"
                          "app;ow-worker;main;work 30000\n"
                          "idle;idle;[short waits] 7000\n");
}

TEST(summary) {
        _cleanup_(profile_data_freep) ProfileData *d = fixture();
        ReportSummaryInfo info = info_of();
        cJSON *root = cJSON_CreateObject(), *t;

        ASSERT_NOT_NULL(root);
        ASSERT_OK(report_summary_add_wallclock(root, &info));
        t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "wallClock"), "threads");
        ASSERT_EQ(cJSON_GetArraySize(t), 3);
        cJSON *w = cJSON_GetArrayItem(t, 0);
        ASSERT_EQ(cJSON_GetObjectItemCaseSensitive(w, "tid")->valuedouble, 101);
        ASSERT_STREQ(cJSON_GetObjectItemCaseSensitive(w, "name")->valuestring, "ow-worker");
        ASSERT_TRUE(cJSON_GetObjectItemCaseSensitive(w, "onCpuSec")->valuedouble == 0.031);
        ASSERT_TRUE(cJSON_GetObjectItemCaseSensitive(w, "offCpuSec")->valuedouble == 0.0205);
        ASSERT_TRUE(cJSON_GetObjectItemCaseSensitive(w, "unstackedSec")->valuedouble == 0.0005);
        ASSERT_TRUE(cJSON_GetObjectItemCaseSensitive(w, "runQueueSec")->valuedouble == 0.002);
        ASSERT_TRUE(cJSON_GetObjectItemCaseSensitive(w, "wallSec")->valuedouble == 0.0535);
        cJSON_Delete(root);

        /* Not asked for, or not available: none. */
        root = cJSON_CreateObject();
        info.offcpu.unavailable = "no";
        ASSERT_OK(report_summary_add_wallclock(root, &info));
        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(root, "wallClock"));
        cJSON_Delete(root);
}

/* A report directory: wallclock.* beside the other formats, which have no
 * thread frame. */
TEST(write_dir) {
        _cleanup_(profile_data_freep) ProfileData *d = fixture();
        char dir[] = "/tmp/test-report-wallclock-XXXXXX";
        _cleanup_free_ char *wall = NULL, *plain = NULL, *svg = NULL;
        ReportSummaryInfo info = info_of();
        size_t n;
        int fd;

        ASSERT_NOT_NULL(mkdtemp(dir));
        fd = open(dir, O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(report_write_dir(fd,
                                   (1u << REPORT_FORMAT_FOLDED) | (1u << REPORT_FORMAT_SVG) |
                                           (1u << REPORT_FORMAT_JSON) | (1u << REPORT_FORMAT_PPROF),
                                   d, &info));
        ASSERT_OK(read_full_file_max(fd, "wallclock.folded", 1 << 20, &wall, &n));
        ASSERT_TRUE(strstr(wall, "app;ow-worker;main;work 30000\n") != NULL);
        ASSERT_OK(read_full_file_max(fd, "profile.folded", 1 << 20, &plain, &n));
        ASSERT_STREQ(plain, "app;main;work 4\n");
        ASSERT_OK(read_full_file_max(fd, "wallclock.svg", 1 << 22, &svg, &n));
        ASSERT_TRUE(strstr(svg, "wall clock") != NULL && strstr(svg, "ow-helper") != NULL);
        for (const char *const *x = report_extra_files; *x; x++)
                (void) unlinkat(fd, *x, 0);
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++)
                (void) unlinkat(fd, report_format_info(f)->file, 0);
        close(fd);
        ASSERT_EQ(rmdir(dir), 0);
}

DEFINE_TEST_MAIN
