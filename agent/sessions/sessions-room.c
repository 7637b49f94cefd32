/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sessions room's own state: made, started, stopped and freed (see
 * sessions-deps.h). */
#include <stdlib.h>

#include "fileio.h"

#include "sessions-room.h"

int sessions_room_new(const SessionsRoomDeps *deps, SessionsRoom **ret) {
        _cleanup_(sessions_room_freep) SessionsRoom *r = calloc(1, sizeof(*r));
        int k;

        if (!r)
                return -ENOMEM;
        r->deps = *deps;
        r->checkpoint_dir_fd = -EBADF;
        k = report_retry_new(&r->report_retry);
        if (k < 0)
                return k;
        k = job_registry_new(&r->jobs);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(r);
        return 0;
}

SessionsRoom *sessions_room_free(SessionsRoom *r) {
        if (!r)
                return NULL;
        r->report_worker = worker_free(r->report_worker);
        manager_reports_free(r);
        report_retry_free(r->report_retry);
        job_registry_free(r->jobs);
        safe_close(r->checkpoint_dir_fd);
        free(r->user_frame_cache);
        free(r);
        return NULL;
}

int sessions_room_start_worker(SessionsRoom *r) {
        return worker_new(r->deps.event, "cgprofd-reports", WORKER_NICE_BACKGROUND, &r->report_worker);
}

void sessions_room_flush(SessionsRoom *r) {
        if (r && r->report_worker)
                worker_flush(r->report_worker);
}

void sessions_room_stop_worker(SessionsRoom *r) {
        if (!r)
                return;
        r->report_worker = worker_free(r->report_worker);
        manager_reports_free(r);
}

void sessions_room_jobs_drop(SessionsRoom *r) {
        if (r)
                r->jobs = job_registry_free(r->jobs);
}

Worker *sessions_room_worker(SessionsRoom *r) {
        return r ? r->report_worker : NULL;
}

Timing *sessions_room_report_timing(SessionsRoom *r) {
        return &r->report_timing;
}

void sessions_room_report_queue(SessionsRoom *r, size_t *ret_writes, uint64_t *ret_overflows) {
        *ret_writes = r->report_queue_writes;
        *ret_overflows = r->report_queue_overflows;
}

void sessions_room_set_sampling(SessionsRoom *r, const SessionsSampling *sampling) {
        r->sampler = sampling->sampler;
        r->unwinder = sampling->unwinder;
        r->python = sampling->python;
        r->symbolizer = sampling->symbolizer;
        r->process_reader = sampling->process_reader;
}

void sessions_room_drain_begin(SessionsRoom *r) {
        r->drain_seq++;
}

void sessions_room_checkpoint_stats(SessionsRoom *r, SessionsCheckpointStats *ret) {
        *ret = r->checkpoints;
}

void sessions_room_counts(SessionsRoom *r, SessionsCounts *ret) {
        *ret = r->counts;
}

void sessions_room_count_failed(SessionsRoom *r) {
        r->counts.failed++;
}
