/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the Kubernetes objects the agent reads from the API
 * server (common/kube/kube-object.c): pods and namespaces from their JSON,
 * and container IDs ("containerd://<hex>").
 *
 * The input is an object's JSON: it is read as a pod and as a namespace.
 * Each parses, or fails with -EBADMSG (and a message naming the field) or
 * -ENOMEM. A parsed pod has its metadata, labels in pairs, and containers
 * whose IDs are lowercase hex, each found again by its ID. The input as a
 * string is also split as a container ID.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <ctype.h>

#include "fuzz.h"
#include "kube-object.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

static void check_labels(char *const *labels) {
        size_t n = 0;

        CHECK(labels);
        for (; labels[n]; n++)
                ;
        CHECK(n % 2 == 0);
        for (size_t i = 0; i < n; i += 2)
                CHECK(kube_labels_get(labels, labels[i]));
}

static void check_pod(const KubePod *p) {
        CHECK(p->uid && p->name && p->namespace);
        check_labels(p->labels);
        for (size_t i = 0; i < p->n_containers; i++) {
                const KubeContainer *c = &p->containers[i];

                CHECK(c->name);
                CHECK(c->kind < _KUBE_CONTAINER_KIND_MAX);
                if (!c->id)
                        continue;
                CHECK(c->id[0]);
                for (const char *s = c->id; *s; s++)
                        CHECK(isxdigit((unsigned char) *s) && !isupper((unsigned char) *s));
                /* Two containers may claim one ID: the first one wins. */
                CHECK(kube_pod_find_container_id(p, c->id));
        }
        CHECK(!kube_pod_find_container_id(p, "not-hex"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size);
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        int r;

        {
                _cleanup_free_ char *runtime = NULL, *id = NULL;

                r = kube_parse_container_id(text, &runtime, &id);
                CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
                if (r == 0) {
                        CHECK(runtime[0] && id[0] && !strstr(runtime, "://"));
                        for (const char *s = id; *s; s++)
                                CHECK(isxdigit((unsigned char) *s) && !isupper((unsigned char) *s));
                }
        }

        j = cJSON_Parse(text);
        if (!j)
                return 0;

        {
                _cleanup_(kube_pod_freep) KubePod *p = NULL;
                _cleanup_free_ char *error = NULL;

                r = kube_pod_from_json(j, &p, &error);
                if (r < 0) {
                        CHECK(r == -EBADMSG || r == -ENOMEM);
                        CHECK(!p);
                        CHECK(r != -EBADMSG || error);
                } else {
                        CHECK(p && !error);
                        check_pod(p);
                }
        }
        {
                _cleanup_(kube_namespace_freep) KubeNamespace *n = NULL;
                _cleanup_free_ char *error = NULL;

                r = kube_namespace_from_json(j, &n, &error);
                if (r < 0) {
                        CHECK(r == -EBADMSG || r == -ENOMEM);
                        CHECK(!n);
                        CHECK(r != -EBADMSG || error);
                } else {
                        CHECK(n && !error && n->name);
                        check_labels(n->labels);
                }
        }
        return 0;
}
