/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for output name templates (common/base/template.c):
 * validation, expansion and the sanitizing of values.
 *
 * The input is NUL-separated fields: the template, then the values of
 * {NAMESPACE} {POD} {CONTAINER} {CONTAINER_ID} {CGROUP} {NODE} {PROFILE}
 * {PROCESS_NAME} {PROCESS_ID} {UID} (a missing field is NULL), then
 * environment entries ("NAME=value") for %{NAME}. A template validates or
 * fails with -EINVAL and a reason; a valid one expands into a relative path
 * that cannot leave reportDir: no leading '/', no empty, "." or ".."
 * component (so never "/.."), no control character, valid UTF-8, every
 * component at most TEMPLATE_COMPONENT_MAX bytes. Each value sanitizes
 * into one such component.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include "fuzz.h"
#include "template.h"

#define N_VARS 10
#define N_ENV 8

static void check_utf8(const char *s) {
        while (*s) {
                size_t k = utf8_valid_char_len(s);

                CHECK(k > 0);
                CHECK((unsigned char) s[0] >= 0x20 && s[0] != 0x7f);
                CHECK(!(k == 2 && (unsigned char) s[0] == 0xC2 && (unsigned char) s[1] < 0xA0));
                s += k;
        }
}

static void check_component(const char *s, size_t n) {
        CHECK(n > 0 && n <= TEMPLATE_COMPONENT_MAX);
        CHECK(!(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.'));
}

static void check_path(const char *path) {
        const char *p = path;

        CHECK(path[0] && path[0] != '/');
        check_utf8(path);
        for (;;) {
                size_t n = strcspn(p, "/");

                check_component(p, n);
                if (!p[n])
                        break;
                p += n + 1;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *buf = fuzz_strndup(data, size), *error = NULL, *path = NULL, *again = NULL;
        const char *fields[1 + N_VARS + N_ENV] = {}, *env[N_ENV + 1] = {};
        size_t n_fields = 0, n_env = 0;
        TemplateVars vars;
        int r;

        /* Split at NULs (the copy's own terminator ends the last field). */
        for (const char *p = buf; p <= buf + size && n_fields < ELEMENTSOF(fields); p += strlen(p) + 1)
                fields[n_fields++] = p;
        for (size_t i = 1 + N_VARS; i < n_fields; i++)
                env[n_env++] = fields[i];

        vars = (TemplateVars){
                .namespace = fields[1],
                .pod = fields[2],
                .container = fields[3],
                .container_id = fields[4],
                .cgroup = fields[5],
                .node = fields[6],
                .profile = fields[7],
                .process_name = fields[8],
                .process_id = fields[9],
                .uid = fields[10],
                .timestamp_ms = size * UINT64_C(0x9E3779B97F4A7C15),
                .env = env,
        };

        for (size_t i = 1; i < n_fields; i++) {
                _cleanup_free_ char *c = path_component_sanitize(fields[i]), *v = utf8_make_valid(fields[i]);

                CHECK(c && v);
                check_utf8(c);
                CHECK(!strchr(c, '/') && !strchr(c, '\\'));
                check_component(c, strlen(c));
                for (const char *s = v; *s; s += utf8_valid_char_len(s))
                        CHECK(utf8_valid_char_len(s) > 0);
        }

        r = template_validate(fields[0], &error);
        if (r < 0) {
                CHECK(r == -EINVAL || r == -ENOMEM);
                CHECK(r != -EINVAL || error);
                CHECK(template_expand(fields[0], &vars, &path) < 0 && !path);
                return 0;
        }
        CHECK(!error);
        (void) template_is_per_process(fields[0]);

        r = template_expand(fields[0], &vars, &path);
        CHECK(r == 0 || r == -ENOMEM);
        if (r < 0)
                return 0;
        check_path(path);

        /* With every value given (the UID too), expansion is a function. */
        if (vars.uid) {
                CHECK(template_expand(fields[0], &vars, &again) == 0);
                CHECK(strcmp(path, again) == 0);
        }
        return 0;
}
