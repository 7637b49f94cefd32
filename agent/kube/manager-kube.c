/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Kubernetes side of the manager: the pod and namespace list+watches,
 * and the join of pods with container cgroups. A container is profiled as
 * soon as both sides are known: its cgroup (inotify) and its pod (the API);
 * when the pod is known as a target before its status names the container,
 * sampling starts from the cgroup alone (a provisional session, confirmed or
 * discarded when the status arrives). */
#include "kube-target.h"
#include "log.h"
#include "manager.h"
#include "manager-kube.h"
#include "machine.h"
#include "manager-profileconfig.h"
#include "sessions.h"

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

static PodState *pod_find(Manager *m, const char *uid) {
        return pod_state_map_get(&m->kube_pods, uid);
}

static NsState *ns_find(Manager *m, const char *name) {
        return ns_state_map_get(&m->kube_namespaces, name);
}

const KubePod *manager_kube_pod(Manager *m, const char *uid) {
        PodState *p = pod_find(m, uid);
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

const KubePod *manager_kube_pod_by_name(Manager *m, const char *namespace, const char *name) {
        const KubePod *found = NULL;
        PodState *p;

        HASHMAP_FOREACH (p, pod_state_map, &m->kube_pods)
                if (streq(p->pod->namespace, namespace) && streq(p->pod->name, name) &&
                    pod_preferred(p->pod, found))
                        found = p->pod;
        return found;
}

const KubeNamespace *manager_kube_namespace(Manager *m, const char *name) {
        NsState *n = ns_find(m, name);
        return n ? n->ns : NULL;
}

/* Whether every regular container of the pod has an ID: a cgroup of the
 * pod whose ID is none of them is the sandbox (pause) container. */
static bool pod_all_ids_known(const KubePod *p) {
        bool any = false;
        for (size_t i = 0; i < p->n_containers; i++) {
                if (p->containers[i].kind != KUBE_CONTAINER_REGULAR)
                        continue;
                if (!p->containers[i].id)
                        return false;
                any = true;
        }
        return any;
}

static void start_container_session(Manager *m, CgroupState *c, const SessionRule *rule, const KubePod *pod,
                                    const char *container) {
        _cleanup_free_ char *what = NULL;
        Session *s = NULL;
        SessionKube kube = {
                .namespace = pod->namespace,
                .pod = pod->name,
                .pod_uid = pod->uid,
                .container = container,
                .container_id = c->container_id,
        };
        int r;

        r = session_new_rule(m, m->config, rule, c->path, &kube, &s);
        if (r < 0) {
                manager_count_session_failed(m, "create");
                log_warning_errno(r,
                                  "Failed to create a session for container %s of pod %s/%s, ignoring: %m",
                                  strna(container), pod->namespace, pod->name);
                return manager_session_failed(m, c->path, r);
        }
        if (asprintf(&what, "container %s of pod %s/%s", strna(container), pod->namespace, pod->name) < 0)
                what = NULL;
        (void) manager_launch_session(m, s, false, what ?: c->path);
}

/* Decides what a container cgroup needs now: a session started, confirmed,
 * ended or discarded, or nothing yet. Returns false when no pod rule
 * applies (the cgroup is left to host rules). */
bool manager_kube_reconcile_container(Manager *m, CgroupState *c) {
        PodState *ps = pod_find(m, c->pod_uid);
        Session *s = c->session;
        const KubeContainer *kc;
        const KubeNamespace *ns;
        SessionRule rule = {};
        KubeMatch match;

        if (!ps) {
                /* Unknown pod: not listed yet, or gone. (s is freed by session_end().) */
                bool pod_session = s && s->pod;
                if (pod_session && m->kube_pods_synced)
                        session_end(s, "pod-deleted");
                return pod_session;
        }

        kc = kube_pod_find_container_id(ps->pod, c->container_id);
        if (kc && kc->terminated) {
                if (s && s->pod)
                        session_end(s, "container-exited");
                return true;
        }
        if (!kc && pod_all_ids_known(ps->pod)) {
                /* The pod's sandbox: not a container anyone profiles. */
                if (s && s->provisional)
                        session_discard(s);
                return true;
        }

        NsState *nss = ns_find(m, ps->pod->namespace);
        ns = nss ? nss->ns : NULL;
        /* Undecided until the ProfileConfigs are listed, which may switch targets off. */
        match = manager_kube_match(m, ns, ps->pod, kc ? kc->name : NULL, c->path, &rule);

        switch (match) {
        case KUBE_MATCH_YES:
                if (!s && !c->done)
                        start_container_session(m, c, &rule, ps->pod, kc ? kc->name : NULL);
                else if (s && s->provisional && kc)
                        (void) session_confirm(s, kc->name);
                return true;
        case KUBE_MATCH_NO:
                if (s && s->pod) {
                        if (s->provisional)
                                session_discard(s);
                        else
                                session_end(s, "untargeted");
                        return true;
                }
                return false;
        default: /* undecided: wait for the status or the namespace */
                return true;
        }
}

/* Whether the cgroups of a pod (by UID) are those of a pod in namespace (NULL: any pod, known or not). */
static bool pod_in_namespace(Manager *m, const char *uid, const char *namespace) {
        PodState *p;

        if (!namespace)
                return true;
        p = pod_find(m, uid);
        return p && streq(p->pod->namespace, namespace);
}

/* Reconciles every known container cgroup of a pod (pod_uid), or of every
 * pod in a namespace, or all of them (both NULL), in path order. A pod's
 * event touches its own cgroups only (m->pod_cgroups). */
static void reconcile_matching(Manager *m, const char *pod_uid, const char *namespace) {
        _cleanup_free_ CgroupState **list = NULL;
        PodCgroups *p;
        size_t n = 0;

        if (pod_uid) {
                p = pod_cgroups_map_get(&m->pod_cgroups, pod_uid);
                if (!p || p->n_cgroups == 0 || !pod_in_namespace(m, pod_uid, namespace))
                        return;
                /* Walked over a copy: reconciling must not change the list under the walk. */
                list = reallocarray(NULL, p->n_cgroups, sizeof(CgroupState *));
                if (!list)
                        return (void) log_oom();
                memcpy(list, p->cgroups, p->n_cgroups * sizeof(CgroupState *));
                n = p->n_cgroups;
        } else {
                size_t max = 0;
                HASHMAP_FOREACH (p, pod_cgroups_map, &m->pod_cgroups)
                        if (pod_in_namespace(m, p->pod_uid, namespace))
                                max += p->n_cgroups;
                if (max == 0)
                        return;
                list = reallocarray(NULL, max, sizeof(CgroupState *));
                if (!list)
                        return (void) log_oom();
                HASHMAP_FOREACH (p, pod_cgroups_map, &m->pod_cgroups)
                        if (pod_in_namespace(m, p->pod_uid, namespace)) {
                                memcpy(list + n, p->cgroups, p->n_cgroups * sizeof(CgroupState *));
                                n += p->n_cgroups;
                        }
                cgroup_states_sort(list, n);
        }
        for (size_t i = 0; i < n; i++)
                manager_reconcile_cgroup(m, list[i]);
}

void manager_kube_reconcile_namespace(Manager *m, const char *namespace) {
        reconcile_matching(m, NULL, namespace);
}

/* ---- pods ---- */

static void pod_gone(Manager *m, PodState *p) {
        _cleanup_free_ char *uid = strdup(p->uid);

        (void) pod_state_map_remove_value(&m->kube_pods, p->uid, p);
        pod_state_free(p);
        if (uid)
                reconcile_matching(m, uid, NULL);
}

static bool on_pod_event(KubeEventType type, const cJSON *object, void *userdata) {
        Manager *m = userdata;
        _cleanup_(kube_pod_freep) KubePod *pod = NULL;
        _cleanup_free_ char *error = NULL;
        PodState *p;
        int r;

        r = kube_pod_from_json(object, &pod, &error);
        if (r < 0) {
                log_warning("Skipping a pod the API sent that cannot be parsed: %s", strna(error));
                return false;
        }
        p = pod_find(m, pod->uid);

        if (type == KUBE_EVENT_DELETED) {
                if (p)
                        pod_gone(m, p);
                return false;
        }

        if (!p) {
                p = calloc(1, sizeof(*p));
                if (!p || !(p->uid = strdup(pod->uid)) || pod_state_map_put(&m->kube_pods, p->uid, p) < 0) {
                        if (p)
                                free(p->uid);
                        free(p);
                        log_oom();
                        return false;
                }
        }
        kube_pod_free(p->pod);
        p->pod = TAKE_PTR(pod);
        reconcile_matching(m, p->uid, NULL);
        return true;
}

/* Deleted while the watch was down: the relist did not report it. */
static void on_pod_vanished(const char *uid, void *userdata) {
        Manager *m = userdata;
        PodState *p = pod_find(m, uid);

        if (p)
                pod_gone(m, p);
}

static void on_pods_synced(void *userdata) {
        Manager *m = userdata;

        if (!m->kube_pods_synced)
                log_info("Listed the pods of node %s: watching them.", m->node_name);
        m->kube_pods_synced = true;
        /* Container cgroups seen before their pods were listed. */
        reconcile_matching(m, NULL, NULL);
}

/* ---- namespaces ---- */

static void ns_gone(Manager *m, NsState *n) {
        (void) ns_state_map_remove_value(&m->kube_namespaces, n->name, n);
        ns_state_free(n);
}

static bool on_ns_event(KubeEventType type, const cJSON *object, void *userdata) {
        Manager *m = userdata;
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
        n = ns_find(m, ns->name);

        if (type == KUBE_EVENT_DELETED) {
                if (n)
                        ns_gone(m, n);
        } else {
                if (!n) {
                        n = calloc(1, sizeof(*n));
                        if (!n || !(n->name = strdup(ns->name)) ||
                            ns_state_map_put(&m->kube_namespaces, n->name, n) < 0) {
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
        reconcile_matching(m, NULL, name);
        return kept;
}

/* Deleted while the watch was down (its pods follow when the namespace watch is synced). */
static void on_ns_vanished(const char *name, void *userdata) {
        Manager *m = userdata;
        NsState *n = ns_find(m, name);

        if (n)
                ns_gone(m, n);
}

static void on_ns_synced(void *userdata) {
        Manager *m = userdata;

        m->kube_ns_synced = true;
        reconcile_matching(m, NULL, NULL);
}

/* ---- setup ---- */

int manager_kube_foreach_pod(Manager *m, const char *namespace, int (*fn)(const KubePod *p, void *userdata),
                             void *userdata) {
        PodState *p;
        int r;

        HASHMAP_FOREACH (p, pod_state_map, &m->kube_pods) {
                if (namespace && !streq(p->pod->namespace, namespace))
                        continue;
                r = fn(p->pod, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

int manager_kube_start(Manager *m) {
        _cleanup_(kube_config_freep) KubeConfig *config = NULL;
        _cleanup_free_ char *error = NULL, *selector = NULL;
        KubeWatchOptions opts = {
                .idle_sec = m->opts.kube_idle_sec,
                .backoff_max_msec = m->opts.kube_backoff_max_msec,
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

        if (m->opts.no_kubernetes) {
                machine_room_host_mode(m->machine);
                return 0;
        }

        if (m->opts.kubeconfig) {
                r = kube_config_from_kubeconfig(m->opts.kubeconfig, NULL, &config, &error);
                if (r < 0)
                        return log_error_errno(r, "%s", error ?: "Failed to read the kubeconfig");
        } else {
                r = kube_config_in_cluster(NULL, &config);
                if (r == -ENXIO) {
                        log_notice("Not in a Kubernetes cluster (no KUBERNETES_SERVICE_HOST) and no "
                                   "--kubeconfig: "
                                   "profiling host cgroups only.");
                        machine_room_host_mode(m->machine);
                        return 0;
                }
                if (r < 0)
                        return log_error_errno(r, "Failed to read the in-cluster configuration: %m");
        }

        char *server = strdup(config->server);
        if (!server)
                return log_oom();
        free(m->kube_server);
        m->kube_server = server;

        r = kube_client_new(m->event, config, &m->kube);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the Kubernetes API client: %m");
        TAKE_PTR(config); /* the client owns it now */

        if (asprintf(&selector, "spec.nodeName=%s", m->node_name) < 0)
                return log_oom();
        r = kube_watch_new(m->kube, "/api/v1/namespaces", NULL, &opts, &ns_cb, m, &m->kube_ns_watch);
        if (r >= 0)
                r = kube_watch_new(m->kube, "/api/v1/pods", selector, &opts, &pod_cb, m, &m->kube_pod_watch);
        if (r >= 0)
                r = manager_kube_pc_start(m, m->kube, &opts);
        if (r >= 0)
                r = machine_room_node_start(m->machine, m->kube, &opts);
        if (r >= 0)
                r = kube_watch_start(m->kube_ns_watch);
        if (r >= 0)
                r = kube_watch_start(m->kube_pod_watch);
        if (r < 0)
                return log_error_errno(r, "Failed to start watching the Kubernetes API: %m");
        log_info("Watching node %s and its pods, namespaces and ProfileConfigs at %s.", m->node_name,
                 m->kube_server);
        return 0;
}

void manager_kube_free(Manager *m) {
        manager_kube_pc_free(m);
        machine_room_node_stop(m->machine);
        m->kube_pod_watch = kube_watch_free(m->kube_pod_watch);
        m->kube_ns_watch = kube_watch_free(m->kube_ns_watch);
        m->kube = kube_client_free(m->kube);
        pod_state_map_clear(&m->kube_pods, pod_state_free);
        ns_state_map_clear(&m->kube_namespaces, ns_state_free);
        free(m->kube_server);
        m->kube_server = NULL;
}

int manager_kube_status(Manager *m, cJSON *j) {
        int r;
        cJSON *k = cJSON_AddObjectToObject(j, "kubernetes");
        if (!k)
                return -ENOMEM;
        cJSON_AddBoolToObject(k, "enabled", m->kube != NULL);
        if (!m->kube)
                return 0;
        cJSON_AddStringToObject(k, "server", m->kube_server);
        cJSON_AddNumberToObject(k, "pods", (double) pod_state_map_size(&m->kube_pods));
        cJSON_AddNumberToObject(k, "namespaces", (double) ns_state_map_size(&m->kube_namespaces));
        struct {
                const char *name;
                KubeWatch *w;
        } watches[] = { { "podWatch", m->kube_pod_watch }, { "namespaceWatch", m->kube_ns_watch } };
        for (size_t i = 0; i < ELEMENTSOF(watches); i++) {
                r = kube_watch_stats_json(watches[i].w, k, watches[i].name);
                if (r < 0)
                        return r;
        }
        r = machine_room_node_status(m->machine, k);
        if (r < 0)
                return r;
        return manager_kube_pc_status(m, k);
}
