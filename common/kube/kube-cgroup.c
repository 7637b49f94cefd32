/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>

#include "kube-cgroup.h"

static bool is_hex_id(const char *s, size_t n) {
        if (n < 12 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isxdigit((unsigned char) s[i]))
                        return false;
        return true;
}

/* A pod UID as 8-4-4-4-12 hex, separated by sep ('-' or '_'), into out with dashes. */
static bool parse_uid(const char *s, size_t n, char sep, char out[static 37]) {
        if (n != 36)
                return false;
        for (size_t i = 0; i < 36; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                if (dash ? s[i] != sep : !isxdigit((unsigned char) s[i]))
                        return false;
                out[i] = dash ? '-' : (char) tolower((unsigned char) s[i]);
        }
        out[36] = 0;
        return true;
}

static void copy_id(const char *s, size_t n, char out[static 65]) {
        for (size_t i = 0; i < n; i++)
                out[i] = (char) tolower((unsigned char) s[i]);
        out[n] = 0;
}

static bool has_prefix(const char *s, size_t n, const char *prefix) {
        size_t l = strlen(prefix);
        return n >= l && memcmp(s, prefix, l) == 0;
}

static bool has_suffix(const char *s, size_t n, const char *suffix) {
        size_t l = strlen(suffix);
        return n >= l && memcmp(s + n - l, suffix, l) == 0;
}

/* systemd driver: the last three components are the pod slice and the scope. */
static int parse_systemd(const char *pod, size_t pod_n, const char *scope, size_t scope_n,
                         KubeCgroupInfo *ret) {
        static const char *const runtimes[] = { "cri-containerd-", "crio-", "docker-" };
        const char *p;

        /* kubepods[-qos]-pod<uid_>.slice */
        if (!has_prefix(pod, pod_n, "kubepods") || !has_suffix(pod, pod_n, ".slice"))
                return 0;
        p = memmem(pod, pod_n, "-pod", 4);
        if (!p)
                return 0;
        p += 4;
        if (!parse_uid(p, (size_t) (pod + pod_n - strlen(".slice") - p), '_', ret->pod_uid))
                return 0;

        if (!has_suffix(scope, scope_n, ".scope") || has_prefix(scope, scope_n, "crio-conmon-"))
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(runtimes); i++) {
                size_t l = strlen(runtimes[i]);
                if (!has_prefix(scope, scope_n, runtimes[i]))
                        continue;
                size_t id_n = scope_n - l - strlen(".scope");
                if (!is_hex_id(scope + l, id_n))
                        return 0;
                copy_id(scope + l, id_n, ret->container_id);
                ret->driver = "systemd";
                return 1;
        }
        return 0;
}

int kube_cgroup_parse(const char *path, KubeCgroupInfo *ret) {
        const char *comp[64];
        size_t len[64], n = 0, kubepods = SIZE_MAX;
        KubeCgroupInfo info = {};

        if (!path)
                return 0;
        for (const char *p = path; *p && n < ELEMENTSOF(comp);) {
                const char *slash = strchr(p, '/');
                size_t l = slash ? (size_t) (slash - p) : strlen(p);
                if (l > 0) {
                        comp[n] = p;
                        len[n] = l;
                        if (kubepods == SIZE_MAX && ((l == 8 && memcmp(p, "kubepods", 8) == 0) ||
                                                     (l == 14 && memcmp(p, "kubepods.slice", 14) == 0)))
                                kubepods = n;
                        n++;
                }
                p += l + (slash ? 1 : 0);
                if (!slash)
                        break;
        }
        if (kubepods == SIZE_MAX || n < kubepods + 3)
                return 0;

        size_t depth = n - kubepods; /* kubepods ... container */
        if (len[kubepods] == 14) {
                /* systemd: kubepods.slice/[kubepods-qos.slice/]kubepods[-qos]-pod.slice/x.scope */
                if (depth != 3 && depth != 4)
                        return 0;
                if (parse_systemd(comp[n - 2], len[n - 2], comp[n - 1], len[n - 1], &info) <= 0)
                        return 0;
        } else {
                /* cgroupfs: kubepods/[qos/]pod<uid>/<id> */
                if (depth != 3 && depth != 4)
                        return 0;
                if (depth == 4 &&
                    !((len[kubepods + 1] == 9 && memcmp(comp[kubepods + 1], "burstable", 9) == 0) ||
                      (len[kubepods + 1] == 10 && memcmp(comp[kubepods + 1], "besteffort", 10) == 0)))
                        return 0;
                if (!has_prefix(comp[n - 2], len[n - 2], "pod") ||
                    !parse_uid(comp[n - 2] + 3, len[n - 2] - 3, '-', info.pod_uid))
                        return 0;
                /* Bare ID (containerd, docker), or "crio-<id>" (CRI-O; not its "crio-conmon-"). */
                const char *id = comp[n - 1];
                size_t id_n = len[n - 1];
                if (has_prefix(id, id_n, "crio-") && !has_prefix(id, id_n, "crio-conmon-")) {
                        id += 5;
                        id_n -= 5;
                }
                if (!is_hex_id(id, id_n))
                        return 0;
                copy_id(id, id_n, info.container_id);
                info.driver = "cgroupfs";
        }
        *ret = info;
        return 1;
}
