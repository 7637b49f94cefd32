/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who may reach a listener that asks no token: see http-guard.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http-guard.h"

/* host (length n) equals name, ignoring case and one trailing dot. */
static bool name_equal(const char *host, size_t n, const char *name) {
        size_t m = strlen(name);

        if (n > 0 && host[n - 1] == '.' && !(m > 0 && name[m - 1] == '.'))
                n--;
        return n == m && strncasecmp(host, name, n) == 0;
}

bool http_host_is_allowed(const char *host, unsigned port, char *const *names) {
        static const char *const loopback[] = { "127.0.0.1", "localhost", "[::1]" };
        const char *colon;
        size_t n;

        if (!host || !host[0])
                return false;
        /* NAME or NAME:PORT; an IPv6 literal is bracketed ("[::1]:9469"). */
        colon = strrchr(host, ':');
        if (colon && (host[0] != '[' || colon > strchr(host, ']'))) {
                char buf[8], *end;
                unsigned long p;

                n = (size_t) (colon - host);
                if (!colon[1] || strlen(colon + 1) >= sizeof(buf) ||
                    strspn(colon + 1, "0123456789") != strlen(colon + 1))
                        return false;
                p = strtoul(colon + 1, &end, 10);
                if (p != port)
                        return false;
        } else
                n = strlen(host);
        if (n == 0)
                return false;
        for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
                if (name_equal(host, n, loopback[i]))
                        return true;
        for (char *const *name = names; name && *name; name++)
                if (name_equal(host, n, *name))
                        return true;
        return false;
}

bool http_request_is_from_page(const char *origin, const char *sec_fetch_site) {
        if (origin)
                return true;
        return sec_fetch_site && strcasecmp(sec_fetch_site, "none") != 0;
}
