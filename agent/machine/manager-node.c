/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's own Node: its labels select machineConfig entries. */
#include "kube-object.h"
#include "log.h"
#include "manager-machine.h"
#include "manager-node.h"

static bool on_node_event(KubeEventType type, const cJSON *object, void *userdata) {
        Manager *m = userdata;
        _cleanup_(kube_namespace_freep) KubeNamespace *node = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        /* A Node's metadata parses as a namespace's does: name, UID, labels. */
        r = kube_namespace_from_json(object, &node, &error);
        if (r < 0) {
                log_warning("Skipping a Node the API sent that cannot be parsed: %s", strna(error));
                return false;
        }
        if (!streq(node->name, m->node_name))
                return false; /* the field selector lets no other through */

        if (type == KUBE_EVENT_DELETED) {
                manager_machine_node_deleted(m);
                return false;
        }
        manager_machine_node_labels(m, TAKE_PTR(node->labels));
        return true;
}

/* Deleted while the watch was down. */
static void on_node_vanished(const char *name, void *userdata) {
        manager_machine_node_deleted(userdata);
}

static void on_node_synced(void *userdata) {
        Manager *m = userdata;

        /* Listed, and there is no such Node (yet). */
        if (!m->node_read)
                manager_machine_node_deleted(m);
}

static bool on_node_list_failed(long http_status, const char *message, void *userdata) {
        Manager *m = userdata;

        if (http_status != 403)
                return false;
        if (!m->node_read && !m->node_forbidden_logged)
                log_warning("Not allowed to read Node %s (RBAC: get, list, watch on nodes): only the "
                            "machineConfig entries without nodeSelector apply; trying again.",
                            m->node_name);
        m->node_forbidden_logged = true;
        return true;
}

int manager_node_start(Manager *m, KubeClient *client, const KubeWatchOptions *opts) {
        static const KubeWatchCallbacks cb = {
                .event = on_node_event,
                .vanished = on_node_vanished,
                .key = KUBE_WATCH_KEY_NAME,
                .synced = on_node_synced,
                .list_failed = on_node_list_failed,
        };
        _cleanup_free_ char *selector = NULL;
        int r;

        if (manager_machine_n_scoped(m) > 0)
                log_notice("Node %s not read yet: only the machineConfig entries without nodeSelector apply "
                           "until it is; %zu with nodeSelector wait.",
                           m->node_name, manager_machine_n_scoped(m));
        if (m->config->config->node_labels)
                log_notice("nodeLabels in the config are not used: machineConfig goes by the labels of Node "
                           "%s.",
                           m->node_name);
        if (asprintf(&selector, "metadata.name=%s", m->node_name) < 0)
                return -ENOMEM;
        r = kube_watch_new(client, "/api/v1/nodes", selector, opts, &cb, m, &m->kube_node_watch);
        if (r < 0)
                return r;
        return kube_watch_start(m->kube_node_watch);
}

void manager_node_free(Manager *m) {
        m->kube_node_watch = kube_watch_free(m->kube_node_watch);
}

int manager_node_status(Manager *m, cJSON *k) {
        return kube_watch_stats_json(m->kube_node_watch, k, "nodeWatch");
}
