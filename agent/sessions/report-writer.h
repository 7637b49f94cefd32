/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "profile-data.h"
#include "report.h"
#include "base.h"

/* Writing reports off the event loop. A ReportWrite is one report
 * directory with everything writing it needs, owned: its data and a copy
 * of the summary's metadata, so the session it came from may change or go
 * while it is written. A ReportBatch is the writes of one occasion (a
 * session's end, a checkpoint, the retries due), run as one job on the
 * sessions room's report worker; its callback gets it back on the loop with each
 * write's result.
 *
 * The worker's queue is bounded (REPORT_QUEUE_MAX directories): beyond it
 * a batch is written on the loop at once, which stalls the loop but loses
 * nothing. The memory a queued write holds is its session's data, which
 * the session held anyway. */

#define REPORT_QUEUE_MAX 4096U

typedef struct SessionsRoom SessionsRoom;

typedef struct ReportWrite {
        char *dir; /* relative to reportDir */
        unsigned formats;
        ProfileData *data;
        ReportSummaryInfo info; /* its strings point into 'strings' */
        char *strings[24];
        size_t n_strings;
        uint64_t bytes; /* of data, estimated */
        unsigned attempts; /* made so far (the retry queue's) */
        uint64_t due_usec; /* the next attempt's, CLOCK_MONOTONIC (the retry queue's) */

        /* The last attempt's result. */
        int error;
        char *full; /* the directory's full path (NULL on OOM) */
        uint64_t usec;
        uint64_t disk_bytes; /* its report files' sizes, once written */
} ReportWrite;

/* Takes data (also on failure); copies what info points to. */
int report_write_new(const char *dir, unsigned formats, ProfileData *data, const ReportSummaryInfo *info,
                     ReportWrite **ret);
ReportWrite *report_write_free(ReportWrite *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(ReportWrite *, report_write_free);

/* Writes the directory below the report directory (report_dir_fd, path
 * report_dir): on failure nothing of it is left (its files, then the
 * directories the write made and left empty). Sets error, full and usec.
 * Safe on any thread. */
void report_write_run(ReportWrite *w, int report_dir_fd, const char *report_dir);

/* The sizes of the report files (every format's, summary.json's) in the
 * directory dfd. */
uint64_t report_dir_bytes(int dfd);
/* Removes the report directory 'rel' below report_dir_fd (one component
 * at a time, following no symlink): its report files, then itself and
 * each parent the output template made that is empty now. Anything else
 * in it stays, and so does the directory (-ENOTEMPTY). Safe on any thread. */
int report_dir_remove(int report_dir_fd, const char *rel);

typedef struct ReportBatch ReportBatch;
typedef void (*ReportBatchDoneFunc)(SessionsRoom *r, ReportBatch *b, void *userdata);

struct ReportBatch {
        WorkerJob job;
        SessionsRoom *room;
        int report_dir_fd; /* a copy: a reload may close the one it was */
        char *report_dir;
        ReportWrite **writes;
        size_t n_writes;
        ReportBatchDoneFunc done;
        void *userdata;
};

int report_batch_new(SessionsRoom *r, ReportBatchDoneFunc done, void *userdata, ReportBatch **ret);
/* Takes w (also on failure). */
int report_batch_add(ReportBatch *b, ReportWrite *w);
/* Takes the batch: its callback gets it on the loop once written, and may
 * take writes out of it (setting them NULL); it is freed afterwards. */
void report_batch_submit(ReportBatch *b);
ReportBatch *report_batch_free(ReportBatch *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(ReportBatch *, report_batch_free);
