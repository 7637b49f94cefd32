/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The threads of an off-CPU session (the wall-clock view): the thread
 * frame at the root of each stack drained with its thread (report.c keeps
 * it in wallclock.* only), and the threads' totals for its report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "log.h"
#include "session.h"
#include "sessions-room.h"

struct SessionThread {
        uint64_t tid;
        uint64_t looked; /* the drain (drain_seq + 1) of its last name lookup */
        char name[16];
};

/* Its name as of this drain (a thread may rename itself): the kernel's at
 * its last switch-out, or /proc's before its first. NULL on OOM. */
static const char *thread_name(Session *s, uint32_t pid, uint32_t tid) {
        SessionThread *t = session_threads_get(&s->threads, tid);
        char name[16];

        if (!t) {
                t = calloc(1, sizeof(SessionThread));
                if (!t)
                        return NULL;
                t->tid = tid;
                if (session_threads_put(&s->threads, tid, t) < 0) {
                        free(t);
                        return NULL;
                }
        }
        if (t->looked == s->room->drain_seq + 1)
                return t->name;
        t->looked = s->room->drain_seq + 1;
        if (sampler_session_thread_name(s->room->sampler, s->slot, tid, name) >= 0 && name[0]) {
                memcpy(t->name, name, sizeof(t->name));
                return t->name;
        }
        _cleanup_free_ char *path = NULL, *comm = NULL;
        if (asprintf(&path, "/proc/%u/task/%u/comm", pid, tid) >= 0 && session_read_comm(path, &comm) >= 0 &&
            *comm)
                snprintf(t->name, sizeof(t->name), "%s", comm);
        else if (!t->name[0])
                snprintf(t->name, sizeof(t->name), "[tid %u]", tid);
        return t->name;
}

int session_thread_frame(Session *s, uint32_t pid, uint32_t tid, uint32_t *ret_frame,
                         uint32_t *ret_location) {
        const char *name = thread_name(s, pid, tid);
        int r;

        if (!name)
                return -ENOMEM;
        r = profile_data_intern_frame(s->data, name, NULL, FRAME_THREAD, ret_frame);
        if (r < 0)
                return r;
        return profile_data_intern_location(s->data, 0, PROFILE_NONE, *ret_frame, ret_location);
}

static void thread_free(SessionThread *t) {
        free(t);
}

void session_threads_done(Session *s) {
        session_threads_clear(&s->threads, thread_free);
        free(s->report_threads);
        s->report_threads = NULL;
        s->n_report_threads = 0;
}

void session_report_threads(Session *s, const SamplerSessionStats *st, ReportOffCpuInfo *ret) {
        ReportThread *t = NULL;

        free(s->report_threads);
        s->report_threads = NULL;
        s->n_report_threads = 0;
        if (st->n_threads > 0) {
                t = calloc(st->n_threads, sizeof(ReportThread));
                if (!t)
                        return (void) log_oom();
        }
        for (size_t i = 0; i < st->n_threads; i++) {
                const OffCpuThread *o = &st->threads[i];
                t[i] = (ReportThread){
                        .pid = o->t.pid,
                        .tid = o->tid,
                        .oncpu_ns = o->t.oncpu_ns,
                        .offcpu_ns = o->t.offcpu_ns,
                        .unstacked_ns = o->t.short_ns,
                        .runqueue_ns = o->t.runqueue_ns,
                };
                memcpy(t[i].name, o->t.comm, sizeof(t[i].name));
                t[i].name[sizeof(t[i].name) - 1] = 0;
        }
        s->report_threads = t;
        s->n_report_threads = st->n_threads;
        ret->threads = t;
        ret->n_threads = st->n_threads;
}
