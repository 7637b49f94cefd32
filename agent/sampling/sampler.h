/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <linux/types.h>

#include "config.h"
#include "macro.h"
#include "offcpu-threads.h"
#include "profile.h"

/* The sampling back end: the BPF skeleton (bpf/profile.bpf.c), the perf
 * events it is attached to, and the drain of its maps.
 *
 * Two attachment modes:
 *  - SAMPLER_MODE_CPU: one perf event per CPU per (event, frequency) group,
 *    shared by every session using that pair; the BPF program keeps samples
 *    whose cgroup ID maps to an active session of that group.
 *  - SAMPLER_MODE_CGROUP: perf events scoped to the session's cgroup
 *    (PERF_FLAG_PID_CGROUP), one per CPU per session; they only fire while
 *    the cgroup's tasks run.
 * In both modes the cgroups map decides which session a sample belongs to
 * (nested target cgroups: the deepest session wins). */

typedef enum SamplerMode {
        SAMPLER_MODE_CPU,
        SAMPLER_MODE_CGROUP,
        _SAMPLER_MODE_MAX,
        _SAMPLER_MODE_INVALID = -EINVAL,
} SamplerMode;

const char *sampler_mode_to_string(SamplerMode m);
SamplerMode sampler_mode_from_string(const char *s);

typedef struct Sampler Sampler;
struct bpf_link;

typedef struct SamplerSessionStats {
        uint64_t *per_cpu; /* n_cpus entries: samples recorded in the kernel */
        size_t n_cpus;
        uint64_t lost;
        uint64_t collisions;
        uint64_t stack_errors;
        /* Off-CPU waits: recorded with stacks, under offCpuMinUsec, lost (counts map full). */
        uint64_t offcpu_recorded, offcpu_short, offcpu_lost;
        uint64_t offcpu_recorded_ns, offcpu_short_ns, offcpu_lost_ns;
        uint64_t offcpu_runqueue, offcpu_runqueue_ns; /* preempted: runnable, waiting for a CPU */
        uint64_t offcpu_late; /* of offcpu_recorded: at the thread's next switch-out */
        /* Off-CPU sessions: per thread, its times so far (the wall-clock view). */
        OffCpuThread *threads;
        size_t n_threads;
} SamplerSessionStats;

void sampler_session_stats_done(SamplerSessionStats *s);

/* New-process notifications from the kernel. */
typedef void (*SamplerProcCallback)(const struct cgprof_proc_event *e, const char *comm, void *userdata);

/* A drained stack, leaf first as the kernel records it (NULL when the
 * sample has none). */
typedef struct SamplerStack {
        const uint64_t *pcs;
        size_t n;
        uint32_t flags; /* CGPROF_STACK_*: how it was walked, why it ended */
        const uint64_t *fp_frames; /* bit i: frame i was left by frame pointer */
} SamplerStack;

/* One drained count. python: the Python frames (packed, bpf/python.h) and
 * how their walk went, NULL when the process is not a Python one. stack_lost: a stack of the sample could not be
 * stored or read back (its stack is NULL then). */
typedef void (*SamplerSampleCallback)(const struct cgprof_sample_key *key, uint64_t count,
                                      const SamplerStack *user, const SamplerStack *kernel,
                                      const SamplerStack *python, bool stack_lost, void *userdata);

typedef struct SamplerOptions {
        SamplerMode mode;
        uint32_t
                unwind_rows; /* the budget of unwind table cells (bpf/unwind.h); 0: CGPROF_UNWIND_ROWS_DEFAULT */
        uint32_t bench_variant; /* CGPROF_BENCH_*: benchmarks only (bench/bpf-variants) */
        bool no_offcpu; /* off-CPU profiling off (cgprofd --no-offcpu): as on a kernel without it */
} SamplerOptions;

/* The CGPROF_BENCH_* bits a comma-separated list of names asks for
 * ("no-note,no-stats"); -EINVAL names an unknown one in *ret_bad. */
int sampler_bench_variant_from_string(const char *s, uint32_t *ret, const char **ret_bad);

int sampler_new(const SamplerOptions *opts, SamplerProcCallback proc_cb, void *userdata, Sampler **ret);
Sampler *sampler_free(Sampler *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Sampler *, sampler_free);

SamplerMode sampler_mode(const Sampler *s);
size_t sampler_n_cpus(const Sampler *s);

/* The ring buffer's epoll fd (readable while processes reported are not
 * consumed yet) and its consumer: each event goes to the callback; once
 * deadline_usec (CLOCK_MONOTONIC; 0: none) has passed, it stops after the
 * event at hand and returns 1 (more may wait: the fd stays readable). */
int sampler_proc_events_fd(Sampler *s);
int sampler_proc_events_consume(Sampler *s, uint64_t deadline_usec);

/* Opens the session's sampling: allocates a slot, opens (or shares) the
 * perf events. event: "cpu-clock", "cycles", ...; a hardware event that the
 * machine lacks falls back to cpu-clock: *ret_event is the event used and
 * *ret_fallback (malloc()ed or NULL) says why. cgroup_fd is used in cgroup
 * mode. The session does not sample until sampler_session_activate(). */
int sampler_session_open(Sampler *s, const char *event, uint64_t frequency, bool kernel_stacks, bool python,
                         UnwindMode unwind, int cgroup_fd, uint32_t *ret_slot, const char **ret_event,
                         char **ret_fallback);
/* What the session samples ("events"): perf samples (cpu), off-CPU waits
 * (offcpu: bpf/offcpu.h) at least offcpu_min_usec long, of a share
 * offcpu_probability of the switches. Before activation. -EOPNOTSUPP: the
 * kernel cannot (sampler_offcpu_unavailable() says why). */
int sampler_session_set_events(Sampler *s, uint32_t slot, bool cpu, bool offcpu, uint64_t offcpu_min_usec,
                               double offcpu_probability);
/* Why off-CPU profiling is not available here, NULL when it is. */
const char *sampler_offcpu_unavailable(const Sampler *s);
/* How waits are recorded in their task: "task-work" (kernel 6.18+),
 * "sys_exit", "none" where off-CPU profiling is not available. */
const char *sampler_offcpu_record_at(const Sampler *s);
/* Counts the CUDA kernel launches of the session's cgroups (before
 * activating it): the launch probes (sampler_launch_attach()) keep them. */
/* Fills st's threads (an off-CPU session's; none for another): reads the
 * whole threads map, so at a report, not at each metrics scrape. */
int sampler_session_stats_threads(Sampler *s, uint32_t slot, SamplerSessionStats *st);
/* The name of thread tid of an off-CPU session (its comm at its last
 * switch-out) into ret. -ENOENT: not seen (yet). */
int sampler_session_thread_name(Sampler *s, uint32_t slot, uint32_t tid, char ret[static 16]);
int sampler_session_set_gpu_launches(Sampler *s, uint32_t slot, bool on);
/* Counts the launches made through the CUPTI library (cgprof_cupti_launch,
 * gpu.durations) and notes each one's correlation ID for the join. */
int sampler_session_set_gpu_durations(Sampler *s, uint32_t slot, bool on);
/* The sample key the launch of (pid, correlation) was counted under, from
 * the cupti_launches map: 1 (*ret set), 0 when not there (never seen, or
 * forgotten: the map is LRU), or a negative errno. */
int sampler_cupti_launch_find(Sampler *s, uint32_t pid, uint32_t correlation, struct cgprof_sample_key *ret);
/* Its entry, once joined. */
void sampler_cupti_launch_forget(Sampler *s, uint32_t pid, uint32_t correlation);
int sampler_session_activate(Sampler *s, uint32_t slot);
/* Stops sampling (no new samples), keeps the slot so it can still be
 * drained and its stats read. */
int sampler_session_deactivate(Sampler *s, uint32_t slot);
/* Releases the slot and its perf events. */
void sampler_session_close(Sampler *s, uint32_t slot);

/* Assigns a cgroup ID to a session slot (0: remove the ID). */
int sampler_cgroup_set(Sampler *s, uint64_t cgroup_id, uint32_t slot);

int sampler_session_stats(Sampler *s, uint32_t slot, SamplerSessionStats *ret);

/* The time the session's cgroup ran since the session opened, from counting
 * cpu-clock events scoped to it (readable after the cgroup is removed). */
int sampler_session_cpu_time(Sampler *s, uint32_t slot, uint64_t *ret_nsec);

/* Flips the active map set and drains the other one: every count is passed
 * to cb and deleted, then the stacks it referenced are deleted. Call twice
 * to drain everything recorded before the first call. */
int sampler_drain(Sampler *s, SamplerSampleCallback cb, void *userdata);

/* The maps the unwinder fills (bpf/unwind.h, bpf/profile.h). */
typedef struct SamplerUnwindMaps {
        int shards_fd, pages_fd, rules_fd, tables_fd, mappings_fd, procs_fd;
        uint32_t n_rows; /* the budget of cells, all shards together */
        uint32_t shard_rows; /* cells per shard (the inner maps' size) */
        uint32_t n_shards, n_pages; /* entries of the shards and pages maps */
} SamplerUnwindMaps;

void sampler_unwind_maps(Sampler *s, SamplerUnwindMaps *ret);

/* The Python walk's maps (bpf/python.h): processes and the thread cache. */
void sampler_python_maps(Sampler *s, int *ret_procs_fd, int *ret_threads_fd);

/* Attaches the launch program (bpf/profile.h: CGPROF_LAUNCH_*) as a uprobe
 * at a file offset of an ELF file; entry: the entry point's
 * CGPROF_LAUNCH_*. The uprobe fires in every process that maps the file;
 * only sessions that count launches keep them. */
/* The launch probes (cuda-probes.h), NULL when out of memory. */
typedef struct CudaProbes CudaProbes;
typedef struct sd_event sd_event;
CudaProbes *sampler_cuda_probes(Sampler *s, sd_event *event);
int sampler_launch_attach(Sampler *s, const char *path, uint64_t offset, uint32_t entry,
                          struct bpf_link **ret);

/* Program statistics (needs kernel.bpf_stats_enabled=1). */
int sampler_prog_stats(Sampler *s, uint64_t *ret_run_time_ns, uint64_t *ret_run_cnt);
