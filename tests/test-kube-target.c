/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kube-target.h"
#include "tests.h"

static Config *config(const char *json) {
        Config *c = NULL;
        _cleanup_free_ char *err = NULL;
        int r = config_parse(json, &c, &err);
        if (r < 0)
                fprintf(stderr, "config: %s\n", strna(err));
        ASSERT_OK(r);
        return c;
}

static KubePod *pod(const char *name, const char *labels, const char *owner_kind) {
        char buf[2048];
        snprintf(buf, sizeof(buf),
                 "{\"metadata\":{\"name\":\"%s\",\"generateName\":\"gen-\",\"namespace\":\"ns\",\"uid\":"
                 "\"u\","
                 "\"labels\":%s,\"ownerReferences\":[{\"kind\":\"%s\",\"name\":\"own\"}]}}",
                 name, labels, owner_kind);
        cJSON *j = cJSON_Parse(buf);
        KubePod *p = NULL;
        ASSERT_NOT_NULL(j);
        ASSERT_OK(kube_pod_from_json(j, &p, NULL));
        cJSON_Delete(j);
        return p;
}

static KubeNamespace *ns(const char *labels) {
        char buf[512];
        snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"ns\",\"labels\":%s}}", labels);
        cJSON *j = cJSON_Parse(buf);
        KubeNamespace *n = NULL;
        ASSERT_OK(kube_namespace_from_json(j, &n, NULL));
        cJSON_Delete(j);
        return n;
}

TEST(enable_default) {
        _cleanup_(config_freep) Config *c = config("{\"enableDefault\":true,\"targets\":[]}");
        _cleanup_(kube_pod_freep)
                KubePod *plain = pod("a", "{}", "ReplicaSet"),
                        *on = pod("b", "{\"cgprof.io/profile\":\"enabled\"}", "ReplicaSet"),
                        *off = pod("c", "{\"cgprof.io/profile\":\"disabled\"}", "ReplicaSet");
        _cleanup_(kube_namespace_freep) KubeNamespace *ns_on = ns("{\"cgprof.io/profile\":\"enabled\"}"),
                                                      *ns_off = ns("{}");
        const Target *t = NULL;

        ASSERT_EQ(kube_target_find(c, ns_off, plain, "c", NULL, &t), KUBE_MATCH_NO);
        ASSERT_EQ(kube_target_find(c, ns_on, plain, "c", NULL, &t), KUBE_MATCH_YES);
        ASSERT_TRUE(t == &kube_default_target);
        ASSERT_EQ(kube_target_find(c, ns_off, on, "c", NULL, &t), KUBE_MATCH_YES);
        /* The pod opts out, even in an enabled namespace. */
        ASSERT_EQ(kube_target_find(c, ns_on, off, "c", NULL, &t), KUBE_MATCH_NO);
        /* Namespace not known yet: undecided. */
        ASSERT_EQ(kube_target_find(c, NULL, plain, "c", NULL, &t), KUBE_MATCH_UNDECIDED);

        _cleanup_(config_freep) Config *c2 = config("{\"enableDefault\":false,\"targets\":[]}");
        ASSERT_EQ(kube_target_find(c2, ns_on, on, "c", NULL, &t), KUBE_MATCH_NO);
}

TEST(conditions_and) {
        _cleanup_(config_freep) Config *c = config(
                "{\"targets\":[{\"name\":\"t\",\"namespaceSelector\":{\"matchLabels\":{\"team\":\"ml\"}},"
                "\"podSelector\":{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"In\",\"values\":["
                "\"trainer\"]}]},"
                "\"podNamePatterns\":[\"^trainer-\"],\"owner\":{\"kind\":\"StatefulSet\"},\"containers\":["
                "\"main\"]}]}");
        _cleanup_(kube_namespace_freep) KubeNamespace *ml = ns("{\"team\":\"ml\"}"),
                                                      *web = ns("{\"team\":\"web\"}");
        _cleanup_(kube_pod_freep)
                KubePod *good = pod("trainer-0", "{\"app\":\"trainer\"}", "StatefulSet"),
                        *bad_label = pod("trainer-1", "{\"app\":\"other\"}", "StatefulSet"),
                        *bad_name = pod("worker-0", "{\"app\":\"trainer\"}", "StatefulSet"),
                        *bad_owner = pod("trainer-2", "{\"app\":\"trainer\"}", "DaemonSet");
        const Target *t = NULL;
        const char *why = NULL;

        ASSERT_EQ(kube_target_find(c, ml, good, "main", NULL, &t), KUBE_MATCH_YES);
        ASSERT_STREQ(t->name, "t");
        ASSERT_EQ(kube_target_find(c, ml, good, "sidecar", NULL, &t), KUBE_MATCH_NO);
        ASSERT_EQ(kube_target_find(c, ml, good, NULL, NULL, &t), KUBE_MATCH_UNDECIDED);
        ASSERT_EQ(kube_target_find(c, web, good, "main", NULL, &t), KUBE_MATCH_NO);
        ASSERT_EQ(kube_target_find(c, ml, bad_label, "main", NULL, &t), KUBE_MATCH_NO);
        /* generateName "gen-" does not match ^trainer- either. */
        ASSERT_EQ(kube_target_find(c, ml, bad_name, "main", NULL, &t), KUBE_MATCH_NO);
        ASSERT_EQ(kube_target_find(c, ml, bad_owner, "main", NULL, &t), KUBE_MATCH_NO);

        ASSERT_EQ(kube_target_matches(&c->targets[0], web, good, "main", NULL, &why), KUBE_MATCH_NO);
        ASSERT_STREQ(why, "namespaceSelector does not match the namespace's labels");
        ASSERT_EQ(kube_target_matches(&c->targets[0], ml, bad_owner, "main", NULL, &why), KUBE_MATCH_NO);
        ASSERT_STREQ(why, "owner does not match the pod's ownerReferences");
}

TEST(generate_name_and_order) {
        _cleanup_(config_freep) Config *c =
                config("{\"enableDefault\":true,\"profiles\":[{\"name\":\"p1\"},{\"name\":\"p2\"}],"
                       "\"targets\":[{\"name\":\"host-only\",\"cgroupPatterns\":[\"*\"]},"
                       "{\"name\":\"by-gen\",\"profileRef\":\"p1\",\"podNamePatterns\":[\"^gen-$\"]},"
                       "{\"name\":\"second\",\"profileRef\":\"p2\",\"podNamePatterns\":[\".*\"]},"
                       "{\"name\":\"off\",\"podNamePatterns\":[\".*\"],\"disabled\":true}]}");
        _cleanup_(kube_pod_freep) KubePod *p = pod("xyz", "{}", "Job");
        _cleanup_(kube_namespace_freep) KubeNamespace *n = ns("{}");
        const Target *t = NULL;

        /* Host-only targets are skipped; the first pod rule wins. */
        ASSERT_EQ(kube_target_find(c, n, p, "c", NULL, &t), KUBE_MATCH_YES);
        ASSERT_STREQ(t->name, "by-gen");
        ASSERT_STREQ(config_target_profile(c, t)->name, "p1");
}

DEFINE_TEST_MAIN
