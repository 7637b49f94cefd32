/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "counters.h"
#include "kube.h"
#include "machine.h"
#include "sampling.h"
#include "sessions.h"

/* The control room's own state (ControlRoom, opaque above the room;
 * control-room.h inside it). What it needs from above comes in ControlDeps,
 * which the Manager fills in (manager-rooms.c). */

typedef struct ControlRoom ControlRoom;

/* How long the event loop's handlers keep it (the Manager's loop
 * statistics), for GetStatus. */
typedef struct ControlLoopStats {
        uint64_t dispatches, dispatch_usec_total, dispatch_usec_max, dispatches_over_50ms;
        uint64_t dispatch_cpu_usec_max;
        /* The longest dispatch over the last recent_sec seconds, in wall and CPU time. */
        uint64_t recent_usec_max, recent_cpu_usec_max;
        unsigned recent_sec;
} ControlLoopStats;

/* What GetStatus reports of the Manager and the rooms, gathered when asked.
 * Borrowed: valid until the loop runs again. */
typedef struct ControlStatus {
        const char *node_name, *config_path, *report_dir, *cgroup_root;
        SamplerMode attach_mode;
        uint64_t start_usec; /* CLOCK_REALTIME */
        KubeRoom *kube;
        MachineRoom *machine;
        SessionsRoom *sessions_room;
        size_t cgroups_watched;
        size_t sessions_fd_starved;
        ProcMapsCache *maps_cache;
        ProcEventQueue *proc_event_queue;
        const SamplePark *sample_park;
        uint64_t list_reports_refused;
        const Timing *drain_timing;
        ControlLoopStats loop;
        Unwinder *unwinder; /* NULL: none */
        DebuginfodFetcher *debuginfod; /* NULL: no debuginfodUrls at start */
        char *const *debuginfod_urls;
        Session *const *sessions; /* running and armed */
        size_t n_sessions;
} ControlStatus;

typedef struct ControlDeps {
        void *userdata; /* for the callbacks */
        /* Fills *ret with what GetStatus reports now. */
        void (*status)(void *userdata, ControlStatus *ret);
} ControlDeps;

int control_room_new(const ControlDeps *deps, ControlRoom **ret);
ControlRoom *control_room_free(ControlRoom *c);

/* Status as a JSON document (for the bus API). */
char *manager_status_json(ControlRoom *c);
