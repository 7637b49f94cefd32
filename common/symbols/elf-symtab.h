/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Function symbols of one ELF file (libelf from elfutils): .symtab when the
 * file has one, otherwise .dynsym and, when the file has MiniDebugInfo (an
 * xz-compressed ELF in .gnu_debugdata, as Fedora and RHEL ship), that ELF's
 * .symtab; plus a synthetic "NAME@plt" for each PLT stub; the PT_LOAD
 * segments to turn a file offset into a virtual address; the GNU build ID.
 * A Go binary's .gopclntab (gopclntab.h) names its Go functions when it has
 * no .symtab (Go binaries ship stripped), and gives the source file, line
 * and inlined calls of every Go function, stripped or not. */

typedef struct ElfSymtab ElfSymtab;

/* Where a table's function symbols came from. */
typedef enum ElfSymbolsSource {
        ELF_SYMBOLS_NONE, /* no function symbols */
        ELF_SYMBOLS_SYMTAB, /* the file's .symtab */
        ELF_SYMBOLS_DYNSYM, /* the file's .dynsym alone */
        ELF_SYMBOLS_MINIDEBUGINFO, /* .dynsym and the .symtab of .gnu_debugdata */
        ELF_SYMBOLS_DEBUG_FILE, /* a separate debug file (elf_symtab_take_symbols()) */
        ELF_SYMBOLS_GOPCLNTAB, /* Go's .gopclntab, the file having no .symtab */
        ELF_SYMBOLS_DEBUGINFOD, /* a debug file fetched from a debuginfod server */
        _ELF_SYMBOLS_SOURCE_MAX,
} ElfSymbolsSource;

/* "none", "symtab", "dynsym", "minidebuginfo", "debug file", "gopclntab",
 * "debuginfod"; NULL if invalid. */
const char *elf_symbols_source_to_string(ElfSymbolsSource source);

/* Reads everything it needs from fd (the fd is not kept). */
int elf_symtab_load(int fd, ElfSymtab **ret);
/* The same from an ELF image in memory (the vDSO); the image is copied, not kept. */
int elf_symtab_load_memory(const void *image, size_t size, ElfSymtab **ret);
ElfSymtab *elf_symtab_free(ElfSymtab *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(ElfSymtab *, elf_symtab_free);

/* Lowercase hex build ID, or NULL when the file has none. */
const char *elf_symtab_build_id(const ElfSymtab *s);
/* Whether the symbols came from a full .symtab (false: .dynsym only, with
 * MiniDebugInfo or not, or none): a separate debug file is worth a look. */
bool elf_symtab_has_full_symtab(const ElfSymtab *s);
size_t elf_symtab_count(const ElfSymtab *s);
/* ELF_SYMBOLS_NONE when the table has no function symbols. */
ElfSymbolsSource elf_symtab_symbols_source(const ElfSymtab *s);
/* Why the file's MiniDebugInfo was not used (negative errno: -EBADMSG
 * corrupt or truncated, -EFBIG larger than elf_minidebuginfo_max_size(),
 * -E2BIG needing too much decoder memory, -ENOEXEC not an ELF, -ENODATA no
 * .symtab in it, -EOPNOTSUPP an xz feature liblzma lacks); 0 when it was,
 * or the file has none. The file's own symbols load all the same. */
int elf_symtab_minidebuginfo_error(const ElfSymtab *s);
/* Why the file's .gopclntab was not used (gopclntab_load(): -EPROTONOSUPPORT
 * a Go older than 1.16, -EBADMSG malformed, ...); 0 when it was, or the file
 * has none. */
int elf_symtab_gopclntab_error(const ElfSymtab *s);
/* A Go binary's Go version ("go1.19.8"), NULL when not a Go binary or unknown. */
const char *elf_symtab_go_version(const ElfSymtab *s);

/* Replaces s's symbols by those of 'debug' (a separate debug file of the same
 * build: /usr/lib/debug/.build-id/xx/yyyy.debug), keeping s's segments and
 * PLT stubs (a debug file has no PLT contents). */
int elf_symtab_take_symbols(ElfSymtab *s, ElfSymtab *debug);
/* Says where the symbols came from, when the caller knows better than
 * elf_symtab_take_symbols() (ELF_SYMBOLS_DEBUG_FILE): a debug file fetched
 * from debuginfod. */
int elf_symtab_set_symbols_source(ElfSymtab *s, ElfSymbolsSource source);

/* File offset (from /proc/PID/maps) -> virtual address in the file's own
 * address space, through the PT_LOAD segment containing it. -ENOENT if none. */
int elf_symtab_offset_to_vaddr(const ElfSymtab *s, uint64_t offset, uint64_t *ret_vaddr);
/* The reverse: a virtual address -> its file offset (what a uprobe takes). */
int elf_symtab_vaddr_to_offset(const ElfSymtab *s, uint64_t vaddr, uint64_t *ret_offset);
/* The address of the function symbol named name (as the file spells it:
 * mangled), -ENOENT when the table has none. */
int elf_symtab_find_name(const ElfSymtab *s, const char *name, uint64_t *ret_vaddr);

/* The PLT stub ("printf@plt", or the section's name for a stub that names no
 * function) or the function symbol containing vaddr (st_value <= vaddr <
 * st_value+st_size, or the nearest below for size-0 symbols). NULL if none.
 * C++ and Rust names come demangled (demangle.h: "std::vector<int,
 * std::allocator<int> >::push_back(int const&)@plt"), others as they are;
 * the name is demangled on its first lookup and kept in s, so lookups on one
 * table must not run concurrently. The name lives as long as s. */
const char *elf_symtab_lookup(const ElfSymtab *s, uint64_t vaddr, uint64_t *ret_offset);

/* One function at an address, with where in its source it was. */
typedef struct ElfFrame {
        const char *name;
        const char *file; /* source file, NULL: unknown */
        uint32_t line; /* 0: unknown */
        bool inlined; /* an inlined call: its caller is the next frame, at the same address */
        uint64_t offset; /* vaddr - the start of the physical function */
} ElfFrame;

/* The most frames elf_symtab_lookup_frames() gives for one address. */
#define ELF_FRAMES_MAX 16U

/* The functions at vaddr, innermost first: in a Go function (.gopclntab),
 * the calls inlined there, then the function holding them, each with its
 * file and line; elsewhere the one function elf_symtab_lookup() names. At
 * most max frames (when there are more, the innermost inlined ones and the
 * physical function); returns how many, 0 when vaddr is in no function.
 * Strings live as long as s. */
size_t elf_symtab_lookup_frames(const ElfSymtab *s, uint64_t vaddr, ElfFrame *frames, size_t max);

/* MiniDebugInfo is decompressed up to min(MINIDEBUGINFO_SIZE_MAX,
 * MINIDEBUGINFO_RATIO_MAX x its compressed size): more is a decompression
 * bomb, not symbols (Fedora's are 3x to 6x, a few MiB at most). */
#define MINIDEBUGINFO_SIZE_MAX ((size_t) 64 * 1024 * 1024)
#define MINIDEBUGINFO_RATIO_MAX 64U
size_t elf_minidebuginfo_max_size(size_t compressed_size);
/* Decompresses one .xz stream (a .gnu_debugdata section's contents) of at
 * most max_size bytes into *ret (malloc()ed, *ret_size bytes): -EBADMSG
 * when it is not .xz, corrupt or truncated, -EFBIG when it holds more than
 * max_size, -E2BIG when its decoder would need more than 80 MiB. */
int elf_minidebuginfo_decompress(const void *data, size_t size, size_t max_size, void **ret,
                                 size_t *ret_size);

/* The GNU build ID of an ELF file (lowercase hex) in *ret: 1 when found, 0
 * when it has none (*ret untouched). */
typedef struct Elf Elf;
int elf_read_build_id(Elf *elf, char **ret);
