/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <time.h>

#include "report-by-rank.h"
#include "report.h"

#define SUMMARY_TOP_FUNCTIONS 20

static void cjson_deletep(cJSON **j) {
        if (*j)
                cJSON_Delete(*j);
}
#define _cleanup_cjson_ _cleanup_(cjson_deletep)

static void cjson_freep(char **p) {
        if (*p)
                cJSON_free(*p);
}

/* cJSON returns NULL when it cannot allocate: fail the whole summary. */
#define ADD_OR_ENOMEM(expr)             \
        do {                            \
                if (!(expr))            \
                        return -ENOMEM; \
        } while (0)

static cJSON *add_string_or_null(cJSON *o, const char *key, const char *value) {
        return value ? cJSON_AddStringToObject(o, key, value) : cJSON_AddNullToObject(o, key);
}

/* RFC 3339, UTC, milliseconds: "2024-05-06T07:08:09.123Z". */
static int format_rfc3339(uint64_t usec, char buf[static 32]) {
        time_t sec = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;
        size_t n;

        if (!gmtime_r(&sec, &tm))
                return -EOVERFLOW;
        n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
        if (n == 0 || n + 6 > 32)
                return -EOVERFLOW;
        (void) snprintf(buf + n, 32 - n, ".%03uZ", (unsigned) ((usec % USEC_PER_SEC) / USEC_PER_MSEC));
        return 0;
}

/* part/whole in percent, rounded half up to 2 decimals; integer arithmetic
 * (no libm, no overflow). */
static double percent(uint64_t part, uint64_t whole) {
        unsigned __int128 hundredths;

        if (whole == 0)
                return 0;
        hundredths = ((unsigned __int128) part * 20000 + whole) / ((unsigned __int128) whole * 2);
        return (double) hundredths / 100.0;
}

static const char *frame_kind_to_string(FrameKind k) {
        switch (k) {
        case FRAME_USER:
                return "user";
        case FRAME_KERNEL:
                return "kernel";
        case FRAME_PYTHON:
                return "python";
        default:
                return "unknown";
        }
}

static int process_compare(const void *a, const void *b, void *userdata) {
        const ProfileData *d = userdata;
        size_t i = *(const size_t *) a, j = *(const size_t *) b;
        const ProfileProcess *x = d->processes + i, *y = d->processes + j;
        int r;

        r = CMP(y->samples, x->samples);
        if (r != 0)
                return r;
        r = CMP(x->pid, y->pid);
        if (r != 0)
                return r;
        r = strcmp(strempty(x->comm), strempty(y->comm));
        if (r != 0)
                return r;
        return CMP(i, j);
}

static int add_samples(cJSON *root, const ProfileData *d, const ReportSummaryInfo *info, uint64_t total) {
        cJSON *samples, *per_cpu;
        uint64_t kernel = 0, expected;

        samples = cJSON_AddObjectToObject(root, "samples");
        if (!samples)
                return -ENOMEM;

        ADD_OR_ENOMEM(cJSON_AddNumberToObject(samples, "total", (double) total));

        per_cpu = cJSON_AddArrayToObject(samples, "perCpu");
        if (!per_cpu)
                return -ENOMEM;
        for (size_t i = 0; info->samples_per_cpu && i < info->n_cpus; i++) {
                cJSON *n = cJSON_CreateNumber((double) info->samples_per_cpu[i]);
                if (!n)
                        return -ENOMEM;
                cJSON_AddItemToArray(per_cpu, n);
                kernel += info->samples_per_cpu[i];
        }

        /* Without overflow: frequency × usec can exceed 2^64. */
        expected =
                (uint64_t) (((unsigned __int128) info->frequency * info->cpu_usage_usec + USEC_PER_SEC / 2) /
                            USEC_PER_SEC);

        ADD_OR_ENOMEM(cJSON_AddNumberToObject(samples, "kernel", (double) kernel));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(samples, "lost", (double) info->lost));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(samples, "excluded", (double) info->excluded));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(samples, "expected", (double) expected));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(samples, "cpuUsageSec",
                                              (double) info->cpu_usage_usec / (double) USEC_PER_SEC));
        if (info->cpu_usage_source)
                ADD_OR_ENOMEM(cJSON_AddStringToObject(samples, "cpuUsageSource", info->cpu_usage_source));
        return 0;
}

static int add_top_functions(cJSON *root, const ProfileData *d, uint64_t total) {
        _cleanup_free_ TopFunction *top = NULL;
        size_t n_top = 0;
        cJSON *array;
        int r;

        r = profile_data_top_functions(d, SUMMARY_TOP_FUNCTIONS, &top, &n_top);
        if (r < 0)
                return r;

        array = cJSON_AddArrayToObject(root, "topFunctions");
        if (!array)
                return -ENOMEM;

        for (size_t i = 0; i < n_top; i++) {
                const Frame *fr = d->frames + top[i].frame;
                cJSON *o = cJSON_CreateObject();

                if (!o)
                        return -ENOMEM;
                cJSON_AddItemToArray(array, o);

                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "name", fr->name));
                ADD_OR_ENOMEM(add_string_or_null(o, "module", fr->module));
                if (fr->file) /* only when known (Go's .gopclntab) */
                        ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "file", fr->file));
                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "kind", frame_kind_to_string(fr->kind)));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "self", (double) top[i].self));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "selfPercent", percent(top[i].self, total)));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "total", (double) top[i].total));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "totalPercent", percent(top[i].total, total)));
        }
        return 0;
}

/* Who the process is in a distributed job: the listed keys that were set
 * (job-identity.h), its role, a worker's parent. */
static int add_process_job(cJSON *o, const ProfileProcess *p) {
        const struct {
                const char *key;
                int32_t value;
        } numbers[] = {
                { "rank", p->job.rank },
                { "localRank", p->job.local_rank },
                { "worldSize", p->job.world_size },
                { "groupRank", p->job.group_rank },
                { "roleRank", p->job.role_rank },
                { "slurmJobId", p->job.slurm_job_id },
        };

        for (size_t i = 0; i < ELEMENTSOF(numbers); i++)
                if (numbers[i].value >= 0)
                        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, numbers[i].key, (double) numbers[i].value));
        if (p->job.run_id[0])
                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "runId", p->job.run_id));
        if (job_role_to_string(p->role))
                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "role", job_role_to_string(p->role)));
        if (p->parent_pid > 0)
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "parentPid", (double) p->parent_pid));
        return 0;
}

static int add_processes(cJSON *root, const ProfileData *d) {
        _cleanup_free_ size_t *order = NULL;
        cJSON *array;
        int r;

        array = cJSON_AddArrayToObject(root, "processes");
        if (!array)
                return -ENOMEM;
        if (d->n_processes == 0)
                return 0;

        order = calloc(d->n_processes, sizeof(size_t));
        if (!order)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_processes; i++)
                order[i] = i;
        qsort_r(order, d->n_processes, sizeof(size_t), process_compare, (void *) d);

        for (size_t i = 0; i < d->n_processes; i++) {
                const ProfileProcess *p = d->processes + order[i];
                cJSON *o = cJSON_CreateObject();

                if (!o)
                        return -ENOMEM;
                cJSON_AddItemToArray(array, o);

                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "pid", (double) p->pid));
                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "comm", strempty(p->comm)));
                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "cmdline", strempty(p->cmdline)));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "samples", (double) p->samples));
                if (p->python)
                        ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "pythonFrames", p->python));
                r = add_process_job(o, p);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* "byRank": one view across the ranks of a distributed job
 * (report-by-rank.h), when some process has a rank. */
static int add_by_rank(cJSON *root, const ProfileData *d, const ReportSummaryInfo *info) {
        _cleanup_(by_rank_freep) ByRank *b = NULL;
        RankPatterns patterns = {};
        cJSON *o = NULL;
        bool ranked = false;
        int r;

        for (size_t i = 0; i < d->n_processes && !ranked; i++)
                ranked = d->processes[i].job.rank >= 0;
        if (!ranked)
                return 0;
        for (size_t i = 0; i < RANK_CATEGORY_OTHER; i++)
                patterns.extra[i] = info->rank_categories[i];
        r = by_rank_new(&patterns, &b, NULL);
        if (r == -EINVAL) /* the config checked them: a report converted with others */
                r = by_rank_new(NULL, &b, NULL);
        if (r < 0)
                return r;
        r = by_rank_add(b, d, info->frequency);
        if (r < 0)
                return r;
        r = by_rank_json(b, &o);
        if (r < 0)
                return r;
        cJSON_AddItemToObject(root, "byRank", o);
        return 0;
}

/* A frame of a stack is a kernel frame when its location's mapping is the
 * kernel's, or (no location) when it is a kernel function. */
static bool stack_frame_is_kernel(const ProfileData *d, const ProfileStack *st, size_t k) {
        if (st->locations) {
                uint32_t m = d->locations[st->locations[k]].mapping;
                if (m != PROFILE_NONE)
                        return d->mappings[m].kernel;
        }
        const Frame *f = &d->frames[st->frames[k]];
        return f->kind == FRAME_KERNEL || streq_ptr(f->module, "[kernel.kallsyms]");
}

/* User frames come first in a root-first stack. */
static size_t stack_user_depth(const ProfileData *d, const ProfileStack *st) {
        size_t n = 0;
        while (n < st->n_frames && !stack_frame_is_kernel(d, st, n))
                n++;
        return n;
}

#define DEPTH_BUCKETS 513 /* 0..511 and "512 or more" (a walk keeps 512 frames) */

/* "stacks": the user-stack depth histogram and the truncated samples. */
static int add_stack_depths(cJSON *root, const ProfileData *d) {
        uint64_t hist[DEPTH_BUCKETS] = {}, truncated = 0, truncated_stacks = 0;
        size_t max_depth = 0;
        cJSON *o, *a;

        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];
                size_t depth = stack_user_depth(d, st);
                hist[MIN(depth, (size_t) DEPTH_BUCKETS - 1)] += st->count;
                max_depth = MAX(max_depth, depth);
                if (st->truncated) {
                        truncated += st->count;
                        truncated_stacks++;
                }
        }

        o = cJSON_AddObjectToObject(root, "stacks");
        if (!o)
                return -ENOMEM;
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "maxUserDepth", (double) max_depth));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "truncatedSamples", (double) truncated));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "truncatedStacks", (double) truncated_stacks));
        a = cJSON_AddArrayToObject(o, "userDepthHistogram");
        if (!a)
                return -ENOMEM;
        for (size_t k = 0; k < DEPTH_BUCKETS; k++) {
                if (hist[k] == 0)
                        continue;
                cJSON *b = cJSON_CreateObject();
                if (!b)
                        return -ENOMEM;
                cJSON_AddItemToArray(a, b);
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(b, "depth", (double) k));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(b, "samples", (double) hist[k]));
        }
        return 0;
}

typedef struct BinaryStats {
        uint64_t frames, unsymbolized; /* frames in the mapping's file, weighted by samples */
        uint64_t table_frames, fp_frames, sp_cfa_frames, fp_cfa_frames; /* summed over the file's mappings */
        const char *unwind_table;
        const char *symbols;
        uint64_t leaf, shallow; /* samples whose innermost user frame is in it; of those, user depth <= 2 */
} BinaryStats;

/* Binaries whose stacks are mostly one or two user frames deep: they likely
 * lack frame pointers, which is why their stacks are flat. */
#define SHALLOW_DEPTH 2
#define SHALLOW_SHARE 0.5
#define SHALLOW_MIN_SAMPLES 20

/* "mappings": per mapped file, how much of it stayed unsymbolized and
 * whether it seems to lack frame pointers. Files are merged across
 * processes by name and build ID. */
static int add_mappings(cJSON *root, const ProfileData *d) {
        _cleanup_free_ BinaryStats *stats = NULL;
        _cleanup_free_ uint32_t *canon = NULL;
        cJSON *a;

        a = cJSON_AddArrayToObject(root, "mappings");
        if (!a)
                return -ENOMEM;
        if (d->n_mappings == 0)
                return 0;

        stats = calloc(d->n_mappings, sizeof(BinaryStats));
        canon = calloc(d->n_mappings, sizeof(uint32_t));
        if (!stats || !canon)
                return -ENOMEM;
        /* One entry per (file, build ID): the first mapping of it. */
        for (size_t i = 0; i < d->n_mappings; i++) {
                canon[i] = (uint32_t) i;
                for (size_t k = 0; k < i; k++)
                        if (canon[k] == k && streq(d->mappings[k].file, d->mappings[i].file) &&
                            streq_ptr(d->mappings[k].build_id, d->mappings[i].build_id)) {
                                canon[i] = (uint32_t) k;
                                break;
                        }
        }

        for (size_t i = 0; i < d->n_mappings; i++) {
                const ProfileMapping *mp = &d->mappings[i];
                BinaryStats *b = &stats[canon[i]];

                b->table_frames += mp->table_frames;
                b->fp_frames += mp->fp_frames;
                b->sp_cfa_frames += mp->sp_cfa_frames;
                b->fp_cfa_frames += mp->fp_cfa_frames;
                if (!b->unwind_table)
                        b->unwind_table = mp->unwind_table;
                if (!b->symbols)
                        b->symbols = mp->symbols;
        }

        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];
                size_t depth;

                if (!st->locations)
                        continue;
                for (size_t k = 0; k < st->n_frames; k++) {
                        uint32_t m = d->locations[st->locations[k]].mapping;
                        if (m == PROFILE_NONE)
                                continue;
                        stats[canon[m]].frames += st->count;
                        if (d->frames[st->frames[k]].kind == FRAME_UNKNOWN)
                                stats[canon[m]].unsymbolized += st->count;
                }
                depth = stack_user_depth(d, st);
                if (depth > 0) {
                        uint32_t m = d->locations[st->locations[depth - 1]].mapping;
                        if (m != PROFILE_NONE) {
                                stats[canon[m]].leaf += st->count;
                                if (depth <= SHALLOW_DEPTH)
                                        stats[canon[m]].shallow += st->count;
                        }
                }
        }

        for (size_t i = 0; i < d->n_mappings; i++) {
                const ProfileMapping *mp = &d->mappings[i];
                const BinaryStats *b = &stats[i];
                cJSON *o;

                if (canon[i] != i || b->frames == 0)
                        continue;
                o = cJSON_CreateObject();
                if (!o)
                        return -ENOMEM;
                cJSON_AddItemToArray(a, o);
                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "file", mp->file));
                ADD_OR_ENOMEM(add_string_or_null(o, "buildId", mp->build_id));
                ADD_OR_ENOMEM(cJSON_AddBoolToObject(o, "kernel", mp->kernel));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "frames", (double) b->frames));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "unsymbolizedShare",
                                                      (double) b->unsymbolized / (double) b->frames));
                if (mp->kernel)
                        continue;
                ADD_OR_ENOMEM(add_string_or_null(o, "symbols", b->symbols));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "leafSamples", (double) b->leaf));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "shallowLeafSamples", (double) b->shallow));
                /* Without frame pointers: where stacks were walked with the
                 * unwind table, its functions compute the CFA from the stack
                 * pointer; where they were walked by frame pointer, its
                 * stacks end early (most leaves at a shallow depth). */
                bool no_fp;
                if (b->unwind_table && strncmp(b->unwind_table, ".gopclntab", strlen(".gopclntab")) == 0)
                        /* Go (amd64, since 1.7) keeps frame pointers; its
                         * rows count from rsp because pcsp is exact. */
                        no_fp = false;
                else if (b->sp_cfa_frames + b->fp_cfa_frames >= SHALLOW_MIN_SAMPLES)
                        no_fp = b->sp_cfa_frames > b->fp_cfa_frames;
                else
                        no_fp = b->leaf >= SHALLOW_MIN_SAMPLES &&
                                (double) b->shallow > SHALLOW_SHARE * (double) b->leaf;
                ADD_OR_ENOMEM(cJSON_AddBoolToObject(o, "likelyNoFramePointers", no_fp));
                if (b->unwind_table || b->table_frames + b->fp_frames > 0) {
                        cJSON *u = cJSON_AddObjectToObject(o, "unwind");
                        if (!u)
                                return -ENOMEM;
                        ADD_OR_ENOMEM(add_string_or_null(u, "table", b->unwind_table));
                        ADD_OR_ENOMEM(cJSON_AddNumberToObject(u, "tableFrames", (double) b->table_frames));
                        ADD_OR_ENOMEM(
                                cJSON_AddNumberToObject(u, "framePointerFrames", (double) b->fp_frames));
                }
        }
        return 0;
}

/* A counter of a summary.json section: the object it is in (NULL: the
 * section itself), its key, and where its uint64_t is in the struct. In
 * the order written; an object is written where its first counter is. */
typedef struct SummaryCounter {
        const char *object;
        const char *key;
        size_t offset;
} SummaryCounter;

#define PYTHON_COUNTER(object, key, field) \
        { object, key, offsetof(ReportPythonInfo, field) }
static const SummaryCounter python_counters[] = {
        PYTHON_COUNTER(NULL, "samples", samples),
        PYTHON_COUNTER(NULL, "withPythonFrames", with_frames),
        PYTHON_COUNTER("walkFailures", "noThreadState", no_thread),
        PYTHON_COUNTER("walkFailures", "noPythonCode", no_frame),
        PYTHON_COUNTER("walkFailures", "notInitialized", not_initialized),
        PYTHON_COUNTER("walkFailures", "readError", read_error),
        PYTHON_COUNTER("walkFailures", "lost", lost),
        PYTHON_COUNTER("walkFailures", "pending", pending),
        PYTHON_COUNTER(NULL, "truncated", truncated),
        PYTHON_COUNTER(NULL, "frames", frames),
        PYTHON_COUNTER(NULL, "unresolvedFrames", unresolved_frames),
};

#define UNWIND_COUNTER(object, key, field) \
        { object, key, offsetof(ReportUnwindInfo, field) }
static const SummaryCounter unwind_counters[] = {
        UNWIND_COUNTER("walks", "tables", table_walks),
        UNWIND_COUNTER("walks", "framePointer", kernel_walks),
        UNWIND_COUNTER("walks", "pending", pending_walks),
        UNWIND_COUNTER("tableWalkEnds", "complete", complete),
        UNWIND_COUNTER("tableWalkEnds", "truncated", truncated),
        UNWIND_COUNTER("tableWalkEnds", "noMapping", no_mapping),
        UNWIND_COUNTER("tableWalkEnds", "noTable", no_table),
        UNWIND_COUNTER("tableWalkEnds", "unsupported", unsupported),
        UNWIND_COUNTER("tableWalkEnds", "readError", read_error),
        UNWIND_COUNTER("tableWalkEnds", "badFrame", bad_frame),
        UNWIND_COUNTER("tableWalkEnds", "framePointerEnd", fp_end),
        UNWIND_COUNTER(NULL, "tablePending", table_pending),
};

static uint64_t *counter_field(const SummaryCounter *c, const void *base) {
        return (uint64_t *) ((uint8_t *) base + c->offset);
}

static int add_counters(cJSON *o, const SummaryCounter *c, size_t n, const void *base) {
        for (size_t i = 0; i < n; i++) {
                cJSON *to = o;

                if (c[i].object) {
                        to = cJSON_GetObjectItemCaseSensitive(o, c[i].object);
                        if (!to)
                                to = cJSON_AddObjectToObject(o, c[i].object);
                        if (!to)
                                return -ENOMEM;
                }
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(to, c[i].key, (double) *counter_field(&c[i], base)));
        }
        return 0;
}

/* "python": how the Python frames of CPython processes were walked. */
static int add_python(cJSON *root, const ReportPythonInfo *p) {
        cJSON *o;

        if (!p->enabled && p->samples == 0)
                return 0; /* off (or a converted report that did not say) */
        o = cJSON_AddObjectToObject(root, "python");
        if (!o)
                return -ENOMEM;
        ADD_OR_ENOMEM(cJSON_AddBoolToObject(o, "enabled", p->enabled));
        return add_counters(o, python_counters, ELEMENTSOF(python_counters), p);
}

/* "unwind": how user stacks were walked, and why table walks ended. */
static int add_unwind(cJSON *root, const ReportUnwindInfo *u) {
        cJSON *o;

        if (!u->mode)
                return 0;
        o = cJSON_AddObjectToObject(root, "unwind");
        if (!o)
                return -ENOMEM;
        ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "mode", u->mode));
        return add_counters(o, unwind_counters, ELEMENTSOF(unwind_counters), u);
}

void report_unwind_from_json(const cJSON *o, ReportUnwindInfo *u) {
        const cJSON *mode = cJSON_GetObjectItemCaseSensitive(o, "mode");

        u->mode = cJSON_IsString(mode) ? mode->valuestring : NULL;
        for (size_t i = 0; i < ELEMENTSOF(unwind_counters); i++) {
                const SummaryCounter *c = &unwind_counters[i];
                /* A counter of no sub-object (tablePending) is o's own. */
                const cJSON *in = c->object ? cJSON_GetObjectItemCaseSensitive(o, c->object) : o;
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(in, c->key);

                *counter_field(c, u) = cJSON_IsNumber(v) ? u64_from_double(v->valuedouble) : 0;
        }
}

static int build_summary(cJSON *root, const ProfileData *d, const ReportSummaryInfo *info) {
        uint64_t total = profile_data_total(d);
        double duration = 0.0, unsymbolized = 0.0;
        char start[32], end[32];
        cJSON *files;
        int r;

        ADD_OR_ENOMEM(add_string_or_null(root, "session", info->session_id));
        ADD_OR_ENOMEM(add_string_or_null(root, "profile", info->profile));
        ADD_OR_ENOMEM(add_string_or_null(root, "target", info->target));
        if (info->profile_config)
                ADD_OR_ENOMEM(cJSON_AddStringToObject(root, "profileConfig", info->profile_config));
        ADD_OR_ENOMEM(add_string_or_null(root, "cgroup", info->cgroup));

        /* Kubernetes metadata only when known (absent on a plain host). */
        if (info->namespace)
                ADD_OR_ENOMEM(cJSON_AddStringToObject(root, "namespace", info->namespace));
        if (info->pod)
                ADD_OR_ENOMEM(cJSON_AddStringToObject(root, "pod", info->pod));
        if (info->container)
                ADD_OR_ENOMEM(cJSON_AddStringToObject(root, "container", info->container));
        if (info->container_id)
                ADD_OR_ENOMEM(cJSON_AddStringToObject(root, "containerId", info->container_id));
        if (info->node)
                ADD_OR_ENOMEM(cJSON_AddStringToObject(root, "node", info->node));

        r = format_rfc3339(info->start_usec, start);
        if (r < 0)
                return r;
        r = format_rfc3339(info->end_usec, end);
        if (r < 0)
                return r;
        ADD_OR_ENOMEM(cJSON_AddStringToObject(root, "start", start));
        ADD_OR_ENOMEM(cJSON_AddStringToObject(root, "end", end));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(root, "startUsec", (double) info->start_usec));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(root, "endUsec", (double) info->end_usec));
        if (info->end_usec > info->start_usec)
                duration = (double) (info->end_usec - info->start_usec) / (double) USEC_PER_SEC;
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(root, "durationSec", duration));

        ADD_OR_ENOMEM(cJSON_AddNumberToObject(root, "frequency", (double) info->frequency));
        ADD_OR_ENOMEM(add_string_or_null(root, "event", info->event));
        ADD_OR_ENOMEM(add_string_or_null(root, "requestedEvent", info->requested_event ?: info->event));
        ADD_OR_ENOMEM(add_string_or_null(root, "eventFallback", info->event_fallback_reason));
        ADD_OR_ENOMEM(add_string_or_null(root, "attachMode", info->attach_mode));
        ADD_OR_ENOMEM(add_string_or_null(root, "endReason", info->end_reason));
        if (info->partial)
                /* A checkpoint: the session still ran when it was written. */
                ADD_OR_ENOMEM(cJSON_AddTrueToObject(root, "partial"));
        if (info->interrupted) {
                /* Only a report re-rendered after recovery marked it. */
                ADD_OR_ENOMEM(cJSON_AddTrueToObject(root, "interrupted"));
                ADD_OR_ENOMEM(add_string_or_null(root, "interruptedReason", info->interrupted_reason));
        }

        r = add_samples(root, d, info, total);
        if (r < 0)
                return r;

        ADD_OR_ENOMEM(cJSON_AddNumberToObject(root, "uniqueStacks", (double) d->n_stacks));
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(root, "collisions", (double) info->collisions));
        if (info->total_frames > 0)
                unsymbolized = (double) info->unsymbolized_frames / (double) info->total_frames;
        ADD_OR_ENOMEM(cJSON_AddNumberToObject(root, "unsymbolizedShare", unsymbolized));

        r = add_top_functions(root, d, total);
        if (r < 0)
                return r;
        r = add_processes(root, d);
        if (r < 0)
                return r;
        r = add_by_rank(root, d, info);
        if (r < 0)
                return r;
        if (info->job_labels && info->job_labels[0]) {
                cJSON *o = cJSON_AddObjectToObject(root, "jobLabels");
                ADD_OR_ENOMEM(o);
                for (size_t i = 0; info->job_labels[i] && info->job_labels[i + 1]; i += 2)
                        ADD_OR_ENOMEM(
                                cJSON_AddStringToObject(o, info->job_labels[i], info->job_labels[i + 1]));
        }
        r = add_stack_depths(root, d);
        if (r < 0)
                return r;
        r = add_mappings(root, d);
        if (r < 0)
                return r;
        r = add_python(root, &info->python);
        if (r < 0)
                return r;
        r = add_unwind(root, &info->unwind);
        if (r < 0)
                return r;
        r = report_summary_add_offcpu(root, d, info);
        if (r >= 0)
                r = report_summary_add_wallclock(root, info);
        if (r < 0)
                return r;
        r = report_summary_add_cuda(root, info);
        if (r < 0)
                return r;
        r = report_summary_add_job(root, info);
        if (r < 0)
                return r;

        ADD_OR_ENOMEM(add_string_or_null(root, "reportDir", info->report_dir));

        files = cJSON_AddArrayToObject(root, "files");
        if (!files)
                return -ENOMEM;
        for (const char *const *i = info->formats; i && *i; i++) {
                cJSON *s = cJSON_CreateString(*i);
                if (!s)
                        return -ENOMEM;
                cJSON_AddItemToArray(files, s);
        }

        return 0;
}

int report_write_summary(FILE *f, const ProfileData *d, const ReportSummaryInfo *info) {
        _cleanup_cjson_ cJSON *root = NULL;
        _cleanup_(cjson_freep) char *text = NULL;
        int r;

        if (!f || !d || !info)
                return -EINVAL;

        root = cJSON_CreateObject();
        if (!root)
                return -ENOMEM;

        r = build_summary(root, d, info);
        if (r < 0)
                return r;

        text = cJSON_Print(root);
        if (!text)
                return -ENOMEM;

        if (fputs(text, f) == EOF || fputc('\n', f) == EOF)
                return negative_errno();
        return 0;
}
