/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The jobs of the agent's sessions (see job-registry.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "job-registry.h"
#include "template.h"

struct JobRegistry {
        Job **jobs;
        size_t n_jobs;
};

static const char *const job_source_table[_JOB_SOURCE_MAX] = {
        [JOB_SOURCE_KUBEFLOW] = "kubeflow", [JOB_SOURCE_JOBSET] = "jobset",
        [JOB_SOURCE_KUBE_JOB] = "job",      [JOB_SOURCE_TORCHELASTIC] = "torchelastic",
        [JOB_SOURCE_SLURM] = "slurm",
};

const char *job_source_to_string(JobSource s) {
        return s >= 0 && s < _JOB_SOURCE_MAX ? job_source_table[s] : NULL;
}

/* The pod labels that name a job, the first found wins (a JobSet's pods
 * also carry their child Job's name). */
static const struct {
        const char *label;
        JobSource source;
} job_name_labels[] = {
        { "training.kubeflow.org/job-name", JOB_SOURCE_KUBEFLOW },
        { "jobset.sigs.k8s.io/jobset-name", JOB_SOURCE_JOBSET },
        { "batch.kubernetes.io/job-name", JOB_SOURCE_KUBE_JOB },
};

const char *job_source_label(JobSource s) {
        for (size_t i = 0; i < ELEMENTSOF(job_name_labels); i++)
                if (job_name_labels[i].source == s)
                        return job_name_labels[i].label;
        return NULL;
}

static const char *label_value(char *const *labels, const char *key) {
        for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2)
                if (streq(labels[i], key))
                        return labels[i + 1];
        return NULL;
}

bool job_key_of_process(const char *namespace, char *const *pod_labels, const char *profile,
                        bool namespaced_output, const JobIdentity *j, char name_buf[static JOB_KEY_NAME_MAX],
                        JobKey *ret) {
        JobKey k = {
                .namespace = namespace,
                .profile = profile,
                .namespaced_output = namespaced_output,
        };

        for (size_t i = 0; i < ELEMENTSOF(job_name_labels) && !k.name; i++) {
                const char *v = label_value(pod_labels, job_name_labels[i].label);
                if (v && *v) {
                        k.source = job_name_labels[i].source;
                        k.name = v;
                }
        }
        /* torchrun's run ID when none was given is "none": not a name. */
        if (!k.name && j && j->run_id[0] && !streq(j->run_id, "none")) {
                k.source = JOB_SOURCE_TORCHELASTIC;
                k.name = strncpy(name_buf, j->run_id, JOB_KEY_NAME_MAX - 1);
                name_buf[JOB_KEY_NAME_MAX - 1] = 0;
        }
        if (!k.name && j && j->slurm_job_id >= 0) {
                k.source = JOB_SOURCE_SLURM;
                snprintf(name_buf, JOB_KEY_NAME_MAX, "%d", (int) j->slurm_job_id);
                k.name = name_buf;
        }
        if (!k.name)
                return false;
        *ret = k;
        return true;
}

bool job_key_equal(const JobKey *a, const JobKey *b) {
        return a->source == b->source && a->namespaced_output == b->namespaced_output &&
               streq_ptr(a->namespace, b->namespace) && streq_ptr(a->name, b->name) &&
               streq_ptr(a->profile, b->profile);
}

Job *job_free(Job *j) {
        if (!j)
                return NULL;
        free((char *) j->key.namespace);
        free((char *) j->key.name);
        free((char *) j->key.profile);
        strv_free(j->sessions);
        free(j->ended);
        profile_data_free(j->data);
        strv_free(j->reports);
        free((char *) j->total.target);
        free((char *) j->total.event);
        free(j);
        return NULL;
}

static int strdup_or_null(const char *s, const char **ret) {
        char *c = NULL;

        if (s && !(c = strdup(s)))
                return -ENOMEM;
        *ret = c;
        return 0;
}

static int job_new(const JobKey *key, Job **ret) {
        _cleanup_(job_freep) Job *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        j->key = (JobKey){ .source = key->source, .namespaced_output = key->namespaced_output };
        if (strdup_or_null(key->namespace, &j->key.namespace) < 0 ||
            strdup_or_null(key->name, &j->key.name) < 0 || strdup_or_null(key->profile, &j->key.profile) < 0)
                return -ENOMEM;
        j->data = profile_data_new();
        if (!j->data)
                return -ENOMEM;
        *ret = TAKE_PTR(j);
        return 0;
}

int job_registry_new(JobRegistry **ret) {
        JobRegistry *reg = calloc(1, sizeof(*reg));

        if (!reg)
                return -ENOMEM;
        *ret = reg;
        return 0;
}

JobRegistry *job_registry_free(JobRegistry *reg) {
        if (!reg)
                return NULL;
        for (size_t i = 0; i < reg->n_jobs; i++)
                job_free(reg->jobs[i]);
        free(reg->jobs);
        free(reg);
        return NULL;
}

size_t job_registry_size(const JobRegistry *reg) {
        return reg ? reg->n_jobs : 0;
}

/* The session's index in the job, or -1. */
static ssize_t job_session_index(const Job *j, const char *session) {
        for (size_t i = 0; i < j->n_sessions; i++)
                if (streq(j->sessions[i], session))
                        return (ssize_t) i;
        return -1;
}

static int job_add_session(Job *j, const char *session) {
        char **l = reallocarray(j->sessions, j->n_sessions + 2, sizeof(char *));
        bool *e;

        if (!l)
                return -ENOMEM;
        j->sessions = l;
        e = reallocarray(j->ended, j->n_sessions + 1, sizeof(bool));
        if (!e)
                return -ENOMEM;
        j->ended = e;
        l[j->n_sessions] = strdup(session);
        if (!l[j->n_sessions])
                return -ENOMEM;
        l[j->n_sessions + 1] = NULL;
        e[j->n_sessions] = false;
        j->n_sessions++;
        j->n_running++;
        return 0;
}

int job_registry_join(JobRegistry *reg, const JobKey *key, const char *session, Job **ret_job) {
        _cleanup_(job_freep) Job *new_job = NULL;
        Job *j = NULL;
        int r;

        for (size_t i = 0; i < reg->n_jobs; i++)
                if (job_key_equal(&reg->jobs[i]->key, key) &&
                    job_session_index(reg->jobs[i], session) >= 0) {
                        if (ret_job)
                                *ret_job = reg->jobs[i];
                        return 0;
                }
        /* A job whose sessions never all end at once (pods replaced one by
         * one for days) is cut: a new one starts beyond the most sessions. */
        for (size_t i = 0; i < reg->n_jobs && !j; i++)
                if (job_key_equal(&reg->jobs[i]->key, key) && reg->jobs[i]->n_sessions < JOB_SESSIONS_MAX)
                        j = reg->jobs[i];
        if (!j) {
                Job **l = reallocarray(reg->jobs, reg->n_jobs + 1, sizeof(Job *));
                if (!l)
                        return -ENOMEM;
                reg->jobs = l;
                r = job_new(key, &new_job);
                if (r < 0)
                        return r;
                j = new_job;
        }
        r = job_add_session(j, session);
        if (r < 0)
                return r;
        if (new_job)
                reg->jobs[reg->n_jobs++] = TAKE_PTR(new_job);
        if (ret_job)
                *ret_job = j;
        return 1;
}

int job_registry_jobs_of(JobRegistry *reg, const char *session, Job ***ret, size_t *ret_n) {
        Job **l = NULL;
        size_t n = 0;

        for (size_t i = 0; i < reg->n_jobs; i++) {
                ssize_t k = job_session_index(reg->jobs[i], session);
                if (k < 0 || reg->jobs[i]->ended[k])
                        continue;
                Job **a = reallocarray(l, n + 1, sizeof(Job *));
                if (!a) {
                        free(l);
                        return -ENOMEM;
                }
                l = a;
                l[n++] = reg->jobs[i];
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

static void job_session_ended(Job *j, size_t k) {
        if (j->ended[k])
                return;
        j->ended[k] = true;
        j->n_running--;
}

static int job_add_reports(Job *j, char *const *reports) {
        size_t n = strv_length(j->reports), m = strv_length(reports);
        char **l;

        if (m == 0)
                return 0;
        l = reallocarray(j->reports, n + m + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        j->reports = l;
        for (size_t i = 0; i < m; i++) {
                l[n + i + 1] = NULL;
                l[n + i] = strdup(reports[i]);
                if (!l[n + i])
                        return -ENOMEM;
        }
        return 0;
}

int job_registry_contribute(JobRegistry *reg, Job *job, const char *session, const ProfileData *d,
                            char *const *reports, const JobContribution *c) {
        JobContribution *t = &job->total;
        ssize_t k = job_session_index(job, session);
        int r;

        (void) reg;
        if (k < 0 || job->ended[k])
                return -ENOENT;
        /* Whatever fails, the session has ended in the job. */
        job_session_ended(job, (size_t) k);
        if (d) {
                r = profile_data_merge(job->data, d);
                if (r < 0)
                        return r;
        }
        r = job_add_reports(job, reports);
        if (r < 0)
                return r;
        if (t->start_usec == 0 || (c->start_usec > 0 && c->start_usec < t->start_usec))
                t->start_usec = c->start_usec;
        t->end_usec = MAX(t->end_usec, c->end_usec);
        t->lost += c->lost;
        t->excluded += c->excluded;
        t->collisions += c->collisions;
        t->cpu_usage_usec += c->cpu_usage_usec;
        t->unsymbolized_frames += c->unsymbolized_frames;
        t->total_frames += c->total_frames;
        if (t->frequency == 0)
                t->frequency = c->frequency;
        t->formats |= c->formats;
        if (!t->target && strdup_or_null(c->target, &t->target) < 0)
                return -ENOMEM;
        if (!t->event && strdup_or_null(c->event, &t->event) < 0)
                return -ENOMEM;
        return 0;
}

int job_registry_leave(JobRegistry *reg, const char *session, Job ***ret, size_t *ret_n) {
        Job **done = NULL;
        size_t n_done = 0;
        int r = 0;

        for (size_t i = 0; reg && i < reg->n_jobs;) {
                Job *j = reg->jobs[i];
                ssize_t k = job_session_index(j, session);

                if (k < 0 || (j->ended[k] && j->n_running > 0)) {
                        i++;
                        continue;
                }
                job_session_ended(j, (size_t) k);
                if (j->n_running > 0) {
                        i++;
                        continue;
                }
                /* Its last session: out of the registry. */
                memmove(reg->jobs + i, reg->jobs + i + 1, (reg->n_jobs - i - 1) * sizeof(Job *));
                reg->n_jobs--;
                if (j->n_sessions < 2 ||
                    profile_data_total(j->data) + profile_data_offcpu_total(j->data) == 0) {
                        job_free(j);
                        continue;
                }
                Job **a = reallocarray(done, n_done + 1, sizeof(Job *));
                if (!a) {
                        job_free(j);
                        r = -ENOMEM;
                        continue;
                }
                done = a;
                done[n_done++] = j;
        }
        *ret = done;
        *ret_n = n_done;
        return r;
}

int job_report_path(const Job *j, const char *uid, char **ret) {
        _cleanup_free_ char *ns = j->key.namespace ? path_component_sanitize(j->key.namespace) : NULL;
        _cleanup_free_ char *name = path_component_sanitize(j->key.name);
        _cleanup_free_ char *u = path_component_sanitize(uid);

        if ((j->key.namespace && !ns) || !name || !u)
                return -ENOMEM;
        if (asprintf(ret, "%s%s%s/%s/%" PRIu64 "_%s", strempty(ns), ns ? "/" : "", JOB_REPORT_DIR, name,
                     j->total.start_usec / USEC_PER_MSEC, u) < 0)
                return -ENOMEM;
        return 0;
}
