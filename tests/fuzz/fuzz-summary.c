/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the two readers of a report's summary.json: the
 * report listing (agent/sessions/control-report.c, for ListReports and `cgprofctl
 * reports`, over up to 10,000 files) and report conversion
 * (common/report-convert.c, for `cgprofctl report DIR`).
 *
 * Each input is read by both. The listing's reader gives a report with
 * every string set, or fails with -EBADMSG or -ENOMEM; conversion's gives
 * the session's metadata or fails the same way. What conversion read is
 * then written back as conversion writes it (common/report-summary.c, here
 * with an empty profile), and read again: both readers see the same report
 * in it as in the input, a checkpoint still partial (and interrupted).
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <cjson/cJSON.h>

#include "control-report.h"
#include "fuzz.h"
#include "report.h"

static int list_parse(const char *text, size_t size, ControlReport *ret) {
        int r = control_report_parse(text, size, "/var/lib/cgprof/reports/fuzz", ret);

        if (r < 0) {
                CHECK(r == -EBADMSG || r == -ENOMEM);
                return r;
        }
        CHECK(r == 0);
        CHECK(ret->session && ret->report_dir && ret->namespace && ret->pod && ret->container &&
              ret->cgroup);
        CHECK(streq(ret->report_dir, "/var/lib/cgprof/reports/fuzz"));
        return 0;
}

/* A count written to JSON and read back. cJSON prints a number with 15
 * significant digits whenever that reads back within DBL_EPSILON of it
 * (relative), so a count above 2^52 may come back off in its last bits. */
static bool same_count(uint64_t a, uint64_t b) {
        return (a > b ? a - b : b - a) <= (MAX(a, b) >> 52);
}

/* Writes info as conversion does; NULL when the writer refuses it. */
static char *write_summary(const ProfileData *d, ReportSummaryInfo *info) {
        static const char *const formats[] = { "summary.json", NULL };
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        int r;

        CHECK(f);
        info->report_dir = "/var/lib/cgprof/reports/fuzz";
        info->formats = formats;
        r = report_write_summary(f, d, info);
        CHECK(fclose(f) == 0);
        if (r < 0) {
                /* -EOVERFLOW: a start or end no calendar holds. */
                CHECK(r == -ENOMEM || r == -EOVERFLOW);
                free(buf);
                return NULL;
        }
        CHECK(buf && n == strlen(buf));
        return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* NUL-terminated, as read_*_file_max() leaves a file. */
        _cleanup_free_ char *text = fuzz_strndup(data, size), *out = NULL;
        _cleanup_free_ uint64_t *per_cpu = NULL, *per_cpu_again = NULL;
        _cleanup_free_ ReportThread *threads = NULL, *threads_again = NULL;
        _cleanup_(profile_data_freep) ProfileData *d = NULL;
        ControlReport rep = {}, again = {};
        ReportSummaryInfo info = {}, info_again = {};
        cJSON *tree = NULL, *tree_again = NULL;
        int listed, r;

        listed = list_parse(text, size, &rep);

        r = report_summary_parse(text, size, &info, &tree, &per_cpu);
        if (r < 0) {
                CHECK(r == -EBADMSG || r == -ENOMEM);
                CHECK(!tree && !per_cpu);
                /* What the listing takes is a JSON object, which conversion takes too. */
                CHECK(listed < 0 || r == -ENOMEM);
                goto finish;
        }
        CHECK(r == 0 && tree);
        CHECK(info.samples_per_cpu == per_cpu && (per_cpu || info.n_cpus == 0));
        /* A checkpoint is read as one. */
        CHECK(info.partial == cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tree, "partial")));
        CHECK(info.interrupted == cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tree, "interrupted")));
        if (listed == 0) {
                /* Both readers agree on what they both read. */
                CHECK(streq_ptr(info.session_id, rep.session));
                CHECK(streq(strempty(info.namespace), rep.namespace));
                CHECK(streq(strempty(info.pod), rep.pod));
                CHECK(streq(strempty(info.container), rep.container));
                CHECK(streq(strempty(info.cgroup), rep.cgroup));
                CHECK(info.start_usec == rep.start_usec);
        }

        /* An off-CPU session's counts and threads, as re-rendering reads them. */
        r = report_offcpu_from_json(tree, &info.offcpu, &threads);
        if (r < 0) {
                CHECK(r == -ENOMEM);
                goto finish;
        }
        CHECK(info.offcpu.threads == threads && (threads || info.offcpu.n_threads == 0));
        CHECK(!info.offcpu.enabled || (info.offcpu.probability > 0 && info.offcpu.probability <= 1));

        /* Written back and read again: the same report. */
        d = profile_data_new();
        CHECK(d);
        out = write_summary(d, &info);
        if (!out)
                goto finish;
        r = report_summary_parse(out, strlen(out), &info_again, &tree_again, &per_cpu_again);
        CHECK(r == 0 || r == -ENOMEM);
        if (r < 0)
                goto finish;
        CHECK(streq_ptr(info_again.session_id, info.session_id));
        CHECK(streq_ptr(info_again.cgroup, info.cgroup));
        CHECK(streq_ptr(info_again.namespace, info.namespace));
        CHECK(streq_ptr(info_again.pod, info.pod));
        CHECK(same_count(info_again.start_usec, info.start_usec));
        CHECK(same_count(info_again.end_usec, info.end_usec));
        CHECK(streq_ptr(info_again.profile_config, info.profile_config));
        /* A checkpoint, maybe found interrupted, stays one. */
        CHECK(info_again.partial == info.partial && info_again.interrupted == info.interrupted);
        CHECK(streq_ptr(info_again.interrupted_reason, info.interrupted_reason));
        CHECK(info_again.n_cpus == info.n_cpus);
        for (size_t i = 0; i < info.n_cpus; i++)
                CHECK(same_count(per_cpu_again[i], per_cpu[i]));
        r = report_offcpu_from_json(tree_again, &info_again.offcpu, &threads_again);
        CHECK(r == 0 || r == -ENOMEM);
        if (r < 0)
                goto finish;
        CHECK(info_again.offcpu.enabled == info.offcpu.enabled);
        if (info.offcpu.enabled && !info.offcpu.unavailable) {
                CHECK(info_again.offcpu.n_threads == info.offcpu.n_threads);
                CHECK(same_count(info_again.offcpu.recorded, info.offcpu.recorded));
                CHECK(streq_ptr(info_again.offcpu.record_at, info.offcpu.record_at));
                for (size_t i = 0; i < info.offcpu.n_threads; i++)
                        CHECK(threads_again[i].tid == threads[i].tid &&
                              threads_again[i].pid == threads[i].pid);
        }
        r = list_parse(out, strlen(out), &again);
        if (listed == 0 && r == 0) {
                CHECK(streq(again.session, rep.session) && streq(again.cgroup, rep.cgroup));
                CHECK(same_count(again.start_usec, rep.start_usec));
        }
        CHECK(r == -ENOMEM || listed == -ENOMEM || (r == 0) == (listed == 0));

finish:
        control_report_done(&rep);
        control_report_done(&again);
        cJSON_Delete(tree);
        cJSON_Delete(tree_again);
        return 0;
}
