/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The offsets table (common/symbols/python-runtime.c) against the CPython
 * headers installed here (Debian's python3.11-dev, Include/internal with
 * Py_BUILD_CORE): every offset the walk and the agent use must be what the
 * compiler says. Built only where the headers are (meson: python-3.11). */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "python-runtime.h"

static int failed;

#define CHECK(field, value)                                                                                \
        do {                                                                                               \
                if ((size_t) (field) != (size_t) (value)) {                                                \
                        fprintf(stderr, "%s is %zu, the headers say %s = %zu\n", #field, (size_t) (field), \
                                #value, (size_t) (value));                                                 \
                        failed = 1;                                                                        \
                }                                                                                          \
        } while (0)

int main(void) {
        const PythonOffsets *o = python_offsets_find(PY_MAJOR_VERSION, PY_MINOR_VERSION);

        if (!o) {
                fprintf(stderr, "no offsets for the installed headers' %d.%d\n", PY_MAJOR_VERSION,
                        PY_MINOR_VERSION);
                return EXIT_FAILURE;
        }
        CHECK(o->runtime_interp_head, offsetof(_PyRuntimeState, interpreters.head));
        CHECK(o->interp_threads_head, offsetof(PyInterpreterState, threads.head));
        CHECK(o->tstate_next, offsetof(PyThreadState, next));
        CHECK(o->tstate_thread_id, offsetof(PyThreadState, thread_id));
        CHECK(o->tstate_cframe, offsetof(PyThreadState, cframe));
        CHECK(o->cframe_current_frame, offsetof(_PyCFrame, current_frame));
        CHECK(o->frame_code, offsetof(_PyInterpreterFrame, f_code));
        CHECK(o->frame_previous, offsetof(_PyInterpreterFrame, previous));
        CHECK(o->frame_prev_instr, offsetof(_PyInterpreterFrame, prev_instr));
        CHECK(o->frame_is_entry, offsetof(_PyInterpreterFrame, is_entry));
        CHECK(o->frame_owner, offsetof(_PyInterpreterFrame, owner));
        CHECK(o->code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
        CHECK(o->object_type, offsetof(PyObject, ob_type));
        CHECK(o->code_filename, offsetof(PyCodeObject, co_filename));
        CHECK(o->code_name, offsetof(PyCodeObject, co_name));
        CHECK(o->code_qualname, offsetof(PyCodeObject, co_qualname));
        CHECK(o->code_linetable, offsetof(PyCodeObject, co_linetable));
        CHECK(o->code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
        CHECK(o->bytes_size, offsetof(PyVarObject, ob_size));
        CHECK(o->bytes_data, offsetof(PyBytesObject, ob_sval));
        CHECK(o->unicode_length, offsetof(PyASCIIObject, length));
        CHECK(o->unicode_state, offsetof(PyASCIIObject, state));
        CHECK(o->unicode_ascii_data, sizeof(PyASCIIObject));
        CHECK(o->unicode_compact_data, sizeof(PyCompactUnicodeObject));
        /* The walk reads 72 bytes of a frame: every field must be inside. */
        if (offsetof(_PyInterpreterFrame, localsplus) > 72 || o->frame_owner >= 72) {
                fprintf(stderr, "frame fields beyond the 72 bytes the walk reads\n");
                failed = 1;
        }
        if (o->code_header_size < offsetof(PyCodeObject, co_linetable) + sizeof(void *))
                failed = 1;
        printf("offsets of CPython %d.%d: %s\n", PY_MAJOR_VERSION, PY_MINOR_VERSION,
               failed ? "WRONG" : "ok");
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
