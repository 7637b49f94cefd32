/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "profile-data.h"
#include "report.h"

/* Reports that could not be written when their session ended (a full or
 * read-only reportDir: ENOSPC, EROFS, EDQUOT, or anything else) are kept in
 * memory and written again later, on the report worker: after
 * 5 s, 30 s and 2 min by default (CGPROF_REPORT_RETRY_DELAYS, e.g.
 * "1s,2s", for tests), then dropped with a log line. The queue is bounded
 * (REPORT_RETRY_MAX_REPORTS reports, REPORT_RETRY_MAX_BYTES of sample
 * data, estimated): a report that does not fit is dropped at once. When
 * the agent stops, each pending report gets one last attempt. */

#define REPORT_RETRY_MAX_REPORTS 64U
#define REPORT_RETRY_MAX_BYTES (64U * 1024U * 1024U)
#define REPORT_RETRY_MAX_DELAYS 8U

typedef struct SessionsRoom SessionsRoom;
typedef struct ReportWrite ReportWrite;

/* The queue (report-retry.c), held by the sessions room. */
typedef struct ReportRetry ReportRetry;

/* With the delays set: the default, or CGPROF_REPORT_RETRY_DELAYS. */
int report_retry_new(ReportRetry **ret);
ReportRetry *report_retry_free(ReportRetry *q);
DEFINE_TRIVIAL_CLEANUP_FUNC(ReportRetry *, report_retry_free);

/* Queues the write that failed (its error says how): takes it. Dropped
 * (and counted) when the queue is full or the agent is stopping. Returns 1
 * when queued, 0 when dropped (logged either way). */
int manager_report_retry_add(SessionsRoom *r, ReportWrite *w);
/* One last attempt for each pending report (the agent stops): handed to
 * the report worker, dropped if it fails. */
void manager_report_retry_flush(SessionsRoom *r);
void manager_report_retry_status(SessionsRoom *r, cJSON *j);
