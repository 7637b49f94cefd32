/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Function symbols, PT_LOAD segments and the GNU build ID of one ELF file,
 * read with elfutils' libelf and copied out: no Elf* (nor the fd, nor the
 * mapping) outlives elf_symtab_load().
 *
 * Symbols are sorted by address; aliases (several names at one address, e.g.
 * "getpid" and "__getpid") are folded into one entry, named as perf would. A symbol without a size (hand-written assembly) ends at the next
 * symbol or at the end of its section, whichever comes first. Symbols may
 * nest (a sized function with local labels typed FUNC inside): each entry
 * keeps the largest end of all entries up to it, so a lookup knows when no
 * earlier symbol can contain an address and stops walking back.
 *
 * MiniDebugInfo (Fedora's find-debuginfo, also gdb's and perf's name): a
 * stripped file's .gnu_debugdata is an xz-compressed ELF whose .symtab keeps
 * the function symbols .dynsym lacks. It is decoded (liblzma, a bounded
 * output and decoder memory), opened with elf_memory() and read with the
 * file's .dynsym as one table; the decoded image lives only while loading.
 *
 * PLT stubs have no symbols; like perf and objdump, each gets a synthetic
 * one, "NAME@plt", so a sample in a stub (a call through it, or a frame
 * pointer walk that lands on a lazily bound GOT value) is attributed rather
 * than left unknown. On x86-64 a stub's "jmp *DISP(%rip)" names the GOT slot,
 * and the JUMP_SLOT/GLOB_DAT relocation of that slot names the function;
 * that covers .plt, .plt.sec (IBT) and .plt.got alike. Stubs without such a
 * jump (PLT0, the lazy-binding half of an IBT .plt) and every stub on other
 * architectures are named after their section (".plt"). They are kept apart
 * from the function symbols, so a separate debug file (whose .plt is
 * NOBITS) replaces the latter and keeps them.
 *
 * Names are kept as the file has them (aliases are chosen by them) and
 * demangled on the first lookup that returns them (demangle.h: C++ and
 * Rust), the result kept beside the entry: once per symbol, not per sample,
 * and only for the symbols a profile hits: demangling all 3839 of
 * libstdc++ takes ~2.9 ms (0.75 us each), one and a half times loading them
 * (~2 ms), and keeps ~580 KB of names. The cache is an array of its own,
 * calloc()ed at load: a pointer more in ElfSym made the load a fifth slower
 * (the sort moves larger entries).
 *
 * Go binaries: their .gopclntab (gopclntab.c) is loaded beside the symbols
 * (the file mapped, the header read: well under a millisecond even for a
 * 50 MB binary). Without a .symtab (Go binaries ship stripped) it names the
 * Go functions, before .dynsym (a cgo binary's imports); with one, the
 * names are .symtab's as before. Either way elf_symtab_lookup_frames()
 * takes the frames of a Go function from it: the calls inlined at the
 * address, then the function, each with its file and line. */

#include <gelf.h>
#include <libelf.h>
#include <lzma.h>

#include "demangle.h"
#include "elf-symtab.h"
#include "elf-util.h"
#include "gopclntab.h"

/* When a size-0 symbol is the last one and its section is unknown. */
#define UNSIZED_SYMBOL_MAX 4096U
/* The GNU build ID is 20 bytes (sha1) or 16 (md5/uuid); refuse silly ones. */
#define BUILD_ID_SIZE_MAX 64U
/* MiniDebugInfo: what liblzma may allocate (the dictionary: xz -9 asks for
 * 64 MiB, the default -6 for 8 MiB); the first output buffer. */
#define MINIDEBUGINFO_MEMLIMIT (80U * 1024 * 1024)
#define MINIDEBUGINFO_CHUNK (64U * 1024)

typedef struct ElfSym {
        uint64_t addr;
        uint64_t end; /* exclusive */
        uint64_t max_end; /* max(end) over this entry and every one before it */
        const char *name; /* in the pool (PLT stubs: owned) */
} ElfSym;

typedef struct ElfSegment {
        uint64_t offset, filesz, vaddr;
} ElfSegment;

struct ElfSymtab {
        ElfSym *syms;
        size_t n_syms;
        char *pool;
        bool full_symtab;
        ElfSymbolsSource source;
        int minidebuginfo_error; /* negative errno: .gnu_debugdata was unusable */

        GoPclntab *go; /* a Go binary's .gopclntab, or NULL */
        int gopclntab_error; /* negative errno: .gopclntab was unusable */

        ElfSym *plt; /* sorted, disjoint; names are owned */
        size_t n_plt;

        /* The name lookups return, per entry of syms and plt: NULL until
         * the first lookup of the entry; its name when that is not mangled;
         * else the demangled name, owned. */
        const char **syms_shown, **plt_shown;

        ElfSegment *segments;
        size_t n_segments;

        char *build_id;
};

static const char **shown_free(const char **shown, const ElfSym *syms, size_t n) {
        if (!shown)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (shown[i] != syms[i].name)
                        free((char *) shown[i]);
        free(shown);
        return NULL;
}

ElfSymtab *elf_symtab_free(ElfSymtab *s) {
        if (!s)
                return NULL;
        shown_free(s->syms_shown, s->syms, s->n_syms);
        free(s->syms);
        free(s->pool);
        shown_free(s->plt_shown, s->plt, s->n_plt);
        for (size_t i = 0; i < s->n_plt; i++)
                free((char *) s->plt[i].name);
        free(s->plt);
        free(s->segments);
        free(s->build_id);
        gopclntab_free(s->go);
        free(s);
        return NULL;
}

const char *elf_symtab_build_id(const ElfSymtab *s) {
        return s ? s->build_id : NULL;
}

bool elf_symtab_has_full_symtab(const ElfSymtab *s) {
        return s && s->full_symtab;
}

size_t elf_symtab_count(const ElfSymtab *s) {
        if (!s)
                return 0;
        return s->n_syms + (s->source == ELF_SYMBOLS_GOPCLNTAB ? gopclntab_count(s->go) : 0);
}

ElfSymbolsSource elf_symtab_symbols_source(const ElfSymtab *s) {
        return elf_symtab_count(s) > 0 ? s->source : ELF_SYMBOLS_NONE;
}

int elf_symtab_minidebuginfo_error(const ElfSymtab *s) {
        return s ? s->minidebuginfo_error : 0;
}

int elf_symtab_gopclntab_error(const ElfSymtab *s) {
        return s ? s->gopclntab_error : 0;
}

const char *elf_symtab_go_version(const ElfSymtab *s) {
        return s ? gopclntab_go_version(s->go) : NULL;
}

const char *elf_symbols_source_to_string(ElfSymbolsSource source) {
        static const char *const table[_ELF_SYMBOLS_SOURCE_MAX] = {
                [ELF_SYMBOLS_NONE] = "none",
                [ELF_SYMBOLS_SYMTAB] = "symtab",
                [ELF_SYMBOLS_DYNSYM] = "dynsym",
                [ELF_SYMBOLS_MINIDEBUGINFO] = "minidebuginfo",
                [ELF_SYMBOLS_DEBUG_FILE] = "debug file",
                [ELF_SYMBOLS_GOPCLNTAB] = "gopclntab",
                [ELF_SYMBOLS_DEBUGINFOD] = "debuginfod",
        };

        return (unsigned) source < _ELF_SYMBOLS_SOURCE_MAX ? table[source] : NULL;
}

static int hexify(const uint8_t *p, size_t n, char **ret) {
        static const char hex[] = "0123456789abcdef";
        char *h;

        h = malloc(n * 2 + 1);
        if (!h)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                h[2 * i] = hex[p[i] >> 4];
                h[2 * i + 1] = hex[p[i] & 15];
        }
        h[2 * n] = '\0';
        *ret = h;
        return 0;
}

/* Returns 1 and the hex build ID when data holds an NT_GNU_BUILD_ID note. */
static int build_id_from_notes(Elf_Data *data, char **ret) {
        size_t off = 0, next, name_off, desc_off;
        GElf_Nhdr nhdr;

        if (!data || !data->d_buf)
                return 0;

        while (off < data->d_size && (next = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
                if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == sizeof(ELF_NOTE_GNU) &&
                    memcmp((const char *) data->d_buf + name_off, ELF_NOTE_GNU, sizeof(ELF_NOTE_GNU)) == 0 &&
                    nhdr.n_descsz > 0 && nhdr.n_descsz <= BUILD_ID_SIZE_MAX) {
                        int r = hexify((const uint8_t *) data->d_buf + desc_off, nhdr.n_descsz, ret);
                        return r < 0 ? r : 1;
                }
                off = next;
        }
        return 0;
}

static int read_build_id(Elf *elf, size_t phnum, char **ret) {
        Elf_Scn *scn = NULL;
        int r;

        /* Sections first: a separate debug file keeps its notes there, while
         * its PT_NOTE may point at data objcopy dropped. */
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;

                if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
                        continue;
                r = build_id_from_notes(elf_getdata(scn, NULL), ret);
                if (r != 0)
                        return r;
        }

        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr phdr;

                if (!gelf_getphdr(elf, (int) i, &phdr) || phdr.p_type != PT_NOTE)
                        continue;
                r = build_id_from_notes(elf_getdata_rawchunk(elf, (int64_t) phdr.p_offset, phdr.p_filesz,
                                                             phdr.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR),
                                        ret);
                if (r != 0)
                        return r;
        }
        return 0;
}

int elf_read_build_id(Elf *elf, char **ret) {
        size_t phnum;

        if (elf_getphdrnum(elf, &phnum) < 0)
                phnum = 0;
        return read_build_id(elf, phnum, ret);
}

static int segment_compare(const void *a, const void *b) {
        const ElfSegment *x = a, *y = b;

        return CMP(x->offset, y->offset);
}

static int read_segments(Elf *elf, size_t phnum, ElfSymtab *s) {
        size_t n = 0;

        if (phnum == 0)
                return 0;
        s->segments = calloc(phnum, sizeof(ElfSegment));
        if (!s->segments)
                return -ENOMEM;

        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr phdr;

                if (!gelf_getphdr(elf, (int) i, &phdr))
                        return -EBADMSG;
                if (phdr.p_type != PT_LOAD || phdr.p_filesz == 0)
                        continue;
                s->segments[n++] = (ElfSegment){
                        .offset = phdr.p_offset,
                        .filesz = phdr.p_filesz,
                        .vaddr = phdr.p_vaddr,
                };
        }
        s->n_segments = n;
        qsort(s->segments, n, sizeof(ElfSegment), segment_compare);
        return 0;
}

/* A symbol while loading, with what decides which of a set of aliases names
 * the address (perf's choice): a sized one, then a global one, then a local
 * one before a weak one, then the fewest leading underscores, then the
 * longest name. */
typedef struct RawSym {
        ElfSym sym;
        uint64_t section_end; /* 0: unknown */
        uint8_t rank;
} RawSym;

static int bind_rank(unsigned bind) {
        switch (bind) {
        case STB_GLOBAL:
                return 0;
        case STB_WEAK:
                return 2;
        default:
                return 1;
        }
}

static int rawsym_compare(const void *a, const void *b) {
        const RawSym *x = a, *y = b;
        size_t ux, uy, lx, ly;
        int r;

        r = CMP(x->sym.addr, y->sym.addr);
        if (r != 0)
                return r;
        r = CMP(y->sym.end > y->sym.addr, x->sym.end > x->sym.addr);
        if (r != 0)
                return r;
        r = CMP(x->rank, y->rank);
        if (r != 0)
                return r;
        ux = strspn(x->sym.name, "_");
        uy = strspn(y->sym.name, "_");
        r = CMP(ux, uy);
        if (r != 0)
                return r;
        lx = strlen(x->sym.name);
        ly = strlen(y->sym.name);
        r = CMP(ly, lx);
        if (r != 0)
                return r;
        return strcmp(x->sym.name, y->sym.name);
}

static int rawsym_addr_compare(const void *a, const void *b) {
        const ElfSym *x = a, *y = b;

        return CMP(x->addr, y->addr);
}

static bool sym_wanted(const GElf_Sym *sym, const char *name) {
        unsigned type = GELF_ST_TYPE(sym->st_info);

        if (type != STT_FUNC && type != STT_GNU_IFUNC)
                return false;
        if (sym->st_shndx == SHN_UNDEF || sym->st_value == 0)
                return false;
        return name && name[0] != '\0';
}

static uint64_t section_end(Elf *elf, const GElf_Sym *sym) {
        GElf_Shdr shdr;
        Elf_Scn *scn;

        if (sym->st_shndx == SHN_UNDEF || sym->st_shndx >= SHN_LORESERVE)
                return 0;
        scn = elf_getscn(elf, sym->st_shndx);
        if (!scn || !gelf_getshdr(scn, &shdr) || !(shdr.sh_flags & SHF_ALLOC))
                return 0;
        if (sym->st_value < shdr.sh_addr || sym->st_value >= shdr.sh_addr + shdr.sh_size)
                return 0;
        return shdr.sh_addr + shdr.sh_size;
}

/* A symbol table to read: a section of elf (the file's own, or of the ELF
 * its MiniDebugInfo decompresses to). */
typedef struct SymSource {
        Elf *elf;
        Elf_Scn *scn;
        GElf_Shdr shdr;
        Elf_Data *data;
        size_t n_entries;
} SymSource;

static int sym_source_init(Elf *elf, Elf_Scn *scn, SymSource *ret) {
        *ret = (SymSource){ .elf = elf, .scn = scn };
        if (!gelf_getshdr(scn, &ret->shdr) || ret->shdr.sh_entsize == 0)
                return -EBADMSG;
        ret->data = elf_getdata(scn, NULL);
        if (!ret->data)
                return -EBADMSG;
        ret->n_entries = ret->shdr.sh_size / ret->shdr.sh_entsize;
        return 0;
}

/* The function symbols of all sources, merged (aliases across them fold
 * like aliases within one). */
static int read_symbols(const SymSource *sources, size_t n_sources, ElfSymtab *s) {
        _cleanup_free_ RawSym *raw = NULL;
        _cleanup_free_ char *pool = NULL;
        _cleanup_free_ const char **shown = NULL;
        size_t n_raw = 0, pool_size = 0, pool_used = 0, n;
        ElfSym *syms;

        /* Pass 1: how many, and how much room for their names. */
        for (size_t k = 0; k < n_sources; k++) {
                const SymSource *src = &sources[k];

                for (size_t i = 0; i < src->n_entries; i++) {
                        GElf_Sym sym;
                        const char *name;

                        if (!gelf_getsym(src->data, (int) i, &sym))
                                break;
                        name = elf_strptr(src->elf, src->shdr.sh_link, sym.st_name);
                        if (!sym_wanted(&sym, name))
                                continue;
                        n_raw++;
                        pool_size += strlen(name) + 1;
                }
        }
        if (n_raw == 0)
                return 0;

        raw = calloc(n_raw, sizeof(RawSym));
        pool = malloc(pool_size);
        if (!raw || !pool)
                return -ENOMEM;

        /* Pass 2: copy them out. */
        n = 0;
        for (size_t k = 0; k < n_sources; k++) {
                const SymSource *src = &sources[k];

                for (size_t i = 0; i < src->n_entries && n < n_raw; i++) {
                        GElf_Sym sym;
                        const char *name;
                        size_t len;

                        if (!gelf_getsym(src->data, (int) i, &sym))
                                break;
                        name = elf_strptr(src->elf, src->shdr.sh_link, sym.st_name);
                        if (!sym_wanted(&sym, name))
                                continue;
                        len = strlen(name) + 1;
                        if (pool_used + len > pool_size)
                                break;
                        memcpy(pool + pool_used, name, len);
                        raw[n++] = (RawSym) {
                                .sym = {
                                        .addr = sym.st_value,
                                        .end = sym.st_size > UINT64_MAX - sym.st_value ? UINT64_MAX
                                                                                       : sym.st_value + sym.st_size,
                                        .name = pool + pool_used,
                                },
                                .section_end = sym.st_size == 0 ? section_end(src->elf, &sym) : 0,
                                .rank = (uint8_t) bind_rank(GELF_ST_BIND(sym.st_info)),
                        };
                        pool_used += len;
                }
        }
        n_raw = n;

        qsort(raw, n_raw, sizeof(RawSym), rawsym_compare);

        /* Fold aliases into the first (preferred) entry at each address. */
        n = 0;
        for (size_t i = 0; i < n_raw; i++) {
                if (n > 0 && raw[n - 1].sym.addr == raw[i].sym.addr) {
                        raw[n - 1].sym.end = MAX(raw[n - 1].sym.end, raw[i].sym.end);
                        raw[n - 1].section_end = MAX(raw[n - 1].section_end, raw[i].section_end);
                        continue;
                }
                raw[n++] = raw[i];
        }

        syms = calloc(n, sizeof(ElfSym));
        shown = calloc(n, sizeof(char *));
        if (!syms || !shown) {
                free(syms);
                return -ENOMEM;
        }

        for (size_t i = 0; i < n; i++) {
                ElfSym *e = &syms[i];

                *e = raw[i].sym;
                if (e->end == e->addr) {
                        uint64_t bound = raw[i].section_end > e->addr ? raw[i].section_end
                                                                      : e->addr + UNSIZED_SYMBOL_MAX;

                        if (i + 1 < n)
                                bound = MIN(bound, raw[i + 1].sym.addr);
                        e->end = bound;
                }
                e->max_end = i > 0 ? MAX(syms[i - 1].max_end, e->end) : e->end;
        }

        s->syms_shown = shown_free(s->syms_shown, s->syms, s->n_syms);
        free(s->syms);
        free(s->pool);
        s->syms = syms;
        s->syms_shown = TAKE_PTR(shown);
        s->n_syms = n;
        s->pool = TAKE_PTR(pool);
        return 0;
}

/* A GOT slot and the dynamic symbol a JUMP_SLOT or GLOB_DAT relocation binds
 * it to; the name points into the ELF's string table. */
typedef struct GotSlot {
        uint64_t addr;
        const char *name;
} GotSlot;

static int gotslot_compare(const void *a, const void *b) {
        const GotSlot *x = a, *y = b;

        return CMP(x->addr, y->addr);
}

static int read_got_slots(Elf *elf, GotSlot **ret, size_t *ret_n) {
        _cleanup_free_ GotSlot *slots = NULL;
        size_t n = 0, allocated = 0;
        Elf_Scn *scn = NULL;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr, symshdr;
                Elf_Data *data, *symdata;
                Elf_Scn *symscn;

                if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_RELA || shdr.sh_entsize == 0)
                        continue;
                symscn = elf_getscn(elf, shdr.sh_link);
                if (!symscn || !gelf_getshdr(symscn, &symshdr) ||
                    (symshdr.sh_type != SHT_DYNSYM && symshdr.sh_type != SHT_SYMTAB))
                        continue;
                data = elf_getdata(scn, NULL);
                symdata = elf_getdata(symscn, NULL);
                if (!data || !symdata)
                        continue;

                for (size_t i = 0; i < shdr.sh_size / shdr.sh_entsize; i++) {
                        unsigned type;
                        const char *name;
                        GElf_Rela rela;
                        GElf_Sym sym;

                        if (!gelf_getrela(data, (int) i, &rela))
                                break;
                        type = (unsigned) GELF_R_TYPE(rela.r_info);
                        if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) ||
                            GELF_R_SYM(rela.r_info) == 0)
                                continue;
                        if (!gelf_getsym(symdata, (int) GELF_R_SYM(rela.r_info), &sym))
                                continue;
                        name = elf_strptr(elf, symshdr.sh_link, sym.st_name);
                        if (!name || name[0] == '\0')
                                continue;
                        if (GREEDY_REALLOC(slots, allocated, n + 1, 64) < 0)
                                return -ENOMEM;
                        slots[n++] = (GotSlot){ .addr = rela.r_offset, .name = name };
                }
        }

        if (n > 0)
                qsort(slots, n, sizeof(GotSlot), gotslot_compare);
        *ret = TAKE_PTR(slots);
        *ret_n = n;
        return 0;
}

/* The function an x86-64 PLT stub jumps to: the relocation of the GOT slot
 * its "jmp *DISP(%rip)" (ff 25 disp32, after an endbr64 or a bnd prefix)
 * reads. NULL when the stub has no such jump or the slot no relocation. */
static const char *x86_64_stub_target(const uint8_t *code, size_t size, uint64_t addr, const GotSlot *slots,
                                      size_t n_slots) {
        for (size_t k = 0; k + 6 <= size; k++) {
                GotSlot key, *found;
                uint32_t u;

                if (code[k] != 0xff || code[k + 1] != 0x25)
                        continue;
                u = (uint32_t) code[k + 2] | (uint32_t) code[k + 3] << 8 | (uint32_t) code[k + 4] << 16 |
                    (uint32_t) code[k + 5] << 24;
                key.addr = addr + k + 6 + (uint64_t) (int64_t) (int32_t) u;
                found = n_slots > 0 ? bsearch(&key, slots, n_slots, sizeof(GotSlot), gotslot_compare) : NULL;
                return found ? found->name : NULL;
        }
        return NULL;
}

static int plt_add(ElfSymtab *s, size_t *allocated, uint64_t addr, uint64_t end, const char *target,
                   const char *section) {
        char *name;

        if (GREEDY_REALLOC(s->plt, *allocated, s->n_plt + 1, 32) < 0)
                return -ENOMEM;
        if (target ? asprintf(&name, "%s@plt", target) < 0 : !(name = strdup(section)))
                return -ENOMEM;
        s->plt[s->n_plt++] = (ElfSym){ .addr = addr, .end = end, .max_end = end, .name = name };
        return 0;
}

/* Stub sizes outside this range are not believed (x86-64 uses 8 and 16). */
#define PLT_ENTRY_MIN 4U
#define PLT_ENTRY_MAX 64U

static int read_plt(Elf *elf, const GElf_Ehdr *ehdr, ElfSymtab *s) {
        _cleanup_free_ GotSlot *slots = NULL;
        size_t shstrndx, n_slots = 0, allocated = 0;
        bool x86_64 = ehdr->e_machine == EM_X86_64;
        Elf_Scn *scn = NULL;
        int r;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return 0;
        if (x86_64) {
                r = read_got_slots(elf, &slots, &n_slots);
                if (r < 0)
                        return r;
        }

        while ((scn = elf_nextscn(elf, scn))) {
                const char *section;
                const uint8_t *code;
                uint64_t entsize;
                Elf_Data *data;
                GElf_Shdr shdr;

                if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS ||
                    !(shdr.sh_flags & SHF_EXECINSTR) || shdr.sh_size == 0)
                        continue;
                section = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (!section || strncmp(section, ".plt", 4) != 0)
                        continue;
                if (shdr.sh_addr > UINT64_MAX - shdr.sh_size)
                        continue;
                data = elf_getdata(scn, NULL);
                if (!x86_64 || !data || !data->d_buf || data->d_size < shdr.sh_size) {
                        r = plt_add(s, &allocated, shdr.sh_addr, shdr.sh_addr + shdr.sh_size, NULL, section);
                        if (r < 0)
                                return r;
                        continue;
                }

                code = data->d_buf;
                entsize = shdr.sh_entsize >= PLT_ENTRY_MIN && shdr.sh_entsize <= PLT_ENTRY_MAX
                                  ? shdr.sh_entsize
                                  : 16;
                for (uint64_t off = 0; off < shdr.sh_size; off += entsize) {
                        uint64_t len = MIN(entsize, shdr.sh_size - off);

                        r = plt_add(s, &allocated, shdr.sh_addr + off, shdr.sh_addr + off + len,
                                    x86_64_stub_target(code + off, len, shdr.sh_addr + off, slots, n_slots),
                                    section);
                        if (r < 0)
                                return r;
                }
        }

        if (s->n_plt > 0) {
                qsort(s->plt, s->n_plt, sizeof(ElfSym), rawsym_addr_compare);
                s->plt_shown = calloc(s->n_plt, sizeof(char *));
                if (!s->plt_shown)
                        return -ENOMEM;
        }
        return 0;
}

size_t elf_minidebuginfo_max_size(size_t compressed_size) {
        if (compressed_size > MINIDEBUGINFO_SIZE_MAX / MINIDEBUGINFO_RATIO_MAX)
                return MINIDEBUGINFO_SIZE_MAX;
        return compressed_size * MINIDEBUGINFO_RATIO_MAX;
}

int elf_minidebuginfo_decompress(const void *data, size_t size, size_t max_size, void **ret,
                                 size_t *ret_size) {
        _cleanup_free_ uint8_t *out = NULL;
        lzma_stream strm = LZMA_STREAM_INIT;
        size_t allocated = 0;
        lzma_ret lr;
        int r = 0;

        if (!data || !ret || !ret_size)
                return -EINVAL;
        if (size < 6 || memcmp(data, "\3757zXZ", 6) != 0)
                return -EBADMSG;

        /* .xz streams and their padding, nothing else after them (as xz(1)
         * reads them); the memory limit refuses a header asking for a huge
         * dictionary. */
        lr = lzma_stream_decoder(&strm, MINIDEBUGINFO_MEMLIMIT, LZMA_CONCATENATED);
        if (lr != LZMA_OK)
                return lr == LZMA_MEM_ERROR ? -ENOMEM : -EOPNOTSUPP;

        strm.next_in = data;
        strm.avail_in = size;
        for (;;) {
                if (strm.avail_out == 0) {
                        size_t m;
                        uint8_t *p;

                        if (allocated >= max_size) {
                                /* Full: only the end of the stream may follow. */
                                uint8_t probe;

                                strm.next_out = &probe;
                                strm.avail_out = 1;
                                lr = lzma_code(&strm, LZMA_FINISH);
                                if (lr == LZMA_STREAM_END && strm.avail_out == 1)
                                        break;
                                r = (lr == LZMA_OK || lr == LZMA_STREAM_END) && strm.avail_out == 0
                                            ? -EFBIG
                                            : -EBADMSG;
                                goto finish;
                        }
                        m = allocated == 0 ? MIN((size_t) MINIDEBUGINFO_CHUNK, max_size)
                                           : MIN(allocated * 2, max_size);
                        p = realloc(out, MAX(m, (size_t) 1));
                        if (!p) {
                                r = -ENOMEM;
                                goto finish;
                        }
                        out = p;
                        strm.next_out = out + allocated;
                        strm.avail_out = m - allocated;
                        allocated = m;
                }

                lr = lzma_code(&strm, LZMA_FINISH);
                if (lr == LZMA_STREAM_END)
                        break;
                if (lr == LZMA_OK)
                        continue;
                switch (lr) {
                case LZMA_MEM_ERROR:
                        r = -ENOMEM;
                        break;
                case LZMA_MEMLIMIT_ERROR:
                        r = -E2BIG;
                        break;
                case LZMA_UNSUPPORTED_CHECK:
                case LZMA_OPTIONS_ERROR:
                        r = -EOPNOTSUPP;
                        break;
                default: /* LZMA_FORMAT_ERROR, LZMA_DATA_ERROR, LZMA_BUF_ERROR (truncated) */
                        r = -EBADMSG;
                }
                goto finish;
        }

        *ret_size = (size_t) strm.total_out;
        *ret = TAKE_PTR(out);
finish:
        lzma_end(&strm);
        return r;
}

/* The MiniDebugInfo of elf (.gnu_debugdata, shstrndx: its section name
 * table), decompressed into *ret_image and opened as *ret_elf. 0 when it has
 * none. */
static int open_minidebuginfo(Elf *elf, size_t shstrndx, void **ret_image, Elf **ret_elf) {
        _cleanup_free_ void *image = NULL;
        Elf_Scn *scn = NULL;
        Elf_Data *data;
        size_t size;
        Elf *mini;
        int r;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;
                const char *name;

                if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS)
                        continue;
                name = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (name && streq(name, ".gnu_debugdata"))
                        break;
        }
        if (!scn)
                return 0;

        data = elf_rawdata(scn, NULL);
        if (!data || !data->d_buf || data->d_size == 0)
                return -EBADMSG;
        r = elf_minidebuginfo_decompress(data->d_buf, data->d_size, elf_minidebuginfo_max_size(data->d_size),
                                         &image, &size);
        if (r < 0)
                return r;
        mini = elf_memory(image, size);
        if (!mini)
                return -ENOEXEC;
        if (elf_kind(mini) != ELF_K_ELF) {
                elf_end(mini);
                return -ENOEXEC;
        }
        *ret_image = TAKE_PTR(image);
        *ret_elf = mini;
        return 1;
}

static Elf_Scn *find_section_of_type(Elf *elf, Elf64_Word type) {
        Elf_Scn *scn = NULL;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;

                if (gelf_getshdr(scn, &shdr) && shdr.sh_type == type)
                        return scn;
        }
        return NULL;
}

/* fd: the file elf reads (the Go table maps it), -1 for an image in memory. */
static int load_elf(Elf *elf, int fd, ElfSymtab **ret) {
        _cleanup_(elf_symtab_freep) ElfSymtab *s = NULL;
        _cleanup_free_ void *mini_image = NULL; /* freed after mini is ended */
        _cleanup_(elf_endp) Elf *mini = NULL;
        Elf_Scn *symtab, *dynsym, *mini_symtab = NULL;
        SymSource sources[2];
        size_t n_sources = 0;
        GElf_Ehdr ehdr;
        size_t phnum = 0, shstrndx;
        int r;

        if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr))
                return -ENOEXEC;
        if (elf_getphdrnum(elf, &phnum) < 0)
                return -EBADMSG;

        s = calloc(1, sizeof(ElfSymtab));
        if (!s)
                return -ENOMEM;

        r = read_segments(elf, phnum, s);
        if (r < 0)
                return r;

        r = read_build_id(elf, phnum, &s->build_id);
        if (r < 0)
                return r;

        symtab = find_section_of_type(elf, SHT_SYMTAB);
        dynsym = find_section_of_type(elf, SHT_DYNSYM);

        /* Without .symtab: MiniDebugInfo (Fedora, RHEL), an xz-compressed
         * ELF in .gnu_debugdata whose .symtab has the function symbols
         * .dynsym lacks (the static ones); both are read. Unusable, it is
         * remembered (elf_symtab_minidebuginfo_error()) and .dynsym is
         * read alone. */
        if (!symtab && elf_getshdrstrndx(elf, &shstrndx) >= 0) {
                r = open_minidebuginfo(elf, shstrndx, &mini_image, &mini);
                if (r == -ENOMEM)
                        return r;
                if (r > 0) {
                        mini_symtab = find_section_of_type(mini, SHT_SYMTAB);
                        if (!mini_symtab)
                                r = -ENODATA;
                }
                if (r < 0)
                        s->minidebuginfo_error = r;
        }

        if (symtab) {
                r = sym_source_init(elf, symtab, &sources[n_sources++]);
                if (r < 0)
                        return r;
                s->full_symtab = true;
                s->source = ELF_SYMBOLS_SYMTAB;
        } else {
                if (dynsym) {
                        r = sym_source_init(elf, dynsym, &sources[n_sources++]);
                        if (r < 0)
                                return r;
                        s->source = ELF_SYMBOLS_DYNSYM;
                }
                if (mini_symtab) {
                        r = sym_source_init(mini, mini_symtab, &sources[n_sources]);
                        if (r < 0)
                                s->minidebuginfo_error = r;
                        else {
                                n_sources++;
                                s->source = ELF_SYMBOLS_MINIDEBUGINFO;
                        }
                }
        }

        r = read_symbols(sources, n_sources, s);
        if (r < 0)
                return r;

        r = read_plt(elf, &ehdr, s);
        if (r < 0)
                return r;

        /* A Go binary: its .gopclntab names its Go functions when it has no
         * .symtab, and gives file, line and inlined calls either way. */
        r = gopclntab_load(elf, fd, &s->go);
        if (r == -ENOMEM)
                return r;
        if (r < 0 && r != -ENODATA)
                s->gopclntab_error = r;
        if (s->go && !symtab && gopclntab_count(s->go) > 0)
                s->source = ELF_SYMBOLS_GOPCLNTAB;

        *ret = TAKE_PTR(s);
        return 0;
}

int elf_symtab_load(int fd, ElfSymtab **ret) {
        _cleanup_(elf_endp) Elf *elf = NULL;
        int r;

        r = elf_open_fd(fd, &elf);
        if (r < 0)
                return r;
        return load_elf(elf, fd, ret);
}

int elf_symtab_load_memory(const void *image, size_t size, ElfSymtab **ret) {
        _cleanup_(elf_endp) Elf *elf = NULL;
        _cleanup_free_ char *copy = NULL;

        if (!image || size == 0 || !ret)
                return -EINVAL;
        if (elf_version(EV_CURRENT) == EV_NONE)
                return -EOPNOTSUPP;

        /* elf_memory() wants a writable image. */
        copy = malloc(size);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, image, size);

        elf = elf_memory(copy, size);
        if (!elf)
                return -ENOEXEC;

        return load_elf(elf, -1, ret);
}

int elf_symtab_take_symbols(ElfSymtab *s, ElfSymtab *debug) {
        if (!s || !debug)
                return -EINVAL;
        /* A debug file of another build would give plausible, wrong names. */
        if (s->build_id && debug->build_id && !streq(s->build_id, debug->build_id))
                return -EINVAL;

        shown_free(s->syms_shown, s->syms, s->n_syms);
        free(s->syms);
        free(s->pool);
        s->syms = TAKE_PTR(debug->syms);
        s->syms_shown = TAKE_PTR(debug->syms_shown);
        s->pool = TAKE_PTR(debug->pool);
        s->n_syms = debug->n_syms;
        s->full_symtab = debug->full_symtab;
        s->source = ELF_SYMBOLS_DEBUG_FILE;
        debug->n_syms = 0;
        debug->full_symtab = false;
        return 0;
}

int elf_symtab_set_symbols_source(ElfSymtab *s, ElfSymbolsSource source) {
        if (!s || source < 0 || source >= _ELF_SYMBOLS_SOURCE_MAX)
                return -EINVAL;
        s->source = source;
        return 0;
}

int elf_symtab_offset_to_vaddr(const ElfSymtab *s, uint64_t offset, uint64_t *ret_vaddr) {
        if (!s)
                return -EINVAL;

        for (size_t i = 0; i < s->n_segments; i++) {
                const ElfSegment *g = &s->segments[i];

                if (offset >= g->offset && offset - g->offset < g->filesz) {
                        if (ret_vaddr)
                                *ret_vaddr = g->vaddr + (offset - g->offset);
                        return 0;
                }
        }
        return -ENOENT;
}

int elf_symtab_vaddr_to_offset(const ElfSymtab *s, uint64_t vaddr, uint64_t *ret_offset) {
        if (!s)
                return -EINVAL;

        for (size_t i = 0; i < s->n_segments; i++) {
                const ElfSegment *g = &s->segments[i];

                if (vaddr >= g->vaddr && vaddr - g->vaddr < g->filesz) {
                        if (ret_offset)
                                *ret_offset = g->offset + (vaddr - g->vaddr);
                        return 0;
                }
        }
        return -ENOENT;
}

int elf_symtab_find_name(const ElfSymtab *s, const char *name, uint64_t *ret_vaddr) {
        if (!s || !name)
                return -EINVAL;

        /* The names as the file has them (mangled), a linear scan: for the
         * few lookups of an uprobe's attach. */
        for (size_t i = 0; i < s->n_syms; i++)
                if (s->syms[i].name && strcmp(s->syms[i].name, name) == 0) {
                        if (ret_vaddr)
                                *ret_vaddr = s->syms[i].addr;
                        return 0;
                }
        return -ENOENT;
}

/* Walking back over nested symbols is cut short after this many steps. */
#define NESTED_WALK_MAX 1024U

/* The name to show for e (shown: its slot), demangled on its first lookup
 * and kept. The table is logically const (the same name for the same
 * address, always), so the cache is filled through a const ElfSymtab:
 * concurrent lookups on one table would race on it. Short of memory, the
 * mangled name (and a retry next time). */
static const char *sym_shown(const ElfSym *e, const char **shown) {
        char *demangled = NULL;
        int r;

        if (!shown)
                return e->name;
        if (*shown)
                return *shown;
        r = demangle_symbol(e->name, &demangled);
        if (r < 0)
                return e->name;
        *shown = r > 0 ? demangled : e->name;
        return *shown;
}

/* The PLT stub or ELF symbol holding vaddr. */
static const char *symbols_lookup(const ElfSymtab *s, uint64_t vaddr, uint64_t *ret_offset) {
        size_t lo, i;

        /* PLT stubs first: nothing else can hold their addresses. */
        for (size_t l = 0, h = s->n_plt; l < h;) {
                size_t mid = l + (h - l) / 2;
                const ElfSym *e = &s->plt[mid];

                if (vaddr < e->addr)
                        h = mid;
                else if (vaddr >= e->end)
                        l = mid + 1;
                else {
                        if (ret_offset)
                                *ret_offset = vaddr - e->addr;
                        return sym_shown(e, s->plt_shown ? &s->plt_shown[mid] : NULL);
                }
        }

        if (s->n_syms == 0)
                return NULL;

        /* First entry with addr > vaddr. */
        lo = SORTED_UPPER_BOUND(s->syms, s->n_syms, _e->addr, vaddr);
        if (lo == 0)
                return NULL;

        i = lo - 1;
        for (unsigned steps = 0; steps < NESTED_WALK_MAX; steps++) {
                const ElfSym *e = &s->syms[i];

                if (vaddr < e->end) {
                        if (ret_offset)
                                *ret_offset = vaddr - e->addr;
                        return sym_shown(e, &s->syms_shown[i]);
                }
                /* Does any entry before this one reach vaddr? */
                if (i == 0 || s->syms[i - 1].max_end <= vaddr)
                        return NULL;
                i--;
        }
        return NULL;
}

/* The physical Go function holding vaddr, named by .gopclntab. */
static const char *go_lookup(const ElfSymtab *s, uint64_t vaddr, uint64_t *ret_offset) {
        GoFrame f;
        size_t n;

        if (!s->go || gopclntab_lookup(s->go, vaddr, &f, 1, &n) < 0)
                return NULL;
        if (ret_offset)
                *ret_offset = vaddr - f.entry;
        return f.function;
}

const char *elf_symtab_lookup(const ElfSymtab *s, uint64_t vaddr, uint64_t *ret_offset) {
        const char *name;

        if (!s)
                return NULL;
        /* Without .symtab, .gopclntab first: a size-0 .dynsym symbol of a
         * cgo binary must not stretch over the Go functions after it. */
        if (s->source == ELF_SYMBOLS_GOPCLNTAB) {
                name = go_lookup(s, vaddr, ret_offset);
                if (name)
                        return name;
        }
        name = symbols_lookup(s, vaddr, ret_offset);
        if (name || s->source == ELF_SYMBOLS_GOPCLNTAB)
                return name;
        return go_lookup(s, vaddr, ret_offset);
}

size_t elf_symtab_lookup_frames(const ElfSymtab *s, uint64_t vaddr, ElfFrame *frames, size_t max) {
        GoFrame go[ELF_FRAMES_MAX];
        const char *name;
        uint64_t off = 0;
        size_t n;

        if (!s || !frames || max == 0)
                return 0;

        if (s->go && gopclntab_lookup(s->go, vaddr, go, MIN(max, (size_t) ELF_FRAMES_MAX), &n) >= 0) {
                for (size_t i = 0; i < n; i++)
                        frames[i] = (ElfFrame){
                                .name = go[i].function,
                                .file = go[i].file,
                                .line = go[i].line,
                                .inlined = go[i].inlined,
                                .offset = vaddr - go[i].entry,
                        };
                return n;
        }

        name = symbols_lookup(s, vaddr, &off);
        if (!name)
                return 0;
        frames[0] = (ElfFrame){ .name = name, .offset = off };
        return 1;
}
