/* SPDX-License-Identifier: (LGPL-2.1-or-later OR BSD-2-Clause) */
#pragma once

#include <linux/types.h>

/* The unwind table format, shared by the BPF walker (profile.bpf.c), the
 * agent that loads tables into maps, and the table builder
 * (common/symbols/unwind-table.c) that makes them from .eh_frame /
 * .debug_frame, and from .gopclntab's pcsp for Go functions
 * (common/symbols/go-unwind.c). Fixed-width fields only.
 *
 * A table describes one ELF file. Its rows are sorted by pc, which is an
 * offset from the table's base (the lowest address an FDE covers, an ELF
 * virtual address); a row holds from its pc up to the next row's pc. A row
 * says how to find, at those addresses,
 *  - the CFA (canonical frame address: the caller's stack pointer),
 *  - the caller's frame pointer (rbp on x86-64, x29 on arm64).
 * The return address is at CFA - 8 on x86-64 (the call pushed it), which
 * the builder checks for every row (a row whose return address is
 * elsewhere is CGPROF_CFA_UNSUPPORTED).
 *
 * arm64 would need one more rule: the return address is in the link
 * register (x30) until the prologue saves it at CFA + off; see
 * docs/unwinding.md. */

#define CGPROF_UNWIND_REG_SP 0 /* x86-64: rsp (DWARF 7); arm64: sp (31) */
#define CGPROF_UNWIND_REG_FP 1 /* x86-64: rbp (DWARF 6); arm64: x29 (29) */

/* How to find the CFA (bits 0-3 of a row's rule). */
enum {
        CGPROF_CFA_NONE =
                0, /* no FDE covers these addresses (a gap between functions, or past the last one) */
        CGPROF_CFA_SP = 1, /* CFA = sp + cfa_offset */
        CGPROF_CFA_FP = 2, /* CFA = fp + cfa_offset */
        /* x86-64 PLT stubs, the expression binutils emits for .plt:
         * CFA = rsp + 8 + ((rip & 15) >= cfa_offset ? 8 : 0) */
        CGPROF_CFA_PLT = 3,
        CGPROF_CFA_END = 4, /* the outermost frame: the return address is undefined (e.g. _start) */
        CGPROF_CFA_UNSUPPORTED = 5, /* an expression or register the walker does not evaluate */
        /* A signal trampoline (x86-64 __restore_rt: its CIE has the 'S'
         * augmentation): sp points at the struct ucontext the kernel saved,
         * which holds the interrupted rip, rsp and rbp (CGPROF_UCONTEXT_*).
         * The next frame's pc is the interrupted instruction itself, not a
         * return address. */
        CGPROF_CFA_SIGNAL = 6,
        /* A frame-pointer step ([fp] the caller's fp, [fp + 8] the return
         * address) that may land on another stack: Go's functions that
         * switch stacks (SPWRITE: systemstack, asmcgocall, the vDSO calls
         * of time.now), whose rbp still links to the stack they came from.
         * The walker takes one such step per walk without checking that
         * the stack grows. */
        CGPROF_CFA_FP_STACK_SWITCH = 7,
};

/* x86-64: offsets in the struct ucontext (uc_mcontext at 40, gregs[REG_RBP
 * = 10], [REG_RSP = 15], [REG_RIP = 16]) of the saved registers: the
 * offsets glibc's CFI for __restore_rt names (sysdeps/unix/sysv/linux/
 * x86_64/libc_sigaction.c, oRBP, oRSP, oRIP). */
#define CGPROF_UCONTEXT_RBP 120
#define CGPROF_UCONTEXT_RSP 160
#define CGPROF_UCONTEXT_RIP 168

/* Where the caller's frame pointer is (bits 4-7 of a row's rule). */
enum {
        CGPROF_FP_SAME = 0, /* unchanged: the caller's is the current value */
        CGPROF_FP_AT_CFA = 1, /* saved at CFA + 8 * fp_offset */
        CGPROF_FP_UNKNOWN = 2, /* not recoverable (e.g. an expression): the walk goes on without it */
};

#define CGPROF_UNWIND_RULE(cfa, fp) ((__u8) ((cfa) | ((fp) << 4)))
#define CGPROF_UNWIND_CFA(rule) ((rule) &0x0f)
#define CGPROF_UNWIND_FP(rule) ((rule) >> 4)

struct cgprof_unwind_row {
        __u32 pc; /* first address (offset from the table's base) this row covers */
        __u16 cfa_offset;
        __u8 rule; /* CGPROF_UNWIND_RULE(CGPROF_CFA_*, CGPROF_FP_*) */
        __s8 fp_offset; /* in units of 8 bytes, from the CFA */
};

/* ---- The compact form the walker reads (common/symbols/unwind-compact.c
 * makes it from the rows above) ----
 *
 * A table's address range (from its base) is cut into pages of 64 KiB. Each
 * page has its own sorted run of 4-byte cells: the low 16 bits of the pc
 * (the offset in the page) and the id of the rule in force from there. The
 * first cell of every page is at offset 0 (the rule in force across the
 * page boundary is repeated), so a lookup never leaves the page. Rule ids
 * index one table of distinct rules shared by every unwind table (an
 * interner: 65536 at most, never freed); id 0 is the NONE rule. */

#define CGPROF_UNWIND_PAGE_SHIFT 16
#define CGPROF_UNWIND_RULES_MAX 65536
#define CGPROF_UNWIND_RULE_NONE_ID 0

struct cgprof_unwind_cell {
        __u16 pc_lo; /* offset in the page */
        __u16 rule_id; /* in the rules map */
};

struct cgprof_unwind_rule {
        __u16 cfa_offset;
        __u8 rule; /* CGPROF_UNWIND_RULE(CGPROF_CFA_*, CGPROF_FP_*) */
        __s8 fp_offset;
};

/* BPF arrays round their values up to 8 bytes: the shards and the rules
 * map hold two of them per value (cell or rule i is half i & 1 of value
 * i >> 1), and read through mmap() they are plain arrays of 4-byte items. */
struct cgprof_unwind_rule_pair {
        struct cgprof_unwind_rule r[2];
};

/* Where a page's cells are: in the maps, shard first >> CGPROF_UNWIND_SHARD_BITS,
 * cell first & (2^CGPROF_UNWIND_SHARD_BITS - 1) of it; in the builder's
 * output, the index of its first cell. */
struct cgprof_unwind_page {
        __u32 first;
        __u32 n; /* cells (1 at least) */
};

/* Cells per shard at most (the shards' size: 2^18 cells, 1 MiB; smaller
 * when the whole budget is smaller). */
#define CGPROF_UNWIND_SHARD_BITS 18
