/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "report-stack.h"

char *report_frame_name(const char *name, bool kernel, bool folded) {
        size_t n, m;
        char *r;

        if (!name || !*name)
                name = "[unknown]";

        n = strlen(name);
        m = n + (kernel ? 4 : 0);
        r = malloc(m + 1);
        if (!r)
                return NULL;

        memcpy(r, name, n);
        if (folded)
                for (size_t i = 0; i < n; i++) {
                        unsigned char c = (unsigned char) r[i];

                        if (c == ';' || c < 0x20 || c == 0x7f)
                                r[i] = '_';
                }
        if (kernel)
                memcpy(r + n, "_[k]", 4);
        r[m] = 0;
        return r;
}

size_t report_stack_mismatch(const ReportStackIds *ids, const ProfileStack *x, const ProfileStack *y) {
        size_t n = (size_t) MIN(x->n_frames, y->n_frames) + 1, k = 0;

        while (k < n && report_stack_segment(ids, x, k) == report_stack_segment(ids, y, k))
                k++;
        return k;
}

bool report_stack_same(const ReportStackIds *ids, const ProfileStack *x, const ProfileStack *y) {
        return x->n_frames == y->n_frames && report_stack_mismatch(ids, x, y) == (size_t) x->n_frames + 1;
}
