/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-id128.h>

#include "base.h"
#include "config-ref.h"
#include "cuda-join.h"
#include "cupti-wire.h"
#include "hashmap.h"
#include "profile-data.h"
#include "sessions-deps.h"
#include "report.h"
#include "template.h"

/* A session: one profile applied to one target cgroup for a span of time.
 * It owns its slot in the sampler, the processes seen in it (with their
 * mapping snapshots, so processes that exit early are still symbolized), and
 * the symbolized samples, which it writes as reports when it ends. Samples
 * are symbolized as they are drained (every second), so the work on the
 * event loop is bounded by one second of samples; ending a session only
 * formats what is already symbolized. */

/* The states, and their names in status, ListSessions and cgprofctl: one
 * definition for the enum and the names. */
#define SESSION_STATES(X)                                                         \
        X(SESSION_NEW, "new") /* not started yet */                               \
        X(SESSION_ARMED, "armed") /* manual start: waiting for cgprofctl start */ \
        X(SESSION_RUNNING, "running")                                             \
        X(SESSION_ENDED, "ended") /* stopped; its reports are being written */

#define SESSION_STATE_ENUM(e, name) e,
typedef enum SessionState {
        SESSION_STATES(SESSION_STATE_ENUM) _SESSION_STATE_MAX
} SessionState;
#undef SESSION_STATE_ENUM

const char *session_state_to_string(SessionState state);

typedef struct SessionProcess SessionProcess; /* a program run in the session (session.c) */
typedef struct SessionThread SessionThread; /* a thread of an off-CPU session, by TID (session-threads.c) */
DEFINE_UINT64_HASHMAP(SessionThreads, session_threads, SessionThread);

struct Session {
        SessionsRoom *room; /* the room's own state (sessions-room.h) */
        sd_id128_t id;
        char id_string[SD_ID128_STRING_MAX];
        SessionState state;

        ConfigRef *config;
        KubeRuleSet *rule_set; /* the namespace's rules it was started under, or NULL */
        const Profile *profile;
        const Target *target;
        char *profile_config; /* the ProfileConfig its target or profile comes from, or NULL */
        bool namespaced_output; /* a ProfileConfig's profile: reports below {NAMESPACE}/ */
        char *output; /* the report path template, relative to reportDir (see session_output()) */

        char *cgroup; /* relative to the cgroup root */
        /* Kubernetes metadata of a container's session (all NULL for a host cgroup). */
        char *namespace, *pod, *pod_uid, *container, *container_id;
        char **job_labels; /* the pod's distributed-job labels (strv: key, value, ...), NULL: none */
        char **cuda_probes; /* the launch probes its processes held (strv: file, entry points, ...), NULL: none */
        bool provisional; /* started from the cgroup before the pod's status named the container */
        bool requested; /* started through the control API: kept when no rule targets its cgroup any more */
        unsigned
                extra_formats; /* ReportFormat bits written beyond the profile's (a pull over HTTP: pprof) */
        bool report_if_sampled; /* a pull whose client hung up: no report unless something was sampled */
        uint64_t duration_usec; /* 0: until stopped; the profile's unless overridden before the start */
        int cgroup_fd;
        uint64_t cgroup_id;
        uint32_t slot;
        unsigned max_stack_depth; /* a user stack this deep was truncated */
        const char *event; /* the event sampled */
        char *event_fallback;

        uint64_t start_realtime, start_monotonic, end_realtime;
        uint64_t cpu_usage_start, cpu_usage_last;
        bool cpu_usage_final; /* cpu_usage_last was read after the cgroup emptied */
        bool sampled_since_cpu_read; /* samples drained since cpu.stat was last read */
        unsigned ticks_since_cpu_read;
        sd_event_source *timer;
        sd_event_source *events_watch; /* inotify on cgroup.events: read cpu.stat when it empties */

        ProfileData *data;
        void *processes; /* tsearch: SessionProcess by (pid, start time) */
        /* data->processes[i] is the program of data_processes[i] (a process
         * renamed has several entries): late resolution needs its mappings. */
        SessionProcess **data_processes;
        size_t n_data_processes;
        uint64_t symbols_generation; /* the symbolizer's when frames were last resolved (late) */
        uint64_t excluded; /* samples of excluded processes */
        uint64_t stack_lost; /* samples whose stack was lost */
        uint64_t frames_total, frames_unsymbolized; /* weighted by samples */
        bool captures_pending; /* a process's mappings and symbols are to be captured */
        ReportUnwindInfo unwind; /* how user stacks were walked (mode set when the report is written) */
        ReportPythonInfo python; /* how Python stacks were walked */
        const char *offcpu_unavailable; /* the sampler's: why off-CPU time is not recorded */
        const char *offcpu_record_at; /* the sampler's: sampler_offcpu_record_at() */
        uint64_t offcpu_excluded_ns; /* off-CPU time of excluded processes */
        /* GPU time (gpu.durations, session-cuda-time.c): the kernel records
         * waiting for their launch, and the launches' stacks by sample key. */
        CudaJoin cuda_join;
        Hashmap cuda_anchors;
        SessionThreads threads; /* the names of its threads, by TID (session-threads.c) */
        ReportThread *report_threads; /* its threads' totals as its last report had them */
        size_t n_report_threads;

        /* Reports (session-report.c) and checkpoints (checkpoint.c). */
        char report_uid
                [9]; /* {UID}: one per session, so its checkpoints and final report share directories */
        sd_event_source *checkpoint_timer;
        char *checkpoint_report_dir; /* the reportDir of its registry entry (NULL: no checkpoint yet) */
        char **checkpoint_dirs; /* strv: its report directories there, relative */
        int checkpoint_error; /* of the last checkpoint (logged when it changes) */
        bool checkpoint_writing; /* the last checkpoint is on the report worker */
        /* Its counters as /metrics last showed them (metrics.c): they never go down. */
        uint64_t metrics_seen[COUNTER_TABLE_COLUMNS];
};

/* What a container's session knows of its pod; container may be NULL (not
 * known yet: the session is provisional until session_confirm()). */
typedef struct SessionKube {
        const char *namespace, *pod, *pod_uid, *container, *container_id;
        /* The pod's labels (strv: key, value, ...): the distributed job's
         * (report.h's REPORT_JOB_LABELS) are kept. */
        char *const *labels;
} SessionKube;

int session_new(SessionsRoom *r, ConfigRef *config, const Target *target, const char *cgroup,
                const SessionKube *kube, Session **ret);
/* The same under a rule: a target and profile that may come from a
 * namespace's ProfileConfig (the session holds rule->rule_set). */
int session_new_rule(SessionsRoom *r, ConfigRef *config, const SessionRule *rule, const char *cgroup,
                     const SessionKube *kube, Session **ret);
/* A provisional session learns its container's name (and is announced). */
int session_confirm(Session *s, const char *container);
Session *session_free(Session *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Session *, session_free);

/* Opens the perf events and starts sampling (or arms a manual session). */
int session_start(Session *s);
/* Starts sampling now, even when the profile's start is manual (an armed
 * session, or a session started through the control API); marks the
 * session as requested. */
int session_start_manual(Session *s);
/* Ends the session (session-end.c): stops sampling and drains at once;
 * the reports are written on the report worker, and once they are the end
 * is logged to the journal and the session freed. The callback, if any,
 * gets the report directories (space-separated for a per-process
 * template; NULL when none was written, e.g. for an armed session) or the
 * error of writing them; it may be called before session_end_notify()
 * returns. */
int session_end_notify(Session *s, const char *reason, SessionEndedFunc callback, void *userdata);
void session_end(Session *s, const char *reason);
/* Ends the session soon: from a deferred handler that ends sessions
 * until SESSION_END_BUDGET_USEC have passed (at least one), then lets the
 * loop serve everything else before it goes on. For ending many at once
 * (StopAllSessions, SIGTERM). The callback as session_end_notify()'s; for
 * a session that ended meanwhile it gets no directories and no error. */
#define SESSION_END_BUDGET_USEC (5 * USEC_PER_MSEC)
int manager_end_session_soon(SessionsRoom *r, const Session *s, const char *reason,
                             SessionEndedFunc callback, void *userdata);
size_t manager_sessions_ending(const SessionsRoom *r);
void manager_end_queue_free(SessionsRoom *r);
/* Ends a provisional session that turned out not to be a container (a pod
 * sandbox): no report, no journal entry. */
void session_discard(Session *s);

/* The kernel saw the process (first sample, exec() or rename); comm is its name then. */
/* A process is (pid, start time, exec() count): each program a process runs
 * is its own, so samples taken before an exec() stay with the program that
 * ran then. */
/* e: the kernel's event (pid, start time, exec() count, the parent); job:
 * who the process is in a distributed job (read from its environment's
 * listed keys), NULL: not read. */
void session_on_process(Session *s, const struct cgprof_proc_event *e, const char *comm,
                        const JobIdentity *job);
void session_on_sample(Session *s, const struct cgprof_sample_key *key, uint64_t count,
                       const SamplerStack *user, const SamplerStack *kernel, const SamplerStack *python,
                       bool stack_lost);
/* The process's mappings, read again (manager_refresh_process_soon()). */
void session_refresh_process(Session *s, uint32_t pid, uint64_t start_time, uint32_t exec_id);
/* The re-reads still queued, done now, on the loop (the session's end: its
 * last drain may have met an address in no known mapping, a dlopen() just
 * before the end; the report is written from these mappings). One bounded
 * read of /proc/PID/maps per such process; the queued event comes after
 * the session's slot was given back, and finds nothing to do. */
void session_refresh_queued_now(Session *s);
/* The process mapped new code (a walk met an address in no known mapping):
 * if it was not found to run CPython yet, look again (a libpython mapped by
 * the dynamic loader after exec(), or dlopen()ed later). */
void session_python_recheck(Session *s, uint32_t pid, uint64_t start_time, uint32_t exec_id);
/* Captures the mappings and symbols of the processes reported since the
 * last call (after a batch of process events, and before a drain). */
void session_capture_pending(Session *s);
/* Called on every drain tick: updates the cgroup's CPU usage. */
void session_tick(Session *s);

/* GPU time (gpu.durations; session-cuda-time.c). A launch through the CUPTI
 * library drained (its stack: frames, locations, the kernel last) becomes
 * the anchor of its sample key. */
int session_cuda_anchor(Session *s, const struct cgprof_sample_key *key, uint32_t process,
                        const uint32_t *frames, const uint32_t *locations, size_t n);
/* Kernel records from the CUPTI library of process pid (the socket's
 * credentials), dropped: the records it said were lost. */
int session_cuda_records(Session *s, uint32_t pid, uint32_t dropped, const CuptiWireKernel *k, size_t n);
/* After a drain: the records whose launch is known now get their GPU time;
 * final (the report): those still waiting are counted not joined. */
void session_cuda_join(Session *s, bool final);
/* The anchors refer to the data's frames: forgotten when it is replaced. */
void session_cuda_anchors_forget(Session *s);
void session_cuda_time_free(Session *s);
void session_cuda_time_info(Session *s, ReportCudaTimeInfo *ret);

/* The mappings snapshot of the process of data->processes[index] (NULL:
 * none, e.g. it exited before it was captured). */
ProcessMaps *session_process_maps(Session *s, uint32_t index);

/* session-resolve.c: before a report is written, names the frames that
 * were unresolved when drained and resolve now (a debug file arrived from
 * debuginfod), merging stacks that became equal, and says again where each
 * mapping's symbols came from. */
void session_resolve_late(Session *s);

/* Its journal fields (pointing into s). */
void session_fields(const Session *s, JournalSessionFields *f);
/* The start's journal entry and bus signal. */
void session_announce(Session *s);

/* session-report.c: what the session's end and its checkpoints write. */

/* The report path template: the profile's, or the default by kind of
 * target; a ProfileConfig's stays below its namespace's directory. NULL on
 * OOM. (Computed at first use: a session started on request may have its
 * profile replaced before it starts.) */
const char *session_output(Session *s);
/* The summary's metadata; reason NULL: a checkpoint ("partial"). Points
 * into s and st. */
void session_report_info(Session *s, const SamplerSessionStats *st, const char *reason,
                         const char *usage_source, uint64_t end_usec, ReportSummaryInfo *ret);
/* The template's values (node_buf holds the node name). */
/* The threads of an off-CPU session (session-threads.c): the frame of a
 * drained thread (FRAME_THREAD, its name; the root of its stacks), the
 * threads' totals of a report (into ret, owned by the session until the
 * next call), and their end. */
int session_thread_frame(Session *s, uint32_t pid, uint32_t tid, uint32_t *ret_frame,
                         uint32_t *ret_location);
void session_report_threads(Session *s, const SamplerSessionStats *st, ReportOffCpuInfo *ret);
void session_threads_done(Session *s);
/* /proc/PID/comm (or a thread's): the name as the kernel has it. */
int session_read_comm(const char *path, char **ret);

void session_report_vars(Session *s, char node_buf[static 256], TemplateVars *ret);

/* One report directory and its data: the session's (borrowed), or, for a
 * per-process template, one group of processes' (owned). */
typedef struct SessionReportUnit {
        char *dir; /* relative to reportDir */
        ProfileData *data;
        bool owned;
} SessionReportUnit;
int session_report_units(Session *s, const TemplateVars *vars, SessionReportUnit **ret, size_t *ret_n);
void session_report_units_free(SessionReportUnit *u, size_t n);
