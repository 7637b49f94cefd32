/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The join of CUDA kernel activity to the launches that made them (docs/gpu.md,
 * kernel durations). The CUPTI library in a workload sends the kernels that
 * ran (correlation ID, GPU start and end) long after their launches; the
 * launch itself was counted by the agent's uprobe on cgprof_cupti_launch
 * with its CPU stack. A record waits here until its launch's stack is
 * known (the drain that resolves it), then its GPU time goes to that stack;
 * a record whose launch is not found within max_age joins is counted not
 * joined. Pure: the caller says where launches are (lookup) and what a
 * joined record does (emit); unit-tested (test-cuda-join.c). */

typedef struct CudaJoinRecord {
        uint32_t pid; /* the sender, as the kernel told (SCM_CREDENTIALS) */
        uint32_t correlation;
        uint64_t ns; /* GPU time: end - start */
        uint32_t device;
        uint32_t age; /* joins it waited through */
} CudaJoinRecord;

#define CUDA_JOIN_PENDING_MAX 65536 /* records waiting; more are counted not joined */

typedef struct CudaJoin {
        CudaJoinRecord *pending;
        size_t n_pending, allocated;
        uint64_t records; /* received */
        uint64_t joined, joined_ns;
        uint64_t not_joined, not_joined_ns; /* launch not seen (unknown correlation ID, or forgotten) */
        uint64_t dropped; /* the records the library said it dropped (CUPTI's buffers, the socket) */
} CudaJoin;

/* Where the launch of (pid, correlation) is: 1 with *ret_anchor (the
 * caller's: its stack), 0 when not known (yet), or a negative errno. */
typedef int (*CudaJoinLookupFunc)(void *userdata, uint32_t pid, uint32_t correlation, void **ret_anchor);
/* A record joined to its launch's anchor. */
typedef int (*CudaJoinEmitFunc)(void *userdata, void *anchor, const CudaJoinRecord *r);

/* Takes a record (its ns: end - start; end before start is 0). */
int cuda_join_add(CudaJoin *j, uint32_t pid, uint32_t correlation, uint64_t start_ns, uint64_t end_ns,
                  uint32_t device);
/* Records the library dropped (a datagram header's count). */
void cuda_join_add_dropped(CudaJoin *j, uint64_t dropped);
/* Joins what it can; records not joined age by one, and those older than
 * max_age are counted not joined (max_age 0: all that do not join now).
 * Returns the number joined, or a negative errno (from lookup or emit:
 * the records stay). */
int cuda_join_run(CudaJoin *j, CudaJoinLookupFunc lookup, CudaJoinEmitFunc emit, void *userdata,
                  uint32_t max_age);
void cuda_join_done(CudaJoin *j);
