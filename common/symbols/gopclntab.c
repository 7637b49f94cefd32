/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A reader of Go's .gopclntab (see gopclntab.h), written from the layouts
 * Go's runtime reads (runtime/symtab.go, runtime2.go's _func) and
 * debug/gosym's reader.
 *
 * The table: a header (pcHeader: magic, quantum, pointer size, the number
 * of functions, then offsets of its parts from the header), then
 *  - funcnametab: NUL-terminated function names;
 *  - cutab: per compilation unit, uint32 offsets into filetab, one per file;
 *  - filetab: NUL-terminated file names;
 *  - pctab: "pc-value" tables: (value delta, pc delta) pairs of varints,
 *    the value zig-zag encoded, starting at -1 at the function's entry;
 *  - the function table: nfunc (entry, offset of its _func) pairs sorted by
 *    entry, then the end of the last function; entries are absolute before
 *    Go 1.18 (pointer sized), offsets from textStart since (uint32);
 *  - a _func per function: its name, the pc-value tables of its files
 *    (pcfile: file index in its CU) and lines (pcln), npcdata more tables
 *    (PCDATA_InlTreeIndex: the inlined call at each pc, or -1), nfuncdata
 *    pointers (FUNCDATA_InlTree: its inline tree). Those pointers are
 *    absolute before Go 1.18; since, they are uint32 offsets from go:func.*,
 *    an address only the runtime's moduledata holds, so loading looks for
 *    the moduledata in the data sections: the one place that points at the
 *    table, with the addresses of its parts after that pointer.
 *  - An inline tree entry (inlinedCall) names the inlined function and
 *    parentPc, a pc whose position is the call site: at pc, the innermost
 *    frame is the inlined call the pc's InlTreeIndex names, at the file and
 *    line of pc; its caller is the function at entry + parentPc, and so on
 *    until a pc with no inlined call: the physical function.
 *
 * Integers are in the target's byte order, which the magic's tells.
 *
 * Memory: the file is mmap()ed read-only and the table points into it;
 * loading reads the header and, for Go 1.18+, scans the data sections for
 * the moduledata (a few hundred KiB for a 50 MB binary); lookups decode
 * what they need at their pc, nothing is cached. A file truncated in place
 * while mapped would fault (SIGBUS) on its next lookup: the files mapped
 * are executables of running processes, which the kernel refuses to
 * modify (ETXTBSY) while they run, and a snapshot of an exited process is
 * only read for the samples still being drained. */

#include <elf.h>
#include <endian.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "gopclntab.h"

#define GO_MAGIC_1_2 UINT32_C(0xfffffffb)
#define GO_MAGIC_1_16 UINT32_C(0xfffffffa)
#define GO_MAGIC_1_18 UINT32_C(0xfffffff0)
#define GO_MAGIC_1_20 UINT32_C(0xfffffff1)

/* runtime/symtab.go: the pcdata and funcdata indexes read here. */
#define PCDATA_INL_TREE_INDEX 2U
#define FUNCDATA_INL_TREE 3U

/* Regions kept for reading inline trees: the read-only data sections. */
#define GO_REGIONS_MAX 32U
/* The moduledata scan stops after this many bytes of data sections. */
#define MODULEDATA_SCAN_MAX ((size_t) 64 * 1024 * 1024)
/* .go.buildinfo's version string. */
#define GO_VERSION_MAX 128U
#define BUILDINFO_MAGIC "\xff Go buildinf:"
#define BUILDINFO_MAGIC_SIZE 14U

struct GoPclntab {
        GoPclntabFormat format;
        bool big_endian;
        uint8_t ptr_size;
        uint8_t quantum;

        const uint8_t *data; /* the whole table */
        size_t size;
        uint64_t vaddr;

        uint64_t nfunc;
        uint64_t text_start; /* Go 1.18+ */
        size_t field_size; /* of the function table's fields: 4, or the pointer size before Go 1.18 */

        /* The parts, each bounded by the next part or the table's end. */
        const uint8_t *funcnametab, *cutab, *filetab, *pctab, *funcdata;
        size_t funcnametab_size, cutab_size, filetab_size, pctab_size, funcdata_size;

        uint64_t gofunc; /* Go 1.18+: go:func.*, 0: unknown */
        GoRegion regions[GO_REGIONS_MAX];
        size_t n_regions;

        void *map; /* the mmap()ed file, or */
        size_t map_size;
        void *copy; /* a copy of an in-memory image */
        char *go_version;
};

const char *gopclntab_format_to_string(GoPclntabFormat f) {
        static const char *const table[_GO_PCLNTAB_FORMAT_MAX] = {
                [GO_PCLNTAB_1_16] = "go1.16",
                [GO_PCLNTAB_1_18] = "go1.18",
                [GO_PCLNTAB_1_20] = "go1.20",
        };

        return (unsigned) f < _GO_PCLNTAB_FORMAT_MAX ? table[f] : NULL;
}

GoPclntab *gopclntab_free(GoPclntab *t) {
        if (!t)
                return NULL;
        if (t->map)
                (void) munmap(t->map, t->map_size);
        free(t->copy);
        free(t->go_version);
        free(t);
        return NULL;
}

GoPclntabFormat gopclntab_format(const GoPclntab *t) {
        return t ? t->format : _GO_PCLNTAB_FORMAT_INVALID;
}

const char *gopclntab_go_version(const GoPclntab *t) {
        return t ? t->go_version : NULL;
}

size_t gopclntab_count(const GoPclntab *t) {
        return t ? (size_t) t->nfunc : 0;
}

bool gopclntab_has_inline_trees(const GoPclntab *t) {
        return t && (t->format == GO_PCLNTAB_1_16 || t->gofunc != 0);
}

/* ---- reading integers ---- */

static uint32_t read_u32(bool big_endian, const uint8_t *p) {
        uint32_t v;

        memcpy(&v, p, sizeof(v));
        return big_endian ? be32toh(v) : le32toh(v);
}

static uint64_t read_u64(bool big_endian, const uint8_t *p) {
        uint64_t v;

        memcpy(&v, p, sizeof(v));
        return big_endian ? be64toh(v) : le64toh(v);
}

static uint64_t read_uint(bool big_endian, const uint8_t *p, size_t size) {
        return size == 8 ? read_u64(big_endian, p) : read_u32(big_endian, p);
}

static uint32_t u32_at(const GoPclntab *t, const uint8_t *p) {
        return read_u32(t->big_endian, p);
}

/* The bytes [vaddr, vaddr + size) from the regions, NULL when no region
 * holds them all. */
static const uint8_t *region_bytes(const GoRegion *regions, size_t n, uint64_t vaddr, size_t size) {
        for (size_t i = 0; i < n; i++) {
                const GoRegion *g = &regions[i];

                if (vaddr >= g->vaddr && vaddr - g->vaddr <= g->size && size <= g->size - (vaddr - g->vaddr))
                        return (const uint8_t *) g->data + (vaddr - g->vaddr);
        }
        return NULL;
}

/* A NUL-terminated string at off in a part of the table; NULL if it is not
 * terminated inside it. */
static const char *string_at(const uint8_t *table, size_t size, uint64_t off) {
        if (!table || off >= size || !memchr(table + off, 0, size - off))
                return NULL;
        return (const char *) table + off;
}

/* ---- the header ---- */

int gopclntab_new(const GoPclntabImage *image, GoPclntab **ret) {
        _cleanup_(gopclntab_freep) GoPclntab *t = NULL;
        uint64_t offsets[5], words[8];
        const uint8_t *d;
        size_t size, n_words, header_size;
        uint32_t le, be, magic;

        if (!image || !image->pclntab || !ret)
                return -EINVAL;
        d = image->pclntab;
        size = image->pclntab_size;
        if (size > GOPCLNTAB_SIZE_MAX)
                return -E2BIG;
        if (size < 8)
                return -EBADMSG;

        t = calloc(1, sizeof(GoPclntab));
        if (!t)
                return -ENOMEM;

        le = read_u32(false, d);
        be = read_u32(true, d);
        if (le == GO_MAGIC_1_16 || le == GO_MAGIC_1_18 || le == GO_MAGIC_1_20 || le == GO_MAGIC_1_2)
                magic = le;
        else if (be == GO_MAGIC_1_16 || be == GO_MAGIC_1_18 || be == GO_MAGIC_1_20 || be == GO_MAGIC_1_2) {
                magic = be;
                t->big_endian = true;
        } else if ((le & UINT32_C(0xfffffff0)) == UINT32_C(0xfffffff0) ||
                   (be & UINT32_C(0xfffffff0)) == UINT32_C(0xfffffff0))
                return -EPROTONOSUPPORT; /* a layout newer than ours, or older than 1.2 */
        else
                return -EBADMSG;

        /* The 8 bytes every layout since Go 1.2 starts with. */
        if (d[4] != 0 || d[5] != 0 || (d[6] != 1 && d[6] != 2 && d[6] != 4) || (d[7] != 4 && d[7] != 8))
                return -EBADMSG;
        if (magic == GO_MAGIC_1_2)
                return -EPROTONOSUPPORT; /* Go 1.2-1.15 */

        t->format = magic == GO_MAGIC_1_16   ? GO_PCLNTAB_1_16
                    : magic == GO_MAGIC_1_18 ? GO_PCLNTAB_1_18
                                             : GO_PCLNTAB_1_20;
        t->quantum = d[6];
        t->ptr_size = d[7];
        t->data = d;
        t->size = size;
        t->vaddr = image->pclntab_vaddr;

        /* nfunc, nfiles, [textStart,] funcnameOffset, cuOffset,
         * filetabOffset, pctabOffset, pclnOffset. */
        n_words = t->format == GO_PCLNTAB_1_16 ? 7 : 8;
        header_size = 8 + n_words * t->ptr_size;
        if (size < header_size)
                return -EBADMSG;
        for (size_t i = 0; i < n_words; i++)
                words[i] = read_uint(t->big_endian, d + 8 + i * t->ptr_size, t->ptr_size);

        t->nfunc = words[0];
        if (t->format == GO_PCLNTAB_1_16)
                memcpy(offsets, words + 2, sizeof(offsets));
        else {
                t->text_start = image->text_start ?: words[2];
                memcpy(offsets, words + 3, sizeof(offsets));
        }
        for (size_t i = 0; i < ELEMENTSOF(offsets); i++)
                if (offsets[i] < header_size || offsets[i] > size)
                        return -EBADMSG;

        /* Each part ends where the next one starts (the linker's order),
         * or at the end of the table: whatever the order, no part reaches
         * outside the table. */
        const uint8_t **parts[5] = { &t->funcnametab, &t->cutab, &t->filetab, &t->pctab, &t->funcdata };
        size_t *sizes[5] = { &t->funcnametab_size, &t->cutab_size, &t->filetab_size, &t->pctab_size,
                             &t->funcdata_size };
        for (size_t i = 0; i < ELEMENTSOF(offsets); i++) {
                uint64_t end = size;

                for (size_t j = 0; j < ELEMENTSOF(offsets); j++)
                        if (offsets[j] > offsets[i] && offsets[j] < end)
                                end = offsets[j];
                *parts[i] = d + offsets[i];
                *sizes[i] = (size_t) (end - offsets[i]);
        }
        /* The _func records follow the function table in the same part. */
        t->funcdata_size = size - (size_t) offsets[4];

        t->field_size = t->format == GO_PCLNTAB_1_16 ? t->ptr_size : 4;
        if (t->nfunc > GOPCLNTAB_FUNCS_MAX)
                return -E2BIG;
        if ((2 * t->nfunc + 1) * t->field_size > t->funcdata_size)
                return -EBADMSG;

        if (image->n_regions > 0) {
                if (!image->regions)
                        return -EINVAL;
                t->n_regions = MIN(image->n_regions, (size_t) GO_REGIONS_MAX);
                memcpy(t->regions, image->regions, t->n_regions * sizeof(GoRegion));
        }
        if (t->format != GO_PCLNTAB_1_16)
                t->gofunc = image->gofunc;

        *ret = TAKE_PTR(t);
        return 0;
}

/* ---- functions ---- */

static uint64_t functab_field(const GoPclntab *t, uint64_t i) {
        return read_uint(t->big_endian, t->funcdata + i * t->field_size, t->field_size);
}

/* The entry of function i (i == nfunc: the end of the last one). */
static uint64_t functab_pc(const GoPclntab *t, uint64_t i) {
        uint64_t v = functab_field(t, 2 * i);

        return t->format == GO_PCLNTAB_1_16 ? v : t->text_start + v;
}

/* A _func record, decoded. */
typedef struct GoFunc {
        uint64_t entry, end;
        uint32_t name_off;
        uint32_t pcsp, pcfile, pcln;
        uint32_t npcdata;
        uint32_t cu_offset;
        uint8_t func_id, flag; /* flag: Go 1.17+ (a pad byte, 0, in Go 1.16) */
        uint8_t nfuncdata;
        const uint8_t *pcdata; /* npcdata uint32 */
        const uint8_t *funcdata; /* nfuncdata uint32 (1.18+) or pointers */
} GoFunc;

static int func_read(const GoPclntab *t, uint64_t i, GoFunc *ret) {
        size_t fixed, entry_size = t->format == GO_PCLNTAB_1_16 ? t->ptr_size : 4, funcdata_size;
        uint64_t off, entry;
        const uint8_t *f, *p;
        GoFunc fn;

        if (i >= t->nfunc)
                return -ENOENT;
        fn.entry = functab_pc(t, i);
        fn.end = functab_pc(t, i + 1);
        off = functab_field(t, 2 * i + 1);

        /* entry, nameOff, args, deferreturn, pcsp, pcfile, pcln, npcdata,
         * cuOffset, [startLine (1.20+),] funcID, flag, pad, nfuncdata. */
        fixed = entry_size + 32 + (t->format == GO_PCLNTAB_1_20 ? 4 : 0) + 4;
        if (off > t->funcdata_size || fixed > t->funcdata_size - off)
                return -EBADMSG;
        f = t->funcdata + off;

        entry = read_uint(t->big_endian, f, entry_size);
        if ((t->format == GO_PCLNTAB_1_16 ? entry : t->text_start + entry) != fn.entry)
                return -EBADMSG; /* the record is not the function's */
        p = f + entry_size;
        fn.name_off = u32_at(t, p);
        fn.pcsp = u32_at(t, p + 12);
        fn.pcfile = u32_at(t, p + 16);
        fn.pcln = u32_at(t, p + 20);
        fn.npcdata = u32_at(t, p + 24);
        fn.cu_offset = u32_at(t, p + 28);
        fn.func_id = f[fixed - 4];
        fn.flag = f[fixed - 3];
        fn.nfuncdata = f[fixed - 1];

        /* pcdata[npcdata], then funcdata[nfuncdata]: uint32 offsets from
         * go:func.* (1.18+), or pointers aligned to the pointer size
         * (aligned in memory, where the table is loaded). */
        if ((uint64_t) fn.npcdata * 4 > t->funcdata_size - off - fixed)
                return -EBADMSG;
        fn.pcdata = f + fixed;
        p = fn.pcdata + (size_t) fn.npcdata * 4;
        if (t->format == GO_PCLNTAB_1_16) {
                if (t->ptr_size == 8 && ((t->vaddr + (uint64_t) (p - t->data)) & 4))
                        p += 4;
                funcdata_size = (size_t) fn.nfuncdata * t->ptr_size;
        } else
                funcdata_size = (size_t) fn.nfuncdata * 4;
        if (p > t->funcdata + t->funcdata_size ||
            funcdata_size > (size_t) (t->funcdata + t->funcdata_size - p))
                return -EBADMSG;
        fn.funcdata = p;

        *ret = fn;
        return 0;
}

/* The index of the function holding pc. */
static int func_find(const GoPclntab *t, uint64_t pc, uint64_t *ret) {
        uint64_t lo = 0, hi = t->nfunc;

        if (t->nfunc == 0 || pc < functab_pc(t, 0) || pc >= functab_pc(t, t->nfunc))
                return -ENOENT;
        /* The last entry <= pc. */
        while (hi - lo > 1) {
                uint64_t mid = lo + (hi - lo) / 2;

                if (functab_pc(t, mid) <= pc)
                        lo = mid;
                else
                        hi = mid;
        }
        if (pc < functab_pc(t, lo) || pc >= functab_pc(t, lo + 1))
                return -ENOENT; /* unsorted: not a table we can search */
        *ret = lo;
        return 0;
}

int gopclntab_function(const GoPclntab *t, size_t i, uint64_t *ret_entry, uint64_t *ret_end,
                       const char **ret_name) {
        const char *name;
        GoFunc fn;
        int r;

        if (!t)
                return -EINVAL;
        r = func_read(t, i, &fn);
        if (r < 0)
                return r;
        name = string_at(t->funcnametab, t->funcnametab_size, fn.name_off);
        if (!name)
                return -EBADMSG;
        if (ret_entry)
                *ret_entry = fn.entry;
        if (ret_end)
                *ret_end = fn.end;
        if (ret_name)
                *ret_name = name;
        return 0;
}

/* ---- pc-value tables ---- */

static int read_uvarint(const uint8_t **p, const uint8_t *end, uint32_t *ret) {
        uint32_t v = 0;

        for (unsigned shift = 0; shift < 35; shift += 7) {
                uint8_t b;

                if (*p >= end)
                        return -EBADMSG;
                b = *(*p)++;
                v |= (uint32_t) (b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* The value of the pc-value table at off (from pctab) at target, for a
 * function starting at entry: -ENOENT when there is no table or it ends
 * before target. */
static int pcvalue(const GoPclntab *t, uint32_t off, uint64_t entry, uint64_t target, int32_t *ret) {
        const uint8_t *p, *end = t->pctab + t->pctab_size;
        uint64_t pc = entry;
        uint32_t val = (uint32_t) -1;
        int r;

        if (off == 0)
                return -ENOENT;
        if (off >= t->pctab_size)
                return -EBADMSG;
        p = t->pctab + off;

        /* Each step reads at least two bytes: the loop ends with the table. */
        for (;;) {
                uint32_t uv, pcdelta;

                r = read_uvarint(&p, end, &uv);
                if (r < 0)
                        return r;
                if (uv == 0 && pc != entry)
                        return -ENOENT; /* the end of the table */
                val += (uint32_t) - (uv & 1) ^ (uv >> 1);
                r = read_uvarint(&p, end, &pcdelta);
                if (r < 0)
                        return r;
                pc += (uint64_t) pcdelta * t->quantum;
                if (target < pc) {
                        *ret = (int32_t) val;
                        return 0;
                }
        }
}

/* ---- the stack-pointer delta (pcsp), for unwinding ---- */

int gopclntab_func_info(const GoPclntab *t, size_t i, GoFuncInfo *ret) {
        const char *name;
        GoFunc fn;
        int r;

        if (!t || !ret)
                return -EINVAL;
        r = func_read(t, i, &fn);
        if (r < 0)
                return r;
        if (fn.end < fn.entry)
                return -EBADMSG; /* unsorted */
        name = string_at(t->funcnametab, t->funcnametab_size, fn.name_off);
        if (!name)
                return -EBADMSG;
        *ret = (GoFuncInfo){
                .entry = fn.entry,
                .end = fn.end,
                .name = name,
                .pcsp = fn.pcsp,
                .func_id = fn.func_id,
                .flag = fn.flag,
        };
        return 0;
}

int gopclntab_pcsp_begin(const GoPclntab *t, const GoFuncInfo *fn, GoPcValueIter *ret) {
        if (!t || !fn || !ret || fn->end < fn->entry)
                return -EINVAL;
        if (fn->pcsp == 0)
                return -ENOENT;
        if (fn->pcsp >= t->pctab_size)
                return -EBADMSG;
        *ret = (GoPcValueIter){
                .p = t->pctab + fn->pcsp,
                .end = t->pctab + t->pctab_size,
                .pc = fn->entry,
                .entry = fn->entry,
                .fn_end = fn->end,
                .value = (uint32_t) -1,
                .quantum = t->quantum,
        };
        return 0;
}

int gopclntab_pcvalue_next(GoPcValueIter *it, uint64_t *ret_start, uint64_t *ret_end, int32_t *ret_value) {
        if (!it || !ret_start || !ret_end || !ret_value)
                return -EINVAL;

        /* Each step reads at least two bytes of the table: the loop ends
         * with it. A run of no addresses is skipped. */
        while (!it->done) {
                uint32_t uv, pcdelta;
                uint64_t start = it->pc;

                it->steps++;
                if (read_uvarint(&it->p, it->end, &uv) < 0)
                        return -EBADMSG;
                if (uv == 0 && it->pc != it->entry) {
                        it->done = true; /* the end of the table */
                        break;
                }
                it->value += (uint32_t) - (uv & 1) ^ (uv >> 1);
                if (read_uvarint(&it->p, it->end, &pcdelta) < 0)
                        return -EBADMSG;
                if ((uint64_t) pcdelta * it->quantum >= it->fn_end - it->pc) {
                        /* The function's end (a table that runs past it
                         * is cut there). */
                        it->pc = it->fn_end;
                        it->done = true;
                } else
                        it->pc += (uint64_t) pcdelta * it->quantum;
                if (it->pc > start) {
                        *ret_start = start;
                        *ret_end = it->pc;
                        *ret_value = (int32_t) it->value;
                        return 1;
                }
        }
        return 0;
}

static const char *func_name(const GoPclntab *t, uint32_t name_off) {
        return string_at(t->funcnametab, t->funcnametab_size, name_off);
}

/* The file and line of fn at pc (NULL, 0 when unknown). */
static void func_position(const GoPclntab *t, const GoFunc *fn, uint64_t pc, const char **ret_file,
                          uint32_t *ret_line) {
        int32_t fileno, line;
        uint64_t idx;

        *ret_file = NULL;
        *ret_line = 0;
        if (pcvalue(t, fn->pcfile, fn->entry, pc, &fileno) >= 0 && fileno >= 0) {
                idx = (uint64_t) fn->cu_offset + (uint64_t) fileno;
                if (idx < t->cutab_size / 4) {
                        uint32_t off = u32_at(t, t->cutab + idx * 4);

                        if (off != UINT32_MAX)
                                *ret_file = string_at(t->filetab, t->filetab_size, off);
                }
        }
        if (pcvalue(t, fn->pcln, fn->entry, pc, &line) >= 0 && line > 0)
                *ret_line = (uint32_t) line;
}

/* The address of fn's inline tree, or 0 when it has none (or we cannot find it). */
static uint64_t inline_tree(const GoPclntab *t, const GoFunc *fn) {
        if (fn->npcdata <= PCDATA_INL_TREE_INDEX || fn->nfuncdata <= FUNCDATA_INL_TREE)
                return 0;
        if (t->format == GO_PCLNTAB_1_16)
                return read_uint(t->big_endian, fn->funcdata + FUNCDATA_INL_TREE * t->ptr_size, t->ptr_size);

        uint32_t off = u32_at(t, fn->funcdata + FUNCDATA_INL_TREE * 4);
        if (off == UINT32_MAX || t->gofunc == 0)
                return 0;
        return t->gofunc + off;
}

/* The inlined call number ix of the tree at 'tree': its name and parentPc. */
static int inline_call(const GoPclntab *t, uint64_t tree, int32_t ix, uint32_t *ret_name_off,
                       int32_t *ret_parent_pc) {
        /* Go 1.16-1.19: parent int16, funcID uint8, pad, file int32, line
         * int32, func_ int32 (name), parentPc int32. Go 1.20+: funcID
         * uint8, pad[3], nameOff int32, parentPc int32, startLine int32. */
        size_t size = t->format == GO_PCLNTAB_1_20 ? 16 : 20;
        size_t name_at = t->format == GO_PCLNTAB_1_20 ? 4 : 12;
        const uint8_t *p;

        if (ix < 0 || (uint64_t) ix > UINT64_MAX / size || tree > UINT64_MAX - (uint64_t) ix * size)
                return -EBADMSG;
        p = region_bytes(t->regions, t->n_regions, tree + (uint64_t) ix * size, size);
        if (!p)
                return -EBADMSG;
        *ret_name_off = u32_at(t, p + name_at);
        *ret_parent_pc = (int32_t) u32_at(t, p + name_at + 4);
        return 0;
}

int gopclntab_lookup(const GoPclntab *t, uint64_t pc, GoFrame *frames, size_t max, size_t *ret_n) {
        const char *name, *file;
        uint64_t i, tree, at = pc;
        uint32_t line;
        size_t n = 0;
        GoFunc fn;
        int r;

        if (!t || !frames || max == 0 || !ret_n)
                return -EINVAL;

        r = func_find(t, pc, &i);
        if (r < 0)
                return r;
        r = func_read(t, i, &fn);
        if (r < 0)
                return r;
        name = func_name(t, fn.name_off);
        if (!name)
                return -EBADMSG;

        /* The inlined calls at pc, innermost first: each at the position
         * of 'at', then its caller at its parentPc. Malformed data ends the
         * chain there; the physical function is still named. */
        tree = inline_tree(t, &fn);
        for (unsigned depth = 0; tree != 0 && depth < GOPCLNTAB_INLINE_DEPTH_MAX; depth++) {
                uint32_t name_off;
                int32_t ix, parent_pc;
                const char *callee;

                if (pcvalue(t, u32_at(t, fn.pcdata + PCDATA_INL_TREE_INDEX * 4), fn.entry, at, &ix) < 0 ||
                    ix < 0)
                        break;
                if (inline_call(t, tree, ix, &name_off, &parent_pc) < 0 || parent_pc < 0 ||
                    (uint64_t) parent_pc >= fn.end - fn.entry)
                        break;
                callee = func_name(t, name_off);
                if (!callee)
                        break;
                if (n < max - 1) {
                        func_position(t, &fn, at, &file, &line);
                        frames[n++] = (GoFrame){
                                .function = callee,
                                .file = file,
                                .line = line,
                                .inlined = true,
                                .entry = fn.entry,
                        };
                }
                at = fn.entry + (uint64_t) parent_pc;
        }

        func_position(t, &fn, at, &file, &line);
        frames[n++] = (GoFrame){
                .function = name,
                .file = file,
                .line = line,
                .entry = fn.entry,
        };
        *ret_n = n;
        return 0;
}

/* ---- .go.buildinfo ---- */

static int version_string(const uint8_t *p, size_t len, char **ret) {
        char *v;

        if (len == 0 || len > GO_VERSION_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < len; i++)
                if (p[i] < 0x20 || p[i] >= 0x7f)
                        return -EBADMSG;
        v = strndup((const char *) p, len);
        if (!v)
                return -ENOMEM;
        *ret = v;
        return 0;
}

int gopclntab_parse_buildinfo(const void *data, size_t size, const GoRegion *regions, size_t n_regions,
                              char **ret) {
        const uint8_t *d = data, *p, *end;
        uint8_t ptr_size, flags;
        bool big_endian;

        if (!data || !ret)
                return -EINVAL;
        /* "\xff Go buildinf:", pointer size, flags (1: big endian, 2:
         * strings inline, Go 1.18+), padding to 16, then either two
         * pointers to the version's and the module info's Go string
         * headers, or (at 32) the two strings as varint length + bytes. */
        if (size < 32 || memcmp(d, BUILDINFO_MAGIC, BUILDINFO_MAGIC_SIZE) != 0)
                return -ENODATA;
        ptr_size = d[14];
        flags = d[15];
        big_endian = flags & 1;
        if (ptr_size != 4 && ptr_size != 8)
                return -EBADMSG;

        if (flags & 2) {
                uint32_t len;

                p = d + 32;
                end = d + size;
                if (read_uvarint(&p, end, &len) < 0 || len > (size_t) (end - p))
                        return -EBADMSG;
                return version_string(p, len, ret);
        }

        /* The version's string header: {pointer, length}. */
        uint64_t header = read_uint(big_endian, d + 16, ptr_size), str, len;
        const uint8_t *h = region_bytes(regions, n_regions, header, 2 * (size_t) ptr_size);
        if (!h)
                return -ENODATA;
        str = read_uint(big_endian, h, ptr_size);
        len = read_uint(big_endian, h + ptr_size, ptr_size);
        if (len == 0 || len > GO_VERSION_MAX)
                return -EBADMSG;
        p = region_bytes(regions, n_regions, str, (size_t) len);
        if (!p)
                return -ENODATA;
        return version_string(p, (size_t) len, ret);
}

/* ---- ELF files ---- */

/* The moduledata (runtime/symtab.go) of the table's binary: in a data
 * section, a pointer to the table followed by the slices of its parts
 * (funcnametab, cutab, filetab, pctab, pclntable, ftab: pointer, length,
 * capacity each), ..., text at word 22 and gofunc at word 38 (Go
 * 1.18-1.19) or 40 (1.20-1.23: covctrs and ecovctrs came before it). The
 * pointers are the linked addresses (for PIE too: Go's linker writes them
 * as well as their relocations). Returns go:func.*'s address, 0 if not
 * found. */
static uint64_t find_gofunc(const GoPclntab *t, const uint64_t offsets[5], const GoRegion *sections,
                            size_t n_sections) {
        size_t w = t->ptr_size, gofunc_word = t->format == GO_PCLNTAB_1_20 ? 40 : 38, scanned = 0;
        static const size_t slice_words[5] = { 1, 4, 7, 10, 13 };

        for (size_t k = 0; k < n_sections; k++) {
                const GoRegion *s = &sections[k];
                const uint8_t *d = s->data;

                if (s->size < (gofunc_word + 1) * w || scanned > MODULEDATA_SCAN_MAX)
                        continue;
                scanned += s->size;
                for (size_t off = (size_t) ((w - s->vaddr % w) % w); off + (gofunc_word + 1) * w <= s->size;
                     off += w) {
                        bool ok = true;
                        uint64_t text, gofunc;

                        if (read_uint(t->big_endian, d + off, w) != t->vaddr)
                                continue;
                        for (size_t j = 0; j < ELEMENTSOF(slice_words) && ok; j++)
                                ok = read_uint(t->big_endian, d + off + slice_words[j] * w, w) ==
                                     t->vaddr + offsets[j];
                        if (!ok)
                                continue;
                        text = read_uint(t->big_endian, d + off + 22 * w, w);
                        gofunc = read_uint(t->big_endian, d + off + gofunc_word * w, w);
                        if (t->text_start != 0 && text != t->text_start)
                                continue;
                        if (!region_bytes(t->regions, t->n_regions, gofunc, 1))
                                continue;
                        return gofunc;
                }
        }
        return 0;
}

static Elf_Scn *section_by_name(Elf *elf, size_t shstrndx, const char *name, GElf_Shdr *ret) {
        Elf_Scn *scn = NULL;

        while ((scn = elf_nextscn(elf, scn))) {
                const char *n;

                if (!gelf_getshdr(scn, ret))
                        continue;
                n = elf_strptr(elf, shstrndx, ret->sh_name);
                if (n && streq(n, name))
                        return scn;
        }
        return NULL;
}

/* The contents of a section in the file image, NULL when it lies outside it. */
static const uint8_t *section_bytes(const uint8_t *image, size_t image_size, const GElf_Shdr *sh) {
        if (sh->sh_type != SHT_PROGBITS || sh->sh_offset > image_size ||
            sh->sh_size > image_size - sh->sh_offset)
                return NULL;
        return image + sh->sh_offset;
}

/* The section of the table: .gopclntab, or .data.rel.ro.gopclntab. */
static int pclntab_section(Elf *elf, size_t shstrndx, GElf_Shdr *ret) {
        Elf_Scn *scn;

        scn = section_by_name(elf, shstrndx, ".gopclntab", ret);
        if (!scn)
                scn = section_by_name(elf, shstrndx, ".data.rel.ro.gopclntab", ret);
        if (!scn || ret->sh_type != SHT_PROGBITS || ret->sh_size == 0)
                return -ENODATA;
        if (ret->sh_size > GOPCLNTAB_SIZE_MAX)
                return -E2BIG;
        return 0;
}

/* An ELF file's bytes: mapped, or a copy of an in-memory image. */
typedef struct ElfImage {
        const uint8_t *data;
        size_t size;
        void *map; /* owned, or */
        void *copy; /* owned */
} ElfImage;

static void elf_image_done(ElfImage *image) {
        if (image->map)
                (void) munmap(image->map, image->size);
        free(image->copy);
}

/* The file: mapped from fd (only the pages lookups touch are read), or with
 * fd < 0 the in-memory image copied, or borrowed. */
static int elf_image_open(Elf *elf, int fd, bool borrow, ElfImage *ret) {
        const char *raw;
        size_t size;
        void *p;

        if (fd >= 0) {
                struct stat st;

                if (fstat(fd, &st) < 0)
                        return negative_errno();
                if (st.st_size <= 0)
                        return -EBADMSG;
                size = (size_t) st.st_size;
                p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
                if (p == MAP_FAILED)
                        return negative_errno();
                *ret = (ElfImage){ .data = p, .size = size, .map = p };
                return 0;
        }

        raw = elf_rawfile(elf, &size);
        if (!raw || size == 0)
                return -EBADMSG;
        if (borrow) {
                *ret = (ElfImage){ .data = (const uint8_t *) raw, .size = size };
                return 0;
        }
        p = malloc(size);
        if (!p)
                return -ENOMEM;
        memcpy(p, raw, size);
        *ret = (ElfImage){ .data = p, .size = size, .copy = p };
        return 0;
}

/* The data sections of the file, where inline trees, Go strings and the
 * moduledata are read. */
typedef struct GoSections {
        GoRegion regions[GO_REGIONS_MAX]; /* read-only data, then writable data */
        size_t n_regions;
        GoRegion data[GO_REGIONS_MAX]; /* writable data */
        size_t n_data;
} GoSections;

/* Read-only data (inline trees, Go strings), and writable data (where the
 * moduledata is): allocated sections with contents, not code. */
static void data_sections(Elf *elf, const ElfImage *image, GoSections *ret) {
        ret->n_regions = ret->n_data = 0;
        for (Elf_Scn *s = elf_nextscn(elf, NULL); s; s = elf_nextscn(elf, s)) {
                GElf_Shdr h;
                const uint8_t *b;

                if (!gelf_getshdr(s, &h) || !(h.sh_flags & SHF_ALLOC) || (h.sh_flags & SHF_EXECINSTR))
                        continue;
                b = section_bytes(image->data, image->size, &h);
                if (!b || h.sh_size == 0)
                        continue;
                if (!(h.sh_flags & SHF_WRITE) && ret->n_regions < ELEMENTSOF(ret->regions))
                        ret->regions[ret->n_regions++] =
                                (GoRegion){ .vaddr = h.sh_addr, .data = b, .size = h.sh_size };
                else if ((h.sh_flags & SHF_WRITE) && ret->n_data < ELEMENTSOF(ret->data))
                        ret->data[ret->n_data++] =
                                (GoRegion){ .vaddr = h.sh_addr, .data = b, .size = h.sh_size };
        }
        /* Relocation-read-only data is written only at load: read it too. */
        for (size_t i = 0; i < ret->n_data && ret->n_regions < ELEMENTSOF(ret->regions); i++)
                ret->regions[ret->n_regions++] = ret->data[i];
}

/* Go 1.18+: the base of function entries when the header has none, and
 * go:func.*'s address, from the moduledata. */
static void load_gofunc(GoPclntab *t, Elf *elf, size_t shstrndx, const GoSections *sections) {
        uint64_t offsets[5];
        GElf_Shdr text_sh;

        /* Function entries are relative to runtime.text, which the header
         * has (a PIE's may be left unrelocated: 0), as does .text's start
         * (where cgo's C code does not come first). */
        if (t->text_start == 0 && section_by_name(elf, shstrndx, ".text", &text_sh))
                t->text_start = text_sh.sh_addr;

        offsets[0] = (uint64_t) (t->funcnametab - t->data);
        offsets[1] = (uint64_t) (t->cutab - t->data);
        offsets[2] = (uint64_t) (t->filetab - t->data);
        offsets[3] = (uint64_t) (t->pctab - t->data);
        offsets[4] = (uint64_t) (t->funcdata - t->data);
        t->gofunc = find_gofunc(t, offsets, sections->data, sections->n_data);
}

/* The Go version, from .go.buildinfo; left NULL when it cannot be read. */
static void load_go_version(GoPclntab *t, Elf *elf, size_t shstrndx, const ElfImage *image,
                            const GoSections *sections) {
        GElf_Shdr sh;
        const uint8_t *b;

        if (!section_by_name(elf, shstrndx, ".go.buildinfo", &sh))
                return;
        b = section_bytes(image->data, image->size, &sh);
        if (b)
                (void) gopclntab_parse_buildinfo(b, sh.sh_size, sections->regions, sections->n_regions,
                                                 &t->go_version);
}

static int load(Elf *elf, int fd, bool borrow, GoPclntab **ret) {
        _cleanup_(gopclntab_freep) GoPclntab *t = NULL;
        _cleanup_(elf_image_done) ElfImage image = {};
        GoSections sections;
        size_t shstrndx;
        const uint8_t *d;
        GElf_Shdr sh;
        int r;

        if (!elf || !ret)
                return -EINVAL;
        if (elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) < 0)
                return -ENOEXEC;

        r = pclntab_section(elf, shstrndx, &sh);
        if (r < 0)
                return r;
        r = elf_image_open(elf, fd, borrow, &image);
        if (r < 0)
                return r;
        d = section_bytes(image.data, image.size, &sh);
        if (!d)
                return -EBADMSG;
        data_sections(elf, &image, &sections);

        r = gopclntab_new(
                &(GoPclntabImage){
                        .pclntab = d,
                        .pclntab_size = sh.sh_size,
                        .pclntab_vaddr = sh.sh_addr,
                        .regions = sections.regions,
                        .n_regions = sections.n_regions,
                },
                &t);
        if (r < 0)
                return r;
        t->map = TAKE_PTR(image.map);
        t->map_size = image.size;
        t->copy = TAKE_PTR(image.copy);

        if (t->format != GO_PCLNTAB_1_16)
                load_gofunc(t, elf, shstrndx, &sections);
        load_go_version(t, elf, shstrndx, &image, &sections);

        *ret = TAKE_PTR(t);
        return 0;
}

int gopclntab_load(Elf *elf, int fd, GoPclntab **ret) {
        return load(elf, fd, false, ret);
}

int gopclntab_load_borrowed(Elf *elf, GoPclntab **ret) {
        return load(elf, -1, true, ret);
}
