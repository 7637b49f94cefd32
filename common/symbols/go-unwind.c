/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unwind rows from .gopclntab's pcsp tables (see go-unwind.h).
 *
 * What the rows say, from Go's own code:
 *  - runtime/traceback.go: a frame's "fp" (our CFA) is sp + the pcsp value
 *    at its pc + the pointer size on x86 (the return address the call
 *    pushed), and the return address is at fp - 8. It stops at a TOPFRAME
 *    function (complete) and at an SPWRITE one (its pcsp no longer holds:
 *    it switched stacks; Go jumps with g.sched, m.vdsoSP, we follow rbp,
 *    which those functions leave linked to the stack they came from:
 *    asm_amd64.s "The original frame pointer is stored in BP").
 *  - cmd/internal/obj/x86/obj6.go: the prologue of a function with a frame
 *    saves the caller's rbp just below the return address, at CFA - 16. A
 *    function with no frame (a leaf with no locals: Go's frameless leaves)
 *    never touches rbp: pcsp is 0 throughout and rbp is the caller's. The
 *    prologue comes in two shapes:
 *      Go 1.7-1.20:  SUBQ $n, SP; MOVQ BP, n-8(SP); LEAQ n-8(SP), BP
 *      Go 1.21+:     PUSHQ BP; MOVQ SP, BP; SUBQ $n-8, SP
 *    In the older one, during the MOVQ (the one instruction after the SP
 *    adjustment) the slot at CFA - 16 is not written yet: rbp is still the
 *    caller's. The epilogues (MOVQ n-8(SP), BP; ADDQ $n, SP / ADDQ; POPQ
 *    BP) leave the slot intact until SP moves past it, when pcsp drops to 0
 *    and rbp is the caller's again.
 *    Assembly functions may push registers of their own (pcsp > 0 with no
 *    rbp saved): the prologue is recognized by its bytes at the address
 *    where pcsp first turns positive, and a function without one of the
 *    two shapes keeps its caller's rbp throughout.
 *
 * Function IDs are numbered differently by Go versions (alphabetically
 * since 1.18, by hand before): the TOPFRAME and SPWRITE flags (Go 1.17+)
 * decide, and a few runtime names for Go 1.16, which has no flags. */

#include <gelf.h>

#include "elf-util.h"
#include "go-unwind.h"
#include "log.h"

/* Code regions kept for recognizing prologues. */
#define GO_CODE_REGIONS_MAX 16U
/* pcsp steps read for one table, all functions together. Go's linker
 * shares identical tables between functions, so a hostile file could make
 * every function read the whole pctab: the budget bounds the work (a
 * 100 MB Go binary reads a few million). */
#define GO_PCSP_STEPS_MAX (UINT64_C(64) * 1024 * 1024)

typedef struct RowsBuilder {
        struct cgprof_unwind_row *rows;
        size_t n_rows, n_allocated, n_raw;
        uint64_t base;
        uint64_t steps_left; /* of GO_PCSP_STEPS_MAX */
} RowsBuilder;

/* Counts an iterator's steps against the budget: -E2BIG when spent. */
static int steps_spend(RowsBuilder *b, const GoPcValueIter *it) {
        if (it->steps > b->steps_left)
                return -E2BIG;
        b->steps_left -= it->steps;
        return 0;
}

/* Appends a row at pc (at or above the last row's: a row at the same pc
 * replaces it), merging it into the previous one when they are equal. */
static int rows_push(RowsBuilder *b, uint64_t pc, struct cgprof_unwind_row row) {
        if (pc < b->base || pc - b->base > UINT32_MAX)
                return -E2BIG;
        row.pc = (__u32) (pc - b->base);
        b->n_raw++;

        if (b->n_rows > 0 && b->rows[b->n_rows - 1].pc == row.pc)
                b->n_rows--; /* an empty range: the new row holds from here */
        return unwind_rows_append(&b->rows, &b->n_rows, &b->n_allocated, row);
}

/* Ends the rows at end with a CGPROF_CFA_NONE row, the table's last
 * (unwind-table.h); rows already ending in nothing (padding after the last
 * function) end where that starts. The table's end: *ret_end. */
static int rows_finish(RowsBuilder *b, uint64_t end, uint64_t *ret_end) {
        if (b->n_rows > 0 && CGPROF_UNWIND_CFA(b->rows[b->n_rows - 1].rule) == CGPROF_CFA_NONE) {
                *ret_end = b->base + b->rows[b->n_rows - 1].pc;
                return 0;
        }
        *ret_end = end;
        return rows_push(b, end, (struct cgprof_unwind_row){});
}

static struct cgprof_unwind_row rule_row(uint8_t cfa, uint8_t fp) {
        return (struct cgprof_unwind_row){ .rule = CGPROF_UNWIND_RULE(cfa, fp) };
}

/* The row of a run of pcsp value delta: CFA = rsp + delta + 8, rbp at
 * CFA - 16 when saved. */
static struct cgprof_unwind_row delta_row(int32_t delta, bool fp_saved) {
        struct cgprof_unwind_row row;

        if (delta < 0 || (int64_t) delta + 8 > UINT16_MAX)
                return rule_row(CGPROF_CFA_UNSUPPORTED, CGPROF_FP_SAME);
        fp_saved = fp_saved && delta >= 8;
        row = rule_row(CGPROF_CFA_SP, fp_saved ? CGPROF_FP_AT_CFA : CGPROF_FP_SAME);
        row.cfa_offset = (__u16) (delta + 8);
        row.fp_offset = fp_saved ? -2 : 0;
        return row;
}

/* The code bytes [vaddr, vaddr + size), NULL when not all in one region. */
static const uint8_t *code_at(const GoRegion *code, size_t n_code, uint64_t vaddr, size_t size) {
        for (size_t i = 0; i < n_code; i++) {
                const GoRegion *g = &code[i];

                if (vaddr >= g->vaddr && vaddr - g->vaddr <= g->size && size <= g->size - (vaddr - g->vaddr))
                        return (const uint8_t *) g->data + (vaddr - g->vaddr);
        }
        return NULL;
}

static int32_t le32s(const uint8_t *p) {
        return (int32_t) ((uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
                          (uint32_t) p[3] << 24);
}

/* Where the caller's rbp is saved at CFA - 16, for a function whose pcsp
 * first turns positive (value delta) at pc: from pc on (PUSHQ BP just
 * before it, Go 1.21+), after the MOVQ BP, delta-8(SP) at pc (Go 1.7-1.20),
 * or never (UINT64_MAX). */
static uint64_t fp_saved_from(const GoRegion *code, size_t n_code, uint64_t entry, uint64_t pc,
                              int32_t delta) {
        const uint8_t *c;

        /* 55: push %rbp; the pcsp run starts after it. */
        if (delta == 8 && pc > entry && (c = code_at(code, n_code, pc - 1, 1)) && c[0] == 0x55)
                return pc;
        /* 48 89 6c 24 d8: mov %rbp, d8(%rsp); 48 89 ac 24 d32: mov %rbp, d32(%rsp). */
        c = code_at(code, n_code, pc, 8);
        if (!c && !(c = code_at(code, n_code, pc, 5)))
                return UINT64_MAX;
        if (c[0] != 0x48 || c[1] != 0x89 || c[3] != 0x24)
                return UINT64_MAX;
        if (c[2] == 0x6c && (int32_t) (int8_t) c[4] == delta - 8)
                return pc + 5;
        if (c[2] == 0xac && code_at(code, n_code, pc, 8) && le32s(c + 4) == delta - 8)
                return pc + 8;
        return UINT64_MAX;
}

/* Whether [start, end) is int3 padding (0xcc), at most 64 bytes. */
static bool padding(const GoRegion *code, size_t n_code, uint64_t start, uint64_t end) {
        const uint8_t *c;

        if (end - start > 64 || !(c = code_at(code, n_code, start, (size_t) (end - start))))
                return false;
        for (size_t i = 0; i < end - start; i++)
                if (c[i] != 0xcc)
                        return false;
        return true;
}

/* Go 1.16 has no function flags: the functions its traceback stops at
 * (topofstack()), and those that switch stacks. */
static bool go116_top_frame(const char *name) {
        return streq(name, "runtime.goexit") || streq(name, "runtime.mstart") ||
               streq(name, "runtime.rt0_go") || streq(name, "runtime.mcall") ||
               streq(name, "runtime.morestack");
}

static bool go116_sp_write(const char *name) {
        return streq(name, "runtime.systemstack") || streq(name, "runtime.asmcgocall") ||
               streq(name, "runtime.cgocallback") || streq(name, "runtime.gogo");
}

/* The first run whose delta is positive: its start and delta; 0 if none. */
static int first_frame_run(RowsBuilder *b, const GoPclntab *t, const GoFuncInfo *fn, uint64_t *ret_pc,
                           int32_t *ret_delta) {
        GoPcValueIter it;
        uint64_t start, end;
        int32_t v;
        int r, k;

        r = gopclntab_pcsp_begin(t, fn, &it);
        if (r < 0)
                return r;
        while ((r = gopclntab_pcvalue_next(&it, &start, &end, &v)) > 0 && it.steps <= b->steps_left)
                if (v > 0) {
                        *ret_pc = start;
                        *ret_delta = v;
                        break;
                }
        k = steps_spend(b, &it);
        return k < 0 ? k : r;
}

/* The rows of one function, from its entry; the caller ends them. */
static int function_rows(RowsBuilder *b, const GoPclntab *t, const GoFuncInfo *fn, const GoRegion *code,
                         size_t n_code) {
        bool go116 = gopclntab_format(t) == GO_PCLNTAB_1_16 && fn->flag == 0;
        uint64_t saved_from = UINT64_MAX, start, end, pc = fn->entry, first_pc;
        GoPcValueIter it;
        int32_t v, first_delta;
        int r;

        if ((fn->flag & GO_FUNC_FLAG_TOPFRAME) || (go116 && go116_top_frame(fn->name)))
                return rows_push(b, fn->entry, rule_row(CGPROF_CFA_END, CGPROF_FP_SAME));
        if ((fn->flag & GO_FUNC_FLAG_SPWRITE) || (go116 && go116_sp_write(fn->name)))
                return rows_push(b, fn->entry, rule_row(CGPROF_CFA_FP_STACK_SWITCH, CGPROF_FP_SAME));

        r = first_frame_run(b, t, fn, &first_pc, &first_delta);
        if (r == -ENOENT) /* no pcsp: nothing known */
                return rows_push(b, fn->entry, (struct cgprof_unwind_row){});
        if (r < 0)
                return r;
        if (r > 0)
                saved_from = fp_saved_from(code, n_code, fn->entry, first_pc, first_delta);

        r = gopclntab_pcsp_begin(t, fn, &it);
        if (r < 0)
                return r;
        while ((r = gopclntab_pcvalue_next(&it, &start, &end, &v)) > 0 && it.steps <= b->steps_left) {
                /* The MOVQ BP of the old prologue: a run of its own. */
                if (start < saved_from && saved_from < end) {
                        r = rows_push(b, start, delta_row(v, false));
                        if (r < 0)
                                return r;
                        start = saved_from;
                }
                r = rows_push(b, start, delta_row(v, start >= saved_from));
                if (r < 0)
                        return r;
                pc = end;
        }
        if (r < 0)
                return r;
        r = steps_spend(b, &it);
        if (r < 0)
                return r;
        /* A table that ends before the function does: the rest unknown,
         * unless it is the linker's padding to the next function (int3,
         * never run), which the last row may cover: a row less per
         * function. */
        if (pc < fn->end && !padding(code, n_code, pc, fn->end))
                return rows_push(b, pc, (struct cgprof_unwind_row){});
        return 0;
}

/* The table takes the rows of b, up to end. */
static void table_take_rows(UnwindTable *t, RowsBuilder *b, uint64_t end) {
        t->base = b->base;
        t->end = end;
        t->n_rows = b->n_rows;
        t->stats.n_rows_raw = b->n_raw;
        t->rows = b->n_rows < b->n_allocated ? reallocarray(b->rows, b->n_rows, sizeof(*b->rows)) : b->rows;
        if (!t->rows)
                t->rows = b->rows; /* could not shrink: keep the larger block */
        b->rows = NULL;
        for (size_t i = 0; i < t->n_rows; i++)
                if (CGPROF_UNWIND_CFA(t->rows[i].rule) == CGPROF_CFA_UNSUPPORTED)
                        t->stats.n_unsupported_rows++;
}

static void rows_builder_done(RowsBuilder *b) {
        free(b->rows);
}

int go_unwind_rows(const GoPclntab *t, const GoRegion *code, size_t n_code, UnwindTable **ret) {
        _cleanup_(rows_builder_done) RowsBuilder b = { .steps_left = GO_PCSP_STEPS_MAX };
        _cleanup_(unwind_table_freep) UnwindTable *table = NULL;
        uint64_t prev_end = 0, end;
        bool any = false;
        int r;

        if (!t || !ret || (n_code > 0 && !code))
                return -EINVAL;
        table = calloc(1, sizeof(UnwindTable));
        if (!table)
                return -ENOMEM;
        table->source = UNWIND_SOURCE_GOPCLNTAB;

        for (size_t i = 0; i < gopclntab_count(t); i++) {
                size_t saved_rows = b.n_rows, saved_raw = b.n_raw;
                GoFuncInfo fn;

                if (gopclntab_func_info(t, i, &fn) < 0) {
                        table->stats.n_bad_entries++;
                        continue;
                }
                if (fn.entry == fn.end)
                        continue;
                if (any && fn.entry < prev_end) {
                        table->stats.n_bad_entries++; /* overlaps: not a table we can trust */
                        continue;
                }
                if (!any)
                        b.base = fn.entry;
                if (fn.end - b.base > UINT32_MAX)
                        return -E2BIG;
                if (any && prev_end < fn.entry) {
                        r = rows_push(&b, prev_end, (struct cgprof_unwind_row){});
                        if (r < 0)
                                return r;
                        saved_rows = b.n_rows;
                        saved_raw = b.n_raw;
                }

                r = function_rows(&b, t, &fn, code, n_code);
                if (r == -EBADMSG) {
                        /* A malformed pcsp: nothing known about the function. */
                        log_debug("Malformed pcsp table of Go function %s, skipping it.", fn.name);
                        table->stats.n_bad_entries++;
                        b.n_rows = saved_rows;
                        b.n_raw = saved_raw;
                        r = rows_push(&b, fn.entry, (struct cgprof_unwind_row){});
                }
                if (r < 0)
                        return r;
                table->stats.n_go_functions++;
                prev_end = fn.end;
                any = true;
        }
        if (!any)
                return table->stats.n_bad_entries > 0 ? -EBADMSG : -ENODATA;

        r = rows_finish(&b, prev_end, &end);
        if (r < 0)
                return r;
        if (b.n_rows < 2) /* nothing but nothing */
                return table->stats.n_bad_entries > 0 ? -EBADMSG : -ENODATA;
        table_take_rows(table, &b, end);
        *ret = TAKE_PTR(table);
        return 0;
}

/* The executable sections' bytes in the file image. */
static size_t code_regions(Elf *elf, GoRegion *regions, size_t max) {
        const char *image;
        size_t image_size, n = 0;

        image = elf_rawfile(elf, &image_size);
        if (!image)
                return 0;
        for (Elf_Scn *s = elf_nextscn(elf, NULL); s && n < max; s = elf_nextscn(elf, s)) {
                GElf_Shdr h;

                if (!gelf_getshdr(s, &h) || h.sh_type != SHT_PROGBITS || !(h.sh_flags & SHF_EXECINSTR) ||
                    h.sh_size == 0 || h.sh_offset > image_size || h.sh_size > image_size - h.sh_offset)
                        continue;
                regions[n++] =
                        (GoRegion){ .vaddr = h.sh_addr, .data = image + h.sh_offset, .size = h.sh_size };
        }
        return n;
}

int go_unwind_build_elf(Elf *elf, UnwindTable **ret) {
        _cleanup_(gopclntab_freep) GoPclntab *t = NULL;
        GoRegion code[GO_CODE_REGIONS_MAX];
        const char *ident;
        GElf_Ehdr ehdr;
        int r;

        if (!elf || !ret)
                return -EINVAL;
        if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr) || !(ident = elf_getident(elf, NULL)))
                return -ENOEXEC;
        if (ehdr.e_machine != EM_X86_64 || ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB)
                return -ENOTSUP;

        r = gopclntab_load_borrowed(elf, &t);
        if (r < 0)
                return r;
        return go_unwind_rows(t, code, code_regions(elf, code, ELEMENTSOF(code)), ret);
}

/* The next row boundary of t above vaddr (absolute), UINT64_MAX if none. */
static uint64_t next_boundary(const UnwindTable *t, size_t *i, uint64_t vaddr) {
        while (*i < t->n_rows && t->base + t->rows[*i].pc <= vaddr)
                (*i)++;
        return *i < t->n_rows ? t->base + t->rows[*i].pc : UINT64_MAX;
}

int go_unwind_merge(const UnwindTable *go, const UnwindTable *cfi, UnwindTable **ret) {
        _cleanup_(rows_builder_done) RowsBuilder b = {};
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        size_t gi = 0, ci = 0;
        uint64_t x, end;
        bool used_cfi = false;
        int r;

        if (!go || !cfi || !ret || go->n_rows == 0 || cfi->n_rows == 0)
                return -EINVAL;
        b.base = MIN(go->base, cfi->base);
        end = MAX(go->end, cfi->end);
        if (end - b.base > UINT32_MAX)
                return -E2BIG;
        t = calloc(1, sizeof(UnwindTable));
        if (!t)
                return -ENOMEM;

        /* Every boundary of either table, in order: the row there is Go's
         * where it says something, else the CFI's, else nothing. The last
         * one, at the end, is nothing. */
        for (x = b.base; x < end; x = MIN(next_boundary(go, &gi, x), next_boundary(cfi, &ci, x))) {
                const struct cgprof_unwind_row *g = unwind_table_lookup(go, x),
                                               *c = unwind_table_lookup(cfi, x), *row = NULL;

                if (g && CGPROF_UNWIND_CFA(g->rule) != CGPROF_CFA_NONE)
                        row = g;
                else if (c && CGPROF_UNWIND_CFA(c->rule) != CGPROF_CFA_NONE) {
                        row = c;
                        used_cfi = true;
                }
                r = rows_push(&b, x, row ? *row : (struct cgprof_unwind_row){});
                if (r < 0)
                        return r;
        }
        r = rows_finish(&b, end, &end);
        if (r < 0)
                return r;

        t->stats = cfi->stats;
        t->stats.n_bad_entries += go->stats.n_bad_entries;
        t->stats.n_go_functions = go->stats.n_go_functions;
        t->stats.n_unsupported_rows = 0;
        t->source = !used_cfi                                  ? UNWIND_SOURCE_GOPCLNTAB
                    : cfi->source == UNWIND_SOURCE_DEBUG_FRAME ? UNWIND_SOURCE_GOPCLNTAB_DEBUG_FRAME
                                                               : UNWIND_SOURCE_GOPCLNTAB_EH_FRAME;
        table_take_rows(t, &b, end);
        t->stats.n_rows_raw = go->stats.n_rows_raw + cfi->stats.n_rows_raw;
        *ret = TAKE_PTR(t);
        return 0;
}
