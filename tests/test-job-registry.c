/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The jobs of the agent's sessions (agent/sessions/job-registry.h): which
 * processes are of which job, sessions joining and ending, what a job
 * gathers, and when it is handed over for its report. */
#include <stdlib.h>
#include <string.h>

#include "job-registry.h"
#include "tests.h"

static JobIdentity run_id(const char *id, int rank) {
        JobIdentity j = JOB_IDENTITY_NONE;

        j.rank = rank;
        snprintf(j.run_id, sizeof(j.run_id), "%s", id);
        return j;
}

TEST(key_sources) {
        char buf[JOB_KEY_NAME_MAX];
        JobKey k;
        JobIdentity j = run_id("run-1", 0), none = JOB_IDENTITY_NONE;
        char *kubeflow[] = { (char *) "training.kubeflow.org/replica-index", (char *) "1",
                             (char *) "training.kubeflow.org/job-name", (char *) "mnist", NULL };
        char *jobset[] = { (char *) "batch.kubernetes.io/job-name", (char *) "js-workers-0",
                           (char *) "jobset.sigs.k8s.io/jobset-name", (char *) "js", NULL };
        char *indexed[] = { (char *) "batch.kubernetes.io/job-name", (char *) "idx", NULL };

        /* A pod label names the job of all the pod's processes, before
         * their environment. */
        ASSERT_TRUE(job_key_of_process("ns", kubeflow, "p", false, &j, buf, &k));
        ASSERT_EQ(k.source, JOB_SOURCE_KUBEFLOW);
        ASSERT_STREQ(k.name, "mnist");
        ASSERT_STREQ(k.namespace, "ns");
        ASSERT_TRUE(job_key_of_process("ns", kubeflow, "p", false, NULL, buf, &k));
        ASSERT_STREQ(k.name, "mnist");
        ASSERT_TRUE(job_key_of_process("ns", jobset, "p", false, NULL, buf, &k));
        ASSERT_EQ(k.source, JOB_SOURCE_JOBSET);
        ASSERT_STREQ(k.name, "js");
        ASSERT_TRUE(job_key_of_process("ns", indexed, "p", false, NULL, buf, &k));
        ASSERT_EQ(k.source, JOB_SOURCE_KUBE_JOB);
        ASSERT_STREQ(k.name, "idx");

        /* Else the process's own keys: the run ID, else the Slurm job. */
        ASSERT_TRUE(job_key_of_process(NULL, NULL, "p", false, &j, buf, &k));
        ASSERT_EQ(k.source, JOB_SOURCE_TORCHELASTIC);
        ASSERT_STREQ(k.name, "run-1");
        ASSERT_NULL(k.namespace);
        j = none;
        j.slurm_job_id = 4242;
        ASSERT_TRUE(job_key_of_process(NULL, NULL, "p", false, &j, buf, &k));
        ASSERT_EQ(k.source, JOB_SOURCE_SLURM);
        ASSERT_STREQ(k.name, "4242");
        ASSERT_STREQ(job_source_to_string(k.source), "slurm");

        /* No job: nothing set, a rank alone, torchrun's default run ID. */
        ASSERT_FALSE(job_key_of_process(NULL, NULL, "p", false, &none, buf, &k));
        ASSERT_FALSE(job_key_of_process(NULL, NULL, "p", false, NULL, buf, &k));
        j = run_id("", 3);
        ASSERT_FALSE(job_key_of_process(NULL, NULL, "p", false, &j, buf, &k));
        j = run_id("none", 0);
        ASSERT_FALSE(job_key_of_process(NULL, NULL, "p", false, &j, buf, &k));
}

TEST(key_equal) {
        JobKey a = { .namespace = "ns", .source = JOB_SOURCE_KUBEFLOW, .name = "j", .profile = "p" };
        JobKey b = a;

        ASSERT_TRUE(job_key_equal(&a, &b));
        /* The same name in another namespace (or on the host) is another job. */
        b.namespace = "other";
        ASSERT_FALSE(job_key_equal(&a, &b));
        b.namespace = NULL;
        ASSERT_FALSE(job_key_equal(&a, &b));
        b = a;
        b.source = JOB_SOURCE_TORCHELASTIC;
        ASSERT_FALSE(job_key_equal(&a, &b));
        b = a;
        b.profile = "q";
        ASSERT_FALSE(job_key_equal(&a, &b));
        b = a;
        b.namespaced_output = true;
        ASSERT_FALSE(job_key_equal(&a, &b));
}

/* A profile of one process (pid, rank) with n samples of one stack. */
static ProfileData *one_process(pid_t pid, int rank, uint64_t n) {
        ProfileData *d = profile_data_new();
        JobIdentity j = run_id("run-1", rank);
        uint32_t p, f[2];

        ASSERT_NOT_NULL(d);
        ASSERT_EQ(profile_data_add_process(d, pid, "python3", "python3 train.py", &p), 0);
        ASSERT_EQ(profile_data_process_set_job(d, p, &j, JOB_ROLE_MAIN, 0), 0);
        ASSERT_EQ(profile_data_intern_frame(d, "main", "python3", FRAME_USER, &f[0]), 0);
        ASSERT_EQ(profile_data_intern_frame(d, "train_step", "python3", FRAME_USER, &f[1]), 0);
        ASSERT_EQ(profile_data_add_stack(d, p, f, 2, n), 0);
        return d;
}

static void free_jobs(Job **l, size_t n) {
        for (size_t i = 0; i < n; i++)
                job_free(l[i]);
        free(l);
}

TEST(two_sessions_one_job) {
        _cleanup_(job_registry_freep) JobRegistry *reg = NULL;
        JobKey key = { .source = JOB_SOURCE_TORCHELASTIC, .name = "run-1", .profile = "p" };
        JobKey other = { .source = JOB_SOURCE_TORCHELASTIC, .name = "run-2", .profile = "p" };
        Job *j, *j2, **l;
        size_t n;

        ASSERT_EQ(job_registry_new(&reg), 0);
        ASSERT_EQ(job_registry_join(reg, &key, "s1", &j), 1);
        ASSERT_EQ(job_registry_join(reg, &key, "s1", &j2), 0); /* every process event says it again */
        ASSERT_TRUE(j == j2);
        ASSERT_EQ(job_registry_join(reg, &key, "s2", &j2), 1);
        ASSERT_TRUE(j == j2);
        ASSERT_EQ(job_registry_join(reg, &other, "s3", NULL), 1);
        ASSERT_EQ(job_registry_size(reg), 2u);
        ASSERT_EQ(j->n_sessions, 2u);
        ASSERT_EQ(j->n_running, 2u);

        ASSERT_EQ(job_registry_jobs_of(reg, "s1", &l, &n), 0);
        ASSERT_EQ(n, 1u);
        ASSERT_TRUE(l[0] == j);
        free(l);

        /* s1 ends: its samples and report go to the job, which waits for s2. */
        _cleanup_(profile_data_freep) ProfileData *d1 = one_process(100, 0, 7), *d2 = one_process(200, 1, 5);
        char *reports1[] = { (char *) "cg1/1_aaaaaaaa", NULL },
             *reports2[] = { (char *) "cg2/2_bbbbbbbb", NULL };
        JobContribution c1 = { .start_usec = 2000,
                               .end_usec = 5000,
                               .lost = 1,
                               .frequency = 99,
                               .target = "t",
                               .event = "cpu-clock" };
        JobContribution c2 = { .start_usec = 1000,
                               .end_usec = 9000,
                               .lost = 2,
                               .frequency = 99,
                               .target = "t2",
                               .event = "cpu-clock" };
        ASSERT_EQ(job_registry_contribute(reg, j, "s1", d1, reports1, &c1), 0);
        ASSERT_EQ(job_registry_contribute(reg, j, "s1", d1, reports1, &c1), -ENOENT); /* once */
        ASSERT_EQ(job_registry_jobs_of(reg, "s1", &l, &n), 0);
        ASSERT_EQ(n, 0u);
        ASSERT_EQ(job_registry_leave(reg, "s1", &l, &n), 0);
        ASSERT_EQ(n, 0u);
        ASSERT_EQ(job_registry_size(reg), 2u);
        /* An ended session does not join again. */
        ASSERT_EQ(job_registry_join(reg, &key, "s1", NULL), 0);
        ASSERT_EQ(j->n_running, 1u);

        /* s2 ends: the job has both sessions' samples, reports and totals. */
        ASSERT_EQ(job_registry_contribute(reg, j, "s2", d2, reports2, &c2), 0);
        ASSERT_EQ(job_registry_leave(reg, "s2", &l, &n), 0);
        ASSERT_EQ(n, 1u);
        ASSERT_TRUE(l[0] == j);
        ASSERT_EQ(job_registry_size(reg), 1u);
        ASSERT_EQ(j->data->n_processes, 2u);
        ASSERT_EQ(profile_data_total(j->data), 12u);
        ASSERT_EQ(j->data->processes[0].job.rank, 0);
        ASSERT_EQ(j->data->processes[1].job.rank, 1);
        ASSERT_EQ(j->data->processes[1].samples, 5u);
        ASSERT_EQ(j->data->n_frames, 2u); /* interned once */
        ASSERT_EQ(strv_length(j->reports), 2u);
        ASSERT_STREQ(j->reports[0], "cg1/1_aaaaaaaa");
        ASSERT_STREQ(j->reports[1], "cg2/2_bbbbbbbb");
        ASSERT_EQ(j->total.start_usec, 1000u);
        ASSERT_EQ(j->total.end_usec, 9000u);
        ASSERT_EQ(j->total.lost, 3u);
        ASSERT_STREQ(j->total.target, "t");
        free_jobs(l, n);

        /* The other job had one session: no report of its own. */
        ASSERT_EQ(job_registry_leave(reg, "s3", &l, &n), 0);
        ASSERT_EQ(n, 0u);
        ASSERT_NULL(l);
        ASSERT_EQ(job_registry_size(reg), 0u);
}

TEST(leave_without_contribution) {
        _cleanup_(job_registry_freep) JobRegistry *reg = NULL;
        JobKey key = { .namespace = "ns", .source = JOB_SOURCE_KUBEFLOW, .name = "j", .profile = "p" };
        _cleanup_(profile_data_freep) ProfileData *d1 = one_process(100, 0, 3);
        Job *j, **l;
        size_t n;

        ASSERT_EQ(job_registry_new(&reg), 0);
        ASSERT_EQ(job_registry_join(reg, &key, "a", &j), 1);
        ASSERT_EQ(job_registry_join(reg, &key, "b", NULL), 1);
        ASSERT_EQ(job_registry_join(reg, &key, "c", NULL), 1);
        ASSERT_EQ(job_registry_contribute(reg, j, "a", d1, NULL, &(JobContribution){}), 0);
        /* b goes without a report (discarded, nothing sampled): it ends in
         * the job all the same. */
        ASSERT_EQ(job_registry_leave(reg, "b", &l, &n), 0);
        ASSERT_EQ(n, 0u);
        ASSERT_EQ(job_registry_leave(reg, "a", &l, &n), 0);
        ASSERT_EQ(n, 0u);
        ASSERT_EQ(job_registry_leave(reg, "c", &l, &n), 0);
        ASSERT_EQ(n, 1u);
        ASSERT_EQ(profile_data_total(l[0]->data), 3u);
        ASSERT_NULL(l[0]->reports);
        free_jobs(l, n);

        /* Sessions that sampled nothing of the job: no report. */
        ASSERT_EQ(job_registry_join(reg, &key, "d", NULL), 1);
        ASSERT_EQ(job_registry_join(reg, &key, "e", NULL), 1);
        ASSERT_EQ(job_registry_leave(reg, "d", &l, &n), 0);
        ASSERT_EQ(job_registry_leave(reg, "e", &l, &n), 0);
        ASSERT_EQ(n, 0u);
        ASSERT_EQ(job_registry_size(reg), 0u);
}

TEST(merge_keeps_processes_apart) {
        _cleanup_(profile_data_freep) ProfileData *a = one_process(7, 0, 2), *b = one_process(7, 1, 4);

        /* The same PID in two pods (PID namespaces): two processes. */
        ASSERT_EQ(profile_data_merge(a, b), 0);
        ASSERT_EQ(a->n_processes, 2u);
        ASSERT_EQ(a->n_stacks, 2u);
        ASSERT_EQ(profile_data_total(a), 6u);
        ASSERT_EQ(a->processes[1].job.rank, 1);
        ASSERT_EQ(profile_data_merge(a, NULL), -EINVAL);
}

TEST(sessions_max) {
        _cleanup_(job_registry_freep) JobRegistry *reg = NULL;
        JobKey key = { .source = JOB_SOURCE_SLURM, .name = "7", .profile = "p" };
        Job *first, *j, **l;
        size_t n;
        char id[32];

        ASSERT_OK(job_registry_new(&reg));
        ASSERT_EQ(job_registry_join(reg, &key, "s0", &first), 1);
        for (unsigned i = 1; i < JOB_SESSIONS_MAX; i++) {
                snprintf(id, sizeof(id), "s%u", i);
                ASSERT_EQ(job_registry_join(reg, &key, id, &j), 1);
                ASSERT_TRUE(j == first);
        }
        /* Full: the next session starts another job of the same key. */
        ASSERT_EQ(job_registry_join(reg, &key, "next", &j), 1);
        ASSERT_TRUE(j != first);
        ASSERT_EQ(job_registry_size(reg), 2u);
        ASSERT_EQ(job_registry_join(reg, &key, "s3", &j), 0);
        ASSERT_TRUE(j == first);
        ASSERT_EQ(job_registry_leave(reg, "next", &l, &n), 0);
        ASSERT_EQ(n, 0u);
        ASSERT_EQ(job_registry_size(reg), 1u);
}

TEST(report_path) {
        Job j = { .key = { .namespace = "ml", .source = JOB_SOURCE_KUBEFLOW, .name = "mnist" },
                  .total = { .start_usec = 1795841242369123 } };
        _cleanup_free_ char *p = NULL, *q = NULL, *h = NULL;

        ASSERT_OK(job_report_path(&j, "abcd1234", &p));
        ASSERT_STREQ(p, "ml/_jobs/mnist/1795841242369_abcd1234");
        /* A name never climbs out of reportDir, nor makes more components. */
        j.key.namespace = "..";
        j.key.name = "../../etc/x";
        ASSERT_OK(job_report_path(&j, "abcd1234", &q));
        ASSERT_STREQ(q, "__/_jobs/.._.._etc_x/1795841242369_abcd1234");
        j.key.namespace = NULL;
        j.key.name = "..";
        ASSERT_OK(job_report_path(&j, "u", &h));
        ASSERT_STREQ(h, "_jobs/__/1795841242369_u");
}

DEFINE_TEST_MAIN
