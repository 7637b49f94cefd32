#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""summary.json's diagnostics as a user reads them: per-process samples with
command lines, the user-stack depth histogram and truncated stacks (a
workload recursing past the walk's depth limit, 512 frames), per-mapping unsymbolized
share, and which binaries seem to lack frame pointers (the same workload
built with and without them)."""

import os

from cgproflib import (mapping_of, Agent, Cgroup, WORKLOAD, log, main, profile, run_in_cgroup, workload)

NOFP = os.environ.get("CGPROF_WORKLOAD_NOFP", WORKLOAD + "-nofp")


def test_depth_truncation_and_frame_pointers():
    cg = Cgroup(f"cgprof-test-summary-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="diag")],
        "targets": [{"name": "t", "profileRef": "diag", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        procs = [
            workload(cg, 1.5, name="with-fp"),
            workload(cg, 1.5, name="deep", extra=["--depth", "600"]),
        ]
        # The same program built without frame pointers.
        q = run_in_cgroup(cg, [NOFP, "--seconds", "1.5", "--name", "no-fp"])
        assert q.stdout.readline().decode().startswith("ready")
        procs.append(q)
        for x in procs:
            assert x.wait(60) == 0
        cg.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)

        # Per-process samples and command lines.
        by_comm = {}
        for x in r["processes"]:
            by_comm.setdefault(x["comm"], []).append(x)
        for comm in ("with-fp", "deep", "no-fp"):
            assert comm in by_comm and by_comm[comm][0]["samples"] > 0, r["processes"]
        assert "--depth 600" in by_comm["deep"][0]["cmdline"]

        # Depth: the deep process's stacks hit the walk's limit (512 frames).
        st = r["stacks"]
        log("stacks:", {k: v for k, v in st.items() if k != "userDepthHistogram"})
        assert st["truncatedSamples"] >= by_comm["deep"][0]["samples"] * 0.9, st
        assert st["maxUserDepth"] >= 512, st
        hist = {b["depth"]: b["samples"] for b in st["userDepthHistogram"]}
        assert sum(hist.values()) == r["samples"]["total"]

        # Frame pointers: the -nofp build is diagnosed, the normal one is not.
        fp = mapping_of(r, WORKLOAD)
        nofp = mapping_of(r, NOFP)
        log("with fp:", fp)
        log("without fp:", nofp)
        assert fp["likelyNoFramePointers"] is False
        assert nofp["likelyNoFramePointers"] is True
        # Nearly every frame of the frame-pointer build is named (PLT stubs
        # included, "clock_gettime@plt"). Not always all: a frame pointer walk
        # that passes through libc (built without them) can read a stale
        # value as a return address, which perf shows as [unknown] too.
        assert fp["unsymbolizedShare"] < 0.001, fp
        assert 0.0 <= nofp["unsymbolizedShare"] <= 1.0
    finally:
        agent.cleanup()
        cg.remove()


if __name__ == "__main__":
    main([test_depth_truncation_and_frame_pointers])
