/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Configure-time probe (tests/fuzz/meson.build): can clang link a libFuzzer target here? */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        return data && size > 0 ? 0 : 0;
}
