/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A pulled profile's query: see pull-query.h. */
#include <stdarg.h>

#include "cgroup-util.h"
#include "key-path.h"
#include "pull-query.h"

#define PULL_CGROUP_MAX 4096U

/* As the control API reads a cgroup (cgroup_path_normalize()), not too long. */
static int cgroup_normalize(const char *path, char **ret) {
        if (strlen(path) > PULL_CGROUP_MAX)
                return -EINVAL;
        return cgroup_path_normalize(path, ret);
}

void pull_query_done(PullQuery *q) {
        free(q->namespace);
        free(q->pod);
        free(q->container);
        free(q->cgroup);
        *q = (PullQuery){};
}

static bool label_valid(const char *s, size_t n) {
        if (n == 0 || n > 63)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return s[0] != '-' && s[n - 1] != '-';
}

bool kube_name_is_dns_label(const char *s) {
        return s && label_valid(s, strlen(s));
}

bool kube_name_is_dns_subdomain(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n == 0 || n > 253)
                return false;
        for (const char *p = s;;) {
                size_t l = strcspn(p, ".");
                if (!label_valid(p, l))
                        return false;
                if (p[l] == 0)
                        return true;
                p += l + 1;
        }
}

bool pull_session_id_is_valid(const char *s) {
        if (!s || strlen(s) != 32)
                return false;
        for (size_t i = 0; i < 32; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

bool pull_report_file_is_valid(const char *s) {
        static const char *const files[] = { "profile.pb.gz", "summary.json", "profile.folded", "flame.svg",
                                             "profile.speedscope.json" };

        for (size_t i = 0; s && i < ELEMENTSOF(files); i++)
                if (streq(s, files[i]))
                        return true;
        return false;
}

static int parse_seconds(const char *s, unsigned *ret, char **ret_error) {
        unsigned v = 0;

        if (!s) {
                *ret = PULL_SECONDS_DEFAULT;
                return 0;
        }
        if (s[0] == 0 || strlen(s) > 3)
                goto fail;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        goto fail;
                v = v * 10 + (unsigned) (*p - '0');
        }
        if (v < PULL_SECONDS_MIN || v > PULL_SECONDS_MAX)
                goto fail;
        *ret = v;
        return 0;
fail:
        return error_message(ret_error, -EINVAL, "seconds: must be an integer %u..%u", PULL_SECONDS_MIN,
                             PULL_SECONDS_MAX);
}

static int dup_checked(const char *key, const char *s, bool (*valid)(const char *), const char *what,
                       char **ret, char **ret_error) {
        if (!valid(s))
                return error_message(ret_error, -EINVAL, "%s: not a Kubernetes %s", key, what);
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int pull_query_parse(PullQueryGet get, void *userdata, PullQuery *ret, char **ret_error) {
        _cleanup_(pull_query_done) PullQuery q = {};
        const char *ns = get("namespace", userdata), *pod = get("pod", userdata),
                   *container = get("container", userdata), *cgroup = get("cgroup", userdata);
        int r;

        r = parse_seconds(get("seconds", userdata), &q.seconds, ret_error);
        if (r < 0)
                return r;
        if (cgroup) {
                if (ns || pod || container)
                        return error_message(ret_error, -EINVAL,
                                             "cgroup: not with namespace, pod or container");
                r = cgroup_normalize(cgroup, &q.cgroup);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return error_message(
                                ret_error, -EINVAL,
                                "cgroup: not a cgroup path below the root (no \".\" or \"..\")");
        } else {
                if (!ns || !pod)
                        return error_message(ret_error, -EINVAL,
                                             "namespace and pod (or cgroup) are required");
                r = dup_checked("namespace", ns, kube_name_is_dns_label, "namespace name", &q.namespace,
                                ret_error);
                if (r >= 0)
                        r = dup_checked("pod", pod, kube_name_is_dns_subdomain, "pod name", &q.pod,
                                        ret_error);
                if (r >= 0 && container)
                        r = dup_checked("container", container, kube_name_is_dns_label, "container name",
                                        &q.container, ret_error);
                if (r < 0)
                        return r;
        }
        *ret = q;
        q = (PullQuery){};
        return 0;
}

int pull_query_target(const PullQuery *q, char **ret) {
        int r;

        if (q->cgroup)
                r = asprintf(ret, "cgroup:%s", q->cgroup);
        else
                r = asprintf(ret, "pod:%s/%s%s%s", q->namespace, q->pod, q->container ? "/" : "",
                             strempty(q->container));
        if (r < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}
