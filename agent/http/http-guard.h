/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* What a request must be to reach a listener that asks no token (a
 * loopback address or a Unix socket, without Kubernetes): a local
 * program's, not a web page's. A browser on the host can send requests to
 * 127.0.0.1 from any page (CSRF), and read the answers after a DNS
 * rebinding (its Host then is the attacker's name): such a listener
 * answers only a Host that names it and refuses what a browser marks as
 * coming from a page. Pure logic: tests/test-http-guard.c. */

/* Host, as a loopback listener on 'port' takes it: "127.0.0.1",
 * "localhost" or "[::1]", or one of 'names' (NULL-terminated, may be
 * NULL), each alone or with ":PORT" (the listener's port). Case does not
 * matter; a trailing dot neither ("localhost."). NULL or "": refused. */
bool http_host_is_allowed(const char *host, unsigned port, char *const *names);

/* Whether a browser says the request comes from a page: an Origin header
 * (any; a page's fetch or form carries one), or a Sec-Fetch-Site other
 * than "none" (what a user typing the URL gets). */
bool http_request_is_from_page(const char *origin, const char *sec_fetch_site);
