/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "config-ref.h"
#include "kube-client.h"
#include "kube-object.h"
#include "kube-target.h"
#include "macro.h"

/* manager-kube.c: the node's pods and namespaces from the Kubernetes API.
 * The room keeps them (KubeRoom, opaque above it: kube-room.h) and
 * announces their changes (KubeRoomDeps.pods_changed()); it does not
 * decide what their containers' cgroups need: the Manager does
 * (agent/manager-pods.c). */

typedef struct KubeRoom KubeRoom;

/* What the room needs from the rooms above it, which it does not call: the
 * Manager fills it in (manager-rooms.c). */
typedef struct KubeRoomDeps {
        sd_event *event;
        const char *node_name;
        const char *kubeconfig; /* NULL: the in-cluster configuration */
        bool no_kubernetes; /* --no-kubernetes */
        unsigned idle_sec; /* silent watch timeout (0: default) */
        unsigned backoff_max_msec; /* reconnect backoff cap (0: default) */
        /* The cluster config now (NULL before the first load). */
        ConfigRef *(*config)(void *userdata);
        /* The client is up, its watches about to start: another room may
         * watch through it (the Node). An error fails kube_room_start(). */
        int (*client_started)(void *userdata, KubeClient *client, const KubeWatchOptions *opts);
        /* Adds what other rooms watch through the client to the
         * "kubernetes" object of GetStatus (after the pods' and the
         * namespaces' watches). */
        int (*status)(void *userdata, cJSON *k);
        /* Pods changed: the pod pod_uid, or every pod of namespace, or
         * every pod (both NULL): their object, their namespace or the
         * rules that select them. Their containers' cgroups need deciding
         * again. */
        void (*pods_changed)(void *userdata, const char *pod_uid, const char *namespace);
        void *userdata;
} KubeRoomDeps;

/* The strings of deps are copied. */
int kube_room_new(const KubeRoomDeps *deps, KubeRoom **ret);
KubeRoom *kube_room_free(KubeRoom *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(KubeRoom *, kube_room_free);

/* Sets up the client and starts the watches; without Kubernetes
 * (--no-kubernetes, or neither in a cluster nor a kubeconfig) does nothing
 * and returns 0: kube_room_enabled() says which. */
int kube_room_start(KubeRoom *r);
/* Whether the agent talks to a Kubernetes API (the client is set up). */
bool kube_room_enabled(KubeRoom *r);
/* The client (NULL: no Kubernetes). */
KubeClient *kube_room_client(KubeRoom *r);
/* Whether the pods of this node have been listed. */
bool kube_room_pods_synced(KubeRoom *r);

const KubePod *kube_room_pod(KubeRoom *r, const char *uid);
/* A pod of this node by namespace and name (NULL when not known). */
const KubePod *kube_room_pod_by_name(KubeRoom *r, const char *namespace, const char *name);
const KubeNamespace *kube_room_namespace(KubeRoom *r, const char *name);
/* Calls fn for every pod of this node (of 'namespace' only, unless NULL), stops at its first error. */
int kube_room_foreach_pod(KubeRoom *r, const char *namespace, int (*fn)(const KubePod *p, void *userdata),
                          void *userdata);

typedef enum KubeRoomWatch {
        KUBE_ROOM_WATCH_PODS,
        KUBE_ROOM_WATCH_NAMESPACES,
        KUBE_ROOM_WATCH_PROFILE_CONFIGS,
        _KUBE_ROOM_WATCH_MAX,
} KubeRoomWatch;

/* One of the room's watches (/metrics), NULL when it is not set up. */
const KubeWatch *kube_room_watch(KubeRoom *r, KubeRoomWatch which);

/* The "kubernetes" object of GetStatus. */
int kube_room_status(KubeRoom *r, cJSON *j);
