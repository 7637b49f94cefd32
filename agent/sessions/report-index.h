/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control-report.h"
#include "macro.h"

/* The reports in reportDir, in memory: loaded once by a walk of the
 * directory (on the report worker, at start), then kept up to date as the
 * agent writes reports (a session's end, a checkpoint, a retry) and
 * removes them (retention). Listings (ListReports, GET /reports), a
 * download's lookup by session and the retention plan read it on the loop,
 * in milliseconds at 100,000 reports, never behind the report writer's
 * queue. No I/O here: tests/test-report-index.c runs it alone.
 *
 * Entries are kept in order of start time (then of a serial number given
 * when an entry is first added: ties keep the order they came in), oldest
 * first: retention takes from the front, listings read from the back
 * (newest first). A report is known by its directory (full path): writing
 * it again (a checkpoint, then the final report) replaces its entry. */

typedef struct ReportIndex ReportIndex;

typedef struct ReportEntry {
        ControlReport report; /* report_dir: the directory's full path; bytes: its files' sizes */
        uint64_t serial; /* given when first added: the order of equal start times */
} ReportEntry;

int report_index_new(ReportIndex **ret);
ReportIndex *report_index_free(ReportIndex *x);
DEFINE_TRIVIAL_CLEANUP_FUNC(ReportIndex *, report_index_free);

/* Adds the report of r->report_dir, or replaces its entry (copies r). */
int report_index_put(ReportIndex *x, const ControlReport *r);
/* Removes the report of report_dir: false when there was none. */
bool report_index_remove(ReportIndex *x, const char *report_dir);
size_t report_index_count(const ReportIndex *x);
uint64_t report_index_bytes(const ReportIndex *x);
/* The newest report of a session (a session's checkpoints and final report
 * share a directory; per-process outputs make several), or NULL. */
const ReportEntry *report_index_find_session(const ReportIndex *x, const char *session);

/* Where a page of a listing ends: its last entry's start time and serial.
 * Text: "START.SERIAL" (decimal). */
typedef struct ReportCursor {
        uint64_t start_usec, serial;
} ReportCursor;
#define REPORT_CURSOR_STRING_MAX (2 * 20 + 2)
int report_cursor_parse(const char *s, ReportCursor *ret);
void report_cursor_format(const ReportCursor *c, char buf[static REPORT_CURSOR_STRING_MAX]);

typedef bool (*ReportMatch)(const ControlReport *r, void *userdata);
/* The entries that 'match' (NULL: all), newest first, after 'after' (NULL:
 * from the newest), at most 'limit' (0: no limit). *ret gets an array of
 * pointers to the entries (freed by the caller; the entries are valid
 * until the index changes), *ret_more whether more entries that match
 * remain after the last one. */
int report_index_list(const ReportIndex *x, ReportMatch match, void *userdata, const ReportCursor *after,
                      size_t limit, const ReportEntry ***ret, size_t *ret_n, bool *ret_more);

/* What the report directory may hold: 0 means no bound of that kind. */
typedef struct ReportRetention {
        uint64_t max_reports, max_bytes, max_age_usec;
} ReportRetention;

typedef enum ReportRemoval {
        REPORT_REMOVAL_AGE, /* older than max_age_usec */
        REPORT_REMOVAL_COUNT, /* the oldest, while more than max_reports */
        REPORT_REMOVAL_BYTES, /* the oldest, while more than max_bytes */
        _REPORT_REMOVAL_MAX,
        _REPORT_REMOVAL_INVALID = -EINVAL,
} ReportRemoval;
const char *report_removal_to_string(ReportRemoval r);

typedef struct ReportVictim {
        char *report_dir, *session, *cgroup;
        uint64_t bytes;
        ReportRemoval reason;
} ReportVictim;
void report_victims_free(ReportVictim *v, size_t n);

/* The reports to remove so that the index keeps within 'lim' at now_usec
 * (CLOCK_REALTIME): first those too old, then the oldest while too many,
 * then the oldest while too large. 'keep' (NULL: none) names directories
 * never to remove (reports of sessions still running). Takes them out of
 * the index (a listing no longer shows them) and returns them, oldest
 * first, for the caller to remove from the disk. */
int report_index_take_victims(ReportIndex *x, const ReportRetention *lim, uint64_t now_usec,
                              bool (*keep)(const char *report_dir, void *userdata), void *userdata,
                              ReportVictim **ret, size_t *ret_n);
