/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The wall-clock view of an off-CPU session, per thread: summary.json
 * "wallClock" (the kernel's totals of each thread: on CPU, blocked, waiting
 * for a CPU) and wallclock.folded / wallclock.svg (the stacks under
 * "process;thread": CPU samples × period plus off-CPU time, in µs, and per
 * thread its run-queue time and its waits too short to be stacked). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define ADD_OR_ENOMEM(expr)             \
        do {                            \
                if (!(expr))            \
                        return -ENOMEM; \
        } while (0)

int report_summary_add_wallclock(cJSON *root, const ReportSummaryInfo *info) {
        const ReportOffCpuInfo *oc = &info->offcpu;
        cJSON *o, *array;

        if (!oc->enabled || oc->unavailable)
                return 0;
        o = cJSON_AddObjectToObject(root, "wallClock");
        if (!o)
                return -ENOMEM;
        array = cJSON_AddArrayToObject(o, "threads");
        if (!array)
                return -ENOMEM;
        for (size_t i = 0; i < oc->n_threads; i++) {
                const ReportThread *t = &oc->threads[i];
                cJSON *e = cJSON_CreateObject();

                if (!e)
                        return -ENOMEM;
                cJSON_AddItemToArray(array, e);
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "pid", t->pid));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "tid", t->tid));
                ADD_OR_ENOMEM(cJSON_AddStringToObject(e, "name", t->name));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "onCpuSec", (double) t->oncpu_ns / 1e9));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "offCpuSec", (double) t->offcpu_ns / 1e9));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "unstackedSec", (double) t->unstacked_ns / 1e9));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "runQueueSec", (double) t->runqueue_ns / 1e9));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(
                        e, "wallSec", (double) (t->oncpu_ns + t->offcpu_ns + t->runqueue_ns) / 1e9));
        }
        return 0;
}

/* The process of pid in d (its last instance), added when none. */
static int process_of(ProfileData *d, uint32_t pid, const char *name, uint32_t *ret) {
        for (size_t i = d->n_processes; i > 0; i--)
                if (d->processes[i - 1].pid == (pid_t) pid) {
                        *ret = (uint32_t) (i - 1);
                        return 0;
                }
        return profile_data_add_process(d, (pid_t) pid, name, NULL, ret);
}

/* A stack "thread;what" of usec µs. */
static int add_leaf(ProfileData *d, uint32_t process, uint32_t thread, const char *what, uint64_t usec) {
        uint32_t frames[2] = { thread };
        int r;

        if (usec == 0)
                return 0;
        r = profile_data_intern_frame(d, what, NULL, FRAME_UNKNOWN, &frames[1]);
        if (r < 0)
                return r;
        return profile_data_add_stack(d, process, frames, 2, usec);
}

int report_wallclock_data(const ProfileData *all, const ReportSummaryInfo *info, ProfileData **ret) {
        uint64_t period_ns = info->frequency > 0 ? NSEC_PER_SEC / info->frequency : 0;
        _cleanup_(profile_data_freep) ProfileData *w = profile_data_wall_clock(all, period_ns);
        int r;

        if (!w)
                return -ENOMEM;
        for (size_t i = 0; i < info->offcpu.n_threads; i++) {
                const ReportThread *t = &info->offcpu.threads[i];
                uint32_t process, thread;

                if (t->runqueue_ns + t->unstacked_ns < NSEC_PER_USEC)
                        continue;
                r = process_of(w, t->pid, t->name, &process);
                if (r < 0)
                        return r;
                r = profile_data_intern_frame(w, t->name, NULL, FRAME_THREAD, &thread);
                if (r < 0)
                        return r;
                r = add_leaf(w, process, thread, REPORT_WALLCLOCK_RUNQUEUE, (t->runqueue_ns + 500) / 1000);
                if (r < 0)
                        return r;
                r = add_leaf(w, process, thread, REPORT_WALLCLOCK_SHORT, (t->unstacked_ns + 500) / 1000);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(w);
        return 0;
}
