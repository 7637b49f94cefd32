/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's own Node: its labels select machineConfig entries. */
#include "kube-object.h"
#include "kube.h"
#include "log.h"
#include "machine-room.h"
#include "manager-machine.h"
#include "manager-node.h"

static bool on_node_event(KubeEventType type, const cJSON *object, void *userdata) {
        MachineRoom *room = userdata;
        _cleanup_(kube_namespace_freep) KubeNamespace *node = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        /* A Node's metadata parses as a namespace's does: name, UID, labels. */
        r = kube_namespace_from_json(object, &node, &error);
        if (r < 0) {
                log_warning("Skipping a Node the API sent that cannot be parsed: %s", strna(error));
                return false;
        }
        if (!streq(node->name, room->deps.node_name))
                return false; /* the field selector lets no other through */

        if (type == KUBE_EVENT_DELETED) {
                machine_room_node_deleted(room);
                return false;
        }
        machine_room_node_labels(room, TAKE_PTR(node->labels));
        return true;
}

/* Deleted while the watch was down. */
static void on_node_vanished(const char *name, void *userdata) {
        machine_room_node_deleted(userdata);
}

static void on_node_synced(void *userdata) {
        MachineRoom *room = userdata;

        /* Listed, and there is no such Node (yet). */
        if (!room->node_read)
                machine_room_node_deleted(room);
}

static bool on_node_list_failed(long http_status, const char *message, void *userdata) {
        MachineRoom *room = userdata;

        if (http_status != 403)
                return false;
        if (!room->node_read && !room->node_forbidden_logged)
                log_warning("Not allowed to read Node %s (RBAC: get, list, watch on nodes): only the "
                            "machineConfig entries without nodeSelector apply; trying again.",
                            room->deps.node_name);
        room->node_forbidden_logged = true;
        return true;
}

int machine_room_node_start(MachineRoom *room, KubeClient *client, const KubeWatchOptions *opts) {
        static const KubeWatchCallbacks cb = {
                .event = on_node_event,
                .vanished = on_node_vanished,
                .key = KUBE_WATCH_KEY_NAME,
                .synced = on_node_synced,
                .list_failed = on_node_list_failed,
        };
        _cleanup_free_ char *selector = NULL;
        int r;

        if (machine_room_n_scoped(room) > 0)
                log_notice("Node %s not read yet: only the machineConfig entries without nodeSelector apply "
                           "until it is; %zu with nodeSelector wait.",
                           room->deps.node_name, machine_room_n_scoped(room));
        if (machine_room_config(room)->node_labels)
                log_notice("nodeLabels in the config are not used: machineConfig goes by the labels of Node "
                           "%s.",
                           room->deps.node_name);
        if (asprintf(&selector, "metadata.name=%s", room->deps.node_name) < 0)
                return -ENOMEM;
        r = kube_watch_new(client, "/api/v1/nodes", selector, opts, &cb, room, &room->node_watch);
        if (r < 0)
                return r;
        return kube_watch_start(room->node_watch);
}

void machine_room_node_stop(MachineRoom *room) {
        if (!room)
                return;
        room->node_watch = kube_watch_free(room->node_watch);
}

int machine_room_node_status(MachineRoom *room, cJSON *k) {
        return kube_watch_stats_json(room->node_watch, k, "nodeWatch");
}
