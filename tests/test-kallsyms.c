/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kallsyms.h"
#include "tests.h"

/* A temporary directory for one test, removed with its files by cleanup. */
typedef struct TmpFile {
        char dir[64];
        char path[128];
} TmpFile;

static void tmp_file_done(TmpFile *t) {
        if (t->path[0])
                (void) unlink(t->path);
        if (t->dir[0])
                (void) rmdir(t->dir);
}

static void write_tmp(TmpFile *t, const char *contents) {
        FILE *f;

        snprintf(t->dir, sizeof(t->dir), "/tmp/test-kallsyms.XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(t->dir));
        snprintf(t->path, sizeof(t->path), "%s/kallsyms", t->dir);
        f = fopen(t->path, "we");
        ASSERT_NOT_NULL(f);
        ASSERT_TRUE(fputs(contents, f) >= 0);
        ASSERT_EQ(fclose(f), 0);
}

/* Out of order on purpose, with data symbols and module symbols mixed in. */
static const char synthetic[] = "ffffffff81200000 T schedule\n"
                                "ffffffff81000000 T _text\n"
                                "ffffffff81000000 t startup_64\n"
                                "ffffffff81100000 t do_one_initcall\n"
                                "ffffffff82000000 D jiffies\n"
                                "ffffffff82100000 b some_bss\n"
                                "ffffffff82200000 R some_rodata\n"
                                "ffffffff81300000 W weak_function\n"
                                "ffffffff81400000 w weak_local\n"
                                "ffffffffc0001000 t ext4_get_block\t[ext4]\n"
                                "ffffffffc0000000 T ext4_init_fs\t[ext4]\n"
                                "ffffffffc0002000 d ext4_data\t[ext4]\n"
                                "ffffffffc0100000 t xfs_bmap\t[xfs]\n"
                                "ffffffffc0200000 t bpf_prog_6deef7357e7b4530_foo\t[bpf]\n"
                                "garbage line\n"
                                "\n"
                                "ffffffff81500000 T\n";

TEST(synthetic_count_and_order) {
        _cleanup_(tmp_file_done) TmpFile t = {};
        _cleanup_(kallsyms_freep) Kallsyms *k = NULL;

        write_tmp(&t, synthetic);
        ASSERT_OK(kallsyms_load(t.path, &k));
        /* 10 text symbols (t/T/w/W); data, bss, rodata and junk dropped. */
        ASSERT_EQ(kallsyms_count(k), 10);
}

TEST(synthetic_lookup) {
        _cleanup_(tmp_file_done) TmpFile t = {};
        _cleanup_(kallsyms_freep) Kallsyms *k = NULL;
        const char *module = "unset";
        uint64_t off = 12345;

        write_tmp(&t, synthetic);
        ASSERT_OK(kallsyms_load(t.path, &k));

        /* Exact address. */
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffff81200000ULL, &off, &module), "schedule");
        ASSERT_EQ(off, 0);
        ASSERT_NULL(module);

        /* Nearest below. */
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffff81200123ULL, &off, &module), "schedule");
        ASSERT_EQ(off, 0x123);
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffff810fffffULL, &off, NULL), "_text");
        ASSERT_EQ(off, 0xfffff);
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffff81100001ULL, NULL, NULL), "do_one_initcall");

        /* Aliases at one address: the global one is reported. */
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffff81000010ULL, &off, NULL), "_text");
        ASSERT_EQ(off, 0x10);

        /* Weak symbols are text too. */
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffff81300001ULL, NULL, NULL), "weak_function");
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffff81400001ULL, NULL, NULL), "weak_local");

        /* Data symbols do not capture addresses: jiffies is not text. */
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffff82000010ULL, NULL, NULL), "weak_local");

        /* Modules. */
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffffc0000004ULL, &off, &module), "ext4_init_fs");
        ASSERT_EQ(off, 4);
        ASSERT_STREQ(module, "ext4");
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffffc0001fffULL, &off, &module), "ext4_get_block");
        ASSERT_EQ(off, 0xfff);
        ASSERT_STREQ(module, "ext4");
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffffc0100010ULL, NULL, &module), "xfs_bmap");
        ASSERT_STREQ(module, "xfs");
        ASSERT_STREQ(kallsyms_lookup(k, 0xffffffffc0200010ULL, NULL, &module),
                     "bpf_prog_6deef7357e7b4530_foo");
        ASSERT_STREQ(module, "bpf");

        /* Below the first symbol: nothing, and the out params untouched. */
        off = 777;
        module = "unset";
        ASSERT_NULL(kallsyms_lookup(k, 0xffffffff80ffffffULL, &off, &module));
        ASSERT_NULL(kallsyms_lookup(k, 0, &off, &module));
        ASSERT_EQ(off, 777);
        ASSERT_STREQ(module, "unset");

        /* The top of the address space: the last symbol. */
        ASSERT_STREQ(kallsyms_lookup(k, UINT64_MAX, NULL, NULL), "bpf_prog_6deef7357e7b4530_foo");
}

TEST(zero_addresses) {
        _cleanup_(tmp_file_done) TmpFile t = {};
        Kallsyms *k = NULL;

        write_tmp(&t, "0000000000000000 T _text\n"
                      "0000000000000000 T schedule\n"
                      "0000000000000000 t ext4_get_block\t[ext4]\n");
        ASSERT_ERROR(kallsyms_load(t.path, &k), ENODATA);
        ASSERT_NULL(k);
}

TEST(empty_and_missing) {
        _cleanup_(tmp_file_done) TmpFile t = {};
        Kallsyms *k = NULL;

        write_tmp(&t, "");
        ASSERT_ERROR(kallsyms_load(t.path, &k), ENODATA);
        ASSERT_ERROR(kallsyms_load("/nonexistent/kallsyms", &k), ENOENT);
        ASSERT_NULL(k);
        ASSERT_NULL(kallsyms_lookup(NULL, 1, NULL, NULL));
        ASSERT_EQ(kallsyms_count(NULL), 0);
}

static uint64_t many_addr(unsigned j) {
        return 0x1000 + (uint64_t) j * (UINT64_MAX / 5001 & ~UINT64_C(15));
}

TEST(many_symbols) {
        /* Enough entries for the binary search to take many steps, with
         * addresses spanning the whole u64 range (no "a - b" comparator). */
        _cleanup_(tmp_file_done) TmpFile t = {};
        _cleanup_(kallsyms_freep) Kallsyms *k = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&buf, &size);
        ASSERT_NOT_NULL(f);
        for (unsigned i = 0; i < 5000; i++) {
                unsigned j = (i * 7919) % 5000; /* a permutation */
                uint64_t addr = many_addr(j);

                fprintf(f, "%016" PRIx64 " %c sym_%u\n", addr, j % 2 ? 't' : 'T', j);
        }
        ASSERT_EQ(fclose(f), 0);

        write_tmp(&t, buf);
        ASSERT_OK(kallsyms_load(t.path, &k));
        ASSERT_EQ(kallsyms_count(k), 5000);
        for (unsigned j = 0; j < 5000; j += 7) {
                uint64_t addr = many_addr(j), off;
                char want[32];

                snprintf(want, sizeof(want), "sym_%u", j);
                ASSERT_STREQ(kallsyms_lookup(k, addr + 3, &off, NULL), want);
                ASSERT_EQ(off, 3);
        }
        ASSERT_NULL(kallsyms_lookup(k, 0xfff, NULL, NULL));
}

TEST(live_proc_kallsyms) {
        _cleanup_(kallsyms_freep) Kallsyms *k = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        const char *name, *module = "unset";
        uint64_t addr = 0, off;
        size_t alloc = 0;
        int r;

        r = kallsyms_load("/proc/kallsyms", &k);
        if (r == -ENODATA || r == -EACCES || r == -ENOENT || r == -EPERM) {
                fprintf(stderr, "skipping: /proc/kallsyms addresses are hidden or missing (%s)\n",
                        strerror(-r));
                return;
        }
        ASSERT_OK(r);
        ASSERT_TRUE(kallsyms_count(k) > 1000);

        /* Find schedule's address in the file itself. */
        f = fopen("/proc/kallsyms", "re");
        ASSERT_NOT_NULL(f);
        while (getline(&line, &alloc, f) > 0) {
                char type, sym[256];
                uint64_t a;

                if (sscanf(line, "%" SCNx64 " %c %255s", &a, &type, sym) == 3 && streq(sym, "schedule") &&
                    (type == 'T' || type == 't')) {
                        addr = a;
                        break;
                }
        }
        if (addr == 0) {
                fprintf(stderr, "skipping: no 'schedule' in /proc/kallsyms\n");
                return;
        }

        name = kallsyms_lookup(k, addr + 1, &off, &module);
        ASSERT_NOT_NULL(name);
        /* An alias at the same address could win; schedule has none in
         * practice, but accept any name at that address. */
        if (!streq(name, "schedule"))
                fprintf(stderr, "note: schedule's address resolved to alias %s\n", name);
        ASSERT_EQ(off, 1);
        ASSERT_NULL(module);
        ASSERT_STREQ(kallsyms_lookup(k, addr, &off, NULL), name);
        ASSERT_EQ(off, 0);
}

DEFINE_TEST_MAIN
