/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/un.h>

#include "macro.h"
#include "socket-address.h"

static int why(const char **ret_why, const char *s) {
        if (ret_why)
                *ret_why = s;
        return -EINVAL;
}

int socket_address_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len,
                         const char **ret_why) {
        char host[INET6_ADDRSTRLEN + 1];
        const char *colon, *port_s, *h;
        unsigned long port;
        char *end;
        size_t n;

        if (!s || !s[0])
                return why(ret_why, "must be ADDRESS:PORT");
        if (strncmp(s, "unix:", 5) == 0) {
                struct sockaddr_un *u = (struct sockaddr_un *) ret;
                const char *path = s + 5;
                size_t l = strlen(path);

                if (path[0] != '/')
                        return why(ret_why, "a Unix socket must be an absolute path: unix:/PATH");
                if (l >= sizeof(u->sun_path))
                        return why(ret_why, "a Unix socket's path must be shorter than 108 bytes");
                *ret = (struct sockaddr_storage){};
                u->sun_family = AF_UNIX;
                memcpy(u->sun_path, path, l + 1);
                *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + l + 1);
                return 0;
        }
        colon = strrchr(s, ':');
        if (!colon)
                return why(ret_why, "must be ADDRESS:PORT (no port)");
        port_s = colon + 1;
        if (port_s[0] < '0' || port_s[0] > '9')
                return why(ret_why, "the port must be a number 1..65535");
        errno = 0;
        port = strtoul(port_s, &end, 10);
        if (errno != 0 || *end != 0 || port < 1 || port > 65535)
                return why(ret_why, "the port must be a number 1..65535");

        h = s;
        n = (size_t) (colon - s);
        if (n > 0 && s[0] == '[') {
                if (n < 2 || s[n - 1] != ']')
                        return why(ret_why, "an IPv6 address must be in brackets: [ADDRESS]:PORT");
                h = s + 1;
                n -= 2;
        } else if (memchr(s, ':', n))
                return why(ret_why, "an IPv6 address must be in brackets: [ADDRESS]:PORT");
        if (n >= sizeof(host))
                return why(ret_why, "not a numeric IPv4 or IPv6 address");
        memcpy(host, h, n);
        host[n] = 0;

        *ret = (struct sockaddr_storage){};
        if (h != s) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *) ret;
                if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
                        return why(ret_why, "not a numeric IPv6 address");
                a->sin6_family = AF_INET6;
                a->sin6_port = htons((uint16_t) port);
                *ret_len = sizeof(*a);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *) ret;
                if (n == 0)
                        a->sin_addr.s_addr = htonl(INADDR_ANY);
                else if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
                        return why(ret_why, "not a numeric IPv4 address (host names are not resolved)");
                a->sin_family = AF_INET;
                a->sin_port = htons((uint16_t) port);
                *ret_len = sizeof(*a);
        }
        return 0;
}
