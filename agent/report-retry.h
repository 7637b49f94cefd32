/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "profile-data.h"
#include "report.h"

/* Reports that could not be written when their session ended (a full or
 * read-only reportDir: ENOSPC, EROFS, EDQUOT, or anything else) are kept in
 * memory and written again later, from a timer on the event loop: after
 * 5 s, 30 s and 2 min by default (CGPROF_REPORT_RETRY_DELAYS, e.g.
 * "1s,2s", for tests), then dropped with a log line. The queue is bounded
 * (REPORT_RETRY_MAX_REPORTS reports, REPORT_RETRY_MAX_BYTES of sample
 * data, estimated): a report that does not fit is dropped at once. When
 * the agent stops, each pending report gets one last attempt. */

#define REPORT_RETRY_MAX_REPORTS 64U
#define REPORT_RETRY_MAX_BYTES (64U * 1024U * 1024U)
#define REPORT_RETRY_MAX_DELAYS 8U

typedef struct Manager Manager;
typedef struct PendingReport PendingReport;

typedef struct ReportRetry {
        PendingReport **pending; /* oldest first */
        size_t n_pending;
        uint64_t bytes; /* estimated, of the pending reports' data */
        sd_event_source *timer; /* at the earliest attempt due */
        uint64_t delays_usec[REPORT_RETRY_MAX_DELAYS]; /* before attempt 2, 3, ... */
        size_t n_delays;
        uint64_t queued, written, dropped; /* counted in status */
} ReportRetry;

/* Sets the delays (the default, or CGPROF_REPORT_RETRY_DELAYS). */
int report_retry_init(ReportRetry *q);
void report_retry_done(ReportRetry *q);

/* Queues the report directory 'dir' (relative to reportDir) whose write
 * failed with 'error': takes data; copies what info points to. Dropped
 * (and counted) when the queue is full or the agent is stopping. Returns 1
 * when queued, 0 when dropped (logged either way). */
int manager_report_retry_add(Manager *m, const char *dir, unsigned formats, ProfileData *data,
                             const ReportSummaryInfo *info, int error);
/* One last attempt for each pending report (the agent stops). */
void manager_report_retry_flush(Manager *m);
void manager_report_retry_status(Manager *m, cJSON *j);
