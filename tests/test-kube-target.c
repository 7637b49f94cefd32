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

/* The rule that selects the container under the cluster config alone (a
 * namespace without ProfileConfigs): the merge with no scope, as the agent
 * builds it, and its lookup. */
static KubeMatch target_find(const Config *c, const KubeNamespace *n, const KubePod *p,
                             const char *container, const char *cgroup, const Target **ret_target) {
        _cleanup_(kube_rules_done) KubeRules r = {};
        const KubeRule *rule = NULL;
        KubeMatch m;

        ASSERT_OK(kube_rules_build(c, "ns", NULL, 0, &r));
        ASSERT_EQ(r.n_errors, 0);
        m = kube_rules_find(&r, n, p, container, cgroup, &rule);
        if (m == KUBE_MATCH_YES)
                *ret_target = rule->target;
        return m;
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

        ASSERT_EQ(target_find(c, ns_off, plain, "c", NULL, &t), KUBE_MATCH_NO);
        ASSERT_EQ(target_find(c, ns_on, plain, "c", NULL, &t), KUBE_MATCH_YES);
        ASSERT_TRUE(t == &kube_default_target);
        ASSERT_EQ(target_find(c, ns_off, on, "c", NULL, &t), KUBE_MATCH_YES);
        /* The pod opts out, even in an enabled namespace. */
        ASSERT_EQ(target_find(c, ns_on, off, "c", NULL, &t), KUBE_MATCH_NO);
        /* Namespace not known yet: undecided. */
        ASSERT_EQ(target_find(c, NULL, plain, "c", NULL, &t), KUBE_MATCH_UNDECIDED);

        _cleanup_(config_freep) Config *c2 = config("{\"enableDefault\":false,\"targets\":[]}");
        ASSERT_EQ(target_find(c2, ns_on, on, "c", NULL, &t), KUBE_MATCH_NO);
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

        ASSERT_EQ(target_find(c, ml, good, "main", NULL, &t), KUBE_MATCH_YES);
        ASSERT_STREQ(t->name, "t");
        ASSERT_EQ(target_find(c, ml, good, "sidecar", NULL, &t), KUBE_MATCH_NO);
        ASSERT_EQ(target_find(c, ml, good, NULL, NULL, &t), KUBE_MATCH_UNDECIDED);
        ASSERT_EQ(target_find(c, web, good, "main", NULL, &t), KUBE_MATCH_NO);
        ASSERT_EQ(target_find(c, ml, bad_label, "main", NULL, &t), KUBE_MATCH_NO);
        /* generateName "gen-" does not match ^trainer- either. */
        ASSERT_EQ(target_find(c, ml, bad_name, "main", NULL, &t), KUBE_MATCH_NO);
        ASSERT_EQ(target_find(c, ml, bad_owner, "main", NULL, &t), KUBE_MATCH_NO);

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
        ASSERT_EQ(target_find(c, n, p, "c", NULL, &t), KUBE_MATCH_YES);
        ASSERT_STREQ(t->name, "by-gen");
        ASSERT_STREQ(config_target_profile(c, t)->name, "p1");
}

/* ---- ProfileConfig specs and the merge ---- */

static Config *spec(const Config *cluster, const char *json) {
        _cleanup_free_ char *err = NULL;
        cJSON *j = cJSON_Parse(json);
        Config *c = NULL;
        ASSERT_NOT_NULL(j);
        int r = config_parse_namespaced(j, "spec", cluster, &c, &err);
        if (r < 0)
                fprintf(stderr, "spec: %s\n", strna(err));
        ASSERT_OK(r);
        cJSON_Delete(j);
        return c;
}

static void spec_fails(const Config *cluster, const char *json, const char *error) {
        _cleanup_free_ char *err = NULL;
        cJSON *j = cJSON_Parse(json);
        Config *c = NULL;
        ASSERT_NOT_NULL(j);
        ASSERT_ERROR(config_parse_namespaced(j, "spec", cluster, &c, &err), EINVAL);
        ASSERT_NULL(c);
        ASSERT_STREQ(err, error);
        cJSON_Delete(j);
}

TEST(profile_config_spec) {
        _cleanup_(config_freep) Config *cluster =
                config("{\"profiles\":[{\"name\":\"fast\",\"frequency\":999}],\"targets\":[]}");

        spec_fails(cluster, "{\"reportDir\":\"/tmp\"}",
                   "spec.reportDir: not allowed in a ProfileConfig: only the cluster config sets reportDir");
        spec_fails(cluster,
                   "{\"machineConfig\":[{\"name\":\"kernel.perf_event_paranoid\",\"value\":\"1\"}]}",
                   "spec.machineConfig: not allowed in a ProfileConfig: only the cluster config sets "
                   "machineConfig");
        spec_fails(cluster, "{\"enableDefault\":true}",
                   "spec.enableDefault: not allowed in a ProfileConfig: only the cluster config sets "
                   "enableDefault");
        spec_fails(cluster, "{\"debuginfodUrls\":[\"http://127.0.0.1:1/\"]}",
                   "spec.debuginfodUrls: not allowed in a ProfileConfig: only the cluster config sets "
                   "debuginfodUrls");
        spec_fails(cluster, "{\"targets\":[{\"name\":\"t\",\"cgroupPatterns\":[\"*\"]}]}",
                   "spec.targets[0].cgroupPatterns: not allowed in a ProfileConfig: host cgroups are the "
                   "cluster "
                   "config's");
        spec_fails(cluster,
                   "{\"targets\":[{\"name\":\"t\",\"namespaceSelector\":{\"matchLabels\":{\"a\":\"b\"}}}]}",
                   "spec.targets[0].namespaceSelector: not allowed in a ProfileConfig: its targets select "
                   "pods of "
                   "its own namespace only");
        spec_fails(cluster, "{\"profiles\":[{\"name\":\"p\",\"output\":\"%{HOME}/x\"}]}",
                   "spec.profiles[0].output: %{...} (the agent's environment) is not allowed in a "
                   "ProfileConfig");
        spec_fails(cluster, "{\"profiles\":[{\"name\":\"p\",\"frequency\":0}]}",
                   "spec.profiles[0].frequency: must be 1..100000");
        spec_fails(cluster,
                   "{\"targets\":[{\"name\":\"t\",\"profileRef\":\"nope\",\"podNamePatterns\":[\".\"]}]}",
                   "spec.targets[0].profileRef: no profile named \"nope\"");
        spec_fails(cluster, "{\"defaultProfileRef\":\"nope\"}",
                   "spec.defaultProfileRef: no profile named \"nope\" (in this ProfileConfig or the cluster "
                   "config)");
        spec_fails(cluster, "{\"typo\":1}", "spec.typo: unknown key");
        spec_fails(cluster, "[]", "spec: must be an object");

        /* Cluster profiles may be named. */
        _cleanup_(config_freep) Config *ok = spec(cluster, "{\"defaultProfileRef\":\"fast\",\"targets\":[{"
                                                           "\"name\":\"t\",\"podNamePatterns\":[\".\"]}]}");
        ASSERT_EQ(ok->n_targets, 1u);
        ASSERT_EQ(ok->n_profiles, 0u);
        ASSERT_NULL(ok->report_dir);
        ASSERT_EQ(ok->n_machine_config, 0u);
}

TEST(profile_config_merge) {
        _cleanup_(config_freep) Config *cluster =
                config("{\"enableDefault\":true,\"profiles\":[{\"name\":\"default\"},{\"name\":\"slow\","
                       "\"frequency\":9}],"
                       "\"targets\":[{\"name\":\"all\",\"podNamePatterns\":[\".*\"]},"
                       "{\"name\":\"host\",\"cgroupPatterns\":[\"x\"]}]}");
        /* a: disables the cluster's "all", adds "mine" with its own profile. */
        _cleanup_(config_freep) Config *a = spec(
                cluster, "{\"profiles\":[{\"name\":\"hot\",\"frequency\":499,\"output\":\"{POD}\"}],"
                         "\"targets\":[{\"name\":\"all\",\"podNamePatterns\":[\".\"],\"disabled\":true},"
                         "{\"name\":\"mine\",\"profileRef\":\"hot\",\"podSelector\":{\"matchLabels\":{"
                         "\"app\":\"x\"}}}]}");
        /* b: a second "mine" (left out), a cluster profile by name, a default profile. */
        _cleanup_(config_freep) Config *b =
                spec(cluster, "{\"defaultProfileRef\":\"slow\",\"targets\":[{\"name\":\"mine\","
                              "\"podNamePatterns\":[\".\"]},"
                              "{\"name\":\"other\",\"podNamePatterns\":[\"^y\"]}]}");
        /* c: names the cluster's target without disabling it. */
        _cleanup_(config_freep) Config *c =
                spec(cluster, "{\"targets\":[{\"name\":\"all\",\"podNamePatterns\":[\".\"]}]}");
        KubeScope scopes[] = { { "a", a }, { "b", b } };
        _cleanup_(kube_rules_done) KubeRules r = {};
        _cleanup_(kube_pod_freep) KubePod *x = pod("x-1", "{\"app\":\"x\"}", "Job"),
                                          *y = pod("y-1", "{}", "Job"), *z = pod("z-1", "{}", "Job");
        _cleanup_(kube_namespace_freep) KubeNamespace *n = ns("{}");
        const KubeRule *rule = NULL;

        ASSERT_OK(kube_rules_build(cluster, "ml", scopes, 2, &r));
        /* cluster "all" (disabled here), a's "mine", b's "other"; the host rule is not a pod rule. */
        ASSERT_EQ(r.n_rules, 3u);
        ASSERT_EQ(r.rules[0].disabled_by, 0);
        ASSERT_EQ(r.n_errors, 1u);
        ASSERT_STREQ(
                r.errors[0].message,
                "ProfileConfig ml/b: target \"mine\" is left out: ProfileConfig ml/a has an enabled target "
                "of that name in namespace ml.");
        ASSERT_STREQ(r.errors[0].target, "mine");
        ASSERT_STREQ(r.errors[0].conflict_with, "ProfileConfig ml/a");
        ASSERT_EQ(r.errors[0].scope, 1);

        ASSERT_EQ(kube_rules_find(&r, n, x, "c", NULL, &rule), KUBE_MATCH_YES);
        ASSERT_STREQ(rule->target->name, "mine");
        ASSERT_STREQ(rule->profile->name, "hot");
        ASSERT_EQ(rule->target_scope, 0);
        ASSERT_EQ(rule->profile_scope, 0);
        /* b's target without profileRef: b's defaultProfileRef, a cluster profile. */
        ASSERT_EQ(kube_rules_find(&r, n, y, "c", NULL, &rule), KUBE_MATCH_YES);
        ASSERT_STREQ(rule->target->name, "other");
        ASSERT_STREQ(rule->profile->name, "slow");
        ASSERT_EQ(rule->target_scope, 1);
        ASSERT_EQ(rule->profile_scope, KUBE_SCOPE_CLUSTER);
        /* The cluster's "all" is off here; z is no target (enableDefault needs a label). */
        ASSERT_EQ(kube_rules_find(&r, n, z, "c", NULL, &rule), KUBE_MATCH_NO);
        ASSERT_STREQ(kube_rule_reason(&r.rules[0], scopes, n, z, "c", NULL),
                     "the target is disabled in this namespace by a ProfileConfig");

        /* Without the ProfileConfigs (another namespace), the cluster's "all" selects z. */
        _cleanup_(kube_rules_done) KubeRules plain = {};
        ASSERT_OK(kube_rules_build(cluster, "web", NULL, 0, &plain));
        ASSERT_EQ(kube_rules_find(&plain, n, z, "c", NULL, &rule), KUBE_MATCH_YES);
        ASSERT_STREQ(rule->target->name, "all");
        ASSERT_STREQ(rule->profile->name, "default");

        /* enableDefault in ml uses the namespace's defaultProfileRef (b's). */
        _cleanup_(kube_pod_freep) KubePod *labelled =
                pod("q-1", "{\"cgprof.io/profile\":\"enabled\"}", "Job");
        ASSERT_EQ(kube_rules_find(&r, n, labelled, "c", NULL, &rule), KUBE_MATCH_YES);
        ASSERT_TRUE(rule->target == &kube_default_target);
        ASSERT_STREQ(rule->profile->name, "slow");

        /* c's "all" conflicts with the cluster's enabled "all". */
        KubeScope scopes_c[] = { { "c", c } };
        _cleanup_(kube_rules_done) KubeRules rc = {};
        ASSERT_OK(kube_rules_build(cluster, "ml", scopes_c, 1, &rc));
        ASSERT_EQ(rc.n_errors, 1u);
        ASSERT_STREQ(rc.errors[0].conflict_with, "the cluster config");
        ASSERT_EQ(rc.n_rules, 1u);
        ASSERT_EQ(kube_rules_find(&rc, n, z, "c", NULL, &rule), KUBE_MATCH_YES);
        ASSERT_EQ(rule->target_scope, KUBE_SCOPE_CLUSTER);
}

DEFINE_TEST_MAIN
