/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "perf-map.h"

static int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* A hex number at *p (optionally "0x"): at least one digit, at most 64 bits
 * of value (leading zeros are fine). */
static int parse_hex(const char **p, const char *end, uint64_t *ret) {
        const char *s = *p;
        uint64_t v = 0;
        size_t digits = 0;
        int d;

        if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
                s += 2;
        for (; s < end && (d = hex_digit(*s)) >= 0; s++, digits++) {
                if (v > UINT64_MAX >> 4)
                        return -ERANGE;
                v = v << 4 | (uint64_t) d;
        }
        if (digits == 0)
                return -EBADMSG;
        *p = s;
        *ret = v;
        return 0;
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t';
}

/* A hex field and the blanks after it (at least one: a name follows). */
static int parse_hex_field(const char **p, const char *end, uint64_t *ret) {
        int r = parse_hex(p, end, ret);

        if (r < 0)
                return r == -ERANGE ? -EBADMSG : r;
        if (*p == end || !is_blank(**p))
                return -EBADMSG;
        while (*p < end && is_blank(**p))
                (*p)++;
        return 0;
}

int perf_map_parse_line(const char *line, size_t len, uint64_t *ret_start, uint64_t *ret_size,
                        const char **ret_name, size_t *ret_name_len) {
        const char *p = line, *end = line + len, *name;
        uint64_t start, size;
        int r;

        if (!line || !ret_start || !ret_size || !ret_name || !ret_name_len)
                return -EINVAL;
        if (len > 0 && end[-1] == '\r')
                end--;
        if (memchr(line, '\0', (size_t) (end - line)))
                return -EBADMSG;

        r = parse_hex_field(&p, end, &start);
        if (r < 0)
                return r;
        r = parse_hex_field(&p, end, &size);
        if (r < 0)
                return r;
        name = p;
        while (end > name && is_blank(end[-1]))
                end--;
        if (end == name)
                return -EBADMSG;
        if (size == 0 || start > UINT64_MAX - size)
                return -ERANGE;

        *ret_start = start;
        *ret_size = size;
        *ret_name = name;
        *ret_name_len = (size_t) (end - name);
        return 0;
}

int perf_map_feed(PerfMapParser *p, JitMap *m, const char *buf, size_t size) {
        size_t pos = 0;
        int r;

        if (!p || !m || (!buf && size > 0))
                return -EINVAL;

        while (pos < size) {
                const char *line = buf + pos, *nl = memchr(line, '\n', size - pos);
                size_t len = nl ? (size_t) (nl - line) : size - pos;
                uint64_t start, sz;
                const char *name;
                size_t name_len;

                if (p->in_long_line) {
                        /* The rest of a line already counted as malformed. */
                        pos += nl ? len + 1 : len;
                        if (nl)
                                p->in_long_line = false;
                        continue;
                }
                if (!nl) {
                        if (len < PERF_MAP_LINE_MAX)
                                break; /* partial: the writer is not done with it */
                        p->lines++;
                        p->malformed++;
                        p->in_long_line = true;
                        pos += len;
                        continue;
                }
                pos += len + 1;
                p->lines++;
                if (len > PERF_MAP_LINE_MAX) {
                        p->malformed++;
                        continue;
                }

                r = perf_map_parse_line(line, len, &start, &sz, &name, &name_len);
                if (r == -ERANGE) {
                        p->skipped++;
                        continue;
                }
                if (r < 0) {
                        p->malformed++;
                        continue;
                }
                r = jit_map_add(m, start, sz, name, name_len);
                if (r == -ENOMEM)
                        return r;
                /* -E2BIG: the table counts what it dropped. */
        }

        r = jit_map_commit(m);
        if (r < 0)
                return r;
        p->offset += pos;
        return 0;
}
