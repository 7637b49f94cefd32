/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* summary.json's "cudaLaunches" (gpu.launches, docs/gpu.md): the launches
 * counted per kernel and per stack, and the launch probes attached in
 * which files:
 *   "cudaLaunches": {"total": N,
 *     "kernels": [{"name": "k_alpha(float*, int)", "launches": N}, ...],
 *     "stacks": [{"stack": "comm;main;...;k_alpha(float*, int)", "launches": N}, ...],
 *     "probes": [{"file": "/usr/lib/.../libcudart.so.13", "entryPoints": ["cudaLaunchKernel", ...]}]}
 * kernels and stacks most launches first (ties by name), at most
 * CUDA_SUMMARY_STACKS_MAX stacks; absent when the session counted none
 * and held no probe.
 * And "cudaKernelTime" (gpu.durations): the kernels' GPU time the same way
 * ("totalNs", "kernels": [{"name", "ns"}], "stacks": [{"stack", "ns"}]),
 * with the records received, joined (and their ns), not joined (their
 * launch not seen), dropped (said by the library) and still pending. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "report-stack.h"
#include "report.h"

#define CUDA_SUMMARY_STACKS_MAX 50

typedef struct NamedCount {
        char *name;
        uint64_t count;
} NamedCount;

static int named_count_compare(const void *a, const void *b) {
        const NamedCount *x = a, *y = b;

        if (x->count != y->count)
                return x->count > y->count ? -1 : 1;
        return strcmp(x->name, y->name);
}

static void named_counts_free(NamedCount *a, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(a[i].name);
        free(a);
}

/* Adds count to name's entry (a linear search: few kernels). Takes name. */
static int named_count_add(NamedCount **a, size_t *n, char *name, uint64_t count) {
        NamedCount *b;

        for (size_t i = 0; i < *n; i++)
                if (strcmp((*a)[i].name, name) == 0) {
                        (*a)[i].count += count;
                        free(name);
                        return 0;
                }
        b = reallocarray(*a, *n + 1, sizeof(*b));
        if (!b) {
                free(name);
                return -ENOMEM;
        }
        *a = b;
        (*a)[(*n)++] = (NamedCount){ .name = name, .count = count };
        return 0;
}

/* "comm;frame;...;kernel", as cuda.folded prints it. */
static char *stack_line(const ProfileData *d, const ProfileStack *st) {
        const char *comm = d->processes[st->process].comm;
        char *line = strdup(comm && *comm ? comm : "[unknown]");

        for (uint32_t k = 0; line && k < st->n_frames; k++) {
                const Frame *fr = &d->frames[st->frames[k]];
                _cleanup_free_ char *name = report_frame_name(fr->name, fr->kind == FRAME_KERNEL, true);
                char *n = NULL;

                if (!name || asprintf(&n, "%s;%s", line, name) < 0)
                        n = NULL;
                free(line);
                line = n;
        }
        return line;
}

static int add_counts(cJSON *o, const char *key, const char *name_key, const char *value_key, NamedCount *a,
                      size_t n, size_t max) {
        cJSON *arr = cJSON_AddArrayToObject(o, key);

        if (!arr)
                return -ENOMEM;
        if (n > 0) /* a: NULL when there is none */
                qsort(a, n, sizeof(*a), named_count_compare);
        for (size_t i = 0; i < n && i < max; i++) {
                cJSON *e = cJSON_CreateObject();
                if (!e)
                        return -ENOMEM;
                cJSON_AddItemToArray(arr, e);
                if (!cJSON_AddStringToObject(e, name_key, a[i].name) ||
                    !cJSON_AddNumberToObject(e, value_key, (double) a[i].count))
                        return -ENOMEM;
        }
        return 0;
}

/* Per kernel and per stack: launches, or GPU time ("ns"). */
static int add_launches(cJSON *o, const ProfileData *d, const char *total_key, const char *value_key) {
        NamedCount *kernels = NULL, *stacks = NULL;
        size_t n_kernels = 0, n_stacks = 0;
        uint64_t total = 0;
        int r = 0;

        for (size_t i = 0; d && i < d->n_stacks && r >= 0; i++) {
                const ProfileStack *st = &d->stacks[i];
                char *kernel, *line;

                if (st->count == 0 || st->n_frames == 0)
                        continue;
                total += st->count;
                kernel = strdup(d->frames[st->frames[st->n_frames - 1]].name);
                line = stack_line(d, st);
                if (!kernel || !line) {
                        free(kernel);
                        free(line);
                        r = -ENOMEM;
                        break;
                }
                r = named_count_add(&kernels, &n_kernels, kernel, st->count);
                if (r >= 0)
                        r = named_count_add(&stacks, &n_stacks, line, st->count);
                else
                        free(line);
        }
        if (r >= 0 && !cJSON_AddNumberToObject(o, total_key, (double) total))
                r = -ENOMEM;
        if (r >= 0)
                r = add_counts(o, "kernels", "name", value_key, kernels, n_kernels, SIZE_MAX);
        if (r >= 0)
                r = add_counts(o, "stacks", "stack", value_key, stacks, n_stacks, CUDA_SUMMARY_STACKS_MAX);
        named_counts_free(kernels, n_kernels);
        named_counts_free(stacks, n_stacks);
        return r;
}

static int add_probes(cJSON *o, char *const *probes) {
        cJSON *arr = cJSON_AddArrayToObject(o, "probes");

        if (!arr)
                return -ENOMEM;
        for (size_t i = 0; probes && probes[i] && probes[i + 1]; i += 2) {
                cJSON *e = cJSON_CreateObject(), *entries;
                if (!e)
                        return -ENOMEM;
                cJSON_AddItemToArray(arr, e);
                if (!cJSON_AddStringToObject(e, "file", probes[i]))
                        return -ENOMEM;
                entries = cJSON_AddArrayToObject(e, "entryPoints");
                if (!entries)
                        return -ENOMEM;
                for (const char *p = probes[i + 1]; *p;) {
                        size_t l = strcspn(p, ",");
                        _cleanup_free_ char *name = strndup(p, l);
                        cJSON *s = name ? cJSON_CreateString(name) : NULL;
                        if (!s)
                                return -ENOMEM;
                        cJSON_AddItemToArray(entries, s);
                        p += l + (p[l] == ',');
                }
        }
        return 0;
}

static int add_cuda_launches(cJSON *root, const ReportSummaryInfo *info) {
        cJSON *o;
        int r;

        if (!info->launches && !(info->cuda_probes && info->cuda_probes[0]))
                return 0;
        o = cJSON_AddObjectToObject(root, "cudaLaunches");
        if (!o)
                return -ENOMEM;
        r = add_launches(o, info->launches, "total", "launches");
        if (r < 0)
                return r;
        return add_probes(o, info->cuda_probes);
}

static int add_cuda_time(cJSON *root, const ReportSummaryInfo *info) {
        const ReportCudaTimeInfo *t = &info->cuda_time;
        cJSON *o;

        if (!t->enabled)
                return 0;
        o = cJSON_AddObjectToObject(root, "cudaKernelTime");
        if (!o || !cJSON_AddNumberToObject(o, "records", (double) t->records) ||
            !cJSON_AddNumberToObject(o, "joined", (double) t->joined) ||
            !cJSON_AddNumberToObject(o, "joinedNs", (double) t->joined_ns) ||
            !cJSON_AddNumberToObject(o, "notJoined", (double) t->not_joined) ||
            !cJSON_AddNumberToObject(o, "notJoinedNs", (double) t->not_joined_ns) ||
            !cJSON_AddNumberToObject(o, "dropped", (double) t->dropped) ||
            !cJSON_AddNumberToObject(o, "pending", (double) t->pending))
                return -ENOMEM;
        return add_launches(o, t->data, "totalNs", "ns");
}

int report_summary_add_cuda(cJSON *root, const ReportSummaryInfo *info) {
        int r = add_cuda_launches(root, info);

        return r < 0 ? r : add_cuda_time(root, info);
}
