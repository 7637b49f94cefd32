/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "control-report.h"
#include "report-index.h"

/* The reports of reportDir, as the agent knows them (report-index.h):
 * loaded by a walk of the directory on the report worker at start (and
 * again when a reload names another reportDir), then kept up to date by
 * every report the agent writes and removes; and reportRetention
 * (config.h), kept after each write, after a reload and every
 * REPORTS_RETENTION_INTERVAL_USEC (for maxAge): the reports it removes are
 * taken out of the index at once, removed from the disk on the report
 * worker, counted (cgprof_reports_removed_total{reason}) and logged to the
 * journal one entry each (CGPROF_MESSAGE_REPORT_REMOVED). */

#define REPORTS_RETENTION_INTERVAL_USEC (10 * 60 * USEC_PER_SEC)

typedef struct SessionsRoom SessionsRoom;
typedef struct ReportWrite ReportWrite;
typedef struct ManagerReports ManagerReports;

int manager_reports_start(SessionsRoom *r);
void manager_reports_free(SessionsRoom *r);
/* A report directory was written (a session's end, a checkpoint, a retry). */
void manager_reports_add(SessionsRoom *r, const ReportWrite *w, const char *report_dir);
/* The configuration was reloaded: reportDir or reportRetention may have changed. */
void manager_reports_config_changed(SessionsRoom *r);

/* Whether the index holds the reports of the current reportDir (loaded):
 * until then listings walk the directory as they did. */
bool manager_reports_ready(SessionsRoom *r);
/* A listing from the index (-EAGAIN until it is loaded): the reports that
 * 'match' (NULL: all; e.g. control_report_filter_match()), newest first,
 * after 'after' (NULL: from the newest), at most 'limit' (0: all). */
int manager_reports_list(SessionsRoom *r, ReportMatch match, void *userdata, const ReportCursor *after,
                         size_t limit, const ReportEntry ***ret, size_t *ret_n, bool *ret_more);
/* The newest report of a session, or NULL. */
const ReportEntry *manager_reports_find_session(SessionsRoom *r, const char *session);

typedef struct ManagerReportsStats {
        uint64_t reports, bytes; /* in the index now */
        uint64_t removed[_REPORT_REMOVAL_MAX], removed_bytes, remove_failed;
        bool ready;
} ManagerReportsStats;
void manager_reports_stats(SessionsRoom *r, ManagerReportsStats *ret);
