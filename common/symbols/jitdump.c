/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <byteswap.h>

#include "jitdump.h"

#define LOAD_FIXED 40U /* pid, tid, vma, code_addr, code_size, code_index */
#define MOVE_FIXED 48U /* pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index */

static uint32_t get_u32(const JitDumpParser *p, const uint8_t *b) {
        uint32_t v;

        memcpy(&v, b, sizeof(v));
        return p->swapped ? bswap_32(v) : v;
}

static uint64_t get_u64(const JitDumpParser *p, const uint8_t *b) {
        uint64_t v;

        memcpy(&v, b, sizeof(v));
        return p->swapped ? bswap_64(v) : v;
}

/* The file header: 0 and its size in *ret_size, -EAGAIN when incomplete. */
static int parse_header(JitDumpParser *p, const uint8_t *buf, size_t size, uint32_t *ret_size) {
        uint32_t magic, hs;

        if (size < 12)
                return -EAGAIN;
        memcpy(&magic, buf, sizeof(magic));
        if (magic == JITDUMP_MAGIC)
                p->swapped = false;
        else if (magic == bswap_32(JITDUMP_MAGIC))
                p->swapped = true;
        else
                return -EBADMSG;
        hs = get_u32(p, buf + 8);
        if (hs < JITDUMP_HEADER_MIN || hs > JITDUMP_HEADER_MAX)
                return -EBADMSG;
        if (size < hs)
                return -EAGAIN;
        p->version = get_u32(p, buf + 4);
        p->elf_mach = get_u32(p, buf + 12);
        p->pid = get_u32(p, buf + 20);
        *ret_size = hs;
        return 0;
}

/* JIT_CODE_LOAD: -EAGAIN when its name is not all in buf yet. */
static int parse_load(JitDumpParser *p, JitMap *m, const uint8_t *rec, size_t avail, uint32_t total) {
        const uint8_t *name, *nul;
        size_t room;
        uint64_t addr, size;
        int r;

        if (total < JITDUMP_RECORD_HEADER + LOAD_FIXED + 1)
                return -EBADMSG;
        if (avail < JITDUMP_RECORD_HEADER + LOAD_FIXED)
                return -EAGAIN;
        name = rec + JITDUMP_RECORD_HEADER + LOAD_FIXED;
        room = MIN(avail, (size_t) total) - JITDUMP_RECORD_HEADER - LOAD_FIXED;
        nul = memchr(name, '\0', MIN(room, (size_t) JITDUMP_NAME_MAX));
        if (!nul) {
                if (avail < total && room < JITDUMP_NAME_MAX)
                        return -EAGAIN;
                return -EBADMSG;
        }

        addr = get_u64(p, rec + JITDUMP_RECORD_HEADER + 16); /* code_addr */
        size = get_u64(p, rec + JITDUMP_RECORD_HEADER + 24);
        r = jit_map_add(m, addr, size, (const char *) name, (size_t) (nul - name));
        if (r == -ENOMEM)
                return r;
        if (r == -EINVAL)
                return -EBADMSG; /* size 0, past 2^64, no name */
        p->loads++;
        return 0; /* -E2BIG: the table counts what it dropped */
}

static int parse_move(JitDumpParser *p, JitMap *m, const uint8_t *rec, size_t avail, uint32_t total) {
        uint64_t old_addr, new_addr, size;
        int r;

        if (total < JITDUMP_RECORD_HEADER + MOVE_FIXED)
                return -EBADMSG;
        if (avail < JITDUMP_RECORD_HEADER + MOVE_FIXED)
                return -EAGAIN;
        old_addr = get_u64(p, rec + JITDUMP_RECORD_HEADER + 16);
        new_addr = get_u64(p, rec + JITDUMP_RECORD_HEADER + 24);
        size = get_u64(p, rec + JITDUMP_RECORD_HEADER + 32);
        r = jit_map_move(m, old_addr, new_addr, size);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT || r == -EINVAL)
                return -EBADMSG;
        p->moves++;
        return 0;
}

int jitdump_feed(JitDumpParser *p, JitMap *m, const uint8_t *buf, size_t size) {
        uint64_t consumed = 0;
        size_t pos = 0;
        int r = 0, k;

        if (!p || !m || (!buf && size > 0))
                return -EINVAL;

        if (!p->header_done) {
                uint32_t hs;

                r = parse_header(p, buf, size, &hs);
                if (r == -EAGAIN)
                        return 0;
                if (r < 0)
                        return r;
                p->header_done = true;
                pos = hs;
        }
        consumed = pos;

        while (!p->closed && size - pos >= JITDUMP_RECORD_HEADER) {
                const uint8_t *rec = buf + pos;
                size_t avail = size - pos;
                uint32_t id = get_u32(p, rec), total = get_u32(p, rec + 4);

                if (total < JITDUMP_RECORD_HEADER) {
                        r = -EBADMSG;
                        break;
                }
                if (id == JIT_CODE_LOAD)
                        r = parse_load(p, m, rec, avail, total);
                else if (id == JIT_CODE_MOVE)
                        r = parse_move(p, m, rec, avail, total);
                else {
                        /* CLOSE ends it; DEBUG_INFO, UNWINDING_INFO and what
                         * later versions add are skipped by their size. */
                        p->closed = id == JIT_CODE_CLOSE;
                        r = 0;
                }
                if (r == -EAGAIN) {
                        r = 0;
                        break;
                }
                if (r == -ENOMEM)
                        break;
                if (r == -EBADMSG) {
                        p->malformed++;
                        r = 0;
                }
                p->records++;
                /* Past its end, even beyond buf: its code bytes are never needed. */
                consumed = (uint64_t) pos + total;
                if (total > avail)
                        break;
                pos += total;
        }

        p->offset += consumed;
        k = jit_map_commit(m);
        return r < 0 ? r : k;
}
