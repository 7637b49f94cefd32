/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Durations as the config writes them: "500ms", "20s", "5m", "1h", "1m30s",
 * "250us", and "0" (no limit). A bare number other than 0 is an error (the
 * unit is required). Units: us, ms, s, m, h, d; terms may be combined and
 * have decimal fractions ("1.5s"), cut to whole microseconds. Returns -EINVAL
 * on bad syntax, -ERANGE on overflow or on a non-zero value below 1us. */
int parse_duration(const char *s, uint64_t *ret_usec);

/* Formats usec as the shortest exact form ("1m30s", "500ms", "0"). */
char *format_duration(uint64_t usec, char *buf, size_t size);
#define DURATION_MAX 32
