/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "job-identity.h"

/* The keys read; nothing else of the environment is looked at beyond its
 * name. */
typedef enum JobKey {
        KEY_RANK,
        KEY_LOCAL_RANK,
        KEY_WORLD_SIZE,
        KEY_GROUP_RANK,
        KEY_ROLE_RANK,
        KEY_RUN_ID,
        KEY_OMPI_RANK,
        KEY_PMI_RANK,
        KEY_SLURM_PROCID,
        KEY_SLURM_JOB_ID,
        _KEY_MAX,
} JobKey;

static const char *const keys[_KEY_MAX] = {
        [KEY_RANK] = "RANK",
        [KEY_LOCAL_RANK] = "LOCAL_RANK",
        [KEY_WORLD_SIZE] = "WORLD_SIZE",
        [KEY_GROUP_RANK] = "GROUP_RANK",
        [KEY_ROLE_RANK] = "ROLE_RANK",
        [KEY_RUN_ID] = "TORCHELASTIC_RUN_ID",
        [KEY_OMPI_RANK] = "OMPI_COMM_WORLD_RANK",
        [KEY_PMI_RANK] = "PMI_RANK",
        [KEY_SLURM_PROCID] = "SLURM_PROCID",
        [KEY_SLURM_JOB_ID] = "SLURM_JOB_ID",
};

bool job_identity_is_set(const JobIdentity *j) {
        return j && (j->rank >= 0 || j->local_rank >= 0 || j->world_size >= 0 || j->group_rank >= 0 ||
                     j->role_rank >= 0 || j->slurm_job_id >= 0 || j->run_id[0]);
}

/* A decimal 0..INT32_MAX, nothing else; -1 otherwise. */
static int32_t parse_number(const char *v, size_t n) {
        int64_t x = 0;

        if (n == 0 || n > 10)
                return -1;
        for (size_t i = 0; i < n; i++) {
                if (v[i] < '0' || v[i] > '9')
                        return -1;
                x = x * 10 + (v[i] - '0');
        }
        return x > INT32_MAX ? -1 : (int32_t) x;
}

static void parse_run_id(const char *v, size_t n, char *ret) {
        if (n == 0 || n >= JOB_IDENTITY_RUN_ID_MAX)
                return;
        for (size_t i = 0; i < n; i++)
                if (v[i] < 0x21 || v[i] > 0x7e)
                        return;
        memcpy(ret, v, n);
        ret[n] = 0;
}

void job_identity_parse(const char *environ, size_t size, JobIdentity *ret) {
        int32_t values[_KEY_MAX];
        JobIdentity j = JOB_IDENTITY_NONE;

        for (size_t i = 0; i < _KEY_MAX; i++)
                values[i] = -1;
        for (size_t pos = 0; environ && pos < size;) {
                const char *e = environ + pos, *end = memchr(e, 0, size - pos), *eq;
                size_t len = end ? (size_t) (end - e) : size - pos;

                pos += len + 1;
                eq = memchr(e, '=', len);
                if (!eq || !end) /* no value, or cut short: not trusted */
                        continue;
                for (JobKey k = 0; k < _KEY_MAX; k++) {
                        size_t klen = strlen(keys[k]);
                        const char *v = eq + 1;
                        size_t vlen = len - klen - 1;

                        if ((size_t) (eq - e) != klen || memcmp(e, keys[k], klen) != 0)
                                continue;
                        if (k == KEY_RUN_ID)
                                parse_run_id(v, vlen, j.run_id);
                        else
                                values[k] = parse_number(v, vlen);
                        break;
                }
        }
        j.rank = values[KEY_RANK] >= 0        ? values[KEY_RANK]
                 : values[KEY_OMPI_RANK] >= 0 ? values[KEY_OMPI_RANK]
                 : values[KEY_PMI_RANK] >= 0  ? values[KEY_PMI_RANK]
                                              : values[KEY_SLURM_PROCID];
        j.local_rank = values[KEY_LOCAL_RANK];
        j.world_size = values[KEY_WORLD_SIZE];
        j.group_rank = values[KEY_GROUP_RANK];
        j.role_rank = values[KEY_ROLE_RANK];
        j.slurm_job_id = values[KEY_SLURM_JOB_ID];
        *ret = j;
}

int job_identity_read(const char *proc_root, pid_t pid, JobIdentity *ret) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        char path[64];
        size_t n = 0;

        if ((size_t) snprintf(path, sizeof(path), "%s/%d/environ", proc_root ?: "/proc", (int) pid) >=
            sizeof(path))
                return -ENAMETOOLONG;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        buf = malloc(JOB_IDENTITY_ENVIRON_MAX);
        if (!buf)
                return -ENOMEM;
        while (n < JOB_IDENTITY_ENVIRON_MAX) {
                ssize_t k = read(fd, buf + n, JOB_IDENTITY_ENVIRON_MAX - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        job_identity_parse(buf, n, ret);
        /* The rest of the environment is not kept. */
        explicit_bzero(buf, n);
        return 0;
}

const char *job_role_to_string(JobRole r) {
        static const char *const names[_JOB_ROLE_MAX] = {
                [JOB_ROLE_NONE] = NULL,
                [JOB_ROLE_MAIN] = "main",
                [JOB_ROLE_WORKER] = "worker",
        };
        return r >= 0 && r < _JOB_ROLE_MAX ? names[r] : NULL;
}

JobRole job_identity_role(const JobIdentity *child, const JobIdentity *parent) {
        if (!child || child->rank < 0)
                return JOB_ROLE_NONE;
        if (parent && parent->rank == child->rank)
                return JOB_ROLE_WORKER;
        return JOB_ROLE_MAIN;
}
