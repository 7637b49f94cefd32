/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kube-object.h"
#include "tests.h"

static const char *pod_json =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"trainer-0\",\"namespace\":\"ml\","
        "\"uid\":\"0f3b2c4d-1a2b-4c3d-8e9f-0123456789ab\",\"generateName\":\"trainer-\",\"resourceVersion\":"
        "\"42\","
        "\"labels\":{\"app\":\"trainer\",\"cgprof.io/profile\":\"enabled\"},"
        "\"ownerReferences\":[{\"kind\":\"StatefulSet\",\"name\":\"trainer\",\"uid\":\"x\"}]},"
        "\"spec\":{\"nodeName\":\"node-a\",\"containers\":[{\"name\":\"main\"},{\"name\":\"sidecar\"}],"
        "\"initContainers\":[{\"name\":\"init\"}]},"
        "\"status\":{\"containerStatuses\":[{\"name\":\"main\",\"containerID\":\"containerd://"
        "ABCDEF0123456789\","
        "\"state\":{\"running\":{}}},{\"name\":\"sidecar\",\"state\":{\"waiting\":{}}}],"
        "\"initContainerStatuses\":[{\"name\":\"init\",\"containerID\":\"cri-o://0123456789abcdef\","
        "\"state\":{\"terminated\":{\"exitCode\":0}}}]}}";

TEST(pod) {
        cJSON *j = cJSON_Parse(pod_json);
        _cleanup_(kube_pod_freep) KubePod *p = NULL;
        ASSERT_NOT_NULL(j);
        ASSERT_OK(kube_pod_from_json(j, &p, NULL));
        cJSON_Delete(j);

        ASSERT_STREQ(p->name, "trainer-0");
        ASSERT_STREQ(p->namespace, "ml");
        ASSERT_STREQ(p->generate_name, "trainer-");
        ASSERT_STREQ(p->node_name, "node-a");
        ASSERT_STREQ(kube_labels_get(p->labels, "app"), "trainer");
        ASSERT_NULL(kube_labels_get(p->labels, "missing"));
        ASSERT_EQ(p->n_owners, 1);
        ASSERT_STREQ(p->owners[0].kind, "StatefulSet");
        ASSERT_EQ(p->n_containers, 3);
        ASSERT_FALSE(p->deleting);

        const KubeContainer *c = kube_pod_find_container_id(p, "abcdef0123456789");
        ASSERT_NOT_NULL(c);
        ASSERT_STREQ(c->name, "main");
        ASSERT_STREQ(c->runtime, "containerd");
        ASSERT_TRUE(c->running);
        c = kube_pod_find_container_id(p, "0123456789abcdef");
        ASSERT_NOT_NULL(c);
        ASSERT_EQ(c->kind, KUBE_CONTAINER_INIT);
        ASSERT_TRUE(c->terminated);
        ASSERT_NULL(kube_pod_find_container_id(p, "ffff"));
}

TEST(pod_errors) {
        static const char *const bad[] = {
                "[]",
                "{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"}}",
                "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"b\"}}",
                "{\"metadata\":{\"uid\":\"u\",\"name\":\"a\",\"namespace\":\"b\",\"labels\":{\"x\":1}}}",
                "{\"metadata\":{\"uid\":\"u\",\"name\":\"a\",\"namespace\":\"b\"},\"status\":{"
                "\"containerStatuses\":"
                "[{\"name\":\"c\",\"containerID\":\"nonsense\"}]}}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                cJSON *j = cJSON_Parse(bad[i]);
                KubePod *p = NULL;
                _cleanup_free_ char *err = NULL;
                ASSERT_NOT_NULL(j);
                ASSERT_ERROR(kube_pod_from_json(j, &p, &err), EBADMSG);
                ASSERT_NULL(p);
                ASSERT_NOT_NULL(err);
                fprintf(stderr, "  %s\n", err);
                cJSON_Delete(j);
        }
}

TEST(namespace) {
        cJSON *j =
                cJSON_Parse("{\"metadata\":{\"name\":\"ml\",\"uid\":\"u1\",\"labels\":{\"team\":\"ml\"}}}");
        _cleanup_(kube_namespace_freep) KubeNamespace *n = NULL;
        ASSERT_OK(kube_namespace_from_json(j, &n, NULL));
        ASSERT_STREQ(n->name, "ml");
        ASSERT_STREQ(kube_labels_get(n->labels, "team"), "ml");
        cJSON_Delete(j);
}

TEST(container_id) {
        _cleanup_free_ char *rt = NULL, *id = NULL;
        ASSERT_OK(kube_parse_container_id("docker://DEADbeef", &rt, &id));
        ASSERT_STREQ(rt, "docker");
        ASSERT_STREQ(id, "deadbeef");
        char *a = NULL, *b = NULL;
        ASSERT_ERROR(kube_parse_container_id("docker://", &a, &b), EINVAL);
        ASSERT_ERROR(kube_parse_container_id("://abc", &a, &b), EINVAL);
        ASSERT_ERROR(kube_parse_container_id("abc", &a, &b), EINVAL);
        ASSERT_ERROR(kube_parse_container_id("containerd://xyz", &a, &b), EINVAL);
}

DEFINE_TEST_MAIN
