/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kube-target.h"

const Target kube_default_target = {
        .name = (char *) "enableDefault",
};

static bool pod_name_matches(const Target *t, const KubePod *pod) {
        for (size_t i = 0; i < t->n_pod_name_patterns; i++) {
                const regex_t *re = &t->pod_name_patterns[i].regex;
                if (regexec(re, pod->name, 0, NULL, 0) == 0)
                        return true;
                if (pod->generate_name && regexec(re, pod->generate_name, 0, NULL, 0) == 0)
                        return true;
        }
        return false;
}

static bool owner_matches(const OwnerRef *o, const KubePod *pod) {
        for (size_t i = 0; i < pod->n_owners; i++)
                if ((!o->kind || streq_ptr(o->kind, pod->owners[i].kind)) &&
                    (!o->name || streq_ptr(o->name, pod->owners[i].name)))
                        return true;
        return false;
}

KubeMatch kube_target_matches(const Target *t, const KubeNamespace *ns, const KubePod *pod,
                              const char *container, const char *cgroup, const char **ret_reason) {
        const char *reason = NULL;
        bool undecided = false;

        if (t->disabled)
                reason = "the target is disabled";
        else if (t->pod_name_patterns && !pod_name_matches(t, pod))
                reason = "podNamePatterns do not match the pod's name or generateName";
        else if (t->pod_selector && !label_selector_matches(t->pod_selector, (Labels) pod->labels))
                reason = "podSelector does not match the pod's labels";
        else if (t->owner && !owner_matches(t->owner, pod))
                reason = "owner does not match the pod's ownerReferences";
        else if (t->cgroup_patterns && (!cgroup || !target_matches_cgroup(t, cgroup))) {
                if (cgroup)
                        reason = "cgroupPatterns do not match the container's cgroup";
                else
                        undecided = true;
        }
        if (!reason && t->namespace_selector) {
                if (!ns)
                        undecided = true;
                else if (!label_selector_matches(t->namespace_selector, (Labels) ns->labels))
                        reason = "namespaceSelector does not match the namespace's labels";
        }
        if (!reason && t->containers) {
                if (!container)
                        undecided = true;
                else {
                        bool found = false;
                        for (char **c = t->containers; *c; c++)
                                if (streq(*c, container))
                                        found = true;
                        if (!found)
                                reason = "containers does not list the container";
                }
        }

        if (reason) {
                if (ret_reason)
                        *ret_reason = reason;
                return KUBE_MATCH_NO;
        }
        return undecided ? KUBE_MATCH_UNDECIDED : KUBE_MATCH_YES;
}

KubeMatch kube_target_find(const Config *c, const KubeNamespace *ns, const KubePod *pod,
                           const char *container, const char *cgroup, const Target **ret_target) {
        for (size_t i = 0; i < c->n_targets; i++) {
                const Target *t = &c->targets[i];
                /* A rule for host cgroups only (cgroupPatterns alone) is not a pod rule. */
                if (!t->namespace_selector && !t->pod_selector && !t->pod_name_patterns && !t->owner &&
                    !t->containers)
                        continue;
                KubeMatch m = kube_target_matches(t, ns, pod, container, cgroup, NULL);
                if (m == KUBE_MATCH_NO)
                        continue;
                if (m == KUBE_MATCH_YES)
                        *ret_target = t;
                return m;
        }

        if (c->enable_default) {
                const char *pod_label = kube_labels_get(pod->labels, KUBE_PROFILE_LABEL);
                if (streq_ptr(pod_label, "disabled"))
                        return KUBE_MATCH_NO;
                if (streq_ptr(pod_label, "enabled")) {
                        *ret_target = &kube_default_target;
                        return KUBE_MATCH_YES;
                }
                if (!ns)
                        return KUBE_MATCH_UNDECIDED;
                if (streq_ptr(kube_labels_get(ns->labels, KUBE_PROFILE_LABEL), "enabled")) {
                        *ret_target = &kube_default_target;
                        return KUBE_MATCH_YES;
                }
        }
        return KUBE_MATCH_NO;
}
