/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the kernel offers for off-CPU profiling (bpf/offcpu.h): the
 * BTF-typed tracepoints sched_switch and sys_exit (raw_syscalls). They
 * need no tracefs, no kprobes and no BPF trampolines. */

/* 0 when the kernel has them; -EOPNOTSUPP and *ret_reason (malloc()ed, for
 * `check`, status and summary.json) when not; another negative errno on
 * failure. */
int offcpu_probe(char **ret_reason);

/* The same with a given BTF (for tests): the name of a missing tracepoint
 * in *ret_missing, or NULL. */
struct btf;
int offcpu_probe_btf(const struct btf *btf, const char **ret_missing);
