/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <inttypes.h>
#include <search.h>
#include <sys/inotify.h>
#include <time.h>

#include "cgroup-util.h"
#include "checkpoint.h"
#include "demangle.h"
#include "fileio.h"
#include "base.h"
#include "log.h"
#include "python-merge.h"
#include "sampling.h"
#include "report.h"
#include "unwind.h"
#include "session-jobs.h"
#include "session.h"
#include "sessions-room.h"
#include "template.h"
#include "session-events.h"

struct SessionProcess {
        uint32_t pid;
        uint64_t start_time;
        uint32_t exec_id; /* the program it runs: samples before an exec() are not the new program's */
        uint32_t ppid; /* its parent (0: not known) */
        uint64_t parent_start_time;
        JobIdentity job; /* who it is in a distributed job (JOB_IDENTITY_NONE: not known) */
        JobRole role;
        uint32_t job_parent; /* a worker's parent: the rank's own process */
        bool superseded; /* it called exec(): /proc names the next program */
        char *comm;
        char *cmdline;
        ProcessMaps *maps;
        bool wanted;
        bool refreshed; /* maps re-read once for an uncovered address */
        bool refresh_queued; /* a re-read is queued (off the loop), not handled yet */
        uint64_t comm_checked; /* drain sequence number of the last comm check */
        uint32_t data_index; /* index in data->processes (wanted only) */
        Unwinder *unwinder; /* holds a reference to the process's unwind tables */
        CudaProbes *cuda; /* holds a reference to its launch probes (gpu.launches), NULL: not */
        uint64_t cuda_checked; /* drain_seq + 1 of the last look at its mappings for launch probes */
        int cuda_files; /* probed files it mapped at that look */
        bool capture_pending; /* its mappings and symbols are to be captured (while it lives) */
        uint64_t unwind_checked; /* drain sequence number of the last unwind (re)load */
        Python *python_owner; /* holds a reference to 'python' */
        PythonProcess *python; /* it runs CPython (NULL: not, or not known yet) */
        uint64_t python_checked; /* drain sequence number of the last look for CPython + 1 */
        uint8_t python_looks; /* looks for CPython at later drains (PYTHON_LATE_LOOKS at most) */
};

/* A process in which no CPython was found at its capture is looked at
 * again at its next drains, this many times at most: its libpython may
 * have been mapped after the mappings the capture read (exec(), then the
 * dynamic loader), while no walk meets an address outside the unwinder's
 * mappings to tell (the unwinder read them later). One read of its maps
 * per drain, for a few drains. */
#define PYTHON_LATE_LOOKS 3

static int process_cmp(const void *a, const void *b) {
        const SessionProcess *x = a, *y = b;
        int r = CMP(x->pid, y->pid);
        if (r == 0)
                r = CMP(x->start_time, y->start_time);
        return r != 0 ? r : CMP(x->exec_id, y->exec_id);
}

/* Adds the process (again, after a rename) to the report's data, and
 * remembers which program each data process is. */
static int session_data_add_process(Session *s, SessionProcess *sp) {
        uint32_t index;
        int r;

        r = profile_data_add_process(s->data, (pid_t) sp->pid, sp->comm, sp->cmdline, &index);
        if (r < 0)
                return r;
        if (index >= s->n_data_processes) {
                size_t n = MAX((size_t) index + 1, s->n_data_processes * 2);
                SessionProcess **a = reallocarray(s->data_processes, n, sizeof(SessionProcess *));

                if (!a)
                        return -ENOMEM;
                memset(a + s->n_data_processes, 0, (n - s->n_data_processes) * sizeof(SessionProcess *));
                s->data_processes = a;
                s->n_data_processes = n;
        }
        s->data_processes[index] = sp;
        sp->data_index = index;
        return profile_data_process_set_job(s->data, index, &sp->job, sp->role, (pid_t) sp->job_parent);
}

ProcessMaps *session_process_maps(Session *s, uint32_t index) {
        if (index >= s->n_data_processes || !s->data_processes[index])
                return NULL;
        return s->data_processes[index]->maps;
}

static void process_free(void *p) {
        SessionProcess *sp = p;
        if (!sp)
                return;
        if (sp->unwinder)
                unwinder_process_unref(sp->unwinder, (pid_t) sp->pid, sp->start_time);
        cuda_probes_process_unref(sp->cuda, (pid_t) sp->pid, sp->start_time);
        python_process_unref(sp->python_owner, sp->python);
        free(sp->comm);
        free(sp->cmdline);
        process_maps_free(sp->maps);
        free(sp);
}

/* Loads the process's unwind tables (or reloads them: after exec(), or
 * for an address in a mapping loaded after them). -EAGAIN: it has no
 * executable mapping (in the middle of exec()). */
static int process_unwind_load(Session *s, SessionProcess *sp) {
        SessionsRoom *room = s->room;
        int r;

        if (s->profile->unwind == UNWIND_FRAME_POINTER)
                return 0;
        sp->unwind_checked = room->drain_seq;
        if (sp->unwinder)
                return unwinder_process_reload(sp->unwinder, (pid_t) sp->pid, sp->start_time, 0);
        r = unwinder_process_ref(room->unwinder, (pid_t) sp->pid, sp->start_time);
        if (r < 0)
                return log_debug_errno(
                        r, "Failed to load the unwind tables of PID %u, walking it by frame pointer: %m",
                        sp->pid);
        sp->unwinder = room->unwinder;
        return 0;
}

static int strdup_optional(const char *s, char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int session_new(SessionsRoom *room, ConfigRef *config, const Target *target, const char *cgroup,
                const SessionKube *kube, Session **ret) {
        return session_new_rule(room, config, &(SessionRule){ .target = target }, cgroup, kube, ret);
}

int session_new_rule(SessionsRoom *room, ConfigRef *config, const SessionRule *rule, const char *cgroup,
                     const SessionKube *kube, Session **ret) {
        _cleanup_(session_freep) Session *s = NULL;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->room = room;
        s->cgroup_fd = -EBADF;
        s->config = config_ref(config);
        s->rule_set = kube_rule_set_ref(rule->rule_set);
        s->target = rule->target;
        s->profile = rule->profile ?: config_target_profile(config->config, rule->target);
        if (!s->profile)
                return -EINVAL;
        if (rule->profile_config && !(s->profile_config = strdup(rule->profile_config)))
                return -ENOMEM;
        s->namespaced_output = rule->namespaced_output;
        s->duration_usec = s->profile->duration_usec;
        s->cgroup = strdup(cgroup);
        s->data = profile_data_new();
        if (!s->cgroup || !s->data)
                return -ENOMEM;
        if (kube) {
                if (strdup_optional(kube->namespace, &s->namespace) < 0 ||
                    strdup_optional(kube->pod, &s->pod) < 0 ||
                    strdup_optional(kube->pod_uid, &s->pod_uid) < 0 ||
                    strdup_optional(kube->container, &s->container) < 0 ||
                    strdup_optional(kube->container_id, &s->container_id) < 0)
                        return -ENOMEM;
                s->provisional = !kube->container;
                if (report_job_labels_copy(kube->labels, &s->job_labels) < 0)
                        return -ENOMEM;
        }

        r = sd_id128_randomize(&s->id);
        if (r < 0)
                return r;
        sd_id128_to_string(s->id, s->id_string);
        random_uid(s->report_uid);

        s->cgroup_fd =
                openat(AT_FDCWD, sessions_room_cgroup_root(s->room), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->cgroup_fd < 0)
                return negative_errno();
        int fd = openat(s->cgroup_fd, cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        safe_close(s->cgroup_fd);
        s->cgroup_fd = fd;
        if (fd < 0)
                return negative_errno();
        r = cg_get_id_at(s->cgroup_fd, "", &s->cgroup_id);
        if (r < 0)
                return r;

        /* The user stack depth the kernel's walker records (kernel.perf_event_max_stack, at most what the
         * program gives it). */
        _cleanup_free_ char *max_stack = NULL;
        s->max_stack_depth = CGPROF_SHORT_STACK_DEPTH;
        if (read_one_line_file("/proc/sys/kernel/perf_event_max_stack", &max_stack) >= 0) {
                unsigned long v = strtoul(max_stack, NULL, 10);
                if (v > 0 && v < CGPROF_SHORT_STACK_DEPTH)
                        s->max_stack_depth = (unsigned) v;
        }

        *ret = TAKE_PTR(s);
        return 0;
}

Session *session_free(Session *s) {
        if (!s)
                return NULL;
        /* Its jobs go on without it; the last to leave writes the job's report. */
        session_jobs_leave(s);
        sd_event_source_disable_unref(s->timer);
        sd_event_source_disable_unref(s->events_watch);
        sd_event_source_disable_unref(s->checkpoint_timer);
        free(s->checkpoint_report_dir);
        strv_free(s->checkpoint_dirs);
        tdestroy(s->processes, process_free);
        free(s->data_processes);
        session_cuda_time_free(s);
        session_threads_done(s);
        profile_data_free(s->data);
        free(s->event_fallback);
        free(s->cgroup);
        free(s->namespace);
        free(s->pod);
        free(s->pod_uid);
        strv_free(s->job_labels);
        strv_free(s->cuda_probes);
        free(s->container);
        free(s->container_id);
        safe_close(s->cgroup_fd);
        config_unref(s->config);
        kube_rule_set_unref(s->rule_set);
        free(s->profile_config);
        free(s->output);
        free(s);
        return NULL;
}

const char *session_state_to_string(SessionState state) {
#define SESSION_STATE_NAME(e, name) [e] = name,
        static const char *const names[_SESSION_STATE_MAX] = { SESSION_STATES(SESSION_STATE_NAME) };
#undef SESSION_STATE_NAME
        return state < _SESSION_STATE_MAX ? names[state] : NULL;
}

void session_fields(const Session *s, JournalSessionFields *f) {
        *f = (JournalSessionFields){
                .session = s->id_string,
                .profile = s->profile->name,
                .target = s->target->name,
                .cgroup = s->cgroup,
                .namespace = s->namespace,
                .pod = s->pod,
                .container = s->container,
                .profile_config = s->profile_config,
        };
}

void session_announce(Session *s) {
        JournalSessionFields f;

        session_events_started(s->room->deps.events, s->room->deps.userdata, s);
        session_fields(s, &f);
        if (s->pod)
                journal_session(
                        JOURNAL_SESSION_START, &f,
                        "Started profiling container %s of pod %s/%s (session %s, profile %s, %s at %" PRIu64
                        " Hz).",
                        strna(s->container), s->namespace, s->pod, s->id_string, s->profile->name, s->event,
                        s->profile->frequency);
        else
                journal_session(JOURNAL_SESSION_START, &f,
                                "Started profiling cgroup %s (session %s, profile %s, %s at %" PRIu64
                                " Hz).",
                                s->cgroup, s->id_string, s->profile->name, s->event, s->profile->frequency);
}

int session_confirm(Session *s, const char *container) {
        char *c;

        if (!s->provisional)
                return 0;
        c = strdup(container);
        if (!c)
                return -ENOMEM;
        free(s->container);
        s->container = c;
        s->provisional = false;
        if (s->state == SESSION_RUNNING)
                session_announce(s);
        return 0;
}

/* cgroup.events changes when the cgroup's last process exits ("populated 0"):
 * its CPU time is final then, and cpu.stat can no longer be read once the
 * cgroup is removed. */
/* Reads the cgroup's CPU time; a reading taken while the cgroup has no
 * process left is final (until one enters again). */
static void session_read_cpu_usage(Session *s) {
        _cleanup_free_ char *events = NULL;
        uint64_t u;

        if (s->state != SESSION_RUNNING || cg_read_cpu_usage_usec(s->cgroup_fd, &u) < 0)
                return;
        s->cpu_usage_last = u;
        s->sampled_since_cpu_read = false;
        s->ticks_since_cpu_read = 0;
        s->cpu_usage_final = read_full_file_at(s->cgroup_fd, "cgroup.events", &events, NULL) >= 0 &&
                             strstr(events, "populated 0");
}

/* An idle cgroup's cpu.stat is read every this many drains. */
#define CPU_READ_IDLE_TICKS 10

static int on_cgroup_events(sd_event_source *source, const struct inotify_event *event, void *userdata) {
        session_read_cpu_usage(userdata);
        return 0;
}

static int on_duration_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        session_end(userdata, "duration");
        return 0;
}

/* Undoes a start that failed after the perf events were opened: the slot is
 * released and the cgroups given back, the session is as before the start. */
static void session_start_undo(Session *s, SessionState previous) {
        SessionsRoom *room = s->room;

        s->timer = sd_event_source_disable_unref(s->timer);
        s->events_watch = sd_event_source_disable_unref(s->events_watch);
        s->checkpoint_timer = sd_event_source_disable_unref(s->checkpoint_timer);
        (void) sampler_session_deactivate(room->sampler, s->slot);
        sessions_room_session_slot(room, s, false);
        s->state = previous;
        sessions_room_assign_cgroups_below(room, s->cgroup);
        sampler_session_close(room->sampler, s->slot);
        s->slot = 0;
        s->start_realtime = s->start_monotonic = 0;
        s->event = NULL;
        free(s->event_fallback);
        s->event_fallback = NULL;
}

/* The profile's "events": off-CPU time where the kernel can (bpf/offcpu.h);
 * where it cannot, CPU profiling goes on (and the summary says why), and a
 * profile of off-CPU time only fails. */
static int session_set_events(Session *s) {
        Sampler *sampler = s->room->sampler;
        bool cpu = s->profile->events & PROFILE_EVENT_CPU,
             offcpu = s->profile->events & PROFILE_EVENT_OFFCPU;
        int r;

        if (!offcpu)
                return 0;
        r = sampler_session_set_events(sampler, s->slot, cpu, offcpu, s->profile->offcpu_min_usec,
                                       s->profile->offcpu_probability);
        /* The way in effect from its start (another session may change it:
         * docs/offcpu.md). */
        s->offcpu_record_at = sampler_offcpu_record_at(sampler);
        if (r == -EOPNOTSUPP || (r < 0 && cpu)) {
                s->offcpu_unavailable = sampler_offcpu_unavailable(sampler) ?: "off-CPU attach failed";
                if (!cpu)
                        return r;
                log_notice("Session %s: %s: CPU profiling only.", s->id_string, s->offcpu_unavailable);
                return 0;
        }
        return r;
}

static int session_start_internal(Session *s, bool now) {
        SessionsRoom *room = s->room;
        SessionState previous = s->state;
        JournalSessionFields f;
        int r;

        if (s->state != SESSION_NEW && s->state != SESSION_ARMED)
                return -EALREADY;
        session_fields(s, &f);

        if (!now && s->profile->start == PROFILE_START_MANUAL && s->state == SESSION_NEW) {
                s->state = SESSION_ARMED;
                log_info("Session %s armed for cgroup %s (profile %s, manual start).", s->id_string,
                         s->cgroup, s->profile->name);
                return 0;
        }

        r = sampler_session_open(room->sampler, s->profile->event, s->profile->frequency,
                                 s->profile->kernel_stacks, s->profile->python_frames, s->profile->unwind,
                                 s->cgroup_fd, &s->slot, &s->event, &s->event_fallback);
        if (r < 0) {
                f.error = r;
                journal_session(JOURNAL_SESSION_FAILURE, &f, "Failed to start profiling cgroup %s: %s",
                                s->cgroup, strerror(-r));
                return r;
        }
        if (s->profile->gpu_launches) {
                r = sampler_session_set_gpu_launches(room->sampler, s->slot, true);
                if (r < 0)
                        log_warning_errno(r, "Failed to count the CUDA launches of cgroup %s, ignoring: %m",
                                          s->cgroup);
        }
        if (s->profile->gpu_durations) {
                r = sampler_session_set_gpu_durations(room->sampler, s->slot, true);
                if (r < 0)
                        log_warning_errno(
                                r, "Failed to record the CUDA kernel times of cgroup %s, ignoring: %m",
                                s->cgroup);
        }
        if (s->event_fallback)
                log_notice("Session %s: %s.", s->id_string, s->event_fallback);
        r = session_set_events(s);
        if (r < 0) {
                f.error = r;
                journal_session(JOURNAL_SESSION_FAILURE, &f, "Failed to start profiling cgroup %s: %s",
                                s->cgroup, s->offcpu_unavailable ?: strerror(-r));
                sampler_session_close(room->sampler, s->slot);
                s->slot = 0;
                s->event = NULL;
                s->event_fallback = mfree(s->event_fallback);
                return r;
        }

        sessions_room_session_slot(room, s, true);
        s->state = SESSION_RUNNING;
        s->symbols_generation = symbolizer_generation(room->symbolizer);
        s->start_realtime = now_usec(CLOCK_REALTIME);
        s->start_monotonic = now_usec(CLOCK_MONOTONIC);
        if (cg_read_cpu_usage_usec(s->cgroup_fd, &s->cpu_usage_start) < 0)
                s->cpu_usage_start = 0;
        s->cpu_usage_last = s->cpu_usage_start;

        /* The cgroup and its descendants now belong to this session. */
        sessions_room_assign_cgroups_below(room, s->cgroup);

        r = sampler_session_activate(room->sampler, s->slot);
        if (r < 0) {
                f.error = r;
                journal_session(JOURNAL_SESSION_FAILURE, &f, "Failed to activate session for cgroup %s: %s",
                                s->cgroup, strerror(-r));
                session_start_undo(s, previous);
                return r;
        }

        _cleanup_free_ char *events = NULL;
        if (asprintf(&events, "%s/%s/cgroup.events", sessions_room_cgroup_root(room), s->cgroup) < 0) {
                session_start_undo(s, previous);
                return -ENOMEM;
        }
        r = sd_event_add_inotify(room->deps.event, &s->events_watch, events, IN_MODIFY, on_cgroup_events, s);
        if (r < 0)
                log_debug_errno(r, "Failed to watch %s, ignoring: %m", events);

        if (s->duration_usec > 0) {
                r = sd_event_add_time_relative(room->deps.event, &s->timer, CLOCK_MONOTONIC,
                                               s->duration_usec, 10 * USEC_PER_MSEC, on_duration_timer, s);
                if (r < 0) {
                        session_start_undo(s, previous);
                        return r;
                }
                (void) sd_event_source_set_description(s->timer, "session-duration");
        }
        (void) session_checkpoint_arm(s);

        room->counts.started++;
        /* A provisional session is announced once it is known to be a container. */
        if (!s->provisional)
                session_announce(s);
        return 0;
}

int session_start(Session *s) {
        return session_start_internal(s, false);
}

int session_start_manual(Session *s) {
        int r = session_start_internal(s, true);
        if (r >= 0)
                s->requested = true;
        return r;
}

static SessionProcess *process_find(Session *s, uint32_t pid, uint64_t start_time, uint32_t exec_id) {
        SessionProcess key = { .pid = pid, .start_time = start_time, .exec_id = exec_id }, **p;
        p = tfind(&key, &s->processes, process_cmp);
        return p ? *p : NULL;
}

/* The process's parent in the session when the process still runs the
 * program its parent ran at the fork (no exec() since: the same exec_id). */
static SessionProcess *process_parent(Session *s, const SessionProcess *sp) {
        if (sp->ppid == 0 || sp->ppid == sp->pid)
                return NULL;
        return process_find(s, sp->ppid, sp->parent_start_time, sp->exec_id);
}

/* Notes the probed files the process maps, for summary.json. */
static int session_note_cuda_probes(Session *s, SessionProcess *sp) {
        const CudaProbeFile *const *files;
        size_t n = cuda_probes_process_files(sp->cuda, (pid_t) sp->pid, sp->start_time, &files), k;
        char **l;

        for (size_t i = 0; i < n; i++) {
                bool known = false;

                k = strv_length(s->cuda_probes);
                for (size_t j = 0; j + 1 < k && !known; j += 2)
                        known = streq(s->cuda_probes[j], files[i]->path);
                if (known || !files[i]->entries)
                        continue;
                l = reallocarray(s->cuda_probes, k + 3, sizeof(char *));
                if (!l)
                        return -ENOMEM;
                s->cuda_probes = l;
                l[k] = strdup(files[i]->path);
                l[k + 1] = l[k] ? strdup(files[i]->entries) : NULL;
                l[k + 2] = NULL;
                if (!l[k + 1]) {
                        free(l[k]);
                        l[k] = NULL;
                        return -ENOMEM;
                }
        }
        return 0;
}

/* Its mappings read again, off the loop (manager_refresh_process_soon()):
 * session_refresh_process() takes them. */
static void process_refresh_soon(Session *s, SessionProcess *sp) {
        sp->refresh_queued = true;
        sessions_room_refresh_process_soon(s->room, s->slot, sp->pid, sp->start_time, sp->exec_id);
}

/* The launch probes of the CUDA files the process maps (gpu.launches, and
 * gpu.durations for libcgprof-cupti.so's): at
 * its capture (after its symbols), and again once per drain in which it is
 * sampled or launches (dlopen(), dlclose()). */
static void process_cuda_check(Session *s, SessionProcess *sp) {
        CudaProbes *cuda;
        int r;

        if (!(s->profile->gpu_launches || s->profile->gpu_durations) ||
            sp->cuda_checked == s->room->drain_seq + 1)
                return;
        sp->cuda_checked = s->room->drain_seq + 1;
        if (sp->cuda)
                r = cuda_probes_process_rescan(sp->cuda, (pid_t) sp->pid, sp->start_time);
        else {
                cuda = sampler_cuda_probes(s->room->sampler, s->room->deps.event);
                if (!cuda)
                        return (void) log_oom();
                r = cuda_probes_process_ref(cuda, (pid_t) sp->pid, sp->start_time);
                sp->cuda = cuda; /* holds its reference either way */
        }
        if (r < 0) {
                log_debug_errno(r, "Failed to look at PID %u for CUDA launch probes: %m", sp->pid);
                return;
        }
        if (r > sp->cuda_files && sp->maps)
                /* A runtime loaded since its mappings were read (dlopen()):
                 * read them again before its launches are drained. */
                process_refresh_soon(s, sp);
        sp->cuda_files = r;
        if (session_note_cuda_probes(s, sp) < 0)
                log_oom();
}

/* Reads the process's command line and decides whether it is wanted; captures
 * its mappings while it is alive. */
static void process_examine(Session *s, SessionProcess *sp, const char *comm_hint) {
        SessionsRoom *room = s->room;
        _cleanup_free_ char *comm = NULL, *cmdline = NULL;
        int r, unwind;

        /* Unwind tables first, before anything else: until they are loaded
         * its samples are walked by frame pointer. (Dropped below if the
         * process is not wanted.) In the middle of exec() there is nothing
         * to load or capture yet: the exec() or its first sample will be
         * reported again. */
        unwind = process_unwind_load(s, sp);

        r = process_reader_read(room->process_reader, (pid_t) sp->pid, &comm, &cmdline);
        if (r >= 0 && sp->cmdline && cmdline[0] == '[') {
                /* Exited meanwhile (a zombie has no command line): keep what we knew. */
                free(cmdline);
                cmdline = strdup(sp->cmdline);
                if (!cmdline)
                        return (void) log_oom();
        }
        if (comm_hint && comm_hint[0]) {
                /* The name the kernel saw at the sample beats a later read. */
                free(comm);
                comm = strdup(comm_hint);
                if (!comm)
                        return (void) log_oom();
        }
        if (r < 0 && sp->comm) {
                /* Gone: only the name can have changed. */
                if (comm && !streq(comm, sp->comm) && sp->wanted) {
                        free(sp->comm);
                        sp->comm = TAKE_PTR(comm);
                        (void) session_data_add_process(s, sp);
                }
                return;
        }
        if (r < 0) {
                if (!sp->comm) {
                        /* Gone before we could look: a forked child that
                         * did not exec() has its parent's command line;
                         * of any other we cannot know it. */
                        SessionProcess *parent = process_parent(s, sp);
                        sp->comm = comm ? TAKE_PTR(comm) : strdup("[exited]");
                        sp->cmdline = strdup(parent && parent->cmdline ? parent->cmdline : "");
                        sp->wanted = profile_process_wanted(s->profile, sp->cmdline ?: "");
                        if (sp->wanted)
                                (void) session_data_add_process(s, sp);
                }
                return;
        }

        bool changed = !streq_ptr(sp->cmdline, cmdline) || !streq_ptr(sp->comm, comm);
        free(sp->comm);
        free(sp->cmdline);
        sp->comm = TAKE_PTR(comm);
        sp->cmdline = TAKE_PTR(cmdline);
        sp->wanted = profile_process_wanted(s->profile, sp->cmdline);

        if (sp->wanted) {
                if (changed)
                        (void) session_data_add_process(s, sp);
                if (unwind == -EAGAIN)
                        return; /* in the middle of exec(): nothing to capture */
                /* Its symbols are read after the other events at hand:
                 * their unwind tables come first (session_capture_pending()). */
                sp->capture_pending = true;
                s->captures_pending = true;
        } else {
                process_maps_free(TAKE_PTR(sp->maps));
                if (sp->unwinder)
                        unwinder_process_unref(sp->unwinder, (pid_t) sp->pid, sp->start_time);
                sp->unwinder = NULL;
        }
}

/* Looks for CPython in the process (at most once per drain): at its
 * capture, and again when its mappings change (a libpython loaded late). */
static void process_python_check(Session *s, SessionProcess *sp) {
        SessionsRoom *room = s->room;
        int r;

        if (!s->profile->python_frames || !room->python || sp->python || sp->superseded ||
            sp->python_checked == room->drain_seq + 1)
                return;
        sp->python_checked = room->drain_seq + 1;
        /* A forked child (a DataLoader worker): its parent's interpreter,
         * looked at first, at the same addresses. */
        SessionProcess *parent = process_parent(s, sp);
        if (parent && !parent->python)
                process_python_check(s, parent);
        r = -ENOENT;
        if (sp->ppid > 0)
                r = python_process_ref_forked(room->python, (pid_t) sp->pid, sp->start_time, sp->exec_id,
                                              (pid_t) sp->ppid, sp->parent_start_time, &sp->python);
        if (r == -ENOENT)
                r = python_process_ref(room->python, (pid_t) sp->pid, sp->start_time, sp->exec_id,
                                       &sp->python);
        if (r < 0)
                log_debug_errno(r, "Failed to look for CPython in PID %u: %m", sp->pid);
        else if (r > 0) {
                sp->python_owner = room->python;
                if (sp->wanted)
                        (void) profile_data_process_set_python(s->data, sp->data_index,
                                                               python_process_status(sp->python));
        }
}

static void process_capture(Session *s, SessionProcess *sp) {
        int r;

        sp->capture_pending = false;
        process_maps_free(TAKE_PTR(sp->maps));
        r = symbolizer_capture(s->room->symbolizer, (pid_t) sp->pid, &sp->maps);
        if (r < 0)
                log_debug_errno(r, "Failed to capture mappings of PID %u: %m", sp->pid);
        process_python_check(s, sp);
        /* After its symbols: a launch is named when it is drained. */
        process_cuda_check(s, sp);
}

static void capture_action(const void *nodep, VISIT which, void *userdata) {
        SessionProcess *sp = *(SessionProcess *const *) nodep;

        if ((which == postorder || which == leaf) && sp->capture_pending)
                process_capture(userdata, sp);
}

void session_capture_pending(Session *s) {
        if (!s->captures_pending)
                return;
        s->captures_pending = false;
        twalk_r(s->processes, capture_action, s);
}

static void process_update_role(Session *s, SessionProcess *sp);

/* A ranked process's identity came after its children's (a child sampled
 * first): their roles are looked at again. */
typedef struct ChildrenOf {
        Session *session;
        const SessionProcess *parent;
} ChildrenOf;

static void children_role_action(const void *nodep, VISIT which, void *userdata) {
        SessionProcess *sp = *(SessionProcess *const *) nodep;
        ChildrenOf *c = userdata;

        if ((which == postorder || which == leaf) && sp->ppid == c->parent->pid &&
            sp->parent_start_time == c->parent->start_time && sp->exec_id == c->parent->exec_id &&
            sp->job.rank >= 0)
                process_update_role(c->session, sp);
}

/* Who the process is in its job: its own keys, and whether it inherited
 * its rank from its parent (a ranked process of the session it was forked
 * from: a DataLoader worker). */
static void process_set_job(Session *s, SessionProcess *sp, const JobIdentity *job) {
        bool was_ranked = sp->job.rank >= 0;

        sp->job = *job;
        process_update_role(s, sp);
        if (!was_ranked && sp->job.rank >= 0)
                twalk_r(s->processes, children_role_action, &(ChildrenOf){ .session = s, .parent = sp });
}

static void process_update_role(Session *s, SessionProcess *sp) {
        SessionProcess *parent = process_parent(s, sp);
        const JobIdentity *job = &sp->job;

        sp->role = job_identity_role(job, parent && parent->job.rank >= 0 ? &parent->job : NULL);
        sp->job_parent = sp->role == JOB_ROLE_WORKER ? parent->pid : 0;
        if (sp->wanted && sp->data_index < s->data->n_processes && s->data_processes &&
            s->data_processes[sp->data_index] == sp)
                (void) profile_data_process_set_job(s->data, sp->data_index, &sp->job, sp->role,
                                                    (pid_t) sp->job_parent);
}

static SessionProcess *process_get(Session *s, uint32_t pid, uint64_t start_time, uint32_t exec_id,
                                   bool *ret_new) {
        SessionProcess *sp = process_find(s, pid, start_time, exec_id), *before;
        if (sp) {
                *ret_new = false;
                return sp;
        }
        sp = calloc(1, sizeof(*sp));
        if (!sp)
                return NULL;
        sp->pid = pid;
        sp->start_time = start_time;
        sp->exec_id = exec_id;
        sp->job = JOB_IDENTITY_NONE;
        if (!tsearch(sp, &s->processes, process_cmp)) {
                free(sp);
                return NULL;
        }
        /* The program it ran before this exec() is over: /proc now tells
         * of this one. */
        before = process_find(s, pid, start_time, exec_id - 1);
        if (before)
                before->superseded = true;
        *ret_new = true;
        return sp;
}

static void process_refresh_now(Session *s, SessionProcess *sp) {
        sp->refresh_queued = false;
        if (sp->maps)
                (void) symbolizer_refresh(s->room->symbolizer, sp->maps);
}

void session_refresh_process(Session *s, uint32_t pid, uint64_t start_time, uint32_t exec_id) {
        SessionProcess *sp = process_find(s, pid, start_time, exec_id);
        if (sp)
                process_refresh_now(s, sp);
}

static void refresh_queued_action(const void *nodep, VISIT which, void *userdata) {
        SessionProcess *sp = *(SessionProcess *const *) nodep;

        if ((which == postorder || which == leaf) && sp->refresh_queued)
                process_refresh_now(userdata, sp);
}

void session_refresh_queued_now(Session *s) {
        twalk_r(s->processes, refresh_queued_action, s);
}

typedef struct RecheckFind {
        uint32_t pid;
        uint64_t start_time;
        SessionProcess *found; /* its current program (not superseded) */
} RecheckFind;

static void recheck_find_action(const void *nodep, VISIT which, void *userdata) {
        SessionProcess *sp = *(SessionProcess *const *) nodep;
        RecheckFind *f = userdata;

        if ((which == postorder || which == leaf) && sp->pid == f->pid && sp->start_time == f->start_time &&
            !sp->superseded)
                f->found = sp;
}

void session_python_recheck(Session *s, uint32_t pid, uint64_t start_time, uint32_t exec_id) {
        /* The walk's event has no exec() count (0): the process's current program. */
        RecheckFind f = { .pid = pid, .start_time = start_time };
        SessionProcess *sp = exec_id ? process_find(s, pid, start_time, exec_id) : NULL;

        if (!sp) {
                twalk_r(s->processes, recheck_find_action, &f);
                sp = f.found;
        }
        if (!sp || sp->python || !sp->wanted)
                return;
        sp->python_checked = 0; /* new mappings: worth a look in this drain too */
        process_python_check(s, sp);
}

void session_on_process(Session *s, const struct cgprof_proc_event *e, const char *comm,
                        const JobIdentity *job) {
        bool is_new;
        SessionProcess *sp = process_get(s, e->pid, e->start_time, e->exec_id, &is_new);
        if (!sp)
                return (void) log_oom();
        if (e->ppid > 0 && sp->ppid == 0) {
                sp->ppid = e->ppid;
                sp->parent_start_time = e->parent_start_time;
        }
        if (job && !sp->superseded)
                process_set_job(s, sp, job);
        /* Its job, if it is of one (the pod's label, or its own keys). */
        session_jobs_note(s, job);
        if (sp->superseded && !is_new)
                return; /* a late event of the program before exec(): what we knew stays */
        /* New, or re-reported after exec() or a rename: (re-)examine. */
        process_examine(s, sp, comm);
}

/* Kernel addresses, for the pprof Mapping of kernel frames (x86-64 and
 * arm64 put the kernel in the upper half of the address space). */
#define KERNEL_SPACE_START UINT64_C(0xffff800000000000)
/* Entries of one symbolized stack: every kernel and user address, and the
 * calls inlined at the user addresses (Go): room for 5 frames per user
 * address of the deepest stack, more than Go's inlining gives. */
#define SESSION_STACK_ENTRIES_MAX (6 * CGPROF_MAX_STACK_DEPTH)

/* Interns the frame and the location of one sampled address. */
/* How a user frame was left: by its unwind table, or by frame pointer. */
typedef enum FrameWalk {
        FRAME_WALK_TABLE,
        FRAME_WALK_FP,
} FrameWalk;

/* What intern_user() wrote for a user address in the current drain: a
 * stack repeats its addresses, and a drain of many unique stacks (a deep
 * call tree) meets the same few hundred addresses thousands of times. The
 * indices stay valid until the drain ends: profile data only grows during
 * a drain (late resolution and relocation run at report time, outside it).
 * Direct-mapped, one slot per (session, process, address, walk) hash. */
#define USER_FRAME_CACHE_SLOTS 4096U
#define USER_FRAME_CACHE_FRAMES 4U /* more inlined frames than this: not cached */

typedef struct UserFrameCacheEntry {
        uint64_t drain_seq; /* 0: empty */
        const Session *session;
        const SessionProcess *sp;
        uint64_t addr;
        uint32_t mapping;
        uint8_t n, walk, leaf, unsymbolized;
        int8_t cfa; /* CGPROF_CFA_FP, CGPROF_CFA_SP, or -1 */
        uint32_t frames[USER_FRAME_CACHE_FRAMES], locations[USER_FRAME_CACHE_FRAMES];
} UserFrameCacheEntry;

struct UserFrameCache {
        UserFrameCacheEntry slots[USER_FRAME_CACHE_SLOTS];
};

static UserFrameCacheEntry *user_frame_cache_slot(Session *s, const SessionProcess *sp, uint64_t addr,
                                                  FrameWalk walk, bool leaf) {
        SessionsRoom *room = s->room;
        uint64_t h = addr * UINT64_C(0x9e3779b97f4a7c15) ^
                     (uint64_t) (uintptr_t) sp * UINT64_C(0xff51afd7ed558ccd) ^ (uint64_t) (uintptr_t) s ^
                     ((uint64_t) walk << 1 | leaf);

        if (!room->user_frame_cache) {
                room->user_frame_cache = calloc(1, sizeof(struct UserFrameCache));
                if (!room->user_frame_cache)
                        return NULL; /* no cache: every address resolved */
        }
        return &room->user_frame_cache->slots[(h >> 20) % USER_FRAME_CACHE_SLOTS];
}

static bool user_frame_cache_hit(const UserFrameCacheEntry *e, const Session *s, const SessionProcess *sp,
                                 uint64_t addr, FrameWalk walk, bool leaf) {
        return e && e->drain_seq == s->room->drain_seq && e->session == s && e->sp == sp &&
               e->addr == addr && e->walk == (uint8_t) walk && e->leaf == (uint8_t) leaf;
}

/* The per-sample accounting of one user frame (the mapping's walk and CFA
 * counts, the session's frame counts). */
static void count_user_frame(Session *s, uint32_t mapping, FrameWalk walk, int cfa, bool unsymbolized,
                             uint64_t count) {
        s->frames_total += count;
        if (unsymbolized)
                s->frames_unsymbolized += count;
        if (mapping == PROFILE_NONE)
                return;
        ProfileMapping *pm = &s->data->mappings[mapping];
        if (walk == FRAME_WALK_FP)
                pm->fp_frames += count;
        else
                pm->table_frames += count;
        if (cfa == CGPROF_CFA_FP)
                pm->fp_cfa_frames += count;
        else if (cfa == CGPROF_CFA_SP)
                pm->sp_cfa_frames += count;
}

/* Interns the frames of one user address into frames[] and locations[]
 * (room entries, at least one), outermost first: the function holding it,
 * then the calls inlined there (Go), each its own frame and location, so
 * every report shows inlined functions under their callers. Returns how
 * many entries it wrote. */
static int intern_user(Session *s, SessionProcess *sp, uint64_t addr, uint64_t count, FrameWalk walk,
                       bool leaf, uint32_t *frames, uint32_t *locations, size_t room) {
        ResolvedFrame chain[SYMBOLIZER_INLINE_MAX] = {}, *rf;
        uint32_t frame, mapping = PROFILE_NONE, inlined_into = PROFILE_NONE;
        SessionsRoom *sr = s->room;
        UserFrameCacheEntry *e;
        size_t n = 1, k = 0;
        int cfa = -1;
        char buf[256];
        int r;

        if (room == 0)
                return -ENOBUFS;
        e = user_frame_cache_slot(s, sp, addr, walk, leaf);
        if (user_frame_cache_hit(e, s, sp, addr, walk, leaf) && e->n <= room) {
                count_user_frame(s, e->mapping, walk, e->cfa, e->unsymbolized, count);
                memcpy(frames, e->frames, e->n * sizeof(uint32_t));
                memcpy(locations, e->locations, e->n * sizeof(uint32_t));
                return e->n;
        }
        if (sp->maps && !process_maps_covers(sp->maps, addr) && !sp->refreshed) {
                /* A mapping we have not seen (dlopen(), JIT): look again
                 * once, off the loop. This frame stays unresolved for now;
                 * the report resolves it again (session_resolve_late()). */
                sp->refreshed = true;
                process_refresh_soon(s, sp);
        }
        if (sp->maps && symbolizer_resolve_user_inline(sr->symbolizer, sp->maps, addr, chain,
                                                       MIN(room, (size_t) SYMBOLIZER_INLINE_MAX), &n) < 0)
                n = 1;
        rf = &chain[n - 1]; /* the physical function; the mapping is the same for all */

        if (rf->path) {
                ProfileMapping *pm;
                uint8_t rule;

                r = profile_data_intern_mapping(s->data, rf->path, rf->map_start, rf->map_end, rf->map_pgoff,
                                                rf->build_id, false, &mapping);
                if (r < 0)
                        return r;
                pm = &s->data->mappings[mapping];
                if (!pm->symbols) {
                        r = profile_data_mapping_set_symbols(s->data, mapping, rf->symbols_source);
                        if (r < 0)
                                return r;
                }
                if (!pm->unwind_table && s->profile->unwind != UNWIND_FRAME_POINTER) {
                        const char *d = unwinder_describe(sr->unwinder, (pid_t) sp->pid, addr);
                        /* Still being built: a later sample says how it ended. */
                        if (!streq_ptr(d, UNWINDER_DESCRIBE_PENDING)) {
                                r = profile_data_mapping_set_unwind_table(s->data, mapping, d);
                                if (r < 0)
                                        return r;
                        }
                }
                /* Whether the function keeps a frame pointer: its CFA is
                 * computed from it (the leaf may be in a prologue). */
                if (!leaf && unwinder_frame_rule(sr->unwinder, (pid_t) sp->pid, addr, &rule) >= 0 &&
                    (CGPROF_UNWIND_CFA(rule) == CGPROF_CFA_FP || CGPROF_UNWIND_CFA(rule) == CGPROF_CFA_SP))
                        cfa = CGPROF_UNWIND_CFA(rule);
        }
        count_user_frame(s, mapping, walk, cfa, !rf->name, count);

        /* Outermost first: each inlined call after what it was inlined into. */
        for (size_t i = n; i > 0; i--) {
                const ResolvedFrame *f = &chain[i - 1];

                if (f->name)
                        r = profile_data_intern_frame_full(s->data, f->name, f->module, f->file, FRAME_USER,
                                                           &frame);
                else {
                        if (f->module && f->module[0] == '[')
                                snprintf(buf, sizeof(buf), "%s", f->module); /* [vdso], [vsyscall] */
                        else if (f->module)
                                snprintf(buf, sizeof(buf), "[%s]", f->module);
                        else
                                snprintf(buf, sizeof(buf), "[unknown]");
                        r = profile_data_intern_frame(s->data, buf, f->module, FRAME_UNKNOWN, &frame);
                }
                if (r < 0)
                        return r;
                r = profile_data_intern_location_full(s->data, addr, mapping, frame, f->line, inlined_into,
                                                      &locations[k]);
                if (r < 0)
                        return r;
                frames[k++] = frame;
                inlined_into = locations[k - 1];
        }
        if (e && k <= USER_FRAME_CACHE_FRAMES) {
                *e = (UserFrameCacheEntry){
                        .drain_seq = sr->drain_seq,
                        .session = s,
                        .sp = sp,
                        .addr = addr,
                        .mapping = mapping,
                        .n = (uint8_t) k,
                        .walk = (uint8_t) walk,
                        .leaf = leaf,
                        .unsymbolized = !rf->name,
                        .cfa = (int8_t) cfa,
                };
                memcpy(e->frames, frames, k * sizeof(uint32_t));
                memcpy(e->locations, locations, k * sizeof(uint32_t));
        }
        return (int) k;
}

static int intern_kernel(Session *s, uint64_t addr, uint64_t count, uint32_t *ret_frame,
                         uint32_t *ret_location) {
        ResolvedFrame rf = {};
        uint32_t frame, mapping;
        int r;

        (void) symbolizer_resolve_kernel(s->room->symbolizer, addr, &rf);
        s->frames_total += count;
        if (rf.name)
                r = profile_data_intern_frame(s->data, rf.name, rf.module ?: "[kernel.kallsyms]",
                                              FRAME_KERNEL, &frame);
        else {
                s->frames_unsymbolized += count;
                r = profile_data_intern_frame(s->data, "[kernel]", "[kernel.kallsyms]", FRAME_UNKNOWN,
                                              &frame);
        }
        if (r < 0)
                return r;
        r = profile_data_intern_mapping(s->data, "[kernel.kallsyms]", KERNEL_SPACE_START, UINT64_MAX, 0,
                                        NULL, true, &mapping);
        if (r < 0)
                return r;
        r = profile_data_intern_location(s->data, addr, mapping, frame, ret_location);
        if (r < 0)
                return r;
        *ret_frame = frame;
        return 0;
}

/* /proc/PID/comm: the name as the kernel has it, which may hold a newline
 * (prctl(PR_SET_NAME) takes any bytes): only the file's last newline is cut. */
int session_read_comm(const char *path, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t n;
        int r;

        r = read_full_file_max(AT_FDCWD, path, 64, &buf, &n);
        if (r < 0)
                return r;
        if (n > 0 && buf[n - 1] == '\n')
                buf[--n] = 0;
        if (n == 0 || memchr(buf, 0, n))
                return -EBADMSG;
        *ret = TAKE_PTR(buf);
        return 0;
}

/* Whether a frame runs a module's body (module_body()). */
typedef enum ModuleBody {
        MODULE_BODY_NO,
        MODULE_BODY_LIKELY, /* "<module>" when its code object cannot be read */
        MODULE_BODY_SURE, /* ... or reads as one of another name */
} ModuleBody;

static int intern_python(Session *s, SessionProcess *sp, uint64_t v, uint64_t count, ModuleBody module,
                         uint32_t *ret_frame, uint32_t *ret_location) {
        SessionsRoom *room = s->room;
        uint64_t code = CGPROF_PY_FRAME_CODE(v);
        uint32_t instr = CGPROF_PY_FRAME_INSTR(v), frame;
        PythonFrame pf;
        int r;

        s->python.frames += count;
        r = python_process_resolve(room->python, sp->python, v, room->drain_seq, &pf);
        if (r >= 0 && module == MODULE_BODY_SURE && !streq(pf.name, "<module>"))
                r = -ESTALE; /* another code object now where the module's was */
        if (r >= 0)
                r = profile_data_intern_frame_full(s->data, pf.name, NULL, pf.file, FRAME_PYTHON, &frame);
        else {
                s->python.unresolved_frames += count;
                if (module != MODULE_BODY_NO)
                        r = profile_data_intern_frame_full(s->data, "<module>", NULL, NULL, FRAME_PYTHON,
                                                           &frame);
                else
                        r = profile_data_intern_frame(s->data, "[python]", NULL, FRAME_UNKNOWN, &frame);
                pf.line = 0;
        }
        if (r < 0)
                return r;
        /* The instruction's address inside the code object. */
        r = profile_data_intern_location_full(
                s->data, instr == CGPROF_PY_INSTR_UNKNOWN ? code : code + (uint64_t) instr * 2, PROFILE_NONE,
                frame, pf.line > 0 ? (uint32_t) pf.line : 0, PROFILE_NONE, ret_location);
        if (r < 0)
                return r;
        *ret_frame = frame;
        return 0;
}

/* A flag of a sample's walk, and the uint64_t counter of it in a struct of
 * counters (its offset). */
typedef struct FlagCounter {
        uint32_t flag;
        size_t offset;
} FlagCounter;

/* Adds count to the counters, in the struct at base, of the flags set. */
static void count_flags(void *base, const FlagCounter *l, size_t n, uint32_t flags, uint64_t count) {
        for (size_t i = 0; i < n; i++)
                if (flags & l[i].flag)
                        *(uint64_t *) ((uint8_t *) base + l[i].offset) += count;
}

/* How the Python walk of a sample went (summary.json "python"). */
static void session_count_python(Session *s, const SamplerStack *py, uint64_t count, bool lost) {
        static const FlagCounter reasons[] = {
                { CGPROF_PY_NO_THREAD, offsetof(ReportPythonInfo, no_thread) },
                { CGPROF_PY_NO_FRAME, offsetof(ReportPythonInfo, no_frame) },
                { CGPROF_PY_NOT_INITIALIZED, offsetof(ReportPythonInfo, not_initialized) },
                { CGPROF_PY_READ_ERROR, offsetof(ReportPythonInfo, read_error) },
                { CGPROF_PY_TRUNCATED, offsetof(ReportPythonInfo, truncated) },
        };

        s->python.samples += count;
        if (!py) {
                if (lost)
                        s->python.lost += count;
                else
                        s->python.pending += count;
                return;
        }
        if (py->n > 0)
                s->python.with_frames += count;
        count_flags(&s->python, reasons, ELEMENTSOF(reasons), py->flags, count);
}

/* The code PyEval_EvalCode() runs is a module's body, or a string given
 * to exec() or eval(): compiled, all of them, into a code object named
 * "<module>". Such code objects are often freed within milliseconds (a
 * module's body once it is imported, a string run by exec()), before the
 * agent reads them at its next drain, and their memory reused, by another
 * code object too. So the first frame of an evaluation loop call made by
 * PyEval_EvalCode() (or, when the native frames between are missing, by
 * importlib's _call_with_frames_removed(), which exec()s a module's body)
 * is named "<module>" when its code object cannot be read (its file and
 * line are then unknown); under PyEval_EvalCode() also when it reads as a
 * code object of another name (what _call_with_frames_removed() runs is
 * not always a module's body: a C function's Python callback, its native
 * frames missing). */
static ModuleBody module_body(Session *s, uint64_t v, uint32_t caller) {
        const char *name;

        if (!CGPROF_PY_FRAME_ENTRY(v) || caller == PROFILE_NONE)
                return MODULE_BODY_NO;
        name = s->data->frames[caller].name;
        if (streq_ptr(name, "PyEval_EvalCode"))
                return MODULE_BODY_SURE;
        if (s->data->frames[caller].kind == FRAME_PYTHON && streq_ptr(name, "_call_with_frames_removed"))
                return MODULE_BODY_LIKELY;
        return MODULE_BODY_NO;
}

/* Puts the sample's Python frames among its native user frames
 * (frames[0..n_native), root first): python-merge.h. Returns the new count. */
static size_t merge_python(Session *s, SessionProcess *sp, const SamplerStack *py, uint64_t count,
                           uint32_t *frames, uint32_t *locations, size_t n_native) {
        uint32_t native_frames[CGPROF_MAX_STACK_DEPTH], native_locations[CGPROF_MAX_STACK_DEPTH];
        PythonMergeItem items[2 * CGPROF_MAX_STACK_DEPTH];
        bool eval[CGPROF_MAX_STACK_DEPTH];
        size_t n_items, n = 0;

        if (n_native > CGPROF_MAX_STACK_DEPTH || py->n > CGPROF_MAX_STACK_DEPTH)
                return n_native;
        for (size_t i = 0; i < n_native; i++) {
                eval[i] = streq(s->data->frames[frames[i]].name, "_PyEval_EvalFrameDefault");
                native_frames[i] = frames[i];
                native_locations[i] = locations[i];
        }
        if (python_merge(eval, n_native, py->pcs, py->n, items, ELEMENTSOF(items), &n_items) < 0)
                return n_native;
        for (size_t k = 0; k < n_items; k++) {
                uint32_t i = items[k].index;
                if (!items[k].python && py->n > 0 && i + 1 < n_native && eval[i + 1] &&
                    s->data->frames[native_frames[i]].name &&
                    strncmp(s->data->frames[native_frames[i]].name, "py::", 4) == 0)
                        /* A perf trampoline of 3.12+ (-X perf: "py::FUNCTION:FILE"
                         * from /tmp/perf-PID.map) calling the evaluation loop:
                         * the walk names the same frames, with lines. */
                        continue;
                if (!items[k].python) {
                        frames[n] = native_frames[i];
                        locations[n] = native_locations[i];
                        n++;
                } else if (intern_python(s, sp, py->pcs[i], count,
                                         module_body(s, py->pcs[i], n > 0 ? frames[n - 1] : PROFILE_NONE),
                                         &frames[n], &locations[n]) >= 0)
                        n++;
        }
        return n;
}

/* The flags of a walk that said how it ended (ours, not the kernel's). */
#define STACK_WALK_ENDS                                                                                     \
        (CGPROF_STACK_COMPLETE | CGPROF_STACK_TRUNCATED | CGPROF_STACK_NO_MAPPING | CGPROF_STACK_NO_TABLE | \
         CGPROF_STACK_UNSUPPORTED | CGPROF_STACK_READ_ERROR | CGPROF_STACK_BAD_FRAME | CGPROF_STACK_FP_END)

static bool stack_fp_frame(const SamplerStack *st, size_t i) {
        if (st->flags & CGPROF_STACK_KERNEL_WALK)
                return true;
        return i < CGPROF_MAX_STACK_DEPTH && (st->fp_frames[i / 64] >> (i % 64)) & 1;
}

static void session_count_walk(Session *s, const SamplerStack *st, uint64_t count) {
        static const FlagCounter reasons[] = {
                { CGPROF_STACK_COMPLETE, offsetof(ReportUnwindInfo, complete) },
                { CGPROF_STACK_TRUNCATED, offsetof(ReportUnwindInfo, truncated) },
                { CGPROF_STACK_NO_MAPPING, offsetof(ReportUnwindInfo, no_mapping) },
                { CGPROF_STACK_NO_TABLE, offsetof(ReportUnwindInfo, no_table) },
                { CGPROF_STACK_UNSUPPORTED, offsetof(ReportUnwindInfo, unsupported) },
                { CGPROF_STACK_READ_ERROR, offsetof(ReportUnwindInfo, read_error) },
                { CGPROF_STACK_BAD_FRAME, offsetof(ReportUnwindInfo, bad_frame) },
                { CGPROF_STACK_FP_END, offsetof(ReportUnwindInfo, fp_end) },
        };

        /* A walk that met a table still being built went on by frame
         * pointer there: pending, as one before the process's tables. */
        if (st->flags & CGPROF_STACK_TABLE_PENDING) {
                s->unwind.pending_walks += count;
                s->unwind.table_pending += count;
        } else if (st->flags & CGPROF_STACK_PENDING)
                s->unwind.pending_walks += count;
        else if (st->flags & CGPROF_STACK_KERNEL_WALK)
                s->unwind.kernel_walks += count;
        else {
                s->unwind.table_walks += count;
                count_flags(&s->unwind, reasons, ELEMENTSOF(reasons), st->flags, count);
        }
}

#define DEVICE_STUB_PREFIX "__device_stub__"

/* The kernel a launch's user stack launched (frames: root first, n of
 * them): nvcc's host code calls the runtime from __device_stub__Z7k_alphaPfi,
 * the stub of k_alpha(float*, int), whose name is the kernel's mangled
 * name after the prefix. CUDA 13's launches pass the runtime a kernel
 * handle (__cudaGetKernel()), not the host function: the stack names it. */
static char *launch_kernel_from_stack(Session *s, const uint32_t *frames, size_t n) {
        for (size_t i = n; i > 0; i--) {
                const char *name = s->data->frames[frames[i - 1]].name, *end;
                _cleanup_free_ char *mangled = NULL;
                char *demangled = NULL;

                if (strncmp(name, DEVICE_STUB_PREFIX, strlen(DEVICE_STUB_PREFIX)) != 0)
                        continue;
                name += strlen(DEVICE_STUB_PREFIX);
                end = strchrnul(name, '(');
                if (asprintf(&mangled, "_%.*s", (int) (end - name), name) < 0)
                        return NULL;
                if (demangle_symbol(mangled, &demangled) >= 0 && demangled)
                        return demangled;
                return strndup(name, end - name); /* a C kernel: its name as it is */
        }
        return NULL;
}

/* The leaf of a launch's stack (bpf/profile.h: CGPROF_STACK_LAUNCH): the
 * kernel launched, in the module PROFILE_CUDA_KERNEL_MODULE that tells
 * the report writers a launch from a CPU sample (report.c splits them).
 * Named after the host function the launch's function pointer points at
 * (cudaLaunchKernel(func, ...) called directly), else after the stack's
 * device stub, else "[kernel 0x...]" / "[graph 0x...]". Then a frame of
 * its dimensions (PROFILE_CUDA_LAUNCH_MODULE) where room is left. Returns
 * the entries written (1 or 2). */
static int intern_launch(Session *s, SessionProcess *sp, const SamplerStack *launch, const uint32_t *stack,
                         size_t n, uint64_t count, uint32_t *ret_frames, uint32_t *ret_locations,
                         size_t room) {
        uint64_t func = launch->pcs[CGPROF_LAUNCH_PC_FUNC], entry = launch->pcs[CGPROF_LAUNCH_PC_ENTRY];
        uint32_t frames[SYMBOLIZER_INLINE_MAX], locations[SYMBOLIZER_INLINE_MAX], frame,
                mapping = PROFILE_NONE;
        _cleanup_free_ char *name = NULL;
        int k = 0, r;

        if (func != 0 && (entry == CGPROF_LAUNCH_KERNEL || entry == CGPROF_LAUNCH_KERNEL_EXC))
                k = intern_user(s, sp, func, count, FRAME_WALK_TABLE, true, frames, locations,
                                ELEMENTSOF(frames));
        if (k > 0 && s->data->frames[frames[k - 1]].kind == FRAME_USER) {
                name = strdup(s->data->frames[frames[k - 1]].name);
                mapping = s->data->locations[locations[k - 1]].mapping;
        } else if (entry != CGPROF_LAUNCH_GRAPH)
                name = launch_kernel_from_stack(s, stack, n);
        if (!name && asprintf(&name, "[%s 0x%" PRIx64 "]", entry == CGPROF_LAUNCH_GRAPH ? "graph" : "kernel",
                              func) < 0)
                return -ENOMEM;
        if (!name)
                return -ENOMEM;
        /* Unnamed: resolved again before the report (session-resolve.c),
         * when its process's symbols arrived after the drain. */
        r = profile_data_intern_frame(s->data, name, PROFILE_CUDA_KERNEL_MODULE,
                                      name[0] == '[' ? FRAME_UNKNOWN : FRAME_USER, &frame);
        if (r < 0)
                return r;
        r = profile_data_intern_location(s->data, func, mapping, frame, &ret_locations[0]);
        if (r < 0)
                return r;
        ret_frames[0] = frame;
        if (room < 2)
                return 1;

        /* Its dimensions, a frame after it (pprof's labels: report.c). */
        const uint64_t *pc = launch->pcs;
        char dims[160];
        (void) snprintf(dims, sizeof(dims),
                        "grid=%" PRIu32 "x%" PRIu32 "x%" PRIu32 " block=%" PRIu32 "x%" PRIu32 "x%" PRIu32
                        " stream=0x%" PRIx64,
                        (uint32_t) pc[CGPROF_LAUNCH_PC_GRID], (uint32_t) (pc[CGPROF_LAUNCH_PC_GRID] >> 32),
                        (uint32_t) pc[CGPROF_LAUNCH_PC_GRID_Z_BLOCK_X],
                        (uint32_t) (pc[CGPROF_LAUNCH_PC_GRID_Z_BLOCK_X] >> 32),
                        (uint32_t) pc[CGPROF_LAUNCH_PC_BLOCK], (uint32_t) (pc[CGPROF_LAUNCH_PC_BLOCK] >> 32),
                        pc[CGPROF_LAUNCH_PC_STREAM]);
        r = profile_data_intern_frame(s->data, dims, PROFILE_CUDA_LAUNCH_MODULE, FRAME_USER, &frame);
        if (r < 0)
                return 1;
        r = profile_data_intern_location(s->data, func, PROFILE_NONE, frame, &ret_locations[1]);
        if (r < 0)
                return 1;
        ret_frames[1] = frame;
        return 2;
}

/* A launch's leaf (bpf/profile.h: CGPROF_STACK_LAUNCH) after the *n frames
 * of its stack (no dimensions frame for the CUPTI library's: not known
 * there). The CUPTI library's launch becomes the anchor of its kernels' GPU
 * time (session-cuda-time.c), not a launch counted: true then. */
static bool add_launch_leaf(Session *s, SessionProcess *sp, const struct cgprof_sample_key *key,
                            const SamplerStack *kernel, uint64_t count, uint32_t *frames,
                            uint32_t *locations, size_t *n, size_t max) {
        bool cupti =
                kernel->n >= CGPROF_LAUNCH_PCS && kernel->pcs[CGPROF_LAUNCH_PC_ENTRY] == CGPROF_LAUNCH_CUPTI;
        int k = -1;

        if (session_note_cuda_probes(s, sp) < 0)
                log_oom();
        if (kernel->n >= CGPROF_LAUNCH_PCS && *n < max)
                k = intern_launch(s, sp, kernel, frames, *n, count, &frames[*n], &locations[*n],
                                  cupti ? 1 : max - *n);
        if (k > 0)
                *n += (size_t) k;
        if (cupti && k > 0 && session_cuda_anchor(s, key, sp->data_index, frames, locations, *n) < 0)
                log_oom();
        return cupti;
}

void session_on_sample(Session *s, const struct cgprof_sample_key *key, uint64_t count,
                       const SamplerStack *user, const SamplerStack *kernel, const SamplerStack *python,
                       bool stack_lost) {
        /* An off-CPU count is nanoseconds: the per-sample statistics
         * (walks, frames, exclusions) count CPU samples only. */
        bool offcpu = key->kind == CGPROF_SAMPLE_KIND_OFFCPU;
        uint64_t samples = offcpu ? 0 : count;
        /* Room for the kernel frames and the user frames, these with a few
         * inlined calls each (Go) on average, or with their Python frames. */
        uint32_t frames[SESSION_STACK_ENTRIES_MAX], locations[SESSION_STACK_ENTRIES_MAX];
        size_t n = 0, n_user = user ? user->n : 0, n_kernel = kernel ? kernel->n : 0;
        uint32_t thread_frame, thread_location;
        bool is_new, truncated = false;

        SessionProcess *sp = process_get(s, key->pid, key->start_time, key->exec_id, &is_new);
        if (!sp)
                return (void) log_oom();
        if (is_new)
                process_examine(s, sp, NULL); /* its ring buffer event was missed */
        s->sampled_since_cpu_read = true;
        if (!sp->wanted) {
                s->excluded += samples;
                if (offcpu)
                        s->offcpu_excluded_ns += count;
                return;
        }
        if (sp->capture_pending)
                process_capture(s, sp);
        else if (!sp->python && sp->python_looks < PYTHON_LATE_LOOKS &&
                 sp->python_checked != s->room->drain_seq + 1) {
                sp->python_looks++;
                process_python_check(s, sp);
        }
        if (stack_lost)
                s->stack_lost += samples;

        /* A process may rename itself (prctl(PR_SET_NAME), pthread_setname_np)
         * after its first sample: look again once per drain while it lives,
         * and attribute later samples to the new name. */
        if (sp->comm_checked != s->room->drain_seq && !sp->superseded) {
                _cleanup_free_ char *path = NULL, *comm = NULL;
                sp->comm_checked = s->room->drain_seq;
                if (asprintf(&path, "/proc/%u/comm", sp->pid) >= 0 && session_read_comm(path, &comm) >= 0 &&
                    !streq_ptr(comm, sp->comm)) {
                        free(sp->comm);
                        sp->comm = TAKE_PTR(comm);
                        (void) session_data_add_process(s, sp);
                }
        }

        process_cuda_check(s, sp);
        if (user) {
                session_count_walk(s, user, samples);
                /* Tables not loaded yet (a missed event, exec()), or an
                 * address outside the mappings they know (dlopen()): load
                 * them, at most once per drain. */
                if ((user->flags & (CGPROF_STACK_PENDING | CGPROF_STACK_NO_MAPPING)) &&
                    sp->unwind_checked != s->room->drain_seq)
                        (void) process_unwind_load(s, sp);
                if (user->flags & CGPROF_STACK_NO_MAPPING)
                        process_python_check(s, sp); /* a libpython loaded late? */
                /* The kernel's walker (bpf_get_stack(), benchmarks only) says
                 * nothing of how it ended: as deep as it goes is truncated. */
                truncated = (user->flags & CGPROF_STACK_TRUNCATED) ||
                            ((user->flags & CGPROF_STACK_KERNEL_WALK) && !(user->flags & STACK_WALK_ENDS) &&
                             n_user >= s->max_stack_depth);
        }

        /* Root first: the outermost user frame ... the innermost kernel frame.
         * Except for each stack's first entry (the interrupted PC), the
         * addresses are return addresses, after the call: use addr - 1, inside
         * the call instruction, for symbols and locations. */
        for (size_t i = n_user; i > 0; i--) {
                /* Leave one entry for each address still to come. */
                int k = intern_user(s, sp, i - 1 == 0 ? user->pcs[i - 1] : user->pcs[i - 1] - 1, samples,
                                    stack_fp_frame(user, i - 1) ? FRAME_WALK_FP : FRAME_WALK_TABLE,
                                    i - 1 == 0, &frames[n], &locations[n],
                                    ELEMENTSOF(frames) - n - (i - 1) - n_kernel);
                if (k > 0)
                        n += (size_t) k;
        }
        if (sp->python && python_process_supported(sp->python)) {
                session_count_python(s, python, samples, key->lost & CGPROF_SAMPLE_PYTHON_LOST);
                if (python && python->n > 0 && n + python->n + n_kernel <= ELEMENTSOF(frames))
                        n = merge_python(s, sp, python, samples, frames, locations, n);
                if (!s->data->processes[sp->data_index].python)
                        (void) profile_data_process_set_python(s->data, sp->data_index,
                                                               python_process_status(sp->python));
        }
        if (kernel && (kernel->flags & CGPROF_STACK_LAUNCH)) {
                if (add_launch_leaf(s, sp, key, kernel, count, frames, locations, &n, ELEMENTSOF(frames)))
                        return;
                n_kernel = 0;
        }
        for (size_t i = n_kernel; i > 0; i--)
                if (intern_kernel(s, i - 1 == 0 ? kernel->pcs[i - 1] : kernel->pcs[i - 1] - 1, samples,
                                  &frames[n], &locations[n]) >= 0)
                        n++;

        /* Off-CPU sessions: the thread at the root (the wall-clock view). */
        if (key->tid != 0 &&
            session_thread_frame(s, key->pid, key->tid, &thread_frame, &thread_location) >= 0) {
                n = MIN(n, ELEMENTSOF(frames) - 1); /* full: its innermost frame gives way */
                memmove(frames + 1, frames, n * sizeof(uint32_t));
                memmove(locations + 1, locations, n * sizeof(uint32_t));
                frames[0] = thread_frame;
                locations[0] = thread_location;
                n++;
        }
        if (profile_data_add_stack_values(s->data, sp->data_index, frames, locations, n, truncated, samples,
                                          offcpu ? count : 0) < 0)
                log_oom();
}

/* Once per drain: the cgroup's CPU time so far, the fallback when the
 * cgroup is gone by the time the session ends (the inotify watch on
 * cgroup.events reads the final figure when it empties, but a runtime may
 * remove the cgroup before that handler runs). Read each drain while the
 * cgroup is sampled, every CPU_READ_IDLE_TICKS drains while it is not (no
 * sample in a drain interval: it used little CPU, if any): 250 idle targets
 * cost 0.5 % of a CPU when each read cpu.stat and cgroup.events every
 * second. The emptied state comes from the watch, not from here. */
void session_tick(Session *s) {
        uint64_t u;

        if (s->state != SESSION_RUNNING)
                return;
        if (!s->sampled_since_cpu_read && ++s->ticks_since_cpu_read < CPU_READ_IDLE_TICKS)
                return;
        s->sampled_since_cpu_read = false;
        s->ticks_since_cpu_read = 0;
        if (!s->cpu_usage_final && cg_read_cpu_usage_usec(s->cgroup_fd, &u) >= 0)
                s->cpu_usage_last = u;
}
