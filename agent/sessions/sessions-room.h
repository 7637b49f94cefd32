/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "job-registry.h"
#include "manager-reports.h"
#include "report-retry.h"
#include "sessions-deps.h"

typedef struct SessionEndRequest SessionEndRequest; /* session-end.c */

/* The sessions room's state (SessionsRoom, opaque above the room): shared
 * by its files. Nothing outside agent/sessions/ includes this header. */

struct SessionsRoom {
        SessionsRoomDeps deps;
        /* Reports are written on this thread (report-writer.c); the
         * directories queued or being written now, and how often a batch
         * found the queue full and was written on the loop instead. */
        Worker *report_worker;
        size_t report_queue_writes;
        uint64_t report_queue_overflows;
        /* A report directory written (all its formats, fsync()ed): at a
         * session's end, a checkpoint or a retry. */
        Timing report_timing;
        ManagerReports *reports; /* the report index and retention (manager-reports.c) */
        JobRegistry *jobs; /* the distributed jobs of the sessions (session-jobs.c) */
        ReportRetry *report_retry; /* reports waiting to be written again (report-retry.c) */
        int checkpoint_dir_fd; /* the checkpoint registry in the state directory (checkpoint.c) */
        SessionsCheckpointStats checkpoints;
        /* The sampling room's (sessions_room_set_sampling()). */
        Sampler *sampler;
        Unwinder *unwinder;
        Python *python;
        Symbolizer *symbolizer;
        ProcessReader *process_reader;
        uint64_t drain_seq; /* incremented on every drain */
        SessionsCounts counts;
        /* Sessions to end, a few per loop iteration (session-end.c). */
        struct SessionEndRequest *end_queue;
        size_t n_end_queue, end_queue_head;
        sd_event_source *end_defer;
        struct UserFrameCache *user_frame_cache; /* session.c: user addresses interned in this drain */
};

/* reportDir now ("" when none), and its fd in *ret_fd (NULL: not wanted). */
static inline const char *sessions_room_report_dir(SessionsRoom *r, int *ret_fd) {
        int fd;
        const char *d = r->deps.report_dir(r->deps.userdata, &fd);
        if (ret_fd)
                *ret_fd = fd;
        return d;
}

static inline void sessions_room_reports_written(SessionsRoom *r) {
        if (r->deps.reports_written)
                r->deps.reports_written(r->deps.userdata);
}

static inline const char *sessions_room_cgroup_root(SessionsRoom *r) {
        return r->deps.cgroup_root(r->deps.userdata);
}

static inline bool sessions_room_stopping(SessionsRoom *r) {
        return r->deps.stopping && r->deps.stopping(r->deps.userdata);
}

/* The Manager's indexes of the sessions (SessionsRoomDeps). */
static inline Session *sessions_room_session_find(SessionsRoom *r, const char *id) {
        return r->deps.session_find(r->deps.userdata, id);
}

static inline void sessions_room_session_slot(SessionsRoom *r, Session *s, bool taken) {
        r->deps.session_slot(r->deps.userdata, s, taken);
}

static inline void sessions_room_session_removed(SessionsRoom *r, Session *s, const char *reason) {
        r->deps.session_removed(r->deps.userdata, s, reason);
}

static inline void sessions_room_assign_cgroups_below(SessionsRoom *r, const char *path) {
        r->deps.assign_cgroups_below(r->deps.userdata, path);
}

static inline void sessions_room_refresh_process_soon(SessionsRoom *r, uint32_t session_slot, uint32_t pid,
                                                      uint64_t start_time, uint32_t exec_id) {
        r->deps.refresh_process_soon(r->deps.userdata, session_slot, pid, start_time, exec_id);
}

static inline int sessions_room_drain(SessionsRoom *r, bool full) {
        return r->deps.drain(r->deps.userdata, full);
}
