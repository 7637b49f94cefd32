/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "counters.h"
#include "sampling.h"
#include "session-events.h"
#include "base.h"

/* The sessions room's own state (SessionsRoom, opaque above the room;
 * sessions-room.h inside it): the sessions' counts and the queue of
 * sessions to end (session-end.c), the per-drain state of session.c, the
 * report worker and the queue of reports being written, the report index
 * and retention (manager-reports.c), the reports waiting to be written
 * again (report-retry.c), and the checkpoint registry (checkpoint.c). The
 * indexes of the sessions (the list, the slots, by ID, each cgroup's
 * session) are the Manager's. What the room needs from above, those
 * indexes included, comes in SessionsRoomDeps, which the Manager fills in
 * (manager-rooms.c). */

typedef struct SessionsRoom SessionsRoom;
typedef struct Session Session;

typedef struct SessionsRoomDeps {
        sd_event *event;
        /* Borrowed: they outlive the room. */
        const char *state_dir; /* the checkpoint registry is below it */
        const char *node_name; /* {NODE} in report paths, the summary's node */
        void *userdata; /* for the callbacks */
        /* reportDir now: its path ("" when none) and, in *ret_fd, its fd
         * (< 0 when it could not be opened). */
        const char *(*report_dir)(void *userdata, int *ret_fd);
        /* The config now (reportRetention), NULL before the first load. */
        const Config *(*config)(void *userdata);
        /* The agent is stopping: reports that fail are not retried. */
        bool (*stopping)(void *userdata);
        /* A batch of reports was written, or the index loaded: once
         * stopping, the agent exits when the last one is. */
        void (*reports_written)(void *userdata);
        /* The cgroup v2 hierarchy's root (known once the agent starts). */
        const char *(*cgroup_root)(void *userdata);
        /* A running or armed session by ID, or NULL. */
        Session *(*session_find)(void *userdata, const char *id);
        /* The session has its sampler slot (taken), or no more. */
        void (*session_slot)(void *userdata, Session *s, bool taken);
        /* The session is out of the indexes (it ends); reason: why
         * ("duration" and "stopped" mark its cgroup done). */
        void (*session_removed)(void *userdata, Session *s, const char *reason);
        /* Points every known cgroup at or below path to the deepest
         * running session. */
        void (*assign_cgroups_below)(void *userdata, const char *path);
        /* Reads the process's mappings again, off the loop; then
         * session_refresh_process(). */
        void (*refresh_process_soon)(void *userdata, uint32_t session_slot, uint32_t pid,
                                     uint64_t start_time, uint32_t exec_id);
        /* Drains the sampler maps into the sessions (full: twice). */
        int (*drain)(void *userdata, bool full);
        /* What the room announces of a session (bus, pull, /metrics). */
        const SessionEvents *events;
} SessionsRoomDeps;

int sessions_room_new(const SessionsRoomDeps *deps, SessionsRoom **ret);
/* After sessions_room_stop_worker(). */
SessionsRoom *sessions_room_free(SessionsRoom *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(SessionsRoom *, sessions_room_free);

/* Starts the report worker, the thread reports are written on (then
 * manager_reports_start(): the walk of reportDir is its first job). */
int sessions_room_start_worker(SessionsRoom *r);
/* Writes what is queued on the report worker now, on this thread (their
 * callbacks run). */
void sessions_room_flush(SessionsRoom *r);
/* Stops the report worker, and frees the report index. */
void sessions_room_stop_worker(SessionsRoom *r);
/* Forgets the distributed jobs of the sessions (session-jobs.c): sessions
 * freed without their end (the agent is failing) write no job report. */
void sessions_room_jobs_drop(SessionsRoom *r);

/* The report worker (NULL before the start): other work that reads
 * reportDir (ListReports, a pull's listing) runs on it too. */
Worker *sessions_room_worker(SessionsRoom *r);
/* How long writing a report directory took (status; /metrics sets up
 * its histogram). */
Timing *sessions_room_report_timing(SessionsRoom *r);
/* The report directories queued or being written on the worker now, and
 * how often a batch found the queue full and was written on the loop. */
void sessions_room_report_queue(SessionsRoom *r, size_t *ret_writes, uint64_t *ret_overflows);

/* The sampling room's objects the sessions use, once they are made (the
 * Manager owns them): the sampler their counts come from, the unwinder and
 * the Python frame walk their processes are registered with, the
 * symbolizer and the process reader that name their frames and programs. */
typedef struct SessionsSampling {
        Sampler *sampler;
        Unwinder *unwinder;
        Python *python;
        Symbolizer *symbolizer;
        ProcessReader *process_reader;
} SessionsSampling;
void sessions_room_set_sampling(SessionsRoom *r, const SessionsSampling *sampling);

/* A drain begins (each pass of manager_drain()): what a process was
 * checked for, and the user frames interned, are per drain. */
void sessions_room_drain_begin(SessionsRoom *r);

/* Checkpoints written and failed, how long the last and the longest kept
 * the event loop, and the reports of a crashed run found at start
 * (interrupted). */
typedef struct SessionsCheckpointStats {
        uint64_t written, failed, interrupted;
        uint64_t usec_last, usec_max;
} SessionsCheckpointStats;
void sessions_room_checkpoint_stats(SessionsRoom *r, SessionsCheckpointStats *ret);

/* Every session that started sampling ends counted once: ended (a report
 * written), failed (its report could not be written) or discarded (a
 * provisional one that was a pod's sandbox). Failed also counts sessions
 * that could not be created or started (sessions_room_count_failed()), and
 * those whose report waits for a retry (reportRetries says how it went). */
typedef struct SessionsCounts {
        uint64_t started, ended, failed, discarded;
} SessionsCounts;
void sessions_room_counts(SessionsRoom *r, SessionsCounts *ret);
void sessions_room_count_failed(SessionsRoom *r);
