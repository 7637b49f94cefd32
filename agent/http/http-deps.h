/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

#include "counters.h"
#include "sampling.h"
#include "sessions.h"
#include "kube.h"

/* What the http room needs from above, given by the Manager
 * (manager-rooms.c): the room never reads the Manager itself. */

/* What /metrics reads beyond the metrics' own counters (metrics.c): the
 * node and attach mode, the sessions and kube rooms, the Manager's timings
 * (their histograms, whose buckets metrics_new() sets), and through the
 * callbacks what changes as the agent runs: the running and armed
 * sessions, the sampler (NULL before it is made), the cgroups waiting for
 * fds, and the cgroups watched. */
typedef struct MetricsDeps {
        const char *node_name;
        SamplerMode attach_mode;
        struct SessionsRoom *sessions_room;
        struct KubeRoom *kube;
        Histogram *loop_histogram; /* every event loop dispatch's wall time */
        Histogram *drain_histogram; /* manager_drain() */
        Session **(*sessions)(void *userdata, size_t *ret_n);
        Sampler *(*sampler)(void *userdata);
        size_t (*sessions_fd_starved)(void *userdata);
        size_t (*cgroups_watched)(void *userdata);
        void *userdata;
} MetricsDeps;
