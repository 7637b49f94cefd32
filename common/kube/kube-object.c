/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>

#include "kube-object.h"

static int fail(char **ret_error, const char *field, const char *what) {
        if (ret_error)
                (void) asprintf(ret_error, "%s: %s", field, what);
        return -EBADMSG;
}

static const char *get_string(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int dup_optional(const char *s, char **ret) {
        if (!s) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* metadata.labels as a strv of key, value pairs. */
static int labels_from_json(const cJSON *labels, char ***ret, char **ret_error) {
        const cJSON *l;
        size_t n = 0;
        char **v;

        if (labels && !cJSON_IsObject(labels) && !cJSON_IsNull(labels))
                return fail(ret_error, "metadata.labels", "not an object");
        v = calloc(2 * (size_t) (labels ? cJSON_GetArraySize(labels) : 0) + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        if (cJSON_IsObject(labels))
                cJSON_ArrayForEach (l, labels) {
                        if (!l->string || !cJSON_IsString(l)) {
                                strv_free(v);
                                return fail(ret_error, "metadata.labels", "a value is not a string");
                        }
                        v[n] = strdup(l->string);
                        v[n + 1] = strdup(l->valuestring);
                        if (!v[n] || !v[n + 1]) {
                                strv_free(v);
                                return -ENOMEM;
                        }
                        n += 2;
                }
        *ret = v;
        return 0;
}

const char *kube_labels_get(char *const *labels, const char *key) {
        for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2)
                if (streq(labels[i], key))
                        return labels[i + 1];
        return NULL;
}

int kube_parse_container_id(const char *s, char **ret_runtime, char **ret_id) {
        const char *sep;
        char *runtime, *id;

        if (!s || !(sep = strstr(s, "://")) || sep == s || !sep[3])
                return -EINVAL;
        for (const char *p = sep + 3; *p; p++)
                if (!isxdigit((unsigned char) *p))
                        return -EINVAL;
        runtime = strndup(s, (size_t) (sep - s));
        id = strdup(sep + 3);
        if (!runtime || !id) {
                free(runtime);
                free(id);
                return -ENOMEM;
        }
        for (char *p = id; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        *ret_runtime = runtime;
        *ret_id = id;
        return 0;
}

static void container_done(KubeContainer *c) {
        free(c->name);
        free(c->id);
        free(c->runtime);
}

KubePod *kube_pod_free(KubePod *p) {
        if (!p)
                return NULL;
        free(p->uid);
        free(p->namespace);
        free(p->name);
        free(p->generate_name);
        free(p->node_name);
        free(p->resource_version);
        strv_free(p->labels);
        for (size_t i = 0; i < p->n_owners; i++) {
                free(p->owners[i].kind);
                free(p->owners[i].name);
        }
        free(p->owners);
        for (size_t i = 0; i < p->n_containers; i++)
                container_done(&p->containers[i]);
        free(p->containers);
        free(p);
        return NULL;
}

static int add_container(KubePod *p, const char *name, KubeContainerKind kind, KubeContainer **ret) {
        KubeContainer *n = reallocarray(p->containers, p->n_containers + 1, sizeof(KubeContainer));
        if (!n)
                return -ENOMEM;
        p->containers = n;
        n[p->n_containers] = (KubeContainer){ .kind = kind, .name = strdup(name) };
        if (!n[p->n_containers].name)
                return -ENOMEM;
        *ret = &n[p->n_containers++];
        return 0;
}

static KubeContainer *find_container(KubePod *p, const char *name, KubeContainerKind kind) {
        for (size_t i = 0; i < p->n_containers; i++)
                if (p->containers[i].kind == kind && streq(p->containers[i].name, name))
                        return &p->containers[i];
        return NULL;
}

/* spec.{containers,initContainers,ephemeralContainers}: names; statuses add IDs and states. */
static int parse_containers(KubePod *p, const cJSON *spec, const cJSON *status, char **ret_error) {
        static const struct {
                const char *spec_key, *status_key;
                KubeContainerKind kind;
        } lists[] = {
                { "containers", "containerStatuses", KUBE_CONTAINER_REGULAR },
                { "initContainers", "initContainerStatuses", KUBE_CONTAINER_INIT },
                { "ephemeralContainers", "ephemeralContainerStatuses", KUBE_CONTAINER_EPHEMERAL },
        };
        const cJSON *c;
        int r;

        for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
                cJSON_ArrayForEach (c, cJSON_GetObjectItemCaseSensitive(spec, lists[l].spec_key)) {
                        const char *name = get_string(c, "name");
                        KubeContainer *k;
                        if (!name)
                                return fail(ret_error, "spec.containers[].name", "missing");
                        if (!find_container(p, name, lists[l].kind)) {
                                r = add_container(p, name, lists[l].kind, &k);
                                if (r < 0)
                                        return r;
                        }
                }
                cJSON_ArrayForEach (c, cJSON_GetObjectItemCaseSensitive(status, lists[l].status_key)) {
                        const char *name = get_string(c, "name"), *cid = get_string(c, "containerID");
                        const cJSON *state = cJSON_GetObjectItemCaseSensitive(c, "state");
                        KubeContainer *k;
                        if (!name)
                                return fail(ret_error, "status.containerStatuses[].name", "missing");
                        k = find_container(p, name, lists[l].kind);
                        if (!k) {
                                r = add_container(p, name, lists[l].kind, &k);
                                if (r < 0)
                                        return r;
                        }
                        if (cid && cid[0]) {
                                free(k->runtime);
                                free(k->id);
                                k->runtime = k->id = NULL;
                                r = kube_parse_container_id(cid, &k->runtime, &k->id);
                                if (r == -ENOMEM)
                                        return r;
                                if (r < 0)
                                        return fail(ret_error, "status.containerStatuses[].containerID",
                                                    "not RUNTIME://ID");
                        }
                        k->running = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(state, "running"));
                        k->terminated =
                                cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(state, "terminated"));
                }
        }
        return 0;
}

int kube_pod_from_json(const cJSON *o, KubePod **ret, char **ret_error) {
        _cleanup_(kube_pod_freep) KubePod *p = NULL;
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(o, "status");
        const cJSON *owner;
        int r;

        if (!cJSON_IsObject(o))
                return fail(ret_error, "$", "not an object");
        if (!cJSON_IsObject(meta))
                return fail(ret_error, "metadata", "missing");
        if (!get_string(meta, "uid"))
                return fail(ret_error, "metadata.uid", "missing");
        if (!get_string(meta, "name"))
                return fail(ret_error, "metadata.name", "missing");
        if (!get_string(meta, "namespace"))
                return fail(ret_error, "metadata.namespace", "missing");

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        if (dup_optional(get_string(meta, "uid"), &p->uid) < 0 ||
            dup_optional(get_string(meta, "name"), &p->name) < 0 ||
            dup_optional(get_string(meta, "namespace"), &p->namespace) < 0 ||
            dup_optional(get_string(meta, "generateName"), &p->generate_name) < 0 ||
            dup_optional(get_string(meta, "resourceVersion"), &p->resource_version) < 0 ||
            dup_optional(get_string(spec, "nodeName"), &p->node_name) < 0)
                return -ENOMEM;
        p->deleting = get_string(meta, "deletionTimestamp") != NULL;

        r = labels_from_json(cJSON_GetObjectItemCaseSensitive(meta, "labels"), &p->labels, ret_error);
        if (r < 0)
                return r;

        cJSON_ArrayForEach (owner, cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences")) {
                KubeOwner *n = reallocarray(p->owners, p->n_owners + 1, sizeof(KubeOwner));
                if (!n)
                        return -ENOMEM;
                p->owners = n;
                n[p->n_owners] = (KubeOwner){};
                if (dup_optional(get_string(owner, "kind"), &n[p->n_owners].kind) < 0 ||
                    dup_optional(get_string(owner, "name"), &n[p->n_owners].name) < 0) {
                        p->n_owners++;
                        return -ENOMEM;
                }
                p->n_owners++;
        }

        r = parse_containers(p, spec, status, ret_error);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(p);
        return 0;
}

KubeNamespace *kube_namespace_free(KubeNamespace *n) {
        if (!n)
                return NULL;
        free(n->name);
        free(n->uid);
        strv_free(n->labels);
        free(n);
        return NULL;
}

int kube_namespace_from_json(const cJSON *o, KubeNamespace **ret, char **ret_error) {
        _cleanup_(kube_namespace_freep) KubeNamespace *n = NULL;
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
        int r;

        if (!cJSON_IsObject(meta) || !get_string(meta, "name"))
                return fail(ret_error, "metadata.name", "missing");
        n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        if (dup_optional(get_string(meta, "name"), &n->name) < 0 ||
            dup_optional(get_string(meta, "uid"), &n->uid) < 0)
                return -ENOMEM;
        r = labels_from_json(cJSON_GetObjectItemCaseSensitive(meta, "labels"), &n->labels, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(n);
        return 0;
}

const KubeContainer *kube_pod_find_container_id(const KubePod *p, const char *id) {
        for (size_t i = 0; p && id && i < p->n_containers; i++)
                if (streq_ptr(p->containers[i].id, id))
                        return &p->containers[i];
        return NULL;
}
