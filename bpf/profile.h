/* SPDX-License-Identifier: (LGPL-2.1-or-later OR BSD-2-Clause) */
#pragma once

/* Structures shared by profile.bpf.c and the agent's sampler: fixed-width
 * fields only. */

#define CGPROF_MAX_SESSIONS 4096 /* session slots; slot 0 is never used */
#define CGPROF_MAX_STACK_DEPTH 127 /* PERF_MAX_STACK_DEPTH */
#define CGPROF_MAX_CGROUPS 16384

/* bpf_cookie of each perf event link: (mode << 32) | id. */
#define CGPROF_ATTACH_CPU 0u /* id: sampler group; filter by the cgroup map */
#define CGPROF_ATTACH_CGROUP 1u /* id: the session slot of the cgroup-scoped event */

#define CGPROF_SESSION_ACTIVE (1u << 0)
#define CGPROF_SESSION_KERNEL_STACKS (1u << 1)

struct cgprof_session {
        __u32 group; /* sampler group (event, frequency) in CPU mode */
        __u32 flags; /* CGPROF_SESSION_* */
};

/* Key of the in-kernel counts: one (session, process, user stack, kernel
 * stack). Stack ids are negative errnos when there is no stack. */
struct cgprof_sample_key {
        __u64 start_time; /* the process's (thread group leader's) start time, ns since boot */
        __u32 session;
        __u32 pid; /* tgid */
        __s32 user_stack;
        __s32 kernel_stack;
};

/* Per session slot, per CPU. */
struct cgprof_session_stats {
        __u64 samples; /* samples recorded in the counts map */
        __u64 lost; /* samples not recorded: counts map full */
        __u64 collisions; /* stack map hash collisions (-EEXIST): stack lost */
        __u64 stack_errors; /* stack map full or other errors (-ENOMEM, ...) */
};

#define CGPROF_COMM_LEN 16

/* Ring buffer event: the first sample of a process (pid, start time) in a
 * session, the first after it called exec(), or the first after it renamed
 * itself (comm is the thread group leader's name). */
struct cgprof_proc_event {
        __u64 start_time;
        __u32 pid;
        __u32 session;
        char comm[CGPROF_COMM_LEN];
};

struct cgprof_proc_seen {
        __u64 start_time;
        __u32 session;
        __u32 pad;
        char comm[CGPROF_COMM_LEN];
};
