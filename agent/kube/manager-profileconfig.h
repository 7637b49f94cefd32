/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager-kube.h"

/* manager-profileconfig.c: ProfileConfig objects, the rules of each
 * namespace. */
/* The cluster config changed: rebuilds every rule set (ProfileConfigs are
 * parsed again, as they may name its profiles). */
int kube_room_rules_reload(KubeRoom *r);
/* The rules for pods of a namespace (never NULL once a config is loaded). */
KubeRuleSet *kube_room_rule_set(KubeRoom *r, const char *namespace);
/* The rule sets of the namespaces that have ProfileConfigs, in namespace
 * order (a malloc()ed array of borrowed sets). */
int kube_room_rule_sets(KubeRoom *r, KubeRuleSet ***ret, size_t *ret_n);
/* Whether pod rules can be decided: the ProfileConfigs are listed (or
 * cannot be: no CRD, no permission). */
bool kube_room_rules_ready(KubeRoom *r);
/* The rule that selects a pod's container: KUBE_MATCH_YES fills *ret. */
KubeMatch kube_room_match(KubeRoom *r, const KubeNamespace *ns, const KubePod *pod, const char *container,
                          const char *cgroup, SessionRule *ret);
/* Display name of a rule's target: "NAME", or "NAME (ProfileConfig PC)". malloc()ed. */
char *kube_rule_display_name(const KubeRuleSet *set, const KubeRule *rule);
