/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a sample's Python frames go among its native ones. The convention
 * (docs/python-frames.md): each native _PyEval_EvalFrameDefault frame is
 * replaced by the Python frames that call of the evaluation loop ran, in
 * call order; everything native around them stays (main(), Py_RunMain(),
 * C extensions, libtorch, the kernel).
 *
 * The walk gives the Python frames leaf first, packed (bpf/python.h), the
 * first frame each evaluation loop call ran flagged "entry": so the frames
 * up to and including the first entry belong to the innermost native
 * _PyEval_EvalFrameDefault, the next group to the next one out, and so on.
 * Groups left when the native stack has no more evaluation frames (a
 * native stack cut short) go just outside the outermost one matched, or
 * at the root when none was. */

typedef struct PythonMergeItem {
        bool python; /* index is into the Python frames (else the native ones) */
        uint32_t index;
} PythonMergeItem;

/* native_eval: for each native user frame, ROOT FIRST, whether it is
 * _PyEval_EvalFrameDefault; python: the walk's frames, LEAF FIRST. Writes
 * root first into out (at most n_native + n_python items). */
int python_merge(const bool *native_eval, size_t n_native, const uint64_t *python, size_t n_python,
                 PythonMergeItem *out, size_t max_out, size_t *ret_n);
