/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for /proc/kallsyms and /proc/modules
 * (common/symbols/kallsyms.c).
 *
 * The input is a kallsyms file (from a memfd, read through its
 * /proc/self/fd path as the agent reads /proc/kallsyms). It loads, or fails
 * with -ENODATA (every address 0) or another negative errno. A loaded table
 * (maybe empty) is sorted: the symbol found for an address starts at or below it, and
 * looking up that start finds the same symbol at offset 0; below the first
 * symbol nothing is found. The same file is also read as /proc/modules.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include "fuzz.h"
#include "kallsyms.h"

static void check_at(const Kallsyms *k, uint64_t addr) {
        const char *name, *name2, *module = NULL, *module2 = NULL;
        uint64_t off = UINT64_MAX, off2 = UINT64_MAX;

        name = kallsyms_lookup(k, addr, &off, &module);
        if (!name)
                return;
        CHECK(off <= addr);
        name2 = kallsyms_lookup(k, addr - off, &off2, &module2);
        CHECK(name2 == name && off2 == 0 && module2 == module);
        CHECK(!module || module[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(kallsyms_freep) Kallsyms *k = NULL;
        _cleanup_close_ int fd = fuzz_memfd(data, size);
        char path[64];
        uint64_t h1, h2;
        int r;

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

        CHECK(kallsyms_modules_fingerprint(path, &h1) == 0);
        CHECK(kallsyms_modules_fingerprint(path, &h2) == 0 && h1 == h2);

        r = kallsyms_load(path, &k);
        if (r < 0) {
                CHECK(fuzz_is_errno(r) && r != -EINVAL);
                CHECK(!k);
                return 0;
        }
        CHECK(k); /* maybe empty: addresses, but no text symbol */

        CHECK(!kallsyms_lookup(k, 0, NULL, NULL) || kallsyms_lookup(k, 0, NULL, NULL));
        check_at(k, UINT64_MAX);
        check_at(k, UINT64_C(0xffffffff81000000));
        check_at(k, UINT64_C(0xffffffffc0000000));
        /* Addresses taken from the input itself. */
        for (size_t i = 0; i + 8 <= size && i < 64 * 8; i += 8) {
                uint64_t a;

                memcpy(&a, data + i, 8);
                check_at(k, a);
        }
        return 0;
}
