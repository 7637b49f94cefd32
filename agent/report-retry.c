/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The report retry queue (see report-retry.h). Writing happens on the
 * event loop, as for every report today: one attempt of one report costs
 * what writing it cost when its session ended. */
#include <assert.h>
#include <inttypes.h>
#include <time.h>

#include "duration.h"
#include "log.h"
#include "manager.h"
#include "report-retry.h"
#include "session.h"

static const uint64_t default_delays_usec[] = { 5 * USEC_PER_SEC, 30 * USEC_PER_SEC, 120 * USEC_PER_SEC };

/* A report whose write failed, with a copy of its metadata. */
struct PendingReport {
        char *dir; /* relative to reportDir */
        unsigned formats;
        ProfileData *data;
        ReportSummaryInfo info; /* its strings point into 'strings' */
        char *strings[24];
        size_t n_strings;
        uint64_t bytes;
        unsigned attempts; /* made so far */
        uint64_t due_usec; /* CLOCK_MONOTONIC */
        int error; /* of the last attempt */
};

int report_retry_init(ReportRetry *q) {
        const char *e = getenv("CGPROF_REPORT_RETRY_DELAYS");

        *q = (ReportRetry){};
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

static PendingReport *pending_free(PendingReport *p) {
        if (!p)
                return NULL;
        free(p->dir);
        profile_data_free(p->data);
        for (size_t i = 0; i < p->n_strings; i++)
                free(p->strings[i]);
        free(p->info.samples_per_cpu);
        free(p);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(PendingReport *, pending_free);

void report_retry_done(ReportRetry *q) {
        for (size_t i = 0; i < q->n_pending; i++)
                pending_free(q->pending[i]);
        free(q->pending);
        q->pending = NULL;
        q->n_pending = 0;
        q->bytes = 0;
        q->timer = sd_event_source_disable_unref(q->timer);
}

/* Points *field at a copy of itself owned by p. */
static int own_string(PendingReport *p, const char **field) {
        char *c;

        if (!*field)
                return 0;
        assert(p->n_strings < ELEMENTSOF(p->strings));
        c = strdup(*field);
        if (!c)
                return -ENOMEM;
        p->strings[p->n_strings++] = c;
        *field = c;
        return 0;
}

/* What the data holds, roughly: the stacks' frame arrays, and a share for
 * the frames' strings, the processes and the mappings. */
static uint64_t data_bytes(const ProfileData *d) {
        uint64_t b = sizeof(*d);

        for (size_t i = 0; i < d->n_stacks; i++)
                b += sizeof(ProfileStack) + (uint64_t) d->stacks[i].n_frames * 2 * sizeof(uint32_t);
        b += d->n_frames * (sizeof(Frame) + 64);
        b += d->n_processes * (sizeof(ProfileProcess) + 128);
        b += d->n_mappings * (sizeof(ProfileMapping) + 128);
        b += d->n_locations * sizeof(ProfileLocation);
        return b;
}

static int pending_new(const char *dir, unsigned formats, ProfileData *data, const ReportSummaryInfo *info,
                       PendingReport **ret) {
        _cleanup_(pending_freep) PendingReport *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->dir = strdup(dir);
        if (!p->dir)
                return -ENOMEM;
        p->formats = formats;
        p->info = *info;
        p->info.samples_per_cpu = NULL;
        p->info.report_dir = NULL;
        p->info.formats = NULL;
        if (info->n_cpus > 0) {
                p->info.samples_per_cpu = calloc(info->n_cpus, sizeof(uint64_t));
                if (!p->info.samples_per_cpu)
                        return -ENOMEM;
                memcpy(p->info.samples_per_cpu, info->samples_per_cpu, info->n_cpus * sizeof(uint64_t));
        }
        const char **fields[] = {
                &p->info.session_id,
                &p->info.profile,
                &p->info.target,
                &p->info.profile_config,
                &p->info.cgroup,
                &p->info.namespace,
                &p->info.pod,
                &p->info.container,
                &p->info.container_id,
                &p->info.node,
                &p->info.event,
                &p->info.requested_event,
                &p->info.event_fallback_reason,
                &p->info.attach_mode,
                &p->info.end_reason,
                &p->info.cpu_usage_source,
                &p->info.unwind.mode,
        };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (own_string(p, fields[i]) < 0)
                        return -ENOMEM;
        p->data = data; /* last: on failure the caller still owns it */
        p->bytes = data_bytes(data);
        *ret = TAKE_PTR(p);
        return 0;
}

static void retry_arm(Manager *m);

static void pending_drop(Manager *m, size_t i, const char *why) {
        ReportRetry *q = &m->report_retry;
        PendingReport *p = q->pending[i];

        log_error_errno(
                p->error,
                "Dropped the report %s/%s of session %s (cgroup %s) after %u failed attempts%s%s: %m",
                strempty(m->report_dir), p->dir, p->info.session_id, strna(p->info.cgroup), p->attempts,
                why ? ", " : "", strempty(why));
        q->dropped++;
        q->bytes -= p->bytes;
        pending_free(p);
        memmove(q->pending + i, q->pending + i + 1, (q->n_pending - i - 1) * sizeof(*q->pending));
        q->n_pending--;
}

/* One attempt; true when the report is written (and removed from the queue). */
static bool pending_attempt(Manager *m, size_t i) {
        ReportRetry *q = &m->report_retry;
        PendingReport *p = q->pending[i];
        _cleanup_free_ char *full = NULL;
        int r;

        p->attempts++;
        r = manager_write_report_dir(m, p->dir, p->formats, p->data, &p->info, &full);
        if (r < 0) {
                p->error = r;
                log_debug_errno(r, "Attempt %u to write the report %s failed: %m", p->attempts, strna(full));
                return false;
        }
        log_notice("Wrote the report of session %s (cgroup %s) on attempt %u: report in %s.",
                   p->info.session_id, strna(p->info.cgroup), p->attempts, full);
        q->written++;
        q->bytes -= p->bytes;
        pending_free(p);
        memmove(q->pending + i, q->pending + i + 1, (q->n_pending - i - 1) * sizeof(*q->pending));
        q->n_pending--;
        return true;
}

static int on_retry_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        ReportRetry *q = &m->report_retry;
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        for (size_t i = 0; i < q->n_pending;) {
                PendingReport *p = q->pending[i];
                if (p->due_usec > now) {
                        i++;
                        continue;
                }
                if (pending_attempt(m, i))
                        continue;
                /* attempts counts the first write, at the session's end. */
                if (p->attempts > q->n_delays) {
                        pending_drop(m, i, NULL);
                        continue;
                }
                p->due_usec = now + q->delays_usec[p->attempts - 1];
                i++;
        }
        retry_arm(m);
        return 0;
}

static void retry_arm(Manager *m) {
        ReportRetry *q = &m->report_retry;
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
                r = sd_event_add_time(m->event, &q->timer, CLOCK_MONOTONIC, due, 100 * USEC_PER_MSEC,
                                      on_retry_timer, m);
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
                        pending_drop(m, q->n_pending - 1, "no retry timer");
        }
}

int manager_report_retry_add(Manager *m, const char *dir, unsigned formats, ProfileData *data,
                             const ReportSummaryInfo *info, int error) {
        ReportRetry *q = &m->report_retry;
        _cleanup_(pending_freep) PendingReport *p = NULL;
        const char *why = NULL;
        int r;

        if (m->stopping)
                why = "the agent is stopping";
        else if (q->n_delays == 0)
                why = "retries are off";
        else if (q->n_pending >= REPORT_RETRY_MAX_REPORTS)
                why = "too many reports waiting";
        else if (q->bytes + data_bytes(data) > REPORT_RETRY_MAX_BYTES)
                why = "the reports waiting hold too much data";
        if (why) {
                log_error_errno(error, "Dropped the report %s/%s of session %s (cgroup %s), %s: %m",
                                strempty(m->report_dir), dir, info->session_id, strna(info->cgroup), why);
                profile_data_free(data);
                q->dropped++;
                return 0;
        }

        r = pending_new(dir, formats, data, info, &p);
        if (r < 0) {
                profile_data_free(data);
                q->dropped++;
                return log_oom();
        }
        PendingReport **l = reallocarray(q->pending, q->n_pending + 1, sizeof(*l));
        if (!l) {
                q->dropped++;
                return log_oom(); /* p (and its data) freed on return */
        }
        q->pending = l;
        p->attempts = 1;
        p->error = error;
        p->due_usec = now_usec(CLOCK_MONOTONIC) + q->delays_usec[0];
        q->bytes += p->bytes;
        q->pending[q->n_pending++] = TAKE_PTR(p);
        q->queued++;
        log_warning("The report %s/%s of session %s will be written again in %.1f s (%zu reports waiting).",
                    strempty(m->report_dir), dir, info->session_id, (double) q->delays_usec[0] / 1e6,
                    q->n_pending);
        retry_arm(m);
        return 1;
}

void manager_report_retry_flush(Manager *m) {
        ReportRetry *q = &m->report_retry;

        if (q->n_pending > 0)
                log_info("Stopping: one last attempt for %zu reports waiting to be written.", q->n_pending);
        while (q->n_pending > 0)
                if (!pending_attempt(m, 0))
                        pending_drop(m, 0, "the agent is stopping");
        retry_arm(m);
}

void manager_report_retry_status(Manager *m, cJSON *j) {
        ReportRetry *q = &m->report_retry;
        cJSON *o = cJSON_AddObjectToObject(j, "reportRetries");

        if (!o)
                return;
        cJSON_AddNumberToObject(o, "pending", (double) q->n_pending);
        cJSON_AddNumberToObject(o, "pendingBytes", (double) q->bytes);
        cJSON_AddNumberToObject(o, "queued", (double) q->queued);
        cJSON_AddNumberToObject(o, "written", (double) q->written);
        cJSON_AddNumberToObject(o, "dropped", (double) q->dropped);
}
