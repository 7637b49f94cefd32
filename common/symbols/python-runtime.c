/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <gelf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python-runtime.h"

/* Offsets per CPython minor version (x86-64), generated from each
 * version's own headers by scripts/python-offsets and checked against the
 * headers found on the machine by test-python-offsets. A version without an
 * entry is reported unsupported and never walked: a wrong offset would walk
 * garbage. */
static const PythonOffsets offsets_table[] = {
#include "python-offsets.h"
};

/* The versions the walk and the agent handle (the table has more). */
static bool version_walked(unsigned major, unsigned minor) {
        return major == 3 && minor >= 7 && minor <= 13;
}

const PythonOffsets *python_offsets_find(unsigned major, unsigned minor) {
        for (size_t i = 0; i < ELEMENTSOF(offsets_table); i++)
                if (offsets_table[i].major == major && offsets_table[i].minor == minor &&
                    version_walked(major, minor))
                        return &offsets_table[i];
        return NULL;
}

const char *python_supported_versions(void) {
        return "3.7 3.8 3.9 3.10 3.11 3.12 3.13";
}

/* The table's entry with the _Py_DebugOffsets layout for the version: its
 * own, else the newest before it. */
static const PythonOffsets *debug_layout(unsigned major, unsigned minor) {
        const PythonOffsets *best = NULL;

        for (size_t i = 0; i < ELEMENTSOF(offsets_table); i++) {
                const PythonOffsets *o = &offsets_table[i];
                if (o->dbg_size == 0 || o->major != major || o->minor > minor)
                        continue;
                if (!best || o->minor > best->minor)
                        best = o;
        }
        return best;
}

static uint64_t data_u64(const uint8_t *data, size_t off) {
        uint64_t v;
        memcpy(&v, data + off, sizeof(v));
        return v;
}

int python_offsets_from_debug(const uint8_t *data, size_t size, unsigned major, unsigned minor,
                              PythonOffsets *ret, const char **ret_missing) {
        const PythonOffsets *l = debug_layout(major, minor);
        PythonOffsets o;
        uint64_t version;
#define G(field, dbg_field, section, name)                                          \
        {                                                                           \
                offsetof(PythonOffsets, field), offsetof(PythonOffsets, dbg_field), \
                        offsetof(PythonOffsets, section), name                      \
        }
#define F(field, section, name) G(field, dbg_##field, section, name)
        static const struct {
                size_t field, dbg_field, section_field;
                const char *name;
        } fields[] = {
                F(runtime_interp_head, dbg_runtime_size, "runtime_state.interpreters_head"),
                F(interp_threads_head, dbg_interp_size, "interpreter_state.threads_head"),
                F(tstate_next, dbg_tstate_size, "thread_state.next"),
                F(tstate_thread_id, dbg_tstate_size, "thread_state.thread_id"),
                G(cframe_current_frame, dbg_tstate_current_frame, dbg_tstate_size,
                  "thread_state.current_frame"),
                F(frame_previous, dbg_frame_size, "interpreter_frame.previous"),
                G(frame_code, dbg_frame_executable, dbg_frame_size, "interpreter_frame.executable"),
                G(frame_prev_instr, dbg_frame_instr_ptr, dbg_frame_size, "interpreter_frame.instr_ptr"),
                G(frame_size, dbg_frame_localsplus, dbg_frame_size, "interpreter_frame.localsplus"),
                F(frame_owner, dbg_frame_size, "interpreter_frame.owner"),
                F(code_filename, dbg_code_size, "code_object.filename"),
                F(code_name, dbg_code_size, "code_object.name"),
                F(code_qualname, dbg_code_size, "code_object.qualname"),
                F(code_linetable, dbg_code_size, "code_object.linetable"),
                F(code_firstlineno, dbg_code_size, "code_object.firstlineno"),
                F(code_adaptive, dbg_code_size, "code_object.co_code_adaptive"),
                F(object_type, dbg_object_size, "pyobject.ob_type"),
                F(bytes_size, dbg_bytes_object_size, "bytes_object.ob_size"),
                F(bytes_data, dbg_bytes_object_size, "bytes_object.ob_sval"),
                F(unicode_length, dbg_unicode_size, "unicode_object.length"),
                F(unicode_state, dbg_unicode_size, "unicode_object.state"),
                F(unicode_ascii_data, dbg_unicode_size, "unicode_object.asciiobject_size"),
        };
#undef F
#undef G

        *ret_missing = NULL;
        if (!data || size < 16 || memcmp(data, "xdebugpy", 8) != 0 || !l)
                return -ENOENT;
        if (size < l->dbg_size) {
                *ret_missing = "_Py_DebugOffsets";
                return -EBADMSG;
        }
        version = data_u64(data, l->dbg_version);
        if (((version >> 24) & 0xff) != major || ((version >> 16) & 0xff) != minor) {
                *ret_missing = "version";
                return -EBADMSG;
        }
        o = *l; /* the constants, and no cframe, is_entry or f_lasti */
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                uint16_t dbg = *(const uint16_t *) ((const uint8_t *) l + fields[i].dbg_field),
                         section = *(const uint16_t *) ((const uint8_t *) l + fields[i].section_field);
                uint64_t struct_size, v;

                if (dbg == PYTHON_NO_OFFSET || section == PYTHON_NO_OFFSET ||
                    (size_t) dbg + 8 > l->dbg_size || (size_t) section + 8 > l->dbg_size) {
                        *ret_missing = fields[i].name;
                        return -EBADMSG;
                }
                struct_size = data_u64(data, section);
                v = data_u64(data, dbg);
                /* Inside its structure (the sizes are the structure's; a
                 * frame's localsplus may be its end). */
                if (v >= PYTHON_NO_OFFSET || v > struct_size) {
                        *ret_missing = fields[i].name;
                        return -EBADMSG;
                }
                *(uint16_t *) ((uint8_t *) &o + fields[i].field) = (uint16_t) v;
        }
        o.major = major;
        o.minor = minor;
        o.tstate_cframe = PYTHON_NO_OFFSET;
        o.code_header_size = o.code_adaptive;
        *ret = o;
        return 0;
}

int python_version_from_name(const char *name, unsigned *ret_major, unsigned *ret_minor) {
        const char *p, *base;
        unsigned major, minor;
        int n = 0;

        if (!name)
                return -EINVAL;
        base = strrchr(name, '/');
        base = base ? base + 1 : name;
        p = strstr(base, "python");
        if (!p)
                return -ENOENT;
        if (sscanf(p, "python%u.%u%n", &major, &minor, &n) != 2 || n == 0)
                return -ENOENT;
        if (major < 2 || major > 9 || minor > 99)
                return -ENOENT;
        *ret_major = major;
        *ret_minor = minor;
        return 0;
}

/* Reads up to 'size' bytes at vaddr from the section holding it (file
 * data, not .bss): *ret_size is how many (at least 'min'). */
static int read_at(Elf *elf, uint64_t vaddr, void *buf, size_t min, size_t size, size_t *ret_size) {
        Elf_Scn *scn = NULL;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                Elf_Data *d;
                size_t n;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || !(sh.sh_flags & SHF_ALLOC))
                        continue;
                if (vaddr < sh.sh_addr || vaddr - sh.sh_addr > sh.sh_size ||
                    sh.sh_size - (vaddr - sh.sh_addr) < min)
                        continue;
                d = elf_getdata(scn, NULL);
                if (!d || !d->d_buf || d->d_size < sh.sh_size)
                        return -EBADMSG;
                n = MIN(size, (size_t) (sh.sh_size - (vaddr - sh.sh_addr)));
                memcpy(buf, (const uint8_t *) d->d_buf + (vaddr - sh.sh_addr), n);
                *ret_size = n;
                return 0;
        }
        return -ENOENT;
}

static int read_u64_at(Elf *elf, uint64_t vaddr, uint64_t *ret) {
        size_t n;
        return read_at(elf, vaddr, ret, 8, 8, &n);
}

/* 3.13+: the offsets _PyRuntime.debug_offsets publishes. */
static void inspect_debug_offsets(Elf *elf, PythonElfInfo *info) {
        _cleanup_free_ uint8_t *buf = malloc(PYTHON_DEBUG_OFFSETS_MAX);
        size_t n;

        if (!buf || read_at(elf, info->runtime_vaddr, buf, 16, PYTHON_DEBUG_OFFSETS_MAX, &n) < 0)
                return;
        info->has_debug_offsets = python_offsets_from_debug(buf, n, info->major, info->minor,
                                                            &info->debug_offsets, &info->debug_missing) >= 0;
}

/* Looks the named symbols up in one symbol table section. */
static void scan_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, uint64_t *runtime, uint64_t *code_type,
                         uint64_t *version) {
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t n;

        if (!d || sh->sh_entsize == 0)
                return;
        n = sh->sh_size / sh->sh_entsize;
        for (size_t i = 1; i < n; i++) {
                GElf_Sym sym;
                const char *name;

                if (!gelf_getsym(d, (int) i, &sym) || sym.st_shndx == SHN_UNDEF ||
                    GELF_ST_TYPE(sym.st_info) != STT_OBJECT)
                        continue;
                name = elf_strptr(elf, sh->sh_link, sym.st_name);
                if (!name || (name[0] != '_' && name[0] != 'P'))
                        continue;
                if (streq(name, "_PyRuntime"))
                        *runtime = sym.st_value;
                else if (streq(name, "PyCode_Type"))
                        *code_type = sym.st_value;
                else if (streq(name, "Py_Version"))
                        *version = sym.st_value;
        }
}

/* The version a string ends with: "3.10.13", "Python-3.9.18", "3.12.0rc2",
 * "3.8.18+" (PY_VERSION, which the linker may have merged into the tail of
 * another string). */
static bool version_at_end(const char *s, size_t n, unsigned *ret_major, unsigned *ret_minor) {
        unsigned major, minor, micro;
        int used = 0;

        for (size_t i = n < 16 ? 0 : n - 16; i + 5 <= n; i++) {
                size_t after;

                if (s[i] != '3' || s[i + 1] != '.' ||
                    (i > 0 && ((s[i - 1] >= '0' && s[i - 1] <= '9') || s[i - 1] == '.')))
                        continue;
                if (sscanf(s + i, "%u.%u.%u%n", &major, &minor, &micro, &used) != 3 || used <= 0)
                        continue;
                after = i + (size_t) used;
                if (after > n || minor > 99 || micro > 99 || n - after > 4)
                        continue;
                /* Nothing after but a release suffix (a1, b2, rc1, +). */
                for (size_t k = after; k < n; k++)
                        if (!strchr("abrc+0123456789", s[k]))
                                return false;
                *ret_major = major;
                *ret_minor = minor;
                return true;
        }
        return false;
}

/* The version from PY_VERSION in read-only data (before 3.11 there is no
 * Py_Version): every string ending in a 3.X.Y must say the same 3.X. */
static int version_from_strings(Elf *elf, unsigned *ret_major, unsigned *ret_minor) {
        Elf_Scn *scn = NULL;
        unsigned major = 0, minor = 0;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                Elf_Data *d;
                const char *p, *end;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
                    (sh.sh_flags & (SHF_WRITE | SHF_EXECINSTR)))
                        continue;
                d = elf_getdata(scn, NULL);
                if (!d || !d->d_buf)
                        continue;
                p = d->d_buf;
                end = p + d->d_size;
                while (p < end) {
                        const char *nul = memchr(p, 0, (size_t) (end - p));
                        unsigned a, b;
                        if (!nul)
                                break;
                        if (nul - p >= 5 && version_at_end(p, (size_t) (nul - p), &a, &b)) {
                                if (major != 0 && (a != major || b != minor))
                                        return -ENOTUNIQ; /* two versions: trust neither */
                                major = a;
                                minor = b;
                        }
                        p = nul + 1;
                }
        }
        if (major == 0)
                return -ENOENT;
        *ret_major = major;
        *ret_minor = minor;
        return 0;
}

/* The library's own name (DT_SONAME: "libpython3.10.so.1.0"). */
static int version_from_soname(Elf *elf, unsigned *ret_major, unsigned *ret_minor) {
        Elf_Scn *scn = NULL;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || sh.sh_entsize == 0)
                        continue;
                d = elf_getdata(scn, NULL);
                if (!d)
                        return -ENOENT;
                for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
                        GElf_Dyn dyn;
                        const char *name;
                        if (!gelf_getdyn(d, (int) i, &dyn) || dyn.d_tag != DT_SONAME)
                                continue;
                        name = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
                        return name ? python_version_from_name(name, ret_major, ret_minor) : -ENOENT;
                }
        }
        return -ENOENT;
}

int python_elf_inspect(Elf *elf, const char *file_name, PythonElfInfo *ret) {
        uint64_t runtime = 0, code_type = 0, version_addr = 0, hex;
        Elf_Scn *scn = NULL;
        PythonElfInfo info = {};

        if (!elf || !ret)
                return -EINVAL;
        /* .dynsym first: every interpreter exports _PyRuntime there. */
        for (int pass = 0; pass < 2 && runtime == 0; pass++) {
                scn = NULL;
                while ((scn = elf_nextscn(elf, scn))) {
                        GElf_Shdr sh;
                        if (!gelf_getshdr(scn, &sh) || sh.sh_type != (pass == 0 ? SHT_DYNSYM : SHT_SYMTAB))
                                continue;
                        scan_symbols(elf, scn, &sh, &runtime, &code_type, &version_addr);
                }
        }
        if (runtime == 0)
                return -ENOENT;
        info.runtime_vaddr = runtime;
        info.code_type_vaddr = code_type;

        if (version_addr != 0 && read_u64_at(elf, version_addr, &hex) >= 0) {
                /* PY_VERSION_HEX: 0xMMmmppLS. */
                info.major = (unsigned) (hex >> 24) & 0xff;
                info.minor = (unsigned) (hex >> 16) & 0xff;
                info.micro = (unsigned) (hex >> 8) & 0xff;
        } else if (version_from_strings(elf, &info.major, &info.minor) < 0 &&
                   version_from_soname(elf, &info.major, &info.minor) < 0)
                /* Last: the file's name (a python3.X executable). */
                (void) python_version_from_name(file_name, &info.major, &info.minor);
        if (info.major > 0)
                inspect_debug_offsets(elf, &info);
        *ret = info;
        return 0;
}

/* The location table (Objects/locations.md of CPython 3.11+): entries of a
 * first byte 1CCCCLLL (code C, length L+1 code units) and code-dependent
 * varints after it. */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint32_t *ret) {
        uint32_t v = 0;
        unsigned shift = 0;
        uint8_t b;

        do {
                if (*p >= end || shift > 30)
                        return false;
                b = *(*p)++;
                v |= (uint32_t) (b & 63) << shift;
                shift += 6;
        } while (b & 64);
        *ret = v;
        return true;
}

static bool read_svarint(const uint8_t **p, const uint8_t *end, int *ret) {
        uint32_t u;
        if (!read_varint(p, end, &u))
                return false;
        *ret = (u & 1) ? -(int) (u >> 1) : (int) (u >> 1);
        return true;
}

int python_code_line(const uint8_t *table, size_t size, int firstlineno, uint32_t instr, int *ret_line) {
        const uint8_t *p = table, *end = table ? table + size : NULL;
        uint64_t addr = 0; /* in code units */
        int line = firstlineno;

        if (!table || !ret_line)
                return -EINVAL;
        while (p < end) {
                uint8_t first = *p;
                unsigned code = (first >> 3) & 15, length = (first & 7) + 1;
                int delta = 0;
                const uint8_t *q = p + 1;

                if (!(first & 128))
                        return -EBADMSG;
                switch (code) {
                case 15: /* no location */
                        break;
                case 13: /* no column */
                case 14: /* long form */
                        if (!read_svarint(&q, end, &delta))
                                return -EBADMSG;
                        break;
                case 10:
                case 11:
                case 12: /* one line, delta code - 10 */
                        delta = (int) code - 10;
                        break;
                default: /* short form: same line */
                        break;
                }
                line += delta;
                if (instr >= addr && instr < addr + length) {
                        if (code == 15)
                                return -ENOENT;
                        *ret_line = line;
                        return 0;
                }
                addr += length;
                /* The next entry starts at the next byte with the top bit set. */
                p = q;
                while (p < end && !(*p & 128))
                        p++;
        }
        return -ENOENT;
}

/* co_lnotab (3.8, 3.9): pairs of (bytecode bytes: unsigned, lines: signed)
 * advancing from (0, co_firstlineno); an instruction's line is the one
 * reached before the address passes it (CPython's PyCode_Addr2Line()). */
static int lnotab_line(const uint8_t *table, size_t size, int firstlineno, uint32_t instr, int *ret_line) {
        uint64_t addr = 0, want = 2ULL * instr; /* in bytes */
        int line = firstlineno;

        for (size_t i = 0; i + 1 < size; i += 2) {
                addr += table[i];
                if (addr > want)
                        break;
                line += (int8_t) table[i + 1];
        }
        *ret_line = line;
        return 0;
}

/* co_linetable (3.10): pairs of (bytecode bytes: unsigned, lines: signed,
 * -128: no line) each ending a range (Objects/lnotab_notes.txt of 3.10). */
static int linetable310_line(const uint8_t *table, size_t size, int firstlineno, uint32_t instr,
                             int *ret_line) {
        uint64_t start, end = 0, want = 2ULL * instr; /* in bytes */
        int line = firstlineno;

        for (size_t i = 0; i + 1 < size; i += 2) {
                int8_t delta = (int8_t) table[i + 1];
                start = end;
                end = start + table[i];
                if (delta != -128)
                        line += delta;
                if (want >= start && want < end) {
                        if (delta == -128)
                                return -ENOENT;
                        *ret_line = line;
                        return 0;
                }
        }
        return -ENOENT;
}

int python_code_line_format(unsigned format, const uint8_t *table, size_t size, int firstlineno,
                            uint32_t instr, int *ret_line) {
        if (!table || !ret_line)
                return -EINVAL;
        switch (format) {
        case PYTHON_LINETABLE_LNOTAB:
                return lnotab_line(table, size, firstlineno, instr, ret_line);
        case PYTHON_LINETABLE_310:
                return linetable310_line(table, size, firstlineno, instr, ret_line);
        case PYTHON_LINETABLE_LOCATIONS:
                return python_code_line(table, size, firstlineno, instr, ret_line);
        default:
                return -EOPNOTSUPP;
        }
}

/* Every field inside what is read of its object, and a way to the instruction. */
const char *python_offsets_invalid(const PythonOffsets *o) {
        const struct {
                const char *name;
                uint16_t offset, size, limit;
        } fields[] = {
                { "frame_code", o->frame_code, 8, o->frame_size },
                { "frame_previous", o->frame_previous, 8, o->frame_size },
                { "frame_prev_instr", o->frame_prev_instr, 8, o->frame_size },
                { "frame_is_entry", o->frame_is_entry, 1, o->frame_size },
                { "frame_owner", o->frame_owner, 1, o->frame_size },
                { "frame_lasti", o->frame_lasti, 4, o->frame_size },
                { "code_filename", o->code_filename, 8, o->code_header_size },
                { "code_name", o->code_name, 8, o->code_header_size },
                { "code_qualname", o->code_qualname, 8, o->code_header_size },
                { "code_linetable", o->code_linetable, 8, o->code_header_size },
                { "code_firstlineno", o->code_firstlineno, 4, o->code_header_size },
                { "object_type", o->object_type, 8, o->code_header_size },
                { "unicode_length", o->unicode_length, 8, o->unicode_ascii_data },
                { "unicode_state", o->unicode_state, 4, o->unicode_ascii_data },
        };

        if (o->frame_size == 0 || o->frame_size >= 128) /* the walk reads at most 127 bytes of a frame */
                return "frame_size";
        if (o->code_header_size > 256)
                return "code_header_size";
        if (o->unicode_ascii_data == 0 || o->unicode_ascii_data > 128 || o->unicode_compact_data > 128)
                return "unicode_ascii_data";
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                if (fields[i].offset == PYTHON_NO_OFFSET) {
                        if (i < 2 || i >= 6)
                                return fields[i].name; /* needed */
                        continue;
                }
                if ((unsigned) fields[i].offset + fields[i].size > fields[i].limit)
                        return fields[i].name;
        }
        if (o->frame_prev_instr == PYTHON_NO_OFFSET && o->frame_lasti == PYTHON_NO_OFFSET)
                return "frame_prev_instr";
        if (o->linetable_format < PYTHON_LINETABLE_LNOTAB ||
            o->linetable_format > PYTHON_LINETABLE_LOCATIONS)
                return "linetable_format";
        return NULL;
}

int python_str_parse(const PythonOffsets *o, const uint8_t *header, size_t size, PythonStr *ret) {
        uint64_t length;
        uint32_t state;
        unsigned kind;
        bool compact, ascii;

        if (!o || !header || !ret || size < o->unicode_compact_data)
                return -EINVAL;
        memcpy(&length, header + o->unicode_length, sizeof(length));
        memcpy(&state, header + o->unicode_state, sizeof(state));
        /* 3.11: interned:2, kind:3, compact:1, ascii:1, ready:1 */
        kind = (state >> 2) & 7;
        compact = (state >> 5) & 1;
        ascii = (state >> 6) & 1;
        if (!compact)
                return -EOPNOTSUPP;
        if (kind != 1 && kind != 2 && kind != 4)
                return -EBADMSG;
        if (length > (1u << 20))
                return -E2BIG;
        *ret = (PythonStr){
                .length = (size_t) length,
                .kind = kind,
                .ascii = ascii,
                .data_offset = ascii ? o->unicode_ascii_data : o->unicode_compact_data,
        };
        return 0;
}

int python_str_to_utf8(const void *data, size_t length, unsigned kind, char **ret) {
        char *s, *p;

        if (!ret || (!data && length > 0) || (kind != 1 && kind != 2 && kind != 4))
                return -EINVAL;
        if (length > (1u << 20))
                return -E2BIG;
        s = malloc(length * 4 + 1);
        if (!s)
                return -ENOMEM;
        p = s;
        for (size_t i = 0; i < length; i++) {
                uint32_t c;
                if (kind == 1)
                        c = ((const uint8_t *) data)[i];
                else if (kind == 2) {
                        uint16_t v;
                        memcpy(&v, (const uint8_t *) data + 2 * i, 2);
                        c = v;
                } else
                        memcpy(&c, (const uint8_t *) data + 4 * i, 4);
                if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff) || c == 0)
                        c = c == 0 ? '?' : 0xfffd;
                if (c < 0x80)
                        *p++ = (char) c;
                else if (c < 0x800) {
                        *p++ = (char) (0xc0 | (c >> 6));
                        *p++ = (char) (0x80 | (c & 0x3f));
                } else if (c < 0x10000) {
                        *p++ = (char) (0xe0 | (c >> 12));
                        *p++ = (char) (0x80 | ((c >> 6) & 0x3f));
                        *p++ = (char) (0x80 | (c & 0x3f));
                } else {
                        *p++ = (char) (0xf0 | (c >> 18));
                        *p++ = (char) (0x80 | ((c >> 12) & 0x3f));
                        *p++ = (char) (0x80 | ((c >> 6) & 0x3f));
                        *p++ = (char) (0x80 | (c & 0x3f));
                }
        }
        *p = 0;
        *ret = s;
        return 0;
}
