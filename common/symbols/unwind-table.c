/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The unwind-table builder: an ELF file's call frame information (.eh_frame,
 * or .debug_frame when the file has no .eh_frame) turned into the rows of
 * bpf/unwind.h, for the BPF stack walker.
 *
 * The CIEs, FDEs and CFA programs are parsed here, not with libdw, for two
 * reasons:
 *  - cost: libdw's public API (dwarf_cfi_addrframe) answers "the frame at
 *    this address" and re-executes the FDE's CFA program from the FDE's
 *    start for every address asked. A table needs every row of every FDE:
 *    here one pass over each FDE's program produces all of them, linear
 *    instead of quadratic in the length of a function's program.
 *  - hostile input: the files are whatever a profiled process maps. Every
 *    bound is ours and visible here (entry lengths, augmentation data,
 *    pointer encodings, the remember_state stack, the row cap), and a
 *    fuzzer (tests/fuzz/) runs this very file.
 *
 * The work, for one section:
 *  1. walk the entries once and parse every CIE: its augmentation, and its
 *     initial instructions, run once into an initial state;
 *  2. walk them again and parse every FDE's header (its address range and
 *     program), finding its CIE (the CIE pointer is relative in .eh_frame,
 *     a section offset in .debug_frame);
 *  3. sort the FDEs by start address, and run each FDE's program once,
 *     emitting a row each time the location advances, a CGPROF_CFA_NONE row
 *     in every gap between FDEs and after the last one, merging a row into
 *     the previous one when both say the same thing.
 * A broken CIE or FDE (truncated, unknown encoding or opcode, bad CIE
 * pointer, overlapping an earlier FDE...) is skipped and counted; a broken
 * length ends the walk, since nothing after it can be found.
 *
 * Only the registers the walker needs are tracked: the CFA, the frame
 * pointer and the return address column. Their DWARF numbers come from a
 * small table keyed by e_machine (x86-64 only, for now). */

#include <gelf.h>
#include <libelf.h>

#include "elf-util.h"
#include "go-unwind.h"
#include "log.h"
#include "unwind-table.h"

/* DWARF call frame instructions (DWARF 5, section 6.4.2; GNU extensions). */
enum {
        DW_CFA_advance_loc = 0x40, /* high 2 bits; low 6 bits: delta */
        DW_CFA_offset = 0x80, /* low 6 bits: register */
        DW_CFA_restore = 0xc0, /* low 6 bits: register */
        DW_CFA_nop = 0x00,
        DW_CFA_set_loc = 0x01,
        DW_CFA_advance_loc1 = 0x02,
        DW_CFA_advance_loc2 = 0x03,
        DW_CFA_advance_loc4 = 0x04,
        DW_CFA_offset_extended = 0x05,
        DW_CFA_restore_extended = 0x06,
        DW_CFA_undefined = 0x07,
        DW_CFA_same_value = 0x08,
        DW_CFA_register = 0x09,
        DW_CFA_remember_state = 0x0a,
        DW_CFA_restore_state = 0x0b,
        DW_CFA_def_cfa = 0x0c,
        DW_CFA_def_cfa_register = 0x0d,
        DW_CFA_def_cfa_offset = 0x0e,
        DW_CFA_def_cfa_expression = 0x0f,
        DW_CFA_expression = 0x10,
        DW_CFA_offset_extended_sf = 0x11,
        DW_CFA_def_cfa_sf = 0x12,
        DW_CFA_def_cfa_offset_sf = 0x13,
        DW_CFA_val_offset = 0x14,
        DW_CFA_val_offset_sf = 0x15,
        DW_CFA_val_expression = 0x16,
        DW_CFA_MIPS_advance_loc8 = 0x1d,
        DW_CFA_GNU_args_size = 0x2e,
        DW_CFA_GNU_negative_offset_extended = 0x2f,
};

/* Pointer encodings of .eh_frame (LSB, "DWARF Exception Header Encoding"). */
enum {
        DW_EH_PE_absptr = 0x00,
        DW_EH_PE_uleb128 = 0x01,
        DW_EH_PE_udata2 = 0x02,
        DW_EH_PE_udata4 = 0x03,
        DW_EH_PE_udata8 = 0x04,
        DW_EH_PE_signed = 0x08,
        DW_EH_PE_sleb128 = 0x09,
        DW_EH_PE_sdata2 = 0x0a,
        DW_EH_PE_sdata4 = 0x0b,
        DW_EH_PE_sdata8 = 0x0c,
        DW_EH_PE_pcrel = 0x10,
        DW_EH_PE_textrel = 0x20,
        DW_EH_PE_datarel = 0x30,
        DW_EH_PE_indirect = 0x80,
        DW_EH_PE_omit = 0xff,
};

/* The DWARF expression binutils emits as the CFA of x86-64 PLT stubs:
 * DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
 * DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus, i.e.
 * CFA = rsp + 8 + ((rip & 15) >= N ? 8 : 0), N being where the stub's
 * push ends: 11 in .plt (16-byte stubs: push at 6, jmp to PLT0 at 11), 9 in
 * the lazy .plt of an IBT binary (endbr64 first, the push at 4). Any N is
 * taken (the row keeps it). Byte 6 is DW_OP_litN. */
#define DW_OP_lit0 0x30
#define DW_OP_lit31 0x4f
static const uint8_t x86_64_plt_expression[] = { 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x30 /* litN */,
                                                 0x2a, 0x33, 0x24, 0x22 };
#define X86_64_PLT_LITN_INDEX 6

/* The CFA of glibc's x86-64 signal trampoline (__restore_rt, whose CIE has
 * the 'S' augmentation): DW_OP_breg7 (rsp) 160; DW_OP_deref, i.e. the rsp
 * saved in the struct ucontext at rsp (uc_mcontext.gregs[REG_RSP]). Its
 * other rules (DW_CFA_expression: each register at rsp + its offset in the
 * ucontext) the walker does not need: it reads rip, rsp and rbp from the
 * ucontext (CGPROF_CFA_SIGNAL, bpf/unwind.h). */
static const uint8_t x86_64_ucontext_cfa_expression[] = { 0x77, 0xa0, 0x01 /* sleb128 160 */, 0x06 };

/* Register numbers (DWARF) and return-address convention per architecture. */
typedef struct UnwindArch {
        unsigned machine; /* e_machine */
        uint64_t sp, fp, ra; /* DWARF register numbers */
        int64_t ra_cfa_offset; /* where the walker expects the return address: CFA + this */
        bool x86_64_plt; /* recognize binutils' PLT expression */
} UnwindArch;

static const UnwindArch unwind_arches[] = {
        { .machine = EM_X86_64, .sp = 7, .fp = 6, .ra = 16, .ra_cfa_offset = -8, .x86_64_plt = true },
        /* arm64 would be { EM_AARCH64, .sp = 31, .fp = 29, .ra = 30 }, but its
         * return address lives in x30 until the prologue saves it: it needs a
         * row rule of its own first (bpf/unwind.h), and DW_CFA_AARCH64_negate_ra_state (0x2d). */
};

/* Bounds on hostile input. */
#define REMEMBER_STATE_MAX 16U
#define COMPRESSED_SECTION_MAX (UINT64_C(1) << 30) /* a decompressed .debug_frame, bytes */

/* Reading little-endian DWARF: a cursor that never goes past its end; the
 * first short read sets 'fail' and every later read returns 0. */
typedef struct Cursor {
        const uint8_t *p, *end;
        bool fail;
} Cursor;

static bool cursor_need(Cursor *c, size_t n) {
        if (c->fail || (size_t) (c->end - c->p) < n) {
                c->fail = true;
                c->p = c->end;
                return false;
        }
        return true;
}

static size_t cursor_left(const Cursor *c) {
        return (size_t) (c->end - c->p);
}

static uint64_t read_le(Cursor *c, size_t n) {
        uint64_t v = 0;

        if (!cursor_need(c, n))
                return 0;
        for (size_t i = 0; i < n; i++)
                v |= (uint64_t) c->p[i] << (8 * i);
        c->p += n;
        return v;
}

static uint8_t read_u8(Cursor *c) {
        return (uint8_t) read_le(c, 1);
}

static void cursor_skip(Cursor *c, uint64_t n) {
        if (n > cursor_left(c)) {
                c->fail = true;
                c->p = c->end;
                return;
        }
        c->p += n;
}

/* Bits beyond 64 are dropped (as readelf does); the loop ends at c->end.
 * *ret_shift and *ret_last (may be NULL) tell a signed reader where the
 * sign bit is. */
static uint64_t read_leb(Cursor *c, unsigned *ret_shift, uint8_t *ret_last) {
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t b = 0;

        do {
                if (!cursor_need(c, 1))
                        return 0;
                b = *c->p++;
                if (shift < 64) {
                        v |= (uint64_t) (b & 0x7f) << shift;
                        shift += 7;
                }
        } while (b & 0x80);
        if (ret_shift)
                *ret_shift = shift;
        if (ret_last)
                *ret_last = b;
        return v;
}

static uint64_t read_uleb(Cursor *c) {
        return read_leb(c, NULL, NULL);
}

static int64_t read_sleb(Cursor *c) {
        unsigned shift = 64;
        uint8_t last = 0;
        uint64_t v = read_leb(c, &shift, &last);

        if (shift < 64 && (last & 0x40))
                v |= ~UINT64_C(0) << shift;
        return (int64_t) v;
}

/* One CFI section as read from the file. */
typedef struct FrameSection {
        const uint8_t *data;
        size_t size;
        uint64_t addr; /* sh_addr, the base of DW_EH_PE_pcrel */
        bool eh; /* .eh_frame (else .debug_frame) */
        uint8_t addr_size; /* from the ELF class; a version 4 CIE gives its own */
        bool has_datarel;
        uint64_t datarel; /* .got's address, the base of DW_EH_PE_datarel (as on i386) */
} FrameSection;

static uint64_t sign_extend(uint64_t v, unsigned bytes) {
        unsigned shift = 64 - 8 * bytes;

        return bytes >= 8 ? v : (uint64_t) ((int64_t) (v << shift) >> shift);
}

/* A pointer in DW_EH_PE encoding 'enc' at c. With value_only, only the
 * value format counts (an FDE's address range). The indirect bit is the
 * caller's business (no memory to read it from here). */
static int read_encoded(Cursor *c, uint8_t enc, uint8_t addr_size, const FrameSection *s, bool value_only,
                        uint64_t *ret) {
        const uint8_t *field = c->p;
        uint64_t v, base = 0;

        if (enc == DW_EH_PE_omit)
                return -EBADMSG;

        switch (enc & 0x0f) {
        case DW_EH_PE_absptr:
                v = read_le(c, addr_size);
                break;
        case DW_EH_PE_signed:
                v = sign_extend(read_le(c, addr_size), addr_size);
                break;
        case DW_EH_PE_uleb128:
                v = read_uleb(c);
                break;
        case DW_EH_PE_sleb128:
                v = (uint64_t) read_sleb(c);
                break;
        case DW_EH_PE_udata2:
                v = read_le(c, 2);
                break;
        case DW_EH_PE_udata4:
                v = read_le(c, 4);
                break;
        case DW_EH_PE_udata8:
                v = read_le(c, 8);
                break;
        case DW_EH_PE_sdata2:
                v = sign_extend(read_le(c, 2), 2);
                break;
        case DW_EH_PE_sdata4:
                v = sign_extend(read_le(c, 4), 4);
                break;
        case DW_EH_PE_sdata8:
                v = read_le(c, 8);
                break;
        default:
                return -EBADMSG;
        }
        if (c->fail)
                return -EBADMSG;

        if (!value_only)
                switch (enc & 0x70) {
                case DW_EH_PE_absptr:
                        break;
                case DW_EH_PE_pcrel:
                        base = s->addr + (uint64_t) (field - s->data);
                        break;
                case DW_EH_PE_datarel:
                        if (!s->has_datarel)
                                return -EBADMSG;
                        base = s->datarel;
                        break;
                default: /* textrel, funcrel, aligned: unsupported */
                        return -EBADMSG;
                }

        v += base; /* modulo 2^64, as the address arithmetic it stands for */
        if (addr_size < 8)
                v &= (UINT64_C(1) << (8 * addr_size)) - 1;
        *ret = v;
        return 0;
}

/* The rule for one register, as far as the walker cares. */
typedef enum RuleKind {
        RULE_UNMENTIONED, /* no instruction named it: callee-saved, unchanged */
        RULE_UNDEFINED,
        RULE_SAME,
        RULE_OFFSET, /* saved at CFA + offset */
        RULE_VAL_OFFSET,
        RULE_REGISTER,
        RULE_EXPRESSION,
        RULE_VAL_EXPRESSION,
} RuleKind;

typedef struct RegRule {
        uint8_t kind; /* RuleKind */
        int64_t offset;
} RegRule;

typedef enum CfaKind {
        CFA_KIND_UNSET, /* no def_cfa yet */
        CFA_KIND_REG, /* register + offset */
        CFA_KIND_PLT, /* the x86-64 PLT expression */
        CFA_KIND_UCONTEXT, /* the x86-64 signal trampoline's: the rsp saved in the ucontext at rsp */
        CFA_KIND_EXPR, /* any other expression */
} CfaKind;

typedef struct CfaRule {
        uint8_t kind; /* CfaKind */
        uint8_t plt_n; /* CFA_KIND_PLT: N of DW_OP_litN */
        uint64_t reg;
        int64_t offset;
} CfaRule;

typedef struct FrameState {
        CfaRule cfa;
        RegRule fp, ra;
} FrameState;

typedef struct Cie {
        size_t offset; /* of the entry in the section */
        bool bad;
        bool z; /* augmentation data with its length ('z') */
        bool signal; /* 'S': its FDEs describe signal trampolines */
        uint8_t fde_enc;
        uint8_t addr_size, segment_size;
        uint64_t code_align;
        int64_t data_align;
        uint64_t ra_reg;
        FrameState initial; /* after the initial instructions */
} Cie;

typedef struct Fde {
        uint64_t start, end;
        const uint8_t *insns, *insns_end;
        const Cie *cie;
        size_t offset; /* of the entry in the section: ties in the sort */
} Fde;

/* One entry (CIE or FDE) of the section. */
typedef struct Entry {
        size_t offset; /* of the length field */
        size_t id_offset; /* of the CIE id / CIE pointer */
        uint64_t id;
        bool bad; /* the length is fine but the id does not fit */
        const uint8_t *body, *end; /* after the id; end of the entry */
} Entry;

/* Returns 1 and the entry at *off (advancing *off past it), 0 at the end of
 * the section, -EBADMSG when the length is broken (nothing after it can be
 * found). Zero terminators are skipped, as readelf does. */
static int next_entry(const FrameSection *s, size_t *off, Entry *e) {
        for (;;) {
                Cursor c = { .p = s->data + *off, .end = s->data + s->size };
                uint64_t length;
                bool dwarf64 = false;

                if (*off >= s->size || cursor_left(&c) < 4)
                        return 0;
                length = read_le(&c, 4);
                if (length == 0) {
                        *off += 4;
                        continue;
                }
                if (length == 0xffffffff) {
                        length = read_le(&c, 8);
                        dwarf64 = true;
                        if (c.fail)
                                return -EBADMSG;
                } else if (length >= 0xfffffff0)
                        return -EBADMSG; /* reserved */
                if (length > cursor_left(&c))
                        return -EBADMSG;

                *e = (Entry){
                        .offset = *off,
                        .id_offset = (size_t) (c.p - s->data),
                        .end = c.p + length,
                };
                c.end = e->end;
                e->id = read_le(&c, dwarf64 ? 8 : 4);
                e->bad = c.fail;
                e->body = c.p;
                *off = (size_t) (e->end - s->data);
                return 1;
        }
}

static bool entry_is_cie(const FrameSection *s, const Entry *e) {
        if (s->eh)
                return e->id == 0;
        return e->id == UINT64_C(0xffffffff) || e->id == UINT64_MAX;
}

static bool factored(uint64_t u, int64_t factor, int64_t *ret) {
        if (u > INT64_MAX)
                return false;
        return !__builtin_mul_overflow((int64_t) u, factor, ret);
}

static bool factored_signed(int64_t v, int64_t factor, int64_t *ret) {
        return !__builtin_mul_overflow(v, factor, ret);
}

/* The table being built. */
typedef struct Builder {
        struct cgprof_unwind_row *rows;
        size_t n_rows, n_allocated;
        size_t n_raw;
        uint64_t base;
} Builder;

/* The row the walker gets for a state of an FDE of cie. */
static struct cgprof_unwind_row state_to_row(const UnwindArch *a, const Cie *cie, const FrameState *s) {
        struct cgprof_unwind_row row = {};
        uint8_t cfa = CGPROF_CFA_UNSUPPORTED, fp;

        if (cie->signal && s->cfa.kind == CFA_KIND_UCONTEXT) {
                /* A signal trampoline: the walker reads the interrupted
                 * registers from the ucontext (its other rules say the same). */
                row.rule = CGPROF_UNWIND_RULE(CGPROF_CFA_SIGNAL, CGPROF_FP_SAME);
                return row;
        }
        if (s->ra.kind == RULE_UNDEFINED) {
                row.rule = CGPROF_UNWIND_RULE(CGPROF_CFA_END, CGPROF_FP_SAME);
                return row;
        }

        switch (s->fp.kind) {
        case RULE_UNMENTIONED:
        case RULE_UNDEFINED:
        case RULE_SAME:
                fp = CGPROF_FP_SAME;
                break;
        case RULE_OFFSET:
                if (s->fp.offset % 8 == 0 && s->fp.offset / 8 >= INT8_MIN && s->fp.offset / 8 <= INT8_MAX) {
                        fp = CGPROF_FP_AT_CFA;
                        row.fp_offset = (__s8) (s->fp.offset / 8);
                } else
                        fp = CGPROF_FP_UNKNOWN;
                break;
        default:
                fp = CGPROF_FP_UNKNOWN;
        }

        if (s->ra.kind == RULE_OFFSET && s->ra.offset == a->ra_cfa_offset)
                switch (s->cfa.kind) {
                case CFA_KIND_REG:
                        if ((s->cfa.reg == a->sp || s->cfa.reg == a->fp) && s->cfa.offset >= 0 &&
                            s->cfa.offset <= UINT16_MAX) {
                                cfa = s->cfa.reg == a->sp ? CGPROF_CFA_SP : CGPROF_CFA_FP;
                                row.cfa_offset = (__u16) s->cfa.offset;
                        }
                        break;
                case CFA_KIND_PLT:
                        cfa = CGPROF_CFA_PLT;
                        row.cfa_offset = s->cfa.plt_n;
                        break;
                default:
                        break;
                }

        row.rule = CGPROF_UNWIND_RULE(cfa, fp);
        return row;
}

static bool row_same(const struct cgprof_unwind_row *a, const struct cgprof_unwind_row *b) {
        return a->rule == b->rule && a->cfa_offset == b->cfa_offset && a->fp_offset == b->fp_offset;
}

int unwind_rows_append(struct cgprof_unwind_row **rows, size_t *n_rows, size_t *n_allocated,
                       struct cgprof_unwind_row row) {
        if (*n_rows > 0 && row_same(&(*rows)[*n_rows - 1], &row))
                return 0;
        if (*n_rows >= *n_allocated) {
                struct cgprof_unwind_row *a;
                size_t n;

                if (*n_rows >= UNWIND_TABLE_ROWS_MAX)
                        return -E2BIG;
                n = MIN(MAX(*n_allocated * 2, (size_t) 256), (size_t) UNWIND_TABLE_ROWS_MAX);
                a = reallocarray(*rows, n, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                *rows = a;
                *n_allocated = n;
        }
        (*rows)[(*n_rows)++] = row;
        return 0;
}

/* Appends a row at pc (strictly above the previous row's, which the callers
 * ensure), or merges it into the previous row when they are equal. */
static int builder_push(Builder *b, uint64_t pc, struct cgprof_unwind_row row) {
        if (pc < b->base || pc - b->base > UINT32_MAX)
                return -E2BIG;
        row.pc = (__u32) (pc - b->base);
        b->n_raw++;

        return unwind_rows_append(&b->rows, &b->n_rows, &b->n_allocated, row);
}

static void set_rule(FrameState *st, const UnwindArch *a, const Cie *cie, uint64_t reg, RuleKind kind,
                     int64_t offset) {
        RegRule r = { .kind = (uint8_t) kind, .offset = offset };

        if (reg == a->fp)
                st->fp = r;
        if (reg == cie->ra_reg)
                st->ra = r;
}

static void restore_rule(FrameState *st, const FrameState *initial, const UnwindArch *a, const Cie *cie,
                         uint64_t reg) {
        if (reg == a->fp)
                st->fp = initial->fp;
        if (reg == cie->ra_reg)
                st->ra = initial->ra;
}

static void set_cfa_expression(FrameState *st, const UnwindArch *a, const uint8_t *expr, uint64_t len) {
        if (a->x86_64_plt && len == sizeof(x86_64_plt_expression)) {
                uint8_t lit = expr[X86_64_PLT_LITN_INDEX];
                bool match = lit >= DW_OP_lit0 && lit <= DW_OP_lit31;

                for (size_t i = 0; match && i < len; i++)
                        if (i != X86_64_PLT_LITN_INDEX && expr[i] != x86_64_plt_expression[i])
                                match = false;
                if (match) {
                        st->cfa.kind = CFA_KIND_PLT;
                        st->cfa.plt_n = (uint8_t) (lit - DW_OP_lit0);
                        return;
                }
        }
        if (a->machine == EM_X86_64 && len == sizeof(x86_64_ucontext_cfa_expression) &&
            memcmp(expr, x86_64_ucontext_cfa_expression, len) == 0) {
                st->cfa.kind = CFA_KIND_UCONTEXT;
                return;
        }
        st->cfa.kind = CFA_KIND_EXPR;
}

/* A DW_CFA_advance_loc* or DW_CFA_set_loc moved the location by delta
 * (code alignment factors, or bytes when in_bytes): the state so far holds
 * from *loc up to the new location, a row for b when it lies in [*loc,
 * end). Returns 1 once past 'end' (the rest describes addresses outside the
 * FDE), 0 to go on, -EBADMSG on an overflow, -E2BIG/-ENOMEM from the
 * table. */
static int advance_loc(Builder *b, const UnwindArch *a, const Cie *cie, const FrameState *st, uint64_t delta,
                       bool in_bytes, uint64_t end, uint64_t *loc) {
        int r;

        if (!in_bytes && __builtin_mul_overflow(delta, cie->code_align, &delta))
                return -EBADMSG;
        if (delta > UINT64_MAX - *loc)
                return -EBADMSG;
        if (!b || delta == 0) {
                *loc += delta;
                return 0;
        }
        if (*loc < end) {
                r = builder_push(b, *loc, state_to_row(a, cie, st));
                if (r < 0)
                        return r;
        }
        *loc += delta;
        return *loc >= end;
}

/* Runs a CFA program. For a CIE (b == NULL) the initial instructions: no
 * rows, *state becomes the CIE's initial state. For an FDE: rows from
 * 'start' up to 'end' (exclusive) go to b; the program stops once past
 * 'end'. Returns -EBADMSG on anything malformed or unknown (the entry is
 * then skipped), -E2BIG/-ENOMEM from the table.
 *
 * Over 100 lines on purpose: a table-driven interpreter of the DWARF
 * call-frame instructions, whose one switch (a short case per opcode,
 * reading its operands and changing the state) is its natural shape; split,
 * the cases would scatter over helpers that all need the cursor, the state,
 * the remember stack and the location. */
static int run_program(Builder *b, const UnwindArch *a, const FrameSection *s, const Cie *cie,
                       const uint8_t *insns, const uint8_t *insns_end, uint64_t start, uint64_t end,
                       FrameState *state) {
        static const FrameState unset = {};
        const FrameState *initial = b ? &cie->initial : &unset;
        FrameState stack[REMEMBER_STATE_MAX];
        FrameState st = *initial;
        Cursor c = { .p = insns, .end = insns_end };
        unsigned depth = 0;
        uint64_t loc = start;
        int r;

        while (c.p < c.end) {
                uint8_t op = *c.p++;
                uint64_t reg = 0, u, delta = 0, next;
                int64_t off;
                bool advance = false, in_bytes = false;

                switch (op & 0xc0) {
                case DW_CFA_advance_loc:
                        delta = op & 0x3f;
                        advance = true;
                        break;
                case DW_CFA_offset:
                        if (!factored(read_uleb(&c), cie->data_align, &off))
                                return -EBADMSG;
                        set_rule(&st, a, cie, op & 0x3f, RULE_OFFSET, off);
                        break;
                case DW_CFA_restore:
                        restore_rule(&st, initial, a, cie, op & 0x3f);
                        break;
                default:
                        switch (op) {
                        case DW_CFA_nop:
                                break;
                        case DW_CFA_set_loc:
                                if (cie->fde_enc & DW_EH_PE_indirect)
                                        return -EBADMSG;
                                if (read_encoded(&c, cie->fde_enc, cie->addr_size, s, false, &next) < 0)
                                        return -EBADMSG;
                                if (next < loc)
                                        return -EBADMSG;
                                delta = next - loc;
                                advance = in_bytes = true; /* no code alignment factor */
                                break;
                        case DW_CFA_advance_loc1:
                                delta = read_le(&c, 1);
                                advance = true;
                                break;
                        case DW_CFA_advance_loc2:
                                delta = read_le(&c, 2);
                                advance = true;
                                break;
                        case DW_CFA_advance_loc4:
                                delta = read_le(&c, 4);
                                advance = true;
                                break;
                        case DW_CFA_MIPS_advance_loc8:
                                delta = read_le(&c, 8);
                                advance = true;
                                break;
                        case DW_CFA_offset_extended:
                        case DW_CFA_offset_extended_sf:
                        case DW_CFA_val_offset:
                        case DW_CFA_val_offset_sf: {
                                /* A register's rule from an offset: unsigned or signed (_sf), factored. */
                                bool sf = op == DW_CFA_offset_extended_sf || op == DW_CFA_val_offset_sf;
                                RuleKind kind = op == DW_CFA_val_offset || op == DW_CFA_val_offset_sf
                                                        ? RULE_VAL_OFFSET
                                                        : RULE_OFFSET;

                                reg = read_uleb(&c);
                                if (sf ? !factored_signed(read_sleb(&c), cie->data_align, &off)
                                       : !factored(read_uleb(&c), cie->data_align, &off))
                                        return -EBADMSG;
                                set_rule(&st, a, cie, reg, kind, off);
                                break;
                        }
                        case DW_CFA_GNU_negative_offset_extended:
                                reg = read_uleb(&c);
                                if (!factored(read_uleb(&c), cie->data_align, &off) || off == INT64_MIN)
                                        return -EBADMSG;
                                set_rule(&st, a, cie, reg, RULE_OFFSET, -off);
                                break;
                        case DW_CFA_restore_extended:
                                restore_rule(&st, initial, a, cie, read_uleb(&c));
                                break;
                        case DW_CFA_undefined:
                                set_rule(&st, a, cie, read_uleb(&c), RULE_UNDEFINED, 0);
                                break;
                        case DW_CFA_same_value:
                                set_rule(&st, a, cie, read_uleb(&c), RULE_SAME, 0);
                                break;
                        case DW_CFA_register:
                                reg = read_uleb(&c);
                                (void) read_uleb(&c);
                                set_rule(&st, a, cie, reg, RULE_REGISTER, 0);
                                break;
                        case DW_CFA_remember_state:
                                if (depth >= REMEMBER_STATE_MAX)
                                        return -EBADMSG;
                                stack[depth++] = st;
                                break;
                        case DW_CFA_restore_state:
                                if (depth == 0)
                                        return -EBADMSG;
                                st = stack[--depth];
                                break;
                        case DW_CFA_def_cfa:
                                reg = read_uleb(&c);
                                u = read_uleb(&c);
                                if (u > INT64_MAX)
                                        return -EBADMSG;
                                st.cfa =
                                        (CfaRule){ .kind = CFA_KIND_REG, .reg = reg, .offset = (int64_t) u };
                                break;
                        case DW_CFA_def_cfa_sf:
                                reg = read_uleb(&c);
                                if (!factored_signed(read_sleb(&c), cie->data_align, &off))
                                        return -EBADMSG;
                                st.cfa = (CfaRule){ .kind = CFA_KIND_REG, .reg = reg, .offset = off };
                                break;
                        case DW_CFA_def_cfa_register:
                                /* Keeps the offset (also one an expression left behind, as readelf does). */
                                st.cfa.kind = CFA_KIND_REG;
                                st.cfa.reg = read_uleb(&c);
                                break;
                        case DW_CFA_def_cfa_offset:
                                u = read_uleb(&c);
                                if (u > INT64_MAX)
                                        return -EBADMSG;
                                st.cfa.offset = (int64_t) u;
                                break;
                        case DW_CFA_def_cfa_offset_sf:
                                if (!factored_signed(read_sleb(&c), cie->data_align, &off))
                                        return -EBADMSG;
                                st.cfa.offset = off;
                                break;
                        case DW_CFA_def_cfa_expression:
                                u = read_uleb(&c);
                                if (c.fail || u > cursor_left(&c))
                                        return -EBADMSG;
                                set_cfa_expression(&st, a, c.p, u);
                                c.p += u;
                                break;
                        case DW_CFA_expression:
                        case DW_CFA_val_expression:
                                reg = read_uleb(&c);
                                cursor_skip(&c, read_uleb(&c));
                                set_rule(&st, a, cie, reg,
                                         op == DW_CFA_expression ? RULE_EXPRESSION : RULE_VAL_EXPRESSION, 0);
                                break;
                        case DW_CFA_GNU_args_size:
                                (void) read_uleb(&c);
                                break;
                        default:
                                return -EBADMSG;
                        }
                }
                if (c.fail)
                        return -EBADMSG;
                if (!advance)
                        continue;
                r = advance_loc(b, a, cie, &st, delta, in_bytes, end, &loc);
                if (r < 0)
                        return r;
                if (r > 0)
                        break;
        }

        if (b && loc < end) {
                r = builder_push(b, loc, state_to_row(a, cie, &st));
                if (r < 0)
                        return r;
        }
        if (state)
                *state = st;
        return 0;
}

static int parse_cie(const UnwindArch *a, const FrameSection *s, const Entry *e, Cie *cie) {
        Cursor c = { .p = e->body, .end = e->end }, aug;
        const char *augmentation, *p;
        const uint8_t *nul;
        uint8_t version;

        *cie = (Cie){
                .offset = e->offset,
                .fde_enc = DW_EH_PE_absptr,
                .addr_size = s->addr_size,
        };

        version = read_u8(&c);
        if (c.fail || (version != 1 && version != 3 && version != 4))
                return -EBADMSG;

        nul = memchr(c.p, 0, cursor_left(&c));
        if (!nul)
                return -EBADMSG;
        augmentation = (const char *) c.p;
        c.p = nul + 1;

        p = augmentation;
        if (p[0] == 'e' && p[1] == 'h') {
                /* Old GCC: the address of the exception table, a pointer. */
                cursor_skip(&c, s->addr_size);
                p += 2;
        }
        if (version >= 4) {
                cie->addr_size = read_u8(&c);
                cie->segment_size = read_u8(&c);
                if (cie->addr_size != 4 && cie->addr_size != 8)
                        return -EBADMSG;
                if (cie->segment_size > 8)
                        return -EBADMSG;
        }
        cie->code_align = read_uleb(&c);
        cie->data_align = read_sleb(&c);
        cie->ra_reg = version == 1 ? read_u8(&c) : read_uleb(&c);
        if (c.fail)
                return -EBADMSG;

        /* The augmentation data: bounded by its length with 'z', else it runs
         * on into the instructions (GCC's .debug_frame has "S" alone). */
        aug = c;
        if (*p == 'z') {
                uint64_t n = read_uleb(&c);

                if (c.fail || n > cursor_left(&c))
                        return -EBADMSG;
                aug = (Cursor){ .p = c.p, .end = c.p + n };
                c.p += n;
                cie->z = true;
                p++;
        }
        for (; *p; p++) {
                uint8_t enc;
                uint64_t ignored;

                switch (*p) {
                case 'R':
                        cie->fde_enc = read_u8(&aug);
                        break;
                case 'L':
                        (void) read_u8(
                                &aug); /* LSDA encoding: FDE augmentation data, skipped by its length */
                        break;
                case 'P':
                        enc = read_u8(&aug);
                        if (aug.fail || read_encoded(&aug, enc & (uint8_t) ~DW_EH_PE_indirect,
                                                     cie->addr_size, s, false, &ignored) < 0)
                                return -EBADMSG;
                        break;
                case 'S': /* signal frame */
                        cie->signal = true;
                        break;
                case 'B': /* arm64 BTI */
                case 'G': /* arm64 MTE */
                        break;
                default:
                        /* Like libgcc: with 'z' the instructions can still be found. */
                        if (!cie->z)
                                return -EBADMSG;
                        goto done;
                }
        }
done:
        if (aug.fail)
                return -EBADMSG;
        if (!cie->z)
                c = aug;

        return run_program(NULL, a, s, cie, c.p, c.end, 0, 0, &cie->initial);
}

static int parse_fde(const FrameSection *s, const Entry *e, const Cie *cie, Fde *f) {
        Cursor c = { .p = e->body, .end = e->end };
        uint64_t start, range;

        if (cie->fde_enc & DW_EH_PE_indirect)
                return -EBADMSG;
        if (!s->eh)
                cursor_skip(&c, cie->segment_size);
        if (read_encoded(&c, cie->fde_enc, cie->addr_size, s, false, &start) < 0 ||
            read_encoded(&c, cie->fde_enc & 0x0f, cie->addr_size, s, true, &range) < 0)
                return -EBADMSG;
        if (cie->z)
                cursor_skip(&c, read_uleb(&c));
        if (c.fail || range > UINT64_MAX - start)
                return -EBADMSG;

        *f = (Fde){
                .start = start,
                .end = start + range,
                .insns = c.p,
                .insns_end = c.end,
                .cie = cie,
                .offset = e->offset,
        };
        return 0;
}

static int cie_find_compare(const void *key, const void *elem) {
        const size_t *offset = key;
        const Cie *cie = elem;

        return CMP(*offset, cie->offset);
}

static int fde_compare(const void *a, const void *b) {
        const Fde *x = a, *y = b;
        int r;

        r = CMP(x->start, y->start);
        if (r != 0)
                return r;
        return CMP(x->offset, y->offset);
}

/* Walk 1: the CIEs (in section order, so sorted by offset). A bad one is
 * kept, marked bad, for its FDEs to be skipped. */
static int parse_cies(const UnwindArch *a, const FrameSection *s, UnwindTable *t, Cie **ret, size_t *ret_n) {
        _cleanup_free_ Cie *cies = NULL;
        size_t n_cies = 0, n_cies_allocated = 0, off = 0;
        Entry e;
        int r;

        while ((r = next_entry(s, &off, &e)) > 0) {
                if (e.bad) {
                        t->stats.n_bad_entries++;
                        continue;
                }
                if (!entry_is_cie(s, &e))
                        continue;
                if (GREEDY_REALLOC(cies, n_cies_allocated, n_cies + 1, 16) < 0)
                        return -ENOMEM;
                if (parse_cie(a, s, &e, &cies[n_cies]) < 0) {
                        log_debug("Skipping bad CIE at offset 0x%zx.", e.offset);
                        cies[n_cies].bad = true;
                        t->stats.n_bad_entries++;
                } else
                        t->stats.n_cies++;
                n_cies++;
        }
        if (r < 0) {
                log_debug("Broken entry length at offset 0x%zx, ignoring the rest of the section.", off);
                t->stats.n_bad_entries++;
        }

        *ret = TAKE_PTR(cies);
        *ret_n = n_cies;
        return 0;
}

/* The section offset of the CIE an FDE's CIE pointer names: -EBADMSG when
 * it points outside the section. */
static int fde_cie_offset(const FrameSection *s, const Entry *e, size_t *ret) {
        if (s->eh) {
                /* Relative to the CIE pointer field, backwards. */
                if (e->id > e->id_offset)
                        return -EBADMSG;
                *ret = e->id_offset - (size_t) e->id;
        } else {
                if (e->id >= s->size)
                        return -EBADMSG;
                *ret = (size_t) e->id;
        }
        return 0;
}

/* Walk 2: the FDEs' headers, each with its (valid) CIE. */
static int parse_fdes(const FrameSection *s, UnwindTable *t, const Cie *cies, size_t n_cies, Fde **ret,
                      size_t *ret_n) {
        _cleanup_free_ Fde *fdes = NULL;
        size_t n_fdes = 0, n_fdes_allocated = 0, off = 0;
        Entry e;

        while (next_entry(s, &off, &e) > 0) {
                const Cie *cie;
                size_t cie_offset;

                if (e.bad || entry_is_cie(s, &e))
                        continue;
                if (fde_cie_offset(s, &e, &cie_offset) < 0) {
                        t->stats.n_bad_entries++;
                        continue;
                }
                cie = n_cies > 0 ? bsearch(&cie_offset, cies, n_cies, sizeof(Cie), cie_find_compare) : NULL;
                if (!cie || cie->bad) {
                        log_debug("FDE at offset 0x%zx: no valid CIE at 0x%zx, skipping.", e.offset,
                                  cie_offset);
                        t->stats.n_bad_entries++;
                        continue;
                }

                if (GREEDY_REALLOC(fdes, n_fdes_allocated, n_fdes + 1, 256) < 0)
                        return -ENOMEM;
                if (parse_fde(s, &e, cie, &fdes[n_fdes]) < 0) {
                        log_debug("Skipping bad FDE at offset 0x%zx.", e.offset);
                        t->stats.n_bad_entries++;
                        continue;
                }
                n_fdes++;
        }

        *ret = TAKE_PTR(fdes);
        *ret_n = n_fdes;
        return 0;
}

/* Walk 3: the FDEs by address, each program once, into b, with a row of
 * nothing in each gap between them and at the end of the last one
 * (*ret_end). On failure b->rows is the caller's to free. */
static int build_rows(const UnwindArch *a, const FrameSection *s, UnwindTable *t, Fde *fdes, size_t n_fdes,
                      Builder *b, uint64_t *ret_end) {
        uint64_t prev_end = 0;
        bool any_row = false;
        int r;

        qsort(fdes, n_fdes, sizeof(Fde), fde_compare);
        for (size_t i = 0; i < n_fdes; i++) {
                const Fde *f = &fdes[i];
                size_t saved_rows = b->n_rows, saved_raw = b->n_raw;
                uint64_t saved_base = b->base;

                if (f->start == f->end) {
                        t->stats.n_fdes++;
                        continue;
                }
                if (any_row && f->start < prev_end) {
                        log_debug("FDE at offset 0x%zx overlaps an earlier one, skipping.", f->offset);
                        t->stats.n_bad_entries++;
                        continue;
                }
                if (!any_row)
                        b->base = f->start;
                if (f->end - b->base > UINT32_MAX)
                        return -E2BIG;

                /* A gap between the previous FDE and this one. */
                if (any_row && prev_end < f->start) {
                        r = builder_push(b, prev_end, (struct cgprof_unwind_row){});
                        if (r < 0)
                                return r;
                }

                r = run_program(b, a, s, f->cie, f->insns, f->insns_end, f->start, f->end, NULL);
                if (r == -EBADMSG) {
                        log_debug("Skipping FDE at offset 0x%zx: bad CFA program.", f->offset);
                        t->stats.n_bad_entries++;
                        b->n_rows = saved_rows;
                        b->n_raw = saved_raw;
                        b->base = saved_base;
                        continue;
                }
                if (r < 0)
                        return r;

                t->stats.n_fdes++;
                prev_end = f->end;
                any_row = true;
        }

        if (!any_row)
                return t->stats.n_bad_entries > 0 ? -EBADMSG : -ENODATA;

        /* The end of the last FDE. */
        r = builder_push(b, prev_end, (struct cgprof_unwind_row){});
        if (r < 0)
                return r;
        *ret_end = prev_end;
        return 0;
}

/* t takes the rows of b (shrunk to fit when it can), up to end. */
static void table_take_rows(UnwindTable *t, Builder *b, uint64_t end) {
        t->base = b->base;
        t->end = end;
        t->n_rows = b->n_rows;
        t->stats.n_rows_raw = b->n_raw;
        t->rows = b->n_rows < b->n_allocated ? reallocarray(b->rows, b->n_rows, sizeof(*b->rows)) : b->rows;
        if (!t->rows)
                t->rows = b->rows; /* could not shrink: keep the larger block */
        for (size_t i = 0; i < t->n_rows; i++)
                if (CGPROF_UNWIND_CFA(t->rows[i].rule) == CGPROF_CFA_UNSUPPORTED)
                        t->stats.n_unsupported_rows++;
}

static int parse_section(const UnwindArch *a, const FrameSection *s, UnwindTable **ret) {
        _cleanup_free_ Cie *cies = NULL;
        _cleanup_free_ Fde *fdes = NULL;
        _cleanup_(unwind_table_freep) UnwindTable *t = NULL;
        size_t n_cies, n_fdes;
        Builder b = {};
        uint64_t end;
        int r;

        t = calloc(1, sizeof(UnwindTable));
        if (!t)
                return -ENOMEM;
        t->source = s->eh ? UNWIND_SOURCE_EH_FRAME : UNWIND_SOURCE_DEBUG_FRAME;

        r = parse_cies(a, s, t, &cies, &n_cies);
        if (r < 0)
                return r;
        r = parse_fdes(s, t, cies, n_cies, &fdes, &n_fdes);
        if (r < 0)
                return r;
        if (n_fdes == 0)
                return t->stats.n_bad_entries > 0 ? -EBADMSG : -ENODATA;

        r = build_rows(a, s, t, fdes, n_fdes, &b, &end);
        if (r < 0) {
                free(b.rows);
                return r;
        }
        table_take_rows(t, &b, end);

        *ret = TAKE_PTR(t);
        return 0;
}

UnwindTable *unwind_table_free(UnwindTable *t) {
        if (!t)
                return NULL;
        free(t->rows);
        free(t);
        return NULL;
}

const char *unwind_source_to_string(UnwindSource s) {
        switch (s) {
        case UNWIND_SOURCE_EH_FRAME:
                return ".eh_frame";
        case UNWIND_SOURCE_DEBUG_FRAME:
                return ".debug_frame";
        case UNWIND_SOURCE_GOPCLNTAB:
                return ".gopclntab";
        case UNWIND_SOURCE_GOPCLNTAB_EH_FRAME:
                return ".gopclntab+.eh_frame";
        case UNWIND_SOURCE_GOPCLNTAB_DEBUG_FRAME:
                return ".gopclntab+.debug_frame";
        default:
                return "none";
        }
}

const struct cgprof_unwind_row *unwind_table_lookup(const UnwindTable *t, uint64_t vaddr) {
        uint64_t pc;

        if (!t || t->n_rows == 0 || vaddr < t->base || vaddr >= t->end)
                return NULL;
        pc = vaddr - t->base;

        /* The last row whose pc <= pc; rows[0].pc is 0. */
        return &t->rows[SORTED_UPPER_BOUND(t->rows, t->n_rows, _e->pc, pc) - 1];
}

/* The bytes of a CFI section, decompressed if need be. */
static int section_bytes(Elf_Scn *scn, const GElf_Shdr *shdr, const uint8_t **ret, size_t *ret_size) {
        Elf_Data *data;

        if (shdr->sh_flags & SHF_COMPRESSED) {
                GElf_Chdr chdr;

                if (!gelf_getchdr(scn, &chdr) || chdr.ch_size > COMPRESSED_SECTION_MAX)
                        return -EBADMSG;
                if (elf_compress(scn, 0, 0) < 0)
                        return -EBADMSG;
        }
        data = elf_getdata(scn, NULL);
        if (!data)
                return -EBADMSG;
        if (!data->d_buf || data->d_size == 0)
                return -ENODATA;
        *ret = data->d_buf;
        *ret_size = data->d_size;
        return 0;
}

/* The table of .eh_frame, else .debug_frame. */
static int cfi_build_elf(Elf *elf, UnwindTable **ret) {
        Elf_Scn *scn = NULL, *eh_scn = NULL, *debug_scn = NULL;
        GElf_Shdr eh_shdr = {}, debug_shdr = {};
        const UnwindArch *arch = NULL;
        FrameSection s = {};
        const char *ident;
        GElf_Ehdr ehdr;
        size_t shstrndx;
        int r = -ENODATA;

        if (!elf || !ret)
                return -EINVAL;
        if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr))
                return -ENOEXEC;
        ident = elf_getident(elf, NULL);
        if (!ident)
                return -ENOEXEC;

        for (size_t i = 0; i < ELEMENTSOF(unwind_arches); i++)
                if (unwind_arches[i].machine == ehdr.e_machine)
                        arch = &unwind_arches[i];
        if (!arch || ident[EI_DATA] != ELFDATA2LSB)
                return -ENOTSUP;
        s.addr_size = ident[EI_CLASS] == ELFCLASS64 ? 8 : 4;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return -ENODATA;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;
                const char *name;

                if (!gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS || shdr.sh_type == SHT_NULL)
                        continue;
                name = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (!name)
                        continue;
                if (streq(name, ".eh_frame") && !eh_scn && shdr.sh_size > 0) {
                        eh_scn = scn;
                        eh_shdr = shdr;
                } else if (streq(name, ".debug_frame") && !debug_scn && shdr.sh_size > 0) {
                        debug_scn = scn;
                        debug_shdr = shdr;
                } else if (streq(name, ".got") && !s.has_datarel) {
                        s.has_datarel = true;
                        s.datarel = shdr.sh_addr;
                }
        }

        if (eh_scn) {
                s.eh = true;
                s.addr = eh_shdr.sh_addr;
                r = section_bytes(eh_scn, &eh_shdr, &s.data, &s.size);
                if (r >= 0)
                        r = parse_section(arch, &s, ret);
                if (r >= 0 || (r != -ENODATA && r != -EBADMSG) || !debug_scn)
                        return r;
                log_debug("Nothing usable in .eh_frame (%s), trying .debug_frame.", strerror(-r));
        }
        if (debug_scn) {
                int k;

                s.eh = false;
                s.addr = debug_shdr.sh_addr;
                k = section_bytes(debug_scn, &debug_shdr, &s.data, &s.size);
                if (k >= 0)
                        k = parse_section(arch, &s, ret);
                /* When both failed, .eh_frame's reason wins unless it merely had nothing. */
                if (k >= 0 || r == -ENODATA)
                        r = k;
        }
        return r;
}

int unwind_table_build_elf(Elf *elf, UnwindTable **ret) {
        _cleanup_(unwind_table_freep) UnwindTable *cfi = NULL, *go = NULL;
        int r, k;

        r = cfi_build_elf(elf, &cfi);
        if (r == -EINVAL || r == -ENOEXEC || r == -ENOTSUP)
                return r;

        /* Go functions: .gopclntab's pcsp, exact and present in stripped
         * binaries too; the CFI (cgo's C code) for the rest. */
        k = go_unwind_build_elf(elf, &go);
        if (k < 0) {
                if (k != -ENODATA)
                        log_debug_errno(k, "No unwind rows from .gopclntab, ignoring: %m");
                if (r < 0)
                        return r;
                *ret = TAKE_PTR(cfi);
                return 0;
        }
        if (r < 0) {
                log_debug_errno(r, "No usable CFI, the Go rows alone: %m");
                *ret = TAKE_PTR(go);
                return 0;
        }
        k = go_unwind_merge(go, cfi, ret);
        if (k == -E2BIG) {
                log_debug("The Go rows and the CFI span more than 4 GiB, the Go rows alone.");
                *ret = TAKE_PTR(go);
                return 0;
        }
        return k;
}

int unwind_table_build_fd(int fd, UnwindTable **ret) {
        _cleanup_(elf_endp) Elf *elf = NULL;
        int r;

        r = elf_open_fd(fd, &elf);
        if (r < 0)
                return r;
        return unwind_table_build_elf(elf, ret);
}
