/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Report writes and batches of them on the report worker (see
 * report-writer.h). */
#include <fcntl.h>
#include <sys/stat.h>

#include "fileio.h"
#include "log.h"
#include "manager-reports.h"
#include "report-writer.h"
#include "sessions-room.h"

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

ReportWrite *report_write_free(ReportWrite *w) {
        if (!w)
                return NULL;
        free(w->dir);
        free(w->full);
        profile_data_free(w->data);
        for (size_t i = 0; i < w->n_strings; i++)
                free(w->strings[i]);
        free(w->info.samples_per_cpu);
        free(w->info.offcpu.threads);
        free(w);
        return NULL;
}

/* Points *field at a copy of itself owned by w. */
static int own_string(ReportWrite *w, const char **field) {
        char *c;

        if (!*field)
                return 0;
        if (w->n_strings >= ELEMENTSOF(w->strings))
                return -E2BIG;
        c = strdup(*field);
        if (!c)
                return -ENOMEM;
        w->strings[w->n_strings++] = c;
        *field = c;
        return 0;
}

int report_write_new(const char *dir, unsigned formats, ProfileData *data, const ReportSummaryInfo *info,
                     ReportWrite **ret) {
        _cleanup_(report_write_freep) ReportWrite *w = calloc(1, sizeof(*w));
        int r;

        if (!w) {
                profile_data_free(data);
                return -ENOMEM;
        }
        w->data = data;
        w->bytes = data_bytes(data);
        w->dir = strdup(dir);
        if (!w->dir)
                return -ENOMEM;
        w->formats = formats;
        w->info = *info;
        w->info.samples_per_cpu = NULL;
        w->info.report_dir = NULL;
        w->info.formats = NULL;
        w->info.offcpu.threads = NULL;
        if (info->offcpu.n_threads > 0) {
                w->info.offcpu.threads = calloc(info->offcpu.n_threads, sizeof(ReportThread));
                if (!w->info.offcpu.threads)
                        return -ENOMEM;
                memcpy(w->info.offcpu.threads, info->offcpu.threads,
                       info->offcpu.n_threads * sizeof(ReportThread));
        }
        if (info->n_cpus > 0) {
                w->info.samples_per_cpu = calloc(info->n_cpus, sizeof(uint64_t));
                if (!w->info.samples_per_cpu)
                        return -ENOMEM;
                memcpy(w->info.samples_per_cpu, info->samples_per_cpu, info->n_cpus * sizeof(uint64_t));
        }
        const char **fields[] = {
                &w->info.session_id,
                &w->info.profile,
                &w->info.target,
                &w->info.profile_config,
                &w->info.cgroup,
                &w->info.namespace,
                &w->info.pod,
                &w->info.container,
                &w->info.container_id,
                &w->info.node,
                &w->info.event,
                &w->info.requested_event,
                &w->info.event_fallback_reason,
                &w->info.attach_mode,
                &w->info.end_reason,
                &w->info.cpu_usage_source,
                &w->info.unwind.mode,
                &w->info.offcpu.unavailable,
        };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                r = own_string(w, fields[i]);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(w);
        return 0;
}

uint64_t report_dir_bytes(int dfd) {
        uint64_t bytes = 0;
        struct stat st;

        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++)
                if (fstatat(dfd, report_format_info(f)->file, &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
                    S_ISREG(st.st_mode))
                        bytes += (uint64_t) st.st_size;
        for (const char *const *x = report_extra_files; *x; x++)
                if (fstatat(dfd, *x, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode))
                        bytes += (uint64_t) st.st_size;
        return bytes;
}

/* rel (taken: cut at its slashes) and each parent, while empty: each
 * removed from its own parent's fd, opened without following a symlink. */
static int rmdir_empty_below(int report_dir_fd, char *rel) {
        int r = 0;

        for (char *slash;;) {
                _cleanup_close_ int parent = -EBADF;
                const char *name = rel;

                slash = strrchr(rel, '/');
                if (slash) {
                        *slash = 0;
                        name = slash + 1;
                        parent = open_dir_below(report_dir_fd, rel);
                        if (parent < 0)
                                return parent;
                }
                if (unlinkat(parent >= 0 ? parent : report_dir_fd, name, AT_REMOVEDIR) < 0)
                        return r == 0 ? negative_errno() : r;
                r = 1;
                if (!slash)
                        return r;
        }
}

int report_dir_remove(int report_dir_fd, const char *rel) {
        _cleanup_free_ char *copy = strdup(rel);
        _cleanup_close_ int dfd = -EBADF;
        int r;

        if (!copy)
                return -ENOMEM;
        dfd = open_dir_below(report_dir_fd, rel);
        if (dfd < 0)
                return dfd;
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++)
                if (unlinkat(dfd, report_format_info(f)->file, 0) < 0 && errno != ENOENT)
                        return negative_errno();
        for (const char *const *x = report_extra_files; *x; x++)
                if (unlinkat(dfd, *x, 0) < 0 && errno != ENOENT)
                        return negative_errno();
        r = rmdir_empty_below(report_dir_fd, copy);
        return r < 0 ? r : 0;
}

void report_write_run(ReportWrite *w, int report_dir_fd, const char *report_dir) {
        _cleanup_free_ char *rel = strdup(w->dir);
        _cleanup_close_ int dfd = -EBADF;
        uint64_t start = now_usec(CLOCK_MONOTONIC);
        int r;

        free(w->full);
        w->full = NULL;
        if (!rel || asprintf(&w->full, "%s/%s", strempty(report_dir), w->dir) < 0) {
                w->full = NULL;
                w->error = -ENOMEM;
                return;
        }
        if (report_dir_fd < 0)
                r = -EBADF;
        else {
                dfd = mkdir_below(report_dir_fd, rel);
                r = dfd < 0 ? dfd : 0;
        }
        if (r >= 0) {
                w->info.report_dir = w->full;
                r = report_write_dir(dfd, w->formats, w->data, &w->info);
                w->info.report_dir = NULL;
        }
        if (r >= 0)
                w->disk_bytes = report_dir_bytes(dfd);
        if (r < 0 && dfd >= 0)
                /* Its directory goes too, and each parent the template
                 * made that is empty now (rmdir() leaves other reports'). */
                rmdir_empty_below(report_dir_fd, rel);
        w->error = r;
        w->usec = now_usec(CLOCK_MONOTONIC) - start;
}

ReportBatch *report_batch_free(ReportBatch *b) {
        if (!b)
                return NULL;
        for (size_t i = 0; i < b->n_writes; i++)
                report_write_free(b->writes[i]);
        free(b->writes);
        safe_close(b->report_dir_fd);
        free(b->report_dir);
        free(b);
        return NULL;
}

int report_batch_new(SessionsRoom *r, ReportBatchDoneFunc done, void *userdata, ReportBatch **ret) {
        _cleanup_(report_batch_freep) ReportBatch *b = calloc(1, sizeof(*b));
        int dir_fd;
        const char *dir = sessions_room_report_dir(r, &dir_fd);

        if (!b)
                return -ENOMEM;
        b->room = r;
        b->done = done;
        b->userdata = userdata;
        b->report_dir_fd = -EBADF;
        if (dir_fd >= 0) {
                b->report_dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
                if (b->report_dir_fd < 0)
                        return negative_errno();
        }
        b->report_dir = strdup(dir);
        if (!b->report_dir)
                return -ENOMEM;
        *ret = TAKE_PTR(b);
        return 0;
}

int report_batch_add(ReportBatch *b, ReportWrite *w) {
        ReportWrite **l = reallocarray(b->writes, b->n_writes + 1, sizeof(*l));
        if (!l) {
                report_write_free(w);
                return -ENOMEM;
        }
        b->writes = l;
        b->writes[b->n_writes++] = w;
        return 0;
}

static void batch_run(WorkerJob *job) {
        ReportBatch *b = (ReportBatch *) job;

        for (size_t i = 0; i < b->n_writes; i++)
                if (b->writes[i])
                        report_write_run(b->writes[i], b->report_dir_fd, b->report_dir);
}

static void batch_done(WorkerJob *job, bool ran) {
        ReportBatch *b = (ReportBatch *) job;
        SessionsRoom *r = b->room;

        if (!ran)
                /* The worker went before it ran (the agent is failing):
                 * write on this thread, nothing is lost. */
                batch_run(job);
        r->report_queue_writes -= b->n_writes;
        for (size_t i = 0; i < b->n_writes; i++)
                if (b->writes[i] && b->writes[i]->error >= 0) {
                        timing_record(&r->report_timing, b->writes[i]->usec);
                        manager_reports_add(r, b->writes[i], b->report_dir);
                }
        b->done(r, b, b->userdata);
        report_batch_free(b);
        sessions_room_reports_written(r);
}

void report_batch_submit(ReportBatch *b) {
        SessionsRoom *r = b->room;

        if (!r->report_worker || r->report_queue_writes + b->n_writes > REPORT_QUEUE_MAX) {
                if (r->report_worker)
                        r->report_queue_overflows++;
                b->job.run = batch_run;
                b->job.done = batch_done;
                batch_run(&b->job);
                r->report_queue_writes += b->n_writes; /* batch_done() takes them off */
                batch_done(&b->job, true);
                return;
        }
        r->report_queue_writes += b->n_writes;
        worker_submit(r->report_worker, &b->job, batch_run, batch_done);
}
