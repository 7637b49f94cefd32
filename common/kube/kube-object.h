/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>

#include "macro.h"

/* What the agent needs of Kubernetes objects, parsed from their JSON. */

typedef enum KubeContainerKind {
        KUBE_CONTAINER_REGULAR,
        KUBE_CONTAINER_INIT,
        KUBE_CONTAINER_EPHEMERAL,
        _KUBE_CONTAINER_KIND_MAX,
} KubeContainerKind;

typedef struct KubeContainer {
        char *name;
        char *id; /* bare container ID (hex), NULL until the status has one */
        char *runtime; /* "containerd", "cri-o", "docker", ... */
        KubeContainerKind kind;
        bool running;
        bool terminated; /* state.terminated: the container exited */
} KubeContainer;

typedef struct KubeOwner {
        char *kind;
        char *name;
} KubeOwner;

typedef struct KubePod {
        char *uid;
        char *namespace;
        char *name;
        char *generate_name;
        char *node_name;
        char *resource_version;
        char **labels; /* strv: key, value, ... */
        KubeOwner *owners;
        size_t n_owners;
        KubeContainer *containers; /* from the status (with IDs), or from the spec (without) */
        size_t n_containers;
        bool deleting; /* metadata.deletionTimestamp is set */
} KubePod;

typedef struct KubeNamespace {
        char *name;
        char *uid;
        char **labels;
} KubeNamespace;

/* Parse errors name the field ("metadata.uid: missing"). */
int kube_pod_from_json(const cJSON *object, KubePod **ret, char **ret_error);
KubePod *kube_pod_free(KubePod *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(KubePod *, kube_pod_free);

int kube_namespace_from_json(const cJSON *object, KubeNamespace **ret, char **ret_error);
KubeNamespace *kube_namespace_free(KubeNamespace *n);
DEFINE_TRIVIAL_CLEANUP_FUNC(KubeNamespace *, kube_namespace_free);

/* The container of the pod with that ID (NULL when none). */
const KubeContainer *kube_pod_find_container_id(const KubePod *p, const char *id);

/* Splits "containerd://<id>" into runtime and ID (malloc()ed). -EINVAL on
 * anything else (no "://", empty parts, non-hex ID). */
int kube_parse_container_id(const char *s, char **ret_runtime, char **ret_id);

/* The value of a label, or NULL. */
const char *kube_labels_get(char *const *labels, const char *key);
