/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Samples waiting for their process's mappings (see sample-park.h). */
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sample-park.h"

typedef struct ParkedStack {
        bool present;
        SamplerStack stack; /* pointers into the sample's allocation */
} ParkedStack;

struct ParkedSample {
        struct cgprof_sample_key key;
        uint64_t count;
        bool stack_lost;
        ParkedStack user, kernel, python;
        uint64_t data[]; /* the stacks' words */
};

static size_t stack_words(const SamplerStack *s) {
        if (!s)
                return 0;
        return s->n + (s->fp_frames ? (s->n + 63) / 64 : 0);
}

static void stack_copy(ParkedStack *to, const SamplerStack *from, uint64_t **data) {
        if (!from)
                return;
        to->present = true;
        to->stack = (SamplerStack){ .n = from->n, .flags = from->flags };
        if (from->n > 0) {
                memcpy(*data, from->pcs, from->n * sizeof(uint64_t));
                to->stack.pcs = *data;
                *data += from->n;
        }
        if (from->fp_frames) {
                size_t w = (from->n + 63) / 64;
                if (w > 0)
                        memcpy(*data, from->fp_frames, w * sizeof(uint64_t));
                to->stack.fp_frames = *data;
                *data += w;
        }
}

int sample_park_add(SamplePark *p, const struct cgprof_sample_key *key, uint64_t count,
                    const SamplerStack *user, const SamplerStack *kernel, const SamplerStack *python,
                    bool stack_lost) {
        size_t words = stack_words(user) + stack_words(kernel) + stack_words(python);
        ParkedSample *ps;
        uint64_t *data;

        if (p->n >= SAMPLE_PARK_MAX) {
                p->full_total++;
                return -ENOSPC;
        }
        if (p->n == p->allocated) {
                size_t na = MAX(p->allocated * 2, (size_t) 64);
                ParkedSample **a = reallocarray(p->samples, na, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                p->samples = a;
                p->allocated = na;
        }
        ps = calloc(1, sizeof(*ps) + words * sizeof(uint64_t));
        if (!ps)
                return -ENOMEM;
        ps->key = *key;
        ps->count = count;
        ps->stack_lost = stack_lost;
        data = ps->data;
        stack_copy(&ps->user, user, &data);
        stack_copy(&ps->kernel, kernel, &data);
        stack_copy(&ps->python, python, &data);
        p->samples[p->n++] = ps;
        p->parked_total++;
        return 0;
}

void sample_park_replay(SamplePark *p, SampleParkWaitFunc wait, SamplerSampleCallback cb, void *userdata) {
        size_t kept = 0;

        for (size_t i = 0; i < p->n; i++) {
                ParkedSample *ps = p->samples[i];
                if (wait && wait(&ps->key, userdata)) {
                        p->samples[kept++] = ps;
                        continue;
                }
                cb(&ps->key, ps->count, ps->user.present ? &ps->user.stack : NULL,
                   ps->kernel.present ? &ps->kernel.stack : NULL,
                   ps->python.present ? &ps->python.stack : NULL, ps->stack_lost, userdata);
                free(ps);
        }
        p->n = kept;
        if (p->n == 0 && p->allocated > 1024) {
                free(p->samples);
                p->samples = NULL;
                p->allocated = 0;
        }
}

void sample_park_done(SamplePark *p) {
        for (size_t i = 0; i < p->n; i++)
                free(p->samples[i]);
        free(p->samples);
        *p = (SamplePark){};
}
