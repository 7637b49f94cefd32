/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "jit-map.h"

/* jit-PID.dump, the binary JIT symbol file of perf's jitdump format
 * (tools/perf/Documentation/jitdump-specification.txt; written by perf's
 * JVMTI agent libperf-jvmti.so, node --perf-prof, CPython -X perf_jit, ...):
 * a header (magic "JiTD" as 0x4A695444 in the writer's byte order, so a
 * byte-swapped magic says the file is in the other order; version; the
 * header's size), then records, each a header (id, total size, timestamp)
 * and its payload:
 *   JIT_CODE_LOAD        pid, tid, vma, code_addr, code_size, code_index, name\0, code bytes
 *   JIT_CODE_MOVE        pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index
 *   JIT_CODE_DEBUG_INFO  code_addr, nr_entry, entries (line tables: not used, skipped)
 *   JIT_CODE_CLOSE       the end (no more records are read)
 * and others (JIT_CODE_UNWINDING_INFO, future ones) skipped by their size.
 *
 * Parsing is incremental: the parser is fed the file's bytes from p->offset
 * on and consumes the header and every complete record; a record whose
 * fixed part and name are there is consumed whole even when its code bytes
 * are not (they are never needed), so p->offset may point past what was fed
 * (the caller reads from there when the file has grown so far). A record
 * whose name is not NUL-terminated within it is skipped and counted. */

#define JITDUMP_MAGIC 0x4A695444U
#define JITDUMP_HEADER_MIN 40U /* the version 1 header */
#define JITDUMP_HEADER_MAX 4096U
#define JITDUMP_RECORD_HEADER 16U
/* A name must end within this many bytes (longer ones are malformed). */
#define JITDUMP_NAME_MAX 65536U

typedef enum JitDumpRecordType {
        JIT_CODE_LOAD = 0,
        JIT_CODE_MOVE = 1,
        JIT_CODE_DEBUG_INFO = 2,
        JIT_CODE_CLOSE = 3,
        JIT_CODE_UNWINDING_INFO = 4,
} JitDumpRecordType;

typedef struct JitDumpParser {
        uint64_t offset; /* the next byte of the file to feed */
        bool header_done;
        bool swapped; /* written in the other byte order */
        bool closed; /* JIT_CODE_CLOSE seen: nothing more to read */
        uint32_t version, elf_mach, pid;
        uint64_t records; /* records consumed */
        uint64_t loads, moves; /* of which JIT_CODE_LOAD and _MOVE */
        uint64_t malformed; /* records skipped as malformed (incl. moves of unknown code) */
} JitDumpParser;

/* Feeds buf (the file's bytes from p->offset) and commits what it added to
 * m. 0 (also when there was not enough to consume anything); -EBADMSG when
 * the file is no jitdump (magic, header size) or a record header is
 * impossible (smaller than itself): nothing after it can be found, stop
 * reading it; -ENOMEM. */
int jitdump_feed(JitDumpParser *p, JitMap *m, const uint8_t *buf, size_t size);
