/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "config.h"
#include "kube-target.h"
#include "macro.h"

/* The configs a running agent shares: what its sessions, its Kubernetes
 * rules and its Manager hold, each by reference, so that a session keeps
 * what it started under across reloads and ProfileConfig changes. */

/* A loaded config, shared by the manager and the sessions started under it:
 * a session keeps the profile it started with across reloads. */
typedef struct ConfigRef {
        unsigned n_ref;
        Config *config;
} ConfigRef;

int config_ref_new(Config *config /* owned on success */, ConfigRef **ret);
ConfigRef *config_ref(ConfigRef *c);
ConfigRef *config_unref(ConfigRef *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ConfigRef *, config_unref);

/* A namespace's rules: the cluster config merged with the namespace's
 * ProfileConfig objects (agent/kube/manager-profileconfig.c). Sessions hold
 * the set they were started under, so their target and profile stay valid
 * when the objects change. namespace NULL: the cluster config alone
 * (namespaces without ProfileConfigs). */
typedef struct KubeRuleSet {
        unsigned n_ref;
        char *namespace;
        ConfigRef *cluster;
        KubeRules rules;
        KubeScope *scopes; /* oldest object first */
        ConfigRef **scope_configs;
        char **scope_names;
        size_t n_scopes;
} KubeRuleSet;

KubeRuleSet *kube_rule_set_ref(KubeRuleSet *s);
KubeRuleSet *kube_rule_set_unref(KubeRuleSet *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(KubeRuleSet *, kube_rule_set_unref);

/* What a session is started under. */
typedef struct SessionRule {
        const Target *target;
        const Profile *profile; /* NULL: the target's, from the cluster config */
        KubeRuleSet *rule_set; /* held by the session when set */
        const char *profile_config; /* the ProfileConfig the target comes from (its name), or NULL */
        bool namespaced_output; /* a ProfileConfig's profile: reports stay below {NAMESPACE}/ */
} SessionRule;
