/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Building ProfileData by hand in the report and profile-data tests:
 * frame() interns a frame, fixture_process() adds a process, add() adds a
 * stack of n frame indexes (root first) with a count. */

#include <stdarg.h>

#include "profile-data.h"
#include "tests.h"

static inline uint32_t frame(ProfileData *d, const char *name, const char *module, FrameKind kind) {
        uint32_t i = UINT32_MAX;

        ASSERT_OK(profile_data_intern_frame(d, name, module, kind, &i));
        ASSERT_TRUE(i < d->n_frames);
        return i;
}

static inline uint32_t fixture_process(ProfileData *d, pid_t pid, const char *comm, const char *cmdline) {
        uint32_t i = UINT32_MAX;

        ASSERT_OK(profile_data_add_process(d, pid, comm, cmdline, &i));
        return i;
}

static inline void add(ProfileData *d, uint32_t p, uint64_t count, size_t n, ...) {
        uint32_t frames[16];
        va_list ap;

        ASSERT_TRUE(n <= ELEMENTSOF(frames));
        va_start(ap, n);
        for (size_t i = 0; i < n; i++)
                frames[i] = va_arg(ap, uint32_t);
        va_end(ap);
        ASSERT_OK(profile_data_add_stack(d, p, frames, n, count));
}
