/* SPDX-License-Identifier: (LGPL-2.1-or-later OR BSD-2-Clause) */
#pragma once

/* Python frames: what the sampler needs to walk a CPython process's frame
 * chain at sample time, shared by profile.bpf.c and the agent (fixed-width
 * fields only).
 *
 * The agent finds _PyRuntime and the interpreter's version in the process's
 * python/libpython ELF file and writes one cgprof_python_proc per process
 * (python_procs, keyed by tgid) with the structure offsets of that version.
 * At a sample the program finds the sampled thread's PyThreadState (its
 * thread_id is the thread's pthread_self(), which is the thread pointer:
 * task->thread.fsbase on x86-64), then walks current frame -> previous,
 * recording per frame the code object's address and the instruction
 * offset: _PyInterpreterFrame.previous (3.11+) or PyFrameObject.f_back
 * (3.7-3.10, where every frame is its own evaluation loop call). The agent
 * reads the code objects' names, files and line tables.
 *
 * A forked child (a DataLoader worker, a multiprocessing 'fork' child) runs
 * its parent's interpreter at the same addresses until it calls exec(): at
 * its first sample without an entry of its own, the walk copies its
 * parent's (when the parent's start time and exec() count are the child's
 * parent's and the child's own), so the child is walked from its first
 * sample, not from when the agent has looked at it. */

#define CGPROF_MAX_PYTHON_PROCS 16384
#define CGPROF_MAX_PYTHON_THREADS 65536
/* Thread states searched for the sampled thread (a cache hit needs none). */
#define CGPROF_PYTHON_MAX_THREAD_SCAN 64
/* An offset the version does not have. */
#define CGPROF_PYTHON_NO_OFFSET 0xffffu
/* The most bytes of a frame the walk reads (every field it uses inside). */
#define CGPROF_PY_FRAME_READ_MAX 128

struct cgprof_python_proc {
        __u64 start_time; /* the process's start time: a reused PID is not this process */
        __u64 interp_head; /* address of _PyRuntime.interpreters.head in the process */
        __u16 interp_threads_head; /* PyInterpreterState.threads.head */
        __u16 tstate_next; /* PyThreadState.next */
        __u16 tstate_thread_id; /* PyThreadState.thread_id (pthread_self()) */
        __u16 tstate_cframe; /* PyThreadState.cframe, NO_OFFSET: current frame directly in the tstate */
        __u16 cframe_current_frame; /* _PyCFrame.current_frame (or PyThreadState.current_frame) */
        __u16 frame_code; /* _PyInterpreterFrame.f_code/.f_executable, PyFrameObject.f_code */
        __u16 frame_previous; /* _PyInterpreterFrame.previous, PyFrameObject.f_back */
        __u16 frame_prev_instr; /* _PyInterpreterFrame.prev_instr/.instr_ptr, NO_OFFSET: none */
        __u16 frame_is_entry; /* _PyInterpreterFrame.is_entry (a byte), NO_OFFSET: none */
        __u16 frame_owner; /* _PyInterpreterFrame.owner (a byte), NO_OFFSET: none */
        __u16 code_adaptive; /* PyCodeObject.co_code_adaptive: the first instruction */
        __u16 frame_lasti; /* PyFrameObject.f_lasti (an int, 3.7-3.10), NO_OFFSET: none */
        __u16 frame_size; /* bytes of a frame read at once (1..CGPROF_PY_FRAME_READ_MAX - 1) */
        __u8 owner_cstack; /* owner value of C-stack shim frames (skipped), 0: none */
        __u8 lasti_shift; /* f_lasti >> lasti_shift is in code units */
        __u32 exec_id; /* the program (exec() count) registered: for the agent, the walk ignores it */
        __u32 parent; /* 0, or the tgid whose entry this one was copied from at the child's first sample */
};

/* A Python frame as stored in a stack's pcs[]: the code object's address
 * (8-byte aligned: 44 bits of a 47-bit user address), the instruction
 * offset in code units (19 bits, saturated) and whether the frame is the
 * first one its _PyEval_EvalFrameDefault call ran (is_entry). */
#define CGPROF_PY_FRAME(code, instr, entry) \
        ((((__u64) (code) >> 3) << 20) |    \
         (((__u64) (instr) > 0x7ffffULL ? 0x7ffffULL : (__u64) (instr)) << 1) | ((entry) ? 1ULL : 0ULL))
#define CGPROF_PY_FRAME_CODE(v) (((v) >> 20) << 3)
#define CGPROF_PY_FRAME_INSTR(v) ((__u32) (((v) >> 1) & 0x7ffffULL))
#define CGPROF_PY_FRAME_ENTRY(v) ((__u32) ((v) &1ULL))
#define CGPROF_PY_INSTR_UNKNOWN 0x7ffffu

/* Python stacks are stored in the stacks maps beside the native ones, with
 * CGPROF_STACK_PYTHON, and one of these saying how the walk went. */
#define CGPROF_STACK_PYTHON (1u << 16)
#define CGPROF_PY_NO_THREAD (1u << 17) /* no thread state is the sampled thread's */
#define CGPROF_PY_NO_FRAME (1u << 18) /* the thread runs no Python code (no current frame) */
#define CGPROF_PY_READ_ERROR (1u << 19) /* the process's memory could not be read */
#define CGPROF_PY_TRUNCATED (1u << 20) /* CGPROF_MAX_STACK_DEPTH frames, more to walk */
#define CGPROF_PY_NOT_INITIALIZED (1u << 21) /* no interpreter yet (or any more) */
