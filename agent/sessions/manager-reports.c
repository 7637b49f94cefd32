/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The reports of reportDir: the index, its load, and retention (see
 * manager-reports.h). */
#include <fcntl.h>
#include <inttypes.h>

#include "base.h"
#include "log.h"
#include "manager-reports.h"
#include "report-list.h"
#include "report-writer.h"
#include "sessions-room.h"

struct ManagerReports {
        ReportIndex *index;
        char *dir; /* the reportDir the index is of */
        bool ready; /* loaded */
        uint64_t generation; /* a load's: a load for an earlier reportDir is dropped */
        sd_event_source *timer; /* retention for maxAge */
        uint64_t removed[_REPORT_REMOVAL_MAX], removed_bytes, remove_failed;
};

static void retention_run(SessionsRoom *room);

/* ---- loading: a walk of reportDir on the report worker ---- */

typedef struct LoadJob {
        WorkerJob job;
        SessionsRoom *room;
        uint64_t generation;
        int dir_fd;
        char *dir_path;
        ControlReport *list;
        size_t n;
        char *message;
        int error;
        uint64_t usec;
} LoadJob;

static void load_job_free(LoadJob *j) {
        control_reports_free(j->list, j->n);
        safe_close(j->dir_fd);
        free(j->dir_path);
        free(j->message);
        free(j);
}

static void load_run(WorkerJob *job) {
        LoadJob *j = (LoadJob *) job;
        uint64_t t0 = now_usec(CLOCK_MONOTONIC);

        j->error = control_list_reports(j->dir_fd, j->dir_path, "", 0, &j->list, &j->n, &j->message);
        j->usec = now_usec(CLOCK_MONOTONIC) - t0;
}

static void load_apply(SessionsRoom *room, LoadJob *j, bool ran);

static void load_done(WorkerJob *job, bool ran) {
        LoadJob *j = (LoadJob *) job;
        SessionsRoom *room = j->room;

        load_apply(room, j, ran);
        /* A stopping agent exits once the worker is idle: this may have been its last job. */
        sessions_room_reports_written(room);
}

static void load_apply(SessionsRoom *room, LoadJob *j, bool ran) {
        ManagerReports *x = room->reports;
        int r = ran ? j->error : -ECANCELED;

        if (!x || j->generation != x->generation) {
                load_job_free(j);
                return;
        }
        if (r < 0) {
                /* Listings keep walking the directory, as before. */
                log_warning_errno(r,
                                  "Failed to index the reports in %s, listings will read the directory: %s",
                                  j->dir_path, j->message ?: strerror(-r));
                load_job_free(j);
                return;
        }
        /* The worker runs jobs in order: every write for this reportDir
         * comes back after the walk, and replaces what it read. */
        for (size_t i = 0; i < j->n; i++) {
                r = report_index_put(x->index, &j->list[i]);
                if (r < 0) {
                        log_oom();
                        load_job_free(j);
                        return;
                }
        }
        x->ready = true;
        log_info("Indexed %zu reports (%.1f MiB) in %s in %.1f ms.", report_index_count(x->index),
                 (double) report_index_bytes(x->index) / (1024.0 * 1024.0), j->dir_path,
                 (double) j->usec / 1000.0);
        load_job_free(j);
        retention_run(room);
}

static int load_start(SessionsRoom *room) {
        ManagerReports *x = room->reports;
        int dir_fd;
        const char *dir = sessions_room_report_dir(room, &dir_fd);
        LoadJob *j;

        x->generation++;
        x->ready = false;
        x->index = report_index_free(x->index);
        free(x->dir);
        x->dir = strdup(dir);
        if (!x->dir)
                return -ENOMEM;
        if (report_index_new(&x->index) < 0)
                return -ENOMEM;
        if (dir_fd < 0)
                return 0; /* nothing to index: listings say they cannot open it */

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->room = room;
        j->generation = x->generation;
        j->dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        j->dir_path = strdup(x->dir);
        if (j->dir_fd < 0 || !j->dir_path) {
                int r = j->dir_fd < 0 ? negative_errno() : -ENOMEM;
                load_job_free(j);
                return r;
        }
        worker_submit(room->report_worker, &j->job, load_run, load_done);
        return 0;
}

/* ---- retention: the oldest out of the index now, off the disk on the worker ---- */

typedef struct RemoveJob {
        WorkerJob job;
        SessionsRoom *room;
        int dir_fd;
        char *dir_path;
        ReportVictim *victims;
        int *errors;
        size_t n;
} RemoveJob;

static void remove_job_free(RemoveJob *j) {
        report_victims_free(j->victims, j->n);
        free(j->errors);
        safe_close(j->dir_fd);
        free(j->dir_path);
        free(j);
}

static void remove_run(WorkerJob *job) {
        RemoveJob *j = (RemoveJob *) job;
        size_t l = strlen(j->dir_path);

        for (size_t i = 0; i < j->n; i++) {
                const char *d = j->victims[i].report_dir;

                /* Only below reportDir, by a relative path walked without
                 * following a symlink (report_dir_remove()). */
                if (strncmp(d, j->dir_path, l) != 0 || d[l] != '/' || !d[l + 1]) {
                        j->errors[i] = -EPERM;
                        continue;
                }
                j->errors[i] = report_dir_remove(j->dir_fd, d + l + 1);
        }
}

static void remove_done(WorkerJob *job, bool ran) {
        RemoveJob *j = (RemoveJob *) job;
        SessionsRoom *room = j->room;
        ManagerReports *x = room->reports;

        if (!ran)
                remove_run(job);
        for (size_t i = 0; i < j->n; i++) {
                const ReportVictim *v = &j->victims[i];
                const char *reason = report_removal_to_string(v->reason);
                int r = j->errors[i];

                if (r < 0 && r != -ENOENT) {
                        if (x)
                                x->remove_failed++;
                        log_warning_errno(r, "Failed to remove report %s (retention, %s): %m", v->report_dir,
                                          reason);
                        continue;
                }
                if (x) {
                        x->removed[v->reason]++;
                        x->removed_bytes += v->bytes;
                }
                journal_report_removed(
                        &(const JournalReportFields){
                                .session = v->session,
                                .report = v->report_dir,
                                .reason = reason,
                                .cgroup = v->cgroup,
                        },
                        "Removed report %s of session %s (%" PRIu64 " bytes): reportRetention, %s.",
                        v->report_dir, v->session, v->bytes,
                        v->reason == REPORT_REMOVAL_AGE     ? "older than maxAge"
                        : v->reason == REPORT_REMOVAL_COUNT ? "more reports than maxReports"
                                                            : "more bytes than maxBytes");
        }
        remove_job_free(j);
        sessions_room_reports_written(room);
}

static void retention_run(SessionsRoom *room) {
        ManagerReports *x = room->reports;
        const Config *c = room->deps.config ? room->deps.config(room->deps.userdata) : NULL;
        ReportVictim *v = NULL;
        RemoveJob *j;
        size_t n = 0;
        int dir_fd, r;

        (void) sessions_room_report_dir(room, &dir_fd);
        if (!x || !x->ready || !c || dir_fd < 0)
                return;
        ReportRetention lim = {
                .max_reports = c->report_retention.max_reports,
                .max_bytes = c->report_retention.max_bytes,
                .max_age_usec = c->report_retention.max_age_usec,
        };
        r = report_index_take_victims(x->index, &lim, now_usec(CLOCK_REALTIME), NULL, NULL, &v, &n);
        if (r < 0) {
                log_oom();
                return;
        }
        if (n == 0) {
                free(v);
                return;
        }
        j = calloc(1, sizeof(*j));
        if (j) {
                j->room = room;
                j->victims = v;
                j->n = n;
                j->errors = calloc(n, sizeof(int));
                j->dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
                j->dir_path = strdup(x->dir);
        }
        if (!j || !j->errors || j->dir_fd < 0 || !j->dir_path) {
                /* Out of the index, still on disk: the next start finds them. */
                log_warning("Failed to remove %zu reports (retention): out of memory or fds.", n);
                if (j)
                        remove_job_free(j);
                else
                        report_victims_free(v, n);
                return;
        }
        log_debug("Retention: removing %zu reports of %s.", n, x->dir);
        worker_submit(room->report_worker, &j->job, remove_run, remove_done);
}

static int on_retention_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        SessionsRoom *room = userdata;

        retention_run(room);
        (void) sd_event_source_set_time_relative(s, REPORTS_RETENTION_INTERVAL_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

/* ---- what the rest of the agent calls ---- */

int manager_reports_start(SessionsRoom *room) {
        ManagerReports *x;
        int r;

        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        room->reports = x;
        r = sd_event_add_time_relative(room->deps.event, &x->timer, CLOCK_MONOTONIC,
                                       REPORTS_RETENTION_INTERVAL_USEC, USEC_PER_SEC, on_retention_timer,
                                       room);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(x->timer, "report-retention");
        return load_start(room);
}

void manager_reports_free(SessionsRoom *room) {
        ManagerReports *x = room->reports;

        if (!x)
                return;
        x->timer = sd_event_source_disable_unref(x->timer);
        report_index_free(x->index);
        free(x->dir);
        free(x);
        room->reports = NULL;
}

void manager_reports_add(SessionsRoom *room, const ReportWrite *w, const char *report_dir) {
        _cleanup_(report_valid_info_done) ReportValidInfo valid = {};
        ManagerReports *x = room->reports;
        const ReportSummaryInfo *i = &valid.info;

        if (!x || !x->index || !w->full || !streq_ptr(report_dir, x->dir))
                return; /* written to another reportDir (before a reload) */
        /* The names as its summary.json says them (valid UTF-8), as the
         * index loaded from the disk has them; the directory as it is. */
        if (report_valid_info(&w->info, &valid) < 0) {
                log_oom();
                return;
        }
        ControlReport rep = {
                .session = (char *) strempty(i->session_id),
                .report_dir = w->full,
                .namespace = (char *) strempty(i->namespace),
                .pod = (char *) strempty(i->pod),
                .container = (char *) strempty(i->container),
                .cgroup = (char *) strempty(i->cgroup),
                .start_usec = i->start_usec,
                .samples = w->data ? profile_data_total(w->data) : 0,
                .bytes = w->disk_bytes,
        };
        if (report_index_put(x->index, &rep) < 0) {
                log_oom();
                return;
        }
        retention_run(room);
}

void manager_reports_config_changed(SessionsRoom *room) {
        ManagerReports *x = room->reports;

        if (!x)
                return;
        if (!streq_ptr(x->dir, sessions_room_report_dir(room, NULL))) {
                log_info("reportDir is now %s: indexing its reports.", sessions_room_report_dir(room, NULL));
                if (load_start(room) < 0)
                        log_oom();
                return;
        }
        retention_run(room);
}

bool manager_reports_ready(SessionsRoom *room) {
        return room->reports && room->reports->ready &&
               streq_ptr(room->reports->dir, sessions_room_report_dir(room, NULL));
}

int manager_reports_list(SessionsRoom *room, ReportMatch match, void *userdata, const ReportCursor *after,
                         size_t limit, const ReportEntry ***ret, size_t *ret_n, bool *ret_more) {
        if (!manager_reports_ready(room))
                return -EAGAIN;
        return report_index_list(room->reports->index, match, userdata, after, limit, ret, ret_n, ret_more);
}

const ReportEntry *manager_reports_find_session(SessionsRoom *room, const char *session) {
        return room->reports ? report_index_find_session(room->reports->index, session) : NULL;
}

void manager_reports_stats(SessionsRoom *room, ManagerReportsStats *ret) {
        ManagerReports *x = room->reports;

        *ret = (ManagerReportsStats){};
        if (!x)
                return;
        ret->ready = manager_reports_ready(room);
        ret->reports = report_index_count(x->index);
        ret->bytes = report_index_bytes(x->index);
        memcpy(ret->removed, x->removed, sizeof(ret->removed));
        ret->removed_bytes = x->removed_bytes;
        ret->remove_failed = x->remove_failed;
}
