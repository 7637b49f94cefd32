/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the perf map parser (common/symbols/perf-map.c) and the
 * JIT symbol table (common/symbols/jit-map.c).
 *
 * The input is a perf map. It is parsed whole, and again as a growing file
 * is read (fed in chunks whose sizes the input's first byte picks, each
 * feed starting at the parser's offset): both tables must be sane and
 * alike. A third parse into a table of 16 entries must stay within it.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <stdint.h>
#include <stdlib.h>

#include "jit-fuzz.h"
#include "perf-map.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        JitMap *whole = NULL, *grown = NULL, *small = NULL;
        PerfMapParser p = {}, q = {}, r = {};
        const char *text = (const char *) data;
        size_t step, visible = 0;

        if (size < 1)
                return 0;
        step = 1 + data[0] % 97;
        text++;
        size--;

        CHECK(jit_map_new(0, &whole) == 0);
        CHECK(jit_map_new(0, &grown) == 0);
        CHECK(jit_map_new(16, &small) == 0);

        CHECK(perf_map_feed(&p, whole, text, size) == 0);
        CHECK(p.offset <= size);
        /* Only a partial last line is left. */
        CHECK(p.offset == size || !memchr(text + p.offset, '\n', size - p.offset));
        jit_fuzz_check(whole);

        while (visible < size) {
                visible = visible + step > size ? size : visible + step;
                CHECK(perf_map_feed(&q, grown, text + q.offset, visible - q.offset) == 0);
                CHECK(q.offset <= visible);
        }
        CHECK(q.offset == p.offset);
        CHECK(q.lines == p.lines && q.skipped == p.skipped);
        jit_fuzz_check(grown);
        jit_fuzz_same(whole, grown);

        CHECK(perf_map_feed(&r, small, text, size) == 0);
        jit_fuzz_check(small);
        CHECK(jit_map_count(small) <= 16);

        jit_map_free(whole);
        jit_map_free(grown);
        jit_map_free(small);
        return 0;
}
