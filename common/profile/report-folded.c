/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <inttypes.h>

#include "report.h"
#include "report-stack.h"

/* Collapsed stacks, as read by flamegraph.pl, inferno and speedscope:
 *
 *     comm;root;...;leaf count
 *
 * Names are rendered once: ';' (the separator), control characters (newline
 * included) become '_'; an empty name becomes "[unknown]"; kernel frames get
 * "_[k]". Spaces stay: the readers split the count off at the last space.
 *
 * Every distinct rendered name gets an ID, so two stacks render to the same
 * line exactly when their ID sequences are equal (';' never occurs inside a
 * name, so a line splits into names one way only). Stacks are sorted by
 * their rendered text, comparing IDs while they are equal and the strings
 * where they differ, and runs of equal lines are merged: stacks of different
 * processes with the same comm, or of frames that differ only in their
 * module, become one line. */

typedef struct FoldedContext {
        const ProfileData *d;
        ReportStackIds ids; /* the ID of each segment: of the rendered name of a frame, a comm */
        const char **by_id; /* the rendered name of each ID */
} FoldedContext;

static int name_compare(const void *a, const void *b, void *userdata) {
        char **names = userdata;
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;

        return strcmp(names[x], names[y]);
}

/* Compares two lines at the first segment where they differ: x and y are
 * different strings, each followed by ';' when more_x/more_y, else by the end. */
static int segment_compare(const char *x, const char *y, bool more_x, bool more_y) {
        size_t i = 0;

        while (x[i] && x[i] == y[i])
                i++;

        if (x[i] && y[i])
                return CMP((unsigned char) x[i], (unsigned char) y[i]);
        if (!x[i]) /* x is a prefix of y: what follows x decides */
                return !more_x ? -1 : CMP((unsigned char) ';', (unsigned char) y[i]);
        return !more_y ? 1 : CMP((unsigned char) x[i], (unsigned char) ';');
}

static int stack_compare(const void *a, const void *b, void *userdata) {
        const FoldedContext *c = userdata;
        const ProfileStack *x = c->d->stacks + *(const size_t *) a, *y = c->d->stacks + *(const size_t *) b;
        size_t nx = (size_t) x->n_frames + 1, ny = (size_t) y->n_frames + 1;
        size_t k = report_stack_mismatch(&c->ids, x, y);

        /* One is a prefix of the other (or both are equal). */
        if (k == MIN(nx, ny))
                return CMP(nx, ny);
        return segment_compare(c->by_id[report_stack_segment(&c->ids, x, k)],
                               c->by_id[report_stack_segment(&c->ids, y, k)], k + 1 < nx, k + 1 < ny);
}

/* A process's root: its comm, rendered; with rank_root, "rank N;comm" for
 * a ranked process (a segment more: ';' is in no rendered name, so a line
 * still splits one way, and processes of a rank merge under one root). */
static char *process_root_name(const ProfileProcess *p, bool rank_root) {
        _cleanup_free_ char *comm = report_frame_name(p->comm, false, /* folded= */ true);
        char *s;

        if (!comm || !rank_root || p->job.rank < 0)
                return TAKE_PTR(comm);
        if (asprintf(&s, "rank %" PRIi32 ";%s", p->job.rank, comm) < 0)
                return NULL;
        return s;
}

static int write_line(FILE *f, const FoldedContext *c, const ProfileStack *s, uint64_t count) {
        for (size_t k = 0; k <= s->n_frames; k++) {
                if (k > 0)
                        fputc(';', f);
                fputs(c->by_id[report_stack_segment(&c->ids, s, k)], f);
        }
        fprintf(f, " %" PRIu64 "\n", count);
        return ferror(f) ? -EIO : 0;
}

static int folded_write(FILE *f, const ProfileData *d, bool rank_root) {
        _cleanup_free_ uint32_t *order = NULL, *ids = NULL;
        _cleanup_free_ const char **by_id = NULL;
        _cleanup_free_ size_t *stacks = NULL;
        size_t n_names, n_ids = 0;
        _cleanup_strv_free_ char **names = NULL; /* the rendered names fill a prefix */
        FoldedContext c;
        int r;

        if (!f || !d)
                return -EINVAL;
        if (d->n_stacks == 0)
                return 0;

        n_names = d->n_frames + d->n_processes;
        names = calloc(n_names + 1, sizeof(char *));
        order = calloc(n_names, sizeof(uint32_t));
        ids = calloc(n_names, sizeof(uint32_t));
        by_id = calloc(n_names, sizeof(char *));
        stacks = calloc(d->n_stacks, sizeof(size_t));
        if (!names || !order || !ids || !by_id || !stacks)
                return -ENOMEM;

        for (size_t i = 0; i < n_names; i++) {
                if (i < d->n_frames)
                        names[i] = report_frame_name(d->frames[i].name, d->frames[i].kind == FRAME_KERNEL,
                                                     /* folded= */ true);
                else
                        names[i] = process_root_name(d->processes + i - d->n_frames, rank_root);
                if (!names[i])
                        return -ENOMEM;
                order[i] = (uint32_t) i;
        }

        /* One ID per distinct rendered name. */
        qsort_r(order, n_names, sizeof(uint32_t), name_compare, names);
        for (size_t i = 0; i < n_names; i++) {
                if (i == 0 || !streq(names[order[i]], names[order[i - 1]]))
                        by_id[n_ids++] = names[order[i]];
                ids[order[i]] = (uint32_t) n_ids - 1;
        }

        c = (FoldedContext){
                .d = d,
                .ids = { .roots = ids + d->n_frames, .frames = ids },
                .by_id = by_id,
        };

        for (size_t i = 0; i < d->n_stacks; i++)
                stacks[i] = i;
        qsort_r(stacks, d->n_stacks, sizeof(size_t), stack_compare, &c);

        r = 0;
        for (size_t i = 0; i < d->n_stacks;) {
                const ProfileStack *s = d->stacks + stacks[i];
                uint64_t count = 0;

                for (; i < d->n_stacks && report_stack_same(&c.ids, s, d->stacks + stacks[i]); i++)
                        count += d->stacks[stacks[i]].count;

                if (count == 0)
                        continue;
                r = write_line(f, &c, s, count);
                if (r < 0)
                        break;
        }

        return r;
}

int report_write_folded(FILE *f, const ProfileData *d) {
        return folded_write(f, d, false);
}

int report_write_folded_info(FILE *f, const ProfileData *d, const ReportSummaryInfo *info) {
        return folded_write(f, d, info && info->folded_rank_root);
}

/* Parses one folded line into the profile: "comm;f1;...;leaf count". *total
 * sums the counts: it stays within INT64_MAX (pprof's values are int64, and
 * every writer adds counts up), more is -EBADMSG. */
static int folded_parse_line(ProfileData *d, char *line, char ***comms, size_t *n_comms, uint64_t *total) {
        uint32_t frames[512], process = PROFILE_NONE;
        size_t n = 0;
        char *space, *end, *tok, *save = NULL;
        unsigned long long count;

        line[strcspn(line, "\n")] = 0;
        if (line[0] == 0)
                return 0;
        space = strrchr(line, ' ');
        if (!space || space == line)
                return -EBADMSG;
        /* strtoull() would take "-1" as ULLONG_MAX. */
        if (!isdigit((unsigned char) space[1]))
                return -EBADMSG;
        errno = 0;
        count = strtoull(space + 1, &end, 10);
        if (errno != 0 || *end != 0 || count > INT64_MAX - *total)
                return -EBADMSG;
        *total += count;
        *space = 0;

        tok = strtok_r(line, ";", &save);
        if (!tok)
                return -EBADMSG;
        /* The process: one per comm (folded output merged processes of a name). */
        for (size_t i = 0; i < *n_comms; i++)
                if (streq((*comms)[i], tok))
                        process = (uint32_t) i;
        if (process == PROFILE_NONE) {
                char **nc = reallocarray(*comms, *n_comms + 1, sizeof(char *));
                if (!nc)
                        return -ENOMEM;
                *comms = nc;
                if (!(nc[*n_comms] = strdup(tok)))
                        return -ENOMEM;
                if (profile_data_add_process(d, 0, tok, NULL, &process) < 0)
                        return -ENOMEM;
                (*n_comms)++;
        }

        while ((tok = strtok_r(NULL, ";", &save))) {
                size_t l = strlen(tok);
                FrameKind kind = FRAME_USER;
                const char *module = NULL;
                char buf[512];
                int r;

                if (n >= ELEMENTSOF(frames))
                        return -E2BIG;
                if (l > 4 && streq(tok + l - 4, "_[k]")) {
                        tok[l - 4] = 0;
                        kind = streq(tok, "[kernel]") ? FRAME_UNKNOWN : FRAME_KERNEL;
                        module = "[kernel.kallsyms]";
                } else if (tok[0] == '[' && tok[l - 1] == ']') {
                        kind = FRAME_UNKNOWN;
                        snprintf(buf, sizeof(buf), "%.*s", (int) (l - 2), tok + 1);
                        module = streq(buf, "unknown") ? NULL : buf;
                        if (module && module[0] != 0 && (streq(buf, "vdso") || streq(buf, "vsyscall")))
                                module = tok; /* "[vdso]" is its own module name */
                }
                r = profile_data_intern_frame(d, tok, module, kind, &frames[n]);
                if (r < 0)
                        return r;
                n++;
        }
        return profile_data_add_stack(d, process, frames, n, count);
}

int report_read_folded(FILE *f, ProfileData **ret) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ char *line = NULL;
        char **comms = NULL;
        size_t n_comms = 0, allocated = 0;
        uint64_t total = 0;
        int r = 0;

        if (!d)
                return -ENOMEM;
        while (getline(&line, &allocated, f) >= 0) {
                r = folded_parse_line(d, line, &comms, &n_comms, &total);
                if (r < 0)
                        break;
        }
        for (size_t i = 0; i < n_comms; i++)
                free(comms[i]);
        free(comms);
        if (r < 0)
                return r;
        if (ferror(f))
                return -EIO;
        *ret = TAKE_PTR(d);
        return 0;
}
