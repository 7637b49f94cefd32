/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kube-cgroup.h"
#include "tests.h"

#define UID "0f3b2c4d-1a2b-4c3d-8e9f-0123456789ab"
#define UID_ "0f3b2c4d_1a2b_4c3d_8e9f_0123456789ab"
#define CID "4f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0"

static void expect(const char *path, const char *uid, const char *id, const char *driver) {
        KubeCgroupInfo info;
        int r = kube_cgroup_parse(path, &info);
        if (!uid) {
                if (r != 0)
                        fprintf(stderr, "unexpected match: %s\n", path);
                ASSERT_EQ(r, 0);
                return;
        }
        if (r != 1)
                fprintf(stderr, "no match: %s\n", path);
        ASSERT_EQ(r, 1);
        ASSERT_STREQ(info.pod_uid, uid);
        ASSERT_STREQ(info.container_id, id);
        ASSERT_STREQ(info.driver, driver);
}

TEST(systemd_driver) {
        expect("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
               ".slice/cri-containerd-" CID ".scope",
               UID, CID, "systemd");
        expect("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_ ".slice/crio-" CID
               ".scope",
               UID, CID, "systemd");
        /* Guaranteed pods sit right under kubepods.slice. */
        expect("kubepods.slice/kubepods-pod" UID_ ".slice/docker-" CID ".scope", UID, CID, "systemd");
        /* A kubelet inside a container (kind): a prefix. */
        expect("system.slice/docker-abc.scope/kubelet.slice/kubepods.slice/kubepods-pod" UID_
               ".slice/cri-containerd-" CID ".scope",
               UID, CID, "systemd");
}

TEST(cgroupfs_driver) {
        expect("kubepods/burstable/pod" UID "/" CID, UID, CID, "cgroupfs");
        expect("kubepods/besteffort/pod" UID "/" CID, UID, CID, "cgroupfs");
        expect("kubepods/pod" UID "/" CID, UID, CID, "cgroupfs");
        expect("docker/1234/kubepods/pod" UID "/" CID, UID, CID, "cgroupfs");
        expect("kubepods/burstable/pod" UID "/crio-" CID, UID, CID, "cgroupfs");
        expect("kubepods/burstable/pod" UID "/crio-conmon-" CID, NULL, NULL, NULL);
}

TEST(not_containers) {
        expect("", NULL, NULL, NULL);
        expect("kubepods.slice", NULL, NULL, NULL);
        expect("kubepods.slice/kubepods-burstable.slice", NULL, NULL, NULL);
        expect("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice", NULL, NULL,
               NULL);
        /* CRI-O's monitor process. */
        expect("kubepods.slice/kubepods-pod" UID_ ".slice/crio-conmon-" CID ".scope", NULL, NULL, NULL);
        expect("kubepods.slice/kubepods-pod" UID_ ".slice/podman-" CID ".scope", NULL, NULL, NULL);
        expect("kubepods/burstable/pod" UID, NULL, NULL, NULL);
        expect("kubepods/weird/pod" UID "/" CID, NULL, NULL, NULL);
        expect("kubepods/pod" UID "/not-hex", NULL, NULL, NULL);
        expect("kubepods/podnot-a-uid/" CID, NULL, NULL, NULL);
        expect("system.slice/nginx.service", NULL, NULL, NULL);
        /* Children of a container cgroup are not containers. */
        expect("kubepods/pod" UID "/" CID "/child", NULL, NULL, NULL);
}

DEFINE_TEST_MAIN
