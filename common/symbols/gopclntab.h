/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Go's own symbol table, .gopclntab: function names, source files and
 * lines, and inlined calls, for every Go function of a binary, present even
 * in stripped ones (-ldflags="-s -w": no .symtab, no DWARF). Our own reader,
 * no Go toolchain at run time. It reads the layouts of Go 1.16 and 1.17
 * (magic 0xfffffffa), 1.18 and 1.19 (0xfffffff0) and 1.20 to 1.23
 * (0xfffffff1); Go 1.2 to 1.15 (0xfffffffb) and unknown magics are refused.
 *
 * Loading validates the header and keeps pointers into the file, mapped
 * (nothing is decoded or copied); each lookup decodes the function's
 * tables at that address. Every read is bounds-checked against its table:
 * a malformed file gives errors, never a read outside it. */

typedef struct Elf Elf;
typedef struct GoPclntab GoPclntab;

typedef enum GoPclntabFormat {
        GO_PCLNTAB_1_16, /* magic 0xfffffffa: Go 1.16, 1.17 */
        GO_PCLNTAB_1_18, /* magic 0xfffffff0: Go 1.18, 1.19 */
        GO_PCLNTAB_1_20, /* magic 0xfffffff1: Go 1.20 to 1.23 */
        _GO_PCLNTAB_FORMAT_MAX,
        _GO_PCLNTAB_FORMAT_INVALID = -EINVAL,
} GoPclntabFormat;

/* "go1.16", "go1.18", "go1.20" (the first Go version of each layout); NULL if invalid. */
const char *gopclntab_format_to_string(GoPclntabFormat f);

/* Bounds on what a file may ask for: more is not a Go binary. */
#define GOPCLNTAB_SIZE_MAX ((size_t) 1024 * 1024 * 1024)
#define GOPCLNTAB_FUNCS_MAX (UINT32_C(1) << 24)
/* Inlined calls followed at one address (Go inlines a few levels deep). */
#define GOPCLNTAB_INLINE_DEPTH_MAX 64U

/* One function at a PC. A lookup gives the functions inlined there, the
 * innermost first, then the physical function holding the PC: each
 * frame's file and line are where it was executing (for all but the
 * first, the call of the frame before it). */
typedef struct GoFrame {
        const char *function; /* "main.goAlpha"; lives as long as the table */
        const char *file; /* source file as the binary has it, NULL: unknown */
        uint32_t line; /* 0: unknown */
        bool inlined; /* an inlined call: its caller is the next frame */
        uint64_t entry; /* start of the physical function (the same in every frame of a lookup) */
} GoFrame;

/* What gopclntab_new() reads, all in memory the caller keeps alive as long
 * as the table. */
typedef struct GoRegion {
        uint64_t vaddr;
        const void *data;
        size_t size;
} GoRegion;

typedef struct GoPclntabImage {
        const void *pclntab; /* the .gopclntab section's contents */
        size_t pclntab_size;
        uint64_t pclntab_vaddr; /* its address */
        uint64_t text_start; /* Go 1.18+: base of function entries; 0: the header's */
        uint64_t
                gofunc; /* Go 1.18+: the address of go:func.* (moduledata.gofunc); 0: unknown, no inline frames */
        const GoRegion *regions; /* where inline trees are read (.rodata); may be NULL */
        size_t n_regions;
} GoPclntabImage;

/* The table of an ELF file (libelf) opened from fd: -ENODATA when it has no
 * .gopclntab (or .data.rel.ro.gopclntab) section, -EPROTONOSUPPORT for the
 * layout of Go 1.2-1.15 or an unknown one, -EBADMSG when it is malformed,
 * -E2BIG beyond the bounds above. The file is mmap()ed (fd is not kept);
 * with fd < 0 the ELF's image (elf_memory()) is copied. For Go 1.18+ the
 * inline trees are found through the runtime's moduledata, located in the
 * data sections by its pointer to the table; without it (not found) lookups
 * give no inlined frames. The Go version comes from .go.buildinfo. */
int gopclntab_load(Elf *elf, int fd, GoPclntab **ret);
/* The same, reading the ELF's image in place (elf_rawfile(): nothing is
 * mapped or copied): elf must outlive the table. The unwind-table builder's
 * way, which has no fd. */
int gopclntab_load_borrowed(Elf *elf, GoPclntab **ret);
/* The same from memory (borrowed, not copied): tests and fuzzing. */
int gopclntab_new(const GoPclntabImage *image, GoPclntab **ret);
GoPclntab *gopclntab_free(GoPclntab *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(GoPclntab *, gopclntab_free);

GoPclntabFormat gopclntab_format(const GoPclntab *t);
/* "go1.19.8" from .go.buildinfo; NULL when unknown. */
const char *gopclntab_go_version(const GoPclntab *t);
/* Number of functions. */
size_t gopclntab_count(const GoPclntab *t);
/* Whether lookups can give inlined frames (Go 1.18+: go:func.* was found). */
bool gopclntab_has_inline_trees(const GoPclntab *t);

/* The i-th function (sorted by address): [entry, end) and its name. */
int gopclntab_function(const GoPclntab *t, size_t i, uint64_t *ret_entry, uint64_t *ret_end,
                       const char **ret_name);

/* The frames at pc, innermost first (see GoFrame), at most max (> 0): when
 * there are more, the innermost max - 1 inlined frames and the physical
 * one. -ENOENT when pc is in no Go function, -EBADMSG when the function's
 * data is malformed (broken inline data only ends the inlined frames).
 * Strings point into the table. */
int gopclntab_lookup(const GoPclntab *t, uint64_t pc, GoFrame *frames, size_t max, size_t *ret_n);

/* ---- unwinding: each function's stack-pointer delta ---- */

/* runtime/symtab.go's funcFlag (Go 1.17+; 0 in Go 1.16). */
#define GO_FUNC_FLAG_TOPFRAME 0x01U /* the outermost frame of its stack (goexit, mstart, rt0_go) */
#define GO_FUNC_FLAG_SPWRITE 0x02U /* writes SP other than by a constant: pcsp does not hold past that */
#define GO_FUNC_FLAG_ASM 0x04U /* written in assembly */

typedef struct GoFuncInfo {
        uint64_t entry, end; /* [entry, end) */
        const char *name; /* lives as long as the table */
        uint32_t pcsp; /* its pcsp table (an offset in the table's pctab), 0: none */
        uint8_t func_id; /* runtime's funcID (numbered differently by Go versions) */
        uint8_t flag; /* GO_FUNC_FLAG_* */
} GoFuncInfo;

/* The i-th function (sorted by address), for unwinding. -ENOENT past the
 * last, -EBADMSG when its record is malformed. */
int gopclntab_func_info(const GoPclntab *t, size_t i, GoFuncInfo *ret);

/* A pc-value table read run by run. */
typedef struct GoPcValueIter {
        const uint8_t *p, *end;
        uint64_t pc, entry, fn_end;
        uint32_t value;
        uint8_t quantum;
        bool done;
        uint64_t steps; /* (value, pc) pairs read so far */
} GoPcValueIter;

/* The runs of a function's pcsp table: the bytes the function has pushed
 * (the stack pointer's distance below its value at entry, return address
 * not counted) at each address: 0 at entry, the frame size after the
 * prologue. -ENOENT when the function has none. */
int gopclntab_pcsp_begin(const GoPclntab *t, const GoFuncInfo *fn, GoPcValueIter *ret);
/* The next run [*ret_start, *ret_end) and its value: 1; 0 at the end of
 * the table (which may come before the function's end: the rest is
 * unknown); -EBADMSG when the table is malformed (truncated). Runs lie in
 * [entry, end), in order, none empty; a table running past the
 * function's end is cut there. Each call reads at least two bytes of the
 * table, so a table is read in at most its size / 2 steps. */
int gopclntab_pcvalue_next(GoPcValueIter *it, uint64_t *ret_start, uint64_t *ret_end, int32_t *ret_value);

/* Reads the Go version string of a .go.buildinfo section (1.18+: inline;
 * earlier: through pointers, resolved with 'regions'). 0 and *ret
 * malloc()ed, -EBADMSG when malformed, -ENODATA when not found. */
int gopclntab_parse_buildinfo(const void *data, size_t size, const GoRegion *regions, size_t n_regions,
                              char **ret);
