/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Unwind tables for the BPF stack walker: the call frame information of one
 * ELF file (.eh_frame, or .debug_frame when the file has no .eh_frame, e.g.
 * a separate debug file or a build with -fno-asynchronous-unwind-tables)
 * turned into the sorted rows of bpf/unwind.h, one per address range where
 * the way to find the CFA and the caller's frame pointer changes.
 *
 * What the rows say beyond bpf/unwind.h: a CGPROF_CFA_END row (return
 * address undefined) carries no offsets and CGPROF_FP_SAME; a
 * CGPROF_CFA_UNSUPPORTED row carries no cfa_offset but keeps its frame
 * pointer rule; CGPROF_CFA_PLT keeps N of the binutils expression in
 * cfa_offset (11 in .plt, 9 in the lazy .plt of an IBT binary); a register
 * rule of DW_CFA_undefined for the frame pointer is CGPROF_FP_SAME, as is
 * no rule at all; NONE rows are all zero but their pc.
 *
 * Pure logic: reads the file through libelf, returns a table, logs at debug
 * level at most. Hostile input is expected (any file a process maps): every
 * read is bounded, a broken entry is skipped and counted. */

#include <libelf.h>
#include <linux/types.h>

#include "macro.h"

#include "../../bpf/unwind.h"

typedef enum UnwindSource {
        UNWIND_SOURCE_NONE,
        UNWIND_SOURCE_EH_FRAME,
        UNWIND_SOURCE_DEBUG_FRAME,
        UNWIND_SOURCE_GOPCLNTAB, /* Go functions only (go-unwind.h) */
        UNWIND_SOURCE_GOPCLNTAB_EH_FRAME, /* Go functions, and .eh_frame for the rest (cgo) */
        UNWIND_SOURCE_GOPCLNTAB_DEBUG_FRAME, /* Go functions, and .debug_frame for the rest */
} UnwindSource;

typedef struct UnwindTableStats {
        size_t n_cies, n_fdes; /* parsed and used (an FDE covering no address counts too) */
        /* CIE/FDE skipped: truncated, bad encoding, bad length, bad CIE
         * pointer, unknown opcode, overlapping an earlier FDE... */
        size_t n_bad_entries;
        /* rows of the table whose CFA rule the walker cannot evaluate (CGPROF_CFA_UNSUPPORTED) */
        size_t n_unsupported_rows;
        size_t n_rows_raw; /* one per address range of every FDE and gap, before merging equal neighbours */
        size_t n_go_functions; /* Go functions whose rows come from .gopclntab's pcsp */
} UnwindTableStats;

typedef struct UnwindTable {
        uint64_t base; /* ELF vaddr of row pc 0: the lowest address an FDE covers */
        uint64_t end; /* one past the last address covered; the last row is a CGPROF_CFA_NONE row there */
        struct cgprof_unwind_row *rows;
        size_t n_rows;
        UnwindSource source;
        UnwindTableStats stats;
} UnwindTable;

/* At most this many rows in one table (128 MiB of rows): -E2BIG beyond. */
#define UNWIND_TABLE_ROWS_MAX (16U * 1024U * 1024U)

/* Both return 0 and a table, or
 * (Go binaries: the rows of .gopclntab's pcsp for Go functions, merged
 * with .eh_frame's or .debug_frame's for the rest: go-unwind.h; a Go
 * binary without CFI, stripped, gets the Go rows alone)
 *   -ENOEXEC  not an ELF file,
 *   -ENOTSUP  an architecture (e_machine, class, byte order) without a register mapping (x86-64 only, for now),
 *   -ENODATA  neither .eh_frame nor .debug_frame (nor .gopclntab), or no FDE in them,
 *   -EBADMSG  a section so broken nothing usable came out of it,
 *   -E2BIG    the covered addresses span more than 4 GiB (row pc is 32 bits), or too many rows,
 *   -ENOMEM.
 * _fd reads the file (the fd is not kept). _elf takes an Elf* the caller keeps
 * (e.g. from elf_memory()); a compressed .debug_frame is decompressed in it
 * (elf_compress()), which changes nothing on disk. */
int unwind_table_build_fd(int fd, UnwindTable **ret);
int unwind_table_build_elf(Elf *elf, UnwindTable **ret);
UnwindTable *unwind_table_free(UnwindTable *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(UnwindTable *, unwind_table_free);

/* The row covering vaddr (an ELF virtual address of the file), or NULL when
 * vaddr is outside [base, end). A row whose rule is CGPROF_CFA_NONE means a
 * gap between FDEs. The same binary search the BPF walker does. */
const struct cgprof_unwind_row *unwind_table_lookup(const UnwindTable *t, uint64_t vaddr);

const char *unwind_source_to_string(UnwindSource s);

/* For the builders (.eh_frame/.debug_frame, .gopclntab): appends row to the
 * growing array (*rows, *n_rows of *n_allocated), or merges it into the last
 * row when both say the same. -E2BIG beyond UNWIND_TABLE_ROWS_MAX rows. */
int unwind_rows_append(struct cgprof_unwind_row **rows, size_t *n_rows, size_t *n_allocated,
                       struct cgprof_unwind_row row);
