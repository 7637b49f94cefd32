/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench/rules: the cost of ProfileConfig merging on the event loop.
 * Builds a namespace's rule set from N ProfileConfig specs (as the agent
 * does on every change of one of them) and matches pods against it (as it
 * does for every container on a pod event), and prints the time per
 * operation. Usage: cgprof-bench-rules [OBJECTS [TARGETS_PER_OBJECT]] */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kube-target.h"

static uint64_t now_nsec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static cJSON *json(const char *fmt, ...) _printf_(1, 2);
static cJSON *json(const char *fmt, ...) {
        char buf[8192];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        return cJSON_Parse(buf);
}

int main(int argc, char *argv[]) {
        unsigned n_objects = argc > 1 ? (unsigned) atoi(argv[1]) : 50;
        unsigned n_targets = argc > 2 ? (unsigned) atoi(argv[2]) : 10;
        _cleanup_free_ char *error = NULL;
        Config *cluster = NULL, **specs;
        KubeScope *scopes;
        int r;

        r = config_parse(
                "{\"profiles\":[{\"name\":\"default\"}],\"targets\":[{\"name\":\"web\","
                "\"podNamePatterns\":[\"^web-\"]},{\"name\":\"db\",\"podSelector\":{\"matchLabels\":"
                "{\"app\":\"db\"}}}]}",
                &cluster, &error);
        if (r < 0) {
                fprintf(stderr, "cluster config: %s\n", error);
                return 1;
        }
        specs = calloc(n_objects, sizeof(Config *));
        scopes = calloc(n_objects, sizeof(KubeScope));
        for (unsigned i = 0; i < n_objects; i++) {
                char targets[6144] = "";
                size_t l = 0;
                for (unsigned t = 0; t < n_targets; t++)
                        l += (size_t) snprintf(
                                targets + l, sizeof(targets) - l,
                                "%s{\"name\":\"t%u-%u\",\"podSelector\":{\"matchExpressions\":"
                                "[{\"key\":\"app\",\"operator\":\"In\",\"values\":[\"a%u\"]}]},"
                                "\"podNamePatterns\":[\"^job-%u-\"]}",
                                t ? "," : "", i, t, t, i);
                cJSON *j = json("{\"profiles\":[{\"name\":\"p%u\",\"frequency\":199}],\"targets\":[%s]}", i,
                                targets);
                free(error);
                error = NULL;
                if (!j || config_parse_namespaced(j, "spec", cluster, &specs[i], &error) < 0) {
                        fprintf(stderr, "spec %u: %s\n", i, strna(error));
                        return 1;
                }
                cJSON_Delete(j);
                scopes[i] = (KubeScope){ .name = "pc", .config = specs[i] };
        }

        /* Build: what a change of one object costs. */
        unsigned rounds = 200;
        uint64_t t0 = now_nsec();
        for (unsigned k = 0; k < rounds; k++) {
                KubeRules rules = {};
                if (kube_rules_build(cluster, "ns", scopes, n_objects, &rules) < 0)
                        return 1;
                kube_rules_done(&rules);
        }
        uint64_t build_ns = (now_nsec() - t0) / rounds;

        /* Match: what each container costs on a pod event (no rule matches: the worst case). */
        KubeRules rules = {};
        kube_rules_build(cluster, "ns", scopes, n_objects, &rules);
        cJSON *pj = json("{\"metadata\":{\"name\":\"other-0\",\"namespace\":\"ns\",\"uid\":\"u\","
                         "\"labels\":{\"app\":\"zzz\"}}}");
        cJSON *nj = json("{\"metadata\":{\"name\":\"ns\",\"labels\":{}}}");
        KubePod *pod = NULL;
        KubeNamespace *ns = NULL;
        kube_pod_from_json(pj, &pod, NULL);
        kube_namespace_from_json(nj, &ns, NULL);
        const KubeRule *rule = NULL;
        rounds = 2000;
        t0 = now_nsec();
        for (unsigned k = 0; k < rounds; k++)
                if (kube_rules_find(&rules, ns, pod, "main", NULL, &rule) != KUBE_MATCH_NO)
                        return 1;
        uint64_t match_ns = (now_nsec() - t0) / rounds;

        printf("ProfileConfigs in one namespace: %u objects x %u targets (%zu rules)\n", n_objects,
               n_targets, rules.n_rules);
        printf("  rebuild the namespace's rules: %.1f us\n", build_ns / 1000.0);
        printf("  match one container (no rule matches): %.1f us\n", match_ns / 1000.0);

        kube_rules_done(&rules);
        kube_pod_free(pod);
        kube_namespace_free(ns);
        cJSON_Delete(pj);
        cJSON_Delete(nj);
        for (unsigned i = 0; i < n_objects; i++)
                config_free(specs[i]);
        free(specs);
        free(scopes);
        config_free(cluster);
        return 0;
}
