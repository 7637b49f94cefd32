/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Process events, their mappings read on a worker thread (see
 * proc-event-queue.h). */
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "proc-event-queue.h"
#include "base.h"

struct ProcEventQueue {
        Worker *worker;
        ProcMapsCache *cache;
        char *proc_root;
        ProcEventFunc handle;
        void *userdata;
        ProcEventQueueStats stats;
        Hashmap pending_by_pid; /* PID -> events of it queued (a count, as the value) */
};

static void pid_pending_add(ProcEventQueue *q, uint32_t pid, int delta) {
        HashmapKey k = { .u64 = pid };
        uintptr_t n = (uintptr_t) hashmap_get(&q->pending_by_pid, HASHMAP_KEY_UINT64, k);

        n = delta > 0 ? n + 1 : (n > 0 ? n - 1 : 0);
        if (n == 0)
                (void) hashmap_remove(&q->pending_by_pid, HASHMAP_KEY_UINT64, k);
        else if (hashmap_replace(&q->pending_by_pid, HASHMAP_KEY_UINT64, k, (void *) n, NULL) < 0)
                /* No memory: the PID is not known as waiting (its samples
                 * are resolved with what can be read then). */
                (void) hashmap_remove(&q->pending_by_pid, HASHMAP_KEY_UINT64, k);
}

bool proc_event_queue_pid_pending(const ProcEventQueue *q, uint32_t pid) {
        return q && hashmap_get(&q->pending_by_pid, HASHMAP_KEY_UINT64, (HashmapKey){ .u64 = pid });
}

typedef struct ProcEventJob {
        WorkerJob job; /* first: the worker hands back this */
        ProcEventQueue *queue;
        struct cgprof_proc_event event;
        char comm[CGPROF_COMM_LEN + 1];
        ProcMapsText text;
        JobIdentity identity;
        bool identity_read;
} ProcEventJob;

/* Events of a process of a session that tell who it is: its first sample,
 * an exec(). */
static bool event_reads_identity(const struct cgprof_proc_event *e) {
        return e->kind == CGPROF_PROC_EVENT_SEEN || e->kind == CGPROF_PROC_EVENT_EXEC;
}

static void job_run(WorkerJob *j) {
        ProcEventJob *pj = (ProcEventJob *) j;
        /* What the job owns, and proc_root (set once, before any job): the
         * rest of the queue is the loop's. An error is handed over in the
         * text, for the readers to see. */
        (void) proc_maps_text_read(pj->queue->proc_root, (pid_t) pj->event.pid, &pj->text);
        /* Its environment blocks on its memory too (the listed keys only). */
        if (event_reads_identity(&pj->event))
                pj->identity_read =
                        job_identity_read(pj->queue->proc_root, (pid_t) pj->event.pid, &pj->identity) >= 0;
}

static void job_done(WorkerJob *j, bool ran) {
        ProcEventJob *pj = (ProcEventJob *) j;
        ProcEventQueue *q = pj->queue;

        q->stats.pending--;
        pid_pending_add(q, pj->event.pid, -1);
        if (ran && q->handle) { /* (no handle: the queue is being freed) */
                q->stats.handled++;
                q->stats.read_usec_max = MAX(q->stats.read_usec_max, j->finished_usec - j->started_usec);
                q->stats.wait_usec_max =
                        MAX(q->stats.wait_usec_max, now_usec(CLOCK_MONOTONIC) - j->submitted_usec);
                proc_maps_cache_put(q->cache, q->proc_root, (pid_t) pj->event.pid, &pj->text);
                q->handle(&pj->event, pj->comm, pj->identity_read ? &pj->identity : NULL, q->userdata);
                /* What the next one reads is read anew (or handed over). */
                proc_maps_cache_clear(q->cache);
        }
        proc_maps_text_done(&pj->text);
        explicit_bzero(&pj->identity, sizeof(pj->identity));
        free(pj);
}

void proc_event_queue_add(ProcEventQueue *q, const struct cgprof_proc_event *e, const char *comm) {
        ProcEventJob *pj = calloc(1, sizeof(*pj));

        if (!pj) {
                /* No memory for the queue: the mappings are read here (and
                 * not the environment: that waits for the next event). */
                proc_maps_cache_clear(q->cache);
                q->handle(e, comm, NULL, q->userdata);
                proc_maps_cache_clear(q->cache);
                return;
        }
        pj->queue = q;
        pj->event = *e;
        snprintf(pj->comm, sizeof(pj->comm), "%s", comm);
        q->stats.queued++;
        q->stats.pending++;
        q->stats.pending_max = MAX(q->stats.pending_max, q->stats.pending);
        pid_pending_add(q, e->pid, +1);
        worker_submit(q->worker, &pj->job, job_run, job_done);
}

unsigned proc_event_queue_pending(const ProcEventQueue *q) {
        return q ? q->stats.pending : 0;
}

void proc_event_queue_flush(ProcEventQueue *q) {
        if (q && q->stats.pending > 0)
                worker_flush(q->worker);
}

void proc_event_queue_stats(const ProcEventQueue *q, ProcEventQueueStats *ret) {
        *ret = q ? q->stats : (ProcEventQueueStats){};
}

int proc_event_queue_new(sd_event *event, ProcMapsCache *cache, const char *proc_root, ProcEventFunc handle,
                         void *userdata, ProcEventQueue **ret) {
        ProcEventQueue *q = calloc(1, sizeof(*q));
        int r;

        if (!q)
                return -ENOMEM;
        q->cache = cache;
        q->handle = handle;
        q->userdata = userdata;
        q->proc_root = strdup(proc_root);
        if (!q->proc_root) {
                free(q);
                return -ENOMEM;
        }
        /* At the loop's own priority: a short-lived process must be read
         * before it exits, and the loop waits for the reads (a drain). */
        r = worker_new(event, "cgprofd-procs", 0, &q->worker);
        if (r >= 0)
                r = worker_set_dispatch(q->worker, PROC_EVENT_QUEUE_BUDGET_USEC,
                                        SD_EVENT_PRIORITY_IMPORTANT);
        if (r < 0) {
                proc_event_queue_free(q);
                return r;
        }
        *ret = q;
        return 0;
}

ProcEventQueue *proc_event_queue_free(ProcEventQueue *q) {
        if (!q)
                return NULL;
        /* Jobs not handed back yet come back through job_done(ran=false)
         * or, when they ran, are handled: free the worker before the rest. */
        q->handle = NULL;
        worker_free(q->worker);
        hashmap_clear(&q->pending_by_pid);
        free(q->proc_root);
        free(q);
        return NULL;
}
