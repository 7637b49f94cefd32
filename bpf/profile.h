/* SPDX-License-Identifier: (LGPL-2.1-or-later OR BSD-2-Clause) */
#pragma once

/* Structures shared by profile.bpf.c and the agent's sampler: fixed-width
 * fields only. */

#define CGPROF_MAX_SESSIONS 4096 /* session slots; slot 0 is never used */
/* Frames kept per stack: user stacks (walked with unwind tables or frame
 * pointers) and Python stacks go this deep; the kernel's walker (kernel
 * stacks) stops at kernel.perf_event_max_stack (127 by default). A power of
 * two. Stacks are stored in two size tiers: up to CGPROF_SHORT_STACK_DEPTH
 * frames (struct cgprof_stack_short, CGPROF_STACKS_PER_SET of them per set)
 * and longer ones (struct cgprof_stack, CGPROF_LONG_STACKS_PER_SET). */
#define CGPROF_MAX_STACK_DEPTH 512
#define CGPROF_SHORT_STACK_DEPTH 128
#define CGPROF_MAX_CGROUPS 16384
/* Buckets of the off-CPU cgroup filter (bpf/offcpu.h), a power of two. */
#define CGPROF_OFFCPU_FILTER_SIZE 4096
#define CGPROF_STACKS_PER_SET 16384 /* distinct short stacks (user and kernel) between two drains */
#define CGPROF_LONG_STACKS_PER_SET 2048 /* distinct long stacks between two drains */
/* A long stack's key (in the long stacks maps) has this bit set, a short one's not. */
#define CGPROF_STACK_KEY_LONG (1ULL << 63)

/* Unwinding with tables (bpf/unwind.h for the rows). */
/* The budget of rows (cells of 4 bytes, bpf/unwind.h) of all tables
 * together: 64 MiB. Shards of CGPROF_UNWIND_SHARD_ROWS cells are created as
 * tables come, up to it. */
#define CGPROF_UNWIND_ROWS_DEFAULT (1u << 24)
#define CGPROF_UNWIND_SHARD_ROWS (1u << 18) /* 1 MiB; a smaller budget makes them smaller */
/* Pages (64 KiB of text each, 8 bytes) of all tables: one per 64 rows of the budget. */
#define CGPROF_UNWIND_PAGES_PER_ROWS 64
#define CGPROF_MAX_UNWIND_TABLES 16384 /* table 0 is never used: "no table" */
#define CGPROF_MAX_MAPPING_ENTRIES 262144 /* prefix entries of all processes' mappings */
#define CGPROF_MAX_UNWIND_PROCS 32768

/* bpf_cookie of each perf event link: (mode << 32) | id. */
#define CGPROF_ATTACH_CPU 0u /* id: sampler group; filter by the cgroup map */
#define CGPROF_ATTACH_CGROUP 1u /* id: the session slot of the cgroup-scoped event */

#define CGPROF_SESSION_ACTIVE (1u << 0)
#define CGPROF_SESSION_KERNEL_STACKS (1u << 1)
#define CGPROF_SESSION_UNWIND_TABLES (1u << 2) /* walk user stacks with unwind tables */
#define CGPROF_SESSION_UNWIND_FP_FALLBACK (1u << 3) /* ... and frames without a table with frame pointers */
#define CGPROF_SESSION_PYTHON (1u << 4) /* walk the Python frames of CPython processes (bpf/python.h) */
#define CGPROF_SESSION_GPU_LAUNCHES (1u << 5) /* count CUDA kernel launches (cgprof_launch) */
#define CGPROF_SESSION_NO_CPU (1u << 6) /* "events" without "cpu": perf samples are not kept */
#define CGPROF_SESSION_OFFCPU (1u << 7) /* "events" with "offcpu": blocking switches are followed */
#define CGPROF_SESSION_GPU_DURATIONS (1u << 8) /* the CUPTI library's launches (cgprof_cupti_launch) */

/* Benchmark variants of the sample program (bench/bpf-variants, cgprofd
 * --bench-bpf-variant): parts left out, or done the old way, to measure what
 * each costs. Read-only data set before load: the verifier sees a constant
 * and drops the code a bit turns off, so the agent's program (0) carries none
 * of these tests. */
#define CGPROF_BENCH_FILTER_ONLY (1u << 0) /* return after the session check */
#define CGPROF_BENCH_NO_USER (1u << 1) /* no user stack */
#define CGPROF_BENCH_NO_KERNEL (1u << 2) /* no kernel stack */
#define CGPROF_BENCH_NO_STORE (1u << 3) /* stacks walked, not stored */
#define CGPROF_BENCH_NO_COUNT (1u << 4) /* the counts map not updated */
#define CGPROF_BENCH_NO_STATS (1u << 5) /* the per-CPU stats not updated */
#define CGPROF_BENCH_NO_NOTE (1u << 6) /* no process note (LRU lookup, ring buffer) */
#define CGPROF_BENCH_KERNEL_FP_WALK (1u << 7) /* frame-pointer user stacks by bpf_get_stack() (before) */
#define CGPROF_BENCH_REGS_READ (1u << 8) /* user registers always read from the task (before) */
#define CGPROF_BENCH_KERNEL_ALWAYS \
        (1u << 9) /* bpf_get_stack() for the kernel stack in user mode too (before) */
#define CGPROF_BENCH_SPLIT_READS (1u << 10) /* two 8-byte reads per frame (before) */
#define CGPROF_BENCH_PROBE_READS (1u << 11) /* task fields by bpf_probe_read_kernel() (before) */
#define CGPROF_BENCH_NO_STACK_COPY (1u << 12) /* every frame read from user memory (before) */
#define CGPROF_BENCH_COPY_256 (1u << 13) /* 256 bytes of the stack copied, not 1 KiB */
#define CGPROF_BENCH_COPY_512 (1u << 14) /* 512 bytes of the stack copied, not 1 KiB */
#define CGPROF_BENCH_READ_FIRST \
        (1u << 15) /* a frame read before its bound is checked: an fp below sp faults (before) */
/* The off-CPU sys_exit program not attached (waits pending at a system
 * call's return are recorded at the next switch-out): what the tracepoint
 * costs. */
#define CGPROF_BENCH_OFFCPU_NO_EXIT (1u << 16)
/* Waits recorded at sys_exit (the older kernels' way) where the kernel has
 * the task-work kfunc (agent only: the tests of that way, the bench). */
#define CGPROF_BENCH_OFFCPU_SYS_EXIT (1u << 17)

struct cgprof_session {
        __u32 group; /* sampler group (event, frequency) in CPU mode */
        __u32 flags; /* CGPROF_SESSION_* */
        __u64 offcpu_min_ns; /* shorter waits are counted in the stats, not stacked */
        __u32 offcpu_threshold; /* a blocking switch is followed when prandom <= this (max: all) */
        __u32 pad;
        __u64 start_ns; /* bpf_ktime_get_ns() at its start: threads started later count all their CPU time */
};

#define CGPROF_SAMPLE_USER_LOST (1u << 0) /* the user stack could not be stored */
#define CGPROF_SAMPLE_KERNEL_LOST (1u << 1)
#define CGPROF_SAMPLE_PYTHON_LOST (1u << 2)

/* Key of the in-kernel counts: one (session, process, user stack, kernel
 * stack, Python stack). Stacks are keys of the stacks map (a 64-bit hash of the frames,
 * checked frame by frame on insert); 0 when there is none. */
struct cgprof_sample_key {
        __u64 start_time; /* the process's (thread group leader's) start time, ns since boot */
        __u64 user_stack;
        __u64 kernel_stack;
        __u64 python_stack; /* the Python frames (CGPROF_STACK_PYTHON), 0: not a Python process */
        __u32 session;
        __u32 pid; /* tgid */
        __u32 lost; /* CGPROF_SAMPLE_*_LOST */
        __u32 exec_id; /* the process's exec() count (self_exec_id): which program it was running */
        __u32 kind; /* CGPROF_SAMPLE_KIND_*: what the count counts */
        __u32 tid; /* the thread, in sessions with CGPROF_SESSION_OFFCPU (wall-clock view); 0: not kept */
};

#define CGPROF_SAMPLE_KIND_CPU 0 /* the count is samples */
#define CGPROF_SAMPLE_KIND_OFFCPU 1 /* the count is nanoseconds off CPU (bpf/offcpu.h) */

/* How a stack was walked and why it ended. */
#define CGPROF_STACK_KERNEL_WALK \
        (1u << 0) /* by frame pointers only, no tables (kernel stacks: the kernel's walker) */
#define CGPROF_STACK_PENDING (1u << 1) /* the process's unwind tables were not loaded yet */
#define CGPROF_STACK_COMPLETE (1u << 2) /* reached the outermost frame */
#define CGPROF_STACK_TRUNCATED (1u << 3) /* CGPROF_MAX_STACK_DEPTH frames, more to walk */
#define CGPROF_STACK_NO_MAPPING (1u << 4) /* an address in no known mapping */
#define CGPROF_STACK_NO_TABLE (1u << 5) /* a frame without a table and no frame-pointer fallback */
#define CGPROF_STACK_UNSUPPORTED (1u << 6) /* a table row the walker cannot evaluate */
#define CGPROF_STACK_READ_ERROR (1u << 7) /* the stack could not be read (paged out, bad pointer) */
#define CGPROF_STACK_BAD_FRAME (1u << 8) /* the stack pointer did not grow: a broken frame */
#define CGPROF_STACK_FP_END (1u << 9) /* a frame-pointer step found no frame pointer (0) */
#define CGPROF_STACK_TABLE_PENDING \
        (1u << 10) /* a frame whose table was not built yet (walked as without one) */

/* A stack, leaf first: the value of the long stacks maps (more than
 * CGPROF_SHORT_STACK_DEPTH frames) and what the walks fill. Its first bytes
 * are a struct cgprof_stack_short (the value of the short stacks maps, which
 * the program stores from the same buffer): frames 0-127 and their
 * frame-pointer bits, then the frames and bits beyond. */
#define CGPROF_SHORT_FP_WORDS (CGPROF_SHORT_STACK_DEPTH / 64)
#define CGPROF_MORE_FP_WORDS ((CGPROF_MAX_STACK_DEPTH - CGPROF_SHORT_STACK_DEPTH) / 64)
struct cgprof_stack {
        __u32 n;
        __u32 flags; /* CGPROF_STACK_* */
        __u64 fp_frames[CGPROF_SHORT_FP_WORDS]; /* bit i: frame i (< 128) was left by frame pointer */
        __u64 pcs[CGPROF_MAX_STACK_DEPTH];
        __u64 fp_more[CGPROF_MORE_FP_WORDS]; /* bit i: frame 128 + i was left by frame pointer */
};

struct cgprof_stack_short {
        __u32 n; /* <= CGPROF_SHORT_STACK_DEPTH */
        __u32 flags;
        __u64 fp_frames[CGPROF_SHORT_FP_WORDS];
        __u64 pcs[CGPROF_SHORT_STACK_DEPTH];
};

/* Per session slot, per CPU. */
struct cgprof_session_stats {
        __u64 samples; /* samples recorded in the counts map */
        __u64 lost; /* samples not recorded: counts map full */
        __u64 collisions; /* stacks not stored: four different stacks with one hash (64-bit) */
        __u64 stack_errors; /* stacks not stored: the stacks map is full */
        /* Off-CPU (bpf/offcpu.h): waits recorded with their stacks, waits
         * under the session's offCpuMinUsec (counted here only), waits not
         * recorded (counts map full), and their nanoseconds. */
        __u64 offcpu_recorded, offcpu_short, offcpu_lost;
        __u64 offcpu_recorded_ns, offcpu_short_ns, offcpu_lost_ns;
        /* Run-queue waits: switched out runnable (preempted), until back. */
        __u64 offcpu_runqueue, offcpu_runqueue_ns;
        /* Of the recorded: at the thread's next switch-out (it blocked
         * again before its return to user mode, or its task work had not
         * run), with the user stack of that switch-out. */
        __u64 offcpu_late;
};

/* Per thread of an off-CPU session (bpf/offcpu.h, the wall-clock view):
 * its totals, kept after it exits until the agent reads them at the end. */
#define CGPROF_MAX_THREADS 16384
struct cgprof_thread_key {
        __u32 session;
        __u32 tid;
};
struct cgprof_thread {
        __u32 pid; /* tgid */
        __u32 pad;
        __u64 oncpu_ns; /* the kernel's measure (sum_exec_runtime), up to its last switch-out */
        __u64 offcpu_ns; /* blocked (not runnable), stacked or not */
        __u64 short_ns; /* of which under offCpuMinUsec, or not followed: not stacked */
        __u64 runqueue_ns; /* runnable, waiting for a CPU */
        char comm[16]; /* its name at its last switch-out */
};

/* Unwind tables in maps (bpf/unwind.h): a table is a range of the pages
 * map; a page says where its cells are in the shards. */
struct cgprof_unwind_table {
        __u64 base; /* ELF vaddr of offset 0 of page 0 (a mapping's bias + base: the table's address 0) */
        __u32 first_page;
        __u32 n_pages; /* 0: no table (none, or not built yet) */
        __u8 pending; /* being built: its frames are walked as without a table meanwhile */
        __u8 wanted; /* set by the walker when it meets a pending table: built first */
        __u8 pad[6];
};

/* The mappings of processes whose stacks are walked with tables: longest
 * prefix match on (pid, address), both big-endian. A mapping is stored as
 * the aligned blocks that cover it. */
struct cgprof_mapping_key {
        __u32 prefixlen; /* bits of pid_be and addr_be that count: 32 + ... */
        __u32 pid_be;
        __u64 addr_be;
};

struct cgprof_mapping {
        __u64 start, end;
        __u64 bias; /* load bias: the table's offset = address - bias - table base */
        __u32 table; /* 0: no table (walk by frame pointer) */
        __u32 flags;
};

/* A process whose mappings are loaded (keyed by tgid). */
struct cgprof_unwind_proc {
        __u64 start_time;
        __u32 mappings_requested; /* a CGPROF_PROC_EVENT_MAPPINGS was sent since the last load */
        __u32 pad;
};

#define CGPROF_COMM_LEN 16

/* Ring buffer event: the first sample of a process (pid, start time) in a
 * session, the first after it called exec(), or the first after it renamed
 * itself (comm is the thread group leader's name). */
#define CGPROF_PROC_EVENT_SEEN 0 /* first sample (in the session), or first after exec() or a rename */
#define CGPROF_PROC_EVENT_EXEC 1 /* exec() in a cgroup of a session: load its tables before it runs */
#define CGPROF_PROC_EVENT_MAPPINGS 2 /* a walk met an address in no known mapping (dlopen(), JIT) */

struct cgprof_proc_event {
        __u64 start_time;
        __u32 pid;
        __u32 session;
        char comm[CGPROF_COMM_LEN];
        __u32 kind; /* CGPROF_PROC_EVENT_* */
        __u32 exec_id;
        /* The parent process (real_parent's thread group) and its start
         * time: a forked child runs its parent's program until it calls
         * exec() (same exec_id), so what the agent knows of the parent's
         * interpreter holds for it (DataLoader workers). 0: unknown. */
        __u32 ppid;
        __u32 pad;
        __u64 parent_start_time;
};

struct cgprof_proc_seen {
        __u64 start_time;
        __u32 session;
        __u32 pad;
        char comm[CGPROF_COMM_LEN];
};

/* CUDA kernel launches (SEC("uprobe") cgprof_launch): a uprobe on each
 * launch entry point of the CUDA runtime or driver; its bpf_cookie is the
 * entry point's CGPROF_LAUNCH_* (how to read its arguments). A launch is
 * counted like a sample, in the same counts and stacks maps: its user
 * stack and Python stack as a sample's, and in the kernel_stack field a
 * "stack" flagged CGPROF_STACK_LAUNCH that holds what was launched
 * (CGPROF_LAUNCH_PC_*): a uprobe fires in user mode, so a launch has no
 * kernel stack. */
#define CGPROF_LAUNCH_KERNEL \
        0 /* cudaLaunchKernel(func, dim3 grid, dim3 block, args, shmem, stream) (+ _ptsz, Cooperative) */
#define CGPROF_LAUNCH_KERNEL_EXC \
        1 /* cudaLaunchKernelExC(const cudaLaunchConfig_t *, func, args) (+ _ptsz) */
#define CGPROF_LAUNCH_GRAPH 2 /* cudaGraphLaunch(exec, stream), cuGraphLaunch(exec, stream) (+ _ptsz) */
#define CGPROF_LAUNCH_CU_KERNEL \
        3 /* cuLaunchKernel(CUfunction, gx, gy, gz, bx, by, bz, shmem, stream, ...) */
#define CGPROF_LAUNCH_CU_KERNEL_EX 4 /* cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, ...) */
/* cgprof_cupti_launch(correlation) in libcgprof-cupti.so (docs/gpu.md,
 * kernel durations): CUPTI's callback at a launch API's entry. Counted only
 * for sessions with CGPROF_SESSION_GPU_DURATIONS; its stack is the anchor
 * of the kernel's GPU time, and (pid, correlation) -> its sample key goes
 * into the cupti_launches map for the agent's join. */
#define CGPROF_LAUNCH_CUPTI 5
#define _CGPROF_LAUNCH_MAX 6

/* cupti_launches (LRU): the launch of a correlation ID, by the pid that made
 * it, to the sample key its stack was counted under. */
struct cgprof_cupti_launch_key {
        __u32 pid; /* tgid */
        __u32 correlation;
};
#define CGPROF_MAX_CUPTI_LAUNCHES 65536

#define CGPROF_STACK_LAUNCH (1u << 24) /* a launch record, not a stack (below) */
#define CGPROF_LAUNCH_PC_FUNC \
        0 /* the host stub (runtime), the CUfunction (driver), the graph exec (graphs) */
#define CGPROF_LAUNCH_PC_GRID 1 /* grid x | y << 32 (0: a graph) */
#define CGPROF_LAUNCH_PC_GRID_Z_BLOCK_X 2 /* grid z | block x << 32 */
#define CGPROF_LAUNCH_PC_BLOCK 3 /* block y | z << 32 */
#define CGPROF_LAUNCH_PC_STREAM 4 /* the stream (0: the legacy default stream) */
#define CGPROF_LAUNCH_PC_ENTRY 5 /* CGPROF_LAUNCH_* */
#define CGPROF_LAUNCH_PCS 6

#include "python.h" /* the Python frame walk's structures */
