/* SPDX-License-Identifier: (LGPL-2.1-or-later OR BSD-2-Clause) */
#pragma once

/* Off-CPU time (profile "events": ["offcpu"]), part of profile.bpf.c: its
 * maps, walkers and stores are shared with the perf sample. Only
 * tracepoints (BTF-typed: no tracefs): kernels without kprobes or BPF
 * trampolines (fentry) have them too.
 *
 * The state is the task's (task storage), not the CPU's: a task that wakes
 * up on another CPU finds it, and a CPU's next task cannot take it.
 * - sched_switch, prev (current): a task of a session's cgroup leaves the
 *   CPU: its switch-out time, for the share of switches the session's
 *   probability picks, and whether it was still runnable (preempted: its
 *   wait is for a CPU, counted in the stats only, as run-queue time).
 * - sched_switch, next (not running yet): it was off CPU until now. A wait
 *   under the session's offCpuMinUsec only adds to the stats. A longer one
 *   is pending: its time, and its kernel stack (bpf_get_task_stack(): the
 *   task is still in __schedule(), its stack says why it waited:
 *   futex_wait, pipe_read, hrtimer_nanosleep, ...).
 * - A pending wait is recorded in the task itself, where its user memory
 *   can be read, on its way back to user mode: by a task work scheduled at
 *   its switch-in (cgprof_off_sw_tw, kernel 6.18+), else at its return from
 *   the system call it waited in (sys_exit); or, when it leaves the CPU
 *   again before (a futex wait woken up to wait again; with sys_exit, a
 *   wait outside a system call), at that switch-out. The user walk is the perf sample's (unwind tables, frame
 *   pointers, Python frames) from the registers saved on kernel entry:
 *   inside the system call they are those of the wait. Its nanoseconds go
 *   to the count of its key (kind CGPROF_SAMPLE_KIND_OFFCPU).
 * - Per thread (the wall-clock view), at each switch-out of a session's
 *   thread: its CPU time since the last (sum_exec_runtime) and the waits
 *   that ended since go to its totals (offcpu_threads), which outlive it.
 * The agent attaches these while a session follows off-CPU time.
 *
 * Cost: sched_switch runs at every switch of the node and (before 6.18)
 * sys_exit at every system call, profiled or not. Their early exits:
 * - sys_exit: one load; a task-storage lookup only while some wait is
 *   pending (offcpu_pending), i.e. after a wait of at least offCpuMinUsec,
 *   until it is recorded.
 * - sched_switch, prev: the cgroup filter (offcpu_cgroup_filter: one
 *   load) and, while no wait is pending, nothing else for a task whose
 *   cgroup is no session's; else one task-storage lookup (a pending wait
 *   and, when it is followed, its state: not looked up twice); the cgroups
 *   hash only for a task whose cgroup may be a session's, and, for a
 *   followed task, only when its cgroup or the cgroups map changed (its
 *   cached answer).
 * - sched_switch, next: one task-storage lookup; a task never followed has
 *   no storage. */

#ifndef ENOMEM
#define ENOMEM 12
#endif

#define OFFCPU_KERNEL_DEPTH 64 /* kernel frames kept of a wait (a power of two) */
/* A thread's times go to its totals (a hash lookup) once they reach this,
 * and when it exits: a living thread's totals lag by at most this much. */
#define OFFCPU_FLUSH_NS 1000000ULL
#define OFFCPU_TASK_DEAD 0x80 /* TASK_DEAD, in sched_switch's prev_state */

struct offcpu_task {
        __u64 switched_out; /* ns (bpf_ktime_get_ns), 0: not followed */
        __u64 pending_ns; /* a wait to record in the task, 0: none */
        __u32 session; /* the slot at switch-out */
        __u32 pending_session;
        __u32 kernel_n; /* frames in kernel_pcs */
        __u32 runqueue; /* switched out runnable (preempted): a run-queue wait */
        __u32 work_tid; /* its TID, the key of its task work (offcpu_works) */
        __u32 pad;
        /* The cgroups map's answer for the task's cgroup, while
         * offcpu_cgroups_gen does not change: cgroup_slot 0, none. */
        __u64 cgroup_id;
        __u32 cgroup_gen;
        __u32 cgroup_slot;
        /* The wall-clock view (struct cgprof_thread): its sum_exec_runtime
         * and the time at its last switch-out seen, and its times since
         * its totals were last added to (ns; at most OFFCPU_FLUSH_NS). */
        __u64 runtime_seen, seen_at;
        __u64 acc_on, acc_off, acc_short, acc_runqueue;
        __u64 kernel_pcs[OFFCPU_KERNEL_DEPTH]; /* the pending wait's kernel stack, leaf first */
};

struct {
        __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __type(key, int);
        __type(value, struct offcpu_task);
} offcpu_tasks SEC(".maps");

/* How many keys of the cgroups map fall in each bucket (cgroup ID modulo
 * the size), kept by the agent (sampler_cgroup_set(): counted before an
 * insert, uncounted after a delete, so it never says less than the map).
 * A task whose bucket counts 0 is in no session's cgroup: no hash lookup. */
__u16 offcpu_cgroup_filter[CGPROF_OFFCPU_FILTER_SIZE] = {};

/* Waits pending in tasks (set at a switch-in, undone when recorded), alone
 * in its cache line: written at waits of offCpuMinUsec or longer only,
 * read at every system call. 0: sys_exit has nothing to look up. A task
 * that cannot record one (the programs detached meanwhile) leaves it above
 * 0: sys_exit then looks up every task, as if there were no count. */
__s64 offcpu_pending[8] __attribute__((aligned(64))) = {};

/* Changed by the agent after each change of the cgroups map: a task's
 * cached answer (struct offcpu_task) from another generation is asked
 * again. */
__u32 offcpu_cgroups_gen = 0;

/* The session slot of the current task's cgroup (0: none), from t's cache
 * when t has one of this generation for this cgroup. */
static __always_inline __u32 offcpu_cgroup_slot(struct offcpu_task *t, __u64 cgid) {
        __u32 gen = *(volatile __u32 *) &offcpu_cgroups_gen, *slot;

        if (t && t->cgroup_id == cgid && t->cgroup_gen == gen)
                return t->cgroup_slot;
        /* After reading gen: a change meanwhile is seen next time. */
        slot = bpf_map_lookup_elem(&cgroups, &cgid);
        if (t) {
                t->cgroup_id = cgid;
                t->cgroup_gen = gen;
                t->cgroup_slot = slot ? *slot : 0;
        }
        return slot ? *slot : 0;
}

/* Per thread of an off-CPU session: its totals (the wall-clock view). A
 * hash keyed by thread, not task storage: a thread that exits keeps them
 * until the agent reads them at the session's end. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, CGPROF_MAX_THREADS);
        __type(key, struct cgprof_thread_key);
        __type(value, struct cgprof_thread);
} offcpu_threads SEC(".maps");

/* Adds the times of task (storage t) in session slot to its totals. */
static __attribute__((noinline)) int offcpu_thread_add(struct task_struct *task, struct offcpu_task *t,
                                                       __u32 slot) {
        struct cgprof_thread_key k = { .session = slot, .tid = task->pid };
        struct cgprof_thread *v = bpf_map_lookup_elem(&offcpu_threads, &k);

        if (!v) {
                struct cgprof_thread z = { .pid = task->tgid };

                bpf_map_update_elem(&offcpu_threads, &k, &z, BPF_NOEXIST);
                v = bpf_map_lookup_elem(&offcpu_threads, &k);
                if (!v)
                        return 0; /* full: this thread gets no totals */
        }
        v->oncpu_ns += t->acc_on;
        v->offcpu_ns += t->acc_off;
        v->short_ns += t->acc_short;
        v->runqueue_ns += t->acc_runqueue;
        t->acc_on = t->acc_off = t->acc_short = t->acc_runqueue = 0;
        bpf_probe_read_kernel(v->comm, sizeof(v->comm), task->comm);
        return 0;
}

/* current (task, storage t) leaves the CPU in session slot: its time on CPU
 * since its last switch-out is added up, and with the waits that ended
 * since (offcpu_switch_in()) goes to its totals once they reach
 * OFFCPU_FLUSH_NS, or as it exits. Its first switch-out in the session counts
 * all its CPU time if it started after the session, none before (the rest
 * of a slice is missed). */
static __always_inline void offcpu_thread_flush(struct task_struct *task, struct offcpu_task *t, __u32 slot,
                                                const struct cgprof_session *sess, __u64 now, _Bool dead) {
        __u64 runtime = task->se.sum_exec_runtime, on = 0;

        if (t->seen_at >= sess->start_ns)
                on = runtime - t->runtime_seen;
        else if (task->start_time >= sess->start_ns)
                on = runtime;
        t->runtime_seen = runtime;
        t->seen_at = now;
        if (t->session != slot)
                t->acc_off = t->acc_short = t->acc_runqueue = 0; /* another session's waits */
        t->acc_on += on;
        if (dead || t->acc_on + t->acc_off + t->acc_runqueue >= OFFCPU_FLUSH_NS)
                offcpu_thread_add(task, t, slot);
}

/* Recording a wait at the task's return to user mode (kernel 6.18+): a
 * task work scheduled from sched_switch as the task comes back from a long
 * wait runs in the task, on its way to user mode, where its user memory can
 * be read: no tracepoint on every system call of the node. The kfunc is
 * weak: on a kernel without it the agent loads cgprof_off_sw and
 * cgprof_off_exit instead (sampler.c), and this program is never loaded.
 * The struct and the callback's type are the kernel's (uapi/linux/bpf.h,
 * bpf_task_work_callback_t). */
struct bpf_task_work {
        __u64 __opaque;
} __attribute__((aligned(8)));
/* The kernel's struct bpf_map, opaque: a struct, not a declaration (libbpf
 * 1.1 finds a forward declaration incompatible with the kernel's struct,
 * and fails the whole load; the name of a struct is not compared). */
struct offcpu_kernel_map {
        __u32 opaque;
};
typedef int (*offcpu_work_fn)(struct offcpu_kernel_map *map, void *key, void *value);
extern int bpf_task_work_schedule_resume_impl(struct task_struct *task, struct bpf_task_work *tw,
                                              void *map__map, offcpu_work_fn callback,
                                              void *aux__prog) __weak __ksym;

/* A task work per thread (by TID) that waits to record a wait: an LRU
 * hash, so that the works of threads gone are reused. An entry evicted
 * with its work scheduled cancels it: the wait is then recorded at the
 * thread's next switch-out, as when the work did not run in time. Sized
 * by the agent (1 where the kfunc is not used). */
struct offcpu_work {
        struct bpf_task_work tw;
};

struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, CGPROF_MAX_THREADS);
        __type(key, __u32);
        __type(value, struct offcpu_work);
} offcpu_works SEC(".maps");

static const struct offcpu_work offcpu_work_zero = {};

/* Set by the agent: cgprof_off_sw_tw schedules task works (1), or leaves
 * the waits to sys_exit (0, cgprof_off_exit attached: a session keeps
 * short waits, for which a task work each costs more). */
__u32 offcpu_task_work = 0;

/* Adds value to the count of key, storing its stacks at its first count in
 * this drain period. Returns 0, or -ENOMEM when the counts map is full. */
static __always_inline int offcpu_count(void *counts, struct stack_maps *stacks, struct scratch *s,
                                        struct cgprof_sample_key *key, struct cgprof_session_stats *st,
                                        __u64 value) {
        __u64 *v = bpf_map_lookup_elem(counts, key);

        if (!v && store_stacks(stacks, s, key, st))
                v = bpf_map_lookup_elem(counts, key); /* a stack took another key */
        if (v) {
                __sync_fetch_and_add(v, value);
                return 0;
        }
        if (bpf_map_update_elem(counts, key, &value, BPF_NOEXIST) == 0)
                return 0;
        v = bpf_map_lookup_elem(counts, key); /* another CPU inserted it meanwhile */
        if (!v)
                return -ENOMEM;
        __sync_fetch_and_add(v, value);
        return 0;
}

/* The stacks of the current task (the user walk now, the kernel stack
 * taken at its switch-in) into s and key's stack fields (hashes). */
static __always_inline void offcpu_stacks(struct scratch *s, struct task_struct *task,
                                          struct task_struct *leader, struct offcpu_task *t,
                                          struct cgprof_sample_key *key, __u32 tid, __u32 flags) {
        if (task->mm) {
                /* The registers saved on kernel entry: inside the system
                 * call, those of the wait. */
                struct cgprof_unwind_proc *proc = user_stack_init(s, key->pid, key->start_time, flags);
                /* Read into the walk's stack copy, filled later: not on
                 * the BPF stack, which the walks' calls fill up. */
                struct pt_regs *regs = (struct pt_regs *) s->w.copy;

                _Static_assert(sizeof(struct pt_regs) <= sizeof(s->w.copy), "pt_regs in the stack copy");
                if (bpf_probe_read_kernel(regs, sizeof(*regs), (void *) bpf_task_pt_regs((void *) task)) < 0)
                        s->user.flags = CGPROF_STACK_READ_ERROR | (proc ? 0 : CGPROF_STACK_KERNEL_WALK);
                else {
                        s->w.ip = PT_REGS_IP(regs);
                        s->w.sp = PT_REGS_SP(regs);
                        s->w.fp = PT_REGS_FP(regs);
                        user_stack_walk(s, proc, key->pid, key->start_time, key->session, flags);
                }
                if (s->user.n > 0)
                        key->user_stack = stack_hash_finish(&s->user, s->w.hash);
        }
        if ((flags & CGPROF_SESSION_PYTHON) &&
            python_stack(s, task, leader, key->pid, tid, key->start_time, key->exec_id))
                key->python_stack = stack_hash(&s->python);
        if (t->kernel_n > 0) {
                __builtin_memcpy(s->kernel.pcs, t->kernel_pcs, sizeof(t->kernel_pcs));
                s->kernel.n = t->kernel_n & (OFFCPU_KERNEL_DEPTH - 1) ?: OFFCPU_KERNEL_DEPTH;
                if (t->kernel_n > OFFCPU_KERNEL_DEPTH)
                        s->kernel.n = OFFCPU_KERNEL_DEPTH;
                s->kernel.flags = CGPROF_STACK_KERNEL_WALK;
                fp_frames_clear(&s->kernel);
                key->kernel_stack = stack_hash(&s->kernel);
        }
}

/* Records the current task's pending wait, if it has one; late: at its next
 * switch-out, not on its way back to user mode. A global function: the
 * verifier checks it once, not once per call (the task-work program calls
 * it twice, and twice its walks are more than the verifier's budget). */
__attribute__((noinline)) int offcpu_record_current(__u32 late) {
        struct cgprof_sample_key key = { .kind = CGPROF_SAMPLE_KIND_OFFCPU };
        struct task_struct *task = bpf_get_current_task_btf();
        struct cgprof_session_stats *st;
        struct cgprof_session *sess;
        struct task_struct *leader;
        struct offcpu_task *t;
        struct scratch *s;
        __u64 delta, pid_tgid;
        struct stack_maps stacks;
        int r;
        void *counts;

        t = bpf_task_storage_get(&offcpu_tasks, task, 0, 0);
        if (!t || !t->pending_ns)
                return 0;
        delta = t->pending_ns;
        t->pending_ns = 0;
        __sync_fetch_and_add(&offcpu_pending[0], -1);
        key.session = t->pending_session;
        sess = bpf_map_lookup_elem(&sessions, &key.session);
        if (!sess || !(sess->flags & CGPROF_SESSION_ACTIVE))
                return 0;
        st = bpf_map_lookup_elem(&stats, &key.session);
        s = scratch_take(SCRATCH_TRACE);
        if (!s) {
                if (st) {
                        __sync_fetch_and_add(&st->offcpu_lost, 1);
                        __sync_fetch_and_add(&st->offcpu_lost_ns, delta);
                }
                return 0;
        }

        pid_tgid = bpf_get_current_pid_tgid();
        key.pid = pid_tgid >> 32;
        key.tid = (__u32) pid_tgid; /* the wall-clock view is per thread */
        leader = task->group_leader;
        key.start_time = leader->start_time;
        key.exec_id = leader->self_exec_id;
        offcpu_stacks(s, task, leader, t, &key, (__u32) pid_tgid, sess->flags);

        if (active_set == 0) {
                counts = &counts0;
                stacks.short_stacks = &stacks0;
                stacks.long_stacks = &long_stacks0;
        } else {
                counts = &counts1;
                stacks.short_stacks = &stacks1;
                stacks.long_stacks = &long_stacks1;
        }
        r = offcpu_count(counts, &stacks, s, &key, st, delta);
        scratch_put(s);
        if (r < 0) {
                if (st) {
                        __sync_fetch_and_add(&st->offcpu_lost, 1);
                        __sync_fetch_and_add(&st->offcpu_lost_ns, delta);
                }
                return 0;
        }
        if (st) {
                __sync_fetch_and_add(&st->offcpu_recorded, 1);
                __sync_fetch_and_add(&st->offcpu_recorded_ns, delta);
                if (late)
                        __sync_fetch_and_add(&st->offcpu_late, 1);
        }
        note_process(leader, key.pid, key.start_time, key.exec_id, key.session);
        return 0;
}

static int offcpu_work_run(struct offcpu_kernel_map *map, void *key, void *value);

/* Schedules the task work that records next's pending wait. When it cannot
 * (the LRU hash full of works scheduled, or one still scheduled), the wait
 * stays pending: recorded at next's next switch-out. */
static __always_inline void offcpu_work_schedule(struct task_struct *next, struct offcpu_task *t) {
        struct offcpu_work *w;

        /* Key and value not on the stack: the program's stack and its
         * calls' are at the verifier's limit. */
        t->work_tid = next->pid;
        w = bpf_map_lookup_elem(&offcpu_works, &t->work_tid);
        if (!w) {
                bpf_map_update_elem(&offcpu_works, &t->work_tid, &offcpu_work_zero, BPF_NOEXIST);
                w = bpf_map_lookup_elem(&offcpu_works, &t->work_tid);
        }
        if (w)
                bpf_task_work_schedule_resume_impl(next, &w->tw, &offcpu_works, offcpu_work_run, NULL);
}

/* next, back on the CPU: its wait ends now. With task_work, a wait to
 * record is recorded by a task work on its way back to user mode. */
static __always_inline void offcpu_switch_in(struct task_struct *next, _Bool task_work) {
        struct cgprof_session_stats *st;
        struct cgprof_session *sess;
        struct offcpu_task *t;
        __u64 delta;
        long n;

        t = bpf_task_storage_get(&offcpu_tasks, next, 0, 0);
        if (!t || t->switched_out == 0)
                return;
        delta = bpf_ktime_get_ns() - t->switched_out;
        t->switched_out = 0;
        sess = bpf_map_lookup_elem(&sessions, &t->session);
        if (!sess || !(sess->flags & CGPROF_SESSION_ACTIVE))
                return;
        st = bpf_map_lookup_elem(&stats, &t->session);
        if (t->runqueue)
                t->acc_runqueue += delta;
        else
                t->acc_off += delta;
        if (t->acc_on + t->acc_off + t->acc_runqueue >= OFFCPU_FLUSH_NS)
                offcpu_thread_add(next, t, t->session); /* a long wait: now, in case it is its last */
        if (t->runqueue) {
                if (st) {
                        __sync_fetch_and_add(&st->offcpu_runqueue, 1);
                        __sync_fetch_and_add(&st->offcpu_runqueue_ns, delta);
                }
                return;
        }
        if (delta < sess->offcpu_min_ns || t->pending_ns) {
                /* Short; or (never seen) a wait not recorded before the next. */
                t->acc_short += delta;
                if (st) {
                        __sync_fetch_and_add(&st->offcpu_short, 1);
                        __sync_fetch_and_add(&st->offcpu_short_ns, delta);
                }
                return;
        }
        t->pending_ns = delta;
        if (delta) /* pending (0: none) */
                __sync_fetch_and_add(&offcpu_pending[0], 1);
        t->pending_session = t->session;
        t->kernel_n = 0;
        if (sess->flags & CGPROF_SESSION_KERNEL_STACKS) {
                n = bpf_get_task_stack(next, t->kernel_pcs, sizeof(t->kernel_pcs), 0);
                t->kernel_n = n > 0 ? (__u32) n / 8 : 0;
        }
        if (task_work && *(volatile __u32 *) &offcpu_task_work)
                offcpu_work_schedule(next, t);
}

/* prev (current), leaving the CPU: records its pending wait, and follows
 * this switch-out when its cgroup is a session's that follows off-CPU. */
static __always_inline void offcpu_switch_out(struct task_struct *prev, _Bool preempt,
                                              unsigned int prev_state) {
        __u64 cgid = bpf_get_current_cgroup_id();
        _Bool maybe = offcpu_cgroup_filter[cgid & (CGPROF_OFFCPU_FILTER_SIZE - 1)] != 0;
        struct cgprof_session *sess;
        struct offcpu_task *t;
        __u64 now;
        __u32 slot;

        if (!maybe && *(volatile __s64 *) &offcpu_pending[0] == 0)
                return; /* in no session's cgroup, no wait pending in any task */
        t = bpf_task_storage_get(&offcpu_tasks, prev, 0, 0);
        if (t && t->pending_ns)
                offcpu_record_current(1); /* it waits again before a system call's return */
        if (!maybe)
                return;
        slot = offcpu_cgroup_slot(t, cgid);
        sess = slot ? bpf_map_lookup_elem(&sessions, &slot) : NULL;
        if (!sess || (sess->flags & (CGPROF_SESSION_ACTIVE | CGPROF_SESSION_OFFCPU)) !=
                             (CGPROF_SESSION_ACTIVE | CGPROF_SESSION_OFFCPU))
                return;
        if (!t) {
                t = bpf_task_storage_get(&offcpu_tasks, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
                if (!t)
                        return;
                (void) offcpu_cgroup_slot(t, cgid); /* its cache */
        }
        now = bpf_ktime_get_ns();
        offcpu_thread_flush(prev, t, slot, sess, now, prev_state & OFFCPU_TASK_DEAD);
        if (sess->offcpu_threshold == 0xffffffffu || bpf_get_prandom_u32() <= sess->offcpu_threshold) {
                t->switched_out = now;
                t->session = slot;
                /* Runnable still: it waits for a CPU, not for something. */
                t->runqueue = preempt || prev_state == 0;
        }
}

SEC("tp_btf/sched_switch")
int BPF_PROG(cgprof_off_sw, _Bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state) {
        if ((__u32) bpf_get_current_pid_tgid() != 0)
                offcpu_switch_out(bpf_get_current_task_btf(), preempt, prev_state); /* current: prev */
        offcpu_switch_in(next, 0);
        return 0;
}

/* The same, where the kernel has bpf_task_work_schedule_resume_impl(): no
 * sys_exit program while offcpu_task_work is 1. */
SEC("tp_btf/sched_switch")
int BPF_PROG(cgprof_off_sw_tw, _Bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state) {
        if ((__u32) bpf_get_current_pid_tgid() != 0)
                offcpu_switch_out(bpf_get_current_task_btf(), preempt, prev_state);
        offcpu_switch_in(next, 1);
        return 0;
}

/* The task work (sleepable, in the task, on its way to user mode): its
 * pending wait, unless its next switch-out recorded it first. */
static int offcpu_work_run(struct offcpu_kernel_map *map, void *key, void *value) {
        offcpu_record_current(0);
        return 0;
}

/* The end of the system call a pending wait was in: record it here. */
SEC("tp_btf/sys_exit")
int BPF_PROG(cgprof_off_exit, struct pt_regs *regs, long ret) {
        struct task_struct *current;
        struct offcpu_task *t;

        if (*(volatile __s64 *) &offcpu_pending[0] == 0)
                return 0; /* no wait pending in any task */
        current = bpf_get_current_task_btf();
        t = bpf_task_storage_get(&offcpu_tasks, current, 0, 0);
        if (t && t->pending_ns)
                offcpu_record_current(0);
        return 0;
}
