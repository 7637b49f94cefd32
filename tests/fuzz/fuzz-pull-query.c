/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the arguments of a pulled profile and the report
 * download's path (common/kube/pull-query.c). The input is a query string
 * ("seconds=10&namespace=a&pod=b"), split on '&' and '=' as libmicrohttpd
 * does (without its %-decoding: any byte reaches the parser); also the
 * input as a session ID and as a report file name. A query parses or
 * fails with -EINVAL and a message; a parsed one has seconds in range and
 * either a pod (valid names) or a cgroup (no "." or ".." component, no
 * leading or trailing '/'), and a target the control API's form.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include "fuzz.h"
#include "pull-query.h"

#define ARGS_MAX 16

typedef struct Args {
        char *key[ARGS_MAX], *value[ARGS_MAX];
        size_t n;
} Args;

static const char *get(const char *key, void *userdata) {
        const Args *a = userdata;

        for (size_t i = 0; i < a->n; i++)
                if (streq(a->key[i], key))
                        return a->value[i];
        return NULL;
}

static bool has_dot_component(const char *p) {
        for (const char *c = p;;) {
                size_t l = strcspn(c, "/");
                if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
                        return true;
                if (!c[l])
                        return false;
                c += l + 1;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size), *error = NULL, *target = NULL;
        _cleanup_(pull_query_done) PullQuery q = {};
        Args a = {};
        char *save = NULL;
        int r;

        (void) pull_session_id_is_valid(text);
        (void) pull_report_file_is_valid(text);
        (void) kube_name_is_dns_subdomain(text);

        _cleanup_free_ char *copy = strdup(text);
        CHECK(copy);
        for (char *kv = strtok_r(copy, "&", &save); kv && a.n < ARGS_MAX; kv = strtok_r(NULL, "&", &save)) {
                char *eq = strchr(kv, '=');
                a.key[a.n] = kv;
                a.value[a.n] = eq ? eq + 1 : (char *) "";
                if (eq)
                        *eq = 0;
                a.n++;
        }
        r = pull_query_parse(get, &a, &q, &error);
        CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        CHECK(r != -EINVAL || error);
        if (r < 0)
                return 0;
        CHECK(q.seconds >= PULL_SECONDS_MIN && q.seconds <= PULL_SECONDS_MAX);
        CHECK(!q.cgroup != !q.pod);
        if (q.cgroup) {
                CHECK(q.cgroup[0] && q.cgroup[0] != '/' && q.cgroup[strlen(q.cgroup) - 1] != '/');
                CHECK(!has_dot_component(q.cgroup));
                CHECK(!q.namespace && !q.container);
        } else {
                CHECK(kube_name_is_dns_label(q.namespace) && kube_name_is_dns_subdomain(q.pod));
                CHECK(!q.container || kube_name_is_dns_label(q.container));
                CHECK(!strchr(q.pod, '/') && !strchr(q.namespace, '/'));
        }
        r = pull_query_target(&q, &target);
        CHECK(r == 0 || r == -ENOMEM);
        if (r == 0)
                CHECK(strncmp(target, q.cgroup ? "cgroup:" : "pod:", q.cgroup ? 7 : 4) == 0);
        return 0;
}
