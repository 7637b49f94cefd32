/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The report retry queue (see report-retry.h). The attempts due are
 * written as one batch on the report worker, off the loop. */
#include <assert.h>
#include <inttypes.h>
#include <time.h>

#include "duration.h"
#include "log.h"
#include "report-retry.h"
#include "report-writer.h"
#include "sessions-room.h"

static const uint64_t default_delays_usec[] = { 5 * USEC_PER_SEC, 30 * USEC_PER_SEC, 120 * USEC_PER_SEC };

struct ReportRetry {
        ReportWrite **pending; /* waiting for their next attempt, oldest first */
        size_t n_pending;
        size_t n_writing; /* attempts on the report worker now */
        uint64_t bytes; /* estimated, of the pending reports' data */
        sd_event_source *timer; /* at the earliest attempt due */
        uint64_t delays_usec[REPORT_RETRY_MAX_DELAYS]; /* before attempt 2, 3, ... */
        size_t n_delays;
        uint64_t queued, written, dropped; /* counted in status */
};

/* Sets the delays (the default, or CGPROF_REPORT_RETRY_DELAYS). */
static int report_retry_delays(ReportRetry *q) {
        const char *e = getenv("CGPROF_REPORT_RETRY_DELAYS");

        if (!e || !*e) {
                memcpy(q->delays_usec, default_delays_usec, sizeof(default_delays_usec));
                q->n_delays = ELEMENTSOF(default_delays_usec);
                return 0;
        }
        /* "1s,2s": one attempt after each delay, then the report is dropped. */
        _cleanup_free_ char *copy = strdup(e);
        char *save = NULL;
        if (!copy)
                return -ENOMEM;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                uint64_t usec;
                if (q->n_delays >= REPORT_RETRY_MAX_DELAYS || parse_duration(t, &usec) < 0)
                        return log_error_errno(EINVAL,
                                               "CGPROF_REPORT_RETRY_DELAYS=%s: expected up to %u durations "
                                               "separated by commas, e.g. \"1s,2s\".",
                                               e, REPORT_RETRY_MAX_DELAYS);
                q->delays_usec[q->n_delays++] = usec;
        }
        return 0;
}

int report_retry_new(ReportRetry **ret) {
        _cleanup_(report_retry_freep) ReportRetry *q = calloc(1, sizeof(ReportRetry));
        int r;

        if (!q)
                return -ENOMEM;
        r = report_retry_delays(q);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(q);
        return 0;
}

ReportRetry *report_retry_free(ReportRetry *q) {
        if (!q)
                return NULL;
        ARRAY_CLEAR(q->pending, q->n_pending, report_write_free(*_e));
        sd_event_source_disable_unref(q->timer);
        free(q);
        return NULL;
}

static void retry_arm(SessionsRoom *room);

static void pending_drop(SessionsRoom *room, ReportWrite *w, const char *why) {
        ReportRetry *q = room->report_retry;

        log_error_errno(
                w->error,
                "Dropped the report %s/%s of session %s (cgroup %s) after %u failed attempts%s%s: %m",
                sessions_room_report_dir(room, NULL), w->dir, w->info.session_id, strna(w->info.cgroup),
                w->attempts, why ? ", " : "", strempty(why));
        q->dropped++;
        q->bytes -= w->bytes;
        report_write_free(w);
}

static int pending_append(ReportRetry *q, ReportWrite *w) {
        ReportWrite **l = reallocarray(q->pending, q->n_pending + 1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        q->pending = l;
        q->pending[q->n_pending++] = w;
        return 0;
}

/* The attempts of a batch are done: what failed waits for its next
 * attempt, or is dropped after the last. */
static void on_retry_written(SessionsRoom *room, ReportBatch *b, void *userdata) {
        ReportRetry *q = room->report_retry;
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        q->n_writing -= b->n_writes;
        for (size_t i = 0; i < b->n_writes; i++) {
                ReportWrite *w = TAKE_PTR(b->writes[i]);

                if (w->error >= 0) {
                        log_notice("Wrote the report of session %s (cgroup %s) on attempt %u: report in %s.",
                                   w->info.session_id, strna(w->info.cgroup), w->attempts, w->full);
                        q->written++;
                        q->bytes -= w->bytes;
                        report_write_free(w);
                        continue;
                }
                log_debug_errno(w->error, "Attempt %u to write the report %s failed: %m", w->attempts,
                                strna(w->full));
                if (sessions_room_stopping(room))
                        pending_drop(room, w, "the agent is stopping");
                /* attempts counts the first write, at the session's end. */
                else if (w->attempts > q->n_delays)
                        pending_drop(room, w, NULL);
                else {
                        w->due_usec = now + q->delays_usec[w->attempts - 1];
                        if (pending_append(q, w) < 0)
                                pending_drop(room, w, "out of memory");
                }
        }
        retry_arm(room);
}

/* Hands the reports due (all of them: 'all') to the worker as one batch. */
static void retry_submit(SessionsRoom *room, bool all) {
        ReportRetry *q = room->report_retry;
        _cleanup_(report_batch_freep) ReportBatch *b = NULL;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        size_t k = 0;

        if (report_batch_new(room, on_retry_written, NULL, &b) < 0) {
                log_oom();
                return;
        }
        for (size_t i = 0; i < q->n_pending; i++) {
                ReportWrite *w = q->pending[i];
                if (!all && w->due_usec > now) {
                        q->pending[k++] = w;
                        continue;
                }
                if (report_batch_add(b, w) < 0) {
                        /* report_batch_add() freed it */
                        q->dropped++;
                        q->bytes -= w->bytes;
                        continue;
                }
                w->attempts++;
        }
        q->n_pending = k;
        if (b->n_writes == 0)
                return;
        q->n_writing += b->n_writes;
        report_batch_submit(TAKE_PTR(b));
}

static int on_retry_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        SessionsRoom *room = userdata;

        retry_submit(room, false);
        retry_arm(room);
        return 0;
}

static void retry_arm(SessionsRoom *room) {
        ReportRetry *q = room->report_retry;
        uint64_t due = UINT64_MAX;
        int r;

        for (size_t i = 0; i < q->n_pending; i++)
                due = MIN(due, q->pending[i]->due_usec);
        if (due == UINT64_MAX) {
                if (q->timer)
                        (void) sd_event_source_set_enabled(q->timer, SD_EVENT_OFF);
                return;
        }
        if (!q->timer) {
                r = sd_event_add_time(room->deps.event, &q->timer, CLOCK_MONOTONIC, due, 100 * USEC_PER_MSEC,
                                      on_retry_timer, room);
                if (r >= 0)
                        (void) sd_event_source_set_description(q->timer, "report-retry");
        } else {
                r = sd_event_source_set_time(q->timer, due);
                if (r >= 0)
                        r = sd_event_source_set_enabled(q->timer, SD_EVENT_ONESHOT);
        }
        if (r < 0) {
                /* Without a timer nothing would ever write them: drop now. */
                log_error_errno(r, "Failed to arm the report retry timer: %m");
                while (q->n_pending > 0)
                        pending_drop(room, q->pending[--q->n_pending], "no retry timer");
        }
}

int manager_report_retry_add(SessionsRoom *room, ReportWrite *w) {
        ReportRetry *q = room->report_retry;
        const char *why = NULL;

        if (sessions_room_stopping(room))
                why = "the agent is stopping";
        else if (q->n_delays == 0)
                why = "retries are off";
        else if (q->n_pending + q->n_writing >= REPORT_RETRY_MAX_REPORTS)
                why = "too many reports waiting";
        else if (q->bytes + w->bytes > REPORT_RETRY_MAX_BYTES)
                why = "the reports waiting hold too much data";
        if (why) {
                log_error_errno(w->error, "Dropped the report %s/%s of session %s (cgroup %s), %s: %m",
                                sessions_room_report_dir(room, NULL), w->dir, w->info.session_id,
                                strna(w->info.cgroup), why);
                report_write_free(w);
                q->dropped++;
                return 0;
        }
        if (pending_append(q, w) < 0) {
                report_write_free(w);
                q->dropped++;
                return log_oom();
        }
        w->attempts = 1;
        w->due_usec = now_usec(CLOCK_MONOTONIC) + q->delays_usec[0];
        q->bytes += w->bytes;
        q->queued++;
        log_warning("The report %s/%s of session %s will be written again in %.1f s (%zu reports waiting).",
                    sessions_room_report_dir(room, NULL), w->dir, w->info.session_id,
                    (double) q->delays_usec[0] / 1e6, q->n_pending + q->n_writing);
        retry_arm(room);
        return 1;
}

void manager_report_retry_flush(SessionsRoom *room) {
        ReportRetry *q = room->report_retry;

        if (q->n_pending > 0)
                log_info("Stopping: one last attempt for %zu reports waiting to be written.", q->n_pending);
        retry_submit(room, true);
        retry_arm(room);
}

void manager_report_retry_status(SessionsRoom *room, cJSON *j) {
        ReportRetry *q = room->report_retry;
        cJSON *o = cJSON_AddObjectToObject(j, "reportRetries");

        if (!o)
                return;
        cJSON_AddNumberToObject(o, "pending", (double) (q->n_pending + q->n_writing));
        cJSON_AddNumberToObject(o, "pendingBytes", (double) q->bytes);
        cJSON_AddNumberToObject(o, "queued", (double) q->queued);
        cJSON_AddNumberToObject(o, "written", (double) q->written);
        cJSON_AddNumberToObject(o, "dropped", (double) q->dropped);
}
