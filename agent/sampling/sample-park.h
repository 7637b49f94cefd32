/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "sampler.h"

/* Samples drained before their process's mappings were read (its event is
 * still queued, proc-event-queue.h): resolving them now would read the
 * mappings on the event loop, or leave their frames unsymbolized. They are
 * kept (copies of their stacks), at most SAMPLE_PARK_MAX, and handed back
 * at a later drain once their process is ready. */

#define SAMPLE_PARK_MAX 8192U

typedef struct ParkedSample ParkedSample;

typedef struct SamplePark {
        ParkedSample **samples;
        size_t n, allocated;
        uint64_t parked_total, full_total; /* parked; not parked because it was full */
} SamplePark;

/* 0, or -ENOSPC when SAMPLE_PARK_MAX are kept already, -ENOMEM. */
int sample_park_add(SamplePark *p, const struct cgprof_sample_key *key, uint64_t count,
                    const SamplerStack *user, const SamplerStack *kernel, const SamplerStack *python,
                    bool stack_lost);

/* Whether a parked sample still waits. */
typedef bool (*SampleParkWaitFunc)(const struct cgprof_sample_key *key, void *userdata);

/* Hands back (to cb, in the order they were parked) the samples that no
 * longer wait (all of them when wait is NULL), and forgets them. */
void sample_park_replay(SamplePark *p, SampleParkWaitFunc wait, SamplerSampleCallback cb, void *userdata);
void sample_park_done(SamplePark *p);
