/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "counters.h"
#include "sampling.h"
#include "base.h"

/* The sessions room's own state (SessionsRoom, opaque above the room;
 * sessions-room.h inside it): so far its reports side, the report worker,
 * the queue of reports being written, the report index and retention
 * (manager-reports.c), the reports waiting to be written again
 * (report-retry.c), and the checkpoint registry (checkpoint.c). What it needs from above comes in SessionsRoomDeps,
 * which the Manager fills in (manager-rooms.c). */

typedef struct SessionsRoom SessionsRoom;
typedef struct Session Session;

typedef struct SessionsRoomDeps {
        sd_event *event;
        const char *state_dir; /* the checkpoint registry is below it (borrowed: outlives the room) */
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
        /* A running or armed session by ID, or NULL. */
        Session *(*session_find)(void *userdata, const char *id);
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

/* The report worker (NULL before the start): other work that reads
 * reportDir (ListReports, a pull's listing) runs on it too. */
Worker *sessions_room_worker(SessionsRoom *r);
/* How long writing a report directory took (status; /metrics sets up
 * its histogram). */
Timing *sessions_room_report_timing(SessionsRoom *r);
/* The report directories queued or being written on the worker now, and
 * how often a batch found the queue full and was written on the loop. */
void sessions_room_report_queue(SessionsRoom *r, size_t *ret_writes, uint64_t *ret_overflows);

/* The sampler the sessions read their counts from, once it is made. */
void sessions_room_set_sampler(SessionsRoom *r, Sampler *sampler);

/* Checkpoints written and failed, how long the last and the longest kept
 * the event loop, and the reports of a crashed run found at start
 * (interrupted). */
typedef struct SessionsCheckpointStats {
        uint64_t written, failed, interrupted;
        uint64_t usec_last, usec_max;
} SessionsCheckpointStats;
void sessions_room_checkpoint_stats(SessionsRoom *r, SessionsCheckpointStats *ret);
