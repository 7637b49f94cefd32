/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the Kubernetes client (kubeconfig, requests, watches), this node's pods, the namespaces, the
 * ProfileConfig objects and the rule sets merged from them.
 * May call: the base room (base.h), common/ (kube, config); and for now the Manager, the sessions and the
 * machine rooms (the KNOWN entries of scripts/check-rooms).
 * Called by: the Manager (starts the watches, reconciles cgroups), the machine, control and http rooms. */
#pragma once

#include "kube-client.h"
#include "manager-kube.h"
#include "manager-profileconfig.h"
