/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include <linux/types.h>

#include "../../bpf/python.h"
#include "macro.h"
#include "python-merge.h"

/* Emits group g (python frames [start, end), leaf first) root first. */
static void emit_group(const size_t *starts, size_t g, PythonMergeItem *out, size_t *n) {
        for (size_t j = starts[g + 1]; j > starts[g]; j--)
                out[(*n)++] = (PythonMergeItem){ .python = true, .index = (uint32_t) (j - 1) };
}

int python_merge(const bool *native_eval, size_t n_native, const uint64_t *python, size_t n_python,
                 PythonMergeItem *out, size_t max_out, size_t *ret_n) {
        _cleanup_free_ size_t *starts = NULL;
        size_t n_groups = 0, n_eval = 0, matched, n = 0, outer_eval = SIZE_MAX;

        if ((n_native > 0 && !native_eval) || (n_python > 0 && !python) || !out || !ret_n)
                return -EINVAL;
        if (max_out < n_native + n_python)
                return -ENOBUFS;

        /* Group boundaries: starts[g] is the first (leafmost) frame of group g. */
        starts = malloc((n_python + 2) * sizeof(size_t));
        if (!starts)
                return -ENOMEM;
        starts[0] = 0;
        for (size_t j = 0; j < n_python; j++)
                if (CGPROF_PY_FRAME_ENTRY(python[j]) || j + 1 == n_python)
                        starts[++n_groups] = j + 1;

        for (size_t i = 0; i < n_native; i++)
                if (native_eval[i])
                        n_eval++;
        matched = MIN(n_eval, n_groups);

        /* The evaluation frames matched, counted from the leaf: the k-th one
         * from the leaf gets group k. Find the outermost matched one. */
        if (matched > 0) {
                size_t seen = 0;
                for (size_t i = n_native; i > 0; i--)
                        if (native_eval[i - 1] && ++seen == matched) {
                                outer_eval = i - 1;
                                break;
                        }
        }

        if (outer_eval == SIZE_MAX)
                /* No evaluation frame to put them at: all groups at the root. */
                for (size_t g = n_groups; g > 0; g--)
                        emit_group(starts, g - 1, out, &n);
        for (size_t i = 0, k = n_eval; i < n_native; i++) {
                if (!native_eval[i] || i < outer_eval || outer_eval == SIZE_MAX) {
                        if (native_eval[i])
                                k--;
                        out[n++] = (PythonMergeItem){ .index = (uint32_t) i };
                        continue;
                }
                /* The (k-1)-th evaluation frame from the leaf. */
                k--;
                if (i == outer_eval)
                        /* Groups no native frame is left for: just outside. */
                        for (size_t g = n_groups; g > matched; g--)
                                emit_group(starts, g - 1, out, &n);
                if (k < matched)
                        emit_group(starts, k, out, &n);
                else
                        out[n++] = (PythonMergeItem){ .index = (uint32_t) i };
        }
        *ret_n = n;
        return 0;
}
