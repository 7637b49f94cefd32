/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Re-rendering an existing report directory in other formats: the profile
 * comes from profile.pb.gz (complete: addresses, mappings) or else from
 * profile.folded (names only), the session's metadata from summary.json. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>

#include "fileio.h"
#include "report.h"

#define SUMMARY_MAX (16U * 1024U * 1024U)

static const char *json_string(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static uint64_t json_u64(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsNumber(v) ? u64_from_double(v->valuedouble) : 0;
}

/* A non-negative number (a negative one, or none: 0). */
static double json_number(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsNumber(v) && v->valuedouble >= 0 ? v->valuedouble : 0;
}

static uint64_t sec_to_ns(double sec) {
        return u64_from_double(sec * 1e9 + 0.5);
}

int report_offcpu_from_json(const cJSON *j, ReportOffCpuInfo *oc, ReportThread **ret_threads) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "offCpu");
        const cJSON *threads = cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(j, "wallClock"), "threads"),
                    *e;
        ReportThread *t = NULL;
        size_t n = 0;

        *ret_threads = NULL;
        if (!cJSON_IsObject(o))
                return 0;
        *oc = (ReportOffCpuInfo){
                .enabled = true,
                .unavailable = json_string(o, "unavailable"),
                .min_usec = json_u64(o, "minUsec"),
                .probability = json_number(o, "probability"),
                .recorded = json_u64(o, "recordedWaits"),
                .recorded_ns = sec_to_ns(json_number(o, "recordedSec")),
                .short_waits = json_u64(o, "shortWaits"),
                .short_ns = sec_to_ns(json_number(o, "shortSec")),
                .lost = json_u64(o, "lostWaits"),
                .lost_ns = sec_to_ns(json_number(o, "lostSec")),
                .excluded_ns = sec_to_ns(json_number(o, "excludedSec")),
                .runqueue = json_u64(o, "runQueueWaits"),
                .runqueue_ns = sec_to_ns(json_number(o, "runQueueSec")),
                .record_at = json_string(o, "recordAt"),
                .recorded_late = json_u64(o, "recordedAtSwitchOut"),
        };
        if (oc->probability <= 0 || oc->probability > 1)
                oc->probability = 1;
        if (cJSON_IsArray(threads) && cJSON_GetArraySize(threads) > 0) {
                t = calloc((size_t) cJSON_GetArraySize(threads), sizeof(ReportThread));
                if (!t)
                        return -ENOMEM;
                cJSON_ArrayForEach (e, threads) {
                        ReportThread *x = &t[n++];
                        const char *name = json_string(e, "name");

                        x->pid = (uint32_t) MIN(json_number(e, "pid"), (double) UINT32_MAX);
                        x->tid = (uint32_t) MIN(json_number(e, "tid"), (double) UINT32_MAX);
                        snprintf(x->name, sizeof(x->name), "%s", strempty(name));
                        x->oncpu_ns = sec_to_ns(json_number(e, "onCpuSec"));
                        x->offcpu_ns = sec_to_ns(json_number(e, "offCpuSec"));
                        x->unstacked_ns = sec_to_ns(json_number(e, "unstackedSec"));
                        x->runqueue_ns = sec_to_ns(json_number(e, "runQueueSec"));
                }
        }
        oc->threads = t;
        oc->n_threads = n;
        *ret_threads = t;
        return 0;
}

/* Fills info from a summary.json tree (strings point into it). */
static int summary_to_info(const cJSON *j, ReportSummaryInfo *info, uint64_t **ret_per_cpu) {
        const cJSON *samples = cJSON_GetObjectItemCaseSensitive(j, "samples");
        const cJSON *per_cpu = cJSON_GetObjectItemCaseSensitive(samples, "perCpu"), *c;
        uint64_t *pc = NULL;
        size_t n = 0;

        if (!cJSON_IsObject(j))
                return -EBADMSG;
        info->session_id = json_string(j, "session");
        info->profile = json_string(j, "profile");
        info->target = json_string(j, "target");
        info->cgroup = json_string(j, "cgroup");
        info->namespace = json_string(j, "namespace");
        info->pod = json_string(j, "pod");
        info->container = json_string(j, "container");
        info->container_id = json_string(j, "containerId");
        info->node = json_string(j, "node");
        info->start_usec = json_u64(j, "startUsec");
        info->end_usec = json_u64(j, "endUsec");
        info->frequency = json_u64(j, "frequency");
        info->event = json_string(j, "event");
        info->requested_event = json_string(j, "requestedEvent");
        info->event_fallback_reason = json_string(j, "eventFallback");
        info->attach_mode = json_string(j, "attachMode");
        info->end_reason = json_string(j, "endReason");
        /* A checkpoint, maybe found interrupted, stays one when re-rendered. */
        info->partial = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "partial"));
        info->interrupted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "interrupted"));
        info->interrupted_reason = info->interrupted ? json_string(j, "interruptedReason") : NULL;
        info->profile_config = json_string(j, "profileConfig");
        info->lost = json_u64(samples, "lost");
        info->excluded = json_u64(samples, "excluded");
        info->collisions = json_u64(j, "collisions");
        info->cpu_usage_source = json_string(samples, "cpuUsageSource");

        /* How the stacks were walked: carried over as the session wrote it. */
        const cJSON *unwind = cJSON_GetObjectItemCaseSensitive(j, "unwind");
        if (cJSON_IsObject(unwind))
                report_unwind_from_json(unwind, &info->unwind);
        const cJSON *usage = cJSON_GetObjectItemCaseSensitive(samples, "cpuUsageSec");
        if (cJSON_IsNumber(usage))
                info->cpu_usage_usec = u64_from_double(usage->valuedouble * 1e6 + 0.5);

        if (cJSON_IsArray(per_cpu)) {
                pc = calloc((size_t) cJSON_GetArraySize(per_cpu) + 1, sizeof(uint64_t));
                if (!pc)
                        return -ENOMEM;
                cJSON_ArrayForEach (c, per_cpu)
                        pc[n++] = cJSON_IsNumber(c) ? u64_from_double(c->valuedouble) : 0;
        }
        info->samples_per_cpu = pc;
        info->n_cpus = n;
        *ret_per_cpu = pc;
        return 0;
}

int report_summary_parse(const char *text, size_t size, ReportSummaryInfo *info, cJSON **ret_tree,
                         uint64_t **ret_per_cpu) {
        cJSON *j = cJSON_ParseWithLength(text, size);
        int r;

        *ret_tree = NULL;
        *ret_per_cpu = NULL;
        if (!j)
                return -EBADMSG;
        r = summary_to_info(j, info, ret_per_cpu);
        if (r < 0) {
                cJSON_Delete(j);
                return r;
        }
        *ret_tree = j;
        return 0;
}

/* What the summary says of symbolization, recomputed from the data. */
static void count_frames(const ProfileData *d, ReportSummaryInfo *info) {
        info->total_frames = info->unsymbolized_frames = 0;
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];
                for (size_t k = 0; k < st->n_frames; k++) {
                        info->total_frames += st->count;
                        if (d->frames[st->frames[k]].kind == FRAME_UNKNOWN)
                                info->unsymbolized_frames += st->count;
                }
        }
}

int report_convert_dir(int dirfd, const char *path, unsigned formats, char **ret_error) {
        _cleanup_(profile_data_freep) ProfileData *d = NULL;
        _cleanup_free_ char *pb = NULL, *summary = NULL, *error = NULL;
        _cleanup_free_ uint64_t *per_cpu = NULL;
        _cleanup_free_ ReportThread *threads = NULL;
        ReportSummaryInfo info = {};
        cJSON *j = NULL;
        size_t size, summary_size;
        int r;

        r = read_full_file_max(dirfd, "profile.pb.gz", 0, &pb, &size);
        if (r >= 0) {
                r = report_read_pprof(pb, size, &d);
                if (r < 0)
                        (void) asprintf(&error, "%s/profile.pb.gz: %s", path, strerror(-r));
        } else if (r == -ENOENT) {
                _cleanup_close_ int fd = openat(dirfd, "profile.folded", O_RDONLY | O_CLOEXEC);
                FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
                if (!f) {
                        r = negative_errno();
                        (void) asprintf(&error, "%s: no profile.pb.gz or profile.folded to read (%s)", path,
                                        strerror(-r));
                } else {
                        TAKE_FD(fd);
                        r = report_read_folded(f, &d);
                        fclose(f);
                        if (r < 0)
                                (void) asprintf(&error, "%s/profile.folded: %s", path, strerror(-r));
                }
        } else
                (void) asprintf(&error, "%s/profile.pb.gz: %s", path, strerror(-r));
        if (r < 0)
                goto finish;

        r = read_full_file_max(dirfd, "summary.json", SUMMARY_MAX, &summary, &summary_size);
        if (r >= 0) {
                r = report_summary_parse(summary, summary_size, &info, &j, &per_cpu);
                if (r < 0) {
                        (void) asprintf(&error, "%s/summary.json: %s", path,
                                        r == -EBADMSG ? "not a cgprof summary" : strerror(-r));
                        goto finish;
                }
                /* An off-CPU session's: its counts and its threads' times
                 * as they were; offcpu.* from the data's off-CPU values. */
                r = report_offcpu_from_json(j, &info.offcpu, &threads);
                if (r < 0) {
                        (void) asprintf(&error, "%s/summary.json: %s", path, strerror(-r));
                        goto finish;
                }
                info.offcpu.wallclock_kept = info.offcpu.enabled && !profile_data_has_threads(d);
        } else if (r != -ENOENT) {
                (void) asprintf(&error, "%s/summary.json: %s", path, strerror(-r));
                goto finish;
        }
        count_frames(d, &info);
        info.report_dir = path;

        r = report_write_dir(dirfd, formats, d, &info);
        if (r < 0)
                (void) asprintf(&error, "%s: failed to write the reports: %s", path, strerror(-r));

finish:
        cJSON_Delete(j);
        if (r < 0 && ret_error)
                *ret_error = TAKE_PTR(error);
        return r;
}
