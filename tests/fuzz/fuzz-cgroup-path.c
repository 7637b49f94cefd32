/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for cgroup paths (common/kube/kube-cgroup.c: a container's
 * cgroup to its pod UID and container ID; common/base/cgroup-util.c:
 * /proc/self/mountinfo and its escapes).
 *
 * The input is a cgroup path (relative to the cgroup root), read as a
 * container's cgroup: 0 when it is not one, 1 with a pod UID in the form
 * of metadata.uid (8-4-4-4-12 lowercase hex), a lowercase hex container ID
 * and a known driver. The same bytes are unescaped as a mountinfo field
 * (never longer) and read as a mountinfo file, whose cgroup2 mount, when
 * found, is an absolute path.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <ctype.h>

#include "cgroup-util.h"
#include "fuzz.h"
#include "kube-cgroup.h"

static bool lower_hex(char c) {
        return isdigit((unsigned char) c) || (c >= 'a' && c <= 'f');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *path = fuzz_strndup(data, size), *copy = NULL, *root = NULL;
        _cleanup_close_ int fd = -EBADF;
        KubeCgroupInfo info;
        char mountinfo[64];
        size_t n;
        int r;

        memset(&info, 0xAA, sizeof(info));
        r = kube_cgroup_parse(path, &info);
        CHECK(r == 0 || r == 1);
        if (r == 1) {
                CHECK(strlen(info.pod_uid) == 36);
                for (size_t i = 0; i < 36; i++)
                        CHECK(i == 8 || i == 13 || i == 18 || i == 23 ? info.pod_uid[i] == '-'
                                                                      : lower_hex(info.pod_uid[i]));
                n = strnlen(info.container_id, sizeof(info.container_id));
                CHECK(n >= 12 && n <= 64);
                for (size_t i = 0; i < n; i++)
                        CHECK(lower_hex(info.container_id[i]));
                CHECK(info.driver &&
                      (strcmp(info.driver, "systemd") == 0 || strcmp(info.driver, "cgroupfs") == 0));
                /* The container is in the path: a leading "/" or a suffix does not change it. */
                CHECK(strstr(path, "kubepods"));
        }

        copy = strdup(path);
        CHECK(copy);
        mountinfo_unescape(copy);
        CHECK(strlen(copy) <= strlen(path));

        fd = fuzz_memfd(data, size);
        snprintf(mountinfo, sizeof(mountinfo), "/proc/self/fd/%d", fd);
        r = cg_find_unified_root(mountinfo, &root);
        if (r < 0) {
                CHECK(fuzz_is_errno(r) && !root);
                return 0;
        }
        CHECK(root && root[0] == '/');
        return 0;
}
