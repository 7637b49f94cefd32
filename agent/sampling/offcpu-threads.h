/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

/* The per-thread totals of off-CPU sessions (bpf/offcpu.h's offcpu_threads
 * map, struct cgprof_thread): the wall-clock view. The kernel adds to them
 * at each switch-out of a session's thread; a thread that exits keeps its
 * entry until the session's end forgets them. fd: the map. */

typedef struct OffCpuThread {
        uint32_t tid;
        struct cgprof_thread t;
} OffCpuThread;

/* The threads of session slot, sorted by (pid, tid): *ret (malloc()ed,
 * NULL when none) and *ret_n. */
int offcpu_threads_read(int fd, uint32_t slot, OffCpuThread **ret, size_t *ret_n);
/* Removes the entries of session slot (its end: the slot may be reused). */
int offcpu_threads_forget(int fd, uint32_t slot);
/* The name of thread tid of session slot (its comm at its last switch-out)
 * into ret (NUL-terminated). -ENOENT: not seen yet. */
int offcpu_thread_name(int fd, uint32_t slot, uint32_t tid, char ret[static 16]);
