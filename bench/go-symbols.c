/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench/go-symbols: what Go symbols (common/symbols/gopclntab.c through
 * common/symbols/elf-symtab.c and agent/sampling/symbolizer.c) cost on a big stripped
 * Go binary. Usage: cgprof-bench-go-symbols [FILE [N]]
 * Default: /usr/bin/prometheus (Debian's, 50 MB, Go 1.19, stripped), else
 * /usr/bin/promtool; N = 100000 random addresses.
 *
 * It prints
 *  - cold load: elf_symtab_load() (what the agent does for a file it has
 *    not seen) after the file's pages were dropped from the page cache
 *    (POSIX_FADV_DONTNEED on that file only), then warm (pages cached);
 *    time, and the RSS it adds (file pages the load touched, and heap);
 *  - the agent's path: the program started under ptrace, stopped at its
 *    exec, and captured by a Symbolizer twice (symbolizer_capture(): the
 *    first loads the file's symbols, the second finds them in the cache);
 *  - N lookups of random addresses in the Go text: gopclntab_lookup()
 *    alone, and symbolizer_resolve_user_inline() (mapping, file offset,
 *    then the same), ns per lookup, inlined frames seen, and the RSS the
 *    lookups added (the table's pages they touched);
 *  - the process's peak RSS (VmHWM). */
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elf-symtab.h"
#include "elf-util.h"
#include "gopclntab.h"
#include "symbolizer.h"

static uint64_t now_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
}

/* VmRSS or VmHWM of this process, KiB. */
static long status_kib(const char *key) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        long v = -1;

        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':')
                        v = strtol(line + strlen(key) + 1, NULL, 10);
        return v;
}

static double ms(uint64_t a, uint64_t b) {
        return (double) (b - a) / 1e6;
}

static int load_once(const char *path, bool cold, ElfSymtab **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        long rss0;
        uint64_t t0, t1;
        int r;

        if (fd < 0)
                return -errno;
        if (cold) {
                (void) fdatasync(fd);
                (void) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        }
        rss0 = status_kib("VmRSS");
        t0 = now_nsec();
        r = elf_symtab_load(fd, ret);
        t1 = now_nsec();
        if (r < 0)
                return r;
        printf("%-28s %9.3f ms   RSS +%ld KiB   (%s, %zu functions, symbols: %s)\n",
               cold ? "load, page cache cold" : "load, page cache warm", ms(t0, t1),
               status_kib("VmRSS") - rss0, strna(elf_symtab_go_version(*ret)), elf_symtab_count(*ret),
               elf_symbols_source_to_string(elf_symtab_symbols_source(*ret)));
        return 0;
}

/* The program at path, started with --version, stopped at its exec. */
static pid_t start_stopped(const char *path) {
        int ws;
        pid_t pid = fork();

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);

                if (null >= 0) {
                        dup2(null, STDOUT_FILENO);
                        dup2(null, STDERR_FILENO);
                }
                ptrace(PTRACE_TRACEME, 0, NULL, NULL);
                execl(path, path, "--version", (char *) NULL);
                _exit(127);
        }
        if (waitpid(pid, &ws, 0) < 0 || !WIFSTOPPED(ws)) {
                kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return -ECHILD;
        }
        return pid;
}

static uint64_t xorshift(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

int main(int argc, char *argv[]) {
        _cleanup_(elf_symtab_freep) ElfSymtab *cold = NULL, *warm = NULL;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *m1 = NULL, *m2 = NULL;
        _cleanup_(gopclntab_freep) GoPclntab *t = NULL;
        _cleanup_free_ uint64_t *pcs = NULL;
        const char *path = argc > 1 ? argv[1] : NULL;
        size_t n = argc > 2 ? strtoul(argv[2], NULL, 10) : 100000, inlined = 0, found = 0;
        uint64_t lo, hi, t0, t1, t2, seed = 0x9e3779b97f4a7c15;
        Elf *elf = NULL;
        long rss0;
        pid_t pid;
        int fd, r;

        if (!path)
                path = access("/usr/bin/prometheus", R_OK) >= 0 ? "/usr/bin/prometheus"
                                                                : "/usr/bin/promtool";
        if (access(path, R_OK) < 0) {
                fprintf(stderr, "%s: not found (apt-get install prometheus)\n", path);
                return 77;
        }
        printf("%s\n", path);

        r = load_once(path, true, &cold);
        if (r >= 0)
                r = load_once(path, false, &warm);
        if (r < 0) {
                fprintf(stderr, "Failed to load %s: %s\n", path, strerror(-r));
                return 1;
        }

        /* The agent's path: a Symbolizer capturing a live process. */
        pid = start_stopped(path);
        if (pid < 0) {
                fprintf(stderr, "Failed to start %s: %s\n", path, strerror((int) -pid));
                return 1;
        }
        if (symbolizer_new(NULL, &sym) < 0)
                return 1;
        t0 = now_nsec();
        r = symbolizer_capture(sym, pid, &m1);
        t1 = now_nsec();
        if (r >= 0)
                r = symbolizer_capture(sym, pid, &m2);
        t2 = now_nsec();
        if (r < 0) {
                fprintf(stderr, "Failed to capture PID %d: %s\n", (int) pid, strerror(-r));
                kill(pid, SIGKILL);
                return 1;
        }
        printf("%-28s %9.3f ms   (maps, opens, symbols of every mapping)\n", "agent: first capture",
               ms(t0, t1));
        printf("%-28s %9.3f ms   (maps, opens, symbols from the cache)\n", "agent: second capture",
               ms(t1, t2));

        /* Random addresses across the Go text (a non-PIE binary: its
         * addresses are the process's). */
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || elf_open_fd(fd, &elf) < 0 || gopclntab_load(elf, fd, &t) < 0 ||
            gopclntab_function(t, 0, &lo, NULL, NULL) < 0 ||
            gopclntab_function(t, gopclntab_count(t) - 1, NULL, &hi, NULL) < 0) {
                fprintf(stderr, "%s has no usable .gopclntab\n", path);
                kill(pid, SIGKILL);
                return 1;
        }
        pcs = calloc(MAX(n, (size_t) 1), sizeof(uint64_t));
        if (!pcs)
                return 1;
        for (size_t i = 0; i < n; i++)
                pcs[i] = lo + xorshift(&seed) % (hi - lo);

        rss0 = status_kib("VmRSS");
        t0 = now_nsec();
        for (size_t i = 0; i < n; i++) {
                GoFrame f[SYMBOLIZER_INLINE_MAX];
                size_t k;

                if (gopclntab_lookup(t, pcs[i], f, ELEMENTSOF(f), &k) >= 0) {
                        found++;
                        inlined += k > 1;
                }
        }
        t1 = now_nsec();
        printf("%-28s %9.0f ns   (%zu lookups, %zu found, %zu with inlined calls; RSS +%ld KiB)\n",
               "gopclntab_lookup", (double) (t1 - t0) / (double) MAX(n, (size_t) 1), n, found, inlined,
               status_kib("VmRSS") - rss0);

        found = inlined = 0;
        t0 = now_nsec();
        for (size_t i = 0; i < n; i++) {
                ResolvedFrame f[SYMBOLIZER_INLINE_MAX];
                size_t k;

                if (symbolizer_resolve_user_inline(sym, m1, pcs[i], f, ELEMENTSOF(f), &k) >= 0 &&
                    f[k - 1].name) {
                        found++;
                        inlined += k > 1;
                }
        }
        t1 = now_nsec();
        printf("%-28s %9.0f ns   (%zu lookups, %zu named, %zu with inlined calls)\n",
               "symbolizer_resolve_user", (double) (t1 - t0) / (double) MAX(n, (size_t) 1), n, found,
               inlined);
        printf("%-28s %9ld KiB\n", "peak RSS (VmHWM)", status_kib("VmHWM"));

        kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);
        elf_end(elf);
        close(fd);
        return 0;
}
