/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>

#include "manager-machine.h"

typedef struct KubeClient KubeClient;
typedef struct KubeWatchOptions KubeWatchOptions;

/* manager-node.c: the agent's own Node object, list+watched
 * (fieldSelector=metadata.name=NODE) with the pod watch's reconnect and
 * 410 handling (kube-watch.c): its labels select machineConfig entries
 * (manager-machine.c). A deleted Node keeps its last known labels. */
int machine_room_node_start(MachineRoom *r, KubeClient *client, const KubeWatchOptions *opts);
/* The watch stopped (before the client it uses is freed). */
void machine_room_node_stop(MachineRoom *r);
/* Adds "nodeWatch" to the "kubernetes" object of GetStatus. */
int machine_room_node_status(MachineRoom *r, cJSON *k);
