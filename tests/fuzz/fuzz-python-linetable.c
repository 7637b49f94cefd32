/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for what the agent decodes of a CPython process
 * (common/symbols/python-runtime.c): the line tables of every format
 * (co_lnotab of 3.7-3.9, co_linetable of 3.10, the location table of 3.11+)
 * and _PyRuntime.debug_offsets (3.13+).
 *
 * Input: byte 0 picks what (bit 0: debug offsets, else a line table of
 * format 1 + byte0 / 2 % 3), bytes 1-2 co_firstlineno (or the minor
 * version), the rest the table (or the debug offsets' bytes). Every
 * instruction of the table's range is looked up: an answer or an error,
 * never a read outside the table, and a line within what the table's
 * deltas can reach.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "python-runtime.h"

static void check_debug_offsets(const uint8_t *data, size_t size, unsigned minor) {
        const char *missing = NULL;
        PythonOffsets o;
        /* An exact-size copy: ASan sees a read past the input. */
        uint8_t *copy = malloc(size ? size : 1);
        int r;

        CHECK(copy);
        memcpy(copy, data, size);
        r = python_offsets_from_debug(copy, size, 3, minor, &o, &missing);
        CHECK(r == 0 || r == -ENOENT || r == -EBADMSG);
        CHECK(r != -EBADMSG || missing);
        if (r == 0) {
                CHECK(o.minor == minor);
                (void) python_offsets_invalid(&o);
        }
        free(copy);
}

static void check_line_table(unsigned format, int firstlineno, const uint8_t *table, size_t size) {
        /* An exact-size copy: ASan sees a read past the table. */
        uint8_t *copy = malloc(size ? size : 1);
        long reach = 128L * (long) size + 1; /* no table moves more than 128 lines a byte in 3.7-3.10 */

        CHECK(copy);
        memcpy(copy, table, size);
        for (uint32_t instr = 0; instr < 4 * size + 8; instr++) {
                int line = -1, r = python_code_line_format(format, copy, size, firstlineno, instr, &line);
                CHECK(r == 0 || r == -ENOENT || r == -EBADMSG);
                if (r == 0 && format != PYTHON_LINETABLE_LOCATIONS)
                        CHECK(labs((long) line - firstlineno) <= reach);
        }
        free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int16_t first;

        if (size < 3)
                return 0;
        memcpy(&first, data + 1, sizeof(first));
        if (data[0] & 1)
                check_debug_offsets(data + 3, size - 3, 13 + (unsigned) (data[1] % 3));
        else
                check_line_table(PYTHON_LINETABLE_LNOTAB + (data[0] / 2) % 3, first, data + 3, size - 3);
        return 0;
}
