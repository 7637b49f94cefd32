/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One view across the ranks of a distributed job (report-by-rank.h). */
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "report-by-rank.h"

/* The built-in patterns of each category (docs/training-jobs.md). */
static const char *const builtin_communication[] = {
        "^gloo::", "^c10d::", "[Nn][Cc][Cc][Ll]", "^P?MPI_", "ProcessGroup", "/torch/distributed/", NULL,
};
static const char *const builtin_data_loading[] = {
        "DataLoader", "_worker_loop", "__getitem__", "DatasetFetcher", "collate", "/torch/utils/data/", NULL,
};
static const char *const builtin_compute[] = {
        "^at::",
        "^torch::autograd::",
        "^autograd::",
        "^c10::",
        "gemm",
        "^mkl",
        "^dnnl",
        "mkldnn",
        "^cublas",
        "^cudnn",
        "/torch/nn/",
        "/torch/optim/",
        "/torch/autograd/",
        "/torch/_tensor.py",
        NULL,
};

static const char *const category_names[_RANK_CATEGORY_MAX] = {
        [RANK_CATEGORY_COMMUNICATION] = "communication",
        [RANK_CATEGORY_DATA_LOADING] = "dataLoading",
        [RANK_CATEGORY_COMPUTE] = "compute",
        [RANK_CATEGORY_OTHER] = "other",
};

const char *rank_category_to_string(RankCategory c) {
        return c >= 0 && c < _RANK_CATEGORY_MAX ? category_names[c] : NULL;
}

RankCategory rank_category_from_string(const char *s) {
        for (RankCategory c = 0; c < _RANK_CATEGORY_MAX; c++)
                if (streq_ptr(s, category_names[c]))
                        return c;
        return _RANK_CATEGORY_MAX;
}

typedef struct RankStats {
        int32_t rank;
        uint64_t processes, workers;
        uint64_t samples, category_samples[_RANK_CATEGORY_MAX];
        double seconds, category_seconds[_RANK_CATEGORY_MAX];
} RankStats;

typedef struct FunctionStats {
        char *name;
        double *seconds; /* per rank slot (samples when no frequency is known) */
        size_t n;
} FunctionStats;

DEFINE_STRING_HASHMAP(FunctionMap, function_map, FunctionStats);

struct ByRank {
        regex_t *patterns[RANK_CATEGORY_OTHER];
        size_t n_patterns[RANK_CATEGORY_OTHER];
        RankStats *ranks;
        size_t n_ranks;
        FunctionMap functions;
        bool have_seconds;
};

static void function_free(FunctionStats *f) {
        if (!f)
                return;
        free(f->name);
        free(f->seconds);
        free(f);
}

ByRank *by_rank_free(ByRank *b) {
        if (!b)
                return NULL;
        for (size_t c = 0; c < RANK_CATEGORY_OTHER; c++) {
                for (size_t i = 0; i < b->n_patterns[c]; i++)
                        regfree(&b->patterns[c][i]);
                free(b->patterns[c]);
        }
        function_map_clear(&b->functions, function_free);
        free(b->ranks);
        free(b);
        return NULL;
}

static int add_pattern(ByRank *b, RankCategory c, const char *source, char **ret_error) {
        regex_t *a = reallocarray(b->patterns[c], b->n_patterns[c] + 1, sizeof(regex_t));

        if (!a)
                return -ENOMEM;
        b->patterns[c] = a;
        if (regcomp(&a[b->n_patterns[c]], source, REG_EXTENDED | REG_NOSUB) != 0) {
                if (ret_error)
                        (void) asprintf(ret_error, "%s: invalid pattern \"%s\"", category_names[c], source);
                return -EINVAL;
        }
        b->n_patterns[c]++;
        return 0;
}

int by_rank_new(const RankPatterns *patterns, ByRank **ret, char **ret_error) {
        static const char *const *const builtin[RANK_CATEGORY_OTHER] = {
                [RANK_CATEGORY_COMMUNICATION] = builtin_communication,
                [RANK_CATEGORY_DATA_LOADING] = builtin_data_loading,
                [RANK_CATEGORY_COMPUTE] = builtin_compute,
        };
        _cleanup_(by_rank_freep) ByRank *b = calloc(1, sizeof(ByRank));
        int r;

        if (!b)
                return -ENOMEM;
        for (RankCategory c = 0; c < RANK_CATEGORY_OTHER; c++) {
                for (const char *const *p = builtin[c]; *p; p++) {
                        r = add_pattern(b, c, *p, ret_error);
                        if (r < 0)
                                return r;
                }
                for (char *const *p = patterns ? patterns->extra[c] : NULL; p && *p; p++) {
                        r = add_pattern(b, c, *p, ret_error);
                        if (r < 0)
                                return r;
                }
        }
        *ret = TAKE_PTR(b);
        return 0;
}

size_t by_rank_n_ranks(const ByRank *b) {
        return b ? b->n_ranks : 0;
}

static RankStats *rank_slot(ByRank *b, int32_t rank, size_t *ret_index) {
        RankStats *a;

        for (size_t i = 0; i < b->n_ranks; i++)
                if (b->ranks[i].rank == rank) {
                        *ret_index = i;
                        return &b->ranks[i];
                }
        a = reallocarray(b->ranks, b->n_ranks + 1, sizeof(RankStats));
        if (!a)
                return NULL;
        b->ranks = a;
        a[b->n_ranks] = (RankStats){ .rank = rank };
        *ret_index = b->n_ranks;
        return &a[b->n_ranks++];
}

/* The categories a frame matches, as a bit mask. */
static unsigned frame_categories(const ByRank *b, const Frame *f) {
        unsigned mask = 0;

        for (RankCategory c = 0; c < RANK_CATEGORY_OTHER; c++)
                for (size_t i = 0; i < b->n_patterns[c]; i++)
                        if ((f->name && regexec(&b->patterns[c][i], f->name, 0, NULL, 0) == 0) ||
                            (f->file && regexec(&b->patterns[c][i], f->file, 0, NULL, 0) == 0)) {
                                mask |= 1u << c;
                                break;
                        }
        return mask;
}

static int function_add(ByRank *b, const char *name, size_t slot, double value) {
        FunctionStats *f = function_map_get(&b->functions, name);
        int r;

        if (!f) {
                f = calloc(1, sizeof(*f));
                if (!f || !(f->name = strdup(name))) {
                        function_free(f);
                        return -ENOMEM;
                }
                r = function_map_put(&b->functions, f->name, f);
                if (r < 0) {
                        function_free(f);
                        return r;
                }
        }
        if (slot >= f->n) {
                double *a = reallocarray(f->seconds, slot + 1, sizeof(double));
                if (!a)
                        return -ENOMEM;
                memset(a + f->n, 0, (slot + 1 - f->n) * sizeof(double));
                f->seconds = a;
                f->n = slot + 1;
        }
        f->seconds[slot] += value;
        return 0;
}

/* One stack's count: its rank's category, and each function in it once. */
static int add_stack(ByRank *b, const ProfileData *d, const ProfileStack *st, const unsigned *masks,
                     uint64_t *seen, uint64_t stamp, size_t slot, bool worker, double seconds) {
        RankStats *rs = &b->ranks[slot];
        unsigned mask = worker ? 1u << RANK_CATEGORY_DATA_LOADING : 0;
        RankCategory c = RANK_CATEGORY_OTHER;
        double value = b->have_seconds ? seconds : (double) st->count;
        int r;

        for (uint32_t k = 0; k < st->n_frames; k++) {
                uint32_t fi = st->frames[k];

                mask |= masks[fi];
                if (seen[fi] == stamp || d->frames[fi].kind == FRAME_UNKNOWN)
                        continue;
                seen[fi] = stamp;
                r = function_add(b, d->frames[fi].name, slot, value);
                if (r < 0)
                        return r;
        }
        for (RankCategory k = 0; k < RANK_CATEGORY_OTHER; k++)
                if (mask & (1u << k)) {
                        c = k;
                        break;
                }
        rs->samples += st->count;
        rs->category_samples[c] += st->count;
        rs->seconds += seconds;
        rs->category_seconds[c] += seconds;
        return 0;
}

int by_rank_add(ByRank *b, const ProfileData *d, uint64_t frequency) {
        _cleanup_free_ unsigned *masks = NULL;
        _cleanup_free_ uint64_t *seen = NULL;
        _cleanup_free_ size_t *slots = NULL;
        int r;

        if (!b || !d)
                return -EINVAL;
        if (frequency > 0)
                b->have_seconds = true;
        masks = calloc(MAX(d->n_frames, (size_t) 1), sizeof(unsigned));
        seen = calloc(MAX(d->n_frames, (size_t) 1), sizeof(uint64_t));
        slots = calloc(MAX(d->n_processes, (size_t) 1), sizeof(size_t));
        if (!masks || !seen || !slots)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_frames; i++)
                masks[i] = frame_categories(b, &d->frames[i]);
        for (size_t i = 0; i < d->n_processes; i++) {
                const ProfileProcess *p = &d->processes[i];
                RankStats *rs;

                slots[i] = SIZE_MAX;
                if (p->job.rank < 0)
                        continue;
                rs = rank_slot(b, p->job.rank, &slots[i]);
                if (!rs)
                        return -ENOMEM;
                rs->processes++;
                if (p->role == JOB_ROLE_WORKER)
                        rs->workers++;
        }
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];

                if (st->count == 0 || st->process >= d->n_processes || slots[st->process] == SIZE_MAX)
                        continue;
                r = add_stack(b, d, st, masks, seen, i + 1, slots[st->process],
                              d->processes[st->process].role == JOB_ROLE_WORKER,
                              frequency > 0 ? (double) st->count / (double) frequency : 0);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void cjson_deletep(cJSON **j) {
        if (*j)
                cJSON_Delete(*j);
}

static int rank_compare(const void *a, const void *b) {
        return CMP(((const RankStats *) a)->rank, ((const RankStats *) b)->rank);
}

/* The value a rank's figures are compared by: seconds, or samples. */
static double rank_value(const ByRank *b, const RankStats *r, RankCategory c) {
        if (c == _RANK_CATEGORY_MAX)
                return b->have_seconds ? r->seconds : (double) r->samples;
        return b->have_seconds ? r->category_seconds[c] : (double) r->category_samples[c];
}

typedef struct Difference {
        const FunctionStats *f;
        double spread, score;
        size_t top; /* the rank slot with the most */
} Difference;

static int difference_compare(const void *a, const void *b) {
        const Difference *x = a, *y = b;
        int r = CMP(y->score, x->score);
        return r != 0 ? r : strcmp(x->f->name, y->f->name);
}

#define DIFFERENCES_MAX 10

/* The functions whose time differs most between the ranks: by spread (max
 * - min) times spread / max, so that a function one rank alone runs
 * weighs more than one every rank runs, one of them more. */
static size_t differences(const ByRank *b, Difference **ret) {
        size_t n = 0, k = function_map_size(&b->functions);
        Difference *l;
        FunctionStats *f;

        *ret = NULL;
        if (b->n_ranks < 2 || k == 0)
                return 0;
        l = calloc(k, sizeof(Difference));
        if (!l)
                return 0;
        HASHMAP_FOREACH (f, function_map, &b->functions) {
                double lo = 0, hi = 0;
                size_t top = 0;
                for (size_t i = 0; i < b->n_ranks; i++) {
                        double v = i < f->n ? f->seconds[i] : 0;
                        lo = i == 0 ? v : MIN(lo, v);
                        if (i == 0 || v > hi) {
                                hi = v;
                                top = i;
                        }
                }
                if (hi <= 0 || hi - lo <= 0)
                        continue;
                l[n++] = (Difference){
                        .f = f, .spread = hi - lo, .score = (hi - lo) * (hi - lo) / hi, .top = top
                };
        }
        qsort(l, n, sizeof(Difference), difference_compare);
        *ret = l;
        return MIN(n, (size_t) DIFFERENCES_MAX);
}

/* The rank with the most work (compute and data loading), the others'
 * mean of it, and the category where its excess is largest. */
static bool straggler(const ByRank *b, size_t *ret_slot, double *ret_excess, RankCategory *ret_category) {
        size_t top = 0;
        double best = -1, excess = 0, cat_excess = -1;
        RankCategory cat = RANK_CATEGORY_COMPUTE;

        if (b->n_ranks < 2)
                return false;
        for (size_t i = 0; i < b->n_ranks; i++) {
                double v = rank_value(b, &b->ranks[i], RANK_CATEGORY_COMPUTE) +
                           rank_value(b, &b->ranks[i], RANK_CATEGORY_DATA_LOADING);
                if (v > best) {
                        best = v;
                        top = i;
                }
        }
        for (RankCategory c = 0; c < RANK_CATEGORY_OTHER; c++) {
                double others = 0, d;
                for (size_t i = 0; i < b->n_ranks; i++)
                        if (i != top)
                                others += rank_value(b, &b->ranks[i], c);
                d = rank_value(b, &b->ranks[top], c) - others / (double) (b->n_ranks - 1);
                if (c != RANK_CATEGORY_COMMUNICATION && d > cat_excess) {
                        cat_excess = d;
                        cat = c;
                }
                if (c != RANK_CATEGORY_COMMUNICATION)
                        excess += d;
        }
        *ret_slot = top;
        *ret_excess = excess;
        *ret_category = cat;
        return true;
}

static double round2(double x) {
        return (double) (int64_t) (x * 100.0 + (x >= 0 ? 0.5 : -0.5)) / 100.0;
}

static cJSON *category_object(const ByRank *b, const RankStats *r, bool shares) {
        cJSON *o = cJSON_CreateObject();

        for (RankCategory c = 0; o && c < _RANK_CATEGORY_MAX; c++) {
                double v = shares ? (r->samples > 0
                                             ? 100.0 * (double) r->category_samples[c] / (double) r->samples
                                             : 0)
                                  : r->category_seconds[c];
                if (!cJSON_AddNumberToObject(o, category_names[c], round2(v))) {
                        cJSON_Delete(o);
                        return NULL;
                }
        }
        return o;
}

#define ADD_OR_ENOMEM(x)                \
        do {                            \
                if (!(x))               \
                        return -ENOMEM; \
        } while (0)

static int json_ranks(const ByRank *b, cJSON *root) {
        cJSON *ranks = cJSON_AddArrayToObject(root, "ranks");
        _cleanup_free_ RankStats *sorted = calloc(MAX(b->n_ranks, (size_t) 1), sizeof(RankStats));

        ADD_OR_ENOMEM(ranks);
        ADD_OR_ENOMEM(sorted);
        memcpy(sorted, b->ranks, b->n_ranks * sizeof(RankStats));
        qsort(sorted, b->n_ranks, sizeof(RankStats), rank_compare);
        for (size_t i = 0; i < b->n_ranks; i++) {
                const RankStats *r = &sorted[i];
                cJSON *o = cJSON_CreateObject(), *x;

                ADD_OR_ENOMEM(o);
                cJSON_AddItemToArray(ranks, o);
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "rank", r->rank));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "processes", (double) r->processes));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "workers", (double) r->workers));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "samples", (double) r->samples));
                if (b->have_seconds)
                        ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "cpuSeconds", round2(r->seconds)));
                x = category_object(b, r, true);
                ADD_OR_ENOMEM(x);
                cJSON_AddItemToObject(o, "shares", x);
                if (b->have_seconds) {
                        x = category_object(b, r, false);
                        ADD_OR_ENOMEM(x);
                        cJSON_AddItemToObject(o, "seconds", x);
                }
        }
        return 0;
}

static int json_differences(const ByRank *b, cJSON *root) {
        _cleanup_free_ Difference *l = NULL;
        size_t n = differences(b, &l);
        cJSON *a = cJSON_AddArrayToObject(root, "differences");

        ADD_OR_ENOMEM(a);
        for (size_t i = 0; i < n; i++) {
                cJSON *o = cJSON_CreateObject(), *per;
                char key[16];

                ADD_OR_ENOMEM(o);
                cJSON_AddItemToArray(a, o);
                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "function", l[i].f->name));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "rank", b->ranks[l[i].top].rank));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, b->have_seconds ? "spreadSeconds" : "spreadSamples",
                                                      round2(l[i].spread)));
                per = cJSON_AddObjectToObject(o, b->have_seconds ? "seconds" : "samples");
                ADD_OR_ENOMEM(per);
                for (size_t k = 0; k < b->n_ranks; k++) {
                        snprintf(key, sizeof(key), "%" PRIi32, b->ranks[k].rank);
                        ADD_OR_ENOMEM(cJSON_AddNumberToObject(
                                per, key, round2(k < l[i].f->n ? l[i].f->seconds[k] : 0)));
                }
        }
        return 0;
}

int by_rank_json(const ByRank *b, cJSON **ret) {
        _cleanup_(cjson_deletep) cJSON *root = cJSON_CreateObject();
        cJSON *cats;
        size_t top;
        double excess;
        RankCategory cat;
        int r;

        if (!root)
                return -ENOMEM;
        cats = cJSON_AddArrayToObject(root, "categories");
        ADD_OR_ENOMEM(cats);
        for (RankCategory c = 0; c < _RANK_CATEGORY_MAX; c++)
                cJSON_AddItemToArray(cats, cJSON_CreateString(category_names[c]));
        r = json_ranks(b, root);
        if (r >= 0)
                r = json_differences(b, root);
        if (r < 0)
                return r;
        if (straggler(b, &top, &excess, &cat)) {
                cJSON *o = cJSON_AddObjectToObject(root, "straggler");
                ADD_OR_ENOMEM(o);
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, "rank", b->ranks[top].rank));
                ADD_OR_ENOMEM(cJSON_AddNumberToObject(o, b->have_seconds ? "excessSeconds" : "excessSamples",
                                                      round2(excess)));
                ADD_OR_ENOMEM(cJSON_AddStringToObject(o, "category", category_names[cat]));
        }
        *ret = TAKE_PTR(root);
        return 0;
}

/* The slot of a rank in the function table. */
static size_t rank_slot_of(const ByRank *b, int32_t rank) {
        for (size_t i = 0; i < b->n_ranks; i++)
                if (b->ranks[i].rank == rank)
                        return i;
        return SIZE_MAX;
}

int by_rank_print(const ByRank *b, FILE *f) {
        _cleanup_free_ Difference *l = NULL;
        _cleanup_free_ RankStats *sorted = NULL;
        size_t n, top;
        double excess;
        RankCategory cat;

        if (b->n_ranks == 0) {
                fputs("No ranked processes (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID).\n", f);
                return 0;
        }
        sorted = calloc(b->n_ranks, sizeof(RankStats));
        if (!sorted)
                return -ENOMEM;
        memcpy(sorted, b->ranks, b->n_ranks * sizeof(RankStats));
        qsort(sorted, b->n_ranks, sizeof(RankStats), rank_compare);
        fprintf(f, "%-6s %9s %8s %9s %8s %8s %8s %8s\n", "RANK", "PROCESSES", "SAMPLES",
                b->have_seconds ? "CPU-S" : "", "COMM%", "DATA%", "COMPUTE%", "OTHER%");
        for (size_t i = 0; i < b->n_ranks; i++) {
                const RankStats *r = &sorted[i];
                double s = r->samples > 0 ? 100.0 / (double) r->samples : 0;

                fprintf(f, "%-6" PRIi32 " %9" PRIu64 " %8" PRIu64, r->rank, r->processes, r->samples);
                if (b->have_seconds)
                        fprintf(f, " %9.2f", r->seconds);
                else
                        fprintf(f, " %9s", "");
                fprintf(f, " %8.1f %8.1f %8.1f %8.1f\n",
                        s * (double) r->category_samples[RANK_CATEGORY_COMMUNICATION],
                        s * (double) r->category_samples[RANK_CATEGORY_DATA_LOADING],
                        s * (double) r->category_samples[RANK_CATEGORY_COMPUTE],
                        s * (double) r->category_samples[RANK_CATEGORY_OTHER]);
        }
        if (straggler(b, &top, &excess, &cat))
                fprintf(f,
                        "\nStraggler: rank %" PRIi32
                        " (%+.2f %s of compute and data loading over the others' mean, most in %s)\n",
                        b->ranks[top].rank, excess, b->have_seconds ? "s" : "samples", category_names[cat]);
        n = differences(b, &l);
        if (n > 0)
                fputs("\nFunctions that differ most between ranks:\n", f);
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "  %-40s rank %-4" PRIi32 " %+.2f %s (", l[i].f->name, b->ranks[l[i].top].rank,
                        l[i].spread, b->have_seconds ? "s" : "samples");
                for (size_t k = 0; k < b->n_ranks; k++) {
                        size_t slot = rank_slot_of(b, sorted[k].rank);
                        fprintf(f, "%s%" PRIi32 ": %.2f", k > 0 ? ", " : "", sorted[k].rank,
                                slot < l[i].f->n ? l[i].f->seconds[slot] : 0);
                }
                fputs(")\n", f);
        }
        return ferror(f) ? -EIO : 0;
}
