/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "config.h"
#include "kube-object.h"

/* Which target rule selects a pod's container. Every condition present in a
 * target must hold (AND); targets are tried in config order (OR), then
 * enableDefault: a pod in a namespace labelled cgprof.io/profile=enabled, or
 * labelled so itself, is a target with defaultProfileRef, unless the pod is
 * labelled cgprof.io/profile=disabled (which opts it out of enableDefault,
 * not out of explicit targets). */

#define KUBE_PROFILE_LABEL "cgprof.io/profile"

/* The target enableDefault stands for. */
extern const Target kube_default_target;

typedef enum KubeMatch {
        KUBE_MATCH_NO,
        KUBE_MATCH_YES,
        KUBE_MATCH_UNDECIDED, /* needs what is not known yet: the container's name or the namespace */
} KubeMatch;

/* Tries one target. container: the container's name, NULL when not known yet
 * (a cgroup seen before the pod's status). cgroup: the container's cgroup
 * path, for cgroupPatterns. ns may be NULL when not known yet. When the
 * answer is NO, *ret_reason (if non-NULL) gets the first failed condition,
 * e.g. "podSelector does not match" (static string). */
KubeMatch kube_target_matches(const Target *t, const KubeNamespace *ns, const KubePod *pod,
                              const char *container, const char *cgroup, const char **ret_reason);

/* The first target (config order, then enableDefault) that selects the
 * container: KUBE_MATCH_YES with *ret_target; UNDECIDED when an earlier
 * target cannot be decided yet (so nothing later may be picked either). */
KubeMatch kube_target_find(const Config *c, const KubeNamespace *ns, const KubePod *pod,
                           const char *container, const char *cgroup, const Target **ret_target);
