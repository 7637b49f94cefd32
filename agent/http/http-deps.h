/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
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

/* What the listener and the pulls (manager-http.c, manager-pull.c) need
 * from above: the event loop, the node, the sessions and kube rooms, the
 * metrics' counters, and through the callbacks: the config, reportDir (its
 * fd, -EBADF when none), a session by ID, starting a session for a target
 * (ret_id, or ret_error's message), stopping one, whether the config
 * targets a host cgroup, report listings on the report worker (refused:
 * true, and counted, when list_reports_max are being read already;
 * pending: one more submitted, or one fewer done), and a job on the report worker done (reports_written: a stopping
 * agent exits once the worker is idle). */
typedef struct HttpRoomDeps {
        sd_event *event;
        const char *node_name;
        struct SessionsRoom *sessions_room;
        struct KubeRoom *kube;
        struct ManagerMetrics *metrics;
        unsigned list_reports_max;
        const Config *(*config)(void *userdata);
        const char *(*report_dir)(void *userdata, int *ret_fd);
        Session *(*session_find)(void *userdata, const char *id);
        int (*start_session)(void *userdata, const char *target, uint64_t duration_usec, char **ret_id,
                             char **ret_error);
        int (*stop_session)(void *userdata, const char *id, char **ret_error);
        bool (*host_target)(void *userdata, const char *path);
        bool (*listing_refused)(void *userdata);
        void (*listing_pending)(void *userdata, bool more);
        void (*reports_written)(void *userdata);
        void *userdata;
} HttpRoomDeps;

/* The http room's state (manager-http.c): the listener and the pulls. */
typedef struct HttpRoom HttpRoom;
