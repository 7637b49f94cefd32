/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What checkpoint recovery (checkpoint.c) reads, without any I/O: a
 * registry entry, and a checkpoint's summary.json to mark "interrupted".
 * Both take the file's bytes (text, size) as read_regular_file_max() leaves
 * them, with a NUL at text[size] (cJSON 1.7.15 may read the byte after a
 * length-bounded input), so that tests/fuzz/fuzz-checkpoint.c runs the
 * agent's own code on arbitrary input. */

#include <stddef.h>
#include <stdint.h>

/* A registry entry, STATE_DIR/checkpoints/SESSION_ID:
 * {"session", "bootId", "cgroup", "reportDir", "dirs": [...]}. */
typedef struct CheckpointEntry {
        char *report_dir; /* the reportDir the dirs are below, as written */
        char *boot_id; /* "" when absent or not a string */
        char **dirs; /* strv, never NULL: the report directories, relative to report_dir */
} CheckpointEntry;

void checkpoint_entry_done(CheckpointEntry *e);

/* Parses the entry in text (size bytes). "reportDir" must be a string and
 * "dirs" an array; of its elements only the strings are kept. Returns 0,
 * -EBADMSG (not such an object), or -ENOMEM. */
int checkpoint_entry_parse(const char *text, size_t size, CheckpointEntry *ret);

/* What marking a summary.json as interrupted gives. */
typedef struct CheckpointMarked {
        char *text; /* the summary.json to write instead, '\n'-terminated */
        char *cgroup, *end; /* its "cgroup" and "end" (the last checkpoint), NULL when absent */
        uint64_t samples; /* its "samples": {"total"}, 0 when absent or not a count */
} CheckpointMarked;

void checkpoint_marked_done(CheckpointMarked *m);

/* The summary.json in text (size bytes) of a checkpointed report: when it
 * is a JSON object with "partial": true and no "interrupted" yet, fills
 * *ret with the same object plus "interrupted": true and
 * "interruptedReason": reason, and returns 1. Returns 0 when there is
 * nothing to mark (not a JSON object, a final report, already marked),
 * -ENOMEM. */
int checkpoint_summary_mark_interrupted(const char *text, size_t size, const char *reason,
                                        CheckpointMarked *ret);
