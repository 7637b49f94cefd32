/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the Kubernetes client (kubeconfig, requests, watches), this node's pods, the namespaces, the
 * ProfileConfig objects and the rule sets merged from them: a KubeRoom, opaque above (kube-room.h).
 * May call: the base room (base.h), common/ (kube, config); what it announces above (pods changed, the
 * client is up, status) through the KubeRoomDeps the Manager fills in (manager-rooms.c).
 * Called by: the Manager (start, config reloads, the pods' cgroups), the machine, control and http rooms. */
#pragma once

#include "kube-client.h"
#include "manager-kube.h"
#include "manager-profileconfig.h"
