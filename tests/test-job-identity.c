/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job-identity.h"
#include "tests.h"

#define ENV(s) s, sizeof(s) - 1

TEST(torchrun) {
        JobIdentity j;

        job_identity_parse(ENV("PATH=/usr/bin\0RANK=1\0LOCAL_RANK=1\0WORLD_SIZE=2\0GROUP_RANK=0\0"
                               "ROLE_RANK=1\0TORCHELASTIC_RUN_ID=job-7\0MASTER_ADDR=127.0.0.1\0"),
                           &j);
        ASSERT_EQ(j.rank, 1);
        ASSERT_EQ(j.local_rank, 1);
        ASSERT_EQ(j.world_size, 2);
        ASSERT_EQ(j.group_rank, 0);
        ASSERT_EQ(j.role_rank, 1);
        ASSERT_STREQ(j.run_id, "job-7");
        ASSERT_TRUE(job_identity_is_set(&j));
}

TEST(mpi_slurm_order) {
        JobIdentity j;

        job_identity_parse(ENV("SLURM_PROCID=5\0PMI_RANK=4\0OMPI_COMM_WORLD_RANK=3\0"), &j);
        ASSERT_EQ(j.rank, 3);
        job_identity_parse(ENV("SLURM_PROCID=5\0PMI_RANK=4\0"), &j);
        ASSERT_EQ(j.rank, 4);
        job_identity_parse(ENV("SLURM_PROCID=5\0"), &j);
        ASSERT_EQ(j.rank, 5);
        job_identity_parse(ENV("SLURM_PROCID=5\0RANK=0\0"), &j);
        ASSERT_EQ(j.rank, 0);
        ASSERT_EQ(j.local_rank, -1);
        ASSERT_EQ(j.slurm_job_id, -1);
        /* The Slurm job: what joins its ranks' sessions into one job. */
        job_identity_parse(ENV("SLURM_JOB_ID=123456\0SLURM_PROCID=1\0SLURM_JOB_NAME=secret\0"), &j);
        ASSERT_EQ(j.slurm_job_id, 123456);
        ASSERT_EQ(j.rank, 1);
        job_identity_parse(ENV("SLURM_JOB_ID=77\0"), &j);
        ASSERT_TRUE(job_identity_is_set(&j));
        ASSERT_EQ(j.rank, -1);
}

TEST(nothing_else_kept) {
        JobIdentity j, none = JOB_IDENTITY_NONE;

        /* Other keys, prefixes and suffixes of the listed ones, bad values. */
        job_identity_parse(ENV("SECRET_TOKEN=RANK=1\0XRANK=2\0RANKS=3\0RANK\0RANK=-1\0LOCAL_RANK=1x\0"
                               "WORLD_SIZE=99999999999\0TORCHELASTIC_RUN_ID=has space\0"
                               "SLURM_JOB_IDS=1\0SLURM_JOB_ID=12a\0"),
                           &j);
        ASSERT_EQ(memcmp(&j, &none, sizeof(j)), 0);
        ASSERT_FALSE(job_identity_is_set(&j));
        /* The last entry cut short (no NUL): not trusted. */
        job_identity_parse(ENV("RANK=12"), &j);
        ASSERT_EQ(j.rank, -1);
        job_identity_parse(NULL, 0, &j);
        ASSERT_EQ(j.rank, -1);
}

TEST(roles) {
        JobIdentity parent, child, other, none = JOB_IDENTITY_NONE;

        job_identity_parse(ENV("RANK=1\0"), &parent);
        job_identity_parse(ENV("RANK=1\0"), &child);
        job_identity_parse(ENV("RANK=0\0"), &other);
        ASSERT_EQ(job_identity_role(&child, &parent), JOB_ROLE_WORKER);
        ASSERT_EQ(job_identity_role(&child, NULL), JOB_ROLE_MAIN);
        ASSERT_EQ(job_identity_role(&other, &parent), JOB_ROLE_MAIN);
        ASSERT_EQ(job_identity_role(&none, &parent), JOB_ROLE_NONE);
        ASSERT_STREQ(job_role_to_string(JOB_ROLE_WORKER), "worker");
        ASSERT_STREQ(job_role_to_string(JOB_ROLE_MAIN), "main");
        ASSERT_NULL(job_role_to_string(JOB_ROLE_NONE));
}

TEST(read_own_child) {
        char *argv[] = { (char *) "sleep", (char *) "5", NULL };
        char *envp[] = { (char *) "SECRET_TOKEN=x", (char *) "RANK=7", (char *) "WORLD_SIZE=8", NULL };
        JobIdentity j;
        pid_t pid = fork();

        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                execve("/bin/sleep", argv, envp);
                _exit(127);
        }
        /* Until the exec() is done, environ is ours. */
        for (int i = 0; i < 200; i++) {
                ASSERT_OK(job_identity_read("/proc", pid, &j));
                if (j.rank == 7)
                        break;
                usleep(10000);
        }
        kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);
        ASSERT_EQ(j.rank, 7);
        ASSERT_EQ(j.world_size, 8);
        ASSERT_ERROR(job_identity_read("/proc", pid, &j), ENOENT);
}

DEFINE_TEST_MAIN
