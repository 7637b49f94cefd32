/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* summary.json "offCpu" (profile "events" with "offcpu"): what the off-CPU
 * time was, where the code waited (its innermost user or Python frame),
 * why (the kernel function it blocked in), per process on and off CPU (a
 * wall-clock view), and how much was not attributed to a stack, and why. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define OFFCPU_TOP 20

#define ADD_OR_ENOMEM(expr)             \
        do {                            \
                if (!(expr))            \
                        return -ENOMEM; \
        } while (0)

static bool frame_in_kernel(const Frame *f) {
        return f->kind == FRAME_KERNEL || (f->module && streq(f->module, "[kernel.kallsyms]"));
}

/* The scheduler's own frames, under every wait: not a reason. */
static bool frame_is_scheduler(const char *name) {
        static const char *const prefixes[] = {
                "__schedule",    "schedule",           "preempt_schedule", "io_schedule",  "__cond_resched",
                "_cond_resched", "finish_task_switch", "__switch_to",      "__traceiter_", "__bpf_trace_",
        };
        for (size_t i = 0; i < ELEMENTSOF(prefixes); i++)
                if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
                        return true;
        return strstr(name, "schedule_timeout") || strstr(name, "schedule_hrtimeout");
}

/* The reason of a stack (root first: kernel frames last), PROFILE_NONE:
 * no kernel frame but the scheduler's. */
uint32_t report_offcpu_reason(const ProfileData *d, const ProfileStack *st) {
        for (uint32_t k = st->n_frames; k > 0; k--) {
                const Frame *f = d->frames + st->frames[k - 1];
                if (!frame_in_kernel(f))
                        return PROFILE_NONE;
                if (!frame_is_scheduler(f->name))
                        return st->frames[k - 1];
        }
        return PROFILE_NONE;
}

/* The innermost frame outside the kernel, PROFILE_NONE: none. */
static uint32_t innermost_user(const ProfileData *d, const ProfileStack *st) {
        for (uint32_t k = st->n_frames; k > 0; k--)
                if (!frame_in_kernel(d->frames + st->frames[k - 1]))
                        return st->frames[k - 1];
        return PROFILE_NONE;
}

typedef struct Weighted {
        uint32_t frame;
        uint64_t usec;
} Weighted;

static int weighted_compare(const void *a, const void *b) {
        const Weighted *x = a, *y = b;
        return x->usec < y->usec   ? 1
               : x->usec > y->usec ? -1
                                   : (x->frame > y->frame) - (x->frame < y->frame);
}

/* "name": [{"name", "module", "usec", "percent"}], by the frame pick()
 * gives each stack, the largest first. */
static int add_by_frame(cJSON *o, const char *name, const ProfileData *d,
                        uint32_t (*pick)(const ProfileData *, const ProfileStack *), uint64_t total) {
        _cleanup_free_ Weighted *w = calloc(d->n_frames + 1, sizeof(Weighted));
        cJSON *array;
        size_t n = 0;

        if (!w)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_stacks; i++) {
                uint32_t f = pick(d, d->stacks + i);
                w[f == PROFILE_NONE ? d->n_frames : f].usec += d->stacks[i].count;
        }
        for (size_t i = 0; i <= d->n_frames; i++)
                if (w[i].usec > 0)
                        w[n++] = (Weighted){ .frame = (uint32_t) i, .usec = w[i].usec };
        qsort(w, n, sizeof(Weighted), weighted_compare);

        array = cJSON_AddArrayToObject(o, name);
        if (!array)
                return -ENOMEM;
        for (size_t i = 0; i < n && i < OFFCPU_TOP; i++) {
                const Frame *fr = w[i].frame < d->n_frames ? d->frames + w[i].frame : NULL;
                cJSON *e = cJSON_CreateObject();

                if (!e)
                        return -ENOMEM;
                cJSON_AddItemToArray(array, e);
                ADD_OR_ENOMEM(cJSON_AddStringToObject(e, "name", fr ? fr->name : "[unknown]"));
                ADD_OR_ENOMEM(fr && fr->module ? cJSON_AddStringToObject(e, "module", fr->module)
                                               : cJSON_AddNullToObject(e, "module"));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "usec", (double) w[i].usec));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(
                        e, "percent", total > 0 ? 100.0 * (double) w[i].usec / (double) total : 0.0));
        }
        return 0;
}

/* "processes": per process, CPU time (samples x period) and off-CPU time:
 * together its threads' wall-clock time, less what was not attributed. */
static int add_processes(cJSON *o, const ProfileData *all, const ReportSummaryInfo *info) {
        uint64_t period_ns = info->frequency > 0 ? NSEC_PER_SEC / info->frequency : 0;
        _cleanup_free_ uint64_t *off = calloc(all->n_processes + 1, sizeof(uint64_t)),
                                *on = calloc(all->n_processes + 1, sizeof(uint64_t));
        cJSON *array;

        if (!off || !on)
                return -ENOMEM;
        for (size_t i = 0; i < all->n_stacks; i++) {
                off[all->stacks[i].process] += all->stacks[i].offcpu_ns;
                on[all->stacks[i].process] += all->stacks[i].count * period_ns;
        }
        array = cJSON_AddArrayToObject(o, "processes");
        if (!array)
                return -ENOMEM;
        for (size_t i = 0; i < all->n_processes; i++) {
                cJSON *e;

                if (off[i] == 0 && on[i] == 0)
                        continue;
                e = cJSON_CreateObject();
                if (!e)
                        return -ENOMEM;
                cJSON_AddItemToArray(array, e);
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "pid", all->processes[i].pid));
                ADD_OR_ENOMEM(cJSON_AddStringToObject(e, "comm", all->processes[i].comm ?: ""));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "onCpuSec", (double) on[i] / 1e9));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "offCpuSec", (double) off[i] / 1e9));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(e, "wallSec", (double) (on[i] + off[i]) / 1e9));
        }
        return 0;
}

int report_summary_add_offcpu(cJSON *root, const ProfileData *all, const ReportSummaryInfo *info) {
        const ReportOffCpuInfo *oc = &info->offcpu;
        uint64_t total;
        cJSON *o;
        int r;

        if (!oc->enabled)
                return 0;
        o = cJSON_AddObjectToObject(root, "offCpu");
        if (!o)
                return -ENOMEM;
        ADD_OR_ENOMEM(oc->unavailable ? cJSON_AddStringToObject(o, "unavailable", oc->unavailable)
                                      : cJSON_AddNullToObject(o, "unavailable"));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "minUsec", (double) oc->min_usec));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "probability", oc->probability));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "recordedWaits", (double) oc->recorded));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "recordedSec", (double) oc->recorded_ns / 1e9));
        /* Where a wait's user stack is taken: on the thread's way back to
         * user mode ("task-work" or "sys_exit"); of the waits, those taken
         * at its next switch-out instead (it blocked again first, or its
         * task work had not run yet). */
        if (oc->record_at)
                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "recordAt", oc->record_at));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "recordedAtSwitchOut", (double) oc->recorded_late));
        /* Not attributed to a stack: waits under minUsec, waits lost (the
         * counts map full), and waits of excluded processes. */
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "shortWaits", (double) oc->short_waits));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "shortSec", (double) oc->short_ns / 1e9));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "lostWaits", (double) oc->lost));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "lostSec", (double) oc->lost_ns / 1e9));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "excludedSec", (double) oc->excluded_ns / 1e9));
        /* Preempted, runnable: waiting for a CPU, not blocked (no stack). */
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "runQueueWaits", (double) oc->runqueue));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "runQueueSec", (double) oc->runqueue_ns / 1e9));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(
                o, "unattributedSec", (double) (oc->short_ns + oc->lost_ns + oc->excluded_ns) / 1e9));
        if (!oc->data)
                return 0;
        total = profile_data_total(oc->data);
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "stackedSec", (double) total / 1e6));
        r = add_by_frame(o, "topFunctions", oc->data, innermost_user, total);
        if (r < 0)
                return r;
        r = add_by_frame(o, "topKernelReasons", oc->data, report_offcpu_reason, total);
        if (r < 0)
                return r;
        return add_processes(o, all, info);
}
