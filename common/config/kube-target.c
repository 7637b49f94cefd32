/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "kube-target.h"

const Target kube_default_target = {
        .name = (char *) "enableDefault",
};

static bool pod_name_matches(const Target *t, const KubePod *pod) {
        for (size_t i = 0; i < t->n_pod_name_patterns; i++) {
                const regex_t *re = &t->pod_name_patterns[i].regex;
                if (regexec(re, pod->name, 0, NULL, 0) == 0)
                        return true;
                if (pod->generate_name && regexec(re, pod->generate_name, 0, NULL, 0) == 0)
                        return true;
        }
        return false;
}

static bool owner_matches(const OwnerRef *o, const KubePod *pod) {
        for (size_t i = 0; i < pod->n_owners; i++)
                if ((!o->kind || streq_ptr(o->kind, pod->owners[i].kind)) &&
                    (!o->name || streq_ptr(o->name, pod->owners[i].name)))
                        return true;
        return false;
}

KubeMatch kube_target_matches(const Target *t, const KubeNamespace *ns, const KubePod *pod,
                              const char *container, const char *cgroup, const char **ret_reason) {
        const char *reason = NULL;
        bool undecided = false;

        if (t->disabled)
                reason = "the target is disabled";
        else if (t->pod_name_patterns && !pod_name_matches(t, pod))
                reason = "podNamePatterns do not match the pod's name or generateName";
        else if (t->pod_selector && !label_selector_matches(t->pod_selector, (Labels) pod->labels))
                reason = "podSelector does not match the pod's labels";
        else if (t->owner && !owner_matches(t->owner, pod))
                reason = "owner does not match the pod's ownerReferences";
        else if (t->cgroup_patterns && (!cgroup || !target_matches_cgroup(t, cgroup))) {
                if (cgroup)
                        reason = "cgroupPatterns do not match the container's cgroup";
                else
                        undecided = true;
        }
        if (!reason && t->namespace_selector) {
                if (!ns)
                        undecided = true;
                else if (!label_selector_matches(t->namespace_selector, (Labels) ns->labels))
                        reason = "namespaceSelector does not match the namespace's labels";
        }
        if (!reason && t->containers) {
                if (!container)
                        undecided = true;
                else {
                        bool found = false;
                        for (char **c = t->containers; *c; c++)
                                if (streq(*c, container))
                                        found = true;
                        if (!found)
                                reason = "containers does not list the container";
                }
        }

        if (reason) {
                if (ret_reason)
                        *ret_reason = reason;
                return KUBE_MATCH_NO;
        }
        return undecided ? KUBE_MATCH_UNDECIDED : KUBE_MATCH_YES;
}

bool kube_target_is_pod_rule(const Target *t) {
        /* A rule for host cgroups only (cgroupPatterns alone) is not a pod rule. */
        return t->namespace_selector || t->pod_selector || t->pod_name_patterns || t->owner || t->containers;
}

/* enableDefault's rule: the pod's label, else its namespace's. */
static KubeMatch enable_default_matches(const KubeNamespace *ns, const KubePod *pod) {
        const char *pod_label = kube_labels_get(pod->labels, KUBE_PROFILE_LABEL);

        if (streq_ptr(pod_label, "disabled"))
                return KUBE_MATCH_NO;
        if (streq_ptr(pod_label, "enabled"))
                return KUBE_MATCH_YES;
        if (!ns)
                return KUBE_MATCH_UNDECIDED;
        return streq_ptr(kube_labels_get(ns->labels, KUBE_PROFILE_LABEL), "enabled") ? KUBE_MATCH_YES
                                                                                     : KUBE_MATCH_NO;
}

/* ---- merged rules ---- */

static const Profile *scope_profile(const Config *cluster, const KubeScope *scopes, int scope,
                                    const char *name, int *ret_scope) {
        const Profile *p;

        if (scope != KUBE_SCOPE_CLUSTER) {
                p = config_find_profile(scopes[scope].config, name);
                if (p) {
                        *ret_scope = scope;
                        return p;
                }
        }
        *ret_scope = KUBE_SCOPE_CLUSTER;
        return config_find_profile(cluster, name);
}

static int add_error(KubeRules *r, int scope, const char *target, const char *with, const char *fmt, ...)
        _printf_(5, 6);
static int add_error(KubeRules *r, int scope, const char *target, const char *with, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL, *w = NULL;
        KubeRuleError *l;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        if (with && !(w = strdup(with)))
                return -ENOMEM;
        l = reallocarray(r->errors, r->n_errors + 1, sizeof(KubeRuleError));
        if (!l)
                return -ENOMEM;
        r->errors = l;
        r->errors[r->n_errors++] = (KubeRuleError){
                .message = TAKE_PTR(m),
                .scope = scope,
                .target = target,
                .conflict_with = TAKE_PTR(w),
        };
        return 0;
}

/* Enabled target names accepted so far, with their scope: a hash map, so
 * a merge is O(n) in the number of targets. */
typedef struct NameScope {
        const char *name;
        int scope;
} NameScope;

DEFINE_STRING_HASHMAP(NameScopeMap, name_scope_map, NameScope);

/* The scope of the accepted enabled target of that name, or -2. */
static int find_enabled(const NameScopeMap *names, const char *name) {
        NameScope *n = name_scope_map_get(names, name);
        return n ? n->scope : -2;
}

/* Adds a name (the first one added stays). */
static int add_enabled(NameScopeMap *names, NameScope *slot, const char *name, int scope) {
        *slot = (NameScope){ .name = name, .scope = scope };
        int r = name_scope_map_put(names, name, slot);
        return r == -EEXIST ? 0 : r;
}

typedef struct Merge {
        NameScope *slots;
        size_t n_slots;
        NameScopeMap enabled, disabled;
} Merge;

/* The names switched off, by the first object that does. */
static int rules_collect_disabled(const KubeScope *scopes, size_t n_scopes, Merge *mg) {
        for (size_t s = 0; s < n_scopes; s++)
                for (size_t j = 0; j < scopes[s].config->n_targets; j++) {
                        const Target *d = &scopes[s].config->targets[j];
                        if (d->disabled && find_enabled(&mg->disabled, d->name) == -2 &&
                            add_enabled(&mg->disabled, &mg->slots[mg->n_slots++], d->name, (int) s) < 0)
                                return -ENOMEM;
                }
        return 0;
}

/* The cluster config's pod targets, in order: disabled ones too, and those
 * a ProfileConfig switches off (disabled_by). */
static int rules_add_cluster(const Config *cluster, const KubeScope *scopes, Merge *mg, KubeRules *r) {
        for (size_t i = 0; i < cluster->n_targets; i++) {
                const Target *t = &cluster->targets[i];
                KubeRule *x;
                int ps;

                if (!kube_target_is_pod_rule(t))
                        continue;
                x = &r->rules[r->n_rules++];
                *x = (KubeRule){
                        .target = t,
                        .profile = scope_profile(cluster, scopes, KUBE_SCOPE_CLUSTER,
                                                 t->profile_ref ?: cluster->default_profile_ref, &ps),
                        .target_scope = KUBE_SCOPE_CLUSTER,
                        .profile_scope = KUBE_SCOPE_CLUSTER,
                        .disabled_by = KUBE_SCOPE_CLUSTER,
                };
                /* Switched off here by a ProfileConfig? */
                int d = find_enabled(&mg->disabled, t->name);
                if (d >= 0)
                        x->disabled_by = d;
                else if (!t->disabled && add_enabled(&mg->enabled, &mg->slots[mg->n_slots++], t->name,
                                                     KUBE_SCOPE_CLUSTER) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* enableDefault: the cluster's switch, the namespace's defaultProfileRef
 * (the first ProfileConfig's that sets one; another that sets a different
 * one is an error). */
static int rules_set_default(const Config *cluster, const char *namespace, const KubeScope *scopes,
                             size_t n_scopes, KubeRules *r) {
        int def_scope = KUBE_SCOPE_CLUSTER, k;

        r->enable_default = cluster->enable_default;
        r->default_rule = (KubeRule){
                .target = &kube_default_target,
                .target_scope = KUBE_SCOPE_CLUSTER,
                .profile_scope = KUBE_SCOPE_CLUSTER,
                .disabled_by = KUBE_SCOPE_CLUSTER,
        };
        for (size_t s = 0; s < n_scopes; s++) {
                const char *ref = scopes[s].config->default_profile_ref;
                if (!ref)
                        continue;
                if (def_scope == KUBE_SCOPE_CLUSTER) {
                        def_scope = (int) s;
                        continue;
                }
                if (!streq(ref, scopes[def_scope].config->default_profile_ref)) {
                        _cleanup_free_ char *with = NULL;
                        if (asprintf(&with, "ProfileConfig %s/%s", namespace, scopes[def_scope].name) < 0)
                                return -ENOMEM;
                        k = add_error(
                                r, (int) s, NULL, with,
                                "ProfileConfig %s/%s: defaultProfileRef \"%s\" is ignored: ProfileConfig "
                                "%s/%s sets \"%s\" for namespace %s.",
                                namespace, scopes[s].name, ref, namespace, scopes[def_scope].name,
                                scopes[def_scope].config->default_profile_ref, namespace);
                        if (k < 0)
                                return k;
                }
        }
        if (def_scope != KUBE_SCOPE_CLUSTER)
                r->default_rule.profile = scope_profile(cluster, scopes, def_scope,
                                                        scopes[def_scope].config->default_profile_ref,
                                                        &r->default_rule.profile_scope);
        if (!r->default_rule.profile)
                r->default_rule.profile = config_find_profile(cluster, cluster->default_profile_ref);
        return 0;
}

/* Enabled target t of scope s: a rule, or an error that says why it is
 * left out (an enabled target of that name came first, or it has no
 * profile). */
static int rules_add_scope_target(const Config *cluster, const char *namespace, const KubeScope *scopes,
                                  size_t s, const Target *t, Merge *mg, KubeRules *r) {
        const Config *c = scopes[s].config;
        const char *ref;
        const Profile *p;
        int other, ps;

        other = find_enabled(&mg->enabled, t->name);
        if (other == KUBE_SCOPE_CLUSTER)
                return add_error(r, (int) s, t->name, "the cluster config",
                                 "ProfileConfig %s/%s: target \"%s\" is left out: the cluster "
                                 "config's target \"%s\" applies in namespace %s too (disable it "
                                 "in a ProfileConfig to replace it).",
                                 namespace, scopes[s].name, t->name, t->name, namespace);
        if (other >= 0) {
                _cleanup_free_ char *with = NULL;
                if (asprintf(&with, "ProfileConfig %s/%s", namespace, scopes[other].name) < 0)
                        return -ENOMEM;
                return add_error(r, (int) s, t->name, with,
                                 "ProfileConfig %s/%s: target \"%s\" is left out: ProfileConfig "
                                 "%s/%s has an enabled target of that name in namespace %s.",
                                 namespace, scopes[s].name, t->name, namespace, scopes[other].name,
                                 namespace);
        }
        /* Its profileRef, its object's defaultProfileRef, or the namespace's default. */
        ref = t->profile_ref ?: c->default_profile_ref;
        if (ref)
                p = scope_profile(cluster, scopes, (int) s, ref, &ps);
        else {
                ref = r->default_rule.profile ? r->default_rule.profile->name : "(none)";
                p = r->default_rule.profile;
                ps = r->default_rule.profile_scope;
        }
        if (!p)
                return add_error(r, (int) s, t->name, NULL,
                                 "ProfileConfig %s/%s: target \"%s\" is left out: no profile "
                                 "named \"%s\" in it or in the cluster config.",
                                 namespace, scopes[s].name, t->name, ref);
        r->rules[r->n_rules++] = (KubeRule){
                .target = t,
                .profile = p,
                .target_scope = (int) s,
                .profile_scope = ps,
                .disabled_by = KUBE_SCOPE_CLUSTER,
        };
        if (add_enabled(&mg->enabled, &mg->slots[mg->n_slots++], t->name, (int) s) < 0)
                return -ENOMEM;
        return 0;
}

static int rules_build(const Config *cluster, const char *namespace, const KubeScope *scopes,
                       size_t n_scopes, Merge *mg, KubeRules *ret) {
        _cleanup_(kube_rules_done) KubeRules r = {};
        size_t max = cluster->n_targets;
        int k;

        for (size_t i = 0; i < n_scopes; i++)
                max += scopes[i].config->n_targets;
        r.rules = calloc(max + 1, sizeof(KubeRule));
        mg->slots = calloc(max + 1, sizeof(NameScope));
        if (!r.rules || !mg->slots)
                return -ENOMEM;

        k = rules_collect_disabled(scopes, n_scopes, mg);
        if (k < 0)
                return k;
        k = rules_add_cluster(cluster, scopes, mg, &r);
        if (k < 0)
                return k;
        k = rules_set_default(cluster, namespace, scopes, n_scopes, &r);
        if (k < 0)
                return k;
        /* The scopes' enabled targets, in scope order. */
        for (size_t s = 0; s < n_scopes; s++)
                for (size_t j = 0; j < scopes[s].config->n_targets; j++) {
                        const Target *t = &scopes[s].config->targets[j];

                        if (t->disabled)
                                continue;
                        k = rules_add_scope_target(cluster, namespace, scopes, s, t, mg, &r);
                        if (k < 0)
                                return k;
                }

        *ret = r;
        r = (KubeRules){};
        return 0;
}

int kube_rules_build(const Config *cluster, const char *namespace, const KubeScope *scopes, size_t n_scopes,
                     KubeRules *ret) {
        Merge mg = {};
        int r;

        r = rules_build(cluster, namespace, scopes, n_scopes, &mg, ret);
        name_scope_map_clear(&mg.enabled, NULL);
        name_scope_map_clear(&mg.disabled, NULL);
        free(mg.slots);
        return r;
}

void kube_rules_done(KubeRules *r) {
        if (!r)
                return;
        for (size_t i = 0; i < r->n_errors; i++) {
                free(r->errors[i].message);
                free(r->errors[i].conflict_with);
        }
        free(r->errors);
        free(r->rules);
        *r = (KubeRules){};
}

static bool rule_active(const KubeRule *x) {
        return x->profile && x->disabled_by == KUBE_SCOPE_CLUSTER;
}

KubeMatch kube_rules_find(const KubeRules *r, const KubeNamespace *ns, const KubePod *pod,
                          const char *container, const char *cgroup, const KubeRule **ret_rule) {
        for (size_t i = 0; i < r->n_rules; i++) {
                const KubeRule *x = &r->rules[i];
                if (!rule_active(x))
                        continue;
                KubeMatch m = kube_target_matches(x->target, ns, pod, container, cgroup, NULL);
                if (m == KUBE_MATCH_NO)
                        continue;
                if (m == KUBE_MATCH_YES)
                        *ret_rule = x;
                return m;
        }

        if (!r->enable_default || !r->default_rule.profile)
                return KUBE_MATCH_NO;
        KubeMatch m = enable_default_matches(ns, pod);
        if (m == KUBE_MATCH_YES)
                *ret_rule = &r->default_rule;
        return m;
}

const char *kube_rule_reason(const KubeRule *rule, const KubeScope *scopes, const KubeNamespace *ns,
                             const KubePod *pod, const char *container, const char *cgroup) {
        const char *reason = NULL;

        if (rule->disabled_by != KUBE_SCOPE_CLUSTER)
                return "the target is disabled in this namespace by a ProfileConfig";
        if (!rule->profile)
                return "its profile cannot be resolved";
        if (kube_target_matches(rule->target, ns, pod, container, cgroup, &reason) == KUBE_MATCH_NO)
                return reason;
        return NULL;
}
