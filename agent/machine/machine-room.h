/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "kube.h"
#include "machine-select.h"
#include "manager-machine.h"

/* The machine room's state (MachineRoom, opaque above the room): shared by
 * its two files, manager-machine.c (machineConfig) and manager-node.c (the
 * Node watch). Nothing outside agent/machine/ includes this header. */

/* The last change of a sysctl (for check). */
typedef struct MachineLast {
        char *name;
        MachineChange change;
} MachineLast;

struct MachineRoom {
        MachineRoomDeps deps; /* its strings are the room's copies */
        KubeWatch *node_watch;
        char **node_labels; /* the Node's last known labels (strv key, value, ...) */
        bool node_read; /* the Node has been read once */
        bool node_deleted; /* the Node was deleted (or does not exist): its last known labels stay */
        bool host; /* no Kubernetes: the config's nodeLabels are the labels */
        bool node_forbidden_logged; /* a 403 on the Node was logged (once) */
        MachineWants wants; /* the entries that apply now */
        MachineLast *last; /* per sysctl: its last change (check) */
        size_t n_last;
        sd_event_source *timer; /* the drift check */
};

/* The config now (deps.config()). */
static inline const Config *machine_room_config(MachineRoom *r) {
        return r->deps.config(r->deps.userdata);
}

/* How many machineConfig entries have a nodeSelector. */
size_t machine_room_n_scoped(MachineRoom *r);
/* The Node's labels (strv key, value, ...; taken). Applies when they
 * differ from the last known ones, or are the first. */
void machine_room_node_labels(MachineRoom *r, char **labels);
/* The Node was deleted (or vanished): its last known labels stay. */
void machine_room_node_deleted(MachineRoom *r);
