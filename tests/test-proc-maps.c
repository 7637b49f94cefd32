/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /proc/PID/maps lines, and the cache that lets the readers of one moment
 * share one read (a fake proc root in a temporary directory). */
#include <limits.h>
#include <sys/stat.h>

#include "fileio.h"
#include "proc-maps.h"
#include "tests.h"

static char *make_root(void) {
        char tmpl[] = "/tmp/cgprof-test-proc-maps-XXXXXX";
        char *d = mkdtemp(tmpl);
        ASSERT_NOT_NULL(d);
        return strdup(d);
}

static void write_maps(const char *root, int pid, const char *text) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        ASSERT_TRUE(asprintf(&dir, "%s/%d", root, pid) > 0);
        (void) mkdir(dir, 0755);
        ASSERT_TRUE(asprintf(&path, "%s/maps", dir) > 0);
        FILE *f = fopen(path, "we");
        ASSERT_NOT_NULL(f);
        fputs(text, f);
        ASSERT_EQ(fclose(f), 0);
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
        uint64_t reads, hits;
        char *l;

        ASSERT_NOT_NULL(c);
        write_maps(root, 100, LINE_A);
        write_maps(root, 200, LINE_B);

        l = first_line(c, root, 100);
        ASSERT_STREQ(l, LINE_A);
        free(l);
        /* The process's mappings change; the same moment still sees what
         * it read first (one read for the readers of one moment). */
        write_maps(root, 100, LINE_B);
        l = first_line(c, root, 100);
        ASSERT_STREQ(l, LINE_A);
        free(l);
        proc_maps_cache_stats(c, &reads, &hits);
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
        proc_maps_cache_stats(c, &reads, &hits);
        ASSERT_EQ(reads, UINT64_C(3));
        ASSERT_EQ(hits, UINT64_C(1));

        /* An empty file (a zombie's maps) is an empty stream. */
        write_maps(root, 300, "");
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
        write_maps(root, 100, LINE_A);
        l = first_line(NULL, root, 100);
        ASSERT_STREQ(l, LINE_A);
        free(l);

        proc_maps_cache_free(c);
        remove_root(root);
}

TEST(cache_of_real_process) {
        ProcMapsCache *c = proc_maps_cache_new();
        _cleanup_fclose_ FILE *direct = proc_maps_fopen(NULL, "/proc", getpid());
        _cleanup_fclose_ FILE *cached = proc_maps_fopen(c, "/proc", getpid());
        _cleanup_free_ char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        ssize_t ka, kb;

        ASSERT_NOT_NULL(direct);
        ASSERT_NOT_NULL(cached);
        /* Our first mapping, both ways (the first lines do not change). */
        ka = getline(&a, &na, direct);
        kb = getline(&b, &nb, cached);
        ASSERT_TRUE(ka > 0 && kb > 0);
        ASSERT_STREQ(a, b);
        proc_maps_cache_free(c);
}

DEFINE_TEST_MAIN
