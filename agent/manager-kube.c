/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Kubernetes side of the manager: the pod and namespace list+watches,
 * and the join of pods with container cgroups. A container is profiled as
 * soon as both sides are known: its cgroup (inotify) and its pod (the API);
 * when the pod is known as a target before its status names the container,
 * sampling starts from the cgroup alone (a provisional session, confirmed or
 * discarded when the status arrives). */
#include <search.h>

#include "kube-target.h"
#include "log.h"
#include "manager.h"
#include "manager-kube.h"
#include "manager-profileconfig.h"
#include "session.h"

typedef struct PodState {
        char *uid;
        KubePod *pod;
        uint64_t seen; /* the list generation that last reported it */
} PodState;

typedef struct NsState {
        char *name;
        KubeNamespace *ns;
        uint64_t seen;
} NsState;

static int pod_state_cmp(const void *a, const void *b) {
        return strcmp(((const PodState *) a)->uid, ((const PodState *) b)->uid);
}

static int ns_state_cmp(const void *a, const void *b) {
        return strcmp(((const NsState *) a)->name, ((const NsState *) b)->name);
}

static void pod_state_free(void *p) {
        PodState *s = p;
        kube_pod_free(s->pod);
        free(s->uid);
        free(s);
}

static void ns_state_free(void *p) {
        NsState *s = p;
        kube_namespace_free(s->ns);
        free(s->name);
        free(s);
}

static PodState *pod_find(Manager *m, const char *uid) {
        PodState key = { .uid = (char *) uid }, **p = tfind(&key, &m->kube_pods, pod_state_cmp);
        return p ? *p : NULL;
}

static NsState *ns_find(Manager *m, const char *name) {
        NsState key = { .name = (char *) name }, **n = tfind(&key, &m->kube_namespaces, ns_state_cmp);
        return n ? *n : NULL;
}

const KubePod *manager_kube_pod(Manager *m, const char *uid) {
        PodState *p = pod_find(m, uid);
        return p ? p->pod : NULL;
}

typedef struct PodLookup {
        const char *namespace, *name;
        const KubePod *found;
} PodLookup;

static void pod_lookup_action(const void *nodep, VISIT which, void *userdata) {
        const PodState *p = *(const PodState *const *) nodep;
        PodLookup *l = userdata;

        if (which != postorder && which != leaf)
                return;
        /* A pod recreated under the same name: prefer the one not being deleted. */
        if (streq(p->pod->namespace, l->namespace) && streq(p->pod->name, l->name) &&
            (!l->found || l->found->deleting))
                l->found = p->pod;
}

const KubePod *manager_kube_pod_by_name(Manager *m, const char *namespace, const char *name) {
        PodLookup l = { .namespace = namespace, .name = name };

        twalk_r(m->kube_pods, pod_lookup_action, &l);
        return l.found;
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

        ns = ns_find(m, ps->pod->namespace) ? ns_find(m, ps->pod->namespace)->ns : NULL;
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

/* Every known container cgroup of a pod (uid), or of every pod in a namespace. */
typedef struct Match {
        Manager *m;
        const char *pod_uid;
        const char *namespace;
        CgroupState **list;
        size_t n;
} Match;

static Match *match_ctx;
static void match_action(const void *nodep, VISIT which, int depth) {
        CgroupState *c = *(CgroupState *const *) nodep;
        Match *x = match_ctx;

        if ((which != postorder && which != leaf) || !c->container)
                return;
        if (x->pod_uid && !streq(c->pod_uid, x->pod_uid))
                return;
        if (x->namespace) {
                PodState *p = pod_find(x->m, c->pod_uid);
                if (!p || !streq(p->pod->namespace, x->namespace))
                        return;
        }
        CgroupState **l = reallocarray(x->list, x->n + 1, sizeof(CgroupState *));
        if (!l)
                return;
        x->list = l;
        x->list[x->n++] = c;
}

static void reconcile_matching(Manager *m, const char *pod_uid, const char *namespace) {
        Match x = { .m = m, .pod_uid = pod_uid, .namespace = namespace };

        match_ctx = &x;
        twalk(m->cgroups, match_action);
        match_ctx = NULL;
        for (size_t i = 0; i < x.n; i++)
                manager_reconcile_cgroup(m, x.list[i]);
        free(x.list);
}

void manager_kube_reconcile_namespace(Manager *m, const char *namespace) {
        reconcile_matching(m, NULL, namespace);
}

/* ---- pods ---- */

static void pod_gone(Manager *m, PodState *p) {
        _cleanup_free_ char *uid = strdup(p->uid);

        tdelete(p, &m->kube_pods, pod_state_cmp);
        pod_state_free(p);
        if (uid)
                reconcile_matching(m, uid, NULL);
}

/* A (re)list begins: objects it does not report again are gone (see on_pods_synced). */
static void on_pods_sync_begin(void *userdata) {
        Manager *m = userdata;
        m->kube_sync_generation++;
}

static void on_pod_event(KubeEventType type, const cJSON *object, void *userdata) {
        Manager *m = userdata;
        _cleanup_(kube_pod_freep) KubePod *pod = NULL;
        _cleanup_free_ char *error = NULL;
        PodState *p;
        int r;

        r = kube_pod_from_json(object, &pod, &error);
        if (r < 0) {
                log_warning("Skipping a pod the API sent that cannot be parsed: %s", strna(error));
                return;
        }
        p = pod_find(m, pod->uid);

        if (type == KUBE_EVENT_DELETED) {
                if (p)
                        pod_gone(m, p);
                return;
        }

        if (!p) {
                p = calloc(1, sizeof(*p));
                if (!p || !(p->uid = strdup(pod->uid)) || !tsearch(p, &m->kube_pods, pod_state_cmp)) {
                        if (p)
                                free(p->uid);
                        free(p);
                        return (void) log_oom();
                }
        }
        kube_pod_free(p->pod);
        p->pod = TAKE_PTR(pod);
        p->seen = m->kube_sync_generation;
        reconcile_matching(m, p->uid, NULL);
}

static PodState **stale;
static size_t n_stale;
static uint64_t stale_generation;
static void stale_pod_action(const void *nodep, VISIT which, int depth) {
        PodState *p = *(PodState *const *) nodep;
        if ((which != postorder && which != leaf) || p->seen == stale_generation)
                return;
        PodState **l = reallocarray(stale, n_stale + 1, sizeof(PodState *));
        if (l) {
                stale = l;
                stale[n_stale++] = p;
        }
}

static void on_pods_synced(void *userdata) {
        Manager *m = userdata;

        /* Pods not listed are gone. */
        stale = NULL;
        n_stale = 0;
        stale_generation = m->kube_sync_generation;
        twalk(m->kube_pods, stale_pod_action);
        PodState **list = stale;
        size_t n = n_stale;
        stale = NULL;
        for (size_t i = 0; i < n; i++)
                pod_gone(m, list[i]);
        free(list);

        if (!m->kube_pods_synced)
                log_info("Listed the pods of node %s: watching them.", m->node_name);
        m->kube_pods_synced = true;
        /* Container cgroups seen before their pods were listed. */
        reconcile_matching(m, NULL, NULL);
}

/* ---- namespaces ---- */

static void on_ns_sync_begin(void *userdata) {
        Manager *m = userdata;
        m->kube_ns_generation++;
}

static void on_ns_event(KubeEventType type, const cJSON *object, void *userdata) {
        Manager *m = userdata;
        _cleanup_(kube_namespace_freep) KubeNamespace *ns = NULL;
        _cleanup_free_ char *error = NULL, *name = NULL;
        NsState *n;
        int r;

        r = kube_namespace_from_json(object, &ns, &error);
        if (r < 0) {
                log_warning("Skipping a namespace the API sent that cannot be parsed: %s", strna(error));
                return;
        }
        name = strdup(ns->name);
        if (!name)
                return (void) log_oom();
        n = ns_find(m, ns->name);

        if (type == KUBE_EVENT_DELETED) {
                if (n) {
                        tdelete(n, &m->kube_namespaces, ns_state_cmp);
                        ns_state_free(n);
                }
        } else {
                if (!n) {
                        n = calloc(1, sizeof(*n));
                        if (!n || !(n->name = strdup(ns->name)) ||
                            !tsearch(n, &m->kube_namespaces, ns_state_cmp)) {
                                if (n)
                                        free(n->name);
                                free(n);
                                return (void) log_oom();
                        }
                }
                kube_namespace_free(n->ns);
                n->ns = TAKE_PTR(ns);
                n->seen = m->kube_ns_generation;
        }
        /* Relabelling a namespace starts or ends its pods' sessions. */
        reconcile_matching(m, NULL, name);
}

static NsState **stale_ns;
static size_t n_stale_ns;
static void stale_ns_action(const void *nodep, VISIT which, int depth) {
        NsState *n = *(NsState *const *) nodep;
        if ((which != postorder && which != leaf) || n->seen == stale_generation)
                return;
        NsState **l = reallocarray(stale_ns, n_stale_ns + 1, sizeof(NsState *));
        if (l) {
                stale_ns = l;
                stale_ns[n_stale_ns++] = n;
        }
}

static void on_ns_synced(void *userdata) {
        Manager *m = userdata;

        stale_ns = NULL;
        n_stale_ns = 0;
        stale_generation = m->kube_ns_generation;
        twalk(m->kube_namespaces, stale_ns_action);
        NsState **list = stale_ns;
        size_t n = n_stale_ns;
        stale_ns = NULL;
        for (size_t i = 0; i < n; i++) {
                tdelete(list[i], &m->kube_namespaces, ns_state_cmp);
                ns_state_free(list[i]);
        }
        free(list);
        m->kube_ns_synced = true;
        reconcile_matching(m, NULL, NULL);
}

/* ---- setup ---- */

int manager_kube_start(Manager *m) {
        _cleanup_(kube_config_freep) KubeConfig *config = NULL;
        _cleanup_free_ char *error = NULL, *selector = NULL;
        KubeWatchOptions opts = {
                .idle_sec = m->opts.kube_idle_sec,
                .backoff_max_msec = m->opts.kube_backoff_max_msec,
        };
        static const KubeWatchCallbacks pod_cb = {
                .sync_begin = on_pods_sync_begin,
                .event = on_pod_event,
                .synced = on_pods_synced,
        };
        static const KubeWatchCallbacks ns_cb = {
                .sync_begin = on_ns_sync_begin,
                .event = on_ns_event,
                .synced = on_ns_synced,
        };
        int r;

        if (m->opts.no_kubernetes)
                return 0;

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
                r = kube_watch_start(m->kube_ns_watch);
        if (r >= 0)
                r = kube_watch_start(m->kube_pod_watch);
        if (r < 0)
                return log_error_errno(r, "Failed to start watching the Kubernetes API: %m");
        log_info("Watching pods of node %s, namespaces and ProfileConfigs at %s.", m->node_name,
                 m->kube_server);
        return 0;
}

void manager_kube_free(Manager *m) {
        manager_kube_pc_free(m);
        m->kube_pod_watch = kube_watch_free(m->kube_pod_watch);
        m->kube_ns_watch = kube_watch_free(m->kube_ns_watch);
        m->kube = kube_client_free(m->kube);
        tdestroy(m->kube_pods, pod_state_free);
        m->kube_pods = NULL;
        tdestroy(m->kube_namespaces, ns_state_free);
        m->kube_namespaces = NULL;
        free(m->kube_server);
        m->kube_server = NULL;
}

static size_t node_count;
static void count_action(const void *nodep, VISIT which, int depth) {
        if (which == postorder || which == leaf)
                node_count++;
}

static size_t count_nodes(void *root) {
        node_count = 0;
        twalk(root, count_action);
        return node_count;
}

int manager_kube_status(Manager *m, cJSON *j) {
        cJSON *k = cJSON_AddObjectToObject(j, "kubernetes");
        if (!k)
                return -ENOMEM;
        cJSON_AddBoolToObject(k, "enabled", m->kube != NULL);
        if (!m->kube)
                return 0;
        cJSON_AddStringToObject(k, "server", m->kube_server);
        cJSON_AddNumberToObject(k, "pods", (double) count_nodes(m->kube_pods));
        cJSON_AddNumberToObject(k, "namespaces", (double) count_nodes(m->kube_namespaces));
        struct {
                const char *name;
                KubeWatch *w;
        } watches[] = { { "podWatch", m->kube_pod_watch }, { "namespaceWatch", m->kube_ns_watch } };
        for (size_t i = 0; i < ELEMENTSOF(watches); i++) {
                KubeWatchStats st = {};
                cJSON *o = cJSON_AddObjectToObject(k, watches[i].name);
                if (!o)
                        return -ENOMEM;
                kube_watch_stats(watches[i].w, &st);
                cJSON_AddBoolToObject(o, "synced", st.synced);
                cJSON_AddStringToObject(o, "resourceVersion", strempty(st.resource_version));
                cJSON_AddNumberToObject(o, "relists", (double) st.relists);
                cJSON_AddNumberToObject(o, "reconnects", (double) st.reconnects);
                cJSON_AddNumberToObject(o, "events", (double) st.events);
                cJSON_AddNumberToObject(o, "skipped", (double) st.skipped);
                cJSON_AddNumberToObject(o, "lastError", (double) st.last_error);
        }
        return manager_kube_pc_status(m, k);
}
