/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/* What the profiler knows of CPython's insides, per version: finding the
 * interpreter in an ELF file (_PyRuntime, PyCode_Type, the version), the
 * structure offsets the frame walk (bpf/python.h) and the agent need, and
 * decoding what the agent reads from a process (code objects' line tables,
 * str objects). Pure: no process access here. */

typedef struct PythonOffsets {
        unsigned major, minor;
        /* The frame walk (copied into struct cgprof_python_proc). */
        uint16_t runtime_interp_head; /* _PyRuntimeState.interpreters.head */
        uint16_t interp_threads_head;
        uint16_t tstate_next, tstate_thread_id, tstate_cframe;
        uint16_t cframe_current_frame;
        uint16_t frame_code, frame_previous, frame_prev_instr, frame_is_entry, frame_owner;
        uint16_t code_adaptive;
        uint8_t owner_cstack;
        /* The agent's reads. */
        uint16_t object_type; /* PyObject.ob_type */
        uint16_t code_filename, code_name, code_qualname, code_linetable, code_firstlineno;
        uint16_t code_header_size; /* bytes of a code object read at once (covers the fields above) */
        uint16_t bytes_size, bytes_data; /* PyVarObject.ob_size, PyBytesObject.ob_sval */
        uint16_t unicode_length, unicode_state; /* PyASCIIObject.length, .state */
        uint16_t unicode_ascii_data,
                unicode_compact_data; /* sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject) */
} PythonOffsets;

/* The offsets of a version, NULL when there are none (not supported). */
const PythonOffsets *python_offsets_find(unsigned major, unsigned minor);
/* "3.11 3.12 ...": the versions with offsets (static string). */
const char *python_supported_versions(void);

typedef struct PythonElfInfo {
        uint64_t runtime_vaddr; /* _PyRuntime */
        uint64_t code_type_vaddr; /* PyCode_Type, 0: unknown */
        unsigned major, minor, micro; /* 0.0.0: unknown */
} PythonElfInfo;

/* Whether the ELF file is a CPython interpreter (the python executable or
 * libpython: it defines _PyRuntime in .dynsym or .symtab), and its version:
 * from Py_Version (3.11+, PY_VERSION_HEX in .rodata), else from the file's
 * name ("python3.10", "libpython3.9.so.1.0"). -ENOENT: not CPython. */
int python_elf_inspect(Elf *elf, const char *file_name, PythonElfInfo *ret);

/* The version from a file name: "python3.11", "libpython3.10d.so.1.0". */
int python_version_from_name(const char *name, unsigned *ret_major, unsigned *ret_minor);

/* The source line of instruction 'instr' (in code units) of a code object
 * with the given co_linetable (the 3.11+ location table) and co_firstlineno.
 * -ENOENT when the table has no line for it (*ret_line untouched). */
int python_code_line(const uint8_t *table, size_t size, int firstlineno, uint32_t instr, int *ret_line);

/* A str object's header (the first unicode_compact_data bytes of it): where
 * its characters are (offset from the object), how many, and their width
 * (1, 2, 4). -EOPNOTSUPP for a non-compact (legacy) string. */
typedef struct PythonStr {
        size_t length, data_offset;
        unsigned kind;
        bool ascii;
} PythonStr;
int python_str_parse(const PythonOffsets *o, const uint8_t *header, size_t size, PythonStr *ret);

/* Characters of 'kind' width to UTF-8 (malloc()ed, NUL-terminated);
 * invalid code points become U+FFFD. */
int python_str_to_utf8(const void *data, size_t length, unsigned kind, char **ret);
