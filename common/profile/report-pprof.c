/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <limits.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "report.h"

/* profile.pb.gz: pprof's Profile message (common/profile/profile.proto,
 * encoded by protobuf-c's generated code), gzipped with zlib.
 *
 * Writer: every string goes through one string table, sorted and
 * deduplicated, so entry 0 is "" and an index is a binary search away (no
 * hash table that crafted symbol names could attack). Each ProfileMapping is
 * a Mapping, the main binary first (pprof's "File:"), the others in order;
 * each ProfileLocation a Location (id = index + 1) with one Line; each Frame a Function (id = index + 1; frames are already
 * unique by name, module, file and kind), its filename the frame's file.
 * Inlined calls (ProfileLocation.inlined_into) are Lines of one Location,
 * as pprof has them: the Location of the innermost call of a chain lists
 * its function and line, then the function it was inlined into, and so on
 * to the physical function; a sample lists that one Location for the
 * chain's consecutive entries of a stack. Locations that are only the
 * outer part of chains get no Location of their own. Stacks without
 * locations (read from folded output) get one synthesized Location per
 * frame, with address 0.
 * Kernel frames always sit in a "[kernel.kallsyms]" Mapping: the session's,
 * or a synthesized one when they have none. A Sample per stack lists its
 * locations leaf first, as pprof wants, and carries the labels pid, comm,
 * cgroup (and namespace, pod, container when known).
 *
 * Reader: the reverse, for any pprof profile, not only ours. Every index and
 * id is checked before use: malformed input is -EBADMSG, never a crash. */

#define KERNEL_MAPPING_FILE "[kernel.kallsyms]"

/* The most the reader inflates, and the most frames it expands a profile to
 * (per byte of the inflated protobuf, plus a constant): bounds on memory for
 * a hostile input that a real profile stays far below. */
#define PPROF_MAX_INFLATED (UINT64_C(1) << 30)
#define PPROF_FRAMES_PER_BYTE 16
#define PPROF_FRAMES_EXTRA (1u << 20)

/* ---- Writer ------------------------------------------------------------ */

typedef struct StringTable {
        const char **strings; /* sorted, unique; strings[0] == "" */
        size_t n, allocated;
        bool oom; /* an add failed: sealing it fails */
} StringTable;

static void string_table_done(StringTable *t) {
        free(t->strings);
        *t = (StringTable){};
}

/* Adds s (if not NULL); running out of memory is noted for string_table_seal(). */
static void string_table_add(StringTable *t, const char *s) {
        if (!s || t->oom)
                return;
        if (GREEDY_REALLOC(t->strings, t->allocated, t->n + 1, 64) < 0)
                t->oom = true;
        else
                t->strings[t->n++] = s;
}

static int string_compare(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* Sorts and deduplicates: "" (always added) sorts first. -ENOMEM if an add failed. */
static int string_table_seal(StringTable *t) {
        size_t k = 0;

        if (t->oom)
                return -ENOMEM;

        qsort(t->strings, t->n, sizeof(char *), string_compare);
        for (size_t i = 0; i < t->n; i++)
                if (k == 0 || !streq(t->strings[i], t->strings[k - 1]))
                        t->strings[k++] = t->strings[i];
        t->n = k;
        return 0;
}

static int64_t string_index(const StringTable *t, const char *s) {
        const char **p;

        if (!s || !*s)
                return 0;
        p = bsearch(&s, t->strings, t->n, sizeof(char *), string_compare);
        return p ? (int64_t) (p - t->strings) : 0; /* every string was added beforehand */
}

typedef struct PprofWriter {
        StringTable strings;
        char *comments[8];
        size_t n_comments;

        bool offcpu; /* a third value: off_cpu/nanoseconds (profile "events" with "offcpu") */
        Perftools__Profiles__ValueType *value_types; /* samples/count, cpu/nanoseconds, period type */
        bool launches; /* CUDA kernel launches (cuda_launches/count), not CPU samples */
        /* A launch's dimensions frame (PROFILE_CUDA_LAUNCH_MODULE), per frame:
         * its labels' values (grid, block, stream), parsed from its name. */
        char (*dims)[3][40];
        bool *is_dims;
        Perftools__Profiles__Label *dims_labels; /* 3 per sample */
        Perftools__Profiles__Label **dims_label_ptrs; /* n_labels + 3 per sample */
        Perftools__Profiles__ValueType **sample_types;

        Perftools__Profiles__Mapping *mappings;
        Perftools__Profiles__Mapping **mapping_ptrs; /* in the order of their ids */
        uint32_t main_mapping; /* index of the main binary's mapping (id 1), or PROFILE_NONE */

        Perftools__Profiles__Function *functions;
        Perftools__Profiles__Function **function_ptrs;

        Perftools__Profiles__Location *locations; /* d->n_locations, then the synthesized ones */
        Perftools__Profiles__Location **location_ptrs;
        Perftools__Profiles__Line *lines;
        Perftools__Profiles__Line **line_ptrs;
        uint64_t *synthesized; /* per frame: the id of its synthesized location, or 0 */
        size_t n_lines;

        Perftools__Profiles__Label *labels; /* pid and comm per process, then the shared ones */
        Perftools__Profiles__Label **label_ptrs; /* n_labels per process */
        size_t n_labels; /* room per process in label_ptrs */
        size_t *process_n_labels; /* the labels each process's samples have */
        char (*job_numbers)[2][12]; /* per process: its rank and local rank as text */

        Perftools__Profiles__Sample *samples;
        Perftools__Profiles__Sample **sample_ptrs;
        int64_t *values;
        uint64_t *location_ids;

        int64_t *comment_ids;
        uint8_t *packed;
} PprofWriter;

static void pprof_writer_done(PprofWriter *w) {
        string_table_done(&w->strings);
        for (size_t i = 0; i < w->n_comments; i++)
                free(w->comments[i]);
        free(w->value_types);
        free(w->sample_types);
        free(w->dims);
        free(w->is_dims);
        free(w->dims_labels);
        free(w->dims_label_ptrs);
        free(w->mappings);
        free(w->mapping_ptrs);
        free(w->functions);
        free(w->function_ptrs);
        free(w->locations);
        free(w->location_ptrs);
        free(w->lines);
        free(w->line_ptrs);
        free(w->synthesized);
        free(w->labels);
        free(w->label_ptrs);
        free(w->process_n_labels);
        free(w->job_numbers);
        free(w->samples);
        free(w->sample_ptrs);
        free(w->values);
        free(w->location_ids);
        free(w->comment_ids);
        free(w->packed);
}

static int add_comment(PprofWriter *w, const char *prefix, const char *value) {
        if (!value || w->n_comments >= ELEMENTSOF(w->comments))
                return 0;
        if (asprintf(&w->comments[w->n_comments], "%s %s", prefix, value) < 0)
                return -ENOMEM;
        w->n_comments++;
        return 0;
}

static bool frame_is_kernel(const Frame *f) {
        return f->kind == FRAME_KERNEL || streq_ptr(f->module, KERNEL_MAPPING_FILE);
}

static int64_t clamp_i64(uint64_t v) {
        return v > (uint64_t) INT64_MAX ? INT64_MAX : (int64_t) v;
}

static int64_t mul_i64(uint64_t a, uint64_t b) {
        uint64_t v;

        if (__builtin_mul_overflow(a, b, &v))
                return INT64_MAX;
        return clamp_i64(v);
}

/* Checks that the stacks and locations only point at what exists. */
static int check_data(const ProfileData *d) {
        for (size_t i = 0; i < d->n_locations; i++) {
                const ProfileLocation *l = d->locations + i;

                if (l->frame >= d->n_frames || (l->mapping != PROFILE_NONE && l->mapping >= d->n_mappings))
                        return -EINVAL;
                /* Chains go to earlier locations only: they end. */
                if (l->inlined_into != PROFILE_NONE && l->inlined_into >= i)
                        return -EINVAL;
        }
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *s = d->stacks + i;

                if (s->process >= d->n_processes || (s->n_frames > 0 && !s->frames))
                        return -EINVAL;
                for (uint32_t k = 0; k < s->n_frames; k++)
                        if (s->frames[k] >= d->n_frames ||
                            (s->locations && s->locations[k] >= d->n_locations))
                                return -EINVAL;
        }
        return 0;
}

static int collect_strings(PprofWriter *w, const ProfileData *d, const ReportSummaryInfo *info) {
        static const char *const fixed[] = {
                "",           "samples", "count",     "cpu",    "nanoseconds", "cuda_launches",     "pid",
                "comm",       "cgroup",  "namespace", "pod",    "container",   KERNEL_MAPPING_FILE, "rank",
                "local_rank", "role",    "main",      "worker",
        };
        StringTable *t = &w->strings;

        /* A process's rank and local rank, as label strings. */
        w->job_numbers = calloc(MAX(d->n_processes, (size_t) 1), sizeof(*w->job_numbers));
        if (!w->job_numbers)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_processes; i++) {
                const JobIdentity *j = &d->processes[i].job;
                if (j->rank >= 0) {
                        snprintf(w->job_numbers[i][0], sizeof(w->job_numbers[i][0]), "%" PRIi32, j->rank);
                        string_table_add(t, w->job_numbers[i][0]);
                }
                if (j->local_rank >= 0) {
                        snprintf(w->job_numbers[i][1], sizeof(w->job_numbers[i][1]), "%" PRIi32,
                                 j->local_rank);
                        string_table_add(t, w->job_numbers[i][1]);
                }
        }

        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                string_table_add(t, fixed[i]);
        if (w->offcpu)
                string_table_add(t, "off_cpu");
        for (size_t i = 0; i < w->n_comments; i++)
                string_table_add(t, w->comments[i]);
        if (info) {
                const char *values[] = { info->cgroup, info->namespace, info->pod, info->container };

                for (size_t i = 0; i < ELEMENTSOF(values); i++)
                        string_table_add(t, values[i]);
                for (size_t i = 0; info->job_labels && info->job_labels[i] && info->job_labels[i + 1];
                     i += 2) {
                        string_table_add(t, report_job_label_short(info->job_labels[i]));
                        string_table_add(t, info->job_labels[i + 1]);
                }
        }
        for (size_t i = 0; i < d->n_frames; i++) {
                string_table_add(t, d->frames[i].name);
                string_table_add(t, d->frames[i].file);
        }
        /* Launches' dimensions frames: labels grid, block, stream. */
        w->dims = calloc(MAX(d->n_frames, (size_t) 1), sizeof(*w->dims));
        w->is_dims = calloc(MAX(d->n_frames, (size_t) 1), sizeof(bool));
        if (!w->dims || !w->is_dims)
                return -ENOMEM;
        string_table_add(t, "grid");
        string_table_add(t, "block");
        string_table_add(t, "stream");
        for (size_t i = 0; i < d->n_frames; i++) {
                if (!streq_ptr(d->frames[i].module, PROFILE_CUDA_LAUNCH_MODULE) ||
                    sscanf(d->frames[i].name, "grid=%39s block=%39s stream=%39s", w->dims[i][0],
                           w->dims[i][1], w->dims[i][2]) != 3)
                        continue;
                w->is_dims[i] = true;
                for (size_t k = 0; k < 3; k++)
                        string_table_add(t, w->dims[i][k]);
        }
        for (size_t i = 0; i < d->n_mappings; i++) {
                string_table_add(t, d->mappings[i].file);
                string_table_add(t, d->mappings[i].build_id);
        }
        for (size_t i = 0; i < d->n_processes; i++)
                string_table_add(t, d->processes[i].comm);

        return string_table_seal(t);
}

/* The index of the mapping kernel frames go in: the session's kernel
 * mapping, else PROFILE_NONE with *ret_synthesize set when some kernel frame
 * has no mapping (a "[kernel.kallsyms]" mapping is added for them). */
static uint32_t kernel_mapping(const ProfileData *d, bool *ret_synthesize) {
        bool needed = false;

        *ret_synthesize = false;
        for (size_t i = 0; i < d->n_mappings; i++)
                if (d->mappings[i].kernel)
                        return (uint32_t) i;

        for (size_t i = 0; i < d->n_locations && !needed; i++)
                if (d->locations[i].mapping == PROFILE_NONE &&
                    frame_is_kernel(d->frames + d->locations[i].frame))
                        needed = true;
        for (size_t i = 0; i < d->n_stacks && !needed; i++) {
                const ProfileStack *s = d->stacks + i;

                if (s->locations)
                        continue;
                for (uint32_t k = 0; k < s->n_frames && !needed; k++)
                        if (frame_is_kernel(d->frames + s->frames[k]))
                                needed = true;
        }
        *ret_synthesize = needed;
        return PROFILE_NONE;
}

/* Like pprof's own heuristic for legacy profiles (libRx): "libc.so.6",
 * "libfoo.so", "libbar.so_1". */
static bool file_is_library(const char *file) {
        for (const char *p = strstr(file, ".so"); p; p = strstr(p + 1, ".so"))
                if (p[3] == 0 || ((p[3] == '.' || p[3] == '_') && p[4] >= '0' && p[4] <= '9'))
                        return true;
        return false;
}

/* pprof takes mapping[0] for the main binary (the "File:" of its reports):
 * the executable (not a shared library, "[vdso]" or the kernel) with the
 * most samples goes first, PROFILE_NONE when there is none. */
static int main_mapping(const ProfileData *d, uint32_t *ret) {
        _cleanup_free_ uint64_t *weight = NULL;
        _cleanup_free_ size_t *last_stack = NULL;
        uint32_t best = PROFILE_NONE;

        if (d->n_mappings == 0) {
                *ret = PROFILE_NONE;
                return 0;
        }

        weight = calloc(d->n_mappings, sizeof(uint64_t));
        last_stack = calloc(d->n_mappings, sizeof(size_t));
        if (!weight || !last_stack)
                return -ENOMEM;

        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *s = d->stacks + i;

                if (!s->locations)
                        continue;
                for (uint32_t k = 0; k < s->n_frames; k++) {
                        uint32_t m = d->locations[s->locations[k]].mapping;

                        if (m == PROFILE_NONE || last_stack[m] == i + 1)
                                continue;
                        last_stack[m] = i + 1; /* once per stack */
                        weight[m] += s->count;
                }
        }

        for (size_t i = 0; i < d->n_mappings; i++) {
                const ProfileMapping *m = d->mappings + i;

                if (m->kernel || !m->file[0] || m->file[0] == '[' || file_is_library(m->file))
                        continue;
                if (best == PROFILE_NONE || weight[i] > weight[best])
                        best = (uint32_t) i;
        }
        *ret = best;
        return 0;
}

/* The id of the mapping with index i: the main binary is 1, the others follow in order. */
static uint64_t mapping_id(const PprofWriter *w, uint32_t i) {
        if (w->main_mapping == PROFILE_NONE || i > w->main_mapping)
                return (uint64_t) i + 1;
        return i == w->main_mapping ? 1 : (uint64_t) i + 2;
}

static int build_mappings(PprofWriter *w, const ProfileData *d, Perftools__Profiles__Profile *p,
                          uint64_t *ret_kernel_id) {
        bool synthesize;
        uint32_t kernel = kernel_mapping(d, &synthesize);
        size_t n = d->n_mappings + synthesize;
        int r;

        r = main_mapping(d, &w->main_mapping);
        if (r < 0)
                return r;

        if (n > 0) {
                w->mappings = calloc(n, sizeof(Perftools__Profiles__Mapping));
                w->mapping_ptrs = calloc(n, sizeof(Perftools__Profiles__Mapping *));
                if (!w->mappings || !w->mapping_ptrs)
                        return -ENOMEM;
        }

        for (size_t i = 0; i < n; i++) {
                Perftools__Profiles__Mapping *m = w->mappings + i;

                perftools__profiles__mapping__init(m);
                m->id = i < d->n_mappings ? mapping_id(w, (uint32_t) i) : n;
                m->has_functions = true;
                if (i < d->n_mappings) {
                        const ProfileMapping *pm = d->mappings + i;

                        m->memory_start = pm->start;
                        m->memory_limit = pm->limit;
                        m->file_offset = pm->offset;
                        m->filename = string_index(&w->strings, pm->file);
                        m->build_id = string_index(&w->strings, pm->build_id);
                } else
                        /* No addresses are known: the range stays empty. */
                        m->filename = string_index(&w->strings, KERNEL_MAPPING_FILE);
                w->mapping_ptrs[m->id - 1] = m; /* in the order of the ids */
        }

        p->n_mapping = n;
        p->mapping = w->mapping_ptrs;
        *ret_kernel_id = kernel != PROFILE_NONE ? mapping_id(w, kernel) : synthesize ? n : 0;
        return 0;
}

static int build_functions(PprofWriter *w, const ProfileData *d, Perftools__Profiles__Profile *p) {
        if (d->n_frames == 0)
                return 0;

        w->functions = calloc(d->n_frames, sizeof(Perftools__Profiles__Function));
        w->function_ptrs = calloc(d->n_frames, sizeof(Perftools__Profiles__Function *));
        if (!w->functions || !w->function_ptrs)
                return -ENOMEM;

        for (size_t i = 0; i < d->n_frames; i++) {
                Perftools__Profiles__Function *fn = w->functions + i;

                perftools__profiles__function__init(fn);
                fn->id = i + 1;
                fn->name = string_index(&w->strings, d->frames[i].name);
                fn->system_name = fn->name;
                fn->filename = string_index(&w->strings, d->frames[i].file);
                w->function_ptrs[i] = fn;
        }
        p->n_function = d->n_frames;
        p->function = w->function_ptrs;
        return 0;
}

/* Adds Location number k (id), with a Line per location of the chain from
 * 'location' (innermost first); location PROFILE_NONE: one Line of frame. */
static void location_init(PprofWriter *w, const ProfileData *d, size_t k, uint64_t id, uint64_t mapping,
                          uint64_t address, uint32_t location, uint32_t frame) {
        Perftools__Profiles__Location *l = w->locations + k;
        size_t first = w->n_lines;

        do {
                Perftools__Profiles__Line *line = w->lines + w->n_lines;

                perftools__profiles__line__init(line);
                if (location != PROFILE_NONE) {
                        line->function_id = (uint64_t) d->locations[location].frame + 1;
                        line->line = d->locations[location].line;
                        location = d->locations[location].inlined_into;
                } else
                        line->function_id = (uint64_t) frame + 1;
                w->line_ptrs[w->n_lines++] = line;
        } while (location != PROFILE_NONE);

        perftools__profiles__location__init(l);
        l->id = id;
        l->mapping_id = mapping;
        l->address = address;
        l->n_line = w->n_lines - first;
        l->line = w->line_ptrs + first;
        w->location_ptrs[k] = l;
}

/* Where the run of a stack's locations that ends at position j (leafward)
 * starts: the inlined calls of a chain, back to the physical function's. */
static uint32_t chain_start(const ProfileData *d, const uint32_t *locations, uint32_t j) {
        while (j > 0 && d->locations[locations[j]].inlined_into == locations[j - 1])
                j--;
        return j;
}

static int build_locations(PprofWriter *w, const ProfileData *d, uint64_t kernel_id,
                           Perftools__Profiles__Profile *p) {
        _cleanup_free_ uint8_t *role = NULL; /* per location: 1 an inner end of a chain, 2 inlined into */
        size_t n = d->n_locations + d->n_frames, n_lines = d->n_frames, k = 0, n_synthesized = 0;

        if (n == 0)
                return 0;

        /* A location gets a pprof Location unless it is only ever the outer
         * part of a chain whose inner end has the Location. */
        role = calloc(MAX(d->n_locations, (size_t) 1), 1);
        if (!role)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_locations; i++)
                if (d->locations[i].inlined_into != PROFILE_NONE)
                        role[d->locations[i].inlined_into] |= 2;
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *s = d->stacks + i;

                if (!s->locations || (s->count == 0 && s->offcpu_ns == 0))
                        continue;
                for (uint32_t j = s->n_frames; j > 0; j = chain_start(d, s->locations, j - 1))
                        role[s->locations[j - 1]] |= 1;
        }
        for (size_t i = 0; i < d->n_locations; i++)
                if (role[i] != 2)
                        for (uint32_t l = (uint32_t) i; l != PROFILE_NONE; l = d->locations[l].inlined_into)
                                n_lines++;

        w->locations = calloc(n, sizeof(Perftools__Profiles__Location));
        w->location_ptrs = calloc(n, sizeof(Perftools__Profiles__Location *));
        w->lines = calloc(n_lines, sizeof(Perftools__Profiles__Line));
        w->line_ptrs = calloc(n_lines, sizeof(Perftools__Profiles__Line *));
        w->synthesized = calloc(MAX(d->n_frames, (size_t) 1), sizeof(uint64_t));
        if (!w->locations || !w->location_ptrs || !w->lines || !w->line_ptrs || !w->synthesized)
                return -ENOMEM;

        for (size_t i = 0; i < d->n_locations; i++) {
                const ProfileLocation *pl = d->locations + i;
                uint64_t id = pl->mapping != PROFILE_NONE              ? mapping_id(w, pl->mapping)
                              : frame_is_kernel(d->frames + pl->frame) ? kernel_id
                                                                       : 0;

                if (role[i] == 2)
                        continue;
                location_init(w, d, k++, i + 1, id, pl->address, (uint32_t) i, pl->frame);
        }

        /* One location per frame of the stacks without addresses, in the
         * order they first occur; their ids follow those of the locations. */
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *s = d->stacks + i;

                if (s->locations || (s->count == 0 && s->offcpu_ns == 0))
                        continue;
                for (uint32_t j = 0; j < s->n_frames; j++) {
                        uint32_t f = s->frames[j];

                        if (w->synthesized[f] != 0)
                                continue;
                        w->synthesized[f] = d->n_locations + ++n_synthesized;
                        location_init(w, d, k++, w->synthesized[f],
                                      frame_is_kernel(d->frames + f) ? kernel_id : 0, 0, PROFILE_NONE, f);
                }
        }

        p->n_location = k;
        p->location = w->location_ptrs;
        return 0;
}

/* The labels of a process's samples: pid, comm, and in a distributed job
 * rank, local_rank and role (job-identity.h), as strings. */
#define PROCESS_LABELS_MAX 5

static size_t process_labels(PprofWriter *w, const ProfileProcess *pp, Perftools__Profiles__Label *l,
                             const char (*numbers)[12]) {
        size_t n = 0;

        perftools__profiles__label__init(&l[n]);
        l[n].key = string_index(&w->strings, "pid");
        l[n++].num = pp->pid;
        perftools__profiles__label__init(&l[n]);
        l[n].key = string_index(&w->strings, "comm");
        l[n++].str = string_index(&w->strings, pp->comm);
        if (pp->job.rank >= 0) {
                perftools__profiles__label__init(&l[n]);
                l[n].key = string_index(&w->strings, "rank");
                l[n++].str = string_index(&w->strings, numbers[0]);
        }
        if (pp->job.local_rank >= 0) {
                perftools__profiles__label__init(&l[n]);
                l[n].key = string_index(&w->strings, "local_rank");
                l[n++].str = string_index(&w->strings, numbers[1]);
        }
        if (job_role_to_string(pp->role)) {
                perftools__profiles__label__init(&l[n]);
                l[n].key = string_index(&w->strings, "role");
                l[n++].str = string_index(&w->strings, job_role_to_string(pp->role));
        }
        return n;
}

#define JOB_LABELS_MAX 6

static int build_labels(PprofWriter *w, const ProfileData *d, const ReportSummaryInfo *info) {
        const char *keys[4 + JOB_LABELS_MAX] = { "cgroup", "namespace", "pod", "container" };
        const char *values[ELEMENTSOF(keys)] = {};
        size_t n_shared = 0, n_structs;
        Perftools__Profiles__Label *shared;

        if (info) {
                values[0] = info->cgroup;
                values[1] = info->namespace;
                values[2] = info->pod;
                values[3] = info->container;
                /* The pod's distributed-job labels, under their short names. */
                for (size_t i = 0, k = 4; info->job_labels && info->job_labels[i] &&
                                          info->job_labels[i + 1] && k < ELEMENTSOF(keys);
                     i += 2)
                        if (report_job_label_short(info->job_labels[i])) {
                                keys[k] = report_job_label_short(info->job_labels[i]);
                                values[k++] = info->job_labels[i + 1];
                        }
        }
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (values[i])
                        n_shared++;

        w->n_labels = PROCESS_LABELS_MAX + n_shared; /* the most a sample has */
        n_structs = PROCESS_LABELS_MAX * d->n_processes + n_shared;
        if (d->n_processes == 0)
                return 0;

        w->labels = calloc(n_structs, sizeof(Perftools__Profiles__Label));
        w->label_ptrs = calloc(d->n_processes * w->n_labels, sizeof(Perftools__Profiles__Label *));
        w->process_n_labels = calloc(d->n_processes, sizeof(size_t));
        if (!w->labels || !w->label_ptrs || !w->process_n_labels)
                return -ENOMEM;

        /* The shared labels, after the per-process ones. */
        shared = w->labels + PROCESS_LABELS_MAX * d->n_processes;
        for (size_t i = 0, k = 0; i < ELEMENTSOF(keys); i++) {
                if (!values[i])
                        continue;
                perftools__profiles__label__init(shared + k);
                shared[k].key = string_index(&w->strings, keys[i]);
                shared[k].str = string_index(&w->strings, values[i]);
                k++;
        }

        for (size_t i = 0; i < d->n_processes; i++) {
                Perftools__Profiles__Label *own = w->labels + PROCESS_LABELS_MAX * i;
                Perftools__Profiles__Label **l = w->label_ptrs + i * w->n_labels;
                size_t n = process_labels(w, d->processes + i, own, w->job_numbers[i]);

                for (size_t j = 0; j < n; j++)
                        l[j] = own + j;
                for (size_t j = 0; j < n_shared; j++)
                        l[n + j] = shared + j;
                w->process_n_labels[i] = n + n_shared;
        }
        return 0;
}

static int build_samples(PprofWriter *w, const ProfileData *d, uint64_t period,
                         Perftools__Profiles__Profile *p) {
        size_t n = 0, n_ids = 0, k = 0, id = 0;

        for (size_t i = 0; i < d->n_stacks; i++)
                if (d->stacks[i].count > 0 || d->stacks[i].offcpu_ns > 0) {
                        n++;
                        n_ids += d->stacks[i].n_frames;
                }
        if (n == 0)
                return 0;

        if (w->launches) {
                w->dims_labels = calloc(3 * n, sizeof(Perftools__Profiles__Label));
                w->dims_label_ptrs = calloc(n * (w->n_labels + 3), sizeof(Perftools__Profiles__Label *));
                if (!w->dims_labels || !w->dims_label_ptrs)
                        return -ENOMEM;
        }
        w->samples = calloc(n, sizeof(Perftools__Profiles__Sample));
        w->sample_ptrs = calloc(n, sizeof(Perftools__Profiles__Sample *));
        w->values = calloc(3 * n, sizeof(int64_t));
        w->location_ids = calloc(MAX(n_ids, (size_t) 1), sizeof(uint64_t));
        if (!w->samples || !w->sample_ptrs || !w->values || !w->location_ids)
                return -ENOMEM;

        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *s = d->stacks + i;
                Perftools__Profiles__Sample *sample = w->samples + k;
                size_t m = 0;

                if (s->count == 0 && s->offcpu_ns == 0)
                        continue;

                perftools__profiles__sample__init(sample);
                sample->n_value = w->launches ? 1 : w->offcpu ? 3 : 2;
                sample->value = w->values + 3 * k;
                sample->value[0] = clamp_i64(s->count);
                sample->value[1] = mul_i64(s->count, period);
                if (w->offcpu)
                        sample->value[2] = clamp_i64(s->offcpu_ns);

                /* A launch's dimensions frame: labels, not a location. */
                uint32_t n_frames = s->n_frames;
                uint32_t dims = n_frames > 0 && w->is_dims[s->frames[n_frames - 1]] ? s->frames[n_frames - 1]
                                                                                    : UINT32_MAX;
                if (dims != UINT32_MAX)
                        n_frames--;

                /* Leaf first: the reverse of the stack's order; a chain of
                 * inlined calls is its innermost call's Location. */
                sample->location_id = n_frames > 0 ? w->location_ids + id : NULL;
                if (s->locations)
                        for (uint32_t j = n_frames; j > 0; j = chain_start(d, s->locations, j - 1))
                                sample->location_id[m++] = (uint64_t) s->locations[j - 1] + 1;
                else
                        for (uint32_t j = n_frames; j > 0; j--)
                                sample->location_id[m++] = w->synthesized[s->frames[j - 1]];
                sample->n_location_id = m;
                id += m;

                sample->n_label = w->process_n_labels[s->process];
                sample->label = w->label_ptrs + s->process * w->n_labels;
                if (dims != UINT32_MAX && w->dims_labels) {
                        static const char *const keys[] = { "grid", "block", "stream" };
                        Perftools__Profiles__Label **l = w->dims_label_ptrs + k * (w->n_labels + 3);

                        memcpy(l, sample->label, sample->n_label * sizeof(*l));
                        for (size_t q = 0; q < 3; q++) {
                                Perftools__Profiles__Label *x = w->dims_labels + 3 * k + q;
                                perftools__profiles__label__init(x);
                                x->key = string_index(&w->strings, keys[q]);
                                x->str = string_index(&w->strings, w->dims[dims][q]);
                                l[sample->n_label + q] = x;
                        }
                        sample->label = l;
                        sample->n_label += 3;
                }
                w->sample_ptrs[k++] = sample;
        }

        p->n_sample = n;
        p->sample = w->sample_ptrs;
        return 0;
}

static int write_gzip(FILE *f, const uint8_t *data, size_t size) {
        uint8_t out[16384];
        z_stream z = {};
        int r = 0, zr;

        if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
                return -ENOMEM;

        z.next_in = (Bytef *) data;
        for (;;) {
                int flush;

                if (z.avail_in == 0 && size > 0) {
                        z.avail_in = (uInt) MIN(size, (size_t) UINT_MAX);
                        size -= z.avail_in;
                }
                flush = z.avail_in == 0 && size == 0 ? Z_FINISH : Z_NO_FLUSH;

                z.next_out = out;
                z.avail_out = sizeof(out);
                zr = deflate(&z, flush);
                if (zr == Z_STREAM_ERROR) {
                        r = -EIO;
                        break;
                }
                if (fwrite(out, 1, sizeof(out) - z.avail_out, f) != sizeof(out) - z.avail_out) {
                        r = -EIO;
                        break;
                }
                if (zr == Z_STREAM_END)
                        break;
        }

        deflateEnd(&z);
        if (r < 0)
                return r;
        return ferror(f) ? -EIO : 0;
}

/* The sample types: samples/count and cpu/nanoseconds, off_cpu/nanoseconds
 * with off-CPU time, or cuda_launches/count alone for a launch report. */
static int set_sample_types(PprofWriter *w, const ProfileData *d, Perftools__Profiles__Profile *p,
                            uint64_t *period) {
        /* The launches of a CUDA launch report (report.c: cuda.pb.gz): one
         * sample type, cuda_launches/count, the period one launch. */
        w->launches = d->n_stacks > 0;
        for (size_t i = 0; i < d->n_stacks && w->launches; i++)
                w->launches = profile_stack_is_launch(d, &d->stacks[i]);
        if (w->launches) {
                *period = 1;
                w->offcpu = false;
        }

        /* samples/count, cpu/nanoseconds, the period type (cpu/nanoseconds),
         * and off_cpu/nanoseconds with off-CPU time. */
        w->value_types = calloc(4, sizeof(Perftools__Profiles__ValueType));
        w->sample_types = calloc(3, sizeof(Perftools__Profiles__ValueType *));
        if (!w->value_types || !w->sample_types)
                return -ENOMEM;
        for (size_t i = 0; i < 4; i++) {
                perftools__profiles__value_type__init(w->value_types + i);
                w->value_types[i].type = string_index(&w->strings, i == 0                ? "samples"
                                                                   : i == 3 && w->offcpu ? "off_cpu"
                                                                                         : "cpu");
                w->value_types[i].unit = string_index(&w->strings, i == 0 ? "count" : "nanoseconds");
        }
        w->sample_types[0] = w->value_types;
        w->sample_types[1] = w->value_types + 1;
        w->sample_types[2] = w->value_types + 3;
        if (w->launches) {
                w->value_types[0].type = w->value_types[2].type = string_index(&w->strings, "cuda_launches");
                w->value_types[0].unit = w->value_types[2].unit = string_index(&w->strings, "count");
        }
        p->n_sample_type = w->launches ? 1 : w->offcpu ? 3 : 2;
        p->sample_type = w->sample_types;
        p->period_type = w->value_types + 2;
        p->period = clamp_i64(*period);
        p->default_sample_type =
                string_index(&w->strings, w->launches                               ? "cuda_launches"
                                          : w->offcpu && profile_data_total(d) == 0 ? "off_cpu"
                                                                                    : "cpu");
        return 0;
}

int report_write_pprof(FILE *f, const ProfileData *d, const ReportSummaryInfo *info) {
        Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
        _cleanup_(pprof_writer_done) PprofWriter w = { .main_mapping = PROFILE_NONE };
        uint64_t period = 1, kernel_id = 0;
        size_t size;
        int r;

        if (!f || !d)
                return -EINVAL;
        r = check_data(d);
        if (r < 0)
                return r;

        w.offcpu = (info && info->offcpu.enabled) || profile_data_offcpu_total(d) > 0;
        if (info && info->frequency > 0)
                period = MAX((NSEC_PER_SEC + info->frequency / 2) / info->frequency, (uint64_t) 1);

        if (info) {
                char freq[32];

                r = add_comment(&w, "cgprof session", info->session_id);
                if (r >= 0)
                        r = add_comment(&w, "event", info->event);
                if (r >= 0 && info->event_fallback_reason)
                        r = add_comment(&w, "requested event", info->requested_event);
                if (r >= 0)
                        r = add_comment(&w, "profile", info->profile);
                if (r >= 0)
                        r = add_comment(&w, "target", info->target);
                if (r >= 0)
                        r = add_comment(&w, "cgroup", info->cgroup);
                if (r >= 0)
                        r = add_comment(&w, "node", info->node);
                if (r >= 0 && info->frequency > 0) {
                        snprintf(freq, sizeof(freq), "%" PRIu64 " Hz", info->frequency);
                        r = add_comment(&w, "frequency", freq);
                }
                if (r < 0)
                        return r;
        }

        r = collect_strings(&w, d, info);
        if (r < 0)
                return r;
        p.n_string_table = w.strings.n;
        p.string_table = (char **) w.strings.strings;

        r = set_sample_types(&w, d, &p, &period);
        if (r < 0)
                return r;

        if (info) {
                p.time_nanos = mul_i64(info->start_usec, NSEC_PER_USEC);
                if (info->end_usec > info->start_usec)
                        p.duration_nanos = mul_i64(info->end_usec - info->start_usec, NSEC_PER_USEC);
        }

        if (w.n_comments > 0) {
                w.comment_ids = calloc(w.n_comments, sizeof(int64_t));
                if (!w.comment_ids)
                        return -ENOMEM;
                for (size_t i = 0; i < w.n_comments; i++)
                        w.comment_ids[i] = string_index(&w.strings, w.comments[i]);
                p.n_comment = w.n_comments;
                p.comment = w.comment_ids;
        }

        r = build_mappings(&w, d, &p, &kernel_id);
        if (r < 0)
                return r;
        r = build_functions(&w, d, &p);
        if (r < 0)
                return r;
        r = build_locations(&w, d, kernel_id, &p);
        if (r < 0)
                return r;
        r = build_labels(&w, d, info);
        if (r < 0)
                return r;
        r = build_samples(&w, d, period, &p);
        if (r < 0)
                return r;

        size = perftools__profiles__profile__get_packed_size(&p);
        w.packed = malloc(MAX(size, (size_t) 1));
        if (!w.packed)
                return -ENOMEM;
        if (perftools__profiles__profile__pack(&p, w.packed) != size)
                return -EIO;

        return write_gzip(f, w.packed, size);
}

/* ---- Reader ------------------------------------------------------------ */

static void inflateEndp(z_stream *z) {
        inflateEnd(z);
}

static int gunzip(const uint8_t *data, size_t size, uint8_t **ret, size_t *ret_size) {
        _cleanup_(inflateEndp) z_stream z = {};
        _cleanup_free_ uint8_t *buf = NULL;
        size_t allocated = 0, produced = 0;

        if (size == 0)
                return -EBADMSG;
        if (inflateInit2(&z, 15 + 32) != Z_OK) {
                /* inflateEnd() on a stream that did not initialize is harmless: state is NULL. */
                return -ENOMEM;
        }

        z.next_in = (Bytef *) data;
        for (;;) {
                int zr;

                if (z.avail_in == 0 && size > 0) {
                        z.avail_in = (uInt) MIN(size, (size_t) UINT_MAX);
                        size -= z.avail_in;
                }
                if (produced == allocated) {
                        size_t a = allocated == 0 ? 65536 : allocated * 2;
                        uint8_t *b;

                        if (allocated >= PPROF_MAX_INFLATED)
                                return -E2BIG;
                        a = MIN(a, (size_t) PPROF_MAX_INFLATED);
                        b = realloc(buf, a);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        allocated = a;
                }
                z.next_out = buf + produced;
                z.avail_out = (uInt) MIN(allocated - produced, (size_t) UINT_MAX);

                zr = inflate(&z, Z_NO_FLUSH);
                produced = (size_t) (z.next_out - buf);

                if (zr == Z_STREAM_END)
                        break;
                if (zr == Z_MEM_ERROR)
                        return -ENOMEM;
                if (zr != Z_OK && zr != Z_BUF_ERROR)
                        return -EBADMSG; /* Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR */
                if (z.avail_in == 0 && size == 0 && produced < allocated)
                        return -EBADMSG; /* all input used, room left, no end: truncated */
        }

        *ret = TAKE_PTR(buf);
        *ret_size = produced;
        return 0;
}

static void profile_free_unpackedp(Perftools__Profiles__Profile **p) {
        if (*p)
                perftools__profiles__profile__free_unpacked(*p, NULL);
}

typedef struct IdEntry {
        uint64_t id;
        uint32_t index;
} IdEntry;

static int id_entry_compare(const void *a, const void *b) {
        const IdEntry *x = a, *y = b;
        return CMP(x->id, y->id);
}

/* Sorts the (id, index) entries; ids must be nonzero and unique. */
static int id_index_seal(IdEntry *e, size_t n) {
        qsort(e, n, sizeof(IdEntry), id_entry_compare);
        for (size_t i = 0; i < n; i++)
                if (e[i].id == 0 || (i > 0 && e[i].id == e[i - 1].id))
                        return -EBADMSG;
        return 0;
}

/* The index of the id, or PROFILE_NONE. */
static uint32_t id_index_lookup(const IdEntry *e, size_t n, uint64_t id) {
        IdEntry key = { .id = id };
        const IdEntry *p;

        if (n == 0)
                return PROFILE_NONE;
        p = bsearch(&key, e, n, sizeof(IdEntry), id_entry_compare);
        return p ? p->index : PROFILE_NONE;
}

typedef struct PprofReader {
        const Perftools__Profiles__Profile *p;
        ProfileData *d;
        IdEntry *mappings, *functions, *locations;
        uint32_t *mapping_index; /* per pprof mapping: its index in d */
        bool *mapping_kernel; /* per pprof mapping */
        uint32_t *loc_first, *loc_n; /* per pprof location: its range in loc_frames/loc_locations */
        uint32_t *loc_frames, *loc_locations; /* innermost line first, as in Location.line */
        uint32_t *sample_process;
} PprofReader;

static void pprof_reader_done(PprofReader *r) {
        free(r->mappings);
        free(r->functions);
        free(r->locations);
        free(r->mapping_index);
        free(r->mapping_kernel);
        free(r->loc_first);
        free(r->loc_n);
        free(r->loc_frames);
        free(r->loc_locations);
        free(r->sample_process);
}

/* The string at index i, or NULL when out of range. */
static const char *pprof_string(const Perftools__Profiles__Profile *p, int64_t i) {
        if (i < 0 || (uint64_t) i >= p->n_string_table || !p->string_table[i])
                return NULL;
        return p->string_table[i];
}

static int read_mappings(PprofReader *rd) {
        const Perftools__Profiles__Profile *p = rd->p;
        int r;

        if (p->n_mapping == 0)
                return 0;
        if (p->n_mapping >= UINT32_MAX)
                return -E2BIG;

        rd->mappings = calloc(p->n_mapping, sizeof(IdEntry));
        rd->mapping_index = calloc(p->n_mapping, sizeof(uint32_t));
        rd->mapping_kernel = calloc(p->n_mapping, sizeof(bool));
        if (!rd->mappings || !rd->mapping_index || !rd->mapping_kernel)
                return -ENOMEM;

        for (size_t i = 0; i < p->n_mapping; i++) {
                const Perftools__Profiles__Mapping *m = p->mapping[i];
                const char *file, *build_id;

                if (!m)
                        return -EBADMSG;
                file = pprof_string(p, m->filename);
                build_id = pprof_string(p, m->build_id);
                if (!file || !build_id)
                        return -EBADMSG;

                rd->mapping_kernel[i] = streq(file, KERNEL_MAPPING_FILE);
                r = profile_data_intern_mapping(rd->d, file, m->memory_start, m->memory_limit,
                                                m->file_offset, *build_id ? build_id : NULL,
                                                rd->mapping_kernel[i], &rd->mapping_index[i]);
                if (r < 0)
                        return r;
                rd->mappings[i] = (IdEntry){ .id = m->id, .index = (uint32_t) i };
        }
        return id_index_seal(rd->mappings, p->n_mapping);
}

static int read_functions(PprofReader *rd) {
        const Perftools__Profiles__Profile *p = rd->p;

        if (p->n_function == 0)
                return 0;
        if (p->n_function >= UINT32_MAX)
                return -E2BIG;

        rd->functions = calloc(p->n_function, sizeof(IdEntry));
        if (!rd->functions)
                return -ENOMEM;

        for (size_t i = 0; i < p->n_function; i++) {
                const Perftools__Profiles__Function *fn = p->function[i];

                if (!fn || !pprof_string(p, fn->name) || !pprof_string(p, fn->system_name) ||
                    !pprof_string(p, fn->filename))
                        return -EBADMSG;
                rd->functions[i] = (IdEntry){ .id = fn->id, .index = (uint32_t) i };
        }
        return id_index_seal(rd->functions, p->n_function);
}

static const char *basename_or_null(const char *file) {
        const char *slash;

        if (!file || !*file)
                return NULL;
        slash = strrchr(file, '/');
        return slash && slash[1] ? slash + 1 : file;
}

/* Interns the frame of one line of a location (fn NULL: the location has no
 * function), and the ProfileLocation of it: inlined into the location
 * inlined_into (that of the next line), or PROFILE_NONE for the last line. */
static int read_frame(PprofReader *rd, const Perftools__Profiles__Location *l, uint32_t mapping,
                      const Perftools__Profiles__Function *fn, int64_t line, uint32_t inlined_into,
                      uint32_t *ret_frame, uint32_t *ret_location) {
        const Perftools__Profiles__Profile *p = rd->p;
        const char *name = NULL, *file = NULL, *module, *source = NULL;
        bool kernel = false;
        char buf[256];
        FrameKind kind;
        uint32_t frame;
        int r;

        if (mapping != PROFILE_NONE) {
                file = pprof_string(p, p->mapping[mapping]->filename);
                kernel = rd->mapping_kernel[mapping];
        }
        module = kernel ? file : basename_or_null(file);

        if (fn) {
                name = pprof_string(p, fn->name);
                if (!*name)
                        name = pprof_string(p, fn->system_name);
                source = pprof_string(p, fn->filename);
                if (source && !*source)
                        source = NULL;
        }
        if (!name || !*name) {
                if (kernel)
                        name = "[kernel]";
                else if (module && module[0] == '[')
                        name = module; /* "[vdso]" */
                else if (module) {
                        snprintf(buf, sizeof(buf), "[%s]", module);
                        name = buf;
                } else
                        name = "[unknown]";
        }

        if (kernel && !streq(name, "[kernel]"))
                kind = FRAME_KERNEL;
        else if (name[0] == '[')
                kind = FRAME_UNKNOWN;
        else
                kind = FRAME_USER;

        r = profile_data_intern_frame_full(rd->d, name, module, source, kind, &frame);
        if (r < 0)
                return r;
        r = profile_data_intern_location_full(
                rd->d, l->address, mapping != PROFILE_NONE ? rd->mapping_index[mapping] : PROFILE_NONE,
                frame, line > 0 && line <= UINT32_MAX ? (uint32_t) line : 0, inlined_into, ret_location);
        if (r < 0)
                return r;
        *ret_frame = frame;
        return 0;
}

static int read_locations(PprofReader *rd) {
        const Perftools__Profiles__Profile *p = rd->p;
        size_t n_lines = 0, k = 0;
        int r;

        if (p->n_location == 0)
                return 0;
        if (p->n_location >= UINT32_MAX)
                return -E2BIG;

        for (size_t i = 0; i < p->n_location; i++) {
                if (!p->location[i])
                        return -EBADMSG;
                n_lines += MAX(p->location[i]->n_line, (size_t) 1);
        }
        if (n_lines >= UINT32_MAX)
                return -E2BIG;

        rd->locations = calloc(p->n_location, sizeof(IdEntry));
        rd->loc_first = calloc(p->n_location, sizeof(uint32_t));
        rd->loc_n = calloc(p->n_location, sizeof(uint32_t));
        rd->loc_frames = calloc(n_lines, sizeof(uint32_t));
        rd->loc_locations = calloc(n_lines, sizeof(uint32_t));
        if (!rd->locations || !rd->loc_first || !rd->loc_n || !rd->loc_frames || !rd->loc_locations)
                return -ENOMEM;

        for (size_t i = 0; i < p->n_location; i++) {
                const Perftools__Profiles__Location *l = p->location[i];
                uint32_t mapping = PROFILE_NONE;

                if (l->mapping_id != 0) {
                        mapping = id_index_lookup(rd->mappings, p->n_mapping, l->mapping_id);
                        if (mapping == PROFILE_NONE)
                                return -EBADMSG;
                }

                /* Lines innermost first: each inlined into the next, the
                 * last the physical function's; interned outermost first. */
                rd->loc_first[i] = (uint32_t) k;
                rd->loc_n[i] = (uint32_t) MAX(l->n_line, (size_t) 1);
                for (size_t j = MAX(l->n_line, (size_t) 1); j > 0; j--) {
                        const Perftools__Profiles__Function *fn = NULL;
                        uint32_t outer = j < rd->loc_n[i] ? rd->loc_locations[k + j] : PROFILE_NONE;
                        int64_t line = 0;

                        if (l->n_line > 0) {
                                if (!l->line[j - 1])
                                        return -EBADMSG;
                                line = l->line[j - 1]->line;
                                if (l->line[j - 1]->function_id != 0) {
                                        uint32_t f = id_index_lookup(rd->functions, p->n_function,
                                                                     l->line[j - 1]->function_id);
                                        if (f == PROFILE_NONE)
                                                return -EBADMSG;
                                        fn = p->function[f];
                                }
                        }
                        r = read_frame(rd, l, mapping, fn, line, outer, &rd->loc_frames[k + j - 1],
                                       &rd->loc_locations[k + j - 1]);
                        if (r < 0)
                                return r;
                }
                k += rd->loc_n[i];
                rd->locations[i] = (IdEntry){ .id = l->id, .index = (uint32_t) i };
        }
        return id_index_seal(rd->locations, p->n_location);
}

typedef struct SampleKey {
        int64_t pid;
        const char *comm; /* NULL: no comm label */
        size_t sample;
        int32_t rank, local_rank; /* -1: no label (not part of the key: the process's own) */
        JobRole role;
} SampleKey;

/* A rank label's text: a decimal 0..INT32_MAX, else -1. */
static int32_t label_number(const char *v) {
        char *end;
        long x;

        if (!v || !*v || *v < '0' || *v > '9')
                return -1;
        errno = 0;
        x = strtol(v, &end, 10);
        return errno == 0 && *end == 0 && x <= INT32_MAX ? (int32_t) x : -1;
}

static int sample_key_compare(const void *a, const void *b) {
        const SampleKey *x = a, *y = b;
        int r;

        r = CMP(x->pid, y->pid);
        if (r != 0)
                return r;
        if (!x->comm != !y->comm)
                return x->comm ? 1 : -1;
        if (x->comm) {
                r = strcmp(x->comm, y->comm);
                if (r != 0)
                        return r;
        }
        return CMP(x->sample, y->sample);
}

typedef struct ProcessGroup {
        size_t first_sample;
        size_t start, end; /* range in the sorted keys */
} ProcessGroup;

static int process_group_compare(const void *a, const void *b) {
        const ProcessGroup *x = a, *y = b;
        return CMP(x->first_sample, y->first_sample);
}

/* One process per distinct (pid, comm) label pair, in the order of their first sample. */
static int read_processes(PprofReader *rd) {
        const Perftools__Profiles__Profile *p = rd->p;
        _cleanup_free_ SampleKey *keys = NULL;
        _cleanup_free_ ProcessGroup *groups = NULL;
        size_t n_groups = 0;
        int r;

        if (p->n_sample == 0)
                return 0;

        keys = calloc(p->n_sample, sizeof(SampleKey));
        groups = calloc(p->n_sample, sizeof(ProcessGroup));
        rd->sample_process = calloc(p->n_sample, sizeof(uint32_t));
        if (!keys || !groups || !rd->sample_process)
                return -ENOMEM;

        for (size_t i = 0; i < p->n_sample; i++) {
                const Perftools__Profiles__Sample *s = p->sample[i];

                if (!s)
                        return -EBADMSG;
                keys[i] = (SampleKey){ .sample = i, .rank = -1, .local_rank = -1 };
                for (size_t j = 0; j < s->n_label; j++) {
                        const Perftools__Profiles__Label *l = s->label[j];
                        const char *key;

                        if (!l)
                                return -EBADMSG;
                        key = pprof_string(p, l->key);
                        if (!key || !pprof_string(p, l->str) || !pprof_string(p, l->num_unit))
                                return -EBADMSG;
                        if (streq(key, "pid")) {
                                if (l->num < 0 || l->num > INT32_MAX)
                                        return -EBADMSG;
                                keys[i].pid = l->num;
                        } else if (streq(key, "comm"))
                                keys[i].comm = pprof_string(p, l->str);
                        else if (streq(key, "rank"))
                                keys[i].rank = label_number(pprof_string(p, l->str));
                        else if (streq(key, "local_rank"))
                                keys[i].local_rank = label_number(pprof_string(p, l->str));
                        else if (streq(key, "role"))
                                keys[i].role = streq(pprof_string(p, l->str), "worker") ? JOB_ROLE_WORKER
                                               : streq(pprof_string(p, l->str), "main") ? JOB_ROLE_MAIN
                                                                                        : JOB_ROLE_NONE;
                }
        }

        qsort(keys, p->n_sample, sizeof(SampleKey), sample_key_compare);
        for (size_t i = 0; i < p->n_sample; i++) {
                if (i == 0 || keys[i].pid != keys[i - 1].pid || !streq_ptr(keys[i].comm, keys[i - 1].comm))
                        groups[n_groups++] = (ProcessGroup){ .first_sample = keys[i].sample, .start = i };
                groups[n_groups - 1].end = i + 1;
        }
        qsort(groups, n_groups, sizeof(ProcessGroup), process_group_compare);

        for (size_t g = 0; g < n_groups; g++) {
                const SampleKey *k = keys + groups[g].start;
                uint32_t index;

                r = profile_data_add_process(rd->d, (pid_t) k->pid, k->comm, NULL, &index);
                if (r < 0)
                        return r;
                if (k->rank >= 0 || k->local_rank >= 0 || k->role != JOB_ROLE_NONE) {
                        JobIdentity job = JOB_IDENTITY_NONE;
                        job.rank = k->rank;
                        job.local_rank = k->local_rank;
                        r = profile_data_process_set_job(rd->d, index, &job, k->role, 0);
                        if (r < 0)
                                return r;
                }
                for (size_t i = groups[g].start; i < groups[g].end; i++)
                        rd->sample_process[keys[i].sample] = index;
        }
        return 0;
}

/* The value that counts samples: samples/count, else the first of unit count, else the first. */
static size_t count_value_index(const Perftools__Profiles__Profile *p) {
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < p->n_sample_type; i++) {
                        const char *type = pprof_string(p, p->sample_type[i]->type),
                                   *unit = pprof_string(p, p->sample_type[i]->unit);

                        if (streq_ptr(unit, "count") && (pass == 1 || streq_ptr(type, "samples")))
                                return i;
                }
        return 0;
}

/* The off_cpu/nanoseconds value's index (our off-CPU profiles), SIZE_MAX: none. */
static size_t offcpu_value_index(const Perftools__Profiles__Profile *p) {
        for (size_t i = 0; i < p->n_sample_type; i++)
                if (streq_ptr(pprof_string(p, p->sample_type[i]->type), "off_cpu") &&
                    streq_ptr(pprof_string(p, p->sample_type[i]->unit), "nanoseconds"))
                        return i;
        return SIZE_MAX;
}

static int read_samples(PprofReader *rd, size_t inflated_size) {
        const Perftools__Profiles__Profile *p = rd->p;
        _cleanup_free_ uint32_t *frames = NULL, *locations = NULL;
        uint64_t budget = (uint64_t) inflated_size * PPROF_FRAMES_PER_BYTE + PPROF_FRAMES_EXTRA, total = 0;
        size_t allocated = 0, value, off;
        int r;

        if (p->n_sample == 0)
                return 0;
        if (p->n_sample_type == 0)
                return -EBADMSG;
        for (size_t i = 0; i < p->n_sample_type; i++)
                if (!p->sample_type[i] || !pprof_string(p, p->sample_type[i]->type) ||
                    !pprof_string(p, p->sample_type[i]->unit))
                        return -EBADMSG;
        value = count_value_index(p);
        off = offcpu_value_index(p);

        for (size_t i = 0; i < p->n_sample; i++) {
                const Perftools__Profiles__Sample *s = p->sample[i];
                uint64_t n = 0, off_ns;
                size_t k;

                if (s->n_value != p->n_sample_type || s->value[value] < 0 ||
                    (off != SIZE_MAX && s->value[off] < 0))
                        return -EBADMSG;
                off_ns = off != SIZE_MAX ? (uint64_t) s->value[off] : 0;

                for (size_t j = 0; j < s->n_location_id; j++) {
                        uint32_t l = id_index_lookup(rd->locations, p->n_location, s->location_id[j]);

                        if (l == PROFILE_NONE)
                                return -EBADMSG;
                        n += rd->loc_n[l];
                }
                if (n > budget || n >= UINT32_MAX)
                        return -E2BIG;
                budget -= n;

                if (s->value[value] == 0 && off_ns == 0)
                        continue;
                /* The counts add up within int64, as the writers sum them. */
                if ((uint64_t) s->value[value] > INT64_MAX - total)
                        return -EBADMSG;
                total += (uint64_t) s->value[value];

                if (n > allocated) {
                        size_t a = MAX((size_t) n, allocated * 2);
                        uint32_t *f = reallocarray(frames, a, sizeof(uint32_t));

                        if (!f)
                                return -ENOMEM;
                        frames = f;
                        f = reallocarray(locations, a, sizeof(uint32_t));
                        if (!f)
                                return -ENOMEM;
                        locations = f;
                        allocated = a;
                }

                /* Root first: the last location first, and within a
                 * location the last (outermost) line first. */
                k = 0;
                for (size_t j = s->n_location_id; j > 0; j--) {
                        uint32_t l = id_index_lookup(rd->locations, p->n_location, s->location_id[j - 1]);

                        for (uint32_t m = rd->loc_n[l]; m > 0; m--, k++) {
                                frames[k] = rd->loc_frames[rd->loc_first[l] + m - 1];
                                locations[k] = rd->loc_locations[rd->loc_first[l] + m - 1];
                        }
                }

                r = profile_data_add_stack_values(rd->d, rd->sample_process[i], frames,
                                                  n > 0 ? locations : NULL, (size_t) n, false,
                                                  (uint64_t) s->value[value], off_ns);
                if (r < 0)
                        return r;
        }
        return 0;
}

int report_read_pprof(const void *data, size_t size, ProfileData **ret) {
        _cleanup_(profile_free_unpackedp) Perftools__Profiles__Profile *p = NULL;
        _cleanup_(profile_data_freep) ProfileData *d = NULL;
        _cleanup_(pprof_reader_done) PprofReader rd = {};
        _cleanup_free_ uint8_t *buf = NULL;
        size_t n;
        int r;

        if (!data || !ret)
                return -EINVAL;

        r = gunzip(data, size, &buf, &n);
        if (r < 0)
                return r;

        p = perftools__profiles__profile__unpack(NULL, n, buf);
        if (!p)
                return -EBADMSG; /* or out of memory: protobuf-c does not say */
        free(TAKE_PTR(buf));

        if (p->n_string_table == 0 || !streq(strempty(p->string_table[0]), ""))
                return -EBADMSG;

        d = profile_data_new();
        if (!d)
                return -ENOMEM;
        rd = (PprofReader){ .p = p, .d = d };

        r = read_mappings(&rd);
        if (r < 0)
                return r;
        r = read_functions(&rd);
        if (r < 0)
                return r;
        r = read_locations(&rd);
        if (r < 0)
                return r;
        r = read_processes(&rd);
        if (r < 0)
                return r;
        r = read_samples(&rd, n);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(d);
        return 0;
}
