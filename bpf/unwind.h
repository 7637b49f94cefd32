/* SPDX-License-Identifier: (LGPL-2.1-or-later OR BSD-2-Clause) */
#pragma once

#include <linux/types.h>

/* The unwind table format, shared by the BPF walker (profile.bpf.c), the
 * agent that loads tables into maps, and the table builder
 * (common/symbols/unwind-table.c) that makes them from .eh_frame /
 * .debug_frame. Fixed-width fields only.
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
