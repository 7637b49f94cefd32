/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>

#include "manager.h"

/* manager-node.c: the agent's own Node object, list+watched
 * (fieldSelector=metadata.name=NODE) with the pod watch's reconnect and
 * 410 handling (kube-watch.c): its labels select machineConfig entries
 * (manager-machine.c). A deleted Node keeps its last known labels. */
int manager_node_start(Manager *m, KubeClient *client, const KubeWatchOptions *opts);
void manager_node_free(Manager *m);
/* Adds "nodeWatch" to the "kubernetes" object of GetStatus. */
int manager_node_status(Manager *m, cJSON *k);
