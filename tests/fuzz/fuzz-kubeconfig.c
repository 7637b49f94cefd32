/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for kubeconfig files (agent/kube/kube-config.c: libyaml's
 * loader and what is read from its tree, base64 data included).
 *
 * The input is the file; it is written into a private temporary directory
 * (relative file names in it resolve there) and read for its current
 * context and for a context named "fuzz". Each load succeeds with an
 * http(s) server URL without a trailing '/', and a client certificate
 * only together with a key; or fails with a negative errno and a message
 * naming the file (but for -ENOMEM).
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <fcntl.h>

#include "fuzz.h"
#include "kube-client.h"

static char dir[] = "/tmp/fuzz-kubeconfig-XXXXXX";
static char file[sizeof(dir) + 16];

static void cleanup_dir(void) {
        (void) unlink(file);
        (void) rmdir(dir);
}

static void setup(void) {
        if (file[0])
                return;
        CHECK(mkdtemp(dir));
        snprintf(file, sizeof(file), "%s/config", dir);
        atexit(cleanup_dir);
}

static void check(const char *context) {
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        r = kube_config_from_kubeconfig(file, context, &c, &error);
        if (r < 0) {
                CHECK(fuzz_is_errno(r) && !c);
                CHECK(r == -ENOMEM || (error && strstr(error, file)));
                return;
        }
        CHECK(c && !error);
        CHECK(c->server);
        CHECK(strncmp(c->server, "https://", 8) == 0 || strncmp(c->server, "http://", 7) == 0);
        CHECK(c->server[strlen(c->server) - 1] != '/');
        CHECK(!!(c->client_cert_data || c->client_cert_file) ==
              !!(c->client_key_data || c->client_key_file));
        CHECK(!(c->ca_data && c->ca_file));
        if (c->ca_data)
                CHECK(c->ca_data[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_close_ int fd = -EBADF;

        setup();
        fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(fd >= 0);
        for (size_t done = 0; done < size;) {
                ssize_t n = write(fd, data + done, size - done);

                CHECK(n > 0);
                done += (size_t) n;
        }

        check(NULL);
        check("fuzz");
        return 0;
}
