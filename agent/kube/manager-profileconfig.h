/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* manager-profileconfig.c: ProfileConfig objects, the rules of each
 * namespace. */
/* The cluster config changed: rebuilds every rule set (ProfileConfigs are
 * parsed again, as they may name its profiles). */
int manager_kube_rules_reload(Manager *m);
/* The rules for pods of a namespace (never NULL once a config is loaded). */
KubeRuleSet *manager_kube_rule_set(Manager *m, const char *namespace);
/* Whether pod rules can be decided: the ProfileConfigs are listed (or
 * cannot be: no CRD, no permission). */
bool manager_kube_rules_ready(Manager *m);
/* The rule that selects a pod's container: KUBE_MATCH_YES fills *ret. */
KubeMatch manager_kube_match(Manager *m, const KubeNamespace *ns, const KubePod *pod, const char *container,
                             const char *cgroup, SessionRule *ret);
int manager_kube_pc_start(Manager *m, KubeClient *client, const KubeWatchOptions *opts);
void manager_kube_pc_free(Manager *m);
int manager_kube_pc_status(Manager *m, cJSON *kube);
/* Display name of a rule's target: "NAME", or "NAME (ProfileConfig PC)". malloc()ed. */
char *kube_rule_display_name(const KubeRuleSet *set, const KubeRule *rule);
