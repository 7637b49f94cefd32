/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "profile-data.h"

/* Report writers. Each writes one format to a FILE (the caller handles the
 * atomic rename through write_file_atomic_at()). */

/* profile.folded: "comm;frame;frame count\n" per unique stack, root first,
 * kernel frames suffixed "_[k]", lines sorted for stable output. Frames
 * containing ';' or '\n' have them replaced by '_' ... and stacks of the same
 * comm and frames from different processes are merged. */
int report_write_folded(FILE *f, const ProfileData *d);

/* Session metadata for summary.json. */
typedef struct ReportSummaryInfo {
        const char *session_id; /* 32 hex */
        const char *profile;
        const char *target; /* target rule name */
        const char *cgroup; /* relative to the cgroup root */
        const char *namespace, *pod, *container, *container_id, *node; /* may be NULL */
        uint64_t start_usec, end_usec; /* CLOCK_REALTIME */
        uint64_t frequency;
        const char *event; /* the event sampled */
        const char *requested_event; /* what the profile asked for */
        const char *event_fallback_reason; /* non-NULL when event != requested_event */
        const char *attach_mode; /* "cpu" or "cgroup" */
        const char *end_reason; /* "duration", "stopped", "cgroup-removed", "agent-stopped", ... */
        uint64_t *samples_per_cpu; /* n_cpus entries */
        size_t n_cpus;
        uint64_t lost; /* samples seen in the kernel but not recorded */
        uint64_t excluded; /* samples of processes excluded by the patterns */
        uint64_t collisions; /* stack map collisions (-EEXIST) */
        uint64_t cpu_usage_usec; /* the cgroup's CPU time during the session (cpu.stat) */
        uint64_t unsymbolized_frames; /* frames (weighted by samples) left unresolved */
        uint64_t total_frames; /* frames (weighted by samples) */
        const char *report_dir; /* where the files are */
        const char *const *formats; /* NULL-terminated list of files written */
} ReportSummaryInfo;

/* summary.json: {"session", "profile", "target", "cgroup", "start", "end",
 * "durationSec", "frequency", "event", "samples": {"total", "perCpu", "lost",
 * "excluded", "expected"}, "uniqueStacks", "collisions",
 * "unsymbolizedShare", "topFunctions": [{"name","module","self","selfPercent","total","totalPercent"}],
 * "processes": [{"pid","comm","cmdline","samples"}] ...}; expected =
 * frequency × cpu_usage_usec / 1e6, rounded. */
int report_write_summary(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);
