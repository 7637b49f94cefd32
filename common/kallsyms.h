/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Kernel symbols from /proc/kallsyms: parsed and sorted once, looked up by
 * binary search. Only text symbols (t/T/w/W) are kept. */

typedef struct Kallsyms Kallsyms;

/* Returns -ENODATA when every address is 0 (kptr_restrict hides them). */
int kallsyms_load(const char *path, Kallsyms **ret);
Kallsyms *kallsyms_free(Kallsyms *k);
DEFINE_TRIVIAL_CLEANUP_FUNC(Kallsyms *, kallsyms_free);

size_t kallsyms_count(const Kallsyms *k);

/* The function containing addr: the nearest symbol at or below it (NULL if
 * addr is below the first symbol). ret_module gets the module name ("ext4")
 * or NULL for the kernel image. */
const char *kallsyms_lookup(const Kallsyms *k, uint64_t addr, uint64_t *ret_offset, const char **ret_module);
