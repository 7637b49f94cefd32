/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "profile-data.h"

/* What the text writers (profile.folded, profile.speedscope.json) share:
 * frame names as they print them, and a stack as the line they print, the
 * process's comm first, then the frames, root first. */

/* A frame's name as printed: "[unknown]" when there is none, "_[k]" after
 * a kernel frame's; folded: ';' (the separator) and control characters
 * made '_'. NULL: out of memory. */
char *report_frame_name(const char *name, bool kernel, bool folded);

/* The IDs of a stack's segments: segment 0 is roots[the process], segment
 * k > 0 the k-1th frame, frames[the frame] (the frame's index itself when
 * frames is NULL). A stack of n frames has n + 1 segments. */
typedef struct ReportStackIds {
        const uint32_t *roots;
        const uint32_t *frames;
} ReportStackIds;

static inline uint32_t report_stack_segment(const ReportStackIds *ids, const ProfileStack *s, size_t k) {
        if (k == 0)
                return ids->roots[s->process];
        return ids->frames ? ids->frames[s->frames[k - 1]] : s->frames[k - 1];
}

/* The first segment where x and y differ; the fewer segments of the two
 * when one stack is a prefix of the other (or they are equal). */
size_t report_stack_mismatch(const ReportStackIds *ids, const ProfileStack *x, const ProfileStack *y);

/* Whether x and y print the same segments. */
bool report_stack_same(const ReportStackIds *ids, const ProfileStack *x, const ProfileStack *y);
