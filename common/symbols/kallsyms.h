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

/* A fingerprint of the loaded modules as /proc/modules lists them
 * ("ext4 1040384 3 jbd2,mbcache, Live 0xffffffffc0a00000 (E)"): each
 * module's name, size, state, load address and taint flags, not its use
 * count nor its users, which change while its symbols do not. A missing file
 * (a kernel without module support) counts as an empty list. */
int kallsyms_modules_fingerprint(const char *path, uint64_t *ret);

/* The kernel's symbols over time. /proc/kallsyms costs tens of milliseconds
 * to read and sort (most of it the kernel formatting ~100k lines), so the
 * table is loaded on first use and reloaded only when the module list's
 * fingerprint changed, compared at most once per check interval. A lookup
 * that finds no symbol never reloads anything: addresses in no symbol are
 * normal (BPF trampolines, gaps between sections). Symbols that come and go
 * without a module (BPF programs, ftrace trampolines) are picked up with the
 * next module change only.
 *
 * A table whose addresses are hidden (kptr_restrict) or that cannot be read
 * is tried again after the retry interval; a failed reload keeps the old
 * table until then. Time is passed in by the caller (CLOCK_MONOTONIC usec),
 * so tests drive it. */

typedef struct KallsymsCache KallsymsCache;

typedef struct KallsymsCacheOptions {
        const char *kallsyms_path; /* NULL: /proc/kallsyms */
        const char *modules_path; /* NULL: /proc/modules */
        uint64_t check_usec; /* 0: 10 s */
        uint64_t retry_usec; /* 0: 60 s */
} KallsymsCacheOptions;

#define KALLSYMS_CHECK_USEC_DEFAULT (10 * USEC_PER_SEC)
#define KALLSYMS_RETRY_USEC_DEFAULT (60 * USEC_PER_SEC)

int kallsyms_cache_new(const KallsymsCacheOptions *opts, KallsymsCache **ret);
KallsymsCache *kallsyms_cache_free(KallsymsCache *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(KallsymsCache *, kallsyms_cache_free);

/* The table to resolve with at time now (NULL while none could be loaded),
 * loaded or reloaded first if due. It, and the names it returns, stay valid
 * until the next call. Returns 1 when the table was (re)loaded by this call,
 * 0 otherwise; -ENOMEM is the only error (a table that cannot be read is
 * not one: kernel frames then stay unnamed). */
int kallsyms_cache_get(KallsymsCache *c, uint64_t now, const Kallsyms **ret);

/* After a kernel address addr that no symbol of the table covers: BPF
 * programs and trampolines ("bpf_prog_<tag>_<name> [bpf]") come and go
 * without a trace in the modules, so a miss above the end of the image's
 * text (where they and modules are) reloads the table, at most once per
 * check interval since it was read. Returns like kallsyms_cache_get(); the
 * table and names from before are invalid once it returned 1. */
int kallsyms_cache_reload_on_miss(KallsymsCache *c, uint64_t now, uint64_t addr, const Kallsyms **ret);

/* How many times /proc/kallsyms was read (successfully or not): for tests. */
unsigned kallsyms_cache_loads(const KallsymsCache *c);
