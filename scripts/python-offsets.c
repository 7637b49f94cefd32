/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Compiled by scripts/python-offsets against one CPython's own headers
 * (-DPy_BUILD_CORE -I include/python3.X -I include/python3.X/internal):
 * prints "name value" for every offset and size the Python frame walk and
 * the agent use (common/symbols/python-offsets.h is its output). A field the
 * version does not have is not printed (the table says NO_OFFSET). */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>

#if PY_VERSION_HEX >= 0x030b0000
#include <internal/pycore_frame.h>
#endif
#if PY_VERSION_HEX >= 0x03090000
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#elif PY_VERSION_HEX >= 0x03080000
#include <internal/pycore_pystate.h>
#else
#include <internal/pystate.h> /* 3.7: _PyRuntimeState */
#endif
#if PY_VERSION_HEX < 0x030b0000
#include <frameobject.h>
#endif

#define P(name, value) printf("%s %zu\n", name, (size_t) (value))

int main(void) {
        printf("version %d.%d\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
        P("runtime_interp_head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX >= 0x030b0000
        P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
#else
        P("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
#endif
        P("tstate_next", offsetof(PyThreadState, next));
        P("tstate_thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030d0000
        /* 3.13: no _PyCFrame, the current frame is the thread state's. */
        P("cframe_current_frame", offsetof(PyThreadState, current_frame));
#elif PY_VERSION_HEX >= 0x030b0000
        P("tstate_cframe", offsetof(PyThreadState, cframe));
        P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
#else
        P("cframe_current_frame", offsetof(PyThreadState, frame));
#endif
#if PY_VERSION_HEX >= 0x030d0000
        P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
        P("frame_previous", offsetof(_PyInterpreterFrame, previous));
        P("frame_prev_instr", offsetof(_PyInterpreterFrame, instr_ptr));
        P("frame_owner", offsetof(_PyInterpreterFrame, owner));
        P("owner_cstack", FRAME_OWNED_BY_CSTACK);
        P("frame_size", offsetof(_PyInterpreterFrame, localsplus));
#elif PY_VERSION_HEX >= 0x030c0000
        P("frame_code", offsetof(_PyInterpreterFrame, f_code));
        P("frame_previous", offsetof(_PyInterpreterFrame, previous));
        P("frame_prev_instr", offsetof(_PyInterpreterFrame, prev_instr));
        P("frame_owner", offsetof(_PyInterpreterFrame, owner));
        P("owner_cstack", FRAME_OWNED_BY_CSTACK);
        P("frame_size", offsetof(_PyInterpreterFrame, localsplus));
#elif PY_VERSION_HEX >= 0x030b0000
        P("frame_code", offsetof(_PyInterpreterFrame, f_code));
        P("frame_previous", offsetof(_PyInterpreterFrame, previous));
        P("frame_prev_instr", offsetof(_PyInterpreterFrame, prev_instr));
        P("frame_is_entry", offsetof(_PyInterpreterFrame, is_entry));
        P("frame_owner", offsetof(_PyInterpreterFrame, owner));
        P("frame_size", offsetof(_PyInterpreterFrame, localsplus));
#else
        /* PyFrameObject: one per call, each run by its own evaluation loop
         * call. f_lasti counts bytes before 3.10, code units from 3.10. */
        P("frame_code", offsetof(PyFrameObject, f_code));
        P("frame_previous", offsetof(PyFrameObject, f_back));
        P("frame_lasti", offsetof(PyFrameObject, f_lasti));
#if PY_VERSION_HEX >= 0x030a0000
        P("frame_lasti_shift", 0); /* f_lasti in code units */
#else
        P("frame_lasti_shift", 1); /* f_lasti in bytes: / 2 for code units */
#endif
        P("frame_size", offsetof(PyFrameObject, f_lasti) + sizeof(int));
#endif
#if PY_VERSION_HEX >= 0x030b0000
        P("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
        P("code_qualname", offsetof(PyCodeObject, co_qualname));
        P("code_linetable", offsetof(PyCodeObject, co_linetable));
        P("code_header_size", offsetof(PyCodeObject, co_code_adaptive));
#elif PY_VERSION_HEX >= 0x030a0000
        P("code_qualname", offsetof(PyCodeObject, co_name));
        P("code_linetable", offsetof(PyCodeObject, co_linetable));
        P("code_header_size", sizeof(PyCodeObject));
#else
        P("code_qualname", offsetof(PyCodeObject, co_name));
        P("code_linetable", offsetof(PyCodeObject, co_lnotab));
        P("code_header_size", sizeof(PyCodeObject));
#endif
#if PY_VERSION_HEX >= 0x030b0000
        P("linetable_format", 3); /* PYTHON_LINETABLE_LOCATIONS */
#elif PY_VERSION_HEX >= 0x030a0000
        P("linetable_format", 2); /* PYTHON_LINETABLE_310 */
#else
        P("linetable_format", 1); /* PYTHON_LINETABLE_LNOTAB */
#endif
        P("object_type", offsetof(PyObject, ob_type));
        P("code_filename", offsetof(PyCodeObject, co_filename));
        P("code_name", offsetof(PyCodeObject, co_name));
        P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
        P("bytes_size", offsetof(PyVarObject, ob_size));
        P("bytes_data", offsetof(PyBytesObject, ob_sval));
        P("unicode_length", offsetof(PyASCIIObject, length));
        P("unicode_state", offsetof(PyASCIIObject, state));
        P("unicode_ascii_data", sizeof(PyASCIIObject));
        P("unicode_compact_data", sizeof(PyCompactUnicodeObject));
#if PY_VERSION_HEX >= 0x030d0000
        /* Where the walk's offsets are in _PyRuntime.debug_offsets (the
         * struct's own layout changes between minor versions). */
        P("dbg_version", offsetof(_Py_DebugOffsets, version));
        P("dbg_runtime_interp_head", offsetof(_Py_DebugOffsets, runtime_state.interpreters_head));
        P("dbg_interp_threads_head", offsetof(_Py_DebugOffsets, interpreter_state.threads_head));
        P("dbg_tstate_next", offsetof(_Py_DebugOffsets, thread_state.next));
        P("dbg_tstate_thread_id", offsetof(_Py_DebugOffsets, thread_state.thread_id));
        P("dbg_tstate_current_frame", offsetof(_Py_DebugOffsets, thread_state.current_frame));
        P("dbg_frame_previous", offsetof(_Py_DebugOffsets, interpreter_frame.previous));
        P("dbg_frame_executable", offsetof(_Py_DebugOffsets, interpreter_frame.executable));
        P("dbg_frame_instr_ptr", offsetof(_Py_DebugOffsets, interpreter_frame.instr_ptr));
        P("dbg_frame_localsplus", offsetof(_Py_DebugOffsets, interpreter_frame.localsplus));
        P("dbg_frame_owner", offsetof(_Py_DebugOffsets, interpreter_frame.owner));
        P("dbg_code_filename", offsetof(_Py_DebugOffsets, code_object.filename));
        P("dbg_code_name", offsetof(_Py_DebugOffsets, code_object.name));
        P("dbg_code_qualname", offsetof(_Py_DebugOffsets, code_object.qualname));
        P("dbg_code_linetable", offsetof(_Py_DebugOffsets, code_object.linetable));
        P("dbg_code_firstlineno", offsetof(_Py_DebugOffsets, code_object.firstlineno));
        P("dbg_code_adaptive", offsetof(_Py_DebugOffsets, code_object.co_code_adaptive));
        P("dbg_object_type", offsetof(_Py_DebugOffsets, pyobject.ob_type));
        P("dbg_bytes_size", offsetof(_Py_DebugOffsets, bytes_object.ob_size));
        P("dbg_bytes_data", offsetof(_Py_DebugOffsets, bytes_object.ob_sval));
        P("dbg_unicode_length", offsetof(_Py_DebugOffsets, unicode_object.length));
        P("dbg_unicode_state", offsetof(_Py_DebugOffsets, unicode_object.state));
        P("dbg_unicode_ascii_data", offsetof(_Py_DebugOffsets, unicode_object.asciiobject_size));
        /* Each section starts with the size of its structure in this
         * interpreter: a field read must be inside it. */
        P("dbg_runtime_size", offsetof(_Py_DebugOffsets, runtime_state.size));
        P("dbg_interp_size", offsetof(_Py_DebugOffsets, interpreter_state.size));
        P("dbg_tstate_size", offsetof(_Py_DebugOffsets, thread_state.size));
        P("dbg_frame_size", offsetof(_Py_DebugOffsets, interpreter_frame.size));
        P("dbg_code_size", offsetof(_Py_DebugOffsets, code_object.size));
        P("dbg_object_size", offsetof(_Py_DebugOffsets, pyobject.size));
        P("dbg_bytes_object_size", offsetof(_Py_DebugOffsets, bytes_object.size));
        P("dbg_unicode_size", offsetof(_Py_DebugOffsets, unicode_object.size));
        P("dbg_size", sizeof(_Py_DebugOffsets));
#endif
        return 0;
}
