/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* manager-kube.c: the node's pods and namespaces from the Kubernetes API,
 * joined with the container cgroups. */
int manager_kube_start(Manager *m);
void manager_kube_free(Manager *m);
bool manager_kube_reconcile_container(Manager *m, CgroupState *c);
/* Reconciles every known container cgroup of the pods of a namespace (NULL: of every pod). */
void manager_kube_reconcile_namespace(Manager *m, const char *namespace);
const KubePod *manager_kube_pod(Manager *m, const char *uid);
/* A pod of this node by namespace and name (NULL when not known). */
const KubePod *manager_kube_pod_by_name(Manager *m, const char *namespace, const char *name);
const KubeNamespace *manager_kube_namespace(Manager *m, const char *name);
/* Calls fn for every pod of this node (of 'namespace' only, unless NULL), stops at its first error. */
int manager_kube_foreach_pod(Manager *m, const char *namespace, int (*fn)(const KubePod *p, void *userdata),
                             void *userdata);

int manager_kube_status(Manager *m, cJSON *j);
