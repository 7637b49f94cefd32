/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Function symbols of one ELF file (libelf from elfutils): .symtab when the
 * file has one, otherwise .dynsym, plus a synthetic "NAME@plt" for each PLT
 * stub; the PT_LOAD segments to turn a file offset into a virtual address;
 * the GNU build ID. */

typedef struct ElfSymtab ElfSymtab;

/* Reads everything it needs from fd (the fd is not kept). */
int elf_symtab_load(int fd, ElfSymtab **ret);
/* The same from an ELF image in memory (the vDSO); the image is copied, not kept. */
int elf_symtab_load_memory(const void *image, size_t size, ElfSymtab **ret);
ElfSymtab *elf_symtab_free(ElfSymtab *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(ElfSymtab *, elf_symtab_free);

/* Lowercase hex build ID, or NULL when the file has none. */
const char *elf_symtab_build_id(const ElfSymtab *s);
/* Whether the symbols came from a full .symtab (false: .dynsym only or none). */
bool elf_symtab_has_full_symtab(const ElfSymtab *s);
size_t elf_symtab_count(const ElfSymtab *s);

/* Replaces s's symbols by those of 'debug' (a separate debug file of the same
 * build: /usr/lib/debug/.build-id/xx/yyyy.debug), keeping s's segments and
 * PLT stubs (a debug file has no PLT contents). */
int elf_symtab_take_symbols(ElfSymtab *s, ElfSymtab *debug);

/* File offset (from /proc/PID/maps) -> virtual address in the file's own
 * address space, through the PT_LOAD segment containing it. -ENOENT if none. */
int elf_symtab_offset_to_vaddr(const ElfSymtab *s, uint64_t offset, uint64_t *ret_vaddr);

/* The PLT stub ("printf@plt", or the section's name for a stub that names no
 * function) or the function symbol containing vaddr (st_value <= vaddr <
 * st_value+st_size, or the nearest below for size-0 symbols). NULL if none.
 * C++ and Rust names come demangled (demangle.h: "std::vector<int,
 * std::allocator<int> >::push_back(int const&)@plt"), others as they are;
 * the name is demangled on its first lookup and kept in s, so lookups on one
 * table must not run concurrently. The name lives as long as s. */
const char *elf_symtab_lookup(const ElfSymtab *s, uint64_t vaddr, uint64_t *ret_offset);

/* The GNU build ID of an ELF file (lowercase hex) in *ret: 1 when found, 0
 * when it has none (*ret untouched). */
typedef struct Elf Elf;
int elf_read_build_id(Elf *elf, char **ret);
