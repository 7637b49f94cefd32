/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* agent/http/http-guard.c: the Host a loopback listener answers, and what
 * a browser marks as coming from a page. */
#include "http-guard.h"
#include "tests.h"

TEST(host) {
        char *names[] = { (char *) "node-a.example", NULL };

        for (const char *const *h =
                     (const char *const[]){ "127.0.0.1", "127.0.0.1:9469", "localhost", "LOCALHOST:9469",
                                            "localhost.", "[::1]", "[::1]:9469", "node-a.example",
                                            "Node-A.Example:9469", NULL };
             *h; h++)
                ASSERT_TRUE(http_host_is_allowed(*h, 9469, names));
        for (const char *const *h =
                     (const char *const[]){ "", "evil.example", "evil.example:9469", "127.0.0.1:80",
                                            "127.0.0.1:", "127.0.0.1:9469x", "localhost:09469x", ":9469",
                                            "127.0.0.2", "localhost.evil.example", "[::1]:80", "[::2]",
                                            "127.0.0.1:99999999999", "127.0.0.1 ", NULL };
             *h; h++)
                ASSERT_FALSE(http_host_is_allowed(*h, 9469, names));
        ASSERT_FALSE(http_host_is_allowed(NULL, 9469, names));
        ASSERT_FALSE(http_host_is_allowed("node-a.example", 9469, NULL));
        ASSERT_TRUE(http_host_is_allowed("localhost", 9469, NULL));
}

TEST(from_page) {
        ASSERT_FALSE(http_request_is_from_page(NULL, NULL));
        ASSERT_FALSE(http_request_is_from_page(NULL, "none"));
        ASSERT_TRUE(http_request_is_from_page(NULL, "cross-site"));
        ASSERT_TRUE(http_request_is_from_page(NULL, "same-site"));
        ASSERT_TRUE(http_request_is_from_page(NULL, "same-origin"));
        ASSERT_TRUE(http_request_is_from_page("http://evil.example", NULL));
        ASSERT_TRUE(http_request_is_from_page("null", "none"));
}

DEFINE_TEST_MAIN
