/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-event.h>

/* A thread that runs jobs off the event loop and hands each back to it: a
 * job's run() happens on the worker's thread, in submission order, one at
 * a time; its done() happens on the event loop afterwards (an eventfd
 * wakes the loop), and owns the job from then on. Used for what may block
 * or take long: writing reports (fsync), listing them, fetching debug
 * files.
 *
 * While a job is queued or running, the loop must not touch what run()
 * reads or writes; done() may. The thread runs at nice 10: when both want
 * a CPU, the loop's thread goes first (or as given to worker_new()). */

typedef struct Worker Worker;
typedef struct WorkerJob WorkerJob;

/* ran: false when the worker was freed before the job ran (its done() is
 * then called from worker_free(), to free the job). */
typedef void (*WorkerRunFunc)(WorkerJob *job);
typedef void (*WorkerDoneFunc)(WorkerJob *job, bool ran);

struct WorkerJob {
        WorkerRunFunc run;
        WorkerDoneFunc done;
        WorkerJob *next;
        uint64_t submitted_usec, started_usec, finished_usec; /* CLOCK_MONOTONIC */
};

typedef struct WorkerStats {
        uint64_t submitted, completed;
        unsigned pending; /* submitted, done() not called yet */
        unsigned pending_max;
        uint64_t wait_usec_max; /* longest from submission to start */
        uint64_t run_usec_max, run_usec_total;
} WorkerStats;

/* nice: the thread's nice value (WORKER_NICE_BACKGROUND for work that
 * may wait; 0 for work the loop waits for). */
#define WORKER_NICE_BACKGROUND 10
int worker_new(sd_event *event, const char *name, int nice, Worker **ret);
/* At most budget_usec of done() calls per loop iteration (0: all that
 * ran, the default); the rest in the next iterations, the source's priority
 * lowered to SD_EVENT_PRIORITY_NORMAL meanwhile (others take turns), and
 * back to priority once none are left. */
int worker_set_dispatch(Worker *w, uint64_t budget_usec, int64_t priority);
/* Stops the thread after the job it runs now; the jobs not run yet get
 * done(job, false). */
Worker *worker_free(Worker *w);

void worker_submit(Worker *w, WorkerJob *job, WorkerRunFunc run, WorkerDoneFunc done);
/* Blocks until every job submitted so far has run, then calls their done()
 * (on the calling thread, the loop's). For the agent's exit, when nothing
 * else is left to do. */
void worker_flush(Worker *w);
/* Calls done() for the jobs that have run (what the loop's handler does,
 * but without its budget). */
void worker_dispatch(Worker *w);

unsigned worker_pending(const Worker *w);
void worker_stats(const Worker *w, WorkerStats *ret);
