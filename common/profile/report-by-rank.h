/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>

#include "macro.h"
#include "profile-data.h"

/* One view across the ranks of a distributed job (summary.json "byRank",
 * `cgprofctl report --by rank`, docs/training-jobs.md): per rank (a rank's
 * own process and its workers, job-identity.h) its samples, CPU seconds
 * and where they went, in four categories that add up to 100 %:
 *
 *   communication  gloo, NCCL, MPI, c10d/ProcessGroup frames, Python frames
 *                  of torch/distributed/
 *   dataLoading    every sample of a worker (role worker); DataLoader,
 *                  fetcher, __getitem__ and collate frames, Python frames
 *                  of torch/utils/data/
 *   compute        ATen (at::), autograd, c10 dispatch, BLAS/oneDNN
 *                  kernels, Python frames of torch/nn/, torch/optim/,
 *                  torch/autograd/
 *   other          the rest
 *
 * A sample's category is the first of communication, dataLoading, compute
 * one of its frames matches (a frame's name, or for a Python frame its
 * file too); extra patterns (POSIX extended regexes, the profile's
 * rankCategories) add to the built-in ones. Then the functions whose CPU
 * time differs most between the ranks (inclusive), and the straggler: the
 * rank with the most CPU seconds of work (compute and data loading), what
 * the others wait for (their wait in gloo or NCCL is mostly off the CPU,
 * so it is not sampled), with the category where its excess is largest.
 * Processes with no rank are left out. */

typedef enum RankCategory {
        RANK_CATEGORY_COMMUNICATION,
        RANK_CATEGORY_DATA_LOADING,
        RANK_CATEGORY_COMPUTE,
        RANK_CATEGORY_OTHER,
        _RANK_CATEGORY_MAX,
} RankCategory;

const char *rank_category_to_string(RankCategory c);
RankCategory rank_category_from_string(const char *s);

/* Extra patterns per category (communication, dataLoading, compute):
 * NULL-terminated arrays of POSIX extended regexes, or NULL. */
typedef struct RankPatterns {
        char *const *extra[RANK_CATEGORY_OTHER];
} RankPatterns;

typedef struct ByRank ByRank;

/* -EINVAL with *ret_error (malloc()ed) naming a pattern that does not compile. */
int by_rank_new(const RankPatterns *patterns, ByRank **ret, char **ret_error);
ByRank *by_rank_free(ByRank *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(ByRank *, by_rank_free);

/* Adds a report's samples (several reports: several pods of one job).
 * frequency: the samples per CPU second (0: seconds are not given). */
int by_rank_add(ByRank *b, const ProfileData *d, uint64_t frequency);
/* Ranks seen. */
size_t by_rank_n_ranks(const ByRank *b);

/* The view as JSON (an object: ranks, differences, straggler). */
int by_rank_json(const ByRank *b, cJSON **ret);
/* The view as text (cgprofctl report --by rank). */
int by_rank_print(const ByRank *b, FILE *f);
