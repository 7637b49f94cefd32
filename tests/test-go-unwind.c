/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unwind rows from .gopclntab's pcsp (common/symbols/go-unwind.c) against
 * the truth of the Go toolchain: the Go test workload (tests/go/, built by
 * meson with the installed Go) stripped and unstripped. Its frameless
 * leaves (main.leafAlpha...) must be CFA = rsp + 8 with rbp unchanged at
 * every address; main.main, which has a frame, must follow the prologue
 * and epilogue "go tool objdump" shows, instruction by instruction; Go's
 * outermost frames end the walk. And the merge with CFI rows, on tables
 * made here. */
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <unistd.h>

#include "elf-util.h"
#include "go-unwind.h"
#include "gopclntab.h"
#include "tests.h"
#include "unwind-table.h"

static const char *fixture(const char *var) {
        const char *p = getenv(var);

        if (!p || access(p, R_OK) < 0)
                TEST_SKIP_PREREQ("%s not built (no Go toolchain: golang-go)", var);
        return p;
}

static UnwindTable *build(const char *path) {
        UnwindTable *t = NULL;
        int fd;

        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(unwind_table_build_fd(fd, &t));
        close(fd);
        return t;
}

typedef struct Loaded {
        int fd;
        Elf *elf;
        GoPclntab *t;
} Loaded;

static void load(const char *path, Loaded *ret) {
        ret->fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(ret->fd >= 0);
        ASSERT_OK(elf_open_fd(ret->fd, &ret->elf));
        ASSERT_OK(gopclntab_load(ret->elf, ret->fd, &ret->t));
}

static void unload(Loaded *l) {
        gopclntab_free(l->t);
        elf_end(l->elf);
        close(l->fd);
}

static void function_info(const GoPclntab *t, const char *name, GoFuncInfo *ret) {
        for (size_t i = 0; i < gopclntab_count(t); i++)
                if (gopclntab_func_info(t, i, ret) >= 0 && streq(ret->name, name))
                        return;
        ASSERT_TRUE(!"no such function");
}

static void assert_row(const UnwindTable *t, uint64_t pc, uint8_t cfa, uint16_t cfa_offset, uint8_t fp,
                       int8_t fp_offset) {
        const struct cgprof_unwind_row *r = unwind_table_lookup(t, pc);

        ASSERT_NOT_NULL(r);
        if (CGPROF_UNWIND_CFA(r->rule) != cfa || r->cfa_offset != cfa_offset ||
            CGPROF_UNWIND_FP(r->rule) != fp || r->fp_offset != fp_offset)
                fprintf(stderr,
                        "at 0x%" PRIx64 ": cfa rule %u + %u, fp rule %u at %d; want %u + %u, %u at %d\n", pc,
                        CGPROF_UNWIND_CFA(r->rule), r->cfa_offset, CGPROF_UNWIND_FP(r->rule), r->fp_offset,
                        cfa, cfa_offset, fp, fp_offset);
        ASSERT_EQ(CGPROF_UNWIND_CFA(r->rule), cfa);
        ASSERT_EQ(r->cfa_offset, cfa_offset);
        ASSERT_EQ(CGPROF_UNWIND_FP(r->rule), fp);
        ASSERT_EQ(r->fp_offset, fp_offset);
}

/* The frameless leaves: pcsp is one run of 0, and every address is
 * CFA = rsp + 8, rbp unchanged. */
static void check_leaves(const char *path) {
        _cleanup_(unwind_table_freep) UnwindTable *t = build(path);
        static const char *const leaves[] = { "main.leafAlpha", "main.leafBeta", "main.leafGamma" };
        Loaded l;

        load(path, &l);
        for (size_t k = 0; k < ELEMENTSOF(leaves); k++) {
                GoPcValueIter it;
                uint64_t start, end;
                GoFuncInfo fn;
                int32_t v;

                function_info(l.t, leaves[k], &fn);
                ASSERT_OK(gopclntab_pcsp_begin(l.t, &fn, &it));
                ASSERT_EQ(gopclntab_pcvalue_next(&it, &start, &end, &v), 1);
                ASSERT_EQ(start, fn.entry);
                ASSERT_TRUE(end <= fn.end && end + 32 > fn.end);
                ASSERT_EQ(v, 0);
                ASSERT_EQ(gopclntab_pcvalue_next(&it, &start, &end, &v), 0);
                for (uint64_t pc = fn.entry; pc < end; pc++)
                        assert_row(t, pc, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
                /* The padding to the next function (int3), which pcsp does
                 * not cover, never runs: the last row covers it. */
                for (uint64_t pc = end; pc < fn.end; pc++)
                        assert_row(t, pc, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        }
        unload(&l);
}

TEST(leaves_stripped) {
        check_leaves(fixture("CGPROF_GO_WORKLOAD_STRIPPED"));
}

TEST(leaves_unstripped) {
        check_leaves(fixture("CGPROF_GO_WORKLOAD"));
}

/* One instruction of "go tool objdump". */
typedef struct Insn {
        uint64_t pc;
        size_t size;
        char text[96];
} Insn;

/* main.main's instructions, from go tool objdump. */
static size_t objdump(const char *go, const char *path, const char *function, Insn *insns, size_t max) {
        _cleanup_free_ char *cmd = NULL;
        char line[512];
        size_t n = 0;
        FILE *p;

        ASSERT_TRUE(asprintf(&cmd, "'%s' tool objdump -s '^%s$' '%s'", go, function, path) > 0);
        p = popen(cmd, "re");
        ASSERT_NOT_NULL(p);
        /* "  main.go:104\t\t0x48df2a\t\t4883ec70\t\tSUBQ $0x70, SP\t\t\t" */
        while (fgets(line, sizeof(line), p) && n < max) {
                char hex[64], *text, *e;
                unsigned long long pc;

                if (sscanf(line, " %*s 0x%llx %63s", &pc, hex) != 2)
                        continue;
                text = strstr(line, hex);
                text += strlen(hex);
                text += strspn(text, " \t");
                e = text + strcspn(text, "\t\n");
                *e = 0;
                insns[n].pc = pc;
                insns[n].size = strlen(hex) / 2;
                snprintf(insns[n].text, sizeof(insns[n].text), "%s", text);
                n++;
        }
        ASSERT_EQ(pclose(p), 0);
        return n;
}

/* main.main, which has a frame (Go 1.7-1.20: SUBQ $n, SP; MOVQ BP,
 * n-8(SP); LEAQ n-8(SP), BP; ... MOVQ n-8(SP), BP; ADDQ $n, SP; RET. Go
 * 1.21+: PUSHQ BP; MOVQ SP, BP; SUBQ $n-8, SP; ... ADDQ $n-8, SP; POPQ BP;
 * RET), row by row against its code. */
static void check_main(const char *path) {
        _cleanup_(unwind_table_freep) UnwindTable *t = build(path);
        const char *go = fixture("CGPROF_GO"), *unstripped = fixture("CGPROF_GO_WORKLOAD");
        Insn insns[512];
        /* go tool objdump wants .symtab: the unstripped build's code, the
         * same as the stripped one's (-s -w drops symbols, not code). */
        size_t n = objdump(go, unstripped, "main.main", insns, ELEMENTSOF(insns)), rets = 0;
        GoFuncInfo fn;
        Loaded l;
        uint64_t frame = 0; /* the bytes pushed once the prologue is done */
        bool saved = false, seen_prologue = false;
        uint64_t pushed = 0, morestack = UINT64_MAX;

        ASSERT_TRUE(n > 10);
        load(path, &l);
        function_info(l.t, "main.main", &fn);
        ASSERT_EQ(fn.entry, insns[0].pc);
        ASSERT_TRUE(fn.end >= insns[n - 1].pc + insns[n - 1].size);
        unload(&l);
        /* Walk the code in order, tracking the pushed bytes and whether rbp
         * is saved, as the instructions say. The code after a RET is a
         * branch with the whole frame (or the morestack call at the end,
         * with none, which comes after the last RET). */
        for (size_t i = 0; i < n; i++) {
                const Insn *in = &insns[i];
                unsigned long long imm;

                /* The stack check's call of morestack, at the end, before
                 * the prologue in effect: nothing pushed. */
                if (in->pc >= morestack) {
                        assert_row(t, in->pc, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
                        continue;
                }

                if (pushed == 0)
                        assert_row(t, in->pc, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
                else
                        assert_row(t, in->pc, CGPROF_CFA_SP, (uint16_t) (pushed + 8),
                                   saved ? CGPROF_FP_AT_CFA : CGPROF_FP_SAME, saved ? -2 : 0);

                if (sscanf(in->text, "SUBQ $0x%llx, SP", &imm) == 1) {
                        pushed += imm;
                        if (!seen_prologue)
                                frame = pushed;
                        seen_prologue = true;
                } else if (sscanf(in->text, "ADDQ $0x%llx, SP", &imm) == 1) {
                        pushed -= imm;
                        if (pushed == 0)
                                saved = false;
                } else if (streq(in->text, "PUSHQ BP")) {
                        pushed += 8;
                        saved = true;
                } else if (streq(in->text, "POPQ BP")) {
                        pushed -= 8;
                        saved = false;
                } else if ((strncmp(in->text, "MOVQ BP, 0x", strlen("MOVQ BP, 0x")) == 0)) {
                        saved = true;
                } else if (streq(in->text, "RET")) {
                        rets++;
                        /* A branch after the RET has the whole frame. */
                        pushed = frame;
                        saved = true;
                } else if (!seen_prologue && sscanf(in->text, "JBE 0x%llx", &imm) == 1)
                        morestack = imm;
        }
        ASSERT_TRUE(seen_prologue);
        ASSERT_TRUE(frame >= 16);
        ASSERT_TRUE(rets >= 1);
}

TEST(main_stripped) {
        check_main(fixture("CGPROF_GO_WORKLOAD_STRIPPED"));
}

TEST(main_unstripped) {
        check_main(fixture("CGPROF_GO_WORKLOAD"));
}

/* The source, the outermost frames, the functions that switch stacks. */
TEST(special) {
        const char *paths[] = { fixture("CGPROF_GO_WORKLOAD_STRIPPED"), fixture("CGPROF_GO_WORKLOAD") };

        for (size_t k = 0; k < ELEMENTSOF(paths); k++) {
                _cleanup_(unwind_table_freep) UnwindTable *t = build(paths[k]);
                GoFuncInfo fn;
                Loaded l;

                /* Pure Go: no CFI row left (the unstripped one's
                 * .debug_frame describes Go functions only). */
                ASSERT_STREQ(unwind_source_to_string(t->source), ".gopclntab");
                ASSERT_EQ(t->stats.n_bad_entries, 0);
                load(paths[k], &l);
                ASSERT_EQ(t->stats.n_go_functions, gopclntab_count(l.t));
                function_info(l.t, "runtime.goexit", &fn);
                assert_row(t, fn.entry, CGPROF_CFA_END, 0, CGPROF_FP_SAME, 0);
                assert_row(t, fn.end - 1, CGPROF_CFA_END, 0, CGPROF_FP_SAME, 0);
                ASSERT_TRUE(fn.flag & GO_FUNC_FLAG_TOPFRAME);
                function_info(l.t, "runtime.systemstack", &fn);
                ASSERT_TRUE(fn.flag & GO_FUNC_FLAG_SPWRITE);
                assert_row(t, fn.entry, CGPROF_CFA_FP_STACK_SWITCH, 0, CGPROF_FP_SAME, 0);
                function_info(l.t, "time.now", &fn); /* the vDSO call on g0's stack */
                ASSERT_TRUE(fn.flag & GO_FUNC_FLAG_SPWRITE);
                assert_row(t, fn.entry, CGPROF_CFA_FP_STACK_SWITCH, 0, CGPROF_FP_SAME, 0);
                /* After the last function: nothing. */
                ASSERT_OK(gopclntab_function(l.t, gopclntab_count(l.t) - 1, NULL, &fn.end, NULL));
                ASSERT_EQ(t->end, fn.end);
                ASSERT_NULL(unwind_table_lookup(t, fn.end));
                unload(&l);
        }
}

/* A cgo binary: Go rows for Go functions, .eh_frame's for its C code
 * (outside the Go functions' range), asmcgocall's stack switch. */
TEST(cgo) {
        const char *path = fixture("CGPROF_GO_CGO_WORKLOAD");
        _cleanup_(unwind_table_freep) UnwindTable *t = build(path);
        uint64_t lo, hi;
        size_t c_rows = 0;
        GoFuncInfo fn;
        Loaded l;

        ASSERT_STREQ(unwind_source_to_string(t->source), ".gopclntab+.eh_frame");
        ASSERT_TRUE(t->stats.n_fdes > 0);
        load(path, &l);
        ASSERT_EQ(t->stats.n_go_functions, gopclntab_count(l.t));
        ASSERT_OK(gopclntab_function(l.t, 0, &lo, NULL, NULL));
        ASSERT_OK(gopclntab_function(l.t, gopclntab_count(l.t) - 1, NULL, &hi, NULL));
        for (size_t i = 0; i < t->n_rows; i++) {
                uint64_t pc = t->base + t->rows[i].pc;

                if ((pc < lo || pc >= hi) && CGPROF_UNWIND_CFA(t->rows[i].rule) != CGPROF_CFA_NONE)
                        c_rows++;
        }
        ASSERT_TRUE(c_rows > 0);
        function_info(l.t, "runtime.asmcgocall", &fn);
        assert_row(t, fn.entry, CGPROF_CFA_FP_STACK_SWITCH, 0, CGPROF_FP_SAME, 0);
        function_info(l.t, "main.goLeaf", &fn);
        assert_row(t, fn.entry, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        unload(&l);
}

static UnwindTable *table(uint64_t base, const struct cgprof_unwind_row *rows, size_t n,
                          UnwindSource source) {
        UnwindTable *t = calloc(1, sizeof(UnwindTable));

        ASSERT_NOT_NULL(t);
        t->base = base;
        t->end = base + rows[n - 1].pc;
        t->rows = malloc(n * sizeof(*rows));
        ASSERT_NOT_NULL(t->rows);
        memcpy(t->rows, rows, n * sizeof(*rows));
        t->n_rows = n;
        t->source = source;
        return t;
}

#define ROW(p, cfa, off, fp, fpo) \
        { .pc = (p), .cfa_offset = (off), .rule = CGPROF_UNWIND_RULE(cfa, fp), .fp_offset = (fpo) }

/* Go rows win where they say something; CFI rows fill the rest. */
TEST(merge) {
        /* Go functions at 0x1000-0x1100 and 0x1200-0x1300. */
        const struct cgprof_unwind_row go_rows[] = {
                ROW(0x000, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0),
                ROW(0x010, CGPROF_CFA_SP, 40, CGPROF_FP_AT_CFA, -2),
                ROW(0x100, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0),
                ROW(0x200, CGPROF_CFA_END, 0, CGPROF_FP_SAME, 0),
                ROW(0x300, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0),
        };
        /* C code at 0x800-0x900, 0x1100-0x1200 (between), 0x1300-0x1400;
         * and a .debug_frame-like FDE over the first Go function. */
        const struct cgprof_unwind_row cfi_rows[] = {
                ROW(0x000, CGPROF_CFA_SP, 16, CGPROF_FP_AT_CFA, -2),
                ROW(0x100, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0),
                ROW(0x800, CGPROF_CFA_SP, 24, CGPROF_FP_SAME, 0),
                ROW(0x900, CGPROF_CFA_FP, 16, CGPROF_FP_AT_CFA, -2),
                ROW(0xa00, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0),
                ROW(0xb00, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0),
                ROW(0xc00, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0),
        };
        _cleanup_(unwind_table_freep) UnwindTable *go =
                table(0x1000, go_rows, ELEMENTSOF(go_rows), UNWIND_SOURCE_GOPCLNTAB);
        _cleanup_(unwind_table_freep) UnwindTable *cfi =
                table(0x800, cfi_rows, ELEMENTSOF(cfi_rows), UNWIND_SOURCE_EH_FRAME);
        _cleanup_(unwind_table_freep) UnwindTable *m = NULL, *alone = NULL;

        ASSERT_OK(go_unwind_merge(go, cfi, &m));
        ASSERT_EQ(m->source, UNWIND_SOURCE_GOPCLNTAB_EH_FRAME);
        ASSERT_STREQ(unwind_source_to_string(m->source), ".gopclntab+.eh_frame");
        ASSERT_EQ(m->base, 0x800u);
        ASSERT_EQ(m->end, 0x1400u);
        assert_row(m, 0x800, CGPROF_CFA_SP, 16, CGPROF_FP_AT_CFA, -2);
        ASSERT_EQ(CGPROF_UNWIND_CFA(unwind_table_lookup(m, 0x900)->rule), CGPROF_CFA_NONE);
        assert_row(m, 0x1000, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0); /* Go's, not the FDE's */
        assert_row(m, 0x100f, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        assert_row(m, 0x1010, CGPROF_CFA_SP, 40, CGPROF_FP_AT_CFA, -2);
        assert_row(m, 0x10ff, CGPROF_CFA_SP, 40, CGPROF_FP_AT_CFA, -2);
        assert_row(m, 0x1100, CGPROF_CFA_FP, 16, CGPROF_FP_AT_CFA, -2); /* C between Go functions */
        assert_row(m, 0x1200, CGPROF_CFA_END, 0, CGPROF_FP_SAME, 0);
        assert_row(m, 0x1300, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        ASSERT_NULL(unwind_table_lookup(m, 0x1400));
        for (size_t i = 1; i < m->n_rows; i++) {
                ASSERT_TRUE(m->rows[i - 1].pc < m->rows[i].pc);
                ASSERT_FALSE(m->rows[i - 1].rule == m->rows[i].rule &&
                             m->rows[i - 1].cfa_offset == m->rows[i].cfa_offset &&
                             m->rows[i - 1].fp_offset == m->rows[i].fp_offset);
        }

        /* CFI only over Go functions: .gopclntab alone. */
        const struct cgprof_unwind_row dbg_rows[] = {
                ROW(0x000, CGPROF_CFA_SP, 16, CGPROF_FP_SAME, 0),
                ROW(0x100, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0),
        };
        _cleanup_(unwind_table_freep) UnwindTable *dbg =
                table(0x1000, dbg_rows, ELEMENTSOF(dbg_rows), UNWIND_SOURCE_DEBUG_FRAME);
        ASSERT_OK(go_unwind_merge(go, dbg, &alone));
        ASSERT_EQ(alone->source, UNWIND_SOURCE_GOPCLNTAB);
        ASSERT_EQ(alone->n_rows, go->n_rows);
        ASSERT_TRUE(memcmp(alone->rows, go->rows, go->n_rows * sizeof(*go->rows)) == 0);
}

/* A table made of one function, its pcsp written here. */
TEST(pcsp_malformed) {
        /* Go 1.18 layout, 8-byte pointers: header, then each part. */
        uint8_t tab[512] = {};
        const size_t hdr = 8 + 8 * 8, funcname = hdr, cu = funcname + 16, file = cu + 4, pctab = file + 8,
                     functab = pctab + 32;
        GoFuncInfo fn;
        GoPclntab *t = NULL;
        GoPcValueIter it;
        uint64_t s, e;
        int32_t v;

        tab[0] = 0xf0, tab[1] = 0xff, tab[2] = 0xff, tab[3] = 0xff;
        tab[6] = 1, tab[7] = 8;
        tab[8] = 1; /* nfunc */
        tab[16] = 1; /* nfiles */
        tab[24 + 1] = 0x10; /* textStart 0x1000 */
        tab[32] = (uint8_t) funcname; /* funcnameOffset */
        tab[40] = (uint8_t) cu; /* cuOffset */
        tab[48] = (uint8_t) file; /* filetabOffset */
        tab[56] = (uint8_t) pctab; /* pctabOffset */
        tab[64] = (uint8_t) functab; /* pclnOffset */
        memcpy(tab + funcname, "\0main.f", 8);
        /* pcsp at pctab + 1: +1 for 4 bytes (0), +16 for 8 (16), -16 for 4 (0), end. */
        const uint8_t pcsp[] = { 2, 4, 32, 8, 31, 4, 0 };
        memcpy(tab + pctab + 1, pcsp, sizeof(pcsp));
        /* functab: {0, funcoff}, end 16; _func at functab + 16. */
        const size_t func = 16;
        tab[functab + 4] = (uint8_t) func;
        tab[functab + 8] = 16;
        tab[functab + func + 4] = 1; /* nameOff */
        tab[functab + func + 16] = 1; /* pcsp */

        ASSERT_OK(gopclntab_new(&(GoPclntabImage){ .pclntab = tab, .pclntab_size = sizeof(tab) }, &t));
        ASSERT_OK(gopclntab_func_info(t, 0, &fn));
        ASSERT_STREQ(fn.name, "main.f");
        ASSERT_EQ(fn.entry, 0x1000u);
        ASSERT_EQ(fn.end, 0x1010u);
        ASSERT_OK(gopclntab_pcsp_begin(t, &fn, &it));
        ASSERT_EQ(gopclntab_pcvalue_next(&it, &s, &e, &v), 1);
        ASSERT_TRUE(s == 0x1000 && e == 0x1004 && v == 0);
        ASSERT_EQ(gopclntab_pcvalue_next(&it, &s, &e, &v), 1);
        ASSERT_TRUE(s == 0x1004 && e == 0x100c && v == 16);
        ASSERT_EQ(gopclntab_pcvalue_next(&it, &s, &e, &v), 1);
        ASSERT_TRUE(s == 0x100c && e == 0x1010 && v == 0);
        ASSERT_EQ(gopclntab_pcvalue_next(&it, &s, &e, &v), 0);

        /* The rows: no code given, so no rbp saved. */
        _cleanup_(unwind_table_freep) UnwindTable *rows = NULL;
        ASSERT_OK(go_unwind_rows(t, NULL, 0, &rows));
        assert_row(rows, 0x1000, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        assert_row(rows, 0x1004, CGPROF_CFA_SP, 24, CGPROF_FP_SAME, 0);
        assert_row(rows, 0x100c, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        ASSERT_NULL(unwind_table_lookup(rows, 0x1010));
        unwind_table_freep(&rows);
        rows = NULL;

        /* The code of the Go 1.21+ prologue: push %rbp at 0x1003, the run
         * of 8 from 0x1004. */
        uint8_t code[16] = { 0x90, 0x90, 0x90, 0x55 };
        const GoRegion region = { .vaddr = 0x1000, .data = code, .size = sizeof(code) };
        const uint8_t pcsp8[] = { 2, 4, 16, 8, 15, 4, 0 };
        memcpy(tab + pctab + 1, pcsp8, sizeof(pcsp8));
        ASSERT_OK(go_unwind_rows(t, &region, 1, &rows));
        assert_row(rows, 0x1003, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        assert_row(rows, 0x1004, CGPROF_CFA_SP, 16, CGPROF_FP_AT_CFA, -2);
        assert_row(rows, 0x100c, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        unwind_table_freep(&rows);
        rows = NULL;

        /* Truncated in a varint: the function is bad, its rows NONE. */
        const uint8_t bad[] = { 2, 4, 0x80 };
        memset(tab + pctab + 1, 0, 31);
        memcpy(tab + pctab + 1 + 31 - sizeof(bad), bad, sizeof(bad));
        tab[functab + func + 16] = (uint8_t) (1 + 31 - sizeof(bad));
        /* The table ends with the pctab part's end: cut the table there. */
        gopclntab_free(t);
        t = NULL;
        ASSERT_OK(gopclntab_new(&(GoPclntabImage){ .pclntab = tab, .pclntab_size = sizeof(tab) }, &t));
        ASSERT_OK(gopclntab_func_info(t, 0, &fn));
        ASSERT_OK(gopclntab_pcsp_begin(t, &fn, &it));
        ASSERT_EQ(gopclntab_pcvalue_next(&it, &s, &e, &v), 1);
        ASSERT_ERROR(gopclntab_pcvalue_next(&it, &s, &e, &v), EBADMSG);
        /* Its only function bad: no rows at all. */
        ASSERT_ERROR(go_unwind_rows(t, NULL, 0, &rows), EBADMSG);
        ASSERT_NULL(rows);

        /* pcsp beyond the table. */
        fn.pcsp = 4096;
        ASSERT_ERROR(gopclntab_pcsp_begin(t, &fn, &it), EBADMSG);
        fn.pcsp = 0;
        ASSERT_ERROR(gopclntab_pcsp_begin(t, &fn, &it), ENOENT);
        gopclntab_free(t);
}

DEFINE_TEST_MAIN
