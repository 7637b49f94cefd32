/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int log_max_level = LOG_INFO;
static const char *log_ident = NULL;
static int log_prefix_levels = -1;

void log_set_max_level(int level) {
        log_max_level = level;
}

int log_get_max_level(void) {
        return log_max_level;
}

int log_level_from_string(const char *s) {
        static const char *const names[] = {
                [LOG_EMERG] = "emerg", [LOG_ALERT] = "alert",     [LOG_CRIT] = "crit",
                [LOG_ERR] = "err",     [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
                [LOG_INFO] = "info",   [LOG_DEBUG] = "debug",
        };
        if (!s)
                return -EINVAL;
        if (streq(s, "error"))
                return LOG_ERR;
        if (streq(s, "warn"))
                return LOG_WARNING;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (streq(s, names[i]))
                        return (int) i;
        if (s[0] >= '0' && s[0] <= '7' && s[1] == 0)
                return s[0] - '0';
        return -EINVAL;
}

void log_open(const char *ident) {
        log_ident = ident;
}

int log_internal(int level, int error, const char *file, int line, const char *func, const char *fmt, ...) {
        int saved = errno;
        va_list ap;

        if (error < 0)
                error = -error;

        if (level <= log_max_level) {
                if (log_prefix_levels < 0)
                        log_prefix_levels = !!getenv("JOURNAL_STREAM");

                char buf[4096];
                va_start(ap, fmt);
                /* Support %m for the error passed in. */
                errno = error;
                vsnprintf(buf, sizeof(buf), fmt, ap);
                va_end(ap);

                if (log_prefix_levels)
                        fprintf(stderr, "<%d>%s\n", level, buf);
                else if (log_max_level >= LOG_DEBUG)
                        fprintf(stderr, "%s%s(%s:%d %s) %s\n", strempty(log_ident), log_ident ? ": " : "",
                                file, line, func, buf);
                else
                        fprintf(stderr, "%s%s%s\n", strempty(log_ident), log_ident ? ": " : "", buf);
        }

        errno = saved;
        return -error;
}
