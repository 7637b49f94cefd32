/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control-report.h"
#include "macro.h"

/* Listings of reports: a filter, and the walk of a report directory that
 * finds them (the report index's load, manager-reports.h; and listings
 * until it is loaded). */

/* A listing's filter: "" (all), "NAMESPACE", "NAMESPACE/POD" or
 * "cgroup:PATH"; and since_usec: started at or after it. -EINVAL (with
 * *ret_error saying why) for anything else. */
typedef struct ReportFilter ReportFilter;
int control_report_filter_new(const char *filter, uint64_t since_usec, ReportFilter **ret, char **ret_error);
ReportFilter *control_report_filter_free(ReportFilter *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(ReportFilter *, control_report_filter_free);
/* ReportMatch of report-index.h: userdata is the filter. */
bool control_report_filter_match(const ControlReport *r, void *userdata);

/* The reports (summary.json) below the directory dir_fd (named dir_path)
 * that match filter (as above), newest first. The walk is bounded
 * (CONTROL_REPORTS_MAX_DIRS directories, CONTROL_REPORTS_MAX_DEPTH levels:
 * a warning says when it stopped early) and follows no symlink. */
#define CONTROL_REPORTS_MAX_DIRS 1000000U
#define CONTROL_REPORTS_MAX_DEPTH 8U
int control_list_reports(int dir_fd, const char *dir_path, const char *filter, uint64_t since_usec,
                         ControlReport **ret, size_t *ret_n, char **ret_error);
