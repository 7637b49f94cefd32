/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "sampling.h"

typedef struct Session Session;

/* A session's end is announced (session_end_notify()): its report
 * directories (space-separated for a per-process template; NULL when none
 * was written) or the error of writing them. */
typedef void (*SessionEndedFunc)(void *userdata, const char *session_id, const char *report_dirs, int error);

/* What the sessions room announces to the rooms above it, which it does
 * not call: the bus signals, the pull waiters and /metrics hear of a
 * session through these. The Manager fills the table (manager-rooms.c) and
 * gives it in SessionsRoomDeps (with the userdata each entry gets); each
 * entry may be NULL. */
typedef struct SessionEvents {
        /* A session started sampling (session_announce()). */
        void (*started)(void *userdata, Session *s);
        /* A session stopped sampling, with its final counts (NULL: it was
         * discarded, and keeps what was counted of it while it ran). */
        void (*stopped)(void *userdata, Session *s, const SamplerSessionStats *st);
        /* Its report was written (report_dirs, error 0) or could not be
         * (report_dirs NULL, error < 0: counted in sessionsFailed already);
         * reason: why it ended. */
        void (*ended)(void *userdata, Session *s, const char *reason, const char *report_dirs, int error,
                      uint64_t samples);
} SessionEvents;

static inline void session_events_started(const SessionEvents *ev, void *userdata, Session *s) {
        if (ev && ev->started)
                ev->started(userdata, s);
}

static inline void session_events_stopped(const SessionEvents *ev, void *userdata, Session *s,
                                          const SamplerSessionStats *st) {
        if (ev && ev->stopped)
                ev->stopped(userdata, s, st);
}

static inline void session_events_ended(const SessionEvents *ev, void *userdata, Session *s,
                                        const char *reason, const char *report_dirs, int error,
                                        uint64_t samples) {
        if (ev && ev->ended)
                ev->ended(userdata, s, reason, report_dirs, error, samples);
}
