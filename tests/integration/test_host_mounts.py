#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cgprofd as the DaemonSet runs it: the host's cgroup2 hierarchy and
/proc/sys/kernel bind-mounted elsewhere (/host/...), given with --cgroup-root
and --sysctl-root. Container runtimes refuse mounts inside /proc and mount
/proc/sys read-only, hence the separate paths. Checks that a cgroup below the
bind-mounted hierarchy is profiled (a report with the hot functions), that
machineConfig writes through the bind mount reach the real sysctl and are
restored, that --cgroup-root refuses what is not a cgroup2 mount, and that
--check-config says what a reload would say (the ConfigMap's config is
checked by test_manifests.py)."""

import json
import os
import subprocess
import tempfile

import cgproflib
from cgproflib import CGPROFD, Agent, Cgroup, assert_shares, main, profile, workload

# Not perf_event_max_stack: the kernel refuses to change it (EBUSY) while
# any perf event records callchains, e.g. another agent's session.
SYSCTL = "kernel.perf_event_mlock_kb"


def read_sysctl():
    return cgproflib.read_sysctl(SYSCTL)


def write_sysctl(v):
    cgproflib.write_sysctl(SYSCTL, v)


class BindMount:
    """mount --bind SRC at a fresh directory below root; unmounted on exit."""

    def __init__(self, src, root, rel):
        self.src, self.dst = src, os.path.join(root, rel)

    def __enter__(self):
        os.makedirs(self.dst, exist_ok=True)
        subprocess.run(["mount", "--bind", self.src, self.dst], check=True)
        return self.dst

    def __exit__(self, *exc):
        subprocess.run(["umount", "-l", self.dst], check=False)


def test_host_mounts():
    orig = read_sysctl()
    want = str(int(orig) + 4)
    tmp = tempfile.mkdtemp(prefix="cgprof-host-")
    host = os.path.join(tmp, "host")
    cg = Cgroup("cgprof-test-hostmount")
    try:
        with BindMount(cgproflib.cgroup_root(), host, "sys/fs/cgroup") as cgroup_root, \
                BindMount("/proc/sys/kernel", host, "proc/sys/kernel"):
            agent = Agent({
                "machineConfig": [{"name": SYSCTL, "value": want}],
                "profiles": [profile(name="p", output="{CGROUP}")],
                "targets": [{"name": "t", "profileRef": "p", "cgroupPatterns": [cg.rel]}],
            }, extra_args=["--cgroup-root", cgroup_root, "--sysctl-root", os.path.join(host, "proc", "sys")])
            try:
                agent.start()
                # Written through the bind mount: the real sysctl changed.
                assert read_sysctl() == want, read_sysctl()
                assert agent.status()["cgroupRoot"] == cgroup_root, agent.status().get("cgroupRoot")
                proc = workload(cg, 4)
                proc.wait()
                agent.ctl("stop", "--all")
                r = agent.wait_summary(lambda s: s.get("cgroup") == cg.rel)
                assert_shares(r)
                assert agent.stop() == 0
                assert read_sysctl() == orig, "not restored through the bind mount"
            finally:
                agent.cleanup()
    finally:
        if read_sysctl() != orig:
            write_sysctl(orig)
        cg.remove()


def test_cgroup_root_must_be_cgroup2():
    agent = Agent({"targets": []}, extra_args=["--cgroup-root", "/tmp"])
    try:
        agent.start(wait_ready=False)
        assert agent.proc.wait(30) != 0
        assert "--cgroup-root: /tmp is not a cgroup v2 mount." in agent.log(), agent.log()
    finally:
        agent.cleanup()


def test_check_config():
    with tempfile.TemporaryDirectory() as d:
        good = os.path.join(d, "good.json")
        bad = os.path.join(d, "bad.json")
        with open(good, "w") as f:
            json.dump({"profiles": [{"name": "default", "frequency": 49}], "targets": []}, f)
        with open(bad, "w") as f:
            json.dump({"profiles": [{"name": "default", "frequency": 0}]}, f)
        r = subprocess.run([CGPROFD, "--check-config", "--config", good], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout == f"{good}: ok\n", (r.returncode, r.stdout, r.stderr)
        r = subprocess.run([CGPROFD, "--check-config", "--config", bad], capture_output=True, text=True)
        assert r.returncode == 1, r.returncode
        assert r.stderr == f"{bad}: profiles[0].frequency: must be 1..100000\n", r.stderr
        r = subprocess.run([CGPROFD, "--check-config", "--config", os.path.join(d, "missing.json")],
                           capture_output=True, text=True)
        assert r.returncode == 1 and "missing.json" in r.stderr, r.stderr


if __name__ == "__main__":
    main([test_check_config, test_cgroup_root_must_be_cgroup2, test_host_mounts])
