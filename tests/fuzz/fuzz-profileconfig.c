/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the spec of a ProfileConfig object
 * (config_parse_namespaced(), common/config/config.c) and the merging of a
 * namespace's rules (kube_rules_build(), common/config/kube-target.c).
 *
 * The input is the JSON of the spec. It is parsed against a fixed cluster
 * config; a spec that parses is merged with it (the namespace's one
 * ProfileConfig), and every merged rule names a target and a profile; the
 * rules are then matched against a fixed pod.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include "config.h"
#include "fuzz.h"
#include "kube-object.h"
#include "kube-target.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

static const char cluster_json[] =
        "{\"profiles\": [{\"name\": \"default\"}, {\"name\": \"fast\", \"frequency\": 999}],"
        " \"enableDefault\": true,"
        " \"targets\": [{\"name\": \"web\", \"podSelector\": {\"matchLabels\": {\"app\": \"web\"}},"
        "               \"profileRef\": \"fast\"},"
        "              {\"name\": \"host\", \"cgroupPatterns\": [\"system.slice/*\"]}]}";

static const char pod_json[] =
        "{\"metadata\": {\"uid\": \"0f0e0d0c-0b0a-0908-0706-050403020100\", \"namespace\": \"shop\","
        "  \"name\": \"web-1\", \"labels\": {\"app\": \"web\", \"tier\": \"front\"}},"
        " \"spec\": {\"nodeName\": \"n1\", \"containers\": [{\"name\": \"nginx\"}]}}";

static const char ns_json[] =
        "{\"metadata\": {\"name\": \"shop\", \"uid\": \"u1\", \"labels\": {\"team\": \"a\"}}}";

static Config *cluster;
static KubePod *pod;
static KubeNamespace *ns;

static void setup(void) {
        cJSON *j;

        if (cluster)
                return;
        CHECK(config_parse(cluster_json, &cluster, NULL) == 0);
        j = cJSON_Parse(pod_json);
        CHECK(j && kube_pod_from_json(j, &pod, NULL) == 0);
        cJSON_Delete(j);
        j = cJSON_Parse(ns_json);
        CHECK(j && kube_namespace_from_json(j, &ns, NULL) == 0);
        cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size), *error = NULL;
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(cJSON_Deletep) cJSON *spec = NULL;
        KubeRules rules = {};
        const KubeRule *rule = NULL;
        int r;

        setup();
        spec = cJSON_Parse(text);
        if (!spec)
                return 0;

        r = config_parse_namespaced(spec, "spec", cluster, &c, &error);
        if (r < 0) {
                CHECK(r == -EINVAL || r == -ENOMEM);
                CHECK(!c);
                CHECK(r != -EINVAL || (error && strncmp(error, "spec", 4) == 0));
                return 0;
        }
        CHECK(c && !error);
        CHECK(!c->report_dir && c->n_machine_config == 0);
        for (size_t i = 0; i < c->n_targets; i++)
                CHECK(c->targets[i].name && !c->targets[i].namespace_selector &&
                      !c->targets[i].cgroup_patterns);

        KubeScope scope = { .name = "pc", .config = c };
        r = kube_rules_build(cluster, "shop", &scope, 1, &rules);
        CHECK(r == 0 || r == -ENOMEM);
        if (r < 0)
                return 0;
        for (size_t i = 0; i < rules.n_rules; i++) {
                CHECK(rules.rules[i].target && rules.rules[i].target->name);
                CHECK(rules.rules[i].profile && rules.rules[i].profile->name);
        }
        for (size_t i = 0; i < rules.n_errors; i++)
                CHECK(rules.errors[i].message);
        (void) kube_rules_find(&rules, ns, pod, "nginx", "kubepods.slice/x.scope", &rule);
        (void) kube_rules_find(&rules, NULL, pod, NULL, NULL, &rule);
        for (size_t i = 0; i < rules.n_rules; i++)
                (void) kube_rule_reason(&rules.rules[i], &scope, ns, pod, "nginx", NULL);
        kube_rules_done(&rules);
        return 0;
}
