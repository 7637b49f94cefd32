/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sessions of one distributed job on this node, joined into one job
 * report (docs/training-jobs.md, "One report per job"):
 *   join        a session joins the job of each process it sees
 *               (job_key_of_process(): its pod's job label, else the
 *               process's TORCHELASTIC_RUN_ID or SLURM_JOB_ID);
 *   contribute  at its end, it gives each of its jobs its samples of the
 *               job's processes and its report directories;
 *   leave       once freed (ended, discarded), it has left its jobs; the
 *               last session of a job to leave writes the job's report,
 *               on the report worker, beside the sessions' own:
 *               [{NAMESPACE}/]_jobs/{JOB}/{TIMESTAMP}_{UID}.
 * The registry's state is the room's (job-registry.h). */
#include <inttypes.h>
#include <systemd/sd-id128.h>

#include "job-registry.h"
#include "log.h"
#include "report-writer.h"
#include "session-jobs.h"
#include "session.h"
#include "sessions-room.h"
#include "template.h"

static bool session_process_key(Session *s, const JobIdentity *j, char buf[static JOB_KEY_NAME_MAX],
                                JobKey *ret) {
        return job_key_of_process(s->namespace, s->job_labels, s->profile->name, s->namespaced_output, j,
                                  buf, ret);
}

void session_jobs_note(Session *s, const JobIdentity *j) {
        char buf[JOB_KEY_NAME_MAX];
        JobKey key;
        Job *job;
        int r;

        if (!s->room->jobs || !session_process_key(s, j, buf, &key))
                return;
        r = job_registry_join(s->room->jobs, &key, s->id_string, &job);
        if (r < 0)
                log_warning_errno(r, "Failed to note session %s in job %s, ignoring: %m", s->id_string,
                                  key.name);
        else if (r > 0)
                log_debug("Session %s (cgroup %s) is in job %s %s (%zu sessions on this node).",
                          s->id_string, s->cgroup, job_source_to_string(key.source), key.name,
                          job->n_sessions);
}

/* The job's processes among those of d (NULL: none), copied. */
static ProfileData *job_processes_of(Session *s, const Job *job, const ProfileData *d) {
        _cleanup_free_ uint32_t *idx = NULL;
        size_t n = 0;

        if (!d || d->n_processes == 0)
                return NULL;
        idx = malloc(d->n_processes * sizeof(uint32_t));
        if (!idx)
                return NULL;
        for (size_t i = 0; i < d->n_processes; i++) {
                char buf[JOB_KEY_NAME_MAX];
                JobKey key;

                if (session_process_key(s, &d->processes[i].job, buf, &key) &&
                    job_key_equal(&key, &job->key))
                        idx[n++] = (uint32_t) i;
        }
        return n > 0 ? profile_data_of_processes(d, idx, n) : NULL;
}

/* What the session gives one job: its samples of the job's processes in
 * each report directory of the batch, and those directories. */
static int session_job_contribute(Session *s, Job *job, const ReportBatch *b) {
        _cleanup_(profile_data_freep) ProfileData *mine = profile_data_new();
        _cleanup_strv_free_ char **reports = calloc(b->n_writes + 1, sizeof(char *));
        const ReportSummaryInfo *info = b->n_writes > 0 ? &b->writes[0]->info : NULL;
        JobContribution c = {};
        size_t n = 0;
        int r = 0;

        if (!mine || !reports)
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < b->n_writes; i++) {
                _cleanup_(profile_data_freep) ProfileData *part =
                        job_processes_of(s, job, b->writes[i]->data);
                if (!part)
                        continue;
                r = profile_data_merge(mine, part);
                if (r >= 0 && !(reports[n++] = strdup(b->writes[i]->dir)))
                        r = -ENOMEM;
        }
        if (info)
                c = (JobContribution){
                        .start_usec = info->start_usec,
                        .end_usec = info->end_usec,
                        .lost = info->lost,
                        .excluded = info->excluded,
                        .collisions = info->collisions,
                        .cpu_usage_usec = info->cpu_usage_usec,
                        .unsymbolized_frames = info->unsymbolized_frames,
                        .total_frames = info->total_frames,
                        .target = info->target,
                        .event = info->event,
                        .frequency = info->frequency,
                };
        c.formats = s->profile->formats | s->extra_formats;
        /* Whatever failed, the session has ended in the job. */
        int k = job_registry_contribute(s->room->jobs, job, s->id_string, r >= 0 ? mine : NULL,
                                        r >= 0 ? reports : NULL, &c);
        return r < 0 ? r : k;
}

void session_jobs_contribute(Session *s, const ReportBatch *b) {
        _cleanup_free_ Job **jobs = NULL;
        size_t n = 0;
        int r;

        if (!s->room->jobs)
                return;
        r = job_registry_jobs_of(s->room->jobs, s->id_string, &jobs, &n);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                int k = session_job_contribute(s, jobs[i], b);
                if (k < 0)
                        log_warning_errno(k,
                                          "Failed to add session %s to the report of job %s, ignoring: %m",
                                          s->id_string, jobs[i]->key.name);
        }
        if (r < 0)
                log_oom();
}

/* ---- the job's report ---- */

typedef struct JobReport {
        Job *job;
        char session_id[SD_ID128_STRING_MAX];
        ReportJobInfo info;
        char *labels[3]; /* the pod label that named it (strv), for pprof's job_name etc. */
} JobReport;

static JobReport *job_report_free(JobReport *jr) {
        if (!jr)
                return NULL;
        job_free(jr->job);
        free(jr);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(JobReport *, job_report_free);

static void on_job_written(SessionsRoom *room, ReportBatch *b, void *userdata) {
        _cleanup_(job_report_freep) JobReport *jr = userdata;
        ReportWrite *w = b->n_writes > 0 ? b->writes[0] : NULL;

        (void) room;
        if (!w)
                return;
        if (w->error < 0)
                log_warning_errno(w->error, "Failed to write the report of job %s (%zu sessions) in %s: %m",
                                  jr->job->key.name, jr->job->n_sessions, strna(w->full));
        else
                log_info("Wrote the report of job %s %s (%zu sessions, %" PRIu64 " samples) in %s.",
                         job_source_to_string(jr->job->key.source), jr->job->key.name, jr->job->n_sessions,
                         w->data ? profile_data_total(w->data) : 0, strna(w->full));
}

static void job_report_info(SessionsRoom *room, JobReport *jr, ReportSummaryInfo *ret) {
        const Job *j = jr->job;

        *ret = (ReportSummaryInfo){
                .session_id = jr->session_id,
                .profile = j->key.profile,
                .target = j->total.target,
                .namespace = j->key.namespace,
                .node = room->deps.node_name,
                .start_usec = j->total.start_usec,
                .end_usec = j->total.end_usec,
                .frequency = j->total.frequency,
                .event = j->total.event,
                .end_reason = "job-ended",
                .folded_rank_root = true, /* the ranks side by side */
                .lost = j->total.lost,
                .excluded = j->total.excluded,
                .collisions = j->total.collisions,
                .cpu_usage_usec = j->total.cpu_usage_usec,
                .cpu_usage_source = "cpu.stat (the sessions' cgroups)",
                .unsymbolized_frames = j->total.unsymbolized_frames,
                .total_frames = j->total.total_frames,
                .job_labels = jr->labels[0] ? jr->labels : NULL,
                .job = &jr->info,
        };
}

static int job_report_submit(SessionsRoom *room, Job *job) {
        _cleanup_(job_report_freep) JobReport *jr = calloc(1, sizeof(*jr));
        _cleanup_(report_batch_freep) ReportBatch *b = NULL;
        _cleanup_free_ char *dir = NULL;
        ReportSummaryInfo info;
        ReportWrite *w;
        sd_id128_t id;
        char uid[9];
        unsigned formats = job->total.formats | 1u << REPORT_FORMAT_FOLDED | 1u << REPORT_FORMAT_JSON |
                           1u << REPORT_FORMAT_PPROF | 1u << REPORT_FORMAT_SVG;
        int r;

        if (!jr) {
                job_free(job);
                return -ENOMEM;
        }
        jr->job = job;
        r = sd_id128_randomize(&id);
        if (r < 0)
                return r;
        sd_id128_to_string(id, jr->session_id);
        jr->info = (ReportJobInfo){
                .name = job->key.name,
                .source = job_source_to_string(job->key.source),
                .sessions = job->sessions,
                .reports = job->reports,
        };
        if (job_source_label(job->key.source)) {
                jr->labels[0] = (char *) job_source_label(job->key.source);
                jr->labels[1] = (char *) job->key.name;
        }
        random_uid(uid);
        r = job_report_path(job, uid, &dir);
        if (r < 0)
                return r;
        job_report_info(room, jr, &info);
        r = report_batch_new(room, on_job_written, jr, &b);
        if (r < 0)
                return r;
        r = report_write_new(dir, formats, TAKE_PTR(job->data), &info, &w);
        if (r >= 0)
                r = report_batch_add(b, w);
        if (r < 0)
                return r;
        TAKE_PTR(jr);
        report_batch_submit(TAKE_PTR(b));
        return 0;
}

void session_jobs_leave(Session *s) {
        SessionsRoom *room = s->room;
        Job **done = NULL;
        size_t n = 0;
        int r;

        if (!room || !room->jobs)
                return;
        r = job_registry_leave(room->jobs, s->id_string, &done, &n);
        if (r < 0)
                log_oom();
        for (size_t i = 0; i < n; i++) {
                const char *name = done[i]->key.name;
                _cleanup_free_ char *copy = strdup(name);

                r = job_report_submit(room, done[i]);
                if (r < 0)
                        log_warning_errno(r, "Failed to write the report of job %s, ignoring: %m",
                                          strna(copy));
        }
        free(done);
}
