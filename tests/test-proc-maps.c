/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /proc/PID/maps lines, and the cache that lets the readers of one moment
 * share one read (a fake proc root in a temporary directory). */
#include <limits.h>
#include <sys/stat.h>

#include "fileio.h"
#include "proc-maps.h"
#include "proc-maps-fixture.h"
#include "tests.h"

static char *make_root(void) {
        char tmpl[] = "/tmp/cgprof-test-proc-maps-XXXXXX";
        char *d = mkdtemp(tmpl);
        ASSERT_NOT_NULL(d);
        return strdup(d);
}

/* The first line of what proc_maps_fopen() gives, or "" when empty. */
static char *first_line(ProcMapsCache *c, const char *root, int pid) {
        _cleanup_fclose_ FILE *f = proc_maps_fopen(c, root, pid);
        char *line = NULL;
        size_t n = 0;
        ASSERT_NOT_NULL(f);
        if (getline(&line, &n, f) < 0) {
                free(line);
                return strdup("");
        }
        return line;
}

static void remove_root(const char *root) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        ASSERT_EQ(system(cmd), 0);
}

#define LINE_A "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/a\n"
#define LINE_B "7f0000000000-7f0000001000 r-xp 00000000 08:02 42      /usr/lib/b.so (deleted)\n"

TEST(parse_line) {
        char line[] = LINE_B;
        ProcMapsEntry e;

        ASSERT_EQ(proc_maps_parse_line(line, &e), 0);
        ASSERT_EQ(e.start, UINT64_C(0x7f0000000000));
        ASSERT_EQ(e.end, UINT64_C(0x7f0000001000));
        ASSERT_EQ(e.inode, UINT64_C(42));
        ASSERT_STREQ(e.path, "/usr/lib/b.so");
        ASSERT_TRUE(e.deleted && proc_maps_entry_executable(&e) && proc_maps_entry_file_backed(&e));

        char bad[] = "not a maps line\n";
        ASSERT_EQ(proc_maps_parse_line(bad, &e), -EBADMSG);
}

TEST(cache_reads_once_until_cleared) {
        _cleanup_free_ char *root = make_root();
        ProcMapsCache *c = proc_maps_cache_new();
        uint64_t reads, hits, put;
        char *l;

        ASSERT_NOT_NULL(c);
        write_proc_maps(root, 100, LINE_A);
        write_proc_maps(root, 200, LINE_B);

        l = first_line(c, root, 100);
        ASSERT_STREQ(l, LINE_A);
        free(l);
        /* The process's mappings change; the same moment still sees what
         * it read first (one read for the readers of one moment). */
        write_proc_maps(root, 100, LINE_B);
        l = first_line(c, root, 100);
        ASSERT_STREQ(l, LINE_A);
        free(l);
        proc_maps_cache_stats(c, &reads, &hits, &put);
        ASSERT_EQ(reads, UINT64_C(1));
        ASSERT_EQ(hits, UINT64_C(1));

        /* Another process is read from its file (and replaces the copy). */
        l = first_line(c, root, 200);
        ASSERT_STREQ(l, LINE_B);
        free(l);

        /* A new moment reads anew. */
        proc_maps_cache_clear(c);
        l = first_line(c, root, 100);
        ASSERT_STREQ(l, LINE_B);
        free(l);
        proc_maps_cache_stats(c, &reads, &hits, &put);
        ASSERT_EQ(reads, UINT64_C(3));
        ASSERT_EQ(hits, UINT64_C(1));

        /* An empty file (a zombie's maps) is an empty stream. */
        write_proc_maps(root, 300, "");
        l = first_line(c, root, 300);
        ASSERT_STREQ(l, "");
        free(l);
        l = first_line(c, root, 300);
        ASSERT_STREQ(l, "");
        free(l);

        /* A process that is gone: ENOENT, as from the file. */
        errno = 0;
        ASSERT_NULL(proc_maps_fopen(c, root, 999));
        ASSERT_EQ(errno, ENOENT);

        /* Without a cache: the file itself, every time. */
        write_proc_maps(root, 100, LINE_A);
        l = first_line(NULL, root, 100);
        ASSERT_STREQ(l, LINE_A);
        free(l);

        proc_maps_cache_free(c);
        remove_root(root);
}

/* The first executable line of f. */
static char *first_executable(FILE *f) {
        char *line = NULL;
        size_t n = 0;
        while (getline(&line, &n, f) > 0) {
                ProcMapsEntry e;
                _cleanup_free_ char *copy = strdup(line);
                ASSERT_NOT_NULL(copy);
                if (proc_maps_parse_line(copy, &e) == 0 && proc_maps_entry_executable(&e))
                        return line;
        }
        free(line);
        return NULL;
}

TEST(cache_of_real_process) {
        ProcMapsCache *c = proc_maps_cache_new();
        _cleanup_fclose_ FILE *direct = proc_maps_fopen(NULL, "/proc", getpid());
        _cleanup_fclose_ FILE *cached = proc_maps_fopen(c, "/proc", getpid());
        _cleanup_free_ char *a = NULL, *b = NULL;

        ASSERT_NOT_NULL(direct);
        ASSERT_NOT_NULL(cached);
        /* Our first executable mapping, both ways (it does not change). */
        a = first_executable(direct);
        b = first_executable(cached);
        ASSERT_NOT_NULL(a);
        ASSERT_NOT_NULL(b);
        ASSERT_STREQ(a, b);
        proc_maps_cache_free(c);
}

/* n lines mapping one file (inode 7) executable, then a line of another
 * file, and readable-only lines in between. */
static char *many_lines(unsigned n) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        ASSERT_NOT_NULL(f);
        for (unsigned i = 0; i < n; i++) {
                fprintf(f, "%x000-%x000 r-xp 00000000 08:02 7      /usr/bin/same\n", 0x1000 + 2 * i,
                        0x1001 + 2 * i);
                fprintf(f, "%x000-%x000 r--p 00000000 08:02 7      /usr/bin/same\n", 0x1001 + 2 * i,
                        0x1002 + 2 * i);
        }
        fprintf(f, "7f0000000000-7f0000001000 r-xp 00000000 08:02 8      /usr/lib/other.so");
        ASSERT_EQ(fclose(f), 0);
        return text;
}

static unsigned count_lines(ProcMapsCache *c, const char *root, int pid, char **ret_last) {
        _cleanup_fclose_ FILE *f = proc_maps_fopen(c, root, pid);
        _cleanup_free_ char *line = NULL;
        size_t n = 0;
        unsigned k = 0;
        ASSERT_NOT_NULL(f);
        while (getline(&line, &n, f) > 0) {
                k++;
                free(*ret_last);
                *ret_last = strdup(line);
        }
        return k;
}

TEST(bounds_leave_out_runs_of_one_file) {
        _cleanup_free_ char *root = make_root();
        _cleanup_free_ char *text = many_lines(20000), *last = NULL;
        ProcMapsCache *c = proc_maps_cache_new();
        ProcMapsText t = {};

        ASSERT_NOT_NULL(c);
        write_proc_maps(root, 100, text);
        /* 20,000 executable mappings of one file in a row: the first
         * PROC_MAPS_SAME_FILE_RUN_MAX, and the other file's (the last line,
         * without a newline) still comes through; no readable-only line. */
        ASSERT_EQ(count_lines(c, root, 100, &last), PROC_MAPS_SAME_FILE_RUN_MAX + 1U);
        ASSERT_TRUE(strstr(last, "/usr/lib/other.so") != NULL);
        ASSERT_EQ(proc_maps_cache_dropped(c, root, 100), (size_t) (20000 - PROC_MAPS_SAME_FILE_RUN_MAX));
        ASSERT_EQ(proc_maps_cache_dropped(c, root, 101), (size_t) 0);

        /* Read off the loop and handed over: the same, and no read. */
        uint64_t reads, hits, put;
        ASSERT_EQ(proc_maps_text_read(root, 100, &t), 0);
        ASSERT_EQ(t.dropped, (size_t) (20000 - PROC_MAPS_SAME_FILE_RUN_MAX));
        proc_maps_cache_clear(c);
        proc_maps_cache_put(c, root, 100, &t);
        ASSERT_NULL(t.buf);
        ASSERT_EQ(count_lines(c, root, 100, &last), PROC_MAPS_SAME_FILE_RUN_MAX + 1U);
        proc_maps_cache_stats(c, &reads, &hits, &put);
        ASSERT_EQ(reads, UINT64_C(1));
        ASSERT_EQ(put, UINT64_C(1));

        /* A process gone before the worker read it: the readers see ENOENT. */
        ASSERT_EQ(proc_maps_text_read(root, 999, &t), -ENOENT);
        proc_maps_cache_put(c, root, 999, &t);
        errno = 0;
        ASSERT_NULL(proc_maps_fopen(c, root, 999));
        ASSERT_EQ(errno, ENOENT);

        proc_maps_cache_free(c);
        remove_root(root);
}

TEST(bounds_cap_executable_mappings) {
        _cleanup_free_ char *root = make_root(), *last = NULL;
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        ProcMapsCache *c = proc_maps_cache_new();

        /* 5,000 different files, each mapped once. */
        ASSERT_NOT_NULL(f);
        for (unsigned i = 0; i < 5000; i++)
                fprintf(f, "%x000-%x000 r-xp 00000000 08:02 %u      /usr/lib/lib%u.so\n", 0x1000 + i,
                        0x1001 + i, 100 + i, i);
        ASSERT_EQ(fclose(f), 0);
        write_proc_maps(root, 100, text);
        ASSERT_EQ(count_lines(c, root, 100, &last), (unsigned) PROC_MAPS_EXECUTABLE_MAX);
        ASSERT_EQ(proc_maps_cache_dropped(c, root, 100), (size_t) (5000 - PROC_MAPS_EXECUTABLE_MAX));
        free(text);
        proc_maps_cache_free(c);
        remove_root(root);
}

DEFINE_TEST_MAIN
