/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The unwind-table builder against binutils' readelf: for the fixtures
 * built by meson and for real system files (python3, libc, libstdc++), at
 * every row address readelf --debug-dump=frames-interp prints (and at the
 * last byte of each row's range, and just past each FDE), the table must say
 * the same thing about the CFA, the frame pointer and the return address.
 * Then broken and hostile input (corrupted copies of a fixture, hand-made
 * ELF files), which must give an error or a table with bad entries counted,
 * never a crash (the sanitizer build runs this too). */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf-test.h"
#include "tests.h"
#include "unwind-table.h"

/* ---- helpers ---- */

static UnwindTable *build_path(const char *path, int *ret_r) {
        _cleanup_close_ int fd = -EBADF;
        UnwindTable *t = NULL;
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        r = unwind_table_build_fd(fd, &t);
        if (ret_r)
                *ret_r = r;
        else
                ASSERT_OK(r);
        ASSERT_TRUE(r < 0 ? t == NULL : t != NULL);
        return t;
}

/* What every table must look like, whatever the input. */
static void check_table_invariants(const UnwindTable *t) {
        ASSERT_NOT_NULL(t);
        ASSERT_TRUE(t->n_rows >= 2);
        ASSERT_TRUE(t->end > t->base);
        ASSERT_TRUE(t->end - t->base <= UINT32_MAX);
        ASSERT_EQ(t->rows[0].pc, 0);
        for (size_t i = 0; i < t->n_rows; i++) {
                const struct cgprof_unwind_row *r = &t->rows[i];

                ASSERT_TRUE(CGPROF_UNWIND_CFA(r->rule) <= CGPROF_CFA_SIGNAL);
                ASSERT_TRUE(CGPROF_UNWIND_FP(r->rule) <= CGPROF_FP_UNKNOWN);
                if (i > 0) {
                        const struct cgprof_unwind_row *p = &t->rows[i - 1];

                        ASSERT_TRUE(p->pc < r->pc);
                        ASSERT_FALSE(p->rule == r->rule && p->cfa_offset == r->cfa_offset &&
                                     p->fp_offset == r->fp_offset);
                }
        }
        ASSERT_EQ(t->rows[t->n_rows - 1].rule, CGPROF_UNWIND_RULE(CGPROF_CFA_NONE, CGPROF_FP_SAME));
        ASSERT_EQ(t->rows[t->n_rows - 1].pc, t->end - t->base);
        ASSERT_TRUE(t->stats.n_rows_raw >= t->n_rows);
        ASSERT_TRUE(t->stats.n_fdes > 0);
        ASSERT_NULL(unwind_table_lookup(t, t->end));
        ASSERT_NULL(unwind_table_lookup(t, t->base - 1));
        ASSERT_TRUE(unwind_table_lookup(t, t->base) == &t->rows[0]);
}

static const char *env_path(const char *name) {
        const char *v = getenv(name);

        if (!v || access(v, R_OK) < 0)
                return NULL;
        return v;
}

/* The file an environment variable names (a fixture meson builds), or the
 * test skips. */
static const char *env_path_or_skip(const char *name) {
        const char *v = env_path(name);

        if (!v)
                TEST_SKIP("%s not set or not readable (run through meson test)", name);
        return v;
}

static bool have_readelf(void) {
        return system("readelf --version >/dev/null 2>&1") == 0;
}

/* ---- readelf's view ---- */

typedef struct RefRow {
        uint64_t loc;
        char *cfa, *rbp, *ra; /* rbp, ra: NULL when readelf has no such column */
} RefRow;

typedef struct RefEntry {
        bool cie;
        bool signal; /* a CIE with the 'S' augmentation (signal trampolines) */
        uint64_t offset, cie_offset, start, end;
        RefRow *rows;
        size_t n_rows, n_allocated;
        bool overlaps;
} RefEntry;

typedef struct Ref {
        RefEntry *entries;
        size_t n, n_allocated;
} Ref;

static void ref_free(Ref *ref) {
        for (size_t i = 0; i < ref->n; i++) {
                for (size_t j = 0; j < ref->entries[i].n_rows; j++) {
                        free(ref->entries[i].rows[j].cfa);
                        free(ref->entries[i].rows[j].rbp);
                        free(ref->entries[i].rows[j].ra);
                }
                free(ref->entries[i].rows);
        }
        free(ref->entries);
}

/* Splits a line on blanks; "r3 (rbx)" (a register column) stays one token. */
static size_t tokenize(char *line, char **tok, size_t max) {
        size_t n = 0;

        for (char *s = strtok(line, " \t\n"); s; s = strtok(NULL, " \t\n")) {
                if (s[0] == '(' && n > 0) {
                        s[-1] = ' '; /* glue back onto the previous token */
                        continue;
                }
                if (n < max)
                        tok[n++] = s;
        }
        return n;
}

static void read_readelf(const char *path, const char *section, Ref *ref) {
        _cleanup_free_ char *cmd = NULL, *line = NULL, *want = NULL;
        size_t line_size = 0;
        ssize_t rbp_col = -1, ra_col = -1;
        bool in_section = false, have_header = false;
        RefEntry *cur = NULL;
        FILE *f;

        ASSERT_TRUE(
                asprintf(&cmd,
                         "readelf --debug-dump=no-follow-links --debug-dump=frames-interp '%s' 2>/dev/null",
                         path) > 0);
        ASSERT_TRUE(asprintf(&want, "Contents of the %s section", section) > 0);
        f = popen(cmd, "r");
        ASSERT_NOT_NULL(f);

        while (getline(&line, &line_size, f) > 0) {
                char *tok[64];
                size_t n;

                if (strncmp(line, "Contents of the ", 16) == 0) {
                        in_section = strncmp(line, want, strlen(want)) == 0 &&
                                     (line[strlen(want)] == ':' || line[strlen(want)] == ' ');
                        cur = NULL;
                        continue;
                }
                if (!in_section)
                        continue;
                if (strncmp(line, "   LOC", 6) == 0) {
                        n = tokenize(line, tok, ELEMENTSOF(tok));
                        rbp_col = ra_col = -1;
                        for (size_t i = 0; i < n; i++) {
                                if (streq(tok[i], "rbp"))
                                        rbp_col = (ssize_t) i;
                                if (streq(tok[i], "ra"))
                                        ra_col = (ssize_t) i;
                        }
                        have_header = true;
                        continue;
                }
                n = tokenize(line, tok, ELEMENTSOF(tok));
                if (n >= 2 && streq(tok[1], "ZERO")) { /* "00000258 ZERO terminator" */
                        cur = NULL;
                        continue;
                }
                if (n >= 4 && (streq(tok[3], "CIE") || streq(tok[3], "FDE"))) {
                        RefEntry e = { .cie = streq(tok[3], "CIE") };

                        e.offset = strtoull(tok[0], NULL, 16);
                        /* frames-interp: 0000252c 00000010 00000000 CIE "zRS" cf=1 df=-8 ra=16 */
                        if (e.cie && n >= 5 && tok[4][0] == '"')
                                e.signal = strchr(tok[4], 'S') != NULL;
                        if (!e.cie) {
                                const char *c = NULL, *p = NULL;

                                for (size_t i = 4; i < n; i++) {
                                        if (strncmp(tok[i], "cie=", 4) == 0)
                                                c = tok[i] + 4;
                                        if (strncmp(tok[i], "pc=", 3) == 0)
                                                p = tok[i] + 3;
                                }
                                ASSERT_TRUE(c && p);
                                e.cie_offset = strtoull(c, NULL, 16);
                                ASSERT_EQ(sscanf(p, "%" SCNx64 "..%" SCNx64, &e.start, &e.end), 2);
                        }
                        if (ref->n >= ref->n_allocated) {
                                ref->n_allocated = MAX(ref->n_allocated * 2, (size_t) 1024);
                                ref->entries =
                                        reallocarray(ref->entries, ref->n_allocated, sizeof(RefEntry));
                                ASSERT_NOT_NULL(ref->entries);
                        }
                        ref->entries[ref->n] = e;
                        cur = &ref->entries[ref->n++];
                        have_header = false;
                        continue;
                }
                /* A row: LOC CFA columns... */
                if (cur && have_header && n >= 2 && strspn(tok[0], "0123456789abcdef") == strlen(tok[0]) &&
                    strlen(tok[0]) >= 8) {
                        RefRow r = {
                                .loc = strtoull(tok[0], NULL, 16),
                                .cfa = strdup(tok[1]),
                                .rbp = rbp_col > 0 && (size_t) rbp_col < n ? strdup(tok[rbp_col]) : NULL,
                                .ra = ra_col > 0 && (size_t) ra_col < n ? strdup(tok[ra_col]) : NULL,
                        };

                        if (cur->n_rows >= cur->n_allocated) {
                                cur->n_allocated = MAX(cur->n_allocated * 2, (size_t) 8);
                                cur->rows = reallocarray(cur->rows, cur->n_allocated, sizeof(RefRow));
                                ASSERT_NOT_NULL(cur->rows);
                        }
                        cur->rows[cur->n_rows++] = r;
                }
        }
        /* readelf exits 1 after a mere warning: what it printed is what counts. */
        ASSERT_TRUE(pclose(f) >= 0);
        ASSERT_TRUE(ref->n > 0);
}

/* Address ranges of the PLT sections (.plt, .plt.sec, .plt.got). */
typedef struct Range {
        uint64_t start, end;
} Range;

static size_t plt_ranges(const char *path, Range *ranges, size_t max) {
        _cleanup_close_ int fd = -EBADF;
        Elf_Scn *scn = NULL;
        size_t n = 0, shstrndx;
        Elf *elf;

        elf = test_elf_open(path, &fd);
        ASSERT_TRUE(elf_getshdrstrndx(elf, &shstrndx) == 0);
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;
                const char *name;

                ASSERT_NOT_NULL(gelf_getshdr(scn, &shdr));
                name = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (name && strncmp(name, ".plt", 4) == 0 && n < max)
                        ranges[n++] = (Range){ shdr.sh_addr, shdr.sh_addr + shdr.sh_size };
        }
        elf_end(elf);
        return n;
}

static int entry_compare(const void *a, const void *b) {
        const RefEntry *const *x = a, *const *y = b;

        return CMP((*x)->start, (*y)->start);
}

static bool covered(RefEntry **fdes, size_t n, uint64_t addr) {
        /* fdes sorted by start; any FDE with start <= addr < end? (small n of overlaps: linear back-scan) */
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (fdes[mid]->start <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /* fdes[0..lo) start at or below addr. */
        for (size_t i = lo; i > 0 && lo - i < 64; i--)
                if (fdes[i - 1]->end > addr && fdes[i - 1]->start < fdes[i - 1]->end)
                        return true;
        return false;
}

/* readelf prints entries in section order. */
static const RefEntry *find_entry(const Ref *ref, uint64_t offset) {
        size_t lo = 0, hi = ref->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (ref->entries[mid].offset == offset)
                        return ref->entries[mid].cie ? &ref->entries[mid] : NULL;
                if (ref->entries[mid].offset < offset)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

typedef struct Expect {
        uint8_t cfa, fp;
        uint16_t cfa_offset;
        int8_t fp_offset;
} Expect;

static bool parse_reg_offset(const char *s, const char *reg, long long *ret) {
        size_t l = strlen(reg);
        char *end;

        if (strncmp(s, reg, l) != 0 || (s[l] != '+' && s[l] != '-'))
                return false;
        errno = 0;
        *ret = strtoll(s + l, &end, 10);
        return errno == 0 && *end == '\0';
}

static Expect expect_row(const RefRow *r, bool in_plt) {
        Expect e = { .cfa = CGPROF_CFA_UNSUPPORTED };
        long long off;

        if (r->ra && streq(r->ra, "u"))
                return (Expect){ .cfa = CGPROF_CFA_END };

        if (!r->rbp || streq(r->rbp, "u") || streq(r->rbp, "s"))
                e.fp = CGPROF_FP_SAME;
        else if (parse_reg_offset(r->rbp, "c", &off) && off % 8 == 0 && off / 8 >= INT8_MIN &&
                 off / 8 <= INT8_MAX) {
                e.fp = CGPROF_FP_AT_CFA;
                e.fp_offset = (int8_t) (off / 8);
        } else
                e.fp = CGPROF_FP_UNKNOWN;

        if (!r->ra || !streq(r->ra, "c-8"))
                return e;
        if (parse_reg_offset(r->cfa, "rsp", &off) && off >= 0 && off <= UINT16_MAX) {
                e.cfa = CGPROF_CFA_SP;
                e.cfa_offset = (uint16_t) off;
        } else if (parse_reg_offset(r->cfa, "rbp", &off) && off >= 0 && off <= UINT16_MAX) {
                e.cfa = CGPROF_CFA_FP;
                e.cfa_offset = (uint16_t) off;
        } else if (streq(r->cfa, "exp") && in_plt)
                e.cfa = CGPROF_CFA_PLT;
        return e;
}

typedef struct CompareStats {
        size_t fdes, addresses, gaps, skipped_fdes, mismatches;
} CompareStats;

static void check_address(const char *path, const UnwindTable *t, const RefEntry *fde, const RefRow *r,
                          uint64_t addr, bool in_plt, bool signal, CompareStats *st) {
        const struct cgprof_unwind_row *row = unwind_table_lookup(t, addr);
        Expect e = expect_row(r, in_plt);
        bool ok;

        st->addresses++;
        /* A signal trampoline (an FDE of an 'S' CIE) whose CFA is an
         * expression: a signal frame row when the expression is the rsp
         * saved in the ucontext (readelf does not print it: the unit tests
         * check which), else unsupported. */
        if (signal && streq(r->cfa, "exp") && row && CGPROF_UNWIND_CFA(row->rule) == CGPROF_CFA_SIGNAL)
                e = (Expect){ .cfa = CGPROF_CFA_SIGNAL, .fp = CGPROF_FP_SAME };
        ok = row && CGPROF_UNWIND_CFA(row->rule) == e.cfa;
        if (ok && (e.cfa == CGPROF_CFA_SP || e.cfa == CGPROF_CFA_FP))
                ok = row->cfa_offset == e.cfa_offset;
        if (ok && e.cfa == CGPROF_CFA_PLT)
                ok = row->cfa_offset >= 1 && row->cfa_offset <= 15; /* 11 for .plt, 9 for the IBT .plt */
        if (ok && e.cfa != CGPROF_CFA_END) {
                ok = CGPROF_UNWIND_FP(row->rule) == e.fp;
                if (ok && e.fp == CGPROF_FP_AT_CFA)
                        ok = row->fp_offset == e.fp_offset;
        }
        if (!ok) {
                if (st->mismatches++ < 20)
                        fprintf(stderr,
                                "%s: FDE %#" PRIx64 " (%#" PRIx64 "..%#" PRIx64 ") at %#" PRIx64
                                ": readelf CFA %s rbp %s ra %s%s; table %s rule cfa=%u/%u fp=%u/%d\n",
                                path, fde->offset, fde->start, fde->end, addr, r->cfa, strna(r->rbp),
                                strna(r->ra), in_plt ? " (PLT)" : "", row ? "" : "NULL",
                                row ? CGPROF_UNWIND_CFA(row->rule) : 0, row ? row->cfa_offset : 0,
                                row ? CGPROF_UNWIND_FP(row->rule) : 0, row ? row->fp_offset : 0);
        }
}

/* Compares the table of 'path' with readelf's interpretation of 'section'. */
static void compare_with_readelf(const char *path, const UnwindTable *t, const char *section) {
        _cleanup_free_ RefEntry **fdes = NULL;
        Range plt[8];
        size_t n_plt, n_fdes = 0;
        CompareStats st = {};
        Ref ref = {};

        read_readelf(path, section, &ref);
        n_plt = plt_ranges(path, plt, ELEMENTSOF(plt));

        fdes = calloc(ref.n + 1, sizeof(RefEntry *));
        ASSERT_NOT_NULL(fdes);
        for (size_t i = 0; i < ref.n; i++)
                if (!ref.entries[i].cie && ref.entries[i].end > ref.entries[i].start)
                        fdes[n_fdes++] = &ref.entries[i];
        ASSERT_TRUE(n_fdes > 0);
        qsort(fdes, n_fdes, sizeof(RefEntry *), entry_compare);

        /* FDEs that overlap another: which one wins is the builder's choice
         * (the first by address), not readelf's business; skip them. */
        for (size_t i = 0; i < n_fdes; i++) {
                for (size_t j = i + 1; j < n_fdes && fdes[j]->start < fdes[i]->end; j++)
                        fdes[i]->overlaps = fdes[j]->overlaps = true;
        }

        for (size_t i = 0; i < n_fdes; i++) {
                const RefEntry *f = fdes[i];
                const RefRow *rows = f->rows;
                size_t n_rows = f->n_rows;
                const RefEntry *fcie = find_entry(&ref, f->cie_offset);
                bool in_plt = false, signal = fcie && fcie->signal;

                if (f->overlaps) {
                        st.skipped_fdes++;
                        continue;
                }
                for (size_t k = 0; k < n_plt; k++)
                        if (f->start >= plt[k].start && f->end <= plt[k].end)
                                in_plt = true;

                if (n_rows == 0) {
                        /* No table printed: the FDE's program does nothing, the CIE's rules hold. */
                        const RefEntry *cie = find_entry(&ref, f->cie_offset);
                        if (!cie || cie->n_rows == 0) {
                                st.skipped_fdes++;
                                continue;
                        }
                        rows = &cie->rows[cie->n_rows - 1];
                        check_address(path, t, f, rows, f->start, in_plt, signal, &st);
                        check_address(path, t, f, rows, f->end - 1, in_plt, signal, &st);
                } else
                        for (size_t k = 0; k < n_rows; k++) {
                                uint64_t next = f->end;

                                /* Several rows at one address: the last one holds. */
                                if (k + 1 < n_rows && rows[k + 1].loc == rows[k].loc)
                                        continue;
                                if (rows[k].loc < f->start || rows[k].loc >= f->end)
                                        continue;
                                if (k + 1 < n_rows && rows[k + 1].loc < next)
                                        next = rows[k + 1].loc;
                                check_address(path, t, f, &rows[k], rows[k].loc, in_plt, signal, &st);
                                if (next - 1 > rows[k].loc)
                                        check_address(path, t, f, &rows[k], next - 1, in_plt, signal, &st);
                        }
                st.fdes++;

                /* Just past the FDE: a gap, unless another FDE starts there. */
                if (!covered(fdes, n_fdes, f->end)) {
                        const struct cgprof_unwind_row *row = unwind_table_lookup(t, f->end);

                        st.gaps++;
                        if (row && CGPROF_UNWIND_CFA(row->rule) != CGPROF_CFA_NONE) {
                                if (st.mismatches++ < 20)
                                        fprintf(stderr, "%s: %#" PRIx64 " past FDE %#" PRIx64 " not a gap\n",
                                                path, f->end, f->offset);
                        }
                }
        }

        fprintf(stderr,
                "%s (%s): %zu FDEs compared, %zu addresses, %zu gaps; %zu FDEs skipped (overlapping or "
                "without rules); table: %zu rows (%zu raw), %zu unsupported, %zu bad entries\n",
                path, section, st.fdes, st.addresses, st.gaps, st.skipped_fdes, t->n_rows,
                t->stats.n_rows_raw, t->stats.n_unsupported_rows, t->stats.n_bad_entries);
        ref_free(&ref);
        ASSERT_EQ(st.mismatches, 0);
        ASSERT_TRUE(st.addresses > 0);
}

static void compare_file(const char *path, UnwindSource want) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;

        t = build_path(path, NULL);
        check_table_invariants(t);
        ASSERT_EQ(t->source, want);
        compare_with_readelf(path, t, unwind_source_to_string(t->source));
}

static const char *system_libc(void) {
        static const char *const paths[] = {
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/libc.so.6",
        };

        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (access(paths[i], R_OK) == 0)
                        return paths[i];
        return NULL;
}

static const char *system_libstdcxx(void) {
        static const char *const paths[] = {
                "/lib/x86_64-linux-gnu/libstdc++.so.6",
                "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                "/usr/lib64/libstdc++.so.6",
        };

        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (access(paths[i], R_OK) == 0)
                        return paths[i];
        return NULL;
}

static const char *system_python(void) {
        if (access("/usr/bin/python3.11", R_OK) == 0)
                return "/usr/bin/python3.11";
        if (access("/usr/bin/python3", R_OK) == 0)
                return "/usr/bin/python3";
        return NULL;
}

/* ---- 1. fixtures and system files against readelf ---- */

TEST(readelf_fixtures) {
        static const char *const names[] = {
                "CGPROF_UNWIND_TABLE_FIXTURE_NOFP",
                "CGPROF_UNWIND_TABLE_FIXTURE_FP",
                "CGPROF_ELF_FIXTURE",
                "CGPROF_ELF_FIXTURE_IBT",
                /* Fixtures of other tests, when they are there. */
                "CGPROF_ELF_FIXTURE_CXX",
                "CGPROF_UNWIND_NOFP",
                "CGPROF_UNWIND_CXX",
        };
        size_t n = 0;

        if (!have_readelf())
                TEST_SKIP_PREREQ("readelf not found");
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                const char *path = env_path(names[i]);

                if (!path)
                        continue;
                compare_file(path, UNWIND_SOURCE_EH_FRAME);
                n++;
        }
        if (n == 0)
                TEST_SKIP("no fixtures (run through meson test)");
}

TEST(readelf_system) {
        const char *paths[] = { system_python(), system_libc(), system_libstdcxx() };

        if (!have_readelf())
                TEST_SKIP_PREREQ("readelf not found");
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (paths[i])
                        compare_file(paths[i], UNWIND_SOURCE_EH_FRAME);
}

/* More files to compare, by hand: CGPROF_UNWIND_TABLE_EXTRA=FILE:FILE... */
/* glibc's signal trampoline (__restore_rt, a local symbol): the FDEs of
 * libc's 'S' CIE. Every address of each, from the byte before the symbol
 * that the FDE starts with (so that a return address into the trampoline,
 * looked up at ra - 1, finds it) to its end, is a signal frame row. */
TEST(libc_signal_trampoline) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        const char *libc = system_libc();
        size_t n_signal = 0;
        Ref ref = {};

        if (!libc || !have_readelf()) {
                fprintf(stderr, "no system libc or readelf: skipped\n");
                return;
        }
        t = build_path(libc, NULL);
        read_readelf(libc, unwind_source_to_string(t->source), &ref);
        for (size_t i = 0; i < ref.n; i++) {
                const RefEntry *f = &ref.entries[i], *cie;

                if (f->cie || f->end <= f->start)
                        continue;
                cie = find_entry(&ref, f->cie_offset);
                if (!cie || !cie->signal)
                        continue;
                for (uint64_t a = f->start; a < f->end; a++) {
                        const struct cgprof_unwind_row *row = unwind_table_lookup(t, a);
                        ASSERT_NOT_NULL(row);
                        ASSERT_EQ(CGPROF_UNWIND_CFA(row->rule), CGPROF_CFA_SIGNAL);
                }
                n_signal++;
        }
        ref_free(&ref);
        fprintf(stderr, "%s: %zu signal trampoline FDEs\n", libc, n_signal);
        /* glibc has one on x86-64 (musl and others have none: no 'S' CIE). */
        if (strstr(libc, "x86_64") || strstr(libc, "lib64"))
                ASSERT_TRUE(n_signal >= 1);
}

TEST(readelf_extra) {
        _cleanup_free_ char *list = NULL;
        const char *v = getenv("CGPROF_UNWIND_TABLE_EXTRA");
        char *save = NULL;

        if (!v)
                TEST_SKIP("CGPROF_UNWIND_TABLE_EXTRA not set (FILE:FILE..., by hand)");
        if (!have_readelf())
                TEST_SKIP_PREREQ("readelf not found");
        list = strdup(v);
        ASSERT_NOT_NULL(list);
        for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
                _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
                int r;

                t = build_path(p, &r);
                if (r == -ENODATA) {
                        fprintf(stderr, "%s: no CFI\n", p);
                        continue;
                }
                ASSERT_OK(r);
                check_table_invariants(t);
                compare_with_readelf(p, t, unwind_source_to_string(t->source));
        }
}

/* The .plt's FDE of a lazily bound executable: PLT0 then 16-byte stubs
 * whose CFA depends on the offset in the stub. */
TEST(plt) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        const char *path = env_path_or_skip("CGPROF_UNWIND_TABLE_FIXTURE_NOFP");
        Range plt[8];
        size_t n;
        bool found = false;

        t = build_path(path, NULL);
        n = plt_ranges(path, plt, ELEMENTSOF(plt));
        for (size_t i = 0; i < n; i++) {
                const struct cgprof_unwind_row *r = unwind_table_lookup(t, plt[i].start + 16);

                if (r && CGPROF_UNWIND_CFA(r->rule) == CGPROF_CFA_PLT) {
                        ASSERT_EQ(r->cfa_offset, 11);
                        found = true;
                }
        }
        ASSERT_TRUE(found);
}

/* ---- 2. .debug_frame ---- */

static bool has_section(const char *path, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        Elf_Scn *scn = NULL;
        size_t shstrndx;
        bool found = false;
        Elf *elf;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        elf = elf_begin(fd, ELF_C_READ, NULL);
        ASSERT_NOT_NULL(elf);
        ASSERT_TRUE(elf_getshdrstrndx(elf, &shstrndx) == 0);
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;
                const char *n;

                ASSERT_NOT_NULL(gelf_getshdr(scn, &shdr));
                n = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (n && streq(n, name))
                        found = true;
        }
        elf_end(elf);
        return found;
}

TEST(debug_frame) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        const char *path = env_path("CGPROF_UNWIND_TABLE_FIXTURE_DEBUG_FRAME");

        if (!path)
                TEST_SKIP("no .debug_frame fixture (run through meson test)");
        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        ASSERT_FALSE(has_section(path, ".eh_frame"));
        ASSERT_TRUE(has_section(path, ".debug_frame"));

        t = build_path(path, NULL);
        check_table_invariants(t);
        ASSERT_EQ(t->source, UNWIND_SOURCE_DEBUG_FRAME);
        ASSERT_STREQ(unwind_source_to_string(t->source), ".debug_frame");
        ASSERT_TRUE(t->stats.n_fdes >= 8);
        ASSERT_EQ(t->stats.n_bad_entries, 0);
        if (have_readelf())
                compare_with_readelf(path, t, ".debug_frame");
}

/* The same, its .debug_frame compressed: the same table. */
TEST(debug_frame_compressed) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL, *z = NULL;
        const char *path = env_path("CGPROF_UNWIND_TABLE_FIXTURE_DEBUG_FRAME"),
                   *zpath = env_path("CGPROF_UNWIND_TABLE_FIXTURE_DEBUG_FRAME_Z");
        _cleanup_close_ int fd = -EBADF;
        Elf_Scn *scn = NULL;
        bool compressed = false;
        size_t shstrndx;
        Elf *elf;

        if (!path || !zpath)
                TEST_SKIP("no compressed .debug_frame fixture (run through meson test)");
        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        fd = open(zpath, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        elf = elf_begin(fd, ELF_C_READ, NULL);
        ASSERT_NOT_NULL(elf);
        ASSERT_TRUE(elf_getshdrstrndx(elf, &shstrndx) == 0);
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;
                const char *n;

                ASSERT_NOT_NULL(gelf_getshdr(scn, &shdr));
                n = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (n && streq(n, ".debug_frame"))
                        compressed = shdr.sh_flags & SHF_COMPRESSED;
        }
        elf_end(elf);
        ASSERT_TRUE(compressed);

        t = build_path(path, NULL);
        z = build_path(zpath, NULL);
        ASSERT_EQ(z->source, UNWIND_SOURCE_DEBUG_FRAME);
        ASSERT_EQ(z->base, t->base);
        ASSERT_EQ(z->end, t->end);
        ASSERT_EQ(z->n_rows, t->n_rows);
        ASSERT_TRUE(memcmp(z->rows, t->rows, t->n_rows * sizeof(struct cgprof_unwind_row)) == 0);
}

/* A separate debug file: .eh_frame is NOBITS there, and GCC wrote no
 * .debug_frame (it had .eh_frame): nothing to build from. */
TEST(debug_file_without_cfi) {
        const char *path = env_path_or_skip("CGPROF_ELF_FIXTURE_DEBUG");
        int r;

        ASSERT_NULL(build_path(path, &r));
        ASSERT_EQ(r, -ENODATA);
}

/* ---- 3. broken input ---- */

/* A writable in-memory copy of a file. */
static int copy_to_memfd(const char *path, size_t *ret_size) {
        _cleanup_close_ int in = -EBADF;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        int fd;

        in = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(in >= 0);
        ASSERT_TRUE(fstat(in, &st) == 0);
        buf = malloc((size_t) st.st_size);
        ASSERT_NOT_NULL(buf);
        ASSERT_EQ(pread(in, buf, (size_t) st.st_size, 0), st.st_size);
        fd = memfd_create("unwind-test", MFD_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(pwrite(fd, buf, (size_t) st.st_size, 0), st.st_size);
        *ret_size = (size_t) st.st_size;
        return fd;
}

typedef struct SectionInfo {
        uint64_t offset, size;
        size_t index;
} SectionInfo;

static bool find_section(int fd, const char *name, SectionInfo *ret) {
        Elf_Scn *scn = NULL;
        size_t shstrndx;
        bool found = false;
        Elf *elf;

        elf = elf_begin(fd, ELF_C_READ, NULL);
        ASSERT_NOT_NULL(elf);
        ASSERT_TRUE(elf_getshdrstrndx(elf, &shstrndx) == 0);
        while (!found && (scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;
                const char *n;

                ASSERT_NOT_NULL(gelf_getshdr(scn, &shdr));
                n = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (n && streq(n, name)) {
                        *ret = (SectionInfo){ shdr.sh_offset, shdr.sh_size, elf_ndxscn(scn) };
                        found = true;
                }
        }
        elf_end(elf);
        return found;
}

static uint32_t pread_u32(int fd, uint64_t off) {
        uint32_t v;

        ASSERT_EQ(pread(fd, &v, sizeof(v), (off_t) off), (ssize_t) sizeof(v));
        return v;
}

static void pwrite_u32(int fd, uint64_t off, uint32_t v) {
        ASSERT_EQ(pwrite(fd, &v, sizeof(v), (off_t) off), (ssize_t) sizeof(v));
}

/* The section offsets (in the file) of the entries of .eh_frame, up to max.
 * The fixtures use 32-bit lengths only. */
static size_t eh_entries(int fd, const SectionInfo *s, uint64_t *offsets, bool *is_cie, size_t max) {
        size_t n = 0;

        for (uint64_t off = 0; off + 8 <= s->size && n < max;) {
                uint32_t len = pread_u32(fd, s->offset + off);

                if (len == 0)
                        break;
                offsets[n] = off;
                is_cie[n] = pread_u32(fd, s->offset + off + 4) == 0;
                n++;
                off += 4 + (uint64_t) len;
        }
        return n;
}

/* Builds from fd; the result must be an error or a table with bad entries. */
static UnwindTable *build_broken(int fd, const char *what, int *ret_r) {
        UnwindTable *t = NULL;
        int r;

        r = unwind_table_build_fd(fd, &t);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", what, strerror(-r));
                ASSERT_NULL(t);
        } else {
                check_table_invariants(t);
                fprintf(stderr, "%s: %zu rows, %zu FDEs, %zu bad entries\n", what, t->n_rows,
                        t->stats.n_fdes, t->stats.n_bad_entries);
                ASSERT_TRUE(t->stats.n_bad_entries > 0);
        }
        if (ret_r)
                *ret_r = r;
        return t;
}

static const char *fixture_or_skip(void) {
        return env_path_or_skip("CGPROF_UNWIND_TABLE_FIXTURE_NOFP");
}

TEST(broken_truncated) {
        _cleanup_close_ int fd = -EBADF;
        const char *path = fixture_or_skip();
        SectionInfo eh;
        size_t size;
        int r;

        fd = copy_to_memfd(path, &size);
        ASSERT_TRUE(find_section(fd, ".eh_frame", &eh));

        /* The file cut in the middle of .eh_frame (the section headers go too). */
        ASSERT_TRUE(ftruncate(fd, (off_t) (eh.offset + eh.size / 2)) == 0);
        unwind_table_free(build_broken(fd, "truncated file", &r));
        ASSERT_TRUE(r < 0);
}

TEST(broken_section_past_eof) {
        _cleanup_close_ int fd = -EBADF;
        const char *path = fixture_or_skip();
        Elf64_Ehdr ehdr;
        SectionInfo eh;
        size_t size;
        uint64_t sh_size_off, huge;
        int r;

        fd = copy_to_memfd(path, &size);
        ASSERT_TRUE(find_section(fd, ".eh_frame", &eh));
        ASSERT_EQ(pread(fd, &ehdr, sizeof(ehdr), 0), (ssize_t) sizeof(ehdr));

        /* .eh_frame's header says it runs past the end of the file. */
        sh_size_off = ehdr.e_shoff + eh.index * sizeof(Elf64_Shdr) + offsetof(Elf64_Shdr, sh_size);
        huge = size;
        ASSERT_EQ(pwrite(fd, &huge, sizeof(huge), (off_t) sh_size_off), (ssize_t) sizeof(huge));
        unwind_table_free(build_broken(fd, "section past EOF", &r));
        ASSERT_TRUE(r < 0);
}

TEST(broken_lengths) {
        const char *path = fixture_or_skip();
        uint64_t offsets[64];
        bool is_cie[64];
        size_t n, size;

        for (int variant = 0; variant < 2; variant++) {
                _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
                _cleanup_close_ int fd = -EBADF;
                SectionInfo eh;
                size_t victim = SIZE_MAX;

                fd = copy_to_memfd(path, &size);
                ASSERT_TRUE(find_section(fd, ".eh_frame", &eh));
                n = eh_entries(fd, &eh, offsets, is_cie, ELEMENTSOF(offsets));
                for (size_t i = n / 2; i < n && victim == SIZE_MAX; i++)
                        if (!is_cie[i])
                                victim = i;
                ASSERT_TRUE(victim != SIZE_MAX);

                if (variant == 0) {
                        /* 0xff over the length: a 64-bit length of 2^64-1. */
                        static const uint8_t ff[12] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                                        0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

                        ASSERT_EQ(pwrite(fd, ff, sizeof(ff), (off_t) (eh.offset + offsets[victim])),
                                  (ssize_t) sizeof(ff));
                        t = build_broken(fd, "0xff length", NULL);
                } else {
                        /* A length past the end of the section. */
                        pwrite_u32(fd, eh.offset + offsets[victim],
                                   (uint32_t) (eh.size - offsets[victim] + 64));
                        t = build_broken(fd, "length past the section end", NULL);
                }
                /* What came before the broken length is still there. */
                ASSERT_NOT_NULL(t);
                ASSERT_TRUE(t->stats.n_fdes > 0);
        }
}

TEST(broken_cie_pointer) {
        _cleanup_(unwind_table_freep) UnwindTable *good = NULL, *t = NULL, *t2 = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *path = fixture_or_skip();
        uint64_t offsets[64];
        bool is_cie[64];
        SectionInfo eh;
        size_t n, size, fde = SIZE_MAX, other_fde = SIZE_MAX;

        good = build_path(path, NULL);
        fd = copy_to_memfd(path, &size);
        ASSERT_TRUE(find_section(fd, ".eh_frame", &eh));
        n = eh_entries(fd, &eh, offsets, is_cie, ELEMENTSOF(offsets));
        for (size_t i = 0; i < n; i++)
                if (!is_cie[i]) {
                        if (fde == SIZE_MAX)
                                fde = i;
                        else if (other_fde == SIZE_MAX)
                                other_fde = i;
                }
        ASSERT_TRUE(other_fde != SIZE_MAX);

        /* Pointing before the section. */
        pwrite_u32(fd, eh.offset + offsets[fde] + 4, 0x7ffffff0);
        t = build_broken(fd, "CIE pointer out of the section", NULL);
        ASSERT_NOT_NULL(t);
        ASSERT_EQ(t->stats.n_bad_entries, 1);
        ASSERT_EQ(t->stats.n_fdes, good->stats.n_fdes - 1);

        /* Pointing at an FDE. */
        pwrite_u32(fd, eh.offset + offsets[other_fde] + 4,
                   (uint32_t) (offsets[other_fde] + 4 - offsets[fde]));
        t2 = build_broken(fd, "CIE pointer at an FDE", NULL);
        ASSERT_NOT_NULL(t2);
        ASSERT_EQ(t2->stats.n_bad_entries, 2);
        ASSERT_EQ(t2->stats.n_fdes, good->stats.n_fdes - 2);
}

TEST(broken_every_cie) {
        _cleanup_close_ int fd = -EBADF;
        const char *path = fixture_or_skip();
        uint64_t offsets[64];
        bool is_cie[64];
        SectionInfo eh;
        size_t n, size;
        int r;

        fd = copy_to_memfd(path, &size);
        ASSERT_TRUE(find_section(fd, ".eh_frame", &eh));
        n = eh_entries(fd, &eh, offsets, is_cie, ELEMENTSOF(offsets));
        for (size_t i = 0; i < n; i++)
                if (is_cie[i]) {
                        uint8_t v = 99; /* version */

                        ASSERT_EQ(pwrite(fd, &v, 1, (off_t) (eh.offset + offsets[i] + 8)), 1);
                }
        unwind_table_free(build_broken(fd, "every CIE broken", &r));
        ASSERT_EQ(r, -EBADMSG);
}

TEST(broken_garbage) {
        const char *path = fixture_or_skip();
        size_t size;

        /* Pseudo-random bytes over parts of .eh_frame, a few seeds. */
        for (uint32_t seed = 1; seed <= 64; seed++) {
                _cleanup_close_ int fd = -EBADF;
                uint8_t junk[256];
                SectionInfo eh;
                uint64_t at;
                uint32_t x = seed * 2654435761U;
                UnwindTable *t = NULL;

                fd = copy_to_memfd(path, &size);
                ASSERT_TRUE(find_section(fd, ".eh_frame", &eh));
                for (size_t i = 0; i < sizeof(junk); i++) {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        junk[i] = (uint8_t) x;
                }
                at = eh.offset + (x % eh.size);
                ASSERT_TRUE(pwrite(fd, junk, (size_t) MIN((uint64_t) sizeof(junk), eh.offset + eh.size - at),
                                   (off_t) at) > 0);
                if (unwind_table_build_fd(fd, &t) >= 0) {
                        check_table_invariants(t);
                        for (uint64_t a = t->base; a < t->end; a += 7)
                                (void) unwind_table_lookup(t, a);
                }
                unwind_table_free(t);
        }
}

/* ---- 4. not ELF, no sections, another machine ---- */

static int memfd_with(const void *data, size_t size) {
        int fd = memfd_create("unwind-test", MFD_CLOEXEC);

        ASSERT_TRUE(fd >= 0);
        if (size > 0)
                ASSERT_EQ(pwrite(fd, data, size, 0), (ssize_t) size);
        return fd;
}

TEST(not_elf) {
        static const char text[] = "#!/bin/sh\necho this is not an ELF file\n";
        UnwindTable *t = NULL;
        int fd;

        fd = memfd_with(text, sizeof(text) - 1);
        ASSERT_ERROR(unwind_table_build_fd(fd, &t), ENOEXEC);
        ASSERT_NULL(t);
        safe_close(fd);

        fd = memfd_with(NULL, 0);
        ASSERT_ERROR(unwind_table_build_fd(fd, &t), ENOEXEC);
        safe_close(fd);

        /* Just the ELF magic. */
        fd = memfd_with("\177ELF", 4);
        ASSERT_TRUE(unwind_table_build_fd(fd, &t) < 0);
        ASSERT_NULL(t);
        safe_close(fd);

        ASSERT_ERROR(unwind_table_build_fd(-1, &t), EINVAL);
        ASSERT_ERROR(unwind_table_build_elf(NULL, &t), EINVAL);
        ASSERT_NULL(unwind_table_lookup(NULL, 0));
        ASSERT_NULL(unwind_table_free(NULL));
}

TEST(no_sections_and_other_machine) {
        const char *path = fixture_or_skip();
        size_t size;

        {
                _cleanup_close_ int fd = copy_to_memfd(path, &size);
                Elf64_Ehdr ehdr;
                UnwindTable *t = NULL;

                ASSERT_EQ(pread(fd, &ehdr, sizeof(ehdr), 0), (ssize_t) sizeof(ehdr));
                ehdr.e_shoff = 0;
                ehdr.e_shnum = 0;
                ehdr.e_shstrndx = 0;
                ASSERT_EQ(pwrite(fd, &ehdr, sizeof(ehdr), 0), (ssize_t) sizeof(ehdr));
                ASSERT_ERROR(unwind_table_build_fd(fd, &t), ENODATA);
                ASSERT_NULL(t);
        }
        {
                _cleanup_close_ int fd = copy_to_memfd(path, &size);
                Elf64_Ehdr ehdr;
                UnwindTable *t = NULL;

                ASSERT_EQ(pread(fd, &ehdr, sizeof(ehdr), 0), (ssize_t) sizeof(ehdr));
                ehdr.e_machine = EM_AARCH64;
                ASSERT_EQ(pwrite(fd, &ehdr, sizeof(ehdr), 0), (ssize_t) sizeof(ehdr));
                ASSERT_ERROR(unwind_table_build_fd(fd, &t), ENOTSUP);
                ASSERT_NULL(t);
        }
}

/* ---- 5. hand-made ELF files: the corners the toolchain does not reach ---- */

typedef struct Buf {
        uint8_t data[4096];
        size_t n;
} Buf;

static size_t buf_u8(Buf *b, uint8_t v) {
        ASSERT_TRUE(b->n < sizeof(b->data));
        b->data[b->n] = v;
        return b->n++;
}

static size_t buf_le(Buf *b, uint64_t v, size_t bytes) {
        size_t at = b->n;

        for (size_t i = 0; i < bytes; i++)
                buf_u8(b, (uint8_t) (v >> (8 * i)));
        return at;
}

static void buf_uleb(Buf *b, uint64_t v) {
        do {
                uint8_t byte = v & 0x7f;

                v >>= 7;
                buf_u8(b, byte | (v ? 0x80 : 0));
        } while (v);
}

static void buf_sleb(Buf *b, int64_t v) {
        bool more = true;

        while (more) {
                uint8_t byte = v & 0x7f;

                v >>= 7;
                more = !((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40)));
                buf_u8(b, byte | (more ? 0x80 : 0));
        }
}

static void buf_bytes(Buf *b, const void *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                buf_u8(b, ((const uint8_t *) p)[i]);
}

static void buf_put_le(Buf *b, size_t at, uint64_t v, size_t bytes) {
        for (size_t i = 0; i < bytes; i++)
                b->data[at + i] = (uint8_t) (v >> (8 * i));
}

/* Entry framing: a 32-bit length (or 0xffffffff + 64-bit) patched at the end. */
typedef struct Mark {
        size_t length_at, start;
        bool dwarf64;
} Mark;

static Mark entry_begin(Buf *b, bool dwarf64) {
        Mark m = { .dwarf64 = dwarf64 };

        if (dwarf64)
                buf_le(b, 0xffffffff, 4);
        m.length_at = buf_le(b, 0, dwarf64 ? 8 : 4);
        m.start = b->n;
        return m;
}

static void entry_end(Buf *b, const Mark *m) {
        while ((b->n - m->start) % 4 != 0)
                buf_u8(b, 0); /* DW_CFA_nop */
        buf_put_le(b, m->length_at, b->n - m->start, m->dwarf64 ? 8 : 4);
}

typedef struct SynthSection {
        const char *name;
        uint64_t addr;
        const Buf *buf;
} SynthSection;

/* An x86-64 ELF64 file with just these sections (and .shstrtab), in a memfd. */
static int synth_elf(const SynthSection *secs, size_t n, uint16_t machine) {
        _cleanup_free_ uint8_t *img = NULL;
        char shstrtab[256] = "";
        size_t shstr_len = 1, off, shoff, total, name_off[8];
        Elf64_Ehdr *eh;
        Elf64_Shdr *sh;
        int fd;

        ASSERT_TRUE(n < 7);
        for (size_t i = 0; i < n; i++) {
                name_off[i] = shstr_len;
                strcpy(shstrtab + shstr_len, secs[i].name);
                shstr_len += strlen(secs[i].name) + 1;
        }
        name_off[n] = shstr_len;
        strcpy(shstrtab + shstr_len, ".shstrtab");
        shstr_len += strlen(".shstrtab") + 1;

        off = sizeof(Elf64_Ehdr);
        total = off + shstr_len;
        for (size_t i = 0; i < n; i++)
                total += secs[i].buf->n + 8;
        shoff = (total + 7) & ~(size_t) 7;
        total = shoff + (n + 2) * sizeof(Elf64_Shdr);
        img = calloc(1, total);
        ASSERT_NOT_NULL(img);

        eh = (Elf64_Ehdr *) img;
        memcpy(eh->e_ident, ELFMAG, SELFMAG);
        eh->e_ident[EI_CLASS] = ELFCLASS64;
        eh->e_ident[EI_DATA] = ELFDATA2LSB;
        eh->e_ident[EI_VERSION] = EV_CURRENT;
        eh->e_type = ET_DYN;
        eh->e_machine = machine;
        eh->e_version = EV_CURRENT;
        eh->e_ehsize = sizeof(Elf64_Ehdr);
        eh->e_shentsize = sizeof(Elf64_Shdr);
        eh->e_shnum = (uint16_t) (n + 2);
        eh->e_shstrndx = (uint16_t) (n + 1);
        eh->e_shoff = shoff;

        sh = (Elf64_Shdr *) (img + shoff);
        for (size_t i = 0; i < n; i++) {
                off = (off + 7) & ~(size_t) 7;
                memcpy(img + off, secs[i].buf->data, secs[i].buf->n);
                sh[i + 1] = (Elf64_Shdr){
                        .sh_name = (uint32_t) name_off[i],
                        .sh_type = SHT_PROGBITS,
                        .sh_flags = strcmp(secs[i].name, ".debug_frame") == 0 ? 0 : SHF_ALLOC,
                        .sh_addr = secs[i].addr,
                        .sh_offset = off,
                        .sh_size = secs[i].buf->n,
                        .sh_addralign = 8,
                };
                off += secs[i].buf->n;
        }
        memcpy(img + off, shstrtab, shstr_len);
        sh[n + 1] = (Elf64_Shdr){
                .sh_name = (uint32_t) name_off[n],
                .sh_type = SHT_STRTAB,
                .sh_offset = off,
                .sh_size = shstr_len,
                .sh_addralign = 1,
        };
        ASSERT_TRUE(off + shstr_len <= shoff);

        fd = memfd_with(img, total);
        return fd;
}

static UnwindTable *synth_build(const SynthSection *secs, size_t n, int *ret_r) {
        _cleanup_close_ int fd = synth_elf(secs, n, EM_X86_64);
        UnwindTable *t = NULL;
        int r;

        r = unwind_table_build_fd(fd, &t);
        if (ret_r)
                *ret_r = r;
        else
                ASSERT_OK(r);
        if (t)
                check_table_invariants(t);
        return t;
}

static void assert_row(const UnwindTable *t, uint64_t addr, uint8_t cfa, unsigned cfa_offset, uint8_t fp,
                       int fp_offset) {
        const struct cgprof_unwind_row *r = unwind_table_lookup(t, addr);

        if (!r || CGPROF_UNWIND_CFA(r->rule) != cfa || CGPROF_UNWIND_FP(r->rule) != fp ||
            r->cfa_offset != cfa_offset || r->fp_offset != fp_offset) {
                fprintf(stderr, "at %#" PRIx64 ": expected cfa=%u/%u fp=%u/%d, got ", addr, cfa, cfa_offset,
                        fp, fp_offset);
                if (r)
                        fprintf(stderr, "cfa=%u/%u fp=%u/%d\n", CGPROF_UNWIND_CFA(r->rule), r->cfa_offset,
                                CGPROF_UNWIND_FP(r->rule), r->fp_offset);
                else
                        fprintf(stderr, "NULL\n");
                abort();
        }
}

/* The usual x86-64 CIE initial instructions: CFA = rsp + 8, ra at CFA - 8. */
static void cie_initial(Buf *b) {
        buf_u8(b, 0x0c); /* DW_CFA_def_cfa rsp 8 */
        buf_u8(b, 7);
        buf_u8(b, 8);
        buf_u8(b, 0x80 | 16); /* DW_CFA_offset r16, 1 * -8 */
        buf_u8(b, 1);
}

/* A standard prologue program: push rbp at +1, mov rsp,rbp at +4. */
static void fde_push_rbp(Buf *b) {
        buf_u8(b, 0x40 | 1); /* advance 1 */
        buf_u8(b, 0x0e); /* def_cfa_offset 16 */
        buf_u8(b, 16);
        buf_u8(b, 0x80 | 6); /* offset rbp, 2 * -8 */
        buf_u8(b, 2);
        buf_u8(b, 0x40 | 3); /* advance 3 */
        buf_u8(b, 0x0d); /* def_cfa_register rbp */
        buf_u8(b, 6);
}

/* .debug_frame, 64-bit DWARF, CIE version 4 (address and segment sizes),
 * FDEs pointing forward and backward to CIEs. */
TEST(synthetic_debug_frame_dwarf64) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        Buf b = {};
        Mark m;
        size_t cie_at;

        /* An FDE before its CIE (legal in .debug_frame): CIE pointer patched below. */
        m = entry_begin(&b, true);
        size_t fwd_ptr = buf_le(&b, 0, 8);
        buf_le(&b, 0x2000, 8); /* initial_location */
        buf_le(&b, 0x10, 8); /* address_range */
        fde_push_rbp(&b);
        entry_end(&b, &m);

        cie_at = b.n;
        m = entry_begin(&b, true);
        buf_le(&b, UINT64_MAX, 8); /* CIE id, 64-bit */
        buf_u8(&b, 4); /* version */
        buf_u8(&b, 0); /* augmentation "" */
        buf_u8(&b, 8); /* address_size */
        buf_u8(&b, 0); /* segment_selector_size */
        buf_uleb(&b, 1);
        buf_sleb(&b, -8);
        buf_uleb(&b, 16);
        cie_initial(&b);
        entry_end(&b, &m);
        buf_put_le(&b, fwd_ptr, cie_at, 8);

        m = entry_begin(&b, true);
        buf_le(&b, cie_at, 8);
        buf_le(&b, 0x1000, 8);
        buf_le(&b, 0x20, 8);
        entry_end(&b, &m);

        t = synth_build(&(SynthSection){ ".debug_frame", 0, &b }, 1, NULL);
        ASSERT_EQ(t->source, UNWIND_SOURCE_DEBUG_FRAME);
        ASSERT_EQ(t->base, 0x1000);
        ASSERT_EQ(t->end, 0x2010);
        ASSERT_EQ(t->stats.n_fdes, 2);
        ASSERT_EQ(t->stats.n_cies, 1);
        ASSERT_EQ(t->stats.n_bad_entries, 0);
        assert_row(t, 0x1000, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        assert_row(t, 0x101f, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        assert_row(t, 0x1020, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0); /* gap */
        assert_row(t, 0x1fff, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0);
        assert_row(t, 0x2000, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        assert_row(t, 0x2001, CGPROF_CFA_SP, 16, CGPROF_FP_AT_CFA, -2);
        assert_row(t, 0x2004, CGPROF_CFA_FP, 16, CGPROF_FP_AT_CFA, -2);
        assert_row(t, 0x200f, CGPROF_CFA_FP, 16, CGPROF_FP_AT_CFA, -2);
        ASSERT_NULL(unwind_table_lookup(t, 0x2010));
        /* rows: 0x1000, gap 0x1020, 0x2000, 0x2001, 0x2004, end 0x2010 */
        ASSERT_EQ(t->n_rows, 6);
}

/* .eh_frame with the old "eh" augmentation, pointer encodings other than
 * pcrel|sdata4, DW_CFA_set_loc, the PLT expression and merged rows. */
TEST(synthetic_eh_frame_encodings) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        static const uint8_t plt_expr[] = {
                0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3a, 0x2a, 0x33, 0x24, 0x22
        };
        const uint64_t sec = 0x10000, got = 0x30000;
        Buf b = {}, g = {};
        size_t cie1, cie2, cie3;
        Mark m;

        /* CIE 1: the "eh" augmentation of GCC 2.x (a pointer to the exception
         * table after the string), absptr FDEs. */
        cie1 = b.n;
        m = entry_begin(&b, false);
        buf_le(&b, 0, 4);
        buf_u8(&b, 1);
        buf_bytes(&b, "eh", 3);
        buf_le(&b, 0xdeadbeef, 8); /* the exception table pointer */
        buf_uleb(&b, 1);
        buf_sleb(&b, -8);
        buf_u8(&b, 16);
        cie_initial(&b);
        entry_end(&b, &m);

        m = entry_begin(&b, false);
        buf_le(&b, b.n - cie1, 4);
        buf_le(&b, 0x1000, 8); /* absptr */
        buf_le(&b, 0x10, 8);
        fde_push_rbp(&b);
        entry_end(&b, &m);

        /* CIE 2: "zPLR" with udata8 personality (indirect), uleb128 LSDA,
         * datarel|sdata4 FDE pointers; version 3 (uleb RA column). */
        cie2 = b.n;
        m = entry_begin(&b, false);
        buf_le(&b, 0, 4);
        buf_u8(&b, 3);
        buf_bytes(&b, "zPLR", 5);
        buf_uleb(&b, 1);
        buf_sleb(&b, -8);
        buf_uleb(&b, 16);
        buf_uleb(&b, 1 + 8 + 1 + 1); /* augmentation data length */
        buf_u8(&b, 0x84); /* P: indirect|udata8 */
        buf_le(&b, 0x12345678, 8);
        buf_u8(&b, 0x01); /* L: uleb128 */
        buf_u8(&b, 0x3b); /* R: datarel|sdata4 */
        cie_initial(&b);
        entry_end(&b, &m);

        m = entry_begin(&b, false);
        buf_le(&b, b.n - cie2, 4);
        buf_le(&b, (uint64_t) (0x3000 - (int64_t) got) & 0xffffffff, 4); /* datarel: .got + x */
        buf_le(&b, 0x40, 4);
        buf_uleb(&b, 2); /* augmentation data: the LSDA pointer, uleb128 */
        buf_uleb(&b, 300);
        /* PLT0-like: push at +0 (CFA rsp+16), +6 rsp+24, then the expression from +0x10 with lit10 */
        buf_u8(&b, 0x0e);
        buf_u8(&b, 16);
        buf_u8(&b, 0x40 | 6);
        buf_u8(&b, 0x0e);
        buf_u8(&b, 24);
        buf_u8(&b, 0x01); /* DW_CFA_set_loc (datarel|sdata4) to 0x3010 */
        buf_le(&b, (uint64_t) (0x3010 - (int64_t) got) & 0xffffffff, 4);
        buf_u8(&b, 0x0f); /* def_cfa_expression */
        buf_uleb(&b, sizeof(plt_expr));
        buf_bytes(&b, plt_expr, sizeof(plt_expr));
        entry_end(&b, &m);

        /* CIE 3: "zR" with udata2 / uleb128 / sdata8 FDEs and "S". */
        cie3 = b.n;
        m = entry_begin(&b, false);
        buf_le(&b, 0, 4);
        buf_u8(&b, 1);
        buf_bytes(&b, "zRS", 4);
        buf_uleb(&b, 4); /* code alignment factor 4 */
        buf_sleb(&b, -8);
        buf_u8(&b, 16);
        buf_uleb(&b, 1);
        buf_u8(&b, 0x0c); /* R: sdata8, absolute */
        cie_initial(&b);
        entry_end(&b, &m);

        m = entry_begin(&b, false);
        buf_le(&b, b.n - cie3, 4);
        buf_le(&b, 0x4000, 8);
        buf_le(&b, 0x100, 8);
        buf_uleb(&b, 0);
        buf_u8(&b, 0x40 | 2); /* advance 2 * 4 */
        buf_u8(&b, 0x0e);
        buf_u8(&b, 32);
        buf_u8(&b, 0x40 | 1); /* advance 4: same rule again (merged) */
        buf_u8(&b, 0x0e);
        buf_u8(&b, 32);
        buf_u8(&b, 0x02); /* advance_loc1 0x10 * 4 */
        buf_u8(&b, 0x10);
        buf_u8(&b, 0x0e);
        buf_u8(&b, 8);
        entry_end(&b, &m);

        /* A zero terminator. */
        buf_le(&b, 0, 4);

        buf_le(&g, 0, 8);
        t = synth_build((const SynthSection[]){ { ".eh_frame", sec, &b }, { ".got", got, &g } }, 2, NULL);
        ASSERT_EQ(t->source, UNWIND_SOURCE_EH_FRAME);
        ASSERT_EQ(t->stats.n_cies, 3);
        ASSERT_EQ(t->stats.n_fdes, 3);
        ASSERT_EQ(t->stats.n_bad_entries, 0);
        ASSERT_EQ(t->base, 0x1000);
        ASSERT_EQ(t->end, 0x4100);

        assert_row(t, 0x1000, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        assert_row(t, 0x1004, CGPROF_CFA_FP, 16, CGPROF_FP_AT_CFA, -2);
        assert_row(t, 0x1010, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0);
        assert_row(t, 0x3000, CGPROF_CFA_SP, 16, CGPROF_FP_SAME, 0);
        assert_row(t, 0x3006, CGPROF_CFA_SP, 24, CGPROF_FP_SAME, 0);
        assert_row(t, 0x300f, CGPROF_CFA_SP, 24, CGPROF_FP_SAME, 0);
        assert_row(t, 0x3010, CGPROF_CFA_PLT, 10, CGPROF_FP_SAME, 0);
        assert_row(t, 0x303f, CGPROF_CFA_PLT, 10, CGPROF_FP_SAME, 0);
        assert_row(t, 0x3040, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0);
        assert_row(t, 0x4000, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        assert_row(t, 0x4008, CGPROF_CFA_SP, 32, CGPROF_FP_SAME, 0);
        assert_row(t, 0x4047, CGPROF_CFA_SP, 32, CGPROF_FP_SAME, 0);
        assert_row(t, 0x404c, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        assert_row(t, 0x40ff, CGPROF_CFA_SP, 8, CGPROF_FP_SAME, 0);
        /* The 0x4008 and 0x400c rows were one. */
        ASSERT_TRUE(unwind_table_lookup(t, 0x400c) == unwind_table_lookup(t, 0x4008));
        ASSERT_TRUE(t->stats.n_rows_raw > t->n_rows);
}

/* A signal trampoline like glibc's __restore_rt: a "zRS" CIE, an FDE whose
 * CFA is the rsp saved in the ucontext at rsp (DW_OP_breg7 160;
 * DW_OP_deref) and whose registers are DW_CFA_expressions into it. Its rows
 * are signal frames; the same program under a CIE without 'S', or another
 * expression under the 'S' CIE, is not understood. */
static void signal_fde(Buf *b, size_t cie, uint64_t start, uint64_t len, const uint8_t *cfa_expr,
                       size_t cfa_len) {
        static const uint8_t rip_expr[] = { 0x77, 0xa8, 0x01 }, rbp_expr[] = { 0x77, 0xf8, 0x00 };
        Mark m = entry_begin(b, false);

        buf_le(b, b->n - cie, 4);
        buf_le(b, start, 8);
        buf_le(b, len, 8);
        buf_uleb(b, 0);
        buf_u8(b, 0x0f); /* def_cfa_expression */
        buf_uleb(b, cfa_len);
        buf_bytes(b, cfa_expr, cfa_len);
        buf_u8(b, 0x10); /* DW_CFA_expression rbp: breg7 120 */
        buf_uleb(b, 6);
        buf_uleb(b, sizeof(rbp_expr));
        buf_bytes(b, rbp_expr, sizeof(rbp_expr));
        buf_u8(b, 0x10); /* DW_CFA_expression rip: breg7 168 */
        buf_uleb(b, 16);
        buf_uleb(b, sizeof(rip_expr));
        buf_bytes(b, rip_expr, sizeof(rip_expr));
        entry_end(b, &m);
}

static size_t signal_cie(Buf *b, const char *augmentation) {
        size_t at = b->n;
        Mark m = entry_begin(b, false);

        buf_le(b, 0, 4);
        buf_u8(b, 1);
        buf_bytes(b, augmentation, strlen(augmentation) + 1);
        buf_uleb(b, 1);
        buf_sleb(b, -8);
        buf_u8(b, 16);
        buf_uleb(b, 1);
        buf_u8(b, 0x0c); /* R: sdata8, absolute */
        entry_end(b, &m);
        return at;
}

TEST(synthetic_signal_frame) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        static const uint8_t ucontext_rsp[] = { 0x77, 0xa0, 0x01, 0x06 },
                             other[] = { 0x77, 0x98, 0x01, 0x06 };
        Buf b = {};
        size_t with_s, without_s;

        with_s = signal_cie(&b, "zRS");
        signal_fde(&b, with_s, 0x1000, 0x0a, ucontext_rsp, sizeof(ucontext_rsp)); /* nop + mov + syscall */
        signal_fde(&b, with_s, 0x2000, 0x10, other, sizeof(other));
        without_s = signal_cie(&b, "zR");
        signal_fde(&b, without_s, 0x3000, 0x10, ucontext_rsp, sizeof(ucontext_rsp));
        buf_le(&b, 0, 4);

        t = synth_build(&(SynthSection){ ".eh_frame", 0x10000, &b }, 1, NULL);
        ASSERT_EQ(t->stats.n_fdes, 3);
        ASSERT_EQ(t->stats.n_bad_entries, 0);
        assert_row(t, 0x1000, CGPROF_CFA_SIGNAL, 0, CGPROF_FP_SAME, 0);
        assert_row(t, 0x1001, CGPROF_CFA_SIGNAL, 0, CGPROF_FP_SAME, 0);
        assert_row(t, 0x1009, CGPROF_CFA_SIGNAL, 0, CGPROF_FP_SAME, 0);
        assert_row(t, 0x100a, CGPROF_CFA_NONE, 0, CGPROF_FP_SAME, 0);
        assert_row(t, 0x2000, CGPROF_CFA_UNSUPPORTED, 0, CGPROF_FP_UNKNOWN, 0);
        assert_row(t, 0x3000, CGPROF_CFA_UNSUPPORTED, 0, CGPROF_FP_UNKNOWN, 0);
        ASSERT_EQ(t->stats.n_unsupported_rows, 2);
}

/* One good FDE and, around it, every way a CFA program or an FDE can be
 * broken: each is skipped and counted, the good one stays. */
TEST(synthetic_bad_entries) {
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        const uint64_t sec = 0x10000;
        Buf b = {};
        size_t cie, textrel_cie;
        Mark m;

#define FDE_BEGIN(start, len)                                                             \
        do {                                                                              \
                m = entry_begin(&b, false);                                               \
                buf_le(&b, b.n - cie, 4);                                                 \
                buf_le(&b, (uint64_t) ((start) - (int64_t) (sec + b.n)) & 0xffffffff, 4); \
                buf_le(&b, (len), 4);                                                     \
                buf_uleb(&b, 0);                                                          \
        } while (0)

        cie = b.n;
        m = entry_begin(&b, false);
        buf_le(&b, 0, 4);
        buf_u8(&b, 1);
        buf_bytes(&b, "zR", 3);
        buf_uleb(&b, 1);
        buf_sleb(&b, -8);
        buf_u8(&b, 16);
        buf_uleb(&b, 1);
        buf_u8(&b, 0x1b); /* pcrel|sdata4 */
        cie_initial(&b);
        entry_end(&b, &m);

        /* Good: 0x1000..0x1010. */
        FDE_BEGIN(0x1000, 0x10);
        fde_push_rbp(&b);
        entry_end(&b, &m);

        /* Overlapping the good one (starts later, inside it). */
        FDE_BEGIN(0x1008, 0x10);
        entry_end(&b, &m);

        /* Unknown opcode (DW_CFA_GNU_window_save, SPARC). */
        FDE_BEGIN(0x2000, 0x10);
        buf_u8(&b, 0x2d);
        entry_end(&b, &m);

        /* restore_state without remember_state. */
        FDE_BEGIN(0x3000, 0x10);
        buf_u8(&b, 0x0b);
        entry_end(&b, &m);

        /* remember_state 17 deep. */
        FDE_BEGIN(0x4000, 0x10);
        for (int i = 0; i < 17; i++)
                buf_u8(&b, 0x0a);
        entry_end(&b, &m);

        /* An expression block longer than the FDE. */
        FDE_BEGIN(0x5000, 0x10);
        buf_u8(&b, 0x0f);
        buf_uleb(&b, 1000);
        entry_end(&b, &m);

        /* A set_loc going backwards. */
        FDE_BEGIN(0x6000, 0x10);
        buf_u8(&b, 0x40 | 4);
        buf_u8(&b, 0x01);
        buf_le(&b, (uint64_t) (0x6000 - (int64_t) (sec + b.n)) & 0xffffffff, 4);
        entry_end(&b, &m);

        /* A range that wraps around. */
        m = entry_begin(&b, false);
        buf_le(&b, b.n - cie, 4);
        buf_le(&b, (uint64_t) (0x7000 - (int64_t) (sec + b.n)) & 0xffffffff, 4);
        buf_le(&b, 0xffffffff, 4);
        buf_uleb(&b, 0);
        entry_end(&b, &m);

        /* A CIE with DW_EH_PE_textrel FDE pointers, and an FDE using it. */
        textrel_cie = b.n;
        m = entry_begin(&b, false);
        buf_le(&b, 0, 4);
        buf_u8(&b, 1);
        buf_bytes(&b, "zR", 3);
        buf_uleb(&b, 1);
        buf_sleb(&b, -8);
        buf_u8(&b, 16);
        buf_uleb(&b, 1);
        buf_u8(&b, 0x23); /* textrel|udata4 */
        cie_initial(&b);
        entry_end(&b, &m);
        m = entry_begin(&b, false);
        buf_le(&b, b.n - textrel_cie, 4);
        buf_le(&b, 0x8000, 4);
        buf_le(&b, 0x10, 4);
        buf_uleb(&b, 0);
        entry_end(&b, &m);

        /* A CIE with an unknown augmentation and no 'z': unusable. */
        m = entry_begin(&b, false);
        buf_le(&b, 0, 4);
        buf_u8(&b, 1);
        buf_bytes(&b, "X", 2);
        buf_uleb(&b, 1);
        buf_sleb(&b, -8);
        buf_u8(&b, 16);
        entry_end(&b, &m);

        /* A CIE of version 2. */
        m = entry_begin(&b, false);
        buf_le(&b, 0, 4);
        buf_u8(&b, 2);
        buf_u8(&b, 0);
        entry_end(&b, &m);

        t = synth_build(&(SynthSection){ ".eh_frame", sec, &b }, 1, NULL);
        ASSERT_EQ(t->stats.n_fdes, 1);
        /* overlap, opcode, restore_state, remember_state, expression, set_loc,
         * wrap, the textrel FDE (its CIE parses: the encoding fails on use),
         * the 'X' CIE, the version 2 CIE */
        ASSERT_EQ(t->stats.n_bad_entries, 10);
        ASSERT_EQ(t->stats.n_cies, 2);
        ASSERT_EQ(t->base, 0x1000);
        ASSERT_EQ(t->end, 0x1010);
        assert_row(t, 0x1004, CGPROF_CFA_FP, 16, CGPROF_FP_AT_CFA, -2);
        ASSERT_EQ(t->n_rows, 4);
#undef FDE_BEGIN
}

/* Spans and an FDE-less section. */
TEST(synthetic_limits) {
        const uint64_t sec = 0x10000;
        Buf b = {};
        size_t cie;
        Mark m;
        int r;

        cie = b.n;
        m = entry_begin(&b, false);
        buf_le(&b, 0, 4);
        buf_u8(&b, 1);
        buf_bytes(&b, "zR", 3);
        buf_uleb(&b, 1);
        buf_sleb(&b, -8);
        buf_u8(&b, 16);
        buf_uleb(&b, 1);
        buf_u8(&b, 0x04); /* udata8 absolute */
        cie_initial(&b);
        entry_end(&b, &m);

        /* Only a CIE: nothing to build. */
        ASSERT_NULL(synth_build(&(SynthSection){ ".eh_frame", sec, &b }, 1, &r));
        ASSERT_EQ(r, -ENODATA);

        /* Two FDEs 8 GiB apart. */
        m = entry_begin(&b, false);
        buf_le(&b, b.n - cie, 4);
        buf_le(&b, 0x1000, 8);
        buf_le(&b, 0x10, 8);
        buf_uleb(&b, 0);
        entry_end(&b, &m);
        m = entry_begin(&b, false);
        buf_le(&b, b.n - cie, 4);
        buf_le(&b, 0x200001000, 8);
        buf_le(&b, 0x10, 8);
        buf_uleb(&b, 0);
        entry_end(&b, &m);
        ASSERT_NULL(synth_build(&(SynthSection){ ".eh_frame", sec, &b }, 1, &r));
        ASSERT_EQ(r, -E2BIG);

        /* Another machine. */
        {
                _cleanup_close_ int fd = synth_elf(&(SynthSection){ ".eh_frame", sec, &b }, 1, EM_386);
                UnwindTable *t = NULL;

                ASSERT_ERROR(unwind_table_build_fd(fd, &t), ENOTSUP);
        }

        /* An empty .eh_frame and no .debug_frame. */
        {
                Buf empty = {};

                ASSERT_NULL(synth_build(&(SynthSection){ ".eh_frame", sec, &empty }, 1, &r));
                ASSERT_EQ(r, -ENODATA);
        }
}

DEFINE_TEST_MAIN
