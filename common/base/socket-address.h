/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/socket.h>

/* A listening address as the config writes it: "ADDRESS:PORT" with a
 * numeric IPv4 address ("127.0.0.1:9469", "0.0.0.0:9469"), a bracketed
 * IPv6 one ("[::1]:9469", "[::]:9469"), or none (":9469": every IPv4
 * address). Port 1..65535. No host names: nothing is resolved. Or a
 * Unix socket, "unix:/ABSOLUTE/PATH" (shorter than sun_path). -EINVAL
 * with *ret_why (static) saying what is wrong. */
int socket_address_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len,
                         const char **ret_why);
