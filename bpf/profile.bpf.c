/* SPDX-License-Identifier: (LGPL-2.1-or-later OR BSD-2-Clause) */
/* cgprof's sampler: a perf_event program that keeps only samples of cgroups
 * with an active session and counts (session, process, user stack, kernel
 * stack) in the kernel. Counts and stacks are double-buffered: the agent
 * flips 'active_set' and drains the other set, so a stack ID it reads is
 * never reused under it. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "profile.h"

#ifndef EEXIST
#define EEXIST 17
#endif
#ifndef EFAULT
#define EFAULT 14
#endif
#ifndef ENOENT
#define ENOENT 2
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Minimal CO-RE view of the kernel types we read: no vmlinux.h needed, the
 * loader relocates the offsets with the running kernel's BTF. */
struct task_struct {
        __u64 start_time;
        struct task_struct *group_leader;
        __s32 tgid;
        char comm[16];
} __attribute__((preserve_access_index));

/* Which counts/stacks set the program writes to (0 or 1). */
__u32 active_set = 0;

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, CGPROF_MAX_CGROUPS);
        __type(key, __u64); /* cgroup ID */
        __type(value, __u32); /* session slot */
} cgroups SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, CGPROF_MAX_SESSIONS);
        __type(key, __u32);
        __type(value, struct cgprof_session);
} sessions SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, CGPROF_MAX_SESSIONS);
        __type(key, __u32);
        __type(value, struct cgprof_session_stats);
} stats SEC(".maps");

#define COUNTS_MAP(n)                                  \
        struct {                                       \
                __uint(type, BPF_MAP_TYPE_HASH);       \
                __uint(max_entries, 65536);            \
                __type(key, struct cgprof_sample_key); \
                __type(value, __u64);                  \
        } n SEC(".maps")

#define STACKS_MAP(n)                                                       \
        struct {                                                            \
                __uint(type, BPF_MAP_TYPE_STACK_TRACE);                     \
                __uint(max_entries, 16384);                                 \
                __uint(key_size, sizeof(__u32));                            \
                __uint(value_size, CGPROF_MAX_STACK_DEPTH * sizeof(__u64)); \
        } n SEC(".maps")

COUNTS_MAP(counts0);
COUNTS_MAP(counts1);
STACKS_MAP(stacks0);
STACKS_MAP(stacks1);

struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, 65536);
        __type(key, __u32); /* tgid */
        __type(value, struct cgprof_proc_seen);
} procs_seen SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 256 * 1024);
} proc_events SEC(".maps");

static __always_inline int comm_equal(const char *a, const char *b) {
        /* 16 bytes compared as two words. */
        return ((const __u64 *) a)[0] == ((const __u64 *) b)[0] &&
               ((const __u64 *) a)[1] == ((const __u64 *) b)[1];
}

static __always_inline void note_process(struct task_struct *task, __u32 pid, __u64 start_time, __u32 slot) {
        struct cgprof_proc_seen *seen, v = { .start_time = start_time, .session = slot };
        struct cgprof_proc_event *e;

        BPF_CORE_READ_STR_INTO(&v.comm, task, group_leader, comm);

        seen = bpf_map_lookup_elem(&procs_seen, &pid);
        if (seen && seen->start_time == start_time && seen->session == slot &&
            comm_equal(seen->comm, v.comm))
                return;

        e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);
        if (!e)
                return; /* retried at the next sample: procs_seen not updated */
        e->start_time = start_time;
        e->pid = pid;
        e->session = slot;
        __builtin_memcpy(e->comm, v.comm, sizeof(e->comm));
        bpf_ringbuf_submit(e, 0);
        bpf_map_update_elem(&procs_seen, &pid, &v, BPF_ANY);
}

static __always_inline int stack_id(void *ctx, void *stack_map, __u64 flags,
                                    struct cgprof_session_stats *st) {
        long id = bpf_get_stackid(ctx, stack_map, flags);
        if (id == -EEXIST) {
                if (st)
                        __sync_fetch_and_add(&st->collisions, 1);
        } else if (id < 0 && id != -EFAULT) {
                if (st)
                        __sync_fetch_and_add(&st->stack_errors, 1);
        }
        return (int) id;
}

static __always_inline int record(void *ctx, void *counts, void *stack_map, struct cgprof_sample_key *key,
                                  __u32 flags, struct cgprof_session_stats *st) {
        __u64 one = 1, *v;

        key->user_stack = stack_id(ctx, stack_map, BPF_F_USER_STACK, st);
        if (flags & CGPROF_SESSION_KERNEL_STACKS)
                key->kernel_stack = stack_id(ctx, stack_map, 0, st);
        else
                key->kernel_stack = -ENOENT;

        v = bpf_map_lookup_elem(counts, key);
        if (v) {
                __sync_fetch_and_add(v, 1);
                return 0;
        }
        if (bpf_map_update_elem(counts, key, &one, BPF_NOEXIST) == 0)
                return 0;
        /* Lost the race to another CPU, or the map is full. */
        v = bpf_map_lookup_elem(counts, key);
        if (v) {
                __sync_fetch_and_add(v, 1);
                return 0;
        }
        return -1;
}

SEC("perf_event")
int cgprof_sample(struct bpf_perf_event_data *ctx) {
        __u64 cookie = bpf_get_attach_cookie(ctx);
        __u32 mode = cookie >> 32, id = (__u32) cookie, slot;
        struct cgprof_sample_key key = {};
        struct cgprof_session_stats *st;
        struct cgprof_session *sess;
        struct task_struct *task;
        __u64 pid_tgid;
        int r;

        if (mode == CGPROF_ATTACH_CGROUP)
                slot = id;
        else {
                __u64 cgid = bpf_get_current_cgroup_id();
                __u32 *s = bpf_map_lookup_elem(&cgroups, &cgid);
                if (!s)
                        return 0;
                slot = *s;
        }

        sess = bpf_map_lookup_elem(&sessions, &slot);
        if (!sess || !(sess->flags & CGPROF_SESSION_ACTIVE))
                return 0;
        if (mode == CGPROF_ATTACH_CPU && sess->group != id)
                return 0; /* another (event, frequency) group's sample */

        pid_tgid = bpf_get_current_pid_tgid();
        key.pid = pid_tgid >> 32;
        if (key.pid == 0)
                return 0; /* idle */
        key.session = slot;

        task = (struct task_struct *) bpf_get_current_task();
        key.start_time = BPF_CORE_READ(task, group_leader, start_time);

        st = bpf_map_lookup_elem(&stats, &slot);

        if (active_set == 0)
                r = record(ctx, &counts0, &stacks0, &key, sess->flags, st);
        else
                r = record(ctx, &counts1, &stacks1, &key, sess->flags, st);

        if (st) {
                if (r < 0)
                        __sync_fetch_and_add(&st->lost, 1);
                else
                        __sync_fetch_and_add(&st->samples, 1);
        }

        note_process(task, key.pid, key.start_time, slot);
        return 0;
}

/* After exec() a process has a new command line and new mappings: forget it,
 * so its next sample tells the agent again. BTF-enabled tracepoint: needs no
 * tracefs. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(cgprof_exec, struct task_struct *p, __s32 old_pid, void *bprm) {
        __u32 pid = BPF_CORE_READ(p, tgid);
        bpf_map_delete_elem(&procs_seen, &pid);
        return 0;
}
