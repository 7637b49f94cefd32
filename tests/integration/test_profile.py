#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A user's view of host-mode profiling: cgprofd targets a test cgroup, the
test workload (5:3:2 in hot_alpha/hot_beta/hot_gamma) runs in it, the
session ends when the cgroup is removed, and the report has the right
functions, shares, callers and sample count — in both attach modes."""

import os
import time

from cgproflib import (LAUNCHER_COMM, Agent, Cgroup, HOT, assert_shares, folded, log, main, profile, workload)


def run_accuracy(mode):
    cg = Cgroup(f"cgprof-test-profile-{mode}-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="accurate")],
        "targets": [{"name": "test-cgroup", "profileRef": "accurate", "cgroupPatterns": [cg.rel]}],
    }, attach_mode=mode)
    try:
        agent.start()
        # The session starts for the existing cgroup.
        st = agent.status()
        assert any(s["cgroup"] == cg.rel for s in st["sessions"]), st
        usage0 = cg.usage_usec()
        p = workload(cg, 3)
        assert p.wait(timeout=60) == 0
        usage = cg.usage_usec() - usage0
        # Removing the cgroup ends the session, which writes its report.
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        log(f"[{mode}] summary: samples {report['samples']}, cpu {usage / 1e6:.2f}s")

        assert report["endReason"] == "cgroup-removed", report["endReason"]
        assert report["attachMode"] == mode
        assert report["event"] == "cpu-clock" and report["frequency"] == 999
        assert_shares(report)

        # Callers: the known call chain leads to each hot function.
        stacks = folded(report)
        for name in HOT:
            chain = ("run_workload", "work_cycle", name)
            assert any(st[-3:] == chain and "main" in st for st in stacks), f"no main..{chain} stack"
        # The process is the root frame (the launching shell may have been
        # sampled before its exec(): its own process, a few samples at most).
        roots = {}
        for st, n in stacks.items():
            roots[st[0]] = roots.get(st[0], 0) + n
        assert set(roots) <= {"cgprof-workload", LAUNCHER_COMM}, roots
        assert roots.get(LAUNCHER_COMM, 0) <= 0.01 * sum(roots.values()), roots

        # Samples: at least 90 % of frequency x the cgroup's CPU time.
        samples = report["samples"]
        assert samples["expected"] > 0
        # expected is frequency x the cgroup's CPU time, which the test measured
        # itself (cpu.stat), although the cgroup was removed right after its
        # last process exited. The agent reads cpu.stat when the cgroup
        # empties, or else counts the time with perf (within ~1 % of cpu.stat).
        mine = 999 * usage / 1e6
        assert samples["cpuUsageSource"] in ("cpu.stat", "perf"), samples
        assert abs(samples["expected"] - mine) <= 0.03 * mine, (samples["expected"], mine)
        assert samples["total"] >= 0.9 * samples["expected"], samples
        assert samples["kernel"] == sum(samples["perCpu"])
        assert samples["total"] + samples["excluded"] <= samples["kernel"]

        tops = [t["name"] for t in report["topFunctions"][:3]]
        assert tops == list(HOT), tops
        assert rc_ok(agent)
    finally:
        agent.cleanup()
        cg.remove()


def rc_ok(agent):
    rc = agent.stop()
    assert rc == 0, f"cgprofd exited {rc}:\n{agent.log()}"
    return True


def test_accuracy_cpu_mode():
    run_accuracy("cpu")


def test_accuracy_cgroup_mode():
    run_accuracy("cgroup")


if __name__ == "__main__":
    main([test_accuracy_cpu_mode, test_accuracy_cgroup_mode])
