/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A report as ListReports shows it (manager-control.c walks the report
 * directory, manager-bus.c sends the list), and the parsing of its
 * summary.json, without any I/O: tests/fuzz/fuzz-summary.c runs it on
 * arbitrary input. */

#include <stddef.h>
#include <stdint.h>

typedef struct ControlReport {
        char *session, *report_dir, *namespace, *pod, *container, *cgroup; /* never NULL */
        uint64_t start_usec, samples;
        uint64_t bytes; /* its report files' sizes on disk (0: not known) */
} ControlReport;

void control_report_done(ControlReport *r);
void control_reports_free(ControlReport *r, size_t n);

/* The report in report_dir whose summary.json is text (size bytes, with a
 * NUL at text[size], as read_regular_file_max() leaves it: cJSON 1.7.15 may
 * read the byte after a length-bounded input). Absent strings are "",
 * absent or out-of-range counts 0. Returns 0, -EBADMSG when it is not a
 * cgprof summary (not a JSON object, or no "session" string), -ENOMEM. */
int control_report_parse(const char *text, size_t size, const char *report_dir, ControlReport *ret);
