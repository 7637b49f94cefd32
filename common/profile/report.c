/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <unistd.h>

#include "fileio.h"
#include "report.h"
#include "template.h"

static const ReportFormatInfo report_formats[_REPORT_FORMAT_MAX] = {
        [REPORT_FORMAT_FOLDED] = { REPORT_FORMAT_FOLDED, "profile.folded", report_write_folded_info },
        [REPORT_FORMAT_JSON] = { REPORT_FORMAT_JSON, "summary.json", report_write_summary },
        [REPORT_FORMAT_PPROF] = { REPORT_FORMAT_PPROF, "profile.pb.gz", report_write_pprof },
        [REPORT_FORMAT_SVG] = { REPORT_FORMAT_SVG, "flame.svg", report_write_svg },
        [REPORT_FORMAT_SPEEDSCOPE] = { REPORT_FORMAT_SPEEDSCOPE, "profile.speedscope.json",
                                       report_write_speedscope },
};

const ReportFormatInfo *report_format_info(ReportFormat f) {
        if (f < 0 || f >= _REPORT_FORMAT_MAX)
                return NULL;
        return &report_formats[f];
}

typedef struct WriteCtx {
        const ReportFormatInfo *format;
        const ProfileData *data;
        const ReportSummaryInfo *info;
} WriteCtx;

static int write_cb(FILE *f, void *userdata) {
        WriteCtx *c = userdata;
        return c->format->write(f, c->data, c->info);
}

void report_valid_info_done(ReportValidInfo *v) {
        for (size_t i = 0; i < ELEMENTSOF(v->owned); i++)
                free(v->owned[i]);
        *v = (ReportValidInfo){};
}

int report_valid_info(const ReportSummaryInfo *info, ReportValidInfo *ret) {
        ReportSummaryInfo *c = &ret->info;
        const char **fields[] = {
                &c->session_id,
                &c->profile,
                &c->target,
                &c->profile_config,
                &c->cgroup,
                &c->namespace,
                &c->pod,
                &c->container,
                &c->container_id,
                &c->node,
                &c->event,
                &c->requested_event,
                &c->event_fallback_reason,
                &c->attach_mode,
                &c->end_reason,
                &c->interrupted_reason,
                &c->cpu_usage_source,
                &c->report_dir,
                &c->unwind.mode,
        };
        _Static_assert(ELEMENTSOF(fields) == ELEMENTSOF(ret->owned), "a copy for each string");

        *ret = (ReportValidInfo){ .info = *info };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (utf8_ensure_valid(fields[i], &ret->owned[i]) < 0) {
                        report_valid_info_done(ret);
                        return -ENOMEM;
                }
        return 0;
}

/* The off-CPU files, beside their CPU formats (profile "events" with
 * "offcpu"): the folded stacks in µs, and the flame graph in blue. */
static const ReportFormatInfo report_offcpu_formats[] = {
        { REPORT_FORMAT_FOLDED, "offcpu.folded", report_write_folded_info },
        { REPORT_FORMAT_SVG, "offcpu.svg", report_write_svg_offcpu },
};

/* The wall-clock view (off-CPU sessions): per thread, on and off CPU, µs. */
static const ReportFormatInfo report_wallclock_formats[] = {
        { REPORT_FORMAT_FOLDED, "wallclock.folded", report_write_folded_info },
        { REPORT_FORMAT_SVG, "wallclock.svg", report_write_svg_wallclock },
};

const char *const report_extra_files[] = {
        "offcpu.folded",
        "offcpu.svg",
        "wallclock.folded",
        "wallclock.svg",
        "cuda.folded",
        "cuda.pb.gz",
        "cuda.svg",
        "cuda-time.folded",
        "cuda-time.pb.gz",
        "cuda-time.svg",
        NULL,
};

static int write_one(int dirfd, const ReportFormatInfo *format, const ProfileData *d,
                     const ReportSummaryInfo *info) {
        WriteCtx ctx = { .format = format, .data = d, .info = info };
        return write_file_atomic_at(dirfd, format->file, write_cb, &ctx);
}

/* The CUDA kernel launches of a report (profile_data_split_launches()),
 * in files of their own, whatever formats the profile asks for. */
static const ReportFormatInfo launch_formats[] = {
        { REPORT_FORMAT_FOLDED, "cuda.folded", report_write_folded_info },
        { REPORT_FORMAT_PPROF, "cuda.pb.gz", report_write_pprof }, /* cuda_launches/count */
        { REPORT_FORMAT_SVG, "cuda.svg", report_write_svg }, /* kernels in green */
};

/* The GPU time of the kernels (gpu.durations: profile_data_gpu_time()),
 * counts in nanoseconds, under the CPU stacks that launched them. */
static const ReportFormatInfo cuda_time_formats[] = {
        { REPORT_FORMAT_FOLDED, "cuda-time.folded", report_write_folded_info },
        { REPORT_FORMAT_PPROF, "cuda-time.pb.gz",
          report_write_pprof_cuda_time }, /* cuda_kernel/nanoseconds */
        { REPORT_FORMAT_SVG, "cuda-time.svg", report_write_svg },
};

/* Writes the files of one kind of CUDA stacks: the folded file always, the
 * others as the profile's formats say; each name into files[*n]. */
static int write_cuda_files(int dirfd, unsigned formats, const ReportFormatInfo *list, size_t n_list,
                            const ProfileData *d, const ProfileData *d_pprof, const ReportSummaryInfo *in,
                            const char **files, size_t *n) {
        for (size_t i = 0; i < n_list; i++) {
                if (list[i].format != REPORT_FORMAT_FOLDED && !(formats & (1u << list[i].format)))
                        continue;
                WriteCtx ctx = { .format = &list[i],
                                 .data = list[i].format == REPORT_FORMAT_PPROF ? d_pprof : d,
                                 .info = in };
                int r = write_file_atomic_at(dirfd, list[i].file, write_cb, &ctx);
                if (r < 0)
                        return r;
                files[(*n)++] = list[i].file;
        }
        return 0;
}

/* Appends to files[*n] the names of the files report_write_dir() writes in
 * the formats of the mask (off, wall: the off-CPU and wall-clock data, NULL:
 * none), and, when wallclock_kept, the wall-clock files it keeps as they are
 * (marked in kept: listed, not written). */
static void list_files(int dirfd, unsigned formats, const ProfileData *off, const ProfileData *wall,
                       bool wallclock_kept, const char **files, bool *kept, size_t *n) {
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++)
                if (formats & (1u << f))
                        files[(*n)++] = report_formats[f].file;
        for (size_t i = 0; off && i < ELEMENTSOF(report_offcpu_formats); i++)
                if (formats & (1u << report_offcpu_formats[i].format))
                        files[(*n)++] = report_offcpu_formats[i].file;
        for (size_t i = 0; i < ELEMENTSOF(report_wallclock_formats); i++) {
                if (!(formats & (1u << report_wallclock_formats[i].format)))
                        continue;
                if (wall)
                        files[(*n)++] = report_wallclock_formats[i].file;
                else if (wallclock_kept && faccessat(dirfd, report_wallclock_formats[i].file, F_OK,
                                                     AT_SYMLINK_NOFOLLOW) == 0) {
                        kept[*n] = true;
                        files[(*n)++] = report_wallclock_formats[i].file;
                }
        }
}

int report_write_dir(int dirfd, unsigned formats, const ProfileData *all, const ReportSummaryInfo *in) {
        _cleanup_(report_valid_info_done) ReportValidInfo valid = {};
        _cleanup_(profile_data_freep) ProfileData *cpu = NULL, *launches = NULL, *kernels = NULL,
                                                  *cpu_only = NULL, *off = NULL, *plain = NULL, *wall = NULL,
                                                  *gpu_time = NULL;
        const char *files[_REPORT_FORMAT_MAX + ELEMENTSOF(launch_formats) + ELEMENTSOF(cuda_time_formats) +
                          ELEMENTSOF(report_offcpu_formats) + ELEMENTSOF(report_wallclock_formats) + 1] = {};
        bool kept[ELEMENTSOF(files)] = {}; /* listed, not written (nor removed on failure) */
        const ProfileData *d;
        ReportSummaryInfo *info;
        size_t n = 0;
        int r;

        /* Off-CPU sessions: the thread at the root of each stack is the
         * wall-clock view's only; the other formats merge the threads. */
        if (in->offcpu.enabled && !in->offcpu.unavailable && !in->offcpu.wallclock_kept) {
                r = report_wallclock_data(all, in, &wall);
                if (r < 0)
                        return r;
        }
        if (profile_data_has_threads(all)) {
                plain = profile_data_without_threads(all);
                if (!plain)
                        return -ENOMEM;
                all = plain;
        }
        d = all;

        r = profile_data_split_launches(all, &cpu, &launches);
        if (r < 0)
                return r;
        if (r > 0) {
                d = cpu;
                r = profile_data_gpu_time(all, &gpu_time);
                if (r < 0)
                        return r;
        }
        if (launches && launches->n_stacks > 0) {
                /* Each stack ends in its kernel: its dimensions are pprof's labels only. */
                kernels = profile_data_launches_without_dims(launches);
                if (!kernels)
                        return -ENOMEM;
                r = write_cuda_files(dirfd, formats, launch_formats, ELEMENTSOF(launch_formats), kernels,
                                     launches, in, files, &n);
                if (r < 0)
                        goto finish;
        }
        if (gpu_time) {
                r = write_cuda_files(dirfd, formats, cuda_time_formats, ELEMENTSOF(cuda_time_formats),
                                     gpu_time, gpu_time, in, files, &n);
                if (r < 0)
                        goto finish;
        }

        /* Every format with the same names, valid UTF-8 (the profile data's
         * are already). */
        r = report_valid_info(in, &valid);
        if (r < 0)
                return r;
        info = &valid.info;
        info->launches = kernels;
        info->cuda_time.data = gpu_time;
        if (info->offcpu.enabled) {
                /* The formats of one value get the CPU samples; pprof and
                 * summary.json both. */
                cpu_only = profile_data_of_value(d, PROFILE_VALUE_CPU);
                off = profile_data_of_value(d, PROFILE_VALUE_OFFCPU_USEC);
                if (!cpu_only || !off)
                        return -ENOMEM;
                info->offcpu.data = off;
        }
        list_files(dirfd, formats, off, wall, in->offcpu.wallclock_kept, files, kept, &n);
        info->formats = files;

        /* summary.json last: it lists the files, which exist by then. */
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++) {
                if (f == REPORT_FORMAT_JSON || !(formats & (1u << f)))
                        continue;
                r = write_one(dirfd, &report_formats[f], cpu_only && f != REPORT_FORMAT_PPROF ? cpu_only : d,
                              info);
                if (r < 0)
                        goto finish;
        }
        for (size_t i = 0; off && i < ELEMENTSOF(report_offcpu_formats); i++) {
                if (!(formats & (1u << report_offcpu_formats[i].format)))
                        continue;
                r = write_one(dirfd, &report_offcpu_formats[i], off, info);
                if (r < 0)
                        goto finish;
        }
        for (size_t i = 0; wall && i < ELEMENTSOF(report_wallclock_formats); i++) {
                if (!(formats & (1u << report_wallclock_formats[i].format)))
                        continue;
                r = write_one(dirfd, &report_wallclock_formats[i], wall, info);
                if (r < 0)
                        goto finish;
        }
        if (formats & (1u << REPORT_FORMAT_JSON)) {
                r = write_one(dirfd, &report_formats[REPORT_FORMAT_JSON], d, info);
                if (r < 0)
                        goto finish;
        }
        r = 0;
finish:
        if (r < 0)
                /* No partial report: what was written goes too (a reader
                 * would take a report without summary.json for a whole one). */
                for (size_t i = 0; i < n; i++)
                        if (!kept[i])
                                (void) unlinkat(dirfd, files[i], 0);
        return r;
}

static const struct { const char *key, *short_key; } job_labels[] = REPORT_JOB_LABELS;

const char *report_job_label_short(const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(job_labels); i++)
                if (streq_ptr(key, job_labels[i].key))
                        return job_labels[i].short_key;
        return NULL;
}

int report_job_labels_copy(char *const *pod_labels, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n = 0;

        for (size_t i = 0; pod_labels && pod_labels[i] && pod_labels[i + 1]; i += 2) {
                char **a;

                if (!report_job_label_short(pod_labels[i]))
                        continue;
                a = reallocarray(l, n + 3, sizeof(char *));
                if (!a)
                        return -ENOMEM;
                l = a;
                l[n] = strdup(pod_labels[i]);
                l[n + 1] = l[n] ? strdup(pod_labels[i + 1]) : NULL;
                l[n + 2] = NULL;
                if (!l[n + 1]) {
                        free(l[n]);
                        l[n] = NULL;
                        return -ENOMEM;
                }
                n += 2;
        }
        *ret = TAKE_PTR(l);
        return 0;
}
