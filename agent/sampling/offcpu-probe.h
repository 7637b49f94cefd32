/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* What the kernel offers for off-CPU profiling (bpf/offcpu.h): the
 * BTF-typed sched_switch tracepoint, and a way to record a wait in the
 * task that waited, on its way back to user mode:
 * - task work (kernel 6.18+, the bpf_task_work_schedule_resume_impl
 *   kfunc): scheduled for the waking task alone;
 * - else the BTF-typed sys_exit tracepoint, which runs at every system
 *   call of the node while attached.
 * None needs tracefs, kprobes or BPF trampolines. */

#define OFFCPU_TASK_WORK_KFUNC "bpf_task_work_schedule_resume_impl"

/* While an off-CPU session keeps waits shorter than this (offCpuMinUsec),
 * the sys_exit way is used even where the task work is there: a task work
 * costs a few µs per kept wait, more than the tracepoint costs per system
 * call when nearly every wait is kept (sampler.c, docs/offcpu.md). */
#define OFFCPU_TASK_WORK_MIN_USEC 100

typedef enum OffcpuRecordAt {
        OFFCPU_RECORD_AT_TASK_WORK,
        OFFCPU_RECORD_AT_SYS_EXIT,
        _OFFCPU_RECORD_AT_INVALID = -1,
} OffcpuRecordAt;

/* 0 and *ret_at when the kernel can; -EOPNOTSUPP and *ret_reason
 * (malloc()ed, for `check`, status and summary.json) when not; another
 * negative errno on failure. */
int offcpu_probe(char **ret_reason, OffcpuRecordAt *ret_at);

/* The same with a given BTF (for tests): the name of a missing tracepoint
 * in *ret_missing, or NULL. */
struct btf;
int offcpu_probe_btf(const struct btf *btf, const char **ret_missing, OffcpuRecordAt *ret_at);

/* "task-work", "sys_exit" (status offCpuRecordAt), "none". */
const char *offcpu_record_at_to_string(OffcpuRecordAt at);
