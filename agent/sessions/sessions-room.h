/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager-reports.h"
#include "report-retry.h"
#include "sessions-deps.h"

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
        ReportRetry *report_retry; /* reports waiting to be written again (report-retry.c) */
        int checkpoint_dir_fd; /* the checkpoint registry in the state directory (checkpoint.c) */
        SessionsCheckpointStats checkpoints;
        Sampler *sampler; /* the sampling room's (sessions_room_set_sampler()) */
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

static inline bool sessions_room_stopping(SessionsRoom *r) {
        return r->deps.stopping && r->deps.stopping(r->deps.userdata);
}
