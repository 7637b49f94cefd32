/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <sched.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "log.h"
#include "offcpu-probe.h"
#include "profile.skel.h"
#include "cuda-probes.h"
#include "sampler.h"
#include "unwind.h"

#define MAX_GROUPS 64

typedef struct SamplerGroup {
        bool used;
        char *event; /* the event as asked for */
        uint64_t frequency;
        unsigned refcount;
        struct bpf_link **links; /* per CPU; the link owns the perf fd */
} SamplerGroup;

typedef struct SamplerSlot {
        bool used;
        uint32_t group; /* CPU mode: group id (index + 1) */
        struct bpf_link **links; /* cgroup mode: per CPU */
        int *count_fds; /* per CPU: counting cpu-clock events scoped to the cgroup (-1: none) */
        struct cgprof_session session;
} SamplerSlot;

struct Sampler {
        uint64_t consume_deadline; /* sampler_proc_events_consume() */
        SamplerMode mode;
        struct profile_bpf *skel;
        struct bpf_link *exec_link;
        CudaProbes *cuda; /* the launch probes, made at their first use */
        struct ring_buffer *rb;
        SamplerProcCallback proc_cb;
        void *userdata;
        size_t n_cpus;
        SamplerGroup groups[MAX_GROUPS];
        SamplerSlot slots[CGPROF_MAX_SESSIONS];
        uint32_t next_slot;
        /* Off-CPU (bpf/offcpu.h): why the kernel cannot (NULL: it can); the
         * links while sessions follow off-CPU time. */
        char *offcpu_unavailable;
        OffcpuRecordAt offcpu_at; /* the best way the kernel offers (or forced) */
        OffcpuRecordAt offcpu_attached; /* the way attached now, _INVALID: none */
        struct bpf_link *offcpu_switch_link, *offcpu_exit_link;
        size_t n_offcpu_sessions;
        uint32_t unwind_rows; /* the budget of unwind table cells */
        uint32_t unwind_shard_rows; /* ... and the cells of one shard */
};

static const char *const sampler_mode_table[_SAMPLER_MODE_MAX] = {
        [SAMPLER_MODE_CPU] = "cpu",
        [SAMPLER_MODE_CGROUP] = "cgroup",
};

DEFINE_STRING_TABLE_LOOKUP(sampler_mode, SamplerMode, _SAMPLER_MODE_MAX, _SAMPLER_MODE_INVALID);

void sampler_session_stats_done(SamplerSessionStats *s) {
        free(s->per_cpu);
        free(s->threads);
        *s = (SamplerSessionStats){};
}

static const struct {
        const char *name;
        uint32_t type;
        uint64_t config;
} event_table[] = {
        { "cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK },
        { "task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK },
        { "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
        { "cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
        { "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
        { "ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES },
        { "cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES },
        { "branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES },
};

static int event_attr(const char *event, uint64_t frequency, struct perf_event_attr *ret) {
        for (size_t i = 0; i < ELEMENTSOF(event_table); i++) {
                if (!streq(event, event_table[i].name))
                        continue;
                struct perf_event_attr a = {
                        .size = sizeof(a),
                        .type = event_table[i].type,
                        .config = event_table[i].config,
                        .disabled = 0,
                };
                if (a.type == PERF_TYPE_SOFTWARE) {
                        /* A fixed period of time: exactly 'frequency' samples per CPU-second. */
                        a.sample_period = NSEC_PER_SEC / frequency;
                } else {
                        a.freq = 1;
                        a.sample_freq = frequency;
                }
                *ret = a;
                return 0;
        }
        return -EINVAL;
}

static int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, unsigned long flags) {
        int fd = (int) syscall(__NR_perf_event_open, attr, pid, cpu, -1, flags | PERF_FLAG_FD_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

static void links_free(Sampler *s, struct bpf_link **links) {
        if (!links)
                return;
        for (size_t c = 0; c < s->n_cpus; c++)
                bpf_link__destroy(links[c]);
        free(links);
}

/* Opens one event per CPU (pid -1 or a cgroup fd) and attaches the program with the cookie. */
static int links_open(Sampler *s, const struct perf_event_attr *attr, int cgroup_fd, uint64_t cookie,
                      struct bpf_link ***ret) {
        struct bpf_link **links = calloc(s->n_cpus, sizeof(*links));
        size_t attached = 0;
        int r;

        if (!links)
                return -ENOMEM;

        for (size_t c = 0; c < s->n_cpus; c++) {
                struct perf_event_attr a = *attr;
                int fd = perf_event_open(&a, cgroup_fd >= 0 ? cgroup_fd : -1, (int) c,
                                         cgroup_fd >= 0 ? PERF_FLAG_PID_CGROUP : 0);
                if (fd == -ENODEV)
                        continue; /* offline CPU */
                if (fd < 0) {
                        r = fd;
                        goto fail;
                }
                LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = cookie);
                links[c] = bpf_program__attach_perf_event_opts(s->skel->progs.cgprof_sample, fd, &opts);
                if (!links[c]) {
                        r = negative_errno();
                        close(fd);
                        goto fail;
                }
                attached++;
        }
        if (attached == 0) {
                r = -ENODEV;
                goto fail;
        }
        *ret = links;
        return 0;

fail:
        links_free(s, links);
        return r;
}

static void count_fds_free(Sampler *s, int *fds) {
        if (!fds)
                return;
        for (size_t c = 0; c < s->n_cpus; c++)
                safe_close(fds[c]);
        free(fds);
}

/* Counting (not sampling) cpu-clock events scoped to the cgroup, one per CPU:
 * their sum is the time the cgroup's tasks ran, exactly, and stays readable
 * after the cgroup is removed (cpu.stat does not). */
static int count_fds_open(Sampler *s, int cgroup_fd, int **ret) {
        struct perf_event_attr attr = {
                .size = sizeof(attr),
                .type = PERF_TYPE_SOFTWARE,
                .config = PERF_COUNT_SW_CPU_CLOCK,
        };
        int *fds = malloc(s->n_cpus * sizeof(int));
        size_t opened = 0;

        if (!fds)
                return -ENOMEM;
        for (size_t c = 0; c < s->n_cpus; c++) {
                fds[c] = perf_event_open(&attr, cgroup_fd, (int) c, PERF_FLAG_PID_CGROUP);
                if (fds[c] == -ENODEV) {
                        fds[c] = -EBADF;
                        continue;
                }
                if (fds[c] < 0) {
                        int r = fds[c];
                        fds[c] = -EBADF;
                        count_fds_free(s, fds);
                        return r;
                }
                opened++;
        }
        if (opened == 0) {
                count_fds_free(s, fds);
                return -ENODEV;
        }
        *ret = fds;
        return 0;
}

static int handle_proc_event(void *ctx, void *data, size_t size) {
        Sampler *s = ctx;
        const struct cgprof_proc_event *e = data;

        if (size < sizeof(*e))
                return 0;
        char comm[CGPROF_COMM_LEN + 1] = {};
        memcpy(comm, e->comm, CGPROF_COMM_LEN);
        if (s->proc_cb)
                s->proc_cb(e, comm, s->userdata);
        /* This event is consumed either way; a negative return leaves the
         * next ones in the ring. */
        if (s->consume_deadline > 0 && now_usec(CLOCK_MONOTONIC) >= s->consume_deadline)
                return -EAGAIN;
        return 0;
}

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap) {
        if (level == LIBBPF_DEBUG && log_get_max_level() < LOG_DEBUG)
                return 0;
        if (level == LIBBPF_INFO && log_get_max_level() < LOG_INFO)
                return 0;
        return vfprintf(stderr, fmt, ap);
}

static const struct {
        const char *name;
        uint32_t bit;
} bench_variants[] = {
        { "filter-only", CGPROF_BENCH_FILTER_ONLY },
        { "no-user", CGPROF_BENCH_NO_USER },
        { "no-kernel", CGPROF_BENCH_NO_KERNEL },
        { "no-store", CGPROF_BENCH_NO_STORE },
        { "no-count", CGPROF_BENCH_NO_COUNT },
        { "no-stats", CGPROF_BENCH_NO_STATS },
        { "no-note", CGPROF_BENCH_NO_NOTE },
        { "kernel-fp-walk", CGPROF_BENCH_KERNEL_FP_WALK },
        { "regs-read", CGPROF_BENCH_REGS_READ },
        { "kernel-always", CGPROF_BENCH_KERNEL_ALWAYS },
        { "split-reads", CGPROF_BENCH_SPLIT_READS },
        { "probe-reads", CGPROF_BENCH_PROBE_READS },
        { "no-stack-copy", CGPROF_BENCH_NO_STACK_COPY },
        { "copy-256", CGPROF_BENCH_COPY_256 },
        { "copy-512", CGPROF_BENCH_COPY_512 },
        { "read-first", CGPROF_BENCH_READ_FIRST },
        { "offcpu-no-exit", CGPROF_BENCH_OFFCPU_NO_EXIT },
        { "offcpu-sys-exit", CGPROF_BENCH_OFFCPU_SYS_EXIT },
};

int sampler_bench_variant_from_string(const char *s, uint32_t *ret, const char **ret_bad) {
        uint32_t bits = 0;

        for (const char *p = s; p && *p;) {
                size_t len = strcspn(p, ",");
                size_t i;
                for (i = 0; i < ELEMENTSOF(bench_variants); i++)
                        if (strlen(bench_variants[i].name) == len &&
                            strncmp(p, bench_variants[i].name, len) == 0)
                                break;
                if (i == ELEMENTSOF(bench_variants)) {
                        if (ret_bad)
                                *ret_bad = p;
                        return -EINVAL;
                }
                bits |= bench_variants[i].bit;
                p += len;
                if (*p == ',')
                        p++;
        }
        *ret = bits;
        return 0;
}

/* The unwind maps from the budget of rows (cells): shards of 2^18 cells (a
 * smaller budget: one shard of its size, rounded up to a power of two), as
 * many as the budget holds; pages: one per 64 cells (4096 at least). The
 * shards' template (what their size is checked against) into *ret_inner_fd,
 * to close after load. */
static int unwind_maps_size(struct profile_bpf *skel, uint32_t rows, uint32_t *ret_shard,
                            int *ret_inner_fd) {
        LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
        uint32_t shard = CGPROF_UNWIND_SHARD_ROWS, n_pages = MAX(rows / CGPROF_UNWIND_PAGES_PER_ROWS, 4096u);
        int r, fd;

        while (shard / 2 >= rows && shard > 4096)
                shard /= 2;
        /* Two cells a value (bpf/unwind.h). */
        fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_shard_t", sizeof(uint32_t),
                            2 * sizeof(struct cgprof_unwind_cell), shard / 2, &opts);
        if (fd < 0)
                return fd;
        *ret_inner_fd = fd;
        *ret_shard = shard;
        r = bpf_map__set_inner_map_fd(skel->maps.unwind_shards, fd);
        if (r < 0)
                return r;
        r = bpf_map__set_max_entries(skel->maps.unwind_shards, (rows + shard - 1) / shard);
        if (r < 0)
                return r;
        return bpf_map__set_max_entries(skel->maps.unwind_pages, n_pages);
}

/* Opens and loads the BPF object, with the off-CPU programs of s->offcpu_at
 * (none when _OFFCPU_RECORD_AT_INVALID). */
static int sampler_load(Sampler *s, const SamplerOptions *opts) {
        _cleanup_close_ int inner_fd = -EBADF; /* the unwind shards' template: used at load only */
        OffcpuRecordAt at = s->offcpu_at;
        int r;

        profile_bpf__destroy(TAKE_PTR(s->skel));
        s->skel = profile_bpf__open();
        if (!s->skel)
                return negative_errno();
        r = unwind_maps_size(s->skel, s->unwind_rows, &s->unwind_shard_rows, &inner_fd);
        if (r < 0)
                return r;
        s->skel->rodata->bench_variant = opts->bench_variant;
        /* With the task work, its sched_switch program does the sys_exit
         * way's part too (offcpu_task_work 0), for the sessions that keep
         * short waits (offcpu_way_wanted()): one program verified, not two. */
        (void) bpf_program__set_autoload(s->skel->progs.cgprof_off_sw, at == OFFCPU_RECORD_AT_SYS_EXIT);
        (void) bpf_program__set_autoload(s->skel->progs.cgprof_off_exit, at >= 0);
        (void) bpf_program__set_autoload(s->skel->progs.cgprof_off_sw_tw, at == OFFCPU_RECORD_AT_TASK_WORK);
        if (at != OFFCPU_RECORD_AT_TASK_WORK) {
                r = bpf_map__set_max_entries(s->skel->maps.offcpu_works, 1);
                if (r < 0)
                        return r;
        }
        return profile_bpf__load(s->skel);
}

int sampler_new(const SamplerOptions *opts, SamplerProcCallback proc_cb, void *userdata, Sampler **ret) {
        _cleanup_(sampler_freep) Sampler *s = NULL;
        int r;

        libbpf_set_print(libbpf_log);

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->mode = opts->mode;
        s->proc_cb = proc_cb;
        s->userdata = userdata;
        s->next_slot = 1;
        s->offcpu_attached = _OFFCPU_RECORD_AT_INVALID;

        r = libbpf_num_possible_cpus();
        if (r < 0)
                return r;
        s->n_cpus = (size_t) r;

        s->unwind_rows = opts->unwind_rows > 0 ? opts->unwind_rows : CGPROF_UNWIND_ROWS_DEFAULT;
        if (opts->no_offcpu) {
                s->offcpu_unavailable = strdup("off-CPU profiling is turned off on this node (--no-offcpu)");
                r = s->offcpu_unavailable ? -EOPNOTSUPP : -ENOMEM;
        } else
                r = offcpu_probe(&s->offcpu_unavailable, &s->offcpu_at);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                if (!s->offcpu_unavailable &&
                    asprintf(&s->offcpu_unavailable, "off-CPU probe failed: %s", strerror(-r)) < 0)
                        return -ENOMEM;
                log_notice("%s: CPU profiling only.", s->offcpu_unavailable);
                s->offcpu_at = _OFFCPU_RECORD_AT_INVALID;
        } else if (s->offcpu_at == OFFCPU_RECORD_AT_TASK_WORK &&
                   (opts->bench_variant & (CGPROF_BENCH_OFFCPU_SYS_EXIT | CGPROF_BENCH_OFFCPU_NO_EXIT)))
                s->offcpu_at = OFFCPU_RECORD_AT_SYS_EXIT;

        r = sampler_load(s, opts);
        if (r < 0 && r != -ENOMEM && s->offcpu_at == OFFCPU_RECORD_AT_TASK_WORK) {
                /* A kernel whose kfunc the verifier refuses here (another
                 * signature): the tracepoint, as on older kernels. */
                log_warning_errno(r, "Failed to load the off-CPU task-work program (%m): recording waits at "
                                     "sys_exit instead.");
                s->offcpu_at = OFFCPU_RECORD_AT_SYS_EXIT;
                r = sampler_load(s, opts);
        }
        if (r < 0)
                return r;

        /* Without the exec hook a process that calls exec() keeps its first
         * command line; sampling still works. */
        s->exec_link = bpf_program__attach(s->skel->progs.cgprof_exec);
        if (!s->exec_link)
                log_warning_errno(errno, "Failed to attach the exec tracepoint, ignoring: %m");

        s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.proc_events), handle_proc_event, s, NULL);
        if (!s->rb)
                return negative_errno();

        *ret = TAKE_PTR(s);
        return 0;
}

Sampler *sampler_free(Sampler *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < CGPROF_MAX_SESSIONS; i++) {
                links_free(s, s->slots[i].links);
                count_fds_free(s, s->slots[i].count_fds);
        }
        for (size_t i = 0; i < MAX_GROUPS; i++) {
                links_free(s, s->groups[i].links);
                free(s->groups[i].event);
        }
        ring_buffer__free(s->rb);
        bpf_link__destroy(s->offcpu_switch_link);
        bpf_link__destroy(s->offcpu_exit_link);
        free(s->offcpu_unavailable);
        cuda_probes_free(s->cuda);
        bpf_link__destroy(s->exec_link);
        profile_bpf__destroy(s->skel);
        free(s);
        return NULL;
}

SamplerMode sampler_mode(const Sampler *s) {
        return s->mode;
}

size_t sampler_n_cpus(const Sampler *s) {
        return s->n_cpus;
}

int sampler_proc_events_fd(Sampler *s) {
        return ring_buffer__epoll_fd(s->rb);
}

int sampler_proc_events_consume(Sampler *s, uint64_t deadline_usec) {
        int r;

        s->consume_deadline = deadline_usec;
        r = ring_buffer__consume(s->rb);
        s->consume_deadline = 0;
        if (r == -EAGAIN)
                return 1;
        return r < 0 ? r : 0;
}

static int group_get(Sampler *s, const char *event, const struct perf_event_attr *attr, uint64_t frequency,
                     uint32_t *ret) {
        SamplerGroup *free_g = NULL;
        int r;

        for (size_t i = 0; i < MAX_GROUPS; i++) {
                SamplerGroup *g = &s->groups[i];
                if (g->used && g->frequency == frequency && streq(g->event, event)) {
                        g->refcount++;
                        *ret = (uint32_t) i + 1;
                        return 0;
                }
                if (!g->used && !free_g)
                        free_g = g;
        }
        if (!free_g)
                return -EBUSY;

        uint32_t id = (uint32_t) (free_g - s->groups) + 1;
        r = links_open(s, attr, -1, ((uint64_t) CGPROF_ATTACH_CPU << 32) | id, &free_g->links);
        if (r < 0)
                return r;
        free_g->event = strdup(event);
        if (!free_g->event) {
                links_free(s, TAKE_PTR(free_g->links));
                return -ENOMEM;
        }
        free_g->used = true;
        free_g->frequency = frequency;
        free_g->refcount = 1;
        *ret = id;
        return 0;
}

static void group_unref(Sampler *s, uint32_t id) {
        if (id == 0 || id > MAX_GROUPS)
                return;
        SamplerGroup *g = &s->groups[id - 1];
        if (!g->used || --g->refcount > 0)
                return;
        links_free(s, TAKE_PTR(g->links));
        free(TAKE_PTR(g->event));
        *g = (SamplerGroup){};
}

static uint32_t slot_alloc(Sampler *s) {
        /* Round robin, so a slot is reused as late as possible. */
        for (uint32_t n = 0; n < CGPROF_MAX_SESSIONS - 1; n++) {
                uint32_t slot = s->next_slot;
                s->next_slot = s->next_slot + 1 >= CGPROF_MAX_SESSIONS ? 1 : s->next_slot + 1;
                if (!s->slots[slot].used)
                        return slot;
        }
        return 0;
}

/* Forgets the processes the kernel saw in a slot's session (procs_seen),
 * so they are reported again to a later session of the slot. Done when the
 * session closes, and again when the slot is reused (for a note made while
 * it closed): procs_seen is an LRU map that would otherwise keep every dead
 * process of every session until evicted, and this walk goes over all of
 * its entries. */
static void procs_seen_forget_slot(Sampler *s, uint32_t slot) {
        int fd = bpf_map__fd(s->skel->maps.procs_seen);
        uint32_t key, next, *prev = NULL;

        while (bpf_map_get_next_key(fd, prev, &next) == 0) {
                struct cgprof_proc_seen v;
                key = next;
                prev = &key;
                if (bpf_map_lookup_elem(fd, &key, &v) == 0 && v.session == slot)
                        (void) bpf_map_delete_elem(fd, &key);
        }
}

static int slot_reset_kernel_state(Sampler *s, uint32_t slot) {
        size_t n = s->n_cpus;
        _cleanup_free_ struct cgprof_session_stats *zero = calloc(n, sizeof(*zero));
        struct cgprof_session sess = {};
        int r;

        if (!zero)
                return -ENOMEM;
        r = bpf_map__update_elem(s->skel->maps.stats, &slot, sizeof(slot), zero, n * sizeof(*zero), BPF_ANY);
        if (r < 0)
                return r;
        r = bpf_map__update_elem(s->skel->maps.sessions, &slot, sizeof(slot), &sess, sizeof(sess), BPF_ANY);
        if (r < 0)
                return r;

        procs_seen_forget_slot(s, slot);
        return 0;
}

int sampler_session_open(Sampler *s, const char *event, uint64_t frequency, bool kernel_stacks, bool python,
                         UnwindMode unwind, int cgroup_fd, uint32_t *ret_slot, const char **ret_event,
                         char **ret_fallback) {
        _cleanup_free_ char *fallback = NULL;
        struct perf_event_attr attr;
        const char *used_event = event;
        uint32_t slot;
        int r;

        r = event_attr(event, frequency, &attr);
        if (r < 0)
                return r;

        if (attr.type == PERF_TYPE_HARDWARE) {
                /* Probe the PMU on the first CPU: VMs often have none. */
                struct perf_event_attr probe = attr;
                probe.disabled = 1;
                int fd = perf_event_open(&probe, -1, 0, 0);
                if (fd < 0) {
                        if (asprintf(&fallback,
                                     "hardware event %s is not available (%s), sampling cpu-clock", event,
                                     strerror(-fd)) < 0)
                                return -ENOMEM;
                        used_event = "cpu-clock";
                        r = event_attr(used_event, frequency, &attr);
                        if (r < 0)
                                return r;
                } else
                        close(fd);
        }

        slot = slot_alloc(s);
        if (slot == 0)
                return -EBUSY;
        SamplerSlot *sl = &s->slots[slot];

        r = slot_reset_kernel_state(s, slot);
        if (r < 0)
                return r;

        if (s->mode == SAMPLER_MODE_CPU) {
                r = group_get(s, used_event, &attr, frequency, &sl->group);
                if (r < 0)
                        return r;
        } else {
                if (cgroup_fd < 0)
                        return -EBADF;
                r = links_open(s, &attr, cgroup_fd, ((uint64_t) CGPROF_ATTACH_CGROUP << 32) | slot,
                               &sl->links);
                if (r < 0)
                        return r;
        }

        if (cgroup_fd >= 0) {
                r = count_fds_open(s, cgroup_fd, &sl->count_fds);
                if (r < 0)
                        log_debug_errno(
                                r, "Failed to open counting events for the session's cgroup, ignoring: %m");
        }

        sl->used = true;
        sl->session = (struct cgprof_session){
                .group = sl->group,
                .flags = (kernel_stacks ? CGPROF_SESSION_KERNEL_STACKS : 0) |
                         (python ? CGPROF_SESSION_PYTHON : 0) |
                         (unwind == UNWIND_AUTO
                                  ? CGPROF_SESSION_UNWIND_TABLES | CGPROF_SESSION_UNWIND_FP_FALLBACK
                          : unwind == UNWIND_DWARF ? CGPROF_SESSION_UNWIND_TABLES
                                                   : 0),
        };
        *ret_slot = slot;
        *ret_event = used_event;
        *ret_fallback = TAKE_PTR(fallback);
        return 0;
}

static int slot_update(Sampler *s, uint32_t slot) {
        return bpf_map__update_elem(s->skel->maps.sessions, &slot, sizeof(slot), &s->slots[slot].session,
                                    sizeof(struct cgprof_session), BPF_ANY);
}

const char *sampler_offcpu_unavailable(const Sampler *s) {
        return s->offcpu_unavailable;
}

const char *sampler_offcpu_record_at(const Sampler *s) {
        return offcpu_record_at_to_string(s->offcpu_attached >= 0 ? s->offcpu_attached : s->offcpu_at);
}

/* The way the off-CPU sessions want now: the task work (where the kernel
 * has it) unless one keeps waits under OFFCPU_TASK_WORK_MIN_USEC. A task
 * work costs a few µs per kept wait (the kfunc queues an irq_work: a
 * self-IPI, a VM exit in a VM): when nearly every wait is kept it costs
 * more than the sys_exit tracepoint does per system call (bench/overhead,
 * docs/operations.md). _INVALID: no off-CPU session. */
static OffcpuRecordAt offcpu_way_wanted(const Sampler *s) {
        if (s->n_offcpu_sessions == 0)
                return _OFFCPU_RECORD_AT_INVALID;
        if (s->offcpu_at != OFFCPU_RECORD_AT_TASK_WORK)
                return s->offcpu_at;
        for (size_t i = 1; i < CGPROF_MAX_SESSIONS; i++) {
                const SamplerSlot *sl = &s->slots[i];
                if (sl->used && (sl->session.flags & CGPROF_SESSION_OFFCPU) &&
                    sl->session.offcpu_min_ns < OFFCPU_TASK_WORK_MIN_USEC * NSEC_PER_USEC)
                        return OFFCPU_RECORD_AT_SYS_EXIT;
        }
        return OFFCPU_RECORD_AT_TASK_WORK;
}

/* Attaches the programs of the way wanted: the sched_switch program while
 * any session follows off-CPU time, sys_exit's while the way is sys_exit,
 * and (with the task work) offcpu_task_work says which way it takes. The
 * tracepoint is attached before the task work stops and detached after it
 * starts: a wait pending in a task is recorded either way. */
static int offcpu_links_update(Sampler *s) {
        OffcpuRecordAt want = offcpu_way_wanted(s);
        bool need_exit = want == OFFCPU_RECORD_AT_SYS_EXIT &&
                         !(s->skel->rodata->bench_variant & CGPROF_BENCH_OFFCPU_NO_EXIT);
        bool new_exit = false;

        if (want == s->offcpu_attached)
                return 0;
        if (need_exit && !s->offcpu_exit_link) {
                s->offcpu_exit_link = bpf_program__attach(s->skel->progs.cgprof_off_exit);
                if (!s->offcpu_exit_link)
                        return negative_errno();
                new_exit = true;
        }
        if (want >= 0 && !s->offcpu_switch_link) {
                s->offcpu_switch_link = bpf_program__attach(s->offcpu_at == OFFCPU_RECORD_AT_TASK_WORK
                                                                    ? s->skel->progs.cgprof_off_sw_tw
                                                                    : s->skel->progs.cgprof_off_sw);
                if (!s->offcpu_switch_link) {
                        int r = negative_errno();
                        if (new_exit)
                                bpf_link__destroy(TAKE_PTR(s->offcpu_exit_link));
                        return r;
                }
        }
        if (s->offcpu_at == OFFCPU_RECORD_AT_TASK_WORK)
                __atomic_store_n(&s->skel->bss->offcpu_task_work, want == OFFCPU_RECORD_AT_TASK_WORK,
                                 __ATOMIC_RELEASE);
        if (!need_exit)
                bpf_link__destroy(TAKE_PTR(s->offcpu_exit_link));
        if (want < 0)
                bpf_link__destroy(TAKE_PTR(s->offcpu_switch_link));
        s->offcpu_attached = want;
        if (want >= 0)
                log_debug("Off-CPU waits recorded at %s.", offcpu_record_at_to_string(want));
        return 0;
}

int sampler_session_set_events(Sampler *s, uint32_t slot, bool cpu, bool offcpu, uint64_t offcpu_min_usec,
                               double offcpu_probability) {
        if (slot == 0 || slot >= CGPROF_MAX_SESSIONS || !s->slots[slot].used)
                return -ENOENT;
        SamplerSlot *sl = &s->slots[slot];
        bool had = sl->session.flags & CGPROF_SESSION_OFFCPU;
        int r;

        if (offcpu && s->offcpu_unavailable)
                return -EOPNOTSUPP;
        struct cgprof_session saved = sl->session;
        size_t saved_n = s->n_offcpu_sessions;
        sl->session.flags &= ~(CGPROF_SESSION_NO_CPU | CGPROF_SESSION_OFFCPU);
        sl->session.flags |= (cpu ? 0 : CGPROF_SESSION_NO_CPU) | (offcpu ? CGPROF_SESSION_OFFCPU : 0);
        sl->session.offcpu_min_ns = offcpu_min_usec * NSEC_PER_USEC;
        sl->session.offcpu_threshold = offcpu_probability >= 1.0
                                               ? UINT32_MAX
                                               : (uint32_t) (offcpu_probability * (double) UINT32_MAX);
        if (offcpu && !had) {
                s->n_offcpu_sessions++;
                /* Its threads: CPU time from now (bpf_ktime_get_ns()'s clock). */
                sl->session.start_ns = now_usec(CLOCK_MONOTONIC) * NSEC_PER_USEC;
        } else if (had && !offcpu)
                s->n_offcpu_sessions--;
        r = offcpu_links_update(s);
        if (r < 0) {
                sl->session = saved;
                s->n_offcpu_sessions = saved_n;
                return r;
        }
        return slot_update(s, slot);
}

int sampler_session_stats_threads(Sampler *s, uint32_t slot, SamplerSessionStats *st) {
        if (slot == 0 || slot >= CGPROF_MAX_SESSIONS || !s->slots[slot].used)
                return -ENOENT;
        free(st->threads);
        st->threads = NULL;
        st->n_threads = 0;
        if (!(s->slots[slot].session.flags & CGPROF_SESSION_OFFCPU))
                return 0;
        return offcpu_threads_read(bpf_map__fd(s->skel->maps.offcpu_threads), slot, &st->threads,
                                   &st->n_threads);
}

int sampler_session_thread_name(Sampler *s, uint32_t slot, uint32_t tid, char ret[static 16]) {
        if (slot == 0 || slot >= CGPROF_MAX_SESSIONS || !s->slots[slot].used)
                return -ENOENT;
        return offcpu_thread_name(bpf_map__fd(s->skel->maps.offcpu_threads), slot, tid, ret);
}

int sampler_session_set_gpu_launches(Sampler *s, uint32_t slot, bool on) {
        if (slot == 0 || slot >= CGPROF_MAX_SESSIONS || !s->slots[slot].used)
                return -ENOENT;
        if (on)
                s->slots[slot].session.flags |= CGPROF_SESSION_GPU_LAUNCHES;
        else
                s->slots[slot].session.flags &= ~CGPROF_SESSION_GPU_LAUNCHES;
        return slot_update(s, slot);
}

int sampler_session_set_gpu_durations(Sampler *s, uint32_t slot, bool on) {
        if (slot == 0 || slot >= CGPROF_MAX_SESSIONS || !s->slots[slot].used)
                return -ENOENT;
        if (on)
                s->slots[slot].session.flags |= CGPROF_SESSION_GPU_DURATIONS;
        else
                s->slots[slot].session.flags &= ~CGPROF_SESSION_GPU_DURATIONS;
        return slot_update(s, slot);
}

int sampler_cupti_launch_find(Sampler *s, uint32_t pid, uint32_t correlation,
                              struct cgprof_sample_key *ret) {
        struct cgprof_cupti_launch_key k = { .pid = pid, .correlation = correlation };
        int r = bpf_map__lookup_elem(s->skel->maps.cupti_launches, &k, sizeof(k), ret, sizeof(*ret), 0);

        return r < 0 ? (r == -ENOENT ? 0 : r) : 1;
}

void sampler_cupti_launch_forget(Sampler *s, uint32_t pid, uint32_t correlation) {
        struct cgprof_cupti_launch_key k = { .pid = pid, .correlation = correlation };

        (void) bpf_map__delete_elem(s->skel->maps.cupti_launches, &k, sizeof(k), 0);
}

int sampler_session_activate(Sampler *s, uint32_t slot) {
        if (slot == 0 || slot >= CGPROF_MAX_SESSIONS || !s->slots[slot].used)
                return -ENOENT;
        s->slots[slot].session.flags |= CGPROF_SESSION_ACTIVE;
        return slot_update(s, slot);
}

int sampler_session_deactivate(Sampler *s, uint32_t slot) {
        if (slot == 0 || slot >= CGPROF_MAX_SESSIONS || !s->slots[slot].used)
                return -ENOENT;
        s->slots[slot].session.flags &= ~CGPROF_SESSION_ACTIVE;
        return slot_update(s, slot);
}

int sampler_session_cpu_time(Sampler *s, uint32_t slot, uint64_t *ret_nsec) {
        uint64_t total = 0;

        if (slot == 0 || slot >= CGPROF_MAX_SESSIONS || !s->slots[slot].used)
                return -ENOENT;
        if (!s->slots[slot].count_fds)
                return -ENODATA;
        for (size_t c = 0; c < s->n_cpus; c++) {
                uint64_t v;
                int fd = s->slots[slot].count_fds[c];
                if (fd < 0)
                        continue;
                if (read(fd, &v, sizeof(v)) != (ssize_t) sizeof(v))
                        return negative_errno();
                total += v;
        }
        *ret_nsec = total;
        return 0;
}

void sampler_session_close(Sampler *s, uint32_t slot) {
        if (slot == 0 || slot >= CGPROF_MAX_SESSIONS || !s->slots[slot].used)
                return;
        SamplerSlot *sl = &s->slots[slot];
        int r;
        bool offcpu = sl->session.flags & CGPROF_SESSION_OFFCPU;
        sl->session.flags = 0;
        if (offcpu) {
                s->n_offcpu_sessions--;
                r = offcpu_links_update(s);
                if (r < 0) /* the links of before stay: they record for the sessions left */
                        log_warning_errno(r, "Failed to switch the off-CPU programs, ignoring: %m");
        }
        (void) slot_update(s, slot);
        if (offcpu) {
                int r = offcpu_threads_forget(bpf_map__fd(s->skel->maps.offcpu_threads), slot);
                if (r < 0)
                        log_warning_errno(
                                r, "Failed to remove the thread totals of session slot %u, ignoring: %m",
                                slot);
        }
        procs_seen_forget_slot(s, slot);
        links_free(s, TAKE_PTR(sl->links));
        count_fds_free(s, TAKE_PTR(sl->count_fds));
        group_unref(s, sl->group);
        *sl = (SamplerSlot){};
}

/* The off-CPU cgroup filter's count of cgroup_id's bucket (bpf/offcpu.h):
 * the BPF programs read it at every switch, the agent alone writes it. */
static void cgroup_filter_add(Sampler *s, uint64_t cgroup_id, int16_t delta) {
        uint16_t *c = &s->skel->bss->offcpu_cgroup_filter[cgroup_id & (CGPROF_OFFCPU_FILTER_SIZE - 1)];

        __atomic_store_n(c, (uint16_t) (__atomic_load_n(c, __ATOMIC_RELAXED) + delta), __ATOMIC_SEQ_CST);
}

/* After a change of the cgroups map: the off-CPU programs' cached answers
 * (bpf/offcpu.h, offcpu_cgroup_slot()) are out of date. */
static void cgroups_changed(Sampler *s) {
        __atomic_fetch_add(&s->skel->bss->offcpu_cgroups_gen, 1, __ATOMIC_SEQ_CST);
}

int sampler_cgroup_set(Sampler *s, uint64_t cgroup_id, uint32_t slot) {
        struct bpf_map *m = s->skel->maps.cgroups;
        uint32_t old;
        bool had = bpf_map__lookup_elem(m, &cgroup_id, sizeof(cgroup_id), &old, sizeof(old), 0) == 0;
        int r;

        if (slot == 0) {
                r = bpf_map__delete_elem(m, &cgroup_id, sizeof(cgroup_id), 0);
                if (r == 0)
                        cgroup_filter_add(s, cgroup_id, -1); /* after the delete: never below the map */
                cgroups_changed(s);
                return r == -ENOENT ? 0 : r;
        }
        if (!had)
                cgroup_filter_add(s, cgroup_id, 1); /* before the insert */
        r = bpf_map__update_elem(m, &cgroup_id, sizeof(cgroup_id), &slot, sizeof(slot), BPF_ANY);
        if (r < 0 && !had)
                cgroup_filter_add(s, cgroup_id, -1);
        cgroups_changed(s);
        return r;
}

int sampler_session_stats(Sampler *s, uint32_t slot, SamplerSessionStats *ret) {
        size_t n = s->n_cpus;
        _cleanup_free_ struct cgprof_session_stats *v = calloc(n, sizeof(*v));
        _cleanup_free_ uint64_t *per_cpu = calloc(n, sizeof(uint64_t));
        SamplerSessionStats st = { .n_cpus = n };
        int r;

        if (!v || !per_cpu)
                return -ENOMEM;
        r = bpf_map__lookup_elem(s->skel->maps.stats, &slot, sizeof(slot), v, n * sizeof(*v), 0);
        if (r < 0)
                return r;
        for (size_t c = 0; c < n; c++) {
                per_cpu[c] = v[c].samples;
                st.lost += v[c].lost;
                st.collisions += v[c].collisions;
                st.stack_errors += v[c].stack_errors;
                st.offcpu_recorded += v[c].offcpu_recorded;
                st.offcpu_short += v[c].offcpu_short;
                st.offcpu_lost += v[c].offcpu_lost;
                st.offcpu_recorded_ns += v[c].offcpu_recorded_ns;
                st.offcpu_short_ns += v[c].offcpu_short_ns;
                st.offcpu_runqueue += v[c].offcpu_runqueue;
                st.offcpu_runqueue_ns += v[c].offcpu_runqueue_ns;
                st.offcpu_late += v[c].offcpu_late;
                st.offcpu_lost_ns += v[c].offcpu_lost_ns;
        }
        st.per_cpu = TAKE_PTR(per_cpu);
        *ret = st;
        return 0;
}

/* Takes every entry of a hash map (reads and deletes them, a batch of
 * entries per system call): *ret_keys and *ret_values hold *ret_n of each. */
static int map_take_all(int fd, size_t key_size, size_t value_size, size_t max_entries, void **ret_keys,
                        void **ret_values, size_t *ret_n) {
        _cleanup_free_ uint8_t *keys = NULL, *values = NULL;
        /* A hash map's batch position is a bucket index (u32); room for a key is asked for. */
        uint8_t in[64], out[64];
        size_t n = 0, allocated = 0;
        bool first = true;

        if (key_size > sizeof(in))
                return -EINVAL;
        for (;;) {
                /* The batch must hold a whole bucket: give it room for many. */
                if (allocated - n < 1024) {
                        size_t na = MAX(allocated * 2, (size_t) 4096);
                        na = MIN(na, max_entries + 1024);
                        if (na <= allocated)
                                return -E2BIG;
                        uint8_t *nk = reallocarray(keys, na, key_size), *nv;
                        if (!nk)
                                return -ENOMEM;
                        keys = nk;
                        nv = reallocarray(values, na, value_size);
                        if (!nv)
                                return -ENOMEM;
                        values = nv;
                        allocated = na;
                }
                uint32_t count = (uint32_t) (allocated - n);
                int r = bpf_map_lookup_and_delete_batch(fd, first ? NULL : in, out, keys + n * key_size,
                                                        values + n * value_size, &count, NULL);
                if (r < 0 && r != -ENOENT)
                        return r;
                n += count;
                if (r == -ENOENT) /* the last batch */
                        break;
                memcpy(in, out, key_size);
                first = false;
        }
        *ret_keys = TAKE_PTR(keys);
        *ret_values = TAKE_PTR(values);
        *ret_n = n;
        return 0;
}

/* The stacks of one tier (bpf/profile.h): short ones (struct
 * cgprof_stack_short) or long ones (struct cgprof_stack). Both begin with
 * the short one's fields. */
typedef struct DrainedStacks {
        uint64_t *ids; /* sorted */
        uint8_t *values; /* values + i * value_size is ids[i]'s */
        size_t value_size;
        size_t max_depth; /* frames a value holds */
        /* Long tier: each stack's frame-pointer bits in one run of
         * CGPROF_MAX_STACK_DEPTH / 64 words (the program keeps them in two
         * parts). */
        uint64_t *fp_bits;
        size_t n;
} DrainedStacks;

#define FP_WORDS (CGPROF_MAX_STACK_DEPTH / 64)

static void drained_stacks_done(DrainedStacks *d) {
        free(d->ids);
        free(d->values);
        free(d->fp_bits);
}

static const SamplerStack *stack_find(const DrainedStacks *d, uint64_t id, SamplerStack *ret) {
        size_t lo = SORTED_LOWER_BOUND(d->ids, d->n, *_e, id);
        const struct cgprof_stack_short *v;

        if (lo == d->n || d->ids[lo] != id)
                return NULL;
        v = (const struct cgprof_stack_short *) (d->values + lo * d->value_size);
        if (v->n > d->max_depth)
                return NULL;
        *ret = (SamplerStack){
                .pcs = (const uint64_t *) v->pcs,
                .n = v->n,
                .flags = v->flags,
                .fp_frames = d->fp_bits ? d->fp_bits + lo * FP_WORDS : (const uint64_t *) v->fp_frames,
        };
        return ret;
}

typedef struct StackOrder {
        uint64_t id;
        size_t index;
} StackOrder;

static int stack_order_cmp(const void *a, const void *b) {
        return CMP(((const StackOrder *) a)->id, ((const StackOrder *) b)->id);
}

/* Sorts the stacks by ID (an index sort: a stack is 1 or 4 KiB). */
static int drained_stacks_sort(DrainedStacks *d) {
        size_t n = d->n, size = d->value_size;
        bool sorted = true;

        for (size_t i = 1; i < n && sorted; i++)
                sorted = d->ids[i - 1] <= d->ids[i];
        if (sorted)
                return 0;

        /* Sort (id, index) pairs, then apply the permutation. */
        _cleanup_free_ StackOrder *order = calloc(n, sizeof(*order));
        _cleanup_free_ uint8_t *out = calloc(n, size);
        if (!order || !out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                order[i] = (StackOrder){ d->ids[i], i };
        qsort(order, n, sizeof(*order), stack_order_cmp);
        for (size_t i = 0; i < n; i++) {
                d->ids[i] = order[i].id;
                memcpy(out + i * size, d->values + order[i].index * size, size);
        }
        memcpy(d->values, out, n * size);
        return 0;
}

/* Waits until no launch program writes to the set just flipped away from
 * (bpf/profile.bpf.c: launch_inflight): a program runs for microseconds;
 * at most LAUNCH_SETTLE_USEC on the loop, in case one was preempted. */
#define LAUNCH_SETTLE_USEC 2000
static void launches_settle(Sampler *s, uint32_t set) {
        uint64_t end = 0;

        while (__atomic_load_n(&s->skel->bss->launch_inflight[set & 1], __ATOMIC_SEQ_CST) != 0) {
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                if (end == 0)
                        end = now + LAUNCH_SETTLE_USEC;
                else if (now > end) {
                        log_debug("A launch program still writes to the drained set, draining anyway.");
                        return;
                }
                sched_yield();
        }
}

/* Takes every stack of one tier's map into d, sorted by ID. */
static int drained_stacks_take(DrainedStacks *d, struct bpf_map *map, bool long_tier) {
        int r;

        *d = (DrainedStacks){
                .value_size = long_tier ? sizeof(struct cgprof_stack) : sizeof(struct cgprof_stack_short),
                .max_depth = long_tier ? CGPROF_MAX_STACK_DEPTH : CGPROF_SHORT_STACK_DEPTH,
        };
        r = map_take_all(bpf_map__fd(map), sizeof(uint64_t), d->value_size, bpf_map__max_entries(map),
                         (void **) &d->ids, (void **) &d->values, &d->n);
        if (r < 0)
                return r;
        r = drained_stacks_sort(d);
        if (r < 0 || !long_tier || d->n == 0)
                return r;
        d->fp_bits = calloc(d->n, FP_WORDS * sizeof(uint64_t));
        if (!d->fp_bits)
                return -ENOMEM;
        for (size_t i = 0; i < d->n; i++) {
                const struct cgprof_stack *v = (const struct cgprof_stack *) (d->values + i * d->value_size);
                uint64_t *bits = d->fp_bits + i * FP_WORDS;

                memcpy(bits, v->fp_frames, sizeof(v->fp_frames));
                memcpy(bits + CGPROF_SHORT_FP_WORDS, v->fp_more, sizeof(v->fp_more));
        }
        return 0;
}

static const SamplerStack *stack_find_tier(const DrainedStacks *short_tier, const DrainedStacks *long_tier,
                                           uint64_t id, SamplerStack *ret) {
        return stack_find(id & CGPROF_STACK_KEY_LONG ? long_tier : short_tier, id, ret);
}

/* Takes the counts and stacks of the set the program wrote to until now.
 * Counts first: a count the program stored after its stack (it always
 * stores the stack first) is then never read without its stack. What the
 * program on another CPU adds to this set in the microseconds after the
 * flip is taken at the drain after next. */
int sampler_drain(Sampler *s, SamplerSampleCallback cb, void *userdata) {
        uint32_t old = s->skel->bss->active_set;
        struct bpf_map *counts = old ? s->skel->maps.counts1 : s->skel->maps.counts0;
        struct bpf_map *stacks = old ? s->skel->maps.stacks1 : s->skel->maps.stacks0;
        struct bpf_map *long_stacks = old ? s->skel->maps.long_stacks1 : s->skel->maps.long_stacks0;
        _cleanup_free_ struct cgprof_sample_key *keys = NULL;
        _cleanup_free_ uint64_t *values = NULL;
        _cleanup_(drained_stacks_done) DrainedStacks d = {}, dl = {};
        size_t n_keys = 0;
        int r;

        /* New samples go to the other set from now on. */
        __atomic_store_n(&s->skel->bss->active_set, !old, __ATOMIC_SEQ_CST);
        launches_settle(s, old);

        r = map_take_all(bpf_map__fd(counts), sizeof(*keys), sizeof(*values), bpf_map__max_entries(counts),
                         (void **) &keys, (void **) &values, &n_keys);
        if (r < 0)
                return r;
        /* Also when there are no counts: a stack whose count the full counts map refused. */
        r = drained_stacks_take(&d, stacks, false);
        if (r < 0)
                return r;
        r = drained_stacks_take(&dl, long_stacks, true);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n_keys; i++) {
                const struct cgprof_sample_key *k = &keys[i];
                const SamplerStack *u = NULL, *kern = NULL, *py = NULL;
                SamplerStack uv, kv, pv;
                bool lost = k->lost != 0;

                if (k->user_stack != 0) {
                        u = stack_find_tier(&d, &dl, k->user_stack, &uv);
                        lost = lost || !u;
                }
                if (k->kernel_stack != 0) {
                        kern = stack_find_tier(&d, &dl, k->kernel_stack, &kv);
                        lost = lost || !kern;
                }
                if (k->python_stack != 0) {
                        py = stack_find_tier(&d, &dl, k->python_stack, &pv);
                        lost = lost || !py;
                }
                cb(k, values[i], u, kern, py, lost, userdata);
        }
        return 0;
}

void sampler_unwind_maps(Sampler *s, SamplerUnwindMaps *ret) {
        struct bpf_map *shards = s->skel->maps.unwind_shards;

        *ret = (SamplerUnwindMaps){
                .shards_fd = bpf_map__fd(shards),
                .pages_fd = bpf_map__fd(s->skel->maps.unwind_pages),
                .rules_fd = bpf_map__fd(s->skel->maps.unwind_rules),
                .tables_fd = bpf_map__fd(s->skel->maps.unwind_tables),
                .mappings_fd = bpf_map__fd(s->skel->maps.unwind_mappings),
                .procs_fd = bpf_map__fd(s->skel->maps.unwind_procs),
                .n_rows = s->unwind_rows,
                .shard_rows = s->unwind_shard_rows,
                .n_shards = bpf_map__max_entries(shards),
                .n_pages = bpf_map__max_entries(s->skel->maps.unwind_pages),
        };
}

void sampler_python_maps(Sampler *s, int *ret_procs_fd, int *ret_threads_fd) {
        *ret_procs_fd = bpf_map__fd(s->skel->maps.python_procs);
        *ret_threads_fd = bpf_map__fd(s->skel->maps.python_threads);
}

CudaProbes *sampler_cuda_probes(Sampler *s, sd_event *event) {
        if (!s->cuda)
                s->cuda = cuda_probes_new(s, event);
        return s->cuda;
}

int sampler_launch_attach(Sampler *s, const char *path, uint64_t offset, uint32_t entry,
                          struct bpf_link **ret) {
        LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = entry);
        struct bpf_link *l;

        if (entry >= _CGPROF_LAUNCH_MAX)
                return -EINVAL;
        l = bpf_program__attach_uprobe_opts(s->skel->progs.cgprof_launch, -1, path, (size_t) offset, &opts);
        if (!l)
                return negative_errno();
        *ret = l;
        return 0;
}

int sampler_prog_stats(Sampler *s, uint64_t *ret_run_time_ns, uint64_t *ret_run_cnt) {
        struct bpf_prog_info info = {};
        uint32_t len = sizeof(info);
        int r;

        r = bpf_obj_get_info_by_fd(bpf_program__fd(s->skel->progs.cgprof_sample), &info, &len);
        if (r < 0)
                return r;
        *ret_run_time_ns = info.run_time_ns;
        *ret_run_cnt = info.run_cnt;
        return 0;
}
