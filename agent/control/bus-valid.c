/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* D-Bus messages whose strings are valid UTF-8 whatever the names in them:
 * see bus-valid.h. sd_bus_message_appendv() walks the types the same way;
 * here every string goes through utf8_ensure_valid_bus() on its way. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bus-valid.h"
#include "macro.h"
#include "template.h"

/* The length of the one complete type at the start of s, 0 when there is
 * none (the end, or a signature sd-bus would refuse anyway). */
static size_t complete_type_len(const char *s) {
        switch (*s) {
        case 'y':
        case 'b':
        case 'n':
        case 'q':
        case 'i':
        case 'u':
        case 'x':
        case 't':
        case 'd':
        case 'h':
        case 's':
        case 'o':
        case 'g':
        case 'v':
                return 1;
        case 'a': {
                size_t k = complete_type_len(s + 1);
                return k > 0 ? k + 1 : 0;
        }
        case '(':
        case '{': {
                char close = *s == '(' ? ')' : '}';
                size_t i = 1;

                while (s[i] != close) {
                        size_t k = complete_type_len(s + i);
                        if (k == 0)
                                return 0;
                        i += k;
                }
                return i > 1 ? i + 1 : 0;
        }
        default:
                return 0;
        }
}

static int append_types(sd_bus_message *m, const char *types, size_t n, va_list *ap);

/* Appends one value of the complete type t (n characters, not
 * NUL-terminated), its arguments from ap. */
static int append_one(sd_bus_message *m, const char *t, size_t n, va_list *ap) {
        _cleanup_free_ char *contents = NULL;
        int r;

        switch (t[0]) {
        case 's': {
                _cleanup_free_ char *copy = NULL;
                const char *s = va_arg(*ap, const char *);

                r = utf8_ensure_valid_bus(&s, &copy);
                if (r < 0)
                        return r;
                return sd_bus_message_append_basic(m, 's', s);
        }
        case 'o':
        case 'g':
                /* Checked by sd-bus against their grammar, which is ASCII. */
                return sd_bus_message_append_basic(m, t[0], va_arg(*ap, const char *));
        case 'y': {
                uint8_t v = (uint8_t) va_arg(*ap, int);
                return sd_bus_message_append_basic(m, 'y', &v);
        }
        case 'n':
        case 'q': {
                uint16_t v = (uint16_t) va_arg(*ap, int);
                return sd_bus_message_append_basic(m, t[0], &v);
        }
        case 'b':
        case 'i':
        case 'u':
        case 'h': {
                uint32_t v = va_arg(*ap, uint32_t);
                return sd_bus_message_append_basic(m, t[0], &v);
        }
        case 'x':
        case 't': {
                uint64_t v = va_arg(*ap, uint64_t);
                return sd_bus_message_append_basic(m, t[0], &v);
        }
        case 'd': {
                double v = va_arg(*ap, double);
                return sd_bus_message_append_basic(m, 'd', &v);
        }
        case 'v': {
                const char *sig = va_arg(*ap, const char *);
                size_t k;

                if (!sig)
                        return -EINVAL;
                k = complete_type_len(sig);
                if (k == 0 || sig[k] != 0)
                        return -EINVAL;
                r = sd_bus_message_open_container(m, 'v', sig);
                if (r >= 0)
                        r = append_one(m, sig, k, ap);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                return r;
        }
        case 'a': {
                unsigned count = va_arg(*ap, unsigned);

                contents = strndup(t + 1, n - 1);
                if (!contents)
                        return -ENOMEM;
                r = sd_bus_message_open_container(m, 'a', contents);
                for (unsigned i = 0; r >= 0 && i < count; i++)
                        r = append_one(m, contents, n - 1, ap);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                return r;
        }
        case '(':
        case '{':
                contents = strndup(t + 1, n - 2);
                if (!contents)
                        return -ENOMEM;
                r = sd_bus_message_open_container(m, t[0] == '(' ? 'r' : 'e', contents);
                if (r >= 0)
                        r = append_types(m, contents, n - 2, ap);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                return r;
        default:
                return -EINVAL;
        }
}

/* Appends a value of each complete type of types (n characters). */
static int append_types(sd_bus_message *m, const char *types, size_t n, va_list *ap) {
        for (size_t i = 0; i < n;) {
                size_t k = complete_type_len(types + i);
                int r;

                if (k == 0 || i + k > n)
                        return -EINVAL;
                r = append_one(m, types + i, k, ap);
                if (r < 0)
                        return r;
                i += k;
        }
        return 0;
}

int bus_append_validv(sd_bus_message *m, const char *types, va_list ap) {
        va_list aq;
        int r;

        if (!m || !types)
                return -EINVAL;
        va_copy(aq, ap);
        r = append_types(m, types, strlen(types), &aq);
        va_end(aq);
        return r;
}

int bus_append_valid(sd_bus_message *m, const char *types, ...) {
        va_list ap;
        int r;

        va_start(ap, types);
        r = bus_append_validv(m, types, ap);
        va_end(ap);
        return r;
}

int bus_append_strv_valid(sd_bus_message *m, char **l) {
        int r;

        r = sd_bus_message_open_container(m, 'a', "s");
        for (char **i = l; r >= 0 && i && *i; i++)
                r = bus_append_valid(m, "s", *i);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

int bus_reply_valid(sd_bus_message *call, const char *types, ...) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        va_list ap;
        int r;

        /* As sd_bus_reply_method_return(): nothing for a call that wants no reply. */
        if (sd_bus_message_get_expect_reply(call) == 0)
                return 0;
        r = sd_bus_message_new_method_return(call, &reply);
        if (r < 0)
                return r;
        va_start(ap, types);
        r = bus_append_validv(reply, types, ap);
        va_end(ap);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int bus_emit_signal_validv(sd_bus *bus, const char *path, const char *interface, const char *member,
                           const char *types, va_list ap) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_signal(bus, &m, path, interface, member);
        if (r < 0)
                return r;
        r = bus_append_validv(m, types, ap);
        if (r < 0)
                return r;
        return sd_bus_send(bus, m, NULL);
}

int bus_error_set_valid(sd_bus_error *e, const char *name, const char *message) {
        _cleanup_free_ char *copy = NULL;

        if (utf8_ensure_valid_bus(&message, &copy) < 0)
                return -ENOMEM;
        return sd_bus_error_set(e, name, message);
}
