/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the jitdump parser (common/symbols/jitdump.c) and the
 * JIT symbol table (common/symbols/jit-map.c).
 *
 * The input is a jitdump file. It is parsed whole, and again as a growing
 * file is read: the visible size grows by steps the input's first byte
 * picks, and each feed starts at the parser's offset (which may be past the
 * visible end: skipped code bytes). Both must end alike, with sane tables.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <stdint.h>
#include <stdlib.h>

#include "jit-fuzz.h"
#include "jitdump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        JitMap *whole = NULL, *grown = NULL, *small = NULL;
        JitDumpParser p = {}, q = {}, r = {};
        size_t step, visible = 0;
        int rw, rg = 0;

        if (size < 1)
                return 0;
        step = 1 + data[0] % 251;
        data++;
        size--;

        CHECK(jit_map_new(0, &whole) == 0);
        CHECK(jit_map_new(0, &grown) == 0);
        CHECK(jit_map_new(16, &small) == 0);

        rw = jitdump_feed(&p, whole, data, size);
        CHECK(rw == 0 || rw == -EBADMSG);
        jit_fuzz_check(whole);

        while (visible < size && rg == 0) {
                visible = visible + step > size ? size : visible + step;
                if (q.offset >= visible)
                        continue;
                rg = jitdump_feed(&q, grown, data + q.offset, visible - q.offset);
                CHECK(rg == 0 || rg == -EBADMSG);
        }
        /* Whatever was left waiting for more is all there now. */
        for (uint64_t before = UINT64_MAX; rg == 0 && q.offset < size && q.offset != before;) {
                before = q.offset;
                rg = jitdump_feed(&q, grown, data + q.offset, size - q.offset);
        }
        CHECK(rg == rw);
        CHECK(q.offset == p.offset && q.records == p.records && q.loads == p.loads);
        CHECK(q.closed == p.closed && q.malformed == p.malformed);
        jit_fuzz_check(grown);
        jit_fuzz_same(whole, grown);

        (void) jitdump_feed(&r, small, data, size);
        jit_fuzz_check(small);
        CHECK(jit_map_count(small) <= 16);

        jit_map_free(whole);
        jit_map_free(grown);
        jit_map_free(small);
        return 0;
}
