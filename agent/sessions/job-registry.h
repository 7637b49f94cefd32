/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job-identity.h"
#include "macro.h"
#include "profile-data.h"

/* The distributed jobs the agent's sessions profile (docs/training-jobs.md,
 * "One report per job"): which sessions' processes are one job, and what
 * each session that ended gave it, until the last one ends. Pure state, no
 * I/O (tests/test-job-registry.c runs it alone); session-jobs.c wires it
 * to the sessions and writes the job's report.
 *
 * A job is known by its JobKey: its namespace (NULL: a host cgroup's
 * session; sessions of two namespaces are never one job), where its name
 * comes from and the name, and the profile (the same sampling frequency)
 * and the output kind (below {NAMESPACE}/ or not) of its sessions. */

typedef enum JobSource {
        JOB_SOURCE_KUBEFLOW, /* pod label training.kubeflow.org/job-name */
        JOB_SOURCE_JOBSET, /* pod label jobset.sigs.k8s.io/jobset-name */
        JOB_SOURCE_KUBE_JOB, /* pod label batch.kubernetes.io/job-name (a Job, Indexed or not) */
        JOB_SOURCE_TORCHELASTIC, /* TORCHELASTIC_RUN_ID (not "none", torchrun's default) */
        JOB_SOURCE_SLURM, /* SLURM_JOB_ID */
        _JOB_SOURCE_MAX,
} JobSource;

const char *job_source_to_string(JobSource s);
/* The pod label that names a job of the source (NULL: not a label's). */
const char *job_source_label(JobSource s);

typedef struct JobKey {
        const char *namespace; /* NULL: a host cgroup */
        JobSource source;
        const char *name;
        const char *profile;
        bool namespaced_output;
} JobKey;

#define JOB_KEY_NAME_MAX 64 /* for job_key_of_process()'s name_buf */

/* The job of a process of a session: from the session's pod labels
 * (strv: key, value, ...; they name the job of all its processes), else
 * from the process's own environment keys (j, NULL: not read). Fills *ret
 * (its strings point into the arguments and name_buf) and returns true;
 * false when the process is of no job. */
bool job_key_of_process(const char *namespace, char *const *pod_labels, const char *profile,
                        bool namespaced_output, const JobIdentity *j, char name_buf[static JOB_KEY_NAME_MAX],
                        JobKey *ret);
bool job_key_equal(const JobKey *a, const JobKey *b);

/* What an ended session gave its job, beyond its samples. */
typedef struct JobContribution {
        uint64_t start_usec, end_usec; /* CLOCK_REALTIME */
        uint64_t lost, excluded, collisions, cpu_usage_usec, unsymbolized_frames, total_frames;
        const char *target, *event;
        uint64_t frequency;
        unsigned formats; /* the report formats of the sessions (ReportFormat bits, or-ed) */
} JobContribution;

typedef struct Job {
        JobKey key; /* its strings owned */
        char **sessions; /* strv: the sessions that joined it (ids) */
        bool *ended; /* per session: ended (gave what it had) */
        size_t n_sessions, n_running;
        ProfileData *data; /* the ended sessions' samples of the job's processes, merged */
        char **reports; /* strv: the report directories of its sessions (relative to reportDir) */
        JobContribution total; /* its strings owned (target, event: the first session's) */
} Job;

Job *job_free(Job *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(Job *, job_free);

typedef struct JobRegistry JobRegistry;

int job_registry_new(JobRegistry **ret);
JobRegistry *job_registry_free(JobRegistry *reg);
DEFINE_TRIVIAL_CLEANUP_FUNC(JobRegistry *, job_registry_free);
size_t job_registry_size(const JobRegistry *reg);

/* The most sessions a job gathers: the next session of its key starts
 * another (what a job holds stays bounded when its sessions never all end
 * at once). */
#define JOB_SESSIONS_MAX 256U

/* The session is one of the job's (made when new, or when the job of its
 * key has JOB_SESSIONS_MAX sessions): 1 when it joined now, 0 when it had.
 * *ret_job (optional): the job. A session that ended in it does not join
 * it again. */
int job_registry_join(JobRegistry *reg, const JobKey *key, const char *session, Job **ret_job);
/* The jobs the session is running in (*ret: malloc()ed, NULL when none). */
int job_registry_jobs_of(JobRegistry *reg, const char *session, Job ***ret, size_t *ret_n);
/* A session that ends gives the job its samples of the job's processes
 * (merged, d not taken; NULL: none), its report directories (may be NULL)
 * and what c says; then it has ended in the job. */
int job_registry_contribute(JobRegistry *reg, Job *job, const char *session, const ProfileData *d,
                            char *const *reports, const JobContribution *c);
/* The session has ended (in every job it joined: what it did not give,
 * it gives nothing). Jobs whose last session it was leave the registry:
 * those worth a report of their own (two sessions or more, something
 * sampled) are handed over in *ret (the caller frees them; NULL when
 * none), the others freed. */
int job_registry_leave(JobRegistry *reg, const char *session, Job ***ret, size_t *ret_n);

/* The directory of the job reports, below reportDir (and below the
 * namespace's directory for a job of pods): "_jobs" is no pod's name
 * (pod names are DNS names) and no namespace's. */
#define JOB_REPORT_DIR "_jobs"

/* The job's report directory, relative to reportDir:
 * [{NAMESPACE}/]_jobs/{JOB}/{TIMESTAMP}_{UID} (TIMESTAMP: its first
 * session's start, ms), each value sanitized into one path component (a
 * job's name cannot climb out of reportDir, template.h). */
int job_report_path(const Job *j, const char *uid, char **ret);
