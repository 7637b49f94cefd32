/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* Who a process is in a distributed job (docs/training-jobs.md): read from
 * a fixed list of environment keys of its /proc/PID/environ, never any
 * other (environments hold secrets: no other key's name or value is kept,
 * logged or reported):
 *
 *   torchrun / torch.distributed  RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK,
 *                                 ROLE_RANK, TORCHELASTIC_RUN_ID
 *   Open MPI, MPICH/Intel MPI     OMPI_COMM_WORLD_RANK, PMI_RANK
 *   Slurm                         SLURM_PROCID, SLURM_JOB_ID
 *
 * The rank is RANK, else OMPI_COMM_WORLD_RANK, else PMI_RANK, else
 * SLURM_PROCID. Numbers are decimal, 0..2^31-1 (anything else: not set);
 * TORCHELASTIC_RUN_ID is kept when it is 1..63 printable ASCII bytes. */

#define JOB_IDENTITY_RUN_ID_MAX 64
/* The most of /proc/PID/environ read (the keys after it are not seen). */
#define JOB_IDENTITY_ENVIRON_MAX (256U * 1024U)

typedef struct JobIdentity {
        int32_t rank, local_rank, world_size, group_rank, role_rank; /* -1: not set */
        int32_t slurm_job_id; /* SLURM_JOB_ID, the job (allocation) the rank runs in; -1: not set */
        char run_id[JOB_IDENTITY_RUN_ID_MAX]; /* "": not set */
} JobIdentity;

#define JOB_IDENTITY_NONE                 \
        ((JobIdentity){ .rank = -1,       \
                        .local_rank = -1, \
                        .world_size = -1, \
                        .group_rank = -1, \
                        .role_rank = -1,  \
                        .slurm_job_id = -1 })

/* Whether any key was found. */
bool job_identity_is_set(const JobIdentity *j);

/* Parses an environment block ("KEY=value\0KEY=value\0...", the last entry
 * possibly cut short without its NUL) into *ret, looking at the listed
 * keys only. */
void job_identity_parse(const char *environ, size_t size, JobIdentity *ret);

/* Reads /proc/PID/environ (at most JOB_IDENTITY_ENVIRON_MAX bytes) under
 * proc_root and parses it. Blocks on the process's memory: call it off the
 * event loop. -ESRCH/-ENOENT: gone; -EACCES: not permitted. */
int job_identity_read(const char *proc_root, pid_t pid, JobIdentity *ret);

/* The role of a process in its job: "main" for a process whose rank is
 * its own, "worker" for one that inherited its parent's rank (a
 * DataLoader worker: the same RANK as its parent, a ranked process). */
typedef enum JobRole {
        JOB_ROLE_NONE,
        JOB_ROLE_MAIN,
        JOB_ROLE_WORKER,
        _JOB_ROLE_MAX,
} JobRole;

const char *job_role_to_string(JobRole r);
/* child's role, given its parent's identity (NULL: no ranked parent known). */
JobRole job_identity_role(const JobIdentity *child, const JobIdentity *parent);
