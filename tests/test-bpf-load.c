/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The BPF skeleton loads, the program attaches to perf events in both
 * modes, and samples of a cgroup's busy process are counted. */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <bpf/btf.h>

#include "cgroup-util.h"
#include "offcpu-probe.h"
#include "sampler.h"
#include "tests.h"

static char *cg_root;

/* Root, a cgroup2 mount (cg_root), and a BPF-capable sampler, or the test
 * skips. */
static void sampler_new_or_skip(SamplerMode mode, Sampler **ret) {
        int r;

        if (geteuid() != 0)
                TEST_SKIP("not root");
        if (!cg_root && cg_find_unified_root(NULL, &cg_root) < 0)
                TEST_SKIP("no cgroup2 mount");
        r = sampler_new(&(SamplerOptions){ .mode = mode }, NULL, NULL, ret);
        if (r == -EPERM || r == -EACCES)
                TEST_SKIP("BPF not permitted");
        ASSERT_OK(r);
}

static void drain_cb(const struct cgprof_sample_key *key, uint64_t count, const SamplerStack *user,
                     const SamplerStack *kernel, const SamplerStack *python, bool stack_lost,
                     void *userdata) {
        uint64_t *total = userdata;
        *total += count;
        ASSERT_TRUE(key->pid > 0);
}

static void busy_for(double seconds) {
        struct timespec a, b;
        volatile unsigned long x = 0;
        clock_gettime(CLOCK_MONOTONIC, &a);
        do {
                for (int i = 0; i < 100000; i++)
                        x += i;
                clock_gettime(CLOCK_MONOTONIC, &b);
        } while ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < seconds);
}

static void run_mode(SamplerMode mode) {
        _cleanup_(sampler_freep) Sampler *s = NULL;
        _cleanup_free_ char *cg = NULL, *fallback = NULL;
        _cleanup_close_ int root_fd = -EBADF, cg_fd = -EBADF;
        const char *event;
        uint32_t slot;
        uint64_t id, total = 0;

        sampler_new_or_skip(mode, &s);

        ASSERT_TRUE(asprintf(&cg, "%s/cgprof-test-bpf-%d", cg_root, (int) getpid()) > 0);
        ASSERT_TRUE(mkdir(cg, 0755) == 0);
        cg_fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(cg_fd >= 0);
        ASSERT_OK(cg_get_id_at(cg_fd, "", &id));

        ASSERT_OK(sampler_session_open(s, "cpu-clock", 999, true, false, UNWIND_FRAME_POINTER, cg_fd, &slot,
                                       &event, &fallback));
        ASSERT_STREQ(event, "cpu-clock");
        ASSERT_NULL(fallback);
        ASSERT_OK(sampler_cgroup_set(s, id, slot));
        ASSERT_OK(sampler_session_activate(s, slot));

        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                int fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || cg_attach_fd(fd, getpid()) < 0)
                        _exit(1);
                busy_for(0.5);
                _exit(0);
        }
        int status;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        ASSERT_OK(sampler_session_deactivate(s, slot));
        ASSERT_OK(sampler_drain(s, drain_cb, &total));
        ASSERT_OK(sampler_drain(s, drain_cb, &total));

        SamplerSessionStats st = {};
        ASSERT_OK(sampler_session_stats(s, slot, &st));
        uint64_t kernel_total = 0;
        for (size_t c = 0; c < st.n_cpus; c++)
                kernel_total += st.per_cpu[c];
        fprintf(stderr, "mode %s: %" PRIu64 " samples drained, %" PRIu64 " recorded, %" PRIu64 " lost\n",
                sampler_mode_to_string(mode), total, kernel_total, st.lost);
        ASSERT_EQ(total, kernel_total);
        /* 0.5 s of CPU at 999 Hz is ~500 samples; any sample at all proves the
         * attach and the cgroup filter work. */
        ASSERT_TRUE(total > 0);
        sampler_session_stats_done(&st);

        ASSERT_OK(sampler_cgroup_set(s, id, 0));
        sampler_session_close(s, slot);
        ASSERT_TRUE(rmdir(cg) == 0);
}

TEST(cpu_mode) {
        run_mode(SAMPLER_MODE_CPU);
}

TEST(cgroup_mode) {
        run_mode(SAMPLER_MODE_CGROUP);
}

typedef struct OffCpuTotals {
        uint64_t cpu_samples, offcpu_ns, offcpu_keys, with_kernel;
} OffCpuTotals;

static void offcpu_cb(const struct cgprof_sample_key *key, uint64_t count, const SamplerStack *user,
                      const SamplerStack *kernel, const SamplerStack *python, bool stack_lost,
                      void *userdata) {
        OffCpuTotals *t = userdata;
        if (key->kind == CGPROF_SAMPLE_KIND_OFFCPU) {
                t->offcpu_ns += count;
                t->offcpu_keys++;
                t->with_kernel += kernel && kernel->n > 0;
        } else
                t->cpu_samples += count;
}

/* "events": ["offcpu"]: a process of the cgroup that sleeps 10 x 20 ms is
 * recorded off CPU about 200 ms (never more than its wall time), with a
 * kernel stack, and no CPU samples are kept. */
TEST(offcpu_sleeps) {
        _cleanup_(sampler_freep) Sampler *s = NULL;
        _cleanup_free_ char *cg = NULL, *fallback = NULL;
        _cleanup_close_ int cg_fd = -EBADF;
        const char *event;
        uint32_t slot;
        uint64_t id;
        OffCpuTotals t = {};
        int r;

        sampler_new_or_skip(SAMPLER_MODE_CPU, &s);
        if (sampler_offcpu_unavailable(s))
                TEST_SKIP(sampler_offcpu_unavailable(s));
        ASSERT_TRUE(asprintf(&cg, "%s/cgprof-test-offcpu-%d", cg_root, (int) getpid()) > 0);
        ASSERT_TRUE(mkdir(cg, 0755) == 0);
        cg_fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(cg_fd >= 0);
        ASSERT_OK(cg_get_id_at(cg_fd, "", &id));

        ASSERT_OK(sampler_session_open(s, "cpu-clock", 999, true, false, UNWIND_FRAME_POINTER, cg_fd, &slot,
                                       &event, &fallback));
        r = sampler_session_set_events(s, slot, false, true, 1000, 1.0);
        ASSERT_OK(r);
        ASSERT_OK(sampler_cgroup_set(s, id, slot));
        ASSERT_OK(sampler_session_activate(s, slot));

        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                int fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || cg_attach_fd(fd, getpid()) < 0)
                        _exit(1);
                for (int i = 0; i < 10; i++) {
                        busy_for(0.002);
                        nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
                }
                _exit(0);
        }
        int status;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        ASSERT_OK(sampler_session_deactivate(s, slot));
        ASSERT_OK(sampler_drain(s, offcpu_cb, &t));
        ASSERT_OK(sampler_drain(s, offcpu_cb, &t));
        SamplerSessionStats st = {};
        ASSERT_OK(sampler_session_stats(s, slot, &st));
        fprintf(stderr,
                "off-CPU: %" PRIu64 " ns in %" PRIu64 " keys (%" PRIu64 " with a kernel stack), %" PRIu64
                " waits recorded, %" PRIu64 " short, %" PRIu64 " lost; %" PRIu64 " CPU samples\n",
                t.offcpu_ns, t.offcpu_keys, t.with_kernel, st.offcpu_recorded, st.offcpu_short,
                st.offcpu_lost, t.cpu_samples);
        ASSERT_EQ(t.cpu_samples, 0u);
        ASSERT_EQ(t.offcpu_ns, st.offcpu_recorded_ns);
        ASSERT_TRUE(st.offcpu_recorded >= 10);
        ASSERT_TRUE(t.offcpu_ns >= 200u * 1000 * 1000);
        ASSERT_TRUE(t.with_kernel > 0);
        /* The wall-clock view: the child's totals, kept after its exit. */
        ASSERT_OK(sampler_session_stats_threads(s, slot, &st));
        ASSERT_EQ(st.n_threads, 1u);
        fprintf(stderr,
                "thread %u (%s): %" PRIu64 " ns on CPU, %" PRIu64 " off (%" PRIu64 " short), %" PRIu64
                " run queue\n",
                st.threads[0].tid, st.threads[0].t.comm, (uint64_t) st.threads[0].t.oncpu_ns,
                (uint64_t) st.threads[0].t.offcpu_ns, (uint64_t) st.threads[0].t.short_ns,
                (uint64_t) st.threads[0].t.runqueue_ns);
        ASSERT_EQ(st.threads[0].tid, (uint32_t) pid);
        ASSERT_EQ(st.threads[0].t.pid, (uint32_t) pid);
        ASSERT_TRUE(st.threads[0].t.oncpu_ns > 0);
        ASSERT_TRUE(st.threads[0].t.offcpu_ns >= t.offcpu_ns); /* stacked or not */
        sampler_session_stats_done(&st);

        ASSERT_OK(sampler_cgroup_set(s, id, 0));
        sampler_session_close(s, slot);
        ASSERT_TRUE(rmdir(cg) == 0);
}

/* A kernel whose BTF lacks the tracepoints: the probe names the missing
 * one. With sched_switch, the task-work kfunc (6.18+) is preferred to the
 * sys_exit tracepoint, which is needed only without it. */
TEST(offcpu_probe_names_missing_tracepoint) {
        struct btf *btf = btf__new_empty();
        const char *missing = NULL;
        OffcpuRecordAt at;
        int id, proto;

        ASSERT_NOT_NULL(btf);
        ASSERT_ERROR(offcpu_probe_btf(btf, &missing, &at), EOPNOTSUPP);
        ASSERT_STREQ(missing, "sched_switch");
        id = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
        ASSERT_TRUE(id > 0);
        ASSERT_TRUE(btf__add_typedef(btf, "btf_trace_sched_switch", id) > 0);
        ASSERT_ERROR(offcpu_probe_btf(btf, &missing, &at), EOPNOTSUPP);
        ASSERT_STREQ(missing, "sys_exit");
        ASSERT_TRUE(btf__add_typedef(btf, "btf_trace_sys_exit", id) > 0);
        ASSERT_OK(offcpu_probe_btf(btf, &missing, &at));
        ASSERT_NULL(missing);
        ASSERT_EQ(at, OFFCPU_RECORD_AT_SYS_EXIT);
        ASSERT_STREQ(offcpu_record_at_to_string(at), "sys_exit");
        proto = btf__add_func_proto(btf, id);
        ASSERT_TRUE(proto > 0);
        ASSERT_TRUE(btf__add_func(btf, OFFCPU_TASK_WORK_KFUNC, BTF_FUNC_STATIC, proto) > 0);
        ASSERT_OK(offcpu_probe_btf(btf, &missing, &at));
        ASSERT_EQ(at, OFFCPU_RECORD_AT_TASK_WORK);
        ASSERT_STREQ(offcpu_record_at_to_string(at), "task-work");
        btf__free(btf);

        /* The kfunc without sys_exit: enough. */
        btf = btf__new_empty();
        ASSERT_NOT_NULL(btf);
        id = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
        ASSERT_TRUE(btf__add_typedef(btf, "btf_trace_sched_switch", id) > 0);
        proto = btf__add_func_proto(btf, id);
        ASSERT_TRUE(btf__add_func(btf, OFFCPU_TASK_WORK_KFUNC, BTF_FUNC_STATIC, proto) > 0);
        ASSERT_OK(offcpu_probe_btf(btf, &missing, &at));
        ASSERT_EQ(at, OFFCPU_RECORD_AT_TASK_WORK);
        btf__free(btf);
}

TEST(hardware_event_falls_back_or_works) {
        _cleanup_(sampler_freep) Sampler *s = NULL;
        _cleanup_free_ char *fallback = NULL;
        const char *event;
        uint32_t slot;

        sampler_new_or_skip(SAMPLER_MODE_CPU, &s);
        ASSERT_OK(sampler_session_open(s, "cycles", 99, false, false, UNWIND_AUTO, -1, &slot, &event,
                                       &fallback));
        if (streq(event, "cpu-clock"))
                ASSERT_NOT_NULL(fallback);
        else
                ASSERT_STREQ(event, "cycles");
        sampler_session_close(s, slot);
}

DEFINE_TEST_MAIN
