/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The jitdump parser (common/symbols/jitdump.c), on files built here in both
 * byte orders. */
#include <byteswap.h>

#include "jitdump.h"
#include "tests.h"

typedef struct Buf {
        uint8_t data[8192];
        size_t n;
        bool swap;
} Buf;

static void put(Buf *b, const void *p, size_t n) {
        ASSERT_TRUE(b->n + n <= sizeof(b->data));
        memcpy(b->data + b->n, p, n);
        b->n += n;
}

static void put32(Buf *b, uint32_t v) {
        v = b->swap ? bswap_32(v) : v;
        put(b, &v, sizeof(v));
}

static void put64(Buf *b, uint64_t v) {
        v = b->swap ? bswap_64(v) : v;
        put(b, &v, sizeof(v));
}

static void header(Buf *b, uint32_t size) {
        put32(b, JITDUMP_MAGIC);
        put32(b, 1);
        put32(b, size);
        put32(b, 62); /* EM_X86_64 */
        put32(b, 0);
        put32(b, 1);
        put64(b, 123);
        put64(b, 0);
        for (uint32_t i = 40; i < size; i++)
                put(b, "", 1);
}

static void load(Buf *b, uint64_t addr, uint64_t size, const char *name, size_t code) {
        size_t total = 16 + 40 + strlen(name) + 1 + code;

        put32(b, JIT_CODE_LOAD);
        put32(b, (uint32_t) total);
        put64(b, 1000);
        put32(b, 1);
        put32(b, 2);
        put64(b, addr); /* vma */
        put64(b, addr); /* code_addr */
        put64(b, size);
        put64(b, 7); /* code_index */
        put(b, name, strlen(name) + 1);
        for (size_t i = 0; i < code; i++)
                put(b, "\xcc", 1);
}

static void move(Buf *b, uint64_t old_addr, uint64_t new_addr, uint64_t size) {
        put32(b, JIT_CODE_MOVE);
        put32(b, 16 + 48);
        put64(b, 1001);
        put32(b, 1);
        put32(b, 2);
        put64(b, new_addr);
        put64(b, old_addr);
        put64(b, new_addr);
        put64(b, size);
        put64(b, 7);
}

static void debug_info(Buf *b, uint64_t addr) {
        /* Two entries, the second naming the same file as perf's agent does
         * ("\xff"). */
        put32(b, JIT_CODE_DEBUG_INFO);
        put32(b, 16 + 16 + 2 * 16 + 7 + 2);
        put64(b, 1002);
        put64(b, addr);
        put64(b, 2);
        put64(b, addr);
        put32(b, 10);
        put32(b, 0);
        put(b, "App.kt", 7);
        put64(b, addr + 4);
        put32(b, 11);
        put32(b, 0);
        put(b, "\xff", 2);
}

static void record(Buf *b, uint32_t id, uint32_t total) {
        put32(b, id);
        put32(b, total);
        put64(b, 1003);
        for (uint32_t i = 16; i < total; i++)
                put(b, "u", 1);
}

static void assert_lookup(const JitMap *m, uint64_t addr, const char *name, uint64_t offset) {
        uint64_t off = UINT64_MAX;
        const char *n = jit_map_lookup(m, addr, &off);

        ASSERT_STREQ(n, name);
        if (name)
                ASSERT_EQ(off, offset);
}

/* A file as a JVM with perf's agent writes one. */
static void sample(Buf *b) {
        header(b, 40);
        debug_info(b, 0x7f0000001000);
        load(b, 0x7f0000001000, 0x80, "Hot.hotAlpha(J)J", 0x80);
        load(b, 0x7f0000002000, 0x40, "Hot.hotBeta(J)J", 0x40);
        record(b, JIT_CODE_UNWINDING_INFO, 16 + 24 + 8);
        record(b, 99, 20); /* a record of a later version */
        move(b, 0x7f0000002000, 0x7f0000003000, 0x40);
        load(b, 0x7f0000001020, 0x10, "recompiled", 0);
        load(b, 0x7f0000004000, 0, "size zero", 0); /* skipped, counted */
        put32(b, JIT_CODE_CLOSE);
        put32(b, 16);
        put64(b, 1004);
        load(b, 0x7f0000005000, 0x10, "after close", 0);
}

static void assert_sample(const JitMap *m, const JitDumpParser *p, size_t size) {
        assert_lookup(m, 0x7f0000001010, "Hot.hotAlpha(J)J", 0x10);
        assert_lookup(m, 0x7f0000001024, "recompiled", 4);
        assert_lookup(m, 0x7f0000001030, "Hot.hotAlpha(J)J", 0x30);
        assert_lookup(m, 0x7f0000003008, "Hot.hotBeta(J)J", 8);
        assert_lookup(m, 0x7f0000005000, NULL, 0);
        ASSERT_TRUE(p->header_done);
        ASSERT_TRUE(p->closed);
        ASSERT_EQ(p->version, 1);
        ASSERT_EQ(p->elf_mach, 62);
        ASSERT_EQ(p->loads, 3);
        ASSERT_EQ(p->moves, 1);
        ASSERT_EQ(p->malformed, 1);
        ASSERT_EQ(p->records, 9);
        /* Up to the end of the CLOSE record. */
        ASSERT_EQ(p->offset, size - (16 + 40 + strlen("after close") + 1));
}

static void test_orders(bool swap) {
        Buf b = { .swap = swap };

        sample(&b);
        /* Whole, then cut at every byte as a growing file is read. */
        for (size_t cut = 0; cut <= b.n; cut++) {
                _cleanup_(jit_map_freep) JitMap *m = NULL;
                JitDumpParser p = {};

                ASSERT_OK(jit_map_new(0, &m));
                ASSERT_OK(jitdump_feed(&p, m, b.data, cut));
                if (p.header_done)
                        ASSERT_EQ(p.swapped, swap);
                /* Never past a record whose payload was not there, unless
                 * only its code bytes were missing. */
                ASSERT_TRUE(p.offset <= b.n);
                if (p.offset < b.n)
                        ASSERT_OK(jitdump_feed(&p, m, b.data + p.offset, b.n - p.offset));
                assert_sample(m, &p, b.n);
        }
}

TEST(jitdump_native) {
        test_orders(false);
}

TEST(jitdump_swapped) {
        test_orders(true);
}

TEST(jitdump_skips_code_bytes) {
        Buf b = {};
        _cleanup_(jit_map_freep) JitMap *m = NULL;
        JitDumpParser p = {};
        size_t load_end;

        /* The name is there, the code is not yet: the record is taken and
         * the offset points past its code, beyond what was fed. */
        header(&b, 40);
        load(&b, 0x1000, 0x1000, "big", 0x1000);
        load_end = b.n;
        ASSERT_OK(jit_map_new(0, &m));
        ASSERT_OK(jitdump_feed(&p, m, b.data, 40 + 16 + 40 + 4));
        assert_lookup(m, 0x1800, "big", 0x800);
        ASSERT_EQ(p.offset, load_end);
}

TEST(jitdump_larger_header) {
        Buf b = {};
        _cleanup_(jit_map_freep) JitMap *m = NULL;
        JitDumpParser p = {};

        header(&b, 64); /* a later version's header */
        load(&b, 0x1000, 0x10, "f", 0);
        ASSERT_OK(jit_map_new(0, &m));
        ASSERT_OK(jitdump_feed(&p, m, b.data, 63));
        ASSERT_FALSE(p.header_done);
        ASSERT_EQ(p.offset, 0);
        ASSERT_OK(jitdump_feed(&p, m, b.data, b.n));
        assert_lookup(m, 0x1008, "f", 8);
        ASSERT_EQ(p.offset, b.n);
}

TEST(jitdump_malformed) {
        _cleanup_(jit_map_freep) JitMap *m = NULL;

        ASSERT_OK(jit_map_new(0, &m));

        /* Not a jitdump. */
        {
                JitDumpParser p = {};
                static const uint8_t elf[64] = "\177ELF";

                ASSERT_ERROR(jitdump_feed(&p, m, elf, sizeof(elf)), EBADMSG);
        }
        /* Header sizes out of bounds. */
        {
                Buf b = {};
                JitDumpParser p = {};

                header(&b, 40);
                b.data[8] = 39;
                ASSERT_ERROR(jitdump_feed(&p, m, b.data, b.n), EBADMSG);
                b.data[8] = 0;
                b.data[9] = 0;
                b.data[10] = 1; /* 64 KiB */
                ASSERT_ERROR(jitdump_feed(&p, m, b.data, b.n), EBADMSG);
        }
        /* A record smaller than its header: fatal, after what came before. */
        {
                Buf b = {};
                JitDumpParser p = {};
                size_t good;

                header(&b, 40);
                load(&b, 0x1000, 0x10, "before", 0);
                good = b.n;
                put32(&b, JIT_CODE_LOAD);
                put32(&b, 15);
                put64(&b, 0);
                ASSERT_ERROR(jitdump_feed(&p, m, b.data, b.n), EBADMSG);
                ASSERT_EQ(p.offset, good);
                assert_lookup(m, 0x1000, "before", 0);
        }
        /* A load too short for its fields, a name without its NUL, a move
         * of unknown code: skipped by size and counted. */
        {
                Buf b = {};
                JitDumpParser p = {};

                header(&b, 40);
                record(&b, JIT_CODE_LOAD, 16 + 40);
                put32(&b, JIT_CODE_LOAD);
                put32(&b, 16 + 40 + 4);
                put64(&b, 0);
                put32(&b, 1);
                put32(&b, 1);
                put64(&b, 0x2000);
                put64(&b, 0x2000);
                put64(&b, 0x10);
                put64(&b, 1);
                put(&b, "abcd", 4);
                record(&b, JIT_CODE_MOVE, 16 + 47);
                move(&b, 0x9999, 0xaaaa, 0x10);
                load(&b, 0x3000, 0x10, "last", 0);
                ASSERT_OK(jitdump_feed(&p, m, b.data, b.n));
                ASSERT_EQ(p.malformed, 4);
                ASSERT_EQ(p.loads, 1);
                ASSERT_EQ(p.offset, b.n);
                assert_lookup(m, 0x2000, NULL, 0);
                assert_lookup(m, 0xaaaa, NULL, 0);
                assert_lookup(m, 0x3000, "last", 0);
        }
        /* A name that never ends in a record longer than the bound. */
        {
                _cleanup_free_ uint8_t *big = NULL;
                JitDumpParser p = {};
                Buf b = {};
                size_t total = 16 + 40 + JITDUMP_NAME_MAX + 8;

                header(&b, 40);
                put32(&b, JIT_CODE_LOAD);
                put32(&b, (uint32_t) total);
                big = calloc(1, b.n - 8 + total);
                ASSERT_NOT_NULL(big);
                memcpy(big, b.data, b.n);
                memset(big + 40 + 16 + 40, 'n', JITDUMP_NAME_MAX + 8);
                /* Not all there: the bound decides, it does not wait. */
                ASSERT_OK(jitdump_feed(&p, m, big, 40 + 16 + 40 + JITDUMP_NAME_MAX + 1));
                ASSERT_EQ(p.malformed, 1);
                ASSERT_EQ(p.offset, 40 + total);
        }
}

DEFINE_TEST_MAIN;
