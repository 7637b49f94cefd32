/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdarg.h>
#include <syslog.h>

#include "macro.h"

/* Logging for the daemon and the CLI: to stderr, with a syslog priority
 * prefix ("<3>") when stderr is connected to the journal (JOURNAL_STREAM),
 * so journald keeps the levels. Library code in common/ logs at debug level
 * at most; errors are returned as negative errno and logged once by the
 * caller, with context. */

void log_set_max_level(int level);
int log_get_max_level(void);
/* Parses "debug", "info", "notice", "warning", "err"/"error", "crit", or a
 * number 0..7. Returns the level or -EINVAL. */
int log_level_from_string(const char *s);

void log_open(const char *ident);

/* Returns -abs(error) (or 0 if error is 0), so "return log_error_errno(r, ...)". */
int log_internal(int level, int error, const char *file, int line, const char *func, const char *fmt, ...)
        _printf_(6, 7);

#define log_full_errno(level, error, ...) \
        log_internal((level), (error), __FILE__, __LINE__, __func__, __VA_ARGS__)
#define log_full(level, ...) (void) log_full_errno((level), 0, __VA_ARGS__)

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, (error), __VA_ARGS__)
#define log_info_errno(error, ...) log_full_errno(LOG_INFO, (error), __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, (error), __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, (error), __VA_ARGS__)

/* Out-of-memory: logs and returns -ENOMEM. */
#define log_oom() log_full_errno(LOG_ERR, ENOMEM, "Out of memory.")

/* For errors that may repeat in an event handler: the first one in every
 * interval at 'level', the others at debug, so a failing source cannot
 * flood the log. 'now' is the caller's clock (e.g. sd_event_now()). */
typedef struct LogRateLimit {
        uint64_t interval_usec;
        uint64_t last_usec;
} LogRateLimit;

static inline int log_ratelimit_level(LogRateLimit *rl, uint64_t now, int level) {
        if (rl->last_usec != 0 && now < rl->last_usec + rl->interval_usec)
                return LOG_DEBUG;
        rl->last_usec = now ?: 1;
        return level;
}
