/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Kubernetes side of the agent: the client, and the pod and namespace
 * list+watches of this node. Each change is announced to the Manager
 * (KubeRoomDeps.pods_changed()), which joins pods with container cgroups
 * (agent/manager-pods.c). */
#include "kube-room.h"
#include "kube-target.h"
#include "log.h"
#include "manager-kube.h"
#include "manager-profileconfig.h"

/* The objects the pod and namespace watches keep (the watches remember
 * which, and say when a relist did not report one again: vanished()). */
struct PodState {
        char *uid;
        KubePod *pod;
};

struct NsState {
        char *name;
        KubeNamespace *ns;
};

static void pod_state_free(PodState *s) {
        kube_pod_free(s->pod);
        free(s->uid);
        free(s);
}

static void ns_state_free(NsState *s) {
        kube_namespace_free(s->ns);
        free(s->name);
        free(s);
}

static PodState *pod_find(KubeRoom *room, const char *uid) {
        return pod_state_map_get(&room->pods, uid);
}

static NsState *ns_find(KubeRoom *room, const char *name) {
        return ns_state_map_get(&room->namespaces, name);
}

const KubePod *kube_room_pod(KubeRoom *room, const char *uid) {
        PodState *p = pod_find(room, uid);
        return p ? p->pod : NULL;
}

/* Of two pods with one name (one recreated), the one to go by: one not
 * being deleted; between two that are not, the lower UID; between two that
 * are, the higher. */
static bool pod_preferred(const KubePod *a, const KubePod *than) {
        if (!than)
                return true;
        if (a->deleting != than->deleting)
                return !a->deleting;
        return a->deleting ? strcmp(a->uid, than->uid) > 0 : strcmp(a->uid, than->uid) < 0;
}

const KubePod *kube_room_pod_by_name(KubeRoom *room, const char *namespace, const char *name) {
        const KubePod *found = NULL;
        PodState *p;

        HASHMAP_FOREACH (p, pod_state_map, &room->pods)
                if (streq(p->pod->namespace, namespace) && streq(p->pod->name, name) &&
                    pod_preferred(p->pod, found))
                        found = p->pod;
        return found;
}

const KubeNamespace *kube_room_namespace(KubeRoom *room, const char *name) {
        NsState *n = ns_find(room, name);
        return n ? n->ns : NULL;
}

/* ---- pods ---- */

static void pod_gone(KubeRoom *room, PodState *p) {
        _cleanup_free_ char *uid = strdup(p->uid);

        (void) pod_state_map_remove_value(&room->pods, p->uid, p);
        pod_state_free(p);
        if (uid)
                kube_room_pods_changed(room, uid, NULL);
}

static bool on_pod_event(KubeEventType type, const cJSON *object, void *userdata) {
        KubeRoom *room = userdata;
        _cleanup_(kube_pod_freep) KubePod *pod = NULL;
        _cleanup_free_ char *error = NULL;
        PodState *p;
        int r;

        r = kube_pod_from_json(object, &pod, &error);
        if (r < 0) {
                log_warning("Skipping a pod the API sent that cannot be parsed: %s", strna(error));
                return false;
        }
        p = pod_find(room, pod->uid);

        if (type == KUBE_EVENT_DELETED) {
                if (p)
                        pod_gone(room, p);
                return false;
        }

        if (!p) {
                p = calloc(1, sizeof(*p));
                if (!p || !(p->uid = strdup(pod->uid)) || pod_state_map_put(&room->pods, p->uid, p) < 0) {
                        if (p)
                                free(p->uid);
                        free(p);
                        log_oom();
                        return false;
                }
        }
        kube_pod_free(p->pod);
        p->pod = TAKE_PTR(pod);
        kube_room_pods_changed(room, p->uid, NULL);
        return true;
}

/* Deleted while the watch was down: the relist did not report it. */
static void on_pod_vanished(const char *uid, void *userdata) {
        KubeRoom *room = userdata;
        PodState *p = pod_find(room, uid);

        if (p)
                pod_gone(room, p);
}

static void on_pods_synced(void *userdata) {
        KubeRoom *room = userdata;

        if (!room->pods_synced)
                log_info("Listed the pods of node %s: watching them.", room->deps.node_name);
        room->pods_synced = true;
        /* Container cgroups seen before their pods were listed. */
        kube_room_pods_changed(room, NULL, NULL);
}

/* ---- namespaces ---- */

static void ns_gone(KubeRoom *room, NsState *n) {
        (void) ns_state_map_remove_value(&room->namespaces, n->name, n);
        ns_state_free(n);
}

static bool on_ns_event(KubeEventType type, const cJSON *object, void *userdata) {
        KubeRoom *room = userdata;
        _cleanup_(kube_namespace_freep) KubeNamespace *ns = NULL;
        _cleanup_free_ char *error = NULL, *name = NULL;
        NsState *n;
        bool kept = false;
        int r;

        r = kube_namespace_from_json(object, &ns, &error);
        if (r < 0) {
                log_warning("Skipping a namespace the API sent that cannot be parsed: %s", strna(error));
                return false;
        }
        name = strdup(ns->name);
        if (!name) {
                log_oom();
                return false;
        }
        n = ns_find(room, ns->name);

        if (type == KUBE_EVENT_DELETED) {
                if (n)
                        ns_gone(room, n);
        } else {
                if (!n) {
                        n = calloc(1, sizeof(*n));
                        if (!n || !(n->name = strdup(ns->name)) ||
                            ns_state_map_put(&room->namespaces, n->name, n) < 0) {
                                if (n)
                                        free(n->name);
                                free(n);
                                log_oom();
                                return false;
                        }
                }
                kube_namespace_free(n->ns);
                n->ns = TAKE_PTR(ns);
                kept = true;
        }
        /* Relabelling a namespace starts or ends its pods' sessions. */
        kube_room_pods_changed(room, NULL, name);
        return kept;
}

/* Deleted while the watch was down (its pods follow when the namespace watch is synced). */
static void on_ns_vanished(const char *name, void *userdata) {
        KubeRoom *room = userdata;
        NsState *n = ns_find(room, name);

        if (n)
                ns_gone(room, n);
}

static void on_ns_synced(void *userdata) {
        KubeRoom *room = userdata;

        room->ns_synced = true;
        kube_room_pods_changed(room, NULL, NULL);
}

/* ---- setup ---- */

int kube_room_foreach_pod(KubeRoom *room, const char *namespace, int (*fn)(const KubePod *p, void *userdata),
                          void *userdata) {
        PodState *p;
        int r;

        HASHMAP_FOREACH (p, pod_state_map, &room->pods) {
                if (namespace && !streq(p->pod->namespace, namespace))
                        continue;
                r = fn(p->pod, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

int kube_room_start(KubeRoom *room) {
        _cleanup_(kube_config_freep) KubeConfig *config = NULL;
        _cleanup_free_ char *error = NULL, *selector = NULL;
        KubeWatchOptions opts = {
                .idle_sec = room->deps.idle_sec,
                .backoff_max_msec = room->deps.backoff_max_msec,
        };
        static const KubeWatchCallbacks pod_cb = {
                .event = on_pod_event,
                .vanished = on_pod_vanished,
                .key = KUBE_WATCH_KEY_UID,
                .synced = on_pods_synced,
        };
        static const KubeWatchCallbacks ns_cb = {
                .event = on_ns_event,
                .vanished = on_ns_vanished,
                .key = KUBE_WATCH_KEY_NAME,
                .synced = on_ns_synced,
        };
        int r;

        if (room->deps.no_kubernetes)
                return 0;

        if (room->deps.kubeconfig) {
                r = kube_config_from_kubeconfig(room->deps.kubeconfig, NULL, &config, &error);
                if (r < 0)
                        return log_error_errno(r, "%s", error ?: "Failed to read the kubeconfig");
        } else {
                r = kube_config_in_cluster(NULL, &config);
                if (r == -ENXIO) {
                        log_notice("Not in a Kubernetes cluster (no KUBERNETES_SERVICE_HOST) and no "
                                   "--kubeconfig: "
                                   "profiling host cgroups only.");
                        return 0;
                }
                if (r < 0)
                        return log_error_errno(r, "Failed to read the in-cluster configuration: %m");
        }

        char *server = strdup(config->server);
        if (!server)
                return log_oom();
        free(room->server);
        room->server = server;

        r = kube_client_new(room->deps.event, config, &room->client);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the Kubernetes API client: %m");
        TAKE_PTR(config); /* the client owns it now */

        if (asprintf(&selector, "spec.nodeName=%s", room->deps.node_name) < 0)
                return log_oom();
        r = kube_watch_new(room->client, "/api/v1/namespaces", NULL, &opts, &ns_cb, room, &room->ns_watch);
        if (r >= 0)
                r = kube_watch_new(room->client, "/api/v1/pods", selector, &opts, &pod_cb, room,
                                   &room->pod_watch);
        if (r >= 0)
                r = kube_room_pc_start(room, &opts);
        if (r >= 0)
                r = room->deps.client_started
                            ? room->deps.client_started(room->deps.userdata, room->client, &opts)
                            : 0;
        if (r >= 0)
                r = kube_watch_start(room->ns_watch);
        if (r >= 0)
                r = kube_watch_start(room->pod_watch);
        if (r < 0)
                return log_error_errno(r, "Failed to start watching the Kubernetes API: %m");
        log_info("Watching node %s and its pods, namespaces and ProfileConfigs at %s.", room->deps.node_name,
                 room->server);
        return 0;
}

int kube_room_new(const KubeRoomDeps *deps, KubeRoom **ret) {
        _cleanup_(kube_room_freep) KubeRoom *room = NULL;

        if (!deps->event || !deps->node_name || !deps->config)
                return -EINVAL;
        room = calloc(1, sizeof(*room));
        if (!room)
                return -ENOMEM;
        room->deps = *deps;
        room->deps.node_name = room->deps.kubeconfig = NULL;
        room->deps.event = sd_event_ref(deps->event);
        if (!(room->deps.node_name = strdup(deps->node_name)) ||
            (deps->kubeconfig && !(room->deps.kubeconfig = strdup(deps->kubeconfig))))
                return -ENOMEM;
        *ret = TAKE_PTR(room);
        return 0;
}

KubeRoom *kube_room_free(KubeRoom *room) {
        if (!room)
                return NULL;
        kube_room_pc_free(room);
        room->pod_watch = kube_watch_free(room->pod_watch);
        room->ns_watch = kube_watch_free(room->ns_watch);
        room->client = kube_client_free(room->client);
        pod_state_map_clear(&room->pods, pod_state_free);
        ns_state_map_clear(&room->namespaces, ns_state_free);
        free(room->server);
        free((char *) room->deps.node_name);
        free((char *) room->deps.kubeconfig);
        sd_event_unref(room->deps.event);
        free(room);
        return NULL;
}

bool kube_room_enabled(KubeRoom *room) {
        return room && room->client;
}

KubeClient *kube_room_client(KubeRoom *room) {
        return room ? room->client : NULL;
}

bool kube_room_pods_synced(KubeRoom *room) {
        return room->pods_synced;
}

const KubeWatch *kube_room_watch(KubeRoom *room, KubeRoomWatch which) {
        switch (which) {
        case KUBE_ROOM_WATCH_PODS:
                return room->pod_watch;
        case KUBE_ROOM_WATCH_NAMESPACES:
                return room->ns_watch;
        case KUBE_ROOM_WATCH_PROFILE_CONFIGS:
                return room->pc_watch;
        default:
                return NULL;
        }
}

int kube_room_status(KubeRoom *room, cJSON *j) {
        int r;
        cJSON *k = cJSON_AddObjectToObject(j, "kubernetes");
        if (!k)
                return -ENOMEM;
        cJSON_AddBoolToObject(k, "enabled", room->client != NULL);
        if (!room->client)
                return 0;
        cJSON_AddStringToObject(k, "server", room->server);
        cJSON_AddNumberToObject(k, "pods", (double) pod_state_map_size(&room->pods));
        cJSON_AddNumberToObject(k, "namespaces", (double) ns_state_map_size(&room->namespaces));
        struct {
                const char *name;
                KubeWatch *w;
        } watches[] = { { "podWatch", room->pod_watch }, { "namespaceWatch", room->ns_watch } };
        for (size_t i = 0; i < ELEMENTSOF(watches); i++) {
                r = kube_watch_stats_json(watches[i].w, k, watches[i].name);
                if (r < 0)
                        return r;
        }
        r = room->deps.status ? room->deps.status(room->deps.userdata, k) : 0;
        if (r < 0)
                return r;
        return kube_room_pc_status(room, k);
}
