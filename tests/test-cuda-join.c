/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The join of CUDA kernel records to their launches (common/profile/cuda-join.h):
 * records + launches -> GPU time per launch stack, and what does not join. */
#include <errno.h>
#include <string.h>

#include "cuda-join.h"
#include "tests.h"

/* The launches the agent knows: (pid, correlation) -> the stack (an index
 * into sums, the anchor). */
typedef struct Launch {
        uint32_t pid, correlation;
        size_t stack;
} Launch;

typedef struct World {
        Launch launches[16];
        size_t n_launches;
        uint64_t sums[4]; /* GPU ns per stack */
        uint64_t emitted;
        int fail; /* lookup fails with it when set */
} World;

static int lookup(void *userdata, uint32_t pid, uint32_t correlation, void **ret_anchor) {
        World *w = userdata;

        if (w->fail)
                return w->fail;
        for (size_t i = 0; i < w->n_launches; i++)
                if (w->launches[i].pid == pid && w->launches[i].correlation == correlation) {
                        *ret_anchor = &w->sums[w->launches[i].stack];
                        return 1;
                }
        return 0;
}

static int emit(void *userdata, void *anchor, const CudaJoinRecord *r) {
        World *w = userdata;

        *(uint64_t *) anchor += r->ns;
        w->emitted++;
        return 0;
}

static void launch(World *w, uint32_t pid, uint32_t correlation, size_t stack) {
        w->launches[w->n_launches++] = (Launch){ pid, correlation, stack };
}

TEST(each_kernel_to_its_stack) {
        World w = {};
        CudaJoin j = {};

        launch(&w, 100, 1, 0);
        launch(&w, 100, 2, 1);
        launch(&w, 100, 3, 0);
        ASSERT_EQ(cuda_join_add(&j, 100, 1, 1000, 1500, 0), 1);
        ASSERT_EQ(cuda_join_add(&j, 100, 2, 2000, 4000, 0), 1);
        ASSERT_EQ(cuda_join_add(&j, 100, 3, 5000, 5250, 0), 1);
        ASSERT_EQ(cuda_join_run(&j, lookup, emit, &w, 2), 3);
        ASSERT_EQ(w.sums[0], 750);
        ASSERT_EQ(w.sums[1], 2000);
        ASSERT_EQ(j.joined, 3);
        ASSERT_EQ(j.joined_ns, 2750);
        ASSERT_EQ(j.not_joined, 0);
        ASSERT_EQ(j.n_pending, 0);
        cuda_join_done(&j);
}

TEST(record_before_its_launch_waits) {
        World w = {};
        CudaJoin j = {};

        /* The record came before the drain that resolves its launch's stack. */
        ASSERT_EQ(cuda_join_add(&j, 100, 7, 0, 900, 0), 1);
        ASSERT_EQ(cuda_join_run(&j, lookup, emit, &w, 2), 0);
        ASSERT_EQ(j.n_pending, 1);
        launch(&w, 100, 7, 2);
        ASSERT_EQ(cuda_join_run(&j, lookup, emit, &w, 2), 1);
        ASSERT_EQ(w.sums[2], 900);
        ASSERT_EQ(j.n_pending, 0);
        ASSERT_EQ(j.not_joined, 0);
        cuda_join_done(&j);
}

TEST(unknown_correlation_not_joined) {
        World w = {};
        CudaJoin j = {};

        launch(&w, 100, 1, 0);
        ASSERT_EQ(cuda_join_add(&j, 100, 99, 0, 400, 0), 1);
        for (int i = 0; i < 3; i++)
                ASSERT_EQ(cuda_join_run(&j, lookup, emit, &w, 2), 0);
        ASSERT_EQ(j.not_joined, 1);
        ASSERT_EQ(j.not_joined_ns, 400);
        ASSERT_EQ(j.n_pending, 0);
        ASSERT_EQ(w.emitted, 0);
        cuda_join_done(&j);
}

TEST(another_pid_gets_nothing) {
        World w = {};
        CudaJoin j = {};

        /* PID 200 sends a record for PID 100's launch: the join is by the
         * sender's pid, so it finds no launch of its own. */
        launch(&w, 100, 5, 0);
        ASSERT_EQ(cuda_join_add(&j, 200, 5, 0, 1000000, 0), 1);
        ASSERT_EQ(cuda_join_run(&j, lookup, emit, &w, 0), 0);
        ASSERT_EQ(w.sums[0], 0);
        ASSERT_EQ(j.not_joined, 1);
        cuda_join_done(&j);
}

TEST(dropped_and_reversed) {
        CudaJoin j = {};
        World w = {};

        cuda_join_add_dropped(&j, 7);
        cuda_join_add_dropped(&j, 3);
        ASSERT_EQ(j.dropped, 10);
        launch(&w, 1, 1, 3);
        ASSERT_EQ(cuda_join_add(&j, 1, 1, 500, 100, 0), 1); /* end before start: 0 ns */
        ASSERT_EQ(cuda_join_run(&j, lookup, emit, &w, 0), 1);
        ASSERT_EQ(w.sums[3], 0);
        ASSERT_EQ(j.records, 1);
        cuda_join_done(&j);
}

TEST(errors_keep_records) {
        CudaJoin j = {};
        World w = { .fail = -EIO };

        launch(&w, 1, 1, 0);
        ASSERT_EQ(cuda_join_add(&j, 1, 1, 0, 10, 0), 1);
        ASSERT_EQ(cuda_join_run(&j, lookup, emit, &w, 0), -EIO);
        ASSERT_EQ(j.n_pending, 1);
        w.fail = 0;
        ASSERT_EQ(cuda_join_run(&j, lookup, emit, &w, 0), 1);
        ASSERT_EQ(w.sums[0], 10);
        cuda_join_done(&j);
}

TEST(pending_bounded) {
        CudaJoin j = {};

        for (uint32_t i = 0; i < CUDA_JOIN_PENDING_MAX + 5; i++)
                ASSERT_TRUE(cuda_join_add(&j, 1, i, 0, 1, 0) >= 0);
        ASSERT_EQ(j.n_pending, CUDA_JOIN_PENDING_MAX);
        ASSERT_EQ(j.not_joined, 5);
        ASSERT_EQ(j.records, CUDA_JOIN_PENDING_MAX + 5);
        cuda_join_done(&j);
}

DEFINE_TEST_MAIN
