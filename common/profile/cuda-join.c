/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include "cuda-join.h"

int cuda_join_add(CudaJoin *j, uint32_t pid, uint32_t correlation, uint64_t start_ns, uint64_t end_ns,
                  uint32_t device) {
        uint64_t ns = end_ns > start_ns ? end_ns - start_ns : 0;

        j->records++;
        if (j->n_pending >= CUDA_JOIN_PENDING_MAX) {
                j->not_joined++;
                j->not_joined_ns += ns;
                return 0;
        }
        if (j->n_pending == j->allocated) {
                size_t n = j->allocated ? j->allocated * 2 : 64;
                CudaJoinRecord *a = reallocarray(j->pending, n, sizeof(*a));

                if (!a)
                        return -ENOMEM;
                j->pending = a;
                j->allocated = n;
        }
        j->pending[j->n_pending++] =
                (CudaJoinRecord){ .pid = pid, .correlation = correlation, .ns = ns, .device = device };
        return 1;
}

void cuda_join_add_dropped(CudaJoin *j, uint64_t dropped) {
        j->dropped += dropped;
}

int cuda_join_run(CudaJoin *j, CudaJoinLookupFunc lookup, CudaJoinEmitFunc emit, void *userdata,
                  uint32_t max_age) {
        size_t kept = 0;
        int joined = 0, r = 0;

        for (size_t i = 0; i < j->n_pending; i++) {
                CudaJoinRecord *rec = &j->pending[i];
                void *anchor = NULL;

                if (r >= 0) {
                        r = lookup(userdata, rec->pid, rec->correlation, &anchor);
                        if (r > 0) {
                                r = emit(userdata, anchor, rec);
                                if (r >= 0) {
                                        j->joined++;
                                        j->joined_ns += rec->ns;
                                        joined++;
                                        continue;
                                }
                        } else if (r == 0 && rec->age >= max_age) {
                                j->not_joined++;
                                j->not_joined_ns += rec->ns;
                                continue;
                        }
                        if (r >= 0)
                                rec->age++;
                }
                /* Kept: not found yet, or an error stopped the run. */
                j->pending[kept++] = *rec;
        }
        j->n_pending = kept;
        return r < 0 ? r : joined;
}

void cuda_join_done(CudaJoin *j) {
        free(j->pending);
        *j = (CudaJoin){};
}
