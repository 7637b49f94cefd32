/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <linux/types.h>
#include <systemd/sd-event.h>

#include "job-identity.h"
#include "macro.h"
#include "profile.h"
#include "proc-maps.h"

/* Process events (a new process, an exec(), mappings the walker did not
 * know), with the process's mappings read off the event loop: reading
 * /proc/PID/maps of a process with tens of thousands of mappings costs the
 * kernel tens of ms, and waits for the process's mmap lock while it maps.
 * An event is queued; a worker thread reads the process's executable
 * mappings (bounded, proc_maps_text_read()); back on the loop, in the order
 * the events came, the text is handed to the ProcMapsCache and handle()
 * runs: the unwinder, the symbolizer and the CPython finder read the
 * mappings from memory. handle() calls take turns with the other handlers
 * (at most PROC_EVENT_QUEUE_BUDGET_USEC of them per loop iteration). */

/* Not from the kernel: the agent asks for a process's mappings to be read
 * again (a sample's address in no mapping it knew: a dlopen(), JIT code). */
#define PROC_EVENT_REFRESH 0x100U

/* identity: who the process is in a distributed job, read from its
 * /proc/PID/environ on the worker thread with its mappings (the listed keys
 * only, job-identity.h), for a process seen or exec()ed; NULL for the other
 * events. */
typedef void (*ProcEventFunc)(const struct cgprof_proc_event *e, const char *comm,
                              const JobIdentity *identity, void *userdata);

typedef struct ProcEventQueue ProcEventQueue;

typedef struct ProcEventQueueStats {
        uint64_t queued, handled;
        unsigned pending, pending_max;
        uint64_t wait_usec_max; /* from the event to its handle() */
        uint64_t read_usec_max; /* the longest read of one process's mappings */
} ProcEventQueueStats;

#define PROC_EVENT_QUEUE_BUDGET_USEC (10 * USEC_PER_MSEC)

/* cache: where the texts go (the Manager's, cleared after each handle()). */
int proc_event_queue_new(sd_event *event, ProcMapsCache *cache, const char *proc_root, ProcEventFunc handle,
                         void *userdata, ProcEventQueue **ret);
/* The events not handled yet are dropped. */
ProcEventQueue *proc_event_queue_free(ProcEventQueue *q);

/* Queues an event; when it cannot (no memory), handles it at once. */
void proc_event_queue_add(ProcEventQueue *q, const struct cgprof_proc_event *e, const char *comm);
/* Events queued whose handle() has not run yet. */
unsigned proc_event_queue_pending(const ProcEventQueue *q);
/* An event of pid is queued (its samples wait for its mappings). */
bool proc_event_queue_pid_pending(const ProcEventQueue *q, uint32_t pid);
/* Waits for every queued event's read, and handles them all, now (a drain
 * that must see every process before its samples). */
void proc_event_queue_flush(ProcEventQueue *q);
void proc_event_queue_stats(const ProcEventQueue *q, ProcEventQueueStats *ret);
