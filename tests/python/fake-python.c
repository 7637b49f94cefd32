/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Linked into the workload (tests/workload.c) as "python3.99": a program
 * that looks like a CPython of a version the profiler has no offsets for.
 * It exports _PyRuntime and Py_Version (PY_VERSION_HEX of 3.99.0 final) in
 * .dynsym as python3 and libpython do; the agent must report it as an
 * unsupported version and still profile its native stacks. */

__attribute__((used, visibility("default"))) char _PyRuntime[4096];
__attribute__((used, visibility("default"))) const unsigned long Py_Version = 0x036300f0UL;
