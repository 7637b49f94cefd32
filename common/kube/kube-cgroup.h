/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Container cgroups as kubelets lay them out, found by looking at the path
 * (no flag says which cgroup driver the node uses):
 *   systemd driver:  .../kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid_>.slice/<runtime>-<id>.scope
 *   cgroupfs driver: .../kubepods[/<qos>]/pod<uid>/<id>
 * with <runtime> cri-containerd, crio or docker; CRI-O's "crio-conmon-<id>.scope"
 * is its monitor, not a container. A prefix before "kubepods" (a kubelet in a
 * container, kind) is allowed. */

typedef struct KubeCgroupInfo {
        char pod_uid[37]; /* with dashes, as in metadata.uid */
        char container_id[65]; /* lowercase hex */
        const char *driver; /* "systemd" or "cgroupfs" */
} KubeCgroupInfo;

/* 1 and *ret filled when path (relative to the cgroup root) is a container's
 * cgroup, 0 when it is not. */
int kube_cgroup_parse(const char *path, KubeCgroupInfo *ret);
