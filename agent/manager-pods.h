/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* manager-pods.c: the join of the kube room's pods with the container
 * cgroups. */

/* Decides what a container cgroup needs now: a session started, confirmed,
 * ended or discarded, or nothing yet. Returns false when no pod rule
 * applies (the cgroup is left to host rules). */
bool manager_pod_reconcile_container(Manager *m, CgroupState *c);
/* Pods changed (KubeRoomDeps.pods_changed()): reconciles every known
 * container cgroup of a pod (pod_uid), or of every pod in a namespace, or
 * all of them (both NULL), in path order. A pod's event touches its own
 * cgroups only (m->pod_cgroups). */
void manager_pods_changed(Manager *m, const char *pod_uid, const char *namespace);
