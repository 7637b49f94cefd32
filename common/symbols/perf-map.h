/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "jit-map.h"

/* perf-PID.map, the symbol file JIT runtimes write for perf (node
 * --perf-basic-prof, the JVM's Compiler.perfmap, CPython's -X perf):
 * text lines "START SIZE NAME\n", START and SIZE in hex with or without
 * "0x", NAME the rest of the line (spaces allowed).
 *
 * Parsing is incremental: the parser is fed the file's bytes from
 * p->offset on, takes every complete line and advances p->offset past the
 * last one; a partial last line is left for the next feed (the runtime is
 * still writing it). So a growing file is read once, from where we stopped.
 * Malformed lines (and lines longer than PERF_MAP_LINE_MAX) are skipped and
 * counted, never fatal; ranges of size 0 or past 2^64 are skipped and
 * counted. */

#define PERF_MAP_LINE_MAX 4096U

typedef struct PerfMapParser {
        uint64_t offset; /* the next byte of the file to feed */
        bool in_long_line; /* skipping the rest of an overlong line */
        uint64_t lines; /* complete lines seen */
        uint64_t malformed; /* lines that are not "START SIZE NAME" */
        uint64_t skipped; /* well-formed, but of size 0 or past 2^64 */
} PerfMapParser;

/* One line, without its newline: 0, -EBADMSG (malformed) or -ERANGE (size 0,
 * or past 2^64). ret_name points into line. */
int perf_map_parse_line(const char *line, size_t len, uint64_t *ret_start, uint64_t *ret_size,
                        const char **ret_name, size_t *ret_name_len);

/* Feeds buf (the file's bytes from p->offset) and commits what it added to
 * m; p->offset moves past the last complete line. 0, or a negative errno
 * (-ENOMEM). A full table (jit_map_dropped()) is no error. */
int perf_map_feed(PerfMapParser *p, JitMap *m, const char *buf, size_t size);
