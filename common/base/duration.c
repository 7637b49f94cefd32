/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdarg.h>

#include "duration.h"

/* Units; where one spelling is a prefix of another, the longer comes first
 * ("ms" before "m"), so "1ms" is one millisecond, not one minute and an "s". */
static const struct {
        const char *name;
        uint64_t usec;
} units[] = {
        { "us", 1 },
        { "ms", USEC_PER_MSEC },
        { "s", USEC_PER_SEC },
        { "m", 60 * USEC_PER_SEC },
        { "h", 60 * 60 * USEC_PER_SEC },
        { "d", 24 * 60 * 60 * USEC_PER_SEC },
};

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

/* Parses one "<number><unit>" term at *p, advancing *p. The number is
 * digits with an optional decimal fraction ("1.5", ".5", "2."); digits of the
 * fraction below what a uint64_t can hold are ignored (they are far below one
 * microsecond for every unit). */
static int parse_term(const char **p, uint64_t *ret_usec, bool *ret_nonzero) {
        const char *s = *p;
        uint64_t whole = 0, frac = 0, frac_div = 1;
        bool any_digit = false, nonzero = false;

        for (; is_digit(*s); s++) {
                any_digit = true;
                if (*s != '0')
                        nonzero = true;
                if (__builtin_mul_overflow(whole, 10, &whole) ||
                    __builtin_add_overflow(whole, (uint64_t) (*s - '0'), &whole))
                        return -ERANGE;
        }

        if (*s == '.') {
                s++;
                for (; is_digit(*s); s++) {
                        any_digit = true;
                        if (*s != '0')
                                nonzero = true;
                        if (frac_div <= UINT64_MAX / 10 / 10) { /* keep frac < frac_div ≤ 10^18 */
                                frac = frac * 10 + (uint64_t) (*s - '0');
                                frac_div *= 10;
                        }
                }
        }

        if (!any_digit)
                return -EINVAL;

        size_t i;
        for (i = 0; i < ELEMENTSOF(units); i++) {
                size_t l = strlen(units[i].name);
                if (strncmp(s, units[i].name, l) == 0)
                        break;
        }
        if (i >= ELEMENTSOF(units))
                return -EINVAL; /* no unit, or an unknown one */

        uint64_t usec;
        if (__builtin_mul_overflow(whole, units[i].usec, &usec))
                return -ERANGE;

        /* frac / frac_div of a unit, rounded down to whole microseconds. */
        unsigned __int128 f = (unsigned __int128) frac * units[i].usec / frac_div;
        if (__builtin_add_overflow(usec, (uint64_t) f, &usec))
                return -ERANGE;

        *p = s + strlen(units[i].name);
        *ret_usec = usec;
        *ret_nonzero = nonzero;
        return 0;
}

int parse_duration(const char *s, uint64_t *ret_usec) {
        uint64_t total = 0;
        bool nonzero = false;

        if (!s || !*s)
                return -EINVAL;

        /* A bare "0" is the only number allowed without a unit. */
        if (streq(s, "0")) {
                if (ret_usec)
                        *ret_usec = 0;
                return 0;
        }

        /* One or more terms, Go-style: "1h", "1m30s", "1.5s", "2h45m10.5s". */
        for (const char *p = s; *p;) {
                uint64_t usec;
                bool nz;
                int r;

                r = parse_term(&p, &usec, &nz);
                if (r < 0)
                        return r;
                if (__builtin_add_overflow(total, usec, &total))
                        return -ERANGE;
                nonzero = nonzero || nz;
        }

        /* A non-zero value written below one microsecond ("0.1us") would
         * silently become 0, which means "no limit": refuse it. */
        if (nonzero && total == 0)
                return -ERANGE;

        if (ret_usec)
                *ret_usec = total;
        return 0;
}

/* Appends to buf at *n, failing (returning false) when it does not fit. */
static _printf_(4, 5) bool append(char *buf, size_t size, size_t *n, const char *fmt, ...) {
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vsnprintf(buf + *n, size - *n, fmt, ap);
        va_end(ap);
        if (k < 0 || (size_t) k >= size - *n)
                return false;
        *n += (size_t) k;
        return true;
}

/* Appends "<whole>[.<frac>]<unit>" where frac has 'digits' places with
 * trailing zeros removed. */
static bool append_decimal(char *buf, size_t size, size_t *n, uint64_t whole, uint64_t frac, unsigned digits,
                           const char *unit) {
        if (frac == 0)
                return append(buf, size, n, "%" PRIu64 "%s", whole, unit);

        while (frac % 10 == 0) {
                frac /= 10;
                digits--;
        }
        return append(buf, size, n, "%" PRIu64 ".%0*" PRIu64 "%s", whole, (int) digits, frac, unit);
}

char *format_duration(uint64_t usec, char *buf, size_t size) {
        static const struct {
                const char *name;
                uint64_t usec;
        } big[] = {
                { "d", 24 * 60 * 60 * USEC_PER_SEC },
                { "h", 60 * 60 * USEC_PER_SEC },
                { "m", 60 * USEC_PER_SEC },
        };
        size_t n = 0;

        if (!buf || size == 0)
                return NULL;

        if (usec == 0)
                return append(buf, size, &n, "0") ? buf : NULL;

        /* Days, hours, minutes as whole units; what is left (< 1 min) as
         * seconds with a decimal fraction, or, below one second, as ms/us:
         * 90s → "1m30s", 1.5s → "1.5s", 0.5s → "500ms", 1500us → "1.5ms".
         * Every output parses back to the same value with parse_duration(). */
        for (size_t i = 0; i < ELEMENTSOF(big); i++)
                if (usec >= big[i].usec) {
                        if (!append(buf, size, &n, "%" PRIu64 "%s", usec / big[i].usec, big[i].name))
                                return NULL;
                        usec %= big[i].usec;
                }

        if (usec >= USEC_PER_SEC) {
                if (!append_decimal(buf, size, &n, usec / USEC_PER_SEC, usec % USEC_PER_SEC, 6, "s"))
                        return NULL;
        } else if (usec >= USEC_PER_MSEC) {
                if (!append_decimal(buf, size, &n, usec / USEC_PER_MSEC, usec % USEC_PER_MSEC, 3, "ms"))
                        return NULL;
        } else if (usec > 0) {
                if (!append(buf, size, &n, "%" PRIu64 "us", usec))
                        return NULL;
        }

        return buf;
}
