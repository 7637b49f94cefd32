/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "report-format.h"
#include "profile-data.h"

typedef struct ReportSummaryInfo ReportSummaryInfo;

/* Report writers. Each writes one format to a FILE (the caller handles the
 * atomic rename through write_file_atomic_at()). */

/* profile.folded: "comm;frame;frame count\n" per unique stack, root first,
 * kernel frames suffixed "_[k]", lines sorted for stable output. Frames
 * containing ';' or '\n' have them replaced by '_' ... and stacks of the same
 * comm and frames from different processes are merged. */
int report_write_folded(FILE *f, const ProfileData *d);
/* The same with the writer table's signature. */
int report_write_folded_info(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);

/* How the session's user stacks were walked (summary.json "unwind"). */
typedef struct ReportUnwindInfo {
        const char *mode; /* the profile's "unwind"; NULL: not reported */
        /* User stacks walked with unwind tables; by the kernel's frame-pointer
         * walker (unwind: frame-pointer); by it because the process's tables
         * were not loaded yet. */
        uint64_t table_walks, kernel_walks, pending_walks;
        /* Why the table walks ended (a walk may have several reasons). */
        uint64_t complete, truncated, no_mapping, no_table, unsupported, read_error, bad_frame, fp_end;
        /* Walks that met a table still being built (that frame on walked as
         * without one): counted in pending_walks too, not as table walks. */
        uint64_t table_pending;
} ReportUnwindInfo;

/* How the Python frames of the session's CPython processes were walked
 * (summary.json "python"). */
typedef struct ReportPythonInfo {
        bool enabled; /* the profile's pythonFrames */
        uint64_t samples; /* samples of processes running a CPython the walk supports */
        uint64_t with_frames; /* ... that got Python frames */
        /* Why the others did not: no thread state for the thread, no Python
         * code running on it, no interpreter yet, unreadable memory, the
         * Python stack not stored (lost) or taken before the process was
         * registered with the walk (pending); and walks cut at the depth
         * limit. */
        uint64_t no_thread, no_frame, not_initialized, read_error, lost, pending, truncated;
        uint64_t frames,
                unresolved_frames; /* Python frames (weighted), and those whose code was unreadable */
} ReportPythonInfo;

/* A thread of an off-CPU session, its wall-clock time (summary.json
 * "wallClock", wallclock.folded): on CPU (the kernel's measure), blocked
 * (of which not stacked: under offCpuMinUsec), waiting for a CPU. ns. */
typedef struct ReportThread {
        uint32_t pid, tid;
        char name[16];
        uint64_t oncpu_ns, offcpu_ns, unstacked_ns, runqueue_ns;
} ReportThread;

/* Off-CPU time of the session (profile "events" with "offcpu"): summary.json
 * "offCpu". Times in nanoseconds. */
typedef struct ReportOffCpuInfo {
        bool enabled; /* the profile asked for it */
        const char *unavailable; /* why the kernel could not (then nothing was recorded), or NULL */
        uint64_t min_usec; /* offCpuMinUsec */
        double probability; /* offCpuProbability */
        uint64_t recorded, recorded_ns; /* waits recorded with their stacks */
        uint64_t short_waits, short_ns; /* waits under min_usec: counted, not stacked */
        uint64_t lost, lost_ns; /* waits not recorded: the counts map was full */
        uint64_t excluded_ns; /* of processes the patterns exclude */
        uint64_t runqueue, runqueue_ns; /* preempted: runnable, waiting for a CPU (not stacked) */
        const char *record_at; /* "task-work", "sys_exit": where waits are recorded; NULL: not said */
        uint64_t recorded_late; /* of recorded: at the thread's next switch-out */
        /* Re-rendering a report from profile.pb.gz, which has no thread
         * frames: the wall-clock files are not rewritten, but listed as
         * they are, where they exist (report_convert_dir()). */
        bool wallclock_kept;
        const ProfileData *data; /* the off-CPU stacks, counts in µs (report_write_dir() sets it) */
        ReportThread *threads; /* the session's threads, sorted by (pid, tid); NULL: none known */
        size_t n_threads;
} ReportOffCpuInfo;
/* The GPU time of CUDA kernels (gpu.durations, docs/gpu.md): summary.json
 * "cudaKernelTime". The session sets the counts, report_write_dir() data. */
typedef struct ReportCudaTimeInfo {
        bool enabled; /* the profile asked for it */
        uint64_t records; /* kernel records received from the CUPTI library */
        uint64_t joined, joined_ns; /* joined to their launch's stack */
        uint64_t not_joined, not_joined_ns; /* launch not seen: unknown correlation ID, or forgotten */
        uint64_t dropped; /* records the library said CUPTI or the socket dropped */
        uint64_t pending; /* still waiting for their launch's stack at the report */
        const ProfileData *data; /* the GPU time stacks, each ending in its kernel, counts in ns */
} ReportCudaTimeInfo;

/* The pod labels that name a distributed job and a replica of it, kept
 * with a session in Kubernetes (summary.json "jobLabels", pprof labels
 * under the short names): Kubeflow's training operator, Indexed Jobs and
 * JobSet. The names (training.kubeflow.org/job-name, jobset-name, a Job's
 * job-name) also join the pods' sessions into one job (job-registry.h). */
#define REPORT_JOB_LABELS                                                                       \
        {                                                                                       \
                { "training.kubeflow.org/job-name", "job_name" },                               \
                        { "training.kubeflow.org/replica-index", "replica_index" },             \
                        { "batch.kubernetes.io/job-completion-index", "job_completion_index" }, \
                        { "jobset.sigs.k8s.io/job-index", "jobset_job_index" },                 \
                        { "jobset.sigs.k8s.io/jobset-name", "jobset_name" },                    \
                        { "batch.kubernetes.io/job-name", "batch_job_name" },                   \
        }
/* The job's labels among a pod's (strv: key, value, ...), copied into
 * *ret (NULL: none of them). */
int report_job_labels_copy(char *const *pod_labels, char ***ret);
/* The pprof label key of a job label (NULL: not one). */
const char *report_job_label_short(const char *key);

/* The job of a job's report: summary.json "job": {"name", "source",
 * "sessions": [...], "reports": [...]} (report-summary-job.c). */
typedef struct ReportJobInfo {
        const char *name;
        const char *source; /* "kubeflow", "jobset", "job", "torchelastic", "slurm" */
        char *const *sessions; /* strv: the sessions joined */
        char *const *reports; /* strv: their report directories, relative to reportDir */
} ReportJobInfo;

/* Session metadata for summary.json. */
struct ReportSummaryInfo {
        const char *session_id; /* 32 hex */
        const char *profile;
        const char *target; /* target rule name */
        const char *profile_config; /* the ProfileConfig the rule comes from, or NULL */
        const char *cgroup; /* relative to the cgroup root */
        const char *namespace, *pod, *container, *container_id, *node; /* may be NULL */
        uint64_t start_usec, end_usec; /* CLOCK_REALTIME */
        uint64_t frequency;
        const char *event; /* the event sampled */
        const char *requested_event; /* what the profile asked for */
        const char *event_fallback_reason; /* non-NULL when event != requested_event */
        const char *attach_mode; /* "cpu" or "cgroup" */
        const char *end_reason; /* "duration", "stopped", "cgroup-removed", "agent-stopped", ... */
        bool partial; /* a checkpoint of a running session ("partial": true; end_reason NULL) */
        bool folded_rank_root; /* profile.folded: "rank N;comm;..." for a ranked process */
        /* byRank's extra patterns per category (report-by-rank.h; the
         * profile's rankCategories), NULL-terminated, or NULL. */
        char *const *rank_categories[3];
        /* The pod's distributed-job labels (strv: key, value, ...; the keys
         * of REPORT_JOB_LABELS), NULL: none. */
        char *const *job_labels;
        bool interrupted; /* a checkpoint whose session never ended (set by recovery, kept by conversion) */
        const char *interrupted_reason; /* why, when interrupted */
        uint64_t *samples_per_cpu; /* n_cpus entries */
        size_t n_cpus;
        uint64_t lost; /* samples seen in the kernel but not recorded */
        uint64_t excluded; /* samples of processes excluded by the patterns */
        uint64_t collisions; /* stack map collisions (-EEXIST) */
        uint64_t cpu_usage_usec; /* the cgroup's CPU time during the session (cpu.stat) */
        const char *cpu_usage_source; /* where cpu_usage_usec comes from ("cpu.stat", "perf"), or NULL */
        uint64_t unsymbolized_frames; /* frames (weighted by samples) left unresolved */
        uint64_t total_frames; /* frames (weighted by samples) */
        ReportUnwindInfo unwind;
        ReportPythonInfo python;
        ReportOffCpuInfo offcpu;
        const char *report_dir; /* where the files are */
        const char *const *formats; /* NULL-terminated list of files written */
        /* CUDA kernel launches (gpu.launches, docs/gpu.md): report_write_dir()
         * sets launches (the stacks it split off, NULL: none); the session
         * the launch probes its processes held (strv: file, entry points
         * "a,b,...", ...; NULL: none). summary.json's "cudaLaunches". */
        const ProfileData *launches;
        char *const *cuda_probes;
        ReportCudaTimeInfo cuda_time;
        /* A job's report (several sessions' processes, docs/training-jobs.md):
         * summary.json's "job"; NULL for a session's own report. */
        const ReportJobInfo *job;
};

/* summary.json: {"session", "profile", "target", "cgroup", "start", "end",
 * "durationSec", "frequency", "event", "samples": {"total", "perCpu", "lost",
 * "excluded", "expected"}, "uniqueStacks", "collisions",
 * "unsymbolizedShare", "topFunctions": [{"name","module","self","selfPercent","total","totalPercent"}],
 * "processes": [{"pid","comm","cmdline","samples"}] ...}; expected =
 * frequency × cpu_usage_usec / 1e6, rounded. */
int report_write_summary(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);
/* Adds summary.json's "cudaLaunches" and "cudaKernelTime" to root (report-summary-cuda.c). */
typedef struct cJSON cJSON;
int report_summary_add_cuda(cJSON *root, const ReportSummaryInfo *info);
/* Adds summary.json's "job" to root, when info->job (report-summary-job.c). */
int report_summary_add_job(cJSON *root, const ReportSummaryInfo *info);

/* summary.json "offCpu" (report-offcpu.c), when info->offcpu.enabled; all:
 * the profile with both values. */
struct cJSON;
int report_summary_add_offcpu(struct cJSON *root, const ProfileData *all, const ReportSummaryInfo *info);
/* summary.json "wallClock" (report-wallclock.c), when info->offcpu.enabled:
 * per thread, its times (info->offcpu.threads). */
int report_summary_add_wallclock(struct cJSON *root, const ReportSummaryInfo *info);
/* The reverse, for re-rendering (report-convert.c): fills *oc from the
 * summary root j's "offCpu" and "wallClock" as the two functions above
 * write them (strings point into j; absent or malformed numbers are 0),
 * oc->threads from *ret_threads (malloc()ed, the caller frees it). 0:
 * read; 0 with oc->enabled false: j has no "offCpu"; -ENOMEM. */
int report_offcpu_from_json(const struct cJSON *j, ReportOffCpuInfo *oc, ReportThread **ret_threads);
/* The leaves the wall-clock view gives each thread beside its stacks: its
 * time waiting for a CPU, and its waits under offCpuMinUsec. */
#define REPORT_WALLCLOCK_RUNQUEUE "[run queue]"
#define REPORT_WALLCLOCK_SHORT "[short waits]"
/* wallclock.folded / wallclock.svg's data: all's stacks with their thread
 * frames, in µs (profile_data_wall_clock()), and per thread of info its
 * run-queue time and short waits ("process;thread;[run queue]"). */
int report_wallclock_data(const ProfileData *all, const ReportSummaryInfo *info, ProfileData **ret);

/* Why an off-CPU stack waited: its innermost kernel frame that is not the
 * scheduler's own (futex_wait, pipe_read, do_nanosleep, ...), or PROFILE_NONE. */
uint32_t report_offcpu_reason(const ProfileData *d, const ProfileStack *st);

/* profile.pb.gz: the pprof Profile protobuf (protobuf-c), gzipped (zlib).
 * Sample types samples/count and cpu/nanoseconds (count x 1e9/frequency),
 * period cpu/nanoseconds, one Location per unique address, Mappings with
 * build IDs (kernel frames in "[kernel.kallsyms]"), labels pid/comm/cgroup
 * (and namespace/pod/container when set). */
int report_write_pprof(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);
/* cuda-time.pb.gz: the same with one sample type, cuda_kernel/nanoseconds
 * (the kernels' GPU time, d: profile_data_gpu_time()). */
int report_write_pprof_cuda_time(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);

/* flame.svg: a self-contained interactive flame graph. */
int report_write_svg(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);
/* offcpu.svg: the same for off-CPU stacks (counts in µs), in blues. */
int report_write_svg_offcpu(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);
int report_write_svg_full(FILE *f, const ProfileData *d, const ReportSummaryInfo *info, bool offcpu);
/* wallclock.svg: the wall-clock view (report_wallclock_data(), µs). */
int report_write_svg_wallclock(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);

/* profile.speedscope.json: the speedscope file format, one sampled profile. */
int report_write_speedscope(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);

typedef int (*ReportWriter)(FILE *f, const ProfileData *d, const ReportSummaryInfo *info);

typedef struct ReportFormatInfo {
        ReportFormat format;
        const char *file; /* file name in the report directory */
        ReportWriter write;
} ReportFormatInfo;

/* The file and writer of a format (NULL for an invalid one). */
const ReportFormatInfo *report_format_info(ReportFormat f);
/* The files a report directory may hold besides its formats' (off-CPU:
 * offcpu.folded, offcpu.svg), NULL-terminated: what removing a report
 * removes and its size counts too. */
extern const char *const report_extra_files[];

/* A copy of a ReportSummaryInfo whose strings are valid UTF-8: each invalid
 * byte of a name (a cgroup's, a node's) becomes U+FFFD, as in the profile
 * data's process names and frames; the other strings are info's own. */
typedef struct ReportValidInfo {
        ReportSummaryInfo info;
        char *owned[19]; /* the copies made valid */
} ReportValidInfo;
int report_valid_info(const ReportSummaryInfo *info, ReportValidInfo *ret);
void report_valid_info_done(ReportValidInfo *v);

/* Writes every format in the mask (1u << ReportFormat) into the directory,
 * each atomically, summary.json last (the files it lists are the mask's).
 * The names of info are written valid UTF-8 (report_valid_info()). Stops at
 * the first error. */
int report_write_dir(int dirfd, unsigned formats, const ProfileData *d, const ReportSummaryInfo *info);

/* Readers, for re-rendering existing reports (cgprofctl report). The pprof
 * reader restores what the writer wrote: frames, addresses, mappings and
 * build IDs, processes from the pid/comm labels (without command lines),
 * stacks and counts; the session's metadata comes from summary.json instead.
 * It also reads other tools' pprof files (inlined lines become frames).
 * The folded reader restores processes (one per comm) and frames (kernel
 * frames from their "_[k]" suffix), without addresses. Malformed input is
 * -EBADMSG. */
int report_read_pprof(const void *data, size_t size, ProfileData **ret);
int report_read_folded(FILE *f, ProfileData **ret);

/* The session's metadata in a summary.json as report_convert_dir() reads it:
 * text (size bytes, with a NUL at text[size], as read_full_file_max()
 * leaves it: cJSON 1.7.15 may read the byte after a length-bounded input).
 * Fills *info (its strings point into *ret_tree, which the caller
 * cJSON_Delete()s; info->samples_per_cpu is *ret_per_cpu, which the caller
 * frees). Returns 0, -EBADMSG (not a JSON object; *ret_tree is NULL then),
 * or -ENOMEM. */
struct cJSON;
int report_summary_parse(const char *text, size_t size, ReportSummaryInfo *info, struct cJSON **ret_tree,
                         uint64_t **ret_per_cpu);

/* Fills *u from summary.json's "unwind" object o, as the summary writes it
 * (strings point into o; absent or malformed counters are 0). */
void report_unwind_from_json(const struct cJSON *o, ReportUnwindInfo *u);

/* Re-renders the report directory dirfd (named path in messages and in the
 * summary) in the formats of the mask: reads profile.pb.gz (or else
 * profile.folded) and summary.json (metadata, when present), and writes each
 * format atomically. On error, ret_error says what failed, naming the file. */
int report_convert_dir(int dirfd, const char *path, unsigned formats, char **ret_error);
