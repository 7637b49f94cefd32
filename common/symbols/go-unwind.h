/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Unwind rows for Go functions from .gopclntab's pcsp tables: the
 * stack-pointer delta at every address of every Go function, which is
 * what Go's own traceback unwinds with (runtime/traceback.go). Present in
 * stripped Go binaries (which ship no .eh_frame), exact in frameless leaves
 * and in prologues and epilogues. The rows are those of bpf/unwind.h, the
 * same logical rows unwind-table.c builds from .eh_frame / .debug_frame,
 * and unwind_table_build_elf() merges both (see go_unwind_merge()).
 *
 * x86-64 only: CFA = rsp + delta + 8 (the return address at CFA - 8). The
 * caller's rbp is at CFA - 16 once the prologue saved it (recognized in the
 * code: see go-unwind.c), unchanged before and after. Functions Go's
 * traceback ends at (the TOPFRAME flag: goexit, mstart, rt0_go) are
 * CGPROF_CFA_END; functions that write SP in ways pcsp cannot tell (the
 * SPWRITE flag: systemstack, mcall, asmcgocall, time.now's vDSO call...)
 * are CGPROF_CFA_FP_STACK_SWITCH: they switch to the g0 stack, and rbp
 * still links back to the goroutine's frames, so the walker takes a
 * frame-pointer step there, allowed once a walk to land on another stack.
 *
 * Pure logic, hostile input expected: every read is bounded (gopclntab.c),
 * a function whose table is malformed gets a CGPROF_CFA_NONE row and is
 * counted in stats.n_bad_entries. */

#include <libelf.h>

#include "gopclntab.h"
#include "unwind-table.h"

/* The rows of every function of t. code: the file's executable bytes
 * (where prologues are recognized; a function outside them keeps its
 * caller's rbp throughout), may be NULL. -ENODATA when no function gave a
 * row, -E2BIG when they span more than 4 GiB or too many rows, -ENOMEM. */
int go_unwind_rows(const GoPclntab *t, const GoRegion *code, size_t n_code, UnwindTable **ret);

/* The Go rows of an ELF file: -ENODATA when it has no .gopclntab, -ENOTSUP
 * when it is not x86-64, and the errors of gopclntab_load() and
 * go_unwind_rows(). */
int go_unwind_build_elf(Elf *elf, UnwindTable **ret);

/* One table of both: the Go rows where they say something (not
 * CGPROF_CFA_NONE), the CFI rows elsewhere (C code of a cgo binary,
 * anything .gopclntab does not list). The source says .gopclntab alone when
 * no CFI row was kept. -E2BIG when together they span more than 4 GiB. */
int go_unwind_merge(const UnwindTable *go, const UnwindTable *cfi, UnwindTable **ret);
