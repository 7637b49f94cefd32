/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The join of pods with container cgroups: what the Manager does when the
 * kube room announces that pods changed (KubeRoomDeps.pods_changed()), and
 * when a container's cgroup appears. A container is profiled as soon as
 * both sides are known: its cgroup (inotify) and its pod (the API); when
 * the pod is known as a target before its status names the container,
 * sampling starts from the cgroup alone (a provisional session, confirmed
 * or discarded when the status arrives). */
#include "kube.h"
#include "log.h"
#include "manager-pods.h"
#include "sessions.h"

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
                .labels = pod->labels,
        };
        int r;

        r = session_new_rule(m->sessions_room, m->config, rule, c->path, &kube, &s);
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
bool manager_pod_reconcile_container(Manager *m, CgroupState *c) {
        const KubePod *pod = kube_room_pod(m->kube, c->pod_uid);
        Session *s = c->session;
        const KubeContainer *kc;
        const KubeNamespace *ns;
        SessionRule rule = {};
        KubeMatch match;

        if (!pod) {
                /* Unknown pod: not listed yet, or gone. (s is freed by session_end().) */
                bool pod_session = s && s->pod;
                if (pod_session && kube_room_pods_synced(m->kube))
                        session_end(s, "pod-deleted");
                return pod_session;
        }

        kc = kube_pod_find_container_id(pod, c->container_id);
        if (kc && kc->terminated) {
                if (s && s->pod)
                        session_end(s, "container-exited");
                return true;
        }
        if (!kc && pod_all_ids_known(pod)) {
                /* The pod's sandbox: not a container anyone profiles. */
                if (s && s->provisional)
                        session_discard(s);
                return true;
        }

        ns = kube_room_namespace(m->kube, pod->namespace);
        /* Undecided until the ProfileConfigs are listed, which may switch targets off. */
        match = kube_room_match(m->kube, ns, pod, kc ? kc->name : NULL, c->path, &rule);

        switch (match) {
        case KUBE_MATCH_YES:
                if (!s && !c->done)
                        start_container_session(m, c, &rule, pod, kc ? kc->name : NULL);
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
        const KubePod *p;

        if (!namespace)
                return true;
        p = kube_room_pod(m->kube, uid);
        return p && streq(p->namespace, namespace);
}

/* Reconciles every known container cgroup of a pod (pod_uid), or of every
 * pod in a namespace, or all of them (both NULL), in path order. A pod's
 * event touches its own cgroups only (m->pod_cgroups). */
void manager_pods_changed(Manager *m, const char *pod_uid, const char *namespace) {
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
