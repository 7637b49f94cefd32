/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fixture for test-unwind-table: functions whose call frame information
 * covers what the unwind-table builder must handle, compared by the test
 * against readelf --debug-dump=frames-interp. Built three ways (see
 * tests/meson.build): -O2 -fomit-frame-pointer, -O2 with frame pointers,
 * and -fno-asynchronous-unwind-tables -g as a shared object without start
 * files, so that its only CFI is .debug_frame.
 *
 * - leaf, recursion, a variable-length array (the CFA moves to rbp without
 *   frame pointers), an over-aligned local (stack realignment: CFA in r10,
 *   then an expression), early returns (remember_state / restore_state),
 *   a frame larger than 64 KiB (an offset the row cannot hold), calls
 *   through the PLT;
 * - fx_asm_ops, hand-written CFI with the opcodes compilers seldom emit
 *   (.cfi_escape for the rest) and a "zPLRS" augmentation (personality,
 *   LSDA, signal frame). Its rows need not make sense, only match readelf;
 * - fx_restore_rt, a signal trampoline as glibc's x86-64 __restore_rt
 *   describes it: an 'S' CIE, the CFA and the registers in the ucontext at
 *   rsp, the FDE starting one byte (a nop) before the symbol.
 *
 * Running it (the executables) calls the C functions once and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

__asm__(".text\n"
        ".globl fx_asm_ops\n"
        ".type fx_asm_ops,@function\n"
        "fx_asm_ops:\n"
        ".cfi_startproc\n"
        ".cfi_personality 0x9b, fx_personality_ref\n"
        ".cfi_lsda 0x1b, fx_lsda\n"
        ".cfi_signal_frame\n"
        "push %rbp\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_rel_offset %rbp, 0\n"
        "mov %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "push %rbx\n"
        ".cfi_offset %rbx, -24\n"
        ".cfi_remember_state\n"
        "nop\n"
        ".cfi_escape 0x2e, 0x10\n" /* DW_CFA_GNU_args_size 16 */
        "nop\n"
        ".cfi_same_value %rbp\n"
        "nop\n"
        ".cfi_register %rbp, %rbx\n"
        "nop\n"
        ".cfi_undefined %rbp\n"
        "nop\n"
        ".cfi_val_offset %rbp, -16\n"
        "nop\n"
        ".cfi_escape 0x11, 0x06, 0x7e\n" /* DW_CFA_offset_extended_sf rbp, -2 * -8 */
        "nop\n"
        ".cfi_escape 0x2f, 0x06, 0x02\n" /* DW_CFA_GNU_negative_offset_extended rbp, -(2 * -8) */
        "nop\n"
        ".cfi_escape 0x05, 0x06, 0x04\n" /* DW_CFA_offset_extended rbp, 4 * -8 */
        "nop\n"
        ".cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00\n" /* DW_CFA_expression rbp, DW_OP_breg6 0 */
        "nop\n"
        ".cfi_escape 0x16, 0x06, 0x02, 0x76, 0x00\n" /* DW_CFA_val_expression rbp, DW_OP_breg6 0 */
        "nop\n"
        ".cfi_escape 0x14, 0x06, 0x03\n" /* DW_CFA_val_offset rbp, 3 * -8 */
        "nop\n"
        ".cfi_escape 0x15, 0x06, 0x7d\n" /* DW_CFA_val_offset_sf rbp, -3 * -8 */
        "nop\n"
        ".cfi_restore %rbp\n"
        "nop\n"
        ".cfi_escape 0x06, 0x06\n" /* DW_CFA_restore_extended rbp */
        "nop\n"
        ".cfi_escape 0x12, 0x07, 0x7e\n" /* DW_CFA_def_cfa_sf rsp, -2 * -8 */
        "nop\n"
        ".cfi_escape 0x13, 0x7d\n" /* DW_CFA_def_cfa_offset_sf -3 * -8 */
        "nop\n"
        ".cfi_escape 0x02, 0x01\n" /* DW_CFA_advance_loc1 1 */
        ".cfi_escape 0x03, 0x01, 0x00\n" /* DW_CFA_advance_loc2 1 */
        ".cfi_escape 0x04, 0x01, 0x00, 0x00, 0x00\n" /* DW_CFA_advance_loc4 1 */
        ".cfi_escape 0x1d, 0x01, 0, 0, 0, 0, 0, 0, 0\n" /* DW_CFA_MIPS_advance_loc8 1 */
        ".cfi_def_cfa %rsp, 70000\n" /* an offset beyond 16 bits */
        "nop\n"
        ".cfi_def_cfa %r12, 16\n" /* a register the walker does not have */
        "nop\n"
        ".cfi_escape 0x0f, 0x03, 0x77, 0x08, 0x06\n" /* DW_CFA_def_cfa_expression DW_OP_breg7 8; DW_OP_deref */
        "nop\n"
        ".cfi_def_cfa %rsp, 16\n"
        ".cfi_escape 0x11, 0x06, 0x7f\n" /* DW_CFA_offset_extended_sf rbp, -1 * -8: saved above the CFA */
        "nop\n"
        ".cfi_escape 0x11, 0x06, 0x00\n" /* rbp at CFA + 0 */
        "nop\n"
        ".cfi_offset %rip, -16\n" /* the return address elsewhere */
        "nop\n"
        ".cfi_restore_state\n"
        "nop\n"
        ".cfi_undefined %rip\n"
        "nop\n"
        ".cfi_restore %rip\n"
        "pop %rbx\n"
        "pop %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size fx_asm_ops, .-fx_asm_ops\n"
        /* A signal trampoline (never called: it would be rt_sigreturn). */
        ".cfi_startproc simple\n"
        ".cfi_signal_frame\n"
        ".cfi_escape 0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06\n" /* CFA: DW_OP_breg7 160; DW_OP_deref */
        ".cfi_escape 0x10, 0x06, 0x03, 0x77, 0xf8, 0x00\n" /* rbp: DW_OP_breg7 120 */
        ".cfi_escape 0x10, 0x10, 0x03, 0x77, 0xa8, 0x01\n" /* rip: DW_OP_breg7 168 */
        "nop\n"
        ".globl fx_restore_rt\n"
        ".type fx_restore_rt,@function\n"
        "fx_restore_rt:\n"
        "mov $15, %rax\n"
        "syscall\n"
        ".cfi_endproc\n"
        ".size fx_restore_rt, .-fx_restore_rt\n"
        /* A frame pointer saved further from the CFA than a row can say. */
        ".globl fx_asm_odd\n"
        ".type fx_asm_odd,@function\n"
        "fx_asm_odd:\n"
        ".cfi_startproc\n"
        "sub $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_escape 0x05, 0x06, 0xc8, 0x01\n" /* DW_CFA_offset_extended rbp, 200 * -8 */
        "nop\n"
        ".cfi_escape 0x10, 0x06, 0x02, 0x77, 0x04\n" /* DW_CFA_expression rbp, DW_OP_breg7 4 */
        "nop\n"
        ".cfi_escape 0x07, 0x10\n" /* DW_CFA_undefined rip: the outermost frame */
        "add $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size fx_asm_odd, .-fx_asm_odd\n"
        "fx_personality:\n"
        "ret\n"
        ".section .rodata\n"
        "fx_lsda: .quad 0\n"
        ".section .data.rel.ro,\"aw\"\n"
        ".p2align 3\n"
        "fx_personality_ref: .quad fx_personality\n"
        ".text\n");

static volatile unsigned long fx_sink;

static NOINLINE void sink(volatile void *p) {
        __asm__ volatile("" : : "r"(p) : "memory");
}

NOINLINE int fx_leaf(int x) {
        return x * 3 + 1;
}

NOINLINE int fx_recurse(int n) {
        if (n <= 0)
                return fx_leaf(n);
        return fx_recurse(n - 1) + n;
}

NOINLINE long fx_vla(int n) {
        volatile char buf[n];

        for (int i = 0; i < n; i++)
                buf[i] = (char) i;
        sink(buf);
        return buf[n / 2];
}

NOINLINE int fx_aligned(int x) {
        int a[16] __attribute__((aligned(64)));

        for (int i = 0; i < 16; i++)
                a[i] = x + i;
        sink(a);
        return a[3];
}

NOINLINE int fx_many_exits(int x, int y, int z) {
        unsigned long a = (unsigned long) x * 7, b = (unsigned long) y * 11, c = (unsigned long) z * 13;

        if (x > 100)
                return fx_leaf(x);
        fx_sink = a;
        if (y > 100)
                return (int) (a + (unsigned long) fx_leaf(y));
        fx_sink = b;
        if (z > 100)
                return (int) (a + b + (unsigned long) fx_leaf(z));
        fx_sink = c;
        return (int) (a + b + c + (unsigned long) fx_recurse(3));
}

NOINLINE int fx_big_frame(int x) {
        volatile char buf[100000];

        buf[x % sizeof(buf)] = 1;
        sink(buf);
        return buf[0];
}

NOINLINE int fx_calls(const char *s) {
        char copy[64];

        snprintf(copy, sizeof(copy), "%s-%d", s, fx_leaf(2));
        return (int) strlen(copy) + puts(copy);
}

int main(int argc, char *argv[]) {
        int r = 0;

        r += fx_recurse(5);
        r += (int) fx_vla(argc + 10);
        r += fx_aligned(argc);
        r += fx_many_exits(argc, 2, 3);
        r += fx_big_frame(argc);
        r += fx_calls(argv[0]);
        fx_sink = (unsigned long) r;
        return 0;
}
