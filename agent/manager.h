/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "base.h"
#include "config.h"
#include "config-ref.h"
#include "control.h"
#include "counters.h"
#include "sampling.h"
#include "sessions.h"
#include "hashmap.h"
#include "log.h"

#define DEFAULT_STATE_DIR "/var/lib/cgprof/state"
#define DEFAULT_BUS_SOCKET "/run/cgprof/bus"
#define DRAIN_INTERVAL_USEC (1 * USEC_PER_SEC)

typedef struct Session Session;

/* A cgroup the manager knows about and what it did with it. */
typedef struct CgroupState {
        char *path;
        bool container; /* a Kubernetes container's cgroup (see kube-cgroup.h) */
        char pod_uid[37];
        char container_id[65];
        Session *session; /* running or armed session for this cgroup, if any */
        bool done; /* a session for it ended: do not start another automatically */
        uint64_t bpf_cgroup_id; /* its ID in the BPF cgroups map (0: not there) */
        bool fd_starved; /* its session could not start for lack of fds: tried again (manager_launch_session) */
        struct CgroupState *same_container_next; /* another with this container_id, later in path order */
} CgroupState;

DEFINE_STRING_HASHMAP(CgroupStateMap, cgroup_state_map, CgroupState);

/* The container cgroups of one pod, in path order: what its pod's events
 * concern (manager-pods.c). */
typedef struct PodCgroups {
        char pod_uid[37];
        CgroupState **cgroups;
        size_t n_cgroups, n_allocated;
} PodCgroups;

DEFINE_STRING_HASHMAP(PodCgroupsMap, pod_cgroups_map, PodCgroups);
DEFINE_STRING_HASHMAP(SessionMap, session_map, Session);

/* Sorts cgroups by path (the order every walk over them keeps). */
void cgroup_states_sort(CgroupState **l, size_t n);

#define LOOP_RECENT_SEC 10U

typedef struct ManagerOptions {
        const char *config_path;
        const char *state_dir;
        const char *cgroup_root; /* NULL: found in /proc/self/mountinfo */
        const char *sysctl_root; /* NULL: /proc/sys */
        const char *bus_socket;
        const char *node_name;
        SamplerMode attach_mode;
        bool no_kubernetes;
        const char *kubeconfig; /* NULL: in-cluster configuration */
        unsigned kube_idle_sec; /* silent watch timeout (0: default) */
        unsigned kube_backoff_max_msec; /* reconnect backoff cap (0: default) */
        uint32_t bench_variant; /* CGPROF_BENCH_*: a benchmark's variant of the BPF program */
        bool no_offcpu; /* --no-offcpu: off-CPU profiling off on this node */
        const char
                *cupti_socket; /* --cupti-socket: the CUPTI library's socket, NULL: the default, "": none */
} ManagerOptions;

typedef struct Manager {
        sd_event *event;
        ManagerOptions opts;
        char *node_name;
        char *config_path;
        char *state_dir;
        char *bus_socket;

        ConfigRef *config;
        char *last_config_load; /* "ok", or the error of the last (re)load */
        int report_dir_fd;
        char *report_dir;

        char *cgroup_root;
        int cgroup_root_fd;
        CgroupWatch *cgroup_watch;
        CgroupStateMap cgroups; /* by path */
        CgroupStateMap cgroups_by_container; /* the container cgroups by container ID */
        PodCgroupsMap pod_cgroups; /* the container cgroups by pod UID */

        Sampler *sampler;
        Unwinder *unwinder; /* the unwind tables in the sampler's maps */
        Python *python; /* CPython processes, for the Python frame walk */
        struct {
                uint64_t dispatches, dispatch_usec_total, dispatch_usec_max, dispatches_over_50ms;
                /* The longest dispatch in each of the last LOOP_RECENT_SEC
                 * seconds (slot: second % LOOP_RECENT_SEC). */
                uint64_t recent_usec_max[LOOP_RECENT_SEC], recent_sec[LOOP_RECENT_SEC];
                uint64_t stopping_usec_max; /* since the agent began to stop */
                /* The same in the loop thread's CPU time (without preemption). */
                uint64_t dispatch_cpu_usec_max, recent_cpu_usec_max[LOOP_RECENT_SEC], stopping_cpu_usec_max;
                Histogram dispatch_histogram; /* every dispatch's wall time (/metrics) */
        } loop; /* how long handlers keep the event loop (manager_loop()) */
        Timing drain_timing; /* manager_drain(): the maps read, every sample symbolized */
        /* The sessions room's own state (sessions-deps.h): the sessions'
         * counts and end queue, the report worker, the reports queued on it
         * and their timing, the report index and retention, the retry
         * queue, the checkpoint registry. The indexes below are the
         * Manager's, kept by the room through SessionsRoomDeps. */
        struct SessionsRoom *sessions_room;
        unsigned list_reports_pending; /* ListReports calls being read on the report worker */
        uint64_t list_reports_refused; /* ... and refused, LIST_REPORTS_MAX_PENDING being read */
        Symbolizer *symbolizer;
        ProcessReader *process_reader;
        ProcMapsCache *maps_cache; /* /proc/PID/maps read once per loop iteration (proc-maps.h) */
        ProcEventQueue *proc_event_queue; /* process events, their mappings read off the loop */
        CuptiSocket *cupti_socket; /* kernel records of the CUPTI library (gpu.durations), NULL: none */
        uint64_t cupti_unattributed; /* records of a process of no session with gpu.durations */
        SamplePark sample_park; /* samples whose process's event is still queued */
        DebuginfodFetcher *debuginfod; /* NULL: no debuginfodUrls at start */
        char **debuginfod_urls; /* the servers it uses (debuginfodUrls at start) */

        Session *sessions_by_slot[CGPROF_MAX_SESSIONS];
        Session **sessions; /* running and armed sessions */
        size_t n_sessions;
        SessionMap sessions_by_id; /* the same, by id_string */
        size_t sessions_fd_starved; /* cgroups whose session waits for fds (CgroupState.fd_starved) */
        uint64_t trimmed_at_sessions, trimmed_usec; /* the last malloc_trim() (on_drain_timer()) */
        sd_event_source *fd_retry_timer;

        /* Kubernetes: the client, pods, namespaces, ProfileConfigs and
         * rule sets, the kube room's state (kube.h). */
        struct KubeRoom *kube;

        /* machineConfig on this node and the agent's own Node, whose
         * labels select its entries: the machine room's state (machine.h). */
        struct MachineRoom *machine;

        /* The http room's state (http-deps.h): the HTTP listener with
         * /metrics and the profiles over HTTP (manager-http.c,
         * manager-pull.c), and what the metrics count beyond the counters
         * above (metrics.c). */
        struct HttpRoom *http_room;
        struct ManagerMetrics *metrics;
        struct ControlRoom *control; /* the control room's own state (control-deps.h) */

        sd_event_source *drain_timer;
        sd_event_source *proc_events;
        sd_event_source *sigterm, *sigint, *sighup;

        unsigned drains_postponed; /* in a row, for process events left (on_drain_timer()) */
        uint64_t start_usec; /* CLOCK_REALTIME */
        uint64_t start_monotonic;
        bool stopping;
        uint64_t stopping_since; /* CLOCK_MONOTONIC */
        int exit_code; /* once stopping: sd_event_exit()'s when the last report is written */
} Manager;

int manager_new(const ManagerOptions *opts, Manager **ret);

/* A batch of reports was written (report-writer.c): once stopping, the
 * agent exits when the last one is. */
void manager_reports_written(Manager *m);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

int manager_startup(Manager *m);
int manager_run(Manager *m);

/* Reloads the config (SIGHUP, Reload()): on success the new config applies
 * (machineConfig, targets); on failure the last good one is kept and
 * *ret_error (if non-NULL) gets the message. m->last_config_load records
 * the outcome either way. */
int manager_reload(Manager *m, char **ret_error);

/* Drains the sampler maps into the sessions (twice: everything recorded so far). */
int manager_drain(Manager *m, bool full);
/* Reads the process's mappings again, off the loop; then
 * session_refresh_process() (with them in the maps cache). */
void manager_refresh_process_soon(Manager *m, uint32_t session_slot, uint32_t pid, uint64_t start_time,
                                  uint32_t exec_id);

/* The one way a session is added to the Manager and started, for the
 * cgroup watch, the Kubernetes watch and the control API alike. Takes
 * ownership of s: on failure it is removed again, freed and counted in
 * sessionsFailed (and logged as "Failed to start profiling <what>" when what
 * is given). manual: started on request (session_start_manual()). An
 * automatic session that failed for lack of file descriptors (EMFILE,
 * ENFILE) is tried again with its cgroup (status: sessionsWaitingForFds). */
int manager_launch_session(Manager *m, Session *s, bool manual, const char *what);
/* Counts a session that could not be created ("create"), started
 * ("start") or whose report could not be written ("report"): in
 * sessionsFailed and cgprof_sessions_failed_total{reason}. */
void manager_count_session_failed(Manager *m, const char *reason);
/* Notes that a session for cgroup path could not be made (r): for lack of
 * fds, the cgroup is tried again. */
void manager_session_failed(Manager *m, const char *path, int r);

/* Session bookkeeping, which the sessions room calls through
 * SessionsRoomDeps (manager-rooms.c): the Manager alone writes its indexes
 * (the list, the slots, each cgroup's session). */
int manager_add_session(Manager *m, Session *s);
/* The session has its sampler slot (taken), or no more. */
void manager_session_slot(Manager *m, Session *s, bool taken);
/* reason: why it ended; "duration" and "stopped" mark the cgroup done (no
 * automatic restart), other endings (untargeted, pod-deleted...) do not. */
void manager_remove_session(Manager *m, Session *s, const char *reason);
/* An error the agent cannot carry on after (a timer that cannot be armed
 * again, a listening socket gone bad): ends the sessions (their reports are
 * written) and stops the agent with a non-zero exit. The caller logs why. */
void manager_fatal(Manager *m, int error);
/* Points every known cgroup at or below 'path' to the deepest running session. */
void manager_assign_cgroups_below(Manager *m, const char *path);

/* Starts or ends the session a cgroup needs now (pod rules for container
 * cgroups when Kubernetes is on, else host rules). A session started on
 * request (control API) is left alone. */
void manager_reconcile_cgroup(Manager *m, CgroupState *c);

/* Known cgroups: by path (relative to the cgroup root), or the container
 * cgroup with that container ID. NULL when not known. */
CgroupState *manager_cgroup_find(Manager *m, const char *path);
/* The cgroup of a pod's container: its container ID, and its path's pod UID that of the pod. */
CgroupState *manager_cgroup_find_container(Manager *m, const char *pod_uid, const char *container_id);
/* A running or armed session by ID, or NULL. */
Session *manager_session_find(Manager *m, const char *id);
/* The host rule (a target with cgroupPatterns and no Kubernetes condition)
 * that selects a cgroup path, or NULL. */
const Target *manager_host_target(Manager *m, const char *path);

/* Since the agent started (the bus API's Uptime). */
uint64_t manager_uptime_usec(Manager *m);
/* The control room's control_start_session() and control_stop_session(),
 * for the http room (pull). */
int manager_start_session(Manager *m, const char *target, const char *profile, uint64_t duration_usec,
                          char **ret_id, char **ret_error);
int manager_stop_session(Manager *m, const char *id, SessionEndedFunc callback, void *userdata,
                         char **ret_error);

/* Re-arms a periodic timer; one that cannot be re-armed stops the agent
 * (manager_fatal()). Returns 0, for the timer's handler to return. */
int manager_rearm(Manager *m, sd_event_source *s, uint64_t usec, const char *what);
