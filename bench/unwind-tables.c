/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench/unwind-tables: what building an unwind table
 * (common/symbols/unwind-table.c) costs, per file. Usage: cgprof-bench-unwind-tables [FILE...]
 * Without arguments: /usr/bin/python3.11, this machine's libc and libstdc++
 * (from ldconfig -p, else Debian's paths) and /usr/lib/chromium/chromium
 * when present.
 *
 * For each file, in a child process of its own (so that one file's peak
 * does not hide the next one's), it prints
 *  - the CFI section used and its size,
 *  - FDEs, and rows before and after merging equal neighbours,
 *  - the build time: median and minimum of 5 builds (each one opens the ELF
 *    file with libelf, parses, builds and frees; the page cache is warm
 *    after the first),
 *  - the peak RSS delta of the first build (getrusage's ru_maxrss, KiB):
 *    heap (rows, FDE list, CIEs) plus the section's file pages, mapped by
 *    libelf; not bytes allocated,
 *  - the builder's table size, rows * 8 bytes,
 *  - the compact form the agent loads (common/symbols/unwind-compact.c):
 *    the time to make it (median of 5), its cells (4 bytes) and pages (8
 *    bytes), the distinct rules it uses, its size and its bytes per row.
 * Then the totals of all files (a CUDA library set, a PyTorch install).
 * Every file's builds run in a child process: the totals come back through
 * shared memory. */
#include <fcntl.h>
#include <inttypes.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "unwind-compact.h"
#include "unwind-table.h"

#define RUNS 5

typedef struct Totals {
        uint64_t files, rows, bytes_rows, bytes_compact, build_ns, compact_ns;
} Totals;

static Totals *totals; /* shared with the children */

static uint64_t now_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
}

static long maxrss_kib(void) {
        struct rusage ru;

        if (getrusage(RUSAGE_SELF, &ru) < 0)
                return 0;
        return ru.ru_maxrss;
}

static int compare_u64(const void *a, const void *b) {
        const uint64_t *x = a, *y = b;

        return CMP(*x, *y);
}

/* The size of the section a table came from. */
static uint64_t section_size(int fd, const char *name) {
        Elf_Scn *scn = NULL;
        uint64_t size = 0;
        size_t shstrndx;
        Elf *elf;

        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (!elf)
                return 0;
        if (elf_getshdrstrndx(elf, &shstrndx) == 0)
                while ((scn = elf_nextscn(elf, scn))) {
                        GElf_Shdr shdr;
                        const char *n;

                        if (!gelf_getshdr(scn, &shdr))
                                continue;
                        n = elf_strptr(elf, shstrndx, shdr.sh_name);
                        if (n && streq(n, name) && shdr.sh_type != SHT_NOBITS) {
                                size = shdr.sh_size;
                                break;
                        }
                }
        elf_end(elf);
        return size;
}

/* The compact form of t: made RUNS times, printed with the rest of the line. */
static int bench_compact(const char *path, const UnwindTable *t, uint64_t build_ns, long rss, int fd) {
        _cleanup_(unwind_compact_freep) UnwindCompact *c = NULL;
        _cleanup_(unwind_rules_freep) UnwindRules *rules = NULL;
        uint64_t ns[RUNS];
        size_t bytes;
        int r;

        r = unwind_rules_new(&rules);
        for (int i = 0; r >= 0 && i < RUNS; i++) {
                uint64_t start = now_nsec();
                c = unwind_compact_free(c);
                r = unwind_compact_build(t, rules, &c);
                ns[i] = now_nsec() - start;
        }
        if (r < 0) {
                printf("%-40s  compact: %s\n", path, strerror(-r));
                return r;
        }
        qsort(ns, RUNS, sizeof(ns[0]), compare_u64);
        bytes = c->n_cells * sizeof(struct cgprof_unwind_cell) +
                c->n_pages * sizeof(struct cgprof_unwind_page);

        printf("%-40s %-12s %9.1f %8zu %9zu %9zu %4zu %9.2f %9ld %10.1f %8.2f %9zu %6zu %6zu %10.1f %5.2f\n",
               path, unwind_source_to_string(t->source),
               (double) section_size(fd, unwind_source_to_string(t->source)) / 1024.0, t->stats.n_fdes,
               t->stats.n_rows_raw, t->n_rows, t->stats.n_bad_entries, (double) build_ns / 1e6, rss,
               (double) (t->n_rows * sizeof(struct cgprof_unwind_row)) / 1024.0, (double) ns[RUNS / 2] / 1e6,
               c->n_cells, c->n_pages, unwind_rules_count(rules) - 1, (double) bytes / 1024.0,
               (double) bytes / (double) t->n_rows);
        __atomic_add_fetch(&totals->files, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&totals->rows, t->n_rows, __ATOMIC_RELAXED);
        __atomic_add_fetch(&totals->bytes_rows, t->n_rows * sizeof(struct cgprof_unwind_row),
                           __ATOMIC_RELAXED);
        __atomic_add_fetch(&totals->bytes_compact, bytes, __ATOMIC_RELAXED);
        __atomic_add_fetch(&totals->build_ns, build_ns, __ATOMIC_RELAXED);
        __atomic_add_fetch(&totals->compact_ns, ns[RUNS / 2], __ATOMIC_RELAXED);
        return 0;
}

static int bench_file(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_(unwind_table_freep) UnwindTable *first = NULL;
        uint64_t ns[RUNS];
        long rss_before, rss_after;
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                printf("%-40s  %s\n", path, strerror(errno));
                return 1;
        }

        rss_before = maxrss_kib();
        ns[0] = now_nsec();
        r = unwind_table_build_fd(fd, &first);
        ns[0] = now_nsec() - ns[0];
        rss_after = maxrss_kib();
        if (r < 0) {
                printf("%-40s  %s\n", path, strerror(-r));
                return 1;
        }
        for (int i = 1; i < RUNS; i++) {
                UnwindTable *t = NULL;
                uint64_t start = now_nsec();

                r = unwind_table_build_fd(fd, &t);
                ns[i] = now_nsec() - start;
                if (r < 0 || t->n_rows != first->n_rows) {
                        printf("%-40s  not reproducible: %s\n", path, r < 0 ? strerror(-r) : "row count");
                        return 1;
                }
                unwind_table_free(t);
        }
        qsort(ns, RUNS, sizeof(ns[0]), compare_u64);

        r = bench_compact(path, first, ns[RUNS / 2], rss_after - rss_before, fd);
        return r < 0 ? 1 : 0;
}

/* The x86-64 path of a library from ldconfig's cache. */
static char *ldconfig_find(const char *soname) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        char *found = NULL;
        FILE *f;

        f = popen("ldconfig -p 2>/dev/null", "r");
        if (!f)
                return NULL;
        while (!found && getline(&line, &size, f) > 0) {
                char *p = line + strspn(line, " \t"), *arrow;

                if (strncmp(p, soname, strlen(soname)) != 0 || p[strlen(soname)] != ' ' ||
                    !strstr(p, "x86-64") || !(arrow = strstr(p, "=> ")))
                        continue;
                found = strndup(arrow + 3, strcspn(arrow + 3, "\n"));
        }
        pclose(f);
        return found;
}

int main(int argc, char *argv[]) {
        static const char *const fallback_libc = "/lib/x86_64-linux-gnu/libc.so.6";
        static const char *const fallback_libstdcxx = "/lib/x86_64-linux-gnu/libstdc++.so.6";
        _cleanup_free_ char *libc = NULL, *libstdcxx = NULL;
        const char *defaults[4];
        const char *const *files;
        size_t n_files = 0;
        int status = 0;

        if (elf_version(EV_CURRENT) == EV_NONE)
                return 1;

        if (argc > 1) {
                files = (const char *const *) argv + 1;
                n_files = (size_t) argc - 1;
        } else {
                libc = ldconfig_find("libc.so.6");
                libstdcxx = ldconfig_find("libstdc++.so.6");
                defaults[n_files++] = "/usr/bin/python3.11";
                defaults[n_files++] = libc ? libc : fallback_libc;
                defaults[n_files++] = libstdcxx ? libstdcxx : fallback_libstdcxx;
                if (access("/usr/lib/chromium/chromium", R_OK) == 0)
                        defaults[n_files++] = "/usr/lib/chromium/chromium";
                files = defaults;
        }

        totals = mmap(NULL, sizeof(Totals), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (totals == MAP_FAILED)
                return 1;
        printf("%-40s %-12s %9s %8s %9s %9s %4s %9s %9s %10s %8s %9s %6s %6s %10s %5s\n", "file", "section",
               "sect KiB", "FDEs", "rows raw", "rows", "bad", "build ms", "RSS+ KiB", "8B KiB", "cmpct ms",
               "cells", "pages", "rules", "cmpct KiB", "B/row");
        fflush(stdout);
        for (size_t i = 0; i < n_files; i++) {
                pid_t pid = fork();
                int ws;

                if (pid < 0)
                        return 1;
                if (pid == 0) {
                        int r = bench_file(files[i]);

                        fflush(stdout);
                        _exit(r);
                }
                if (waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
                        status = 1;
        }
        if (totals->rows > 0)
                printf("total: %" PRIu64 " files, %" PRIu64
                       " rows; 8-byte rows %.1f MiB, compact %.1f MiB (%.2f bytes "
                       "per row); build %.0f ms, compact %.0f ms (medians, summed)\n",
                       totals->files, totals->rows, (double) totals->bytes_rows / 1048576.0,
                       (double) totals->bytes_compact / 1048576.0,
                       (double) totals->bytes_compact / (double) totals->rows,
                       (double) totals->build_ns / 1e6, (double) totals->compact_ns / 1e6);
        return status;
}
