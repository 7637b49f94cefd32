/* SPDX-License-Identifier: (LGPL-2.1-or-later OR BSD-2-Clause) */
/* cgprof's sampler: a perf_event program that keeps only samples of cgroups
 * with an active session and counts (session, process, user stack, kernel
 * stack) in the kernel. Counts and stacks are double-buffered: the agent
 * flips 'active_set' and drains the other set, so a stack it reads is never
 * replaced under it.
 *
 * User stacks are walked here with the unwind tables the agent built from
 * the process's files' .eh_frame (bpf/unwind.h), frame by frame: find the
 * mapping of the address (unwind_mappings), binary-search its table's rows,
 * compute the CFA, read the return address and the saved frame pointer.
 * A frame whose mapping has no table (JIT code, no .eh_frame) is left by
 * frame pointer when the session allows it. Processes whose tables are not
 * loaded yet, and sessions that ask for frame pointers, get the kernel's
 * frame-pointer walk (bpf_get_stack). Stacks are stored by a 64-bit hash
 * and compared frame by frame on insert. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "profile.h"
#include "unwind.h"
#include "python.h"

#ifndef EEXIST
#define EEXIST 17
#endif
#ifndef EFAULT
#define EFAULT 14
#endif
#ifndef E2BIG
#define E2BIG 7
#endif
#ifndef ENOENT
#define ENOENT 2
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Minimal CO-RE view of the kernel types we read: no vmlinux.h needed, the
 * loader relocates the offsets with the running kernel's BTF. */
struct thread_struct {
        unsigned long fsbase; /* the thread pointer: glibc's and musl's pthread_self() */
} __attribute__((preserve_access_index));

struct sched_entity {
        __u64 sum_exec_runtime; /* ns on CPU, as of its last update (a switch-out updates it first) */
} __attribute__((preserve_access_index));

struct task_struct {
        struct thread_struct thread;
        struct sched_entity se;
        __u64 start_time;
        struct task_struct *group_leader;
        struct task_struct *real_parent;
        __s32 pid;
        __s32 tgid;
        char comm[16];
        void *mm;
        __u32 self_exec_id; /* u64 since Linux 5.9: its low half (little-endian) */
} __attribute__((preserve_access_index));

/* Which counts/stacks set the program writes to (0 or 1). */
__u32 active_set = 0;

/* CGPROF_BENCH_* (profile.h): 0 but in benchmarks. */
const volatile __u32 bench_variant = 0;
#define BENCH(flag) (bench_variant & (flag))

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

/* Stacks in two size tiers: the short ones (most) in small values, the
 * long ones (more than CGPROF_SHORT_STACK_DEPTH frames) in a smaller map of
 * 4 KiB values. The key's top bit says which (CGPROF_STACK_KEY_LONG). */
#define STACKS_MAP(n, value_type, entries)       \
        struct {                                 \
                __uint(type, BPF_MAP_TYPE_HASH); \
                __uint(max_entries, entries);    \
                __type(key, __u64);              \
                __type(value, value_type);       \
        } n SEC(".maps")

COUNTS_MAP(counts0);
COUNTS_MAP(counts1);
STACKS_MAP(stacks0, struct cgprof_stack_short, CGPROF_STACKS_PER_SET);
STACKS_MAP(stacks1, struct cgprof_stack_short, CGPROF_STACKS_PER_SET);
STACKS_MAP(long_stacks0, struct cgprof_stack, CGPROF_LONG_STACKS_PER_SET);
STACKS_MAP(long_stacks1, struct cgprof_stack, CGPROF_LONG_STACKS_PER_SET);

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

/* Unwind tables (bpf/unwind.h): the agent creates the shards as it needs
 * them and writes them, the pages and the rules through mmap(). The sizes
 * are set from the config before load (the shards' inner size too). */
struct unwind_shard {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(map_flags, BPF_F_MMAPABLE);
        __uint(max_entries, CGPROF_UNWIND_SHARD_ROWS / 2);
        __type(key, __u32);
        __type(value, __u64); /* two struct cgprof_unwind_cell (not in the BTF otherwise) */
};

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
        __uint(max_entries, CGPROF_UNWIND_ROWS_DEFAULT / CGPROF_UNWIND_SHARD_ROWS);
        __type(key, __u32);
        __array(values, struct unwind_shard);
} unwind_shards SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(map_flags, BPF_F_MMAPABLE);
        __uint(max_entries, CGPROF_UNWIND_ROWS_DEFAULT / CGPROF_UNWIND_PAGES_PER_ROWS);
        __type(key, __u32);
        __type(value, struct cgprof_unwind_page);
} unwind_pages SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(map_flags, BPF_F_MMAPABLE);
        __uint(max_entries, CGPROF_UNWIND_RULES_MAX / 2);
        __type(key, __u32);
        __type(value, struct cgprof_unwind_rule_pair);
} unwind_rules SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, CGPROF_MAX_UNWIND_TABLES);
        __type(key, __u32);
        __type(value, struct cgprof_unwind_table);
} unwind_tables SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_LPM_TRIE);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __uint(max_entries, CGPROF_MAX_MAPPING_ENTRIES);
        __type(key, struct cgprof_mapping_key);
        __type(value, struct cgprof_mapping);
} unwind_mappings SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, CGPROF_MAX_UNWIND_PROCS);
        __type(key, __u32); /* tgid */
        __type(value, struct cgprof_unwind_proc);
} unwind_procs SEC(".maps");

/* Python processes (bpf/python.h), written by the agent. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, CGPROF_MAX_PYTHON_PROCS);
        __type(key, __u32); /* tgid */
        __type(value, struct cgprof_python_proc);
} python_procs SEC(".maps");

/* The thread state last found for a thread (checked before use). */
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, CGPROF_MAX_PYTHON_THREADS);
        __type(key, __u32); /* tid */
        __type(value, __u64); /* PyThreadState address */
} python_threads SEC(".maps");

/* Per-CPU scratch: the stack being walked and the walker's registers (too
 * big for the BPF stack). */
#define STACK_COPY_SIZE 1024 /* a power of two */
struct walk_state {
        __u64 ip, sp, fp;
        __u64 hash; /* of the frames pushed so far (stack_hash()'s, as they are pushed) */
        struct cgprof_mapping map; /* the last mapping found (map.end 0: none) */
        __u64 start_time;
        __u32 pid;
        __u32 session_flags;
        __u32 session;
        __u32 stack_switched; /* a CGPROF_CFA_FP_STACK_SWITCH step was taken */
        __u32 at_signal; /* ip is the instruction a signal interrupted (from a ucontext), not a return address */
        __u32 pad;
        /* The user stack from the interrupted sp, copied in one read: frame
         * records inside it are loads, not a helper call each. */
        __u64 copy_base, copy_len;
        __u8 copy[STACK_COPY_SIZE];
};

/* The Python walk: the process's offsets, the frame to read next, and
 * the bytes of a frame (its first proc.frame_size bytes: every offset the
 * walk uses is below). */
#define PY_FRAME_READ CGPROF_PY_FRAME_READ_MAX
struct py_state {
        struct cgprof_python_proc proc;
        __u64 frame;
        __u64 tstate;
        __u64 fsbase;
        __u8 buf[PY_FRAME_READ];
};

struct scratch {
        struct walk_state w;
        struct py_state py;
        struct cgprof_stack user;
        struct cgprof_stack kernel;
        struct cgprof_stack python;
        __u32 busy; /* taken (scratch_take()) */
        __u32 pad;
};

/* Per-CPU scratch, one for each kind of program that may run on a CPU
 * while another is midway:
 * - SCRATCH_SAMPLE: a CPU sample (cgprof_sample, a perf event's overflow in
 *   the timer interrupt) interrupts whatever runs, the recording of a wait
 *   at a system call's exit or a launch's uprobe included. It never nests
 *   in itself (the kernel runs one perf-event program per CPU at a time).
 * - SCRATCH_TRACE: the off-CPU tracepoints (sched_switch with interrupts
 *   off, sys_exit with preemption off): one at a time on a CPU.
 * - SCRATCH_LAUNCH: a uprobe's program runs with migration disabled only:
 *   preempted, another task's may run on its CPU.
 * The last two are taken for the time of their use: a program that finds
 * its scratch taken loses its record (counted) rather than tearing
 * another's. */
enum {
        SCRATCH_SAMPLE,
        SCRATCH_TRACE,
        SCRATCH_LAUNCH,
        _SCRATCH_MAX
};

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, _SCRATCH_MAX);
        __type(key, __u32);
        __type(value, struct scratch);
} scratch_map SEC(".maps");

/* The CPU's scratch of kind, NULL: none, or taken (not SCRATCH_SAMPLE's:
 * never taken). */
static __always_inline struct scratch *scratch_take(__u32 kind) {
        struct scratch *s = bpf_map_lookup_elem(&scratch_map, &kind);

        if (!s || (kind != SCRATCH_SAMPLE && __sync_val_compare_and_swap(&s->busy, 0, 1) != 0))
                return NULL;
        return s;
}

static __always_inline void scratch_put(struct scratch *s) {
        asm volatile("" ::: "memory"); /* its uses before (one CPU: no fence) */
        s->busy = 0;
}

/* The walks' loop context: the per-CPU scratch, found once per sample
 * rather than once per frame. */
struct walk_ctx {
        struct scratch *s;
};

/* A frame index the verifier sees bounded: masked in a register the
 * compiler cannot swap for an unmasked copy. */
static __always_inline __u64 frame_index(__u64 i) {
        asm volatile("%0 &= %1" : "+r"(i) : "i"(CGPROF_MAX_STACK_DEPTH - 1));
        return i;
}

static __always_inline int comm_equal(const char *a, const char *b) {
        /* 16 bytes compared as two words. */
        return ((const __u64 *) a)[0] == ((const __u64 *) b)[0] &&
               ((const __u64 *) a)[1] == ((const __u64 *) b)[1];
}

static __always_inline void note_process(struct task_struct *leader, __u32 pid, __u64 start_time,
                                         __u32 exec_id, __u32 slot) {
        struct cgprof_proc_seen *seen, v = { .start_time = start_time, .session = slot };
        struct cgprof_proc_event *e;

        if (BENCH(CGPROF_BENCH_PROBE_READS))
                BPF_CORE_READ_STR_INTO(&v.comm, leader, comm);
        else {
                /* comm is NUL-padded to its 16 bytes: two loads, no helper call. */
                ((__u64 *) v.comm)[0] = ((__u64 *) leader->comm)[0];
                ((__u64 *) v.comm)[1] = ((__u64 *) leader->comm)[1];
        }

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
        e->kind = CGPROF_PROC_EVENT_SEEN;
        e->exec_id = exec_id;
        e->ppid = BPF_CORE_READ(leader, real_parent, tgid);
        e->pad = 0;
        e->parent_start_time = BPF_CORE_READ(leader, real_parent, group_leader, start_time);
        bpf_ringbuf_submit(e, 0);
        bpf_map_update_elem(&procs_seen, &pid, &v, BPF_ANY);
}

/* ---- The stacks store: keyed by a 64-bit hash of the stack. A stack is
 * stored (and compared frame by frame with one stored under the same hash:
 * a different one takes the next key) at the first sample of its count's
 * key in a drain period; later samples of that key only find their count.
 * Two different stacks of one process with one 64-bit hash in the same
 * drain period would share a count (one chance in 2^64 per pair). ---- */

static __always_inline __u64 hash_mix(__u64 h, __u64 v) {
        h ^= v * 0x9e3779b97f4a7c15ULL;
        h = (h << 31) | (h >> 33);
        return h * 0xff51afd7ed558ccdULL;
}

struct hash_ctx {
        struct cgprof_stack *st;
        __u64 h;
};

static long hash_frame(__u32 i, void *data) {
        struct hash_ctx *c = data;
        if (i >= c->st->n || i >= CGPROF_MAX_STACK_DEPTH)
                return 1;
        c->h = hash_mix(c->h, c->st->pcs[frame_index(i)]);
        return 0;
}

/* Frames compared: a stored stack's (a, in a map value of either tier)
 * with the walked one's (b), n of them. */
struct equal_ctx {
        __u64 *a, *b;
        __u32 n;
        int equal;
};

static long equal_frame_short(__u32 i, void *data) {
        struct equal_ctx *c = data;
        if (i >= c->n || i >= CGPROF_SHORT_STACK_DEPTH)
                return 1;
        __u64 k = i;
        asm volatile("%0 &= %1" : "+r"(k) : "i"(CGPROF_SHORT_STACK_DEPTH - 1));
        if (c->a[k] != c->b[k]) {
                c->equal = 0;
                return 1;
        }
        return 0;
}

static long equal_frame_long(__u32 i, void *data) {
        struct equal_ctx *c = data;
        if (i >= c->n || i >= CGPROF_MAX_STACK_DEPTH)
                return 1;
        __u64 k = frame_index(i);
        if (c->a[k] != c->b[k]) {
                c->equal = 0;
                return 1;
        }
        return 0;
}

static __always_inline int stack_equal_short(struct cgprof_stack_short *a, struct cgprof_stack *b) {
        struct equal_ctx c = { .a = a->pcs, .b = b->pcs, .n = b->n, .equal = 1 };

        if (a->n != b->n || a->flags != b->flags || a->fp_frames[0] != b->fp_frames[0] ||
            a->fp_frames[1] != b->fp_frames[1])
                return 0;
        bpf_loop(CGPROF_SHORT_STACK_DEPTH, equal_frame_short, &c, 0);
        return c.equal;
}

static __always_inline int stack_equal_long(struct cgprof_stack *a, struct cgprof_stack *b) {
        struct equal_ctx c = { .a = a->pcs, .b = b->pcs, .n = b->n, .equal = 1 };

        if (a->n != b->n || a->flags != b->flags || a->fp_frames[0] != b->fp_frames[0] ||
            a->fp_frames[1] != b->fp_frames[1])
                return 0;
        for (int i = 0; i < CGPROF_MORE_FP_WORDS; i++)
                if (a->fp_more[i] != b->fp_more[i])
                        return 0;
        bpf_loop(CGPROF_MAX_STACK_DEPTH, equal_frame_long, &c, 0);
        return c.equal;
}

#define STORE_PROBES 4

/* Marks frame n (< CGPROF_MAX_STACK_DEPTH) as left by frame pointer. */
static __always_inline void fp_frame_mark(struct cgprof_stack *st, __u32 n) {
        if (n < 64)
                st->fp_frames[0] |= 1ULL << n;
        else if (n < CGPROF_SHORT_STACK_DEPTH)
                st->fp_frames[1] |= 1ULL << (n & 63);
        else {
                __u32 w = (n - CGPROF_SHORT_STACK_DEPTH) >> 6;
                if (w < CGPROF_MORE_FP_WORDS)
                        st->fp_more[w] |= 1ULL << (n & 63);
        }
}

/* A stack's frame-pointer bits cleared, before a walk: the first 128
 * frames' only. The others' (fp_more, a cache line 4 KiB away) are read
 * only for a stack of more than 128 frames, and cleared by the walk when it
 * gets there (fp_more_clear()): ordinary stacks never touch them. */
static __always_inline void fp_frames_clear(struct cgprof_stack *st) {
        st->fp_frames[0] = st->fp_frames[1] = 0;
}

static __always_inline void fp_more_clear(struct cgprof_stack *st, __u32 n) {
        if (n != CGPROF_SHORT_STACK_DEPTH)
                return;
        for (int i = 0; i < CGPROF_MORE_FP_WORDS; i++)
                st->fp_more[i] = 0;
}

/* The stack's 64-bit hash (never 0: 0 means "no stack"), from h, the hash
 * of its frames (hash_mix() of each, in order, from 0). */
static __always_inline __u64 stack_hash_finish(struct cgprof_stack *st, __u64 h) {
        h = hash_mix(h, st->n);
        h = hash_mix(h, st->flags);
        h = hash_mix(h, st->fp_frames[0] ^ (st->fp_frames[1] << 1));
        if (st->n > CGPROF_SHORT_STACK_DEPTH) {
                __u64 more = 0;
                for (int i = 0; i < CGPROF_MORE_FP_WORDS; i++)
                        more ^= st->fp_more[i] << i;
                h = hash_mix(h, more);
        }
        return h ?: 1;
}

/* The hash of the frames of a stack walked by the kernel or the Python
 * walk: a loop over them. (The user stack walks hash frames as they go.) */
static __always_inline __u64 frames_hash(struct cgprof_stack *st) {
        struct hash_ctx hc = { .st = st, .h = 0 };

        bpf_loop(CGPROF_MAX_STACK_DEPTH, hash_frame, &hc, 0);
        return hc.h;
}

static __always_inline __u64 stack_hash(struct cgprof_stack *st) {
        return stack_hash_finish(st, frames_hash(st));
}

/* Stores a stack of at most CGPROF_SHORT_STACK_DEPTH frames (its first
 * bytes, a struct cgprof_stack_short) under its hash h (top bit cleared), or
 * one of the next keys when another stack has it. Returns the stack's key in
 * the map, 0 when it could not be stored. */
static __always_inline __u64 stack_store_short(void *stacks, struct cgprof_stack *st, __u64 h,
                                               struct cgprof_session_stats *stats) {
        struct cgprof_stack_short *v;
        long r;

        for (int i = 0; i < STORE_PROBES; i++) {
                __u64 key = (h + i) & ~CGPROF_STACK_KEY_LONG;
                if (key == 0)
                        continue; /* 0 means "no stack" */
                v = bpf_map_lookup_elem(stacks, &key);
                if (!v) {
                        r = bpf_map_update_elem(stacks, &key, st, BPF_NOEXIST);
                        if (r == 0)
                                return key;
                        if (r != -EEXIST) {
                                if (stats)
                                        __sync_fetch_and_add(&stats->stack_errors, 1);
                                return 0; /* full */
                        }
                        /* Another CPU stored a stack with this key meanwhile. */
                        v = bpf_map_lookup_elem(stacks, &key);
                        if (!v)
                                continue;
                }
                if (stack_equal_short(v, st))
                        return key;
        }
        if (stats)
                __sync_fetch_and_add(&stats->collisions, 1);
        return 0;
}

/* The same for a longer stack, in the long stacks map (its key has the top
 * bit set). A function of its own: the rare path, out of the common one. */
static __attribute__((noinline)) __u64 stack_store_long(void *stacks, struct cgprof_stack *st, __u64 h,
                                                        struct cgprof_session_stats *stats) {
        struct cgprof_stack *v;
        long r;

        for (int i = 0; i < STORE_PROBES; i++) {
                __u64 key = (h + i) | CGPROF_STACK_KEY_LONG;
                v = bpf_map_lookup_elem(stacks, &key);
                if (!v) {
                        r = bpf_map_update_elem(stacks, &key, st, BPF_NOEXIST);
                        if (r == 0)
                                return key;
                        if (r != -EEXIST) {
                                if (stats)
                                        __sync_fetch_and_add(&stats->stack_errors, 1);
                                return 0; /* full */
                        }
                        v = bpf_map_lookup_elem(stacks, &key);
                        if (!v)
                                continue;
                }
                if (stack_equal_long(v, st))
                        return key;
        }
        if (stats)
                __sync_fetch_and_add(&stats->collisions, 1);
        return 0;
}

/* The maps a sample's stacks go to: the active set's two tiers. */
struct stack_maps {
        void *short_stacks, *long_stacks;
};

static __always_inline __u64 stack_store(struct stack_maps *m, struct cgprof_stack *st, __u64 h,
                                         struct cgprof_session_stats *stats) {
        if (st->n <= CGPROF_SHORT_STACK_DEPTH)
                return stack_store_short(m->short_stacks, st, h, stats);
        return stack_store_long(m->long_stacks, st, h, stats);
}

/* ---- The user stack walk with unwind tables ---- */

/* Cell i of a shard: half i & 1 of its value i >> 1 (bpf/unwind.h). */
static __always_inline struct cgprof_unwind_cell *cell_get(void *shard, __u32 i) {
        __u32 k = i >> 1;
        struct cgprof_unwind_cell *pair = bpf_map_lookup_elem(shard, &k);

        return pair ? &pair[i & 1] : NULL;
}

/* The rule in force at rel (an offset from the table's base): its page,
 * the page's shard, the last of the page's cells whose pc_lo <= rel's low
 * 16 bits (the first cell's is 0), its rule. */
static __always_inline struct cgprof_unwind_rule *rule_find(struct cgprof_unwind_table *t, __u32 rel) {
        __u32 idx = rel >> CGPROF_UNWIND_PAGE_SHIFT, lo = 0, hi, first;
        __u16 pc = rel & 0xffff;
        struct cgprof_unwind_rule_pair *rules;
        struct cgprof_unwind_page *page;
        struct cgprof_unwind_cell *cell;
        void *shard;

        if (idx >= t->n_pages)
                return NULL;
        idx += t->first_page;
        page = bpf_map_lookup_elem(&unwind_pages, &idx);
        if (!page || page->n == 0)
                return NULL;
        idx = page->first >> CGPROF_UNWIND_SHARD_BITS;
        shard = bpf_map_lookup_elem(&unwind_shards, &idx);
        if (!shard)
                return NULL;
        first = page->first & ((1u << CGPROF_UNWIND_SHARD_BITS) - 1);
        hi = page->n;
        for (int i = 0; i < 17 && hi - lo > 1; i++) {
                __u32 mid = lo + (hi - lo) / 2;
                cell = cell_get(shard, first + mid);
                if (!cell)
                        return NULL;
                if (cell->pc_lo <= pc)
                        lo = mid;
                else
                        hi = mid;
        }
        cell = cell_get(shard, first + lo);
        if (!cell)
                return NULL;
        idx = cell->rule_id >> 1;
        rules = bpf_map_lookup_elem(&unwind_rules, &idx);
        return rules ? &rules->r[cell->rule_id & 1] : NULL;
}

static __always_inline int mapping_find(struct walk_state *w, __u64 addr) {
        struct cgprof_mapping_key key = {
                .prefixlen = 96,
                .pid_be = __builtin_bswap32(w->pid),
                .addr_be = __builtin_bswap64(addr),
        };
        struct cgprof_mapping *m;

        if (addr >= w->map.start && addr < w->map.end)
                return 0;
        m = bpf_map_lookup_elem(&unwind_mappings, &key);
        if (!m)
                return -ENOENT;
        w->map = *m;
        return 0;
}

#define USER_ADDR_MAX 0x00007fffffffffffULL /* x86-64 and arm64 (48-bit) user space */

static __always_inline int read_user_u64(__u64 addr, __u64 *ret) {
        if (addr > USER_ADDR_MAX - 8)
                return -EFAULT;
        return bpf_probe_read_user(ret, sizeof(*ret), (void *) addr);
}

/* The two words at addr: a saved frame pointer and the return address
 * after it, in one read (each bpf_probe_read_user() is a helper call). */
struct frame_record {
        __u64 fp, ra;
};

/* Copies the top of the user stack (from sp) into w->copy. Where fewer
 * than STACK_COPY_SIZE bytes are mapped above sp, the rest of sp's page. */
static __always_inline void stack_copy(struct walk_state *w) {
        __u64 len;

        w->copy_base = w->sp;
        w->copy_len = 0;
        if (BENCH(CGPROF_BENCH_NO_STACK_COPY) || w->sp == 0 || w->sp > USER_ADDR_MAX - STACK_COPY_SIZE)
                return;
        if (BENCH(CGPROF_BENCH_COPY_256)) {
                if (bpf_probe_read_user(w->copy, 256, (void *) w->sp) == 0)
                        w->copy_len = 256;
                return;
        }
        if (BENCH(CGPROF_BENCH_COPY_512)) {
                if (bpf_probe_read_user(w->copy, 512, (void *) w->sp) == 0)
                        w->copy_len = 512;
                return;
        }
        if (bpf_probe_read_user(w->copy, STACK_COPY_SIZE, (void *) w->sp) == 0) {
                w->copy_len = STACK_COPY_SIZE;
                return;
        }
        len = 4096 - (w->sp & 4095);
        if (len >= STACK_COPY_SIZE)
                return;
        asm volatile("%0 &= %1" : "+r"(len) : "i"(STACK_COPY_SIZE - 1));
        if (len >= 16 && bpf_probe_read_user(w->copy, len, (void *) w->sp) == 0)
                w->copy_len = len;
}

/* size (8 or 16) bytes of user stack at addr: from the copy when it holds them. */
static __always_inline int read_stack(struct walk_state *w, __u64 addr, void *ret, __u32 size) {
        __u64 off = addr - w->copy_base;

        if (addr >= w->copy_base && w->copy_len >= size && off <= w->copy_len - size) {
                /* off < STACK_COPY_SIZE already: the mask tells the verifier. */
                asm volatile("%0 &= %1" : "+r"(off) : "i"(STACK_COPY_SIZE - 1));
                if (off <= STACK_COPY_SIZE - 16) {
                        ((__u64 *) ret)[0] = *(__u64 *) (w->copy + off);
                        if (size == 16)
                                ((__u64 *) ret)[1] = *(__u64 *) (w->copy + off + 8);
                        return 0;
                }
                /* The last 8 bytes of the copy: read below. */
        }
        if (addr > USER_ADDR_MAX - size)
                return -EFAULT;
        return bpf_probe_read_user(ret, size, (void *) addr);
}

static __always_inline int read_frame_record(struct walk_state *w, __u64 addr, struct frame_record *ret) {
        if (BENCH(CGPROF_BENCH_SPLIT_READS))
                return read_stack(w, addr, &ret->fp, 8) ?: read_stack(w, addr + 8, &ret->ra, 8);
        return read_stack(w, addr, ret, sizeof(*ret));
}

/* One frame by frame pointer: [fp] is the caller's fp, [fp + 8] the return
 * address. any_stack: the frame may be on another stack (once a walk). */
static __always_inline int fp_step_on(struct walk_state *w, struct cgprof_stack *st, int any_stack) {
        struct frame_record f;

        if (w->fp == 0) {
                st->flags |= CGPROF_STACK_FP_END;
                return 1;
        }
        /* Checked before the read: a frame pointer below the stack is no
         * frame (the outermost frame's rbp is whatever the caller, built
         * without frame pointers, left in it: often a small integer), and
         * reading it would fault (a page fault and its fixup: about 1 µs,
         * most of the walk's cost). */
        if (BENCH(CGPROF_BENCH_READ_FIRST) && read_frame_record(w, w->fp, &f) < 0) {
                st->flags |= CGPROF_STACK_READ_ERROR;
                return 1;
        }
        if (w->fp + 16 <= w->sp && !any_stack) {
                st->flags |= CGPROF_STACK_BAD_FRAME;
                return 1;
        }
        if (!BENCH(CGPROF_BENCH_READ_FIRST) && read_frame_record(w, w->fp, &f) < 0) {
                st->flags |= CGPROF_STACK_READ_ERROR;
                return 1;
        }
        w->sp = w->fp + 16;
        w->fp = f.fp;
        w->ip = f.ra;
        return 0;
}

static __always_inline int fp_step(struct walk_state *w, struct cgprof_stack *st) {
        return fp_step_on(w, st, 0);
}

/* Through a signal frame: the pc is in the signal trampoline (x86-64
 * __restore_rt), whose sp points at the struct ucontext the kernel saved
 * when it delivered the signal; it holds the interrupted rip, rsp and rbp.
 * The next frame is the interrupted one, its pc the interrupted instruction
 * (looked up as is, not as a return address). Returns 1 to stop. */
static __always_inline int signal_step(struct walk_state *w, struct cgprof_stack *st) {
        struct frame_record sp_ip; /* { rsp, rip }: adjacent in the ucontext */
        __u64 fp;

        if (read_stack(w, w->sp + CGPROF_UCONTEXT_RSP, &sp_ip, sizeof(sp_ip)) < 0 ||
            read_stack(w, w->sp + CGPROF_UCONTEXT_RBP, &fp, 8) < 0) {
                st->flags |= CGPROF_STACK_READ_ERROR;
                return 1;
        }
        /* The handler ran below the interrupted frame (a handler on a
         * sigaltstack above it ends the walk here: no progress to check). */
        if (sp_ip.fp <= w->sp) {
                st->flags |= CGPROF_STACK_BAD_FRAME;
                return 1;
        }
        /* The trampoline's frame holds the return address into it, which
         * the agent would symbolize at pc - 1, a byte before the
         * trampoline's symbol (glibc starts its FDE there for pc - 1
         * lookups, not its symbol): stored as pc + 1 instead. */
        if (st->n > 1)
                st->pcs[frame_index(st->n - 1)]++;
        w->sp = sp_ip.fp;
        w->ip = sp_ip.ra;
        w->fp = fp;
        w->at_signal = 1;
        return 0;
}

/* One frame by the table row. Returns 1 to stop, 2 to try a frame-pointer
 * step, 3 for a frame-pointer step that may switch stacks. */
static __always_inline int table_step(struct walk_state *w, struct cgprof_stack *st, __u64 addr) {
        struct cgprof_unwind_table *t;
        struct cgprof_unwind_rule *row;
        __u64 cfa, ra, fp, rel;
        __u32 tid = w->map.table;
        __u8 rule;

        t = bpf_map_lookup_elem(&unwind_tables, &tid);
        if (!t)
                return 2;
        if (t->n_pages == 0) {
                /* Not built yet: the agent builds the wanted ones first. */
                if (t->pending) {
                        if (!t->wanted)
                                t->wanted = 1;
                        st->flags |= CGPROF_STACK_TABLE_PENDING;
                }
                return 2;
        }
        rel = addr - w->map.bias - t->base;
        if (rel > 0xffffffffULL)
                return 2;
        row = rule_find(t, (__u32) rel);
        if (!row)
                return 2;
        rule = row->rule;
        switch (CGPROF_UNWIND_CFA(rule)) {
        case CGPROF_CFA_SP:
                cfa = w->sp + row->cfa_offset;
                break;
        case CGPROF_CFA_FP:
                if (w->fp == 0) {
                        st->flags |= CGPROF_STACK_FP_END;
                        return 1;
                }
                cfa = w->fp + row->cfa_offset;
                break;
        case CGPROF_CFA_PLT:
                cfa = w->sp + 8 + ((addr & 15) >= row->cfa_offset ? 8 : 0);
                break;
        case CGPROF_CFA_END:
                st->flags |= CGPROF_STACK_COMPLETE;
                return 1;
        case CGPROF_CFA_UNSUPPORTED:
                st->flags |= CGPROF_STACK_UNSUPPORTED;
                return 2;
        case CGPROF_CFA_FP_STACK_SWITCH:
                return 3;
        case CGPROF_CFA_SIGNAL:
                return signal_step(w, st);
        default: /* CGPROF_CFA_NONE: no FDE covers the address */
                return 2;
        }
        /* Before any read (a read below the stack would fault). */
        if (cfa <= w->sp) {
                st->flags |= CGPROF_STACK_BAD_FRAME;
                return 1;
        }
        if (CGPROF_UNWIND_FP(rule) == CGPROF_FP_AT_CFA && row->fp_offset == -2) {
                /* The usual frame (push rbp right after the call): the
                 * saved rbp and the return address in one read. */
                struct frame_record f;
                if (read_frame_record(w, cfa - 16, &f) < 0) {
                        st->flags |= CGPROF_STACK_READ_ERROR;
                        return 1;
                }
                ra = f.ra;
                w->fp = f.fp;
                goto done;
        }
        if (read_stack(w, cfa - 8, &ra, 8) < 0) {
                st->flags |= CGPROF_STACK_READ_ERROR;
                return 1;
        }
        switch (CGPROF_UNWIND_FP(rule)) {
        case CGPROF_FP_AT_CFA:
                if (read_stack(w, cfa + (__s64) row->fp_offset * 8, &fp, 8) < 0) {
                        st->flags |= CGPROF_STACK_READ_ERROR;
                        return 1;
                }
                w->fp = fp;
                break;
        case CGPROF_FP_SAME:
                break;
        default:
                w->fp = 0;
        }
done:
        w->sp = cfa;
        w->ip = ra;
        return 0;
}

/* Asks the agent, once until it reloads them, to read the process's mappings again. */
static __always_inline void request_mappings(struct walk_state *w) {
        struct cgprof_unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &w->pid);
        struct cgprof_proc_event *e;

        /* Two CPUs may both ask: harmless (the agent reloads twice). */
        if (!proc || proc->start_time != w->start_time || proc->mappings_requested)
                return;
        proc->mappings_requested = 1;
        e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);
        if (!e) {
                proc->mappings_requested = 0;
                return;
        }
        e->start_time = w->start_time;
        e->pid = w->pid;
        e->session = w->session;
        __builtin_memset(e->comm, 0, sizeof(e->comm));
        e->kind = CGPROF_PROC_EVENT_MAPPINGS;
        e->exec_id = 0;
        bpf_ringbuf_submit(e, 0);
}

static long walk_frame(__u32 i, void *data) {
        struct scratch *s = ((struct walk_ctx *) data)->s;
        struct cgprof_stack *st;
        struct walk_state *w;
        __u64 addr, pc;
        __u32 n;
        int r;

        if (!s)
                return 1;
        w = &s->w;
        st = &s->user;
        n = st->n;
        if (n >= CGPROF_MAX_STACK_DEPTH) {
                st->flags |= CGPROF_STACK_TRUNCATED;
                return 1;
        }
        fp_more_clear(st, n);
        if (w->ip == 0 || w->ip > USER_ADDR_MAX) {
                st->flags |= CGPROF_STACK_COMPLETE;
                return 1;
        }
        /* A return address is after the call: look up the call itself. The
         * leaf, and a frame a signal interrupted, are at the instruction:
         * the latter is stored as ip + 1, as the return address it stands
         * for (the agent symbolizes every frame but the leaf at pc - 1). */
        pc = w->ip;
        addr = n == 0 ? pc : pc - 1;
        if (w->at_signal) {
                addr = pc;
                if (n > 0)
                        pc++;
                w->at_signal = 0;
        }
        st->pcs[frame_index(n)] = pc;
        st->n = n + 1;

        if (mapping_find(w, addr) < 0) {
                st->flags |= CGPROF_STACK_NO_MAPPING;
                request_mappings(w);
                r = 2;
        } else if (w->map.table == 0)
                r = 2;
        else
                r = table_step(w, st, addr);
        if (r == 3) {
                /* Go's stack switch: rbp links back to the stack it left. */
                fp_frame_mark(st, n);
                r = fp_step_on(w, st, !w->stack_switched);
                w->stack_switched = 1;
        } else if (r == 2) {
                if (!(w->session_flags & CGPROF_SESSION_UNWIND_FP_FALLBACK)) {
                        st->flags |= CGPROF_STACK_NO_TABLE;
                        r = 1;
                } else {
                        fp_frame_mark(st, n);
                        r = fp_step(w, st);
                }
        }
        /* Hashed after the step: a signal frame's step changes its pc. */
        w->hash = hash_mix(w->hash, st->pcs[frame_index(n)]);
        return r ? 1 : 0;
}

/* One frame of a walk by frame pointers only. */
static long fp_walk_frame(__u32 i, void *data) {
        struct scratch *s = ((struct walk_ctx *) data)->s;
        struct cgprof_stack *st;
        __u32 n;

        if (!s)
                return 1;
        st = &s->user;
        n = st->n;
        if (n >= CGPROF_MAX_STACK_DEPTH) {
                st->flags |= CGPROF_STACK_TRUNCATED;
                return 1;
        }
        fp_more_clear(st, n);
        if (s->w.ip == 0 || s->w.ip > USER_ADDR_MAX) {
                st->flags |= CGPROF_STACK_COMPLETE;
                return 1;
        }
        st->pcs[frame_index(n)] = s->w.ip;
        st->n = n + 1;
        s->w.hash = hash_mix(s->w.hash, s->w.ip);
        return fp_step(&s->w, st) ? 1 : 0;
}

/* The two walks' loops, each in a function of its own: in one function
 * the compiler merges the two bpf_loop() calls into one call instruction
 * whose callback then differs by path, and the verifier inlines a
 * bpf_loop() only where its callback is always the same (otherwise every
 * frame is an indirect call through the helper). */
static __attribute__((noinline)) int walk_by_frame_pointers(struct walk_ctx *wc) {
        bpf_loop(CGPROF_MAX_STACK_DEPTH + 1, fp_walk_frame, wc, 0);
        return 0;
}

static __attribute__((noinline)) int walk_by_tables(struct walk_ctx *wc) {
        bpf_loop(CGPROF_MAX_STACK_DEPTH + 1, walk_frame, wc, 0);
        return 0;
}

/* Did the sample interrupt user mode? Then ctx's registers are the user's,
 * read from the context without a helper call. */
static __always_inline int sample_in_user_mode(struct bpf_perf_event_data *ctx) {
#if defined(__TARGET_ARCH_x86)
        return (ctx->regs.cs & 3) == 3;
#else
        return 0; /* unknown here: read the task's saved registers */
#endif
}

/* The user registers: ctx's when the sample interrupted user mode,
 * otherwise those saved on kernel entry. */
static __always_inline int user_regs(struct bpf_perf_event_data *ctx, struct task_struct *task,
                                     struct walk_state *w) {
        struct pt_regs regs;

        if (!BENCH(CGPROF_BENCH_REGS_READ) && sample_in_user_mode(ctx)) {
                __u64 ip = PT_REGS_IP(&ctx->regs), sp = PT_REGS_SP(&ctx->regs), fp = PT_REGS_FP(&ctx->regs);
                /* Loads of ctx must stay loads of ctx: keep the compiler
                 * from sharing them with the branch below (the verifier
                 * refuses a computed ctx pointer). */
                asm volatile("" : "+r"(ip), "+r"(sp), "+r"(fp));
                w->ip = ip;
                w->sp = sp;
                w->fp = fp;
                return 0;
        }
        if (bpf_probe_read_kernel(&regs, sizeof(regs), (void *) bpf_task_pt_regs((void *) task)) < 0)
                return -EFAULT;
        w->ip = PT_REGS_IP(&regs);
        w->sp = PT_REGS_SP(&regs);
        w->fp = PT_REGS_FP(&regs);
        return 0;
}

/* Starts a user stack walk: an empty stack, and the process's unwind
 * tables if the session walks with them (NULL: frame pointers). */
static __always_inline struct cgprof_unwind_proc *user_stack_init(struct scratch *s, __u32 pid,
                                                                  __u64 start_time, __u32 session_flags) {
        struct cgprof_stack *st = &s->user;
        struct cgprof_unwind_proc *proc = NULL;

        st->n = 0;
        st->flags = 0;
        fp_frames_clear(st);
        s->w.hash = 0;
        s->w.at_signal = 0;

        if (session_flags & CGPROF_SESSION_UNWIND_TABLES) {
                proc = bpf_map_lookup_elem(&unwind_procs, &pid);
                if (proc && proc->start_time != start_time)
                        proc = NULL; /* a reused PID: not the process the tables were loaded for */
        }
        return proc;
}

/* Walks the user stack from the registers in s->w (ip, sp, fp): the perf
 * sample's (user_stack()) or a uprobe's (cgprof_launch). */
static __always_inline void user_stack_walk(struct scratch *s, struct cgprof_unwind_proc *proc, __u32 pid,
                                            __u64 start_time, __u32 session, __u32 session_flags) {
        struct cgprof_stack *st = &s->user;
        struct walk_ctx wc = { .s = s };

        stack_copy(&s->w);
        if (!proc) {
                /* Frame pointers only: our own walk, the same as the
                 * kernel's (bpf_get_stack()) at a third of its cost. */
                st->flags = CGPROF_STACK_KERNEL_WALK;
                if (session_flags & CGPROF_SESSION_UNWIND_TABLES)
                        st->flags |= CGPROF_STACK_PENDING;
                walk_by_frame_pointers(&wc);
                return;
        }
        s->w.pid = pid;
        s->w.start_time = start_time;
        s->w.session = session;
        s->w.session_flags = session_flags;
        s->w.map.start = s->w.map.end = 0;
        s->w.stack_switched = 0;
        walk_by_tables(&wc);
}

static __always_inline void user_stack(struct bpf_perf_event_data *ctx, struct scratch *s,
                                       struct task_struct *task, __u32 pid, __u64 start_time, __u32 session,
                                       __u32 session_flags) {
        struct cgprof_stack *st = &s->user;
        struct cgprof_unwind_proc *proc = user_stack_init(s, pid, start_time, session_flags);
        long r;

        if (!proc && BENCH(CGPROF_BENCH_KERNEL_FP_WALK)) {
                r = bpf_get_stack(ctx, st->pcs, CGPROF_SHORT_STACK_DEPTH * 8, BPF_F_USER_STACK);
                st->n = r > 0 ? (__u32) r / 8 : 0;
                s->w.hash = frames_hash(st);
                st->flags = CGPROF_STACK_KERNEL_WALK;
                if (session_flags & CGPROF_SESSION_UNWIND_TABLES)
                        st->flags |= CGPROF_STACK_PENDING;
                return;
        }

        if (user_regs(ctx, task, &s->w) < 0) {
                st->flags = CGPROF_STACK_READ_ERROR | (proc ? 0 : CGPROF_STACK_KERNEL_WALK);
                return;
        }
        user_stack_walk(s, proc, pid, start_time, session, session_flags);
}

/* ---- The Python frame walk (bpf/python.h) ---- */

static __always_inline __u64 py_buf_u64(const __u8 *buf, __u64 off) {
        asm volatile("%0 &= 127" : "+r"(off));
        if (off > PY_FRAME_READ - 8)
                return 0;
        return *(const __u64 *) (buf + off);
}

static __always_inline __u32 py_buf_u32(const __u8 *buf, __u64 off) {
        asm volatile("%0 &= 127" : "+r"(off));
        if (off > PY_FRAME_READ - 4)
                return 0;
        return *(const __u32 *) (buf + off);
}

static __always_inline __u8 py_buf_u8(const __u8 *buf, __u64 off) {
        asm volatile("%0 &= 127" : "+r"(off));
        if (off > PY_FRAME_READ - 1)
                return 0;
        return buf[off];
}

static long py_thread_scan(__u32 i, void *data) {
        struct scratch *s = ((struct walk_ctx *) data)->s;
        __u64 tid_value, next;

        if (!s)
                return 1;
        if (s->py.frame == 0) /* the candidate: the list ended */
                return 1;
        if (read_user_u64(s->py.frame + s->py.proc.tstate_thread_id, &tid_value) < 0 ||
            read_user_u64(s->py.frame + s->py.proc.tstate_next, &next) < 0) {
                s->py.frame = 0;
                return 1;
        }
        if (tid_value == s->py.fsbase) {
                s->py.tstate = s->py.frame;
                return 1;
        }
        s->py.frame = next;
        return 0;
}

static long py_frame(__u32 i, void *data) {
        struct scratch *s = ((struct walk_ctx *) data)->s;
        struct cgprof_stack *st;
        struct py_state *p;
        __u64 code, instr_ptr, first, instr = CGPROF_PY_INSTR_UNKNOWN;
        __u32 n, size;
        __s32 lasti;
        __u8 entry = 0;

        if (!s)
                return 1;
        p = &s->py;
        st = &s->python;
        if (p->frame == 0) {
                st->flags |= CGPROF_STACK_COMPLETE;
                return 1;
        }
        n = st->n;
        if (n >= CGPROF_MAX_STACK_DEPTH) {
                st->flags |= CGPROF_PY_TRUNCATED;
                return 1;
        }
        fp_more_clear(st, n);
        size = p->proc.frame_size;
        asm volatile("%0 &= 127" : "+r"(size));
        if (size == 0 || p->frame > USER_ADDR_MAX - PY_FRAME_READ ||
            bpf_probe_read_user(p->buf, size, (void *) p->frame) < 0) {
                st->flags |= CGPROF_PY_READ_ERROR;
                return 1;
        }
        code = py_buf_u64(p->buf, p->proc.frame_code);
        p->frame = py_buf_u64(p->buf, p->proc.frame_previous);
        if (p->proc.frame_owner != CGPROF_PYTHON_NO_OFFSET && p->proc.owner_cstack != 0 &&
            py_buf_u8(p->buf, p->proc.frame_owner) == p->proc.owner_cstack) {
                /* A shim frame of a C call into the interpreter: the frame
                 * before it was the first its evaluation loop ran. */
                if (n > 0)
                        st->pcs[frame_index(n - 1)] |= 1;
                return 0;
        }
        if (code == 0)
                return 0;
        if (p->proc.frame_lasti != CGPROF_PYTHON_NO_OFFSET) {
                /* A frame object (3.7-3.10): its own evaluation loop call;
                 * f_lasti < 0: not started. */
                lasti = (__s32) py_buf_u32(p->buf, p->proc.frame_lasti);
                instr = lasti < 0 ? 0 : ((__u64) lasti >> (p->proc.lasti_shift & 1));
                if (instr > CGPROF_PY_INSTR_UNKNOWN)
                        instr = CGPROF_PY_INSTR_UNKNOWN;
                entry = 1;
        } else {
                if (p->proc.frame_is_entry != CGPROF_PYTHON_NO_OFFSET)
                        entry = py_buf_u8(p->buf, p->proc.frame_is_entry);
                instr_ptr = py_buf_u64(p->buf, p->proc.frame_prev_instr);
                first = code + p->proc.code_adaptive;
                if (instr_ptr >= first && instr_ptr - first < 2ULL * CGPROF_PY_INSTR_UNKNOWN)
                        instr = (instr_ptr - first) / 2;
                else if (instr_ptr + 2 == first)
                        instr = 0; /* not started: prev_instr is one before the first */
        }
        st->pcs[frame_index(n)] = CGPROF_PY_FRAME(code, instr, entry);
        st->n = n + 1;
        return 0;
}

/* A forked child without an entry of its own (bpf/python.h): its parent's,
 * when the child still runs the program its parent registered (same
 * exec() count, the parent the same process). Copied into python_procs
 * for the child's next samples; the agent's own registration of the child
 * replaces it. */
static __always_inline int python_inherit(struct py_state *p, struct task_struct *leader, __u32 pid,
                                          __u64 start_time, __u32 exec_id) {
        struct cgprof_python_proc *parent;
        __u32 ppid = BPF_CORE_READ(leader, real_parent, tgid);

        /* A process that runs no Python (its parent does not either, most
         * often) pays this read and one lookup per sample. */
        if (ppid == 0 || ppid == pid)
                return -1;
        parent = bpf_map_lookup_elem(&python_procs, &ppid);
        if (!parent || parent->exec_id != exec_id ||
            parent->start_time != BPF_CORE_READ(leader, real_parent, group_leader, start_time))
                return -1;
        p->proc = *parent;
        p->proc.start_time = start_time;
        p->proc.parent = ppid;
        bpf_map_update_elem(&python_procs, &pid, &p->proc, BPF_ANY);
        return 0;
}

/* Walks the Python frames of the sampled thread into s->python. Returns
 * whether there is a Python stack to store (frames, or a reason why not). */
static __always_inline int python_stack(struct scratch *s, struct task_struct *task,
                                        struct task_struct *leader, __u32 pid, __u32 tid, __u64 start_time,
                                        __u32 exec_id) {
        struct walk_ctx wc = { .s = s }; /* the callbacks' scratch: the caller's */
        struct cgprof_python_proc *proc = bpf_map_lookup_elem(&python_procs, &pid);
        struct cgprof_stack *st = &s->python;
        struct py_state *p = &s->py;
        __u64 *cached, v, interp;

        if (proc && proc->start_time == start_time)
                p->proc = *proc;
        else if (python_inherit(p, leader, pid, start_time, exec_id) < 0)
                return 0;
        st->n = 0;
        st->flags = CGPROF_STACK_PYTHON;
        fp_frames_clear(st);
        p->fsbase = BPF_CORE_READ(task, thread.fsbase);
        p->tstate = 0;

        /* The thread's state: the one found last time, if it still is. */
        cached = bpf_map_lookup_elem(&python_threads, &tid);
        if (cached && read_user_u64(*cached + p->proc.tstate_thread_id, &v) == 0 && v == p->fsbase)
                p->tstate = *cached;
        if (p->tstate == 0) {
                if (read_user_u64(p->proc.interp_head, &interp) < 0) {
                        st->flags |= CGPROF_PY_READ_ERROR;
                        return 1;
                }
                if (interp == 0 || read_user_u64(interp + p->proc.interp_threads_head, &p->frame) < 0) {
                        st->flags |= CGPROF_PY_NOT_INITIALIZED;
                        return 1;
                }
                bpf_loop(CGPROF_PYTHON_MAX_THREAD_SCAN, py_thread_scan, &wc, 0);
                if (p->tstate == 0) {
                        st->flags |= CGPROF_PY_NO_THREAD;
                        return 1;
                }
                bpf_map_update_elem(&python_threads, &tid, &p->tstate, BPF_ANY);
        }

        /* Its current frame. */
        v = p->tstate;
        if (p->proc.tstate_cframe != CGPROF_PYTHON_NO_OFFSET &&
            read_user_u64(v + p->proc.tstate_cframe, &v) < 0) {
                st->flags |= CGPROF_PY_READ_ERROR;
                return 1;
        }
        if (v == 0 || read_user_u64(v + p->proc.cframe_current_frame, &p->frame) < 0) {
                st->flags |= CGPROF_PY_READ_ERROR;
                return 1;
        }
        if (p->frame == 0) {
                st->flags |= CGPROF_PY_NO_FRAME;
                return 1;
        }
        bpf_loop(CGPROF_MAX_STACK_DEPTH + 1, py_frame, &wc, 0);
        return 1;
}

/* Stores the sample's stacks (key's stack fields hold their hashes): each
 * field becomes the stack's key in the map, or 0 with the lost flag.
 * Returns nonzero when a field changed. */
static __always_inline int store_stacks(struct stack_maps *stacks, struct scratch *s,
                                        struct cgprof_sample_key *key, struct cgprof_session_stats *st) {
        __u64 h;
        int changed = 0;

        if ((h = key->user_stack)) {
                key->user_stack = stack_store(stacks, &s->user, h, st);
                if (key->user_stack == 0)
                        key->lost |= CGPROF_SAMPLE_USER_LOST;
                changed |= key->user_stack != h;
        }
        if ((h = key->python_stack)) {
                key->python_stack = stack_store(stacks, &s->python, h, st);
                if (key->python_stack == 0)
                        key->lost |= CGPROF_SAMPLE_PYTHON_LOST;
                changed |= key->python_stack != h;
        }
        if ((h = key->kernel_stack)) {
                key->kernel_stack = stack_store(stacks, &s->kernel, h, st);
                if (key->kernel_stack == 0)
                        key->lost |= CGPROF_SAMPLE_KERNEL_LOST;
                changed |= key->kernel_stack != h;
        }
        return changed;
}

/* Adds one to the key's count. Its first count in this drain period
 * stores its stacks first. Returns -1 when the counts map is full. */
static __always_inline int count_key(void *counts, void *stacks, struct scratch *s,
                                     struct cgprof_sample_key *key, struct cgprof_session_stats *st) {
        __u64 one = 1, *v;

        v = bpf_map_lookup_elem(counts, key);
        if (v) {
                __sync_fetch_and_add(v, 1);
                return 0;
        }
        /* The first sample of this key: its stacks are stored now. */
        if (!BENCH(CGPROF_BENCH_NO_STORE) && store_stacks(stacks, s, key, st))
                /* A stack took another key: it may have been counted. */
                v = bpf_map_lookup_elem(counts, key);
        if (v) {
                __sync_fetch_and_add(v, 1);
                return 0;
        }
        if (bpf_map_update_elem(counts, key, &one, BPF_NOEXIST) < 0) {
                /* Lost the race to another CPU, or the map is full. */
                v = bpf_map_lookup_elem(counts, key);
                if (!v)
                        return -1;
                __sync_fetch_and_add(v, 1);
        }
        return 0;
}

SEC("perf_event")
int cgprof_sample(struct bpf_perf_event_data *ctx) {
        __u64 cookie = bpf_get_attach_cookie(ctx);
        __u32 mode = cookie >> 32, id = (__u32) cookie, slot;
        struct cgprof_sample_key key = {};
        struct cgprof_session_stats *st;
        struct cgprof_session *sess;
        struct task_struct *task, *leader;
        struct stack_maps stacks;
        void *counts, *mm;
        struct scratch *s;
        __u64 pid_tgid;
        int r = 0;

        if (mode == CGPROF_ATTACH_CGROUP)
                slot = id;
        else {
                __u64 cgid = bpf_get_current_cgroup_id();
                __u32 *sl = bpf_map_lookup_elem(&cgroups, &cgid);
                if (!sl)
                        return 0;
                slot = *sl;
        }

        sess = bpf_map_lookup_elem(&sessions, &slot);
        if (!sess ||
            (sess->flags & (CGPROF_SESSION_ACTIVE | CGPROF_SESSION_NO_CPU)) != CGPROF_SESSION_ACTIVE)
                return 0;
        if (mode == CGPROF_ATTACH_CPU && sess->group != id)
                return 0; /* another (event, frequency) group's sample */
        if (BENCH(CGPROF_BENCH_FILTER_ONLY))
                return 0;

        pid_tgid = bpf_get_current_pid_tgid();
        key.pid = pid_tgid >> 32;
        if (key.pid == 0)
                return 0; /* idle */
        key.session = slot;
        if (sess->flags & CGPROF_SESSION_OFFCPU)
                key.tid = (__u32) pid_tgid; /* the wall-clock view is per thread */

        /* A BTF pointer: its fields are loads (relocated by CO-RE), not helper calls. */
        task = bpf_get_current_task_btf();
        if (BENCH(CGPROF_BENCH_PROBE_READS)) {
                leader = BPF_CORE_READ(task, group_leader);
                key.start_time = BPF_CORE_READ(leader, start_time);
                key.exec_id = BPF_CORE_READ(leader, self_exec_id);
                mm = BPF_CORE_READ(task, mm);
        } else {
                leader = task->group_leader;
                key.start_time = leader->start_time;
                key.exec_id = leader->self_exec_id;
                mm = task->mm;
        }

        st = BENCH(CGPROF_BENCH_NO_STATS) ? NULL : bpf_map_lookup_elem(&stats, &slot);
        s = scratch_take(SCRATCH_SAMPLE);
        if (!s)
                return 0;

        if (active_set == 0) {
                counts = &counts0;
                stacks.short_stacks = &stacks0;
                stacks.long_stacks = &long_stacks0;
        } else {
                counts = &counts1;
                stacks.short_stacks = &stacks1;
                stacks.long_stacks = &long_stacks1;
        }

        /* Each stack is keyed by its hash. A sample whose key (process,
         * stacks) was counted before in this drain period only adds one to
         * its count: its stacks are stored already, no lookup and compare
         * of each. Its first sample stores them (and compares them with a
         * stack stored under the same hash: a different one takes the next
         * key, which the count's key then names). */
        if (!BENCH(CGPROF_BENCH_NO_USER) && mm) { /* kernel threads have no user stack */
                user_stack(ctx, s, task, key.pid, key.start_time, slot, sess->flags);
                if (s->user.n > 0)
                        /* The walks hashed its frames as they went. */
                        key.user_stack = BENCH(CGPROF_BENCH_NO_STORE)
                                                 ? s->user.n
                                                 : stack_hash_finish(&s->user, s->w.hash);
        }
        if ((sess->flags & CGPROF_SESSION_PYTHON) &&
            python_stack(s, task, leader, key.pid, (__u32) pid_tgid, key.start_time, key.exec_id))
                key.python_stack = BENCH(CGPROF_BENCH_NO_STORE) ? s->python.n : stack_hash(&s->python);
        /* A sample that interrupted user mode has no kernel stack: the
         * kernel's walker would find none (it walks kernel registers only). */
        if (!BENCH(CGPROF_BENCH_NO_KERNEL) && (sess->flags & CGPROF_SESSION_KERNEL_STACKS) &&
            (BENCH(CGPROF_BENCH_KERNEL_ALWAYS) || !sample_in_user_mode(ctx))) {
                /* At most the short tier's frames (the kernel's walker stops
                 * at perf_event_max_stack, 127 by default). */
                long n = bpf_get_stack(ctx, s->kernel.pcs, CGPROF_SHORT_STACK_DEPTH * 8, 0);
                s->kernel.n = n > 0 ? (__u32) n / 8 : 0;
                s->kernel.flags = CGPROF_STACK_KERNEL_WALK;
                fp_frames_clear(&s->kernel);
                if (s->kernel.n > 0)
                        key.kernel_stack =
                                BENCH(CGPROF_BENCH_NO_STORE) ? s->kernel.n : stack_hash(&s->kernel);
        }

        if (BENCH(CGPROF_BENCH_NO_COUNT)) {
                if (!BENCH(CGPROF_BENCH_NO_STORE))
                        store_stacks(&stacks, s, &key, st);
                goto counted;
        }
        r = count_key(counts, &stacks, s, &key, st);

counted:
        if (st) {
                if (r < 0)
                        __sync_fetch_and_add(&st->lost, 1);
                else
                        __sync_fetch_and_add(&st->samples, 1);
        }

        if (!BENCH(CGPROF_BENCH_NO_NOTE))
                note_process(leader, key.pid, key.start_time, key.exec_id, slot);
        return 0;
}

/* ---- CUDA kernel launches (profile.h: CGPROF_LAUNCH_*) ---- */

#ifndef PT_REGS_PARM6 /* libbpf < 1.2 */
#if defined(__TARGET_ARCH_x86)
#define PT_REGS_PARM6(x) (__PT_REGS_CAST(x)->r9)
#else
#define PT_REGS_PARM6(x) 0 /* x86-64 only (the launch ABI is read for it) */
#endif
#endif

/* The i-th 8-byte argument passed on the stack (x86-64 SysV: the 7th
 * integer argument and on, above the return address at sp). */
static __always_inline __u64 stack_arg(struct pt_regs *ctx, __u32 i) {
        __u64 v = 0;

        read_user_u64(PT_REGS_SP(ctx) + 8 * (__u64) i, &v);
        return v;
}

/* The launch's config struct (cudaLaunchConfig_t, CUlaunchConfig): six
 * 32-bit dimensions (grid x y z, block x y z) at 0, the stream at 32. */
struct launch_config {
        __u32 dims[6];
        __u64 shmem;
        __u64 stream;
};

/* What the entry point launched, into st (a CGPROF_STACK_LAUNCH record).
 * x86-64 SysV: a dim3 (12 bytes, INTEGER class) takes two registers, x | y
 * << 32 and z, so cudaLaunchKernel(func, grid, block, args, shmem, stream)
 * has func in rdi, grid in rsi:rdx, block in rcx:r8, args in r9, and shmem
 * and stream on the stack (bench/gpu-launch disassembles a caller). */
static __always_inline void launch_record(struct pt_regs *ctx, __u32 entry, struct cgprof_stack *st) {
        __u64 *pc = st->pcs;
        struct launch_config c = {};

        st->n = CGPROF_LAUNCH_PCS;
        st->flags = CGPROF_STACK_LAUNCH;
        fp_frames_clear(st);
        pc[CGPROF_LAUNCH_PC_ENTRY] = entry;
        switch (entry) {
        case CGPROF_LAUNCH_KERNEL:
                pc[CGPROF_LAUNCH_PC_FUNC] = PT_REGS_PARM1(ctx);
                pc[CGPROF_LAUNCH_PC_GRID] = PT_REGS_PARM2(ctx);
                pc[CGPROF_LAUNCH_PC_GRID_Z_BLOCK_X] =
                        (PT_REGS_PARM3(ctx) & 0xffffffffULL) | (PT_REGS_PARM4(ctx) << 32);
                pc[CGPROF_LAUNCH_PC_BLOCK] = (PT_REGS_PARM4(ctx) >> 32) | (PT_REGS_PARM5(ctx) << 32);
                pc[CGPROF_LAUNCH_PC_STREAM] = stack_arg(ctx, 2);
                return;
        case CGPROF_LAUNCH_CU_KERNEL:
                pc[CGPROF_LAUNCH_PC_FUNC] = PT_REGS_PARM1(ctx);
                pc[CGPROF_LAUNCH_PC_GRID] =
                        (PT_REGS_PARM2(ctx) & 0xffffffffULL) | (PT_REGS_PARM3(ctx) << 32);
                pc[CGPROF_LAUNCH_PC_GRID_Z_BLOCK_X] =
                        (PT_REGS_PARM4(ctx) & 0xffffffffULL) | (PT_REGS_PARM5(ctx) << 32);
                pc[CGPROF_LAUNCH_PC_BLOCK] =
                        (PT_REGS_PARM6(ctx) & 0xffffffffULL) | (stack_arg(ctx, 1) << 32);
                pc[CGPROF_LAUNCH_PC_STREAM] = stack_arg(ctx, 3);
                return;
        case CGPROF_LAUNCH_KERNEL_EXC:
        case CGPROF_LAUNCH_CU_KERNEL_EX:
                pc[CGPROF_LAUNCH_PC_FUNC] = PT_REGS_PARM2(ctx);
                if (bpf_probe_read_user(&c, sizeof(c), (void *) PT_REGS_PARM1(ctx)) < 0)
                        __builtin_memset(&c, 0, sizeof(c));
                pc[CGPROF_LAUNCH_PC_GRID] = c.dims[0] | ((__u64) c.dims[1] << 32);
                pc[CGPROF_LAUNCH_PC_GRID_Z_BLOCK_X] = c.dims[2] | ((__u64) c.dims[3] << 32);
                pc[CGPROF_LAUNCH_PC_BLOCK] = c.dims[4] | ((__u64) c.dims[5] << 32);
                pc[CGPROF_LAUNCH_PC_STREAM] = c.stream;
                return;
        default: /* CGPROF_LAUNCH_GRAPH */
                pc[CGPROF_LAUNCH_PC_FUNC] = PT_REGS_PARM1(ctx);
                pc[CGPROF_LAUNCH_PC_GRID] = pc[CGPROF_LAUNCH_PC_GRID_Z_BLOCK_X] =
                        pc[CGPROF_LAUNCH_PC_BLOCK] = 0;
                pc[CGPROF_LAUNCH_PC_STREAM] = PT_REGS_PARM2(ctx);
        }
}

/* Launch programs running, per counts/stacks set they write to: the
 * agent's drain waits after its flip until none writes to the set it
 * drains (sampler.c). A launch that read the old set just before the flip
 * would otherwise count itself there after the drain took its key, and its
 * stacks, found stored, be taken meanwhile: the count read at a later drain
 * without its stacks (lost to the launch profile). CPU samples live with
 * that rare loss; exact launch counts cannot. */
__u32 launch_inflight[2] = {};

/* The set to write to, marked in use (launch_set_put() when done). */
static __always_inline __u32 launch_set_get(void) {
        __u32 set = active_set & 1;

        __sync_fetch_and_add(&launch_inflight[set], 1);
        /* Flipped meanwhile: the agent may not have seen the mark. */
        if ((active_set & 1) != set) {
                __sync_fetch_and_add(&launch_inflight[set], -1);
                set = active_set & 1;
                __sync_fetch_and_add(&launch_inflight[set], 1);
        }
        return set;
}

static __always_inline void launch_set_put(__u32 set) {
        __sync_fetch_and_add(&launch_inflight[set & 1], -1);
}

/* A uprobe on a launch entry point (attached per file by the agent,
 * agent/sampling/cuda-probes.c): fires for every process that maps the
 * file; only those of a session's cgroups that asked for launches count. */
SEC("uprobe")
int cgprof_launch(struct pt_regs *ctx) {
        __u32 entry = (__u32) bpf_get_attach_cookie(ctx), *sl, slot;
        __u64 cgid = bpf_get_current_cgroup_id();
        struct cgprof_sample_key key = {};
        struct cgprof_unwind_proc *proc;
        struct cgprof_session_stats *st;
        struct cgprof_session *sess;
        struct task_struct *task, *leader;
        struct stack_maps stacks;
        void *counts;
        struct scratch *s;
        __u64 pid_tgid;
        __u32 set;

        sl = bpf_map_lookup_elem(&cgroups, &cgid);
        if (!sl)
                return 0;
        slot = *sl;
        sess = bpf_map_lookup_elem(&sessions, &slot);
        if (!sess || !(sess->flags & CGPROF_SESSION_ACTIVE) || !(sess->flags & CGPROF_SESSION_GPU_LAUNCHES))
                return 0;
        st = bpf_map_lookup_elem(&stats, &slot);
        s = scratch_take(SCRATCH_LAUNCH);
        if (!s) {
                if (st)
                        __sync_fetch_and_add(&st->lost, 1);
                return 0;
        }

        pid_tgid = bpf_get_current_pid_tgid();
        key.pid = pid_tgid >> 32;
        key.session = slot;
        task = bpf_get_current_task_btf();
        leader = task->group_leader;
        key.start_time = leader->start_time;
        key.exec_id = leader->self_exec_id;
        set = launch_set_get();
        if (set == 0) {
                counts = &counts0;
                stacks.short_stacks = &stacks0;
                stacks.long_stacks = &long_stacks0;
        } else {
                counts = &counts1;
                stacks.short_stacks = &stacks1;
                stacks.long_stacks = &long_stacks1;
        }

        /* The uprobe fires at the entry point's first instruction, in user
         * mode: ctx holds the user registers. */
        proc = user_stack_init(s, key.pid, key.start_time, sess->flags);
        s->w.ip = PT_REGS_IP(ctx);
        s->w.sp = PT_REGS_SP(ctx);
        s->w.fp = PT_REGS_FP(ctx);
        user_stack_walk(s, proc, key.pid, key.start_time, slot, sess->flags);
        if (s->user.n > 0)
                key.user_stack = stack_hash_finish(&s->user, s->w.hash);
        if ((sess->flags & CGPROF_SESSION_PYTHON) &&
            python_stack(s, task, leader, key.pid, (__u32) pid_tgid, key.start_time, key.exec_id))
                key.python_stack = stack_hash(&s->python);
        launch_record(ctx, entry < _CGPROF_LAUNCH_MAX ? entry : CGPROF_LAUNCH_GRAPH, &s->kernel);
        key.kernel_stack = stack_hash(&s->kernel);

        /* Launches are not samples: only a lost one is in the stats. */
        if (count_key(counts, &stacks, s, &key, st) < 0 && st)
                __sync_fetch_and_add(&st->lost, 1);
        scratch_put(s);
        launch_set_put(set);
        note_process(leader, key.pid, key.start_time, key.exec_id, slot);
        return 0;
}

/* After exec() a process has a new command line and new mappings: forget it,
 * so its next sample tells the agent again. BTF-enabled tracepoint: needs no
 * tracefs. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(cgprof_exec, struct task_struct *p, __s32 old_pid, void *bprm) {
        __u32 pid = BPF_CORE_READ(p, tgid);
        struct cgprof_proc_event *e;
        struct cgprof_session *sess;
        __u64 cgid;
        __u32 *slot;

        bpf_map_delete_elem(&procs_seen, &pid);
        /* Its mappings are gone: walk by frame pointer until the agent loaded the new ones. */
        bpf_map_delete_elem(&unwind_procs, &pid);
        bpf_map_delete_elem(&python_procs, &pid); /* another program: the agent looks again */

        /* In a profiled cgroup: tell the agent now, so the new program's
         * tables are loaded while the dynamic loader runs, before its
         * first samples. */
        cgid = bpf_get_current_cgroup_id();
        slot = bpf_map_lookup_elem(&cgroups, &cgid);
        if (!slot)
                return 0;
        sess = bpf_map_lookup_elem(&sessions, slot);
        if (!sess || !(sess->flags & CGPROF_SESSION_ACTIVE) || !(sess->flags & CGPROF_SESSION_UNWIND_TABLES))
                return 0;
        e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);
        if (!e)
                return 0;
        e->start_time = BPF_CORE_READ(p, group_leader, start_time);
        e->pid = pid;
        e->session = *slot;
        BPF_CORE_READ_STR_INTO(&e->comm, p, group_leader, comm);
        e->kind = CGPROF_PROC_EVENT_EXEC;
        e->exec_id = BPF_CORE_READ(p, group_leader, self_exec_id);
        e->ppid = BPF_CORE_READ(p, group_leader, real_parent, tgid);
        e->pad = 0;
        e->parent_start_time = BPF_CORE_READ(p, group_leader, real_parent, group_leader, start_time);
        bpf_ringbuf_submit(e, 0);
        return 0;
}

#include "offcpu.h" /* off-CPU: the sched_switch programs */
