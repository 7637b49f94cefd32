/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "hashmap.h"
#include "manager-kube.h"
#include "manager-profileconfig.h"

/* The kube room's state (KubeRoom, opaque above the room): shared by its
 * files, manager-kube.c (the client, pods, namespaces) and
 * manager-profileconfig.c (ProfileConfigs and the rule sets). Nothing
 * outside agent/kube/ includes this header. */

typedef struct PodState PodState;
typedef struct NsState NsState;
typedef struct ProfileConfigState ProfileConfigState;
DEFINE_STRING_HASHMAP(PodStateMap, pod_state_map, PodState);
DEFINE_STRING_HASHMAP(NsStateMap, ns_state_map, NsState);
DEFINE_STRING_HASHMAP(ProfileConfigStateMap, profile_config_state_map, ProfileConfigState);
DEFINE_STRING_HASHMAP(KubeRuleSetMap, kube_rule_set_map, KubeRuleSet);

struct KubeRoom {
        KubeRoomDeps deps; /* its strings are the room's copies */
        KubeClient *client; /* NULL: no Kubernetes */
        char *server;
        KubeWatch *pod_watch, *ns_watch;
        PodStateMap pods; /* pods of this node by UID */
        NsStateMap namespaces; /* namespaces by name */
        bool pods_synced, ns_synced;
        /* ProfileConfig objects (manager-profileconfig.c) */
        KubeWatch *pc_watch;
        ProfileConfigStateMap pcs; /* by "namespace/name" */
        KubeRuleSetMap rule_sets; /* by namespace, for namespaces with ProfileConfigs */
        KubeRuleSet *cluster_rules; /* every other namespace */
        bool pcs_synced;
        long pcs_unavailable; /* HTTP status of the failed LIST (404: no CRD, 403: no RBAC), 0 */
};

/* The cluster config now (deps.config()), NULL before the first load. */
static inline ConfigRef *kube_room_config(KubeRoom *r) {
        return r->deps.config(r->deps.userdata);
}

/* Announces that pods changed (deps.pods_changed()): one pod, the pods of a namespace, or all (both NULL). */
static inline void kube_room_pods_changed(KubeRoom *r, const char *pod_uid, const char *namespace) {
        if (r->deps.pods_changed)
                r->deps.pods_changed(r->deps.userdata, pod_uid, namespace);
}

/* manager-profileconfig.c: the ProfileConfig watch. */
int kube_room_pc_start(KubeRoom *r, const KubeWatchOptions *opts);
void kube_room_pc_free(KubeRoom *r);
int kube_room_pc_status(KubeRoom *r, cJSON *kube);
