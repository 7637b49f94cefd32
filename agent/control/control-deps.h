/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "config-ref.h"
#include "counters.h"
#include "kube.h"
#include "machine.h"
#include "sampling.h"
#include "sessions.h"

/* The control room's own state (ControlRoom, opaque above the room;
 * control-room.h inside it). What it needs from above comes in ControlDeps,
 * which the Manager fills in (manager-rooms.c). */

typedef struct ControlRoom ControlRoom;

/* ListReports calls read at once on the report worker; more are refused. */
#define LIST_REPORTS_MAX_PENDING 16U

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
        /* Off-CPU profiling: NULL when the kernel offers it, else why not
         * (or no sampler). */
        const char *offcpu_unavailable;
        const char *offcpu_record_at; /* sampler_offcpu_record_at() */
        DebuginfodFetcher *debuginfod; /* NULL: no debuginfodUrls at start */
        char *const *debuginfod_urls;
        Session *const *sessions; /* running and armed */
        size_t n_sessions;
} ControlStatus;

/* A cgroup the Manager knows (its CgroupState), as the control operations
 * see it. Borrowed: valid until the loop runs again. */
typedef struct ControlCgroup {
        const char *path; /* relative to the cgroup root */
        bool container; /* a Kubernetes container's cgroup */
        const char *pod_uid, *container_id;
        Session *session; /* running or armed for it, or NULL */
} ControlCgroup;

typedef struct ControlDeps {
        /* Borrowed: they outlive the room. */
        const char *node_name;
        const char *sysctl_root; /* NULL: /proc/sys */
        KubeRoom *kube;
        MachineRoom *machine;
        SessionsRoom *sessions_room;
        void *userdata; /* for the callbacks */
        /* Fills *ret with what GetStatus reports now. */
        void (*status)(void *userdata, ControlStatus *ret);
        /* The config now (the last good one). */
        ConfigRef *(*config)(void *userdata);
        /* The cgroup root ("" before startup). */
        const char *(*cgroup_root)(void *userdata);
        /* Whether a session may start now (false: stopping, or no sampler). */
        bool (*can_start)(void *userdata);
        /* The running and armed sessions (the Manager's list). */
        Session *const *(*sessions)(void *userdata, size_t *ret_n);
        /* A running or armed session by ID, or NULL. */
        Session *(*session_find)(void *userdata, const char *id);
        /* A known cgroup by path (relative to the cgroup root), or the
         * container cgroup of a pod's container: false when not known. */
        bool (*cgroup_find)(void *userdata, const char *path, ControlCgroup *ret);
        bool (*cgroup_find_container)(void *userdata, const char *pod_uid, const char *container_id,
                                      ControlCgroup *ret);
        /* The host rule that selects a cgroup path, or NULL. */
        const Target *(*host_target)(void *userdata, const char *path);
        /* Counts a session that could not be created ("create") or started ("start"). */
        void (*session_failed)(void *userdata, const char *reason);
        /* Adds a session started on request to the Manager and starts it
         * (manager_launch_session()): takes ownership of s. */
        int (*launch_session)(void *userdata, Session *s);

        /* The D-Bus API. Borrowed: */
        sd_event *event;
        const char *bus_socket; /* the private socket's path */
        const char *config_path;
        /* "ok", or the error of the last (re)load. */
        const char *(*last_config_load)(void *userdata);
        uint64_t (*uptime_usec)(void *userdata);
        /* Reloads the config (manager_reload()). */
        int (*reload)(void *userdata, char **ret_error);
        /* reportDir now: its path ("" when none) and, in *ret_fd, its fd
         * (< 0 when it could not be opened). */
        const char *(*report_dir)(void *userdata, int *ret_fd);
        /* A ListReports read on the report worker begins (false: refused,
         * and counted, LIST_REPORTS_MAX_PENDING being read, with the http
         * room's) or ends. */
        bool (*listing_begin)(void *userdata);
        void (*listing_end)(void *userdata);
        /* A listing done on the report worker: once stopping, the agent exits after the last. */
        void (*reports_written)(void *userdata);
        /* The control socket cannot accept again: the agent stops (manager_fatal()). */
        void (*fatal)(void *userdata, int error);
} ControlDeps;

int control_room_new(const ControlDeps *deps, ControlRoom **ret);
ControlRoom *control_room_free(ControlRoom *c);

/* Status as a JSON document (for the bus API). */
char *manager_status_json(ControlRoom *c);
