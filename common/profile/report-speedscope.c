/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>

#include "cgprof-version.h"
#include "report.h"
#include "report-stack.h"
#include "template.h"

/* profile.speedscope.json: speedscope's own file format
 * (https://www.speedscope.app/file-format-schema.json), streamed: a profile
 * can have 100k stacks, and a cJSON tree of them would cost many times the
 * file's size.
 *
 *     {"$schema": "...", "exporter": "cgprof@VERSION", "name": LABEL,
 *      "activeProfileIndex": 0,
 *      "shared": {"frames": [{"name": "main", "file": "app"}, ...]},
 *      "profiles": [{"type": "sampled", "name": LABEL, "unit": "nanoseconds",
 *                    "startValue": 0, "endValue": SUM(weights),
 *                    "samples": [[root, ..., leaf], ...], "weights": [...]}]}
 *
 * Choices:
 *   - One sampled profile for the whole session, the process's comm as the
 *     root frame (processes with the same comm share one root frame), as in
 *     profile.folded. So the left-heavy and sandwich views see every process
 *     at once (a function's cost across processes), and the root frames still
 *     split the time by process. One profile per comm would hide that.
 *   - Weights are CPU time in nanoseconds, count x 1e9/frequency rounded to
 *     an integer per sample, as pprof's cpu/nanoseconds: speedscope then
 *     shows times ("1.20s") rather than bare counts. Without a frequency
 *     (info NULL or 0) they are sample counts, unit "none". Samples =
 *     round(weight x frequency / 1e9) exactly, for any realistic frequency.
 *   - Frames: every frame of the data, index for index, then one frame per
 *     distinct comm. "name" is the function ("[unknown]" when empty), kernel
 *     frames suffixed "_[k]" as in profile.folded, "file" the module when
 *     known. Speedscope tells frames apart by index, so a function of two
 *     modules stays two frames.
 *   - Samples are the unique stacks, root first, sorted by their frame names
 *     (then indices), and stacks equal after the comm merge are merged: the
 *     "time order" view, which has no time to show here, becomes a flame
 *     graph of adjacent, merged samples. Stacks without samples are left out.
 *   - Strings are JSON-escaped: '"', '\\' and control characters (as \n, \t,
 *     ... or \u00XX); bytes that are not valid UTF-8 become U+FFFD. */

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

typedef struct SpeedscopeContext {
        const ProfileData *d;
        ReportStackIds ids; /* the frame of each segment: of its comm, then of the frames */
        char **names; /* rendered name of each output frame */
} SpeedscopeContext;

typedef struct SpeedscopeSample {
        size_t stack; /* the first stack of the run */
        uint64_t weight;
} SpeedscopeSample;

static void json_string(FILE *f, const char *s) {
        fputc('"', f);
        for (const char *p = s; *p;) {
                unsigned char c = (unsigned char) *p;
                size_t k;

                if (c >= 0x80) {
                        k = utf8_valid_char_len(p);
                        if (k == 0) {
                                fputs("\\ufffd", f);
                                p++;
                        } else {
                                fwrite(p, 1, k, f);
                                p += k;
                        }
                        continue;
                }

                switch (c) {
                case '"':
                        fputs("\\\"", f);
                        break;
                case '\\':
                        fputs("\\\\", f);
                        break;
                case '\b':
                        fputs("\\b", f);
                        break;
                case '\f':
                        fputs("\\f", f);
                        break;
                case '\n':
                        fputs("\\n", f);
                        break;
                case '\r':
                        fputs("\\r", f);
                        break;
                case '\t':
                        fputs("\\t", f);
                        break;
                default:
                        if (c < 0x20)
                                fprintf(f, "\\u%04x", c);
                        else
                                fputc(c, f);
                }
                p++;
        }
        fputc('"', f);
}

/* Orders stacks by their frame names, root first, a prefix before its
 * extensions; frames of equal names by index. */
static int stack_compare(const void *a, const void *b, void *userdata) {
        const SpeedscopeContext *c = userdata;
        const ProfileStack *x = c->d->stacks + *(const size_t *) a, *y = c->d->stacks + *(const size_t *) b;
        size_t nx = (size_t) x->n_frames + 1, ny = (size_t) y->n_frames + 1;
        size_t k = report_stack_mismatch(&c->ids, x, y);
        uint32_t ix, iy;
        int r;

        if (k == MIN(nx, ny))
                return CMP(nx, ny);
        ix = report_stack_segment(&c->ids, x, k);
        iy = report_stack_segment(&c->ids, y, k);
        r = strcmp(c->names[ix], c->names[iy]);
        return r != 0 ? r : CMP(ix, iy);
}

static int comm_compare(const void *a, const void *b, void *userdata) {
        const ProfileData *d = userdata;
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        int r;

        r = strcmp(strempty(d->processes[x].comm), strempty(d->processes[y].comm));
        return r != 0 ? r : CMP(x, y);
}

/* count samples in the profile's unit: nanoseconds (rounded) with a
 * frequency, else samples. */
static int sample_weight(uint64_t count, uint64_t frequency, uint64_t *ret) {
        unsigned __int128 w;

        if (frequency == 0) {
                *ret = count;
                return 0;
        }
        w = ((unsigned __int128) count * NSEC_PER_SEC + frequency / 2) / frequency;
        if (w > UINT64_MAX)
                return -EOVERFLOW;
        *ret = (uint64_t) w;
        return 0;
}

/* A label for the profile: namespace/pod/container on Kubernetes, else the
 * cgroup, else the target. */
static char *profile_label(const ReportSummaryInfo *info) {
        char *r;

        if (info && info->pod) {
                if (asprintf(&r, "%s/%s%s%s", strempty(info->namespace), info->pod,
                             info->container ? "/" : "", strempty(info->container)) < 0)
                        return NULL;
                return r;
        }
        if (info && info->cgroup)
                return strdup(info->cgroup);
        if (info && info->target)
                return strdup(info->target);
        return strdup("cgprof");
}

static void write_frame(FILE *f, const char *name, const char *file, bool first) {
        fputs(first ? "\n" : ",\n", f);
        fputs("{\"name\":", f);
        json_string(f, name);
        if (file && *file) {
                fputs(",\"file\":", f);
                json_string(f, file);
        }
        fputc('}', f);
}

/* Whether the stacks point at frames and processes of the data. */
static bool stacks_valid(const ProfileData *d) {
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *s = d->stacks + i;

                if (s->process >= d->n_processes || (s->n_frames > 0 && !s->frames))
                        return false;
                for (size_t k = 0; k < s->n_frames; k++)
                        if (s->frames[k] >= d->n_frames)
                                return false;
        }
        return true;
}

/* The rendered name of each frame of the data, index for index. */
static int name_frames(const ProfileData *d, char **names) {
        for (size_t i = 0; i < d->n_frames; i++) {
                names[i] = report_frame_name(d->frames[i].name, d->frames[i].kind == FRAME_KERNEL,
                                             /* folded= */ false);
                if (!names[i])
                        return -ENOMEM;
        }
        return 0;
}

/* One root frame per distinct comm, named after the data's frames. The frame
 * of each process goes to comm_frame, the number of comm frames to *ret.
 * by_comm: room for an index per process. */
static int name_comms(const ProfileData *d, uint32_t *by_comm, char **names, uint32_t *comm_frame,
                      size_t *ret) {
        size_t n_comms = 0;

        for (size_t i = 0; i < d->n_processes; i++)
                by_comm[i] = (uint32_t) i;
        qsort_r(by_comm, d->n_processes, sizeof(uint32_t), comm_compare, (void *) d);
        for (size_t i = 0; i < d->n_processes; i++) {
                const char *comm = strempty(d->processes[by_comm[i]].comm);

                if (i == 0 || !streq(comm, strempty(d->processes[by_comm[i - 1]].comm))) {
                        names[d->n_frames + n_comms] = report_frame_name(comm, false, /* folded= */ false);
                        if (!names[d->n_frames + n_comms])
                                return -ENOMEM;
                        n_comms++;
                }
                comm_frame[by_comm[i]] = (uint32_t) (d->n_frames + n_comms - 1);
        }

        *ret = n_comms;
        return 0;
}

/* The samples: the stacks with samples in order, runs of equal stacks (same
 * comm, same frames) merged. Their number goes to *ret_n, the sum of their
 * weights to *ret_end. order: room for an index per stack. */
static int merge_samples(const SpeedscopeContext *c, uint64_t frequency, size_t *order,
                         SpeedscopeSample *samples, size_t *ret_n, uint64_t *ret_end) {
        const ProfileData *d = c->d;
        size_t n_order = 0, n_samples = 0;
        uint64_t end = 0;
        int r;

        for (size_t i = 0; i < d->n_stacks; i++)
                if (d->stacks[i].count > 0)
                        order[n_order++] = i;
        qsort_r(order, n_order, sizeof(size_t), stack_compare, (void *) c);

        for (size_t i = 0; i < n_order;) {
                const ProfileStack *s = d->stacks + order[i];
                uint64_t count = 0, w;

                for (; i < n_order && report_stack_same(&c->ids, s, d->stacks + order[i]); i++) {
                        if (count > UINT64_MAX - d->stacks[order[i]].count)
                                return -EOVERFLOW;
                        count += d->stacks[order[i]].count;
                }

                r = sample_weight(count, frequency, &w);
                if (r < 0)
                        return r;
                if (end > UINT64_MAX - w)
                        return -EOVERFLOW;
                end += w;
                samples[n_samples++] = (SpeedscopeSample){ .stack = (size_t) (s - d->stacks), .weight = w };
        }

        *ret_n = n_samples;
        *ret_end = end;
        return 0;
}

/* "shared": the data's frames, then the comm frames. */
static void write_frames(FILE *f, const ProfileData *d, char *const *names, size_t n_comms) {
        fputs("\"shared\":{\"frames\":[", f);
        for (size_t i = 0; i < d->n_frames; i++)
                write_frame(f, names[i], d->frames[i].module, i == 0);
        for (size_t i = 0; i < n_comms; i++)
                write_frame(f, names[d->n_frames + i], NULL, d->n_frames + i == 0);
        fputs("\n]},\n", f);
}

/* The profile's "samples", root first, and its "weights". */
static void write_samples(FILE *f, const SpeedscopeContext *c, const SpeedscopeSample *samples,
                          size_t n_samples) {
        fputs("\"samples\":[", f);
        for (size_t i = 0; i < n_samples; i++) {
                const ProfileStack *s = c->d->stacks + samples[i].stack;

                fputs(i == 0 ? "\n[" : ",\n[", f);
                for (size_t k = 0; k <= s->n_frames; k++)
                        fprintf(f, k == 0 ? "%" PRIu32 : ",%" PRIu32, report_stack_segment(&c->ids, s, k));
                fputc(']', f);
        }
        fputs("\n],\n\"weights\":[", f);
        for (size_t i = 0; i < n_samples; i++)
                fprintf(f, i == 0 ? "\n%" PRIu64 : ",\n%" PRIu64, samples[i].weight);
        fputs("\n]", f);
}

int report_write_speedscope(FILE *f, const ProfileData *d, const ReportSummaryInfo *info) {
        _cleanup_free_ uint32_t *comm_frame = NULL, *by_comm = NULL;
        _cleanup_free_ SpeedscopeSample *samples = NULL;
        _cleanup_free_ size_t *order = NULL;
        _cleanup_free_ char *label = NULL;
        uint64_t frequency, end;
        size_t n_names, n_comms, n_samples;
        _cleanup_strv_free_ char **names = NULL; /* the rendered names fill a prefix */
        SpeedscopeContext c;
        int r;

        if (!f || !d)
                return -EINVAL;
        if (!stacks_valid(d))
                return -EINVAL;

        frequency = info ? info->frequency : 0;
        label = profile_label(info);
        n_names = d->n_frames + d->n_processes; /* at most one comm frame per process */
        names = calloc(n_names + 1, sizeof(char *));
        comm_frame = calloc(MAX(d->n_processes, 1u), sizeof(uint32_t));
        by_comm = calloc(MAX(d->n_processes, 1u), sizeof(uint32_t));
        order = calloc(MAX(d->n_stacks, 1u), sizeof(size_t));
        samples = calloc(MAX(d->n_stacks, 1u), sizeof(SpeedscopeSample));
        if (!label || !names || !comm_frame || !by_comm || !order || !samples)
                return -ENOMEM;
        if (n_names >= UINT32_MAX)
                return -E2BIG;

        r = name_frames(d, names);
        if (r < 0)
                return r;
        r = name_comms(d, by_comm, names, comm_frame, &n_comms);
        if (r < 0)
                return r;

        c = (SpeedscopeContext){ .d = d, .ids = { .roots = comm_frame }, .names = names };
        r = merge_samples(&c, frequency, order, samples, &n_samples, &end);
        if (r < 0)
                return r;

        fputs("{\"$schema\":\"" SPEEDSCOPE_SCHEMA "\",\n", f);
        fputs("\"exporter\":\"cgprof@" CGPROF_VERSION "\",\n", f);
        fputs("\"name\":", f);
        json_string(f, label);
        fputs(",\n\"activeProfileIndex\":0,\n", f);

        write_frames(f, d, names, n_comms);

        fputs("\"profiles\":[{\"type\":\"sampled\",\"name\":", f);
        json_string(f, label);
        fprintf(f, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%" PRIu64 ",\n",
                frequency > 0 ? "nanoseconds" : "none", end);
        write_samples(f, &c, samples, n_samples);
        fputs("}]}\n", f);

        return ferror(f) ? -EIO : 0;
}
