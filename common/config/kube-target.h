/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "config.h"
#include "kube-object.h"

/* Which target rule selects a pod's container. Every condition present in a
 * target must hold (AND); targets are tried in config order (OR), then
 * enableDefault: a pod in a namespace labelled cgprof.io/profile=enabled, or
 * labelled so itself, is a target with defaultProfileRef, unless the pod is
 * labelled cgprof.io/profile=disabled (which opts it out of enableDefault,
 * not out of explicit targets). */

#define KUBE_PROFILE_LABEL "cgprof.io/profile"

/* The target enableDefault stands for. */
extern const Target kube_default_target;

typedef enum KubeMatch {
        KUBE_MATCH_NO,
        KUBE_MATCH_YES,
        KUBE_MATCH_UNDECIDED, /* needs what is not known yet: the container's name or the namespace */
} KubeMatch;

/* Whether a target has a pod condition (a target with cgroupPatterns alone
 * is a host rule). */
bool kube_target_is_pod_rule(const Target *t);

/* Tries one target. container: the container's name, NULL when not known yet
 * (a cgroup seen before the pod's status). cgroup: the container's cgroup
 * path, for cgroupPatterns. ns may be NULL when not known yet. When the
 * answer is NO, *ret_reason (if non-NULL) gets the first failed condition,
 * e.g. "podSelector does not match" (static string). */
KubeMatch kube_target_matches(const Target *t, const KubeNamespace *ns, const KubePod *pod,
                              const char *container, const char *cgroup, const char **ret_reason);

/* ---- a namespace's rules: the cluster config merged with the namespace's
 * ProfileConfig objects (docs/configuration.md "Per-namespace configuration").
 * ---- */

/* One ProfileConfig of the namespace. */
typedef struct KubeScope {
        const char *name; /* the object's name */
        const Config *config; /* its spec (config_parse_namespaced()) */
} KubeScope;

#define KUBE_SCOPE_CLUSTER (-1)

typedef struct KubeRule {
        const Target *target;
        const Profile *profile;
        int target_scope; /* KUBE_SCOPE_CLUSTER or an index into the scopes */
        int profile_scope; /* where the profile is defined: a ProfileConfig's profile writes below
                            * the namespace's report directory */
        int disabled_by; /* a cluster target switched off by this scope, or KUBE_SCOPE_CLUSTER */
} KubeRule;

typedef struct KubeRuleError {
        char *message; /* the whole story, naming both objects */
        int scope; /* the ProfileConfig whose target (or defaultProfileRef) is left out */
        const char *target; /* its name, NULL for a defaultProfileRef */
        char *conflict_with; /* "ProfileConfig NS/NAME" or "the cluster config"; NULL: no conflict */
} KubeRuleError;

typedef struct KubeRules {
        KubeRule *rules; /* cluster targets in order (disabled ones too, for "check"), then the
                          * scopes' enabled targets in scope order */
        size_t n_rules;
        bool enable_default;
        KubeRule default_rule; /* enableDefault: the namespace's defaultProfileRef */
        KubeRuleError *errors; /* targets left out (two enabled with one name...), naming both objects */
        size_t n_errors;
} KubeRules;

/* Merges. scopes must be in a stable order (oldest object first): of two
 * enabled targets with one name, the first is kept and the second left out
 * with an error. A scope's enabled target named like an enabled cluster
 * target is left out too (a scope replaces a cluster target by disabling it
 * and adding its own under another name, or the same name once disabled). A
 * target whose profile cannot be resolved is left out with an error.
 * Pointers in the result point into 'cluster' and the scopes' configs. */
int kube_rules_build(const Config *cluster, const char *namespace, const KubeScope *scopes, size_t n_scopes,
                     KubeRules *ret);
void kube_rules_done(KubeRules *r);

/* The first rule (the merged order: cluster targets, then the scopes'
 * targets, then enableDefault) that selects the container: KUBE_MATCH_YES
 * with *ret_rule (pointing into r); UNDECIDED when an earlier rule cannot be
 * decided yet (so nothing later may be picked either). Rules whose profile
 * cannot be resolved, or switched off by a scope, are skipped. The cluster
 * config alone is the merge with no scope. */
KubeMatch kube_rules_find(const KubeRules *r, const KubeNamespace *ns, const KubePod *pod,
                          const char *container, const char *cgroup, const KubeRule **ret_rule);
/* Why a rule does not select the container (or NULL when it does, or it
 * cannot say yet). */
const char *kube_rule_reason(const KubeRule *rule, const KubeScope *scopes, const KubeNamespace *ns,
                             const KubePod *pod, const char *container, const char *cgroup);
