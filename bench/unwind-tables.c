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
 *  - the table size, rows * 8 bytes: what the agent would load into a map. */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "unwind-table.h"

#define RUNS 5

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

        printf("%-40s %-12s %9.1f %8zu %9zu %9zu %6zu %4zu %9.2f %8.2f %9ld %10.1f\n", path,
               unwind_source_to_string(first->source),
               (double) section_size(fd, unwind_source_to_string(first->source)) / 1024.0,
               first->stats.n_fdes, first->stats.n_rows_raw, first->n_rows, first->stats.n_unsupported_rows,
               first->stats.n_bad_entries, (double) ns[RUNS / 2] / 1e6, (double) ns[0] / 1e6,
               rss_after - rss_before, (double) (first->n_rows * sizeof(struct cgprof_unwind_row)) / 1024.0);
        return 0;
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

        printf("%-40s %-12s %9s %8s %9s %9s %6s %4s %9s %8s %9s %10s\n", "file", "section", "sect KiB",
               "FDEs", "rows raw", "rows", "unsup", "bad", "med ms", "min ms", "RSS+ KiB", "table KiB");
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
        return status;
}
