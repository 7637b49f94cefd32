#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""`cgprofctl report DIR` re-renders an existing report in other formats: from
profile.pb.gz (complete) or, for old reports, from profile.folded alone; the
totals stay equal across formats; bad input gets a clear error and a
meaningful exit code."""

import json
import os
import shutil
import subprocess

from cgproflib import (CGPROFCTL, Agent, Cgroup, folded, log, main, profile, workload)


def ctl(*args):
    return subprocess.run([CGPROFCTL, *args], capture_output=True, text=True, timeout=120)


def speedscope_total(path):
    with open(path) as f:
        doc = json.load(f)
    return doc


def test_convert():
    cg = Cgroup(f"cgprof-test-convert-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="conv", formats=["folded", "json", "pprof"])],
        "targets": [{"name": "t", "profileRef": "conv", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        assert workload(cg, 1.5).wait(60) == 0
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        d = report["_dir"]
        assert sorted(os.listdir(d)) == ["profile.folded", "profile.pb.gz", "summary.json"], os.listdir(d)
        total = report["samples"]["total"]

        # From pprof: every format.
        r = ctl("report", d)
        assert r.returncode == 0, r.stderr
        files = sorted(os.listdir(d))
        log("after report:", files)
        assert files == ["flame.svg", "profile.folded", "profile.pb.gz", "profile.speedscope.json",
                         "summary.json"], files
        s = json.load(open(os.path.join(d, "summary.json")))
        assert s["session"] == report["session"] and s["samples"]["total"] == total
        assert s["unwind"] == report["unwind"], (s.get("unwind"), report["unwind"])
        assert s["topFunctions"][0]["name"] == "hot_alpha"
        assert sum(folded({"_dir": d}).values()) == total
        with open(os.path.join(d, "flame.svg")) as f:
            assert "hot_alpha" in f.read()

        # An old report with only the folded file: converted from it.
        old = os.path.join(agent.tmp, "old")
        os.makedirs(old)
        shutil.copy(os.path.join(d, "profile.folded"), old)
        r = ctl("report", "--format", "svg,pprof", old)
        assert r.returncode == 0, r.stderr
        assert sorted(os.listdir(old)) == ["flame.svg", "profile.folded", "profile.pb.gz"]
        r = ctl("report", "--format", "folded", os.path.join(old, ""))
        assert r.returncode == 0, r.stderr
        assert folded({"_dir": old}) == folded({"_dir": d})

        # Errors: a missing directory (3), a directory without a profile (3),
        # a corrupt profile.pb.gz (1, naming the file), an unknown format (2).
        assert ctl("report", os.path.join(agent.tmp, "nope")).returncode == 3
        empty = os.path.join(agent.tmp, "empty")
        os.makedirs(empty)
        r = ctl("report", empty)
        assert r.returncode == 3 and "profile.folded" in r.stderr, r
        with open(os.path.join(empty, "profile.pb.gz"), "wb") as f:
            f.write(b"\x1f\x8b garbage")
        r = ctl("report", empty)
        assert r.returncode == 1 and "profile.pb.gz" in r.stderr, r
        assert ctl("report", "--format", "png", d).returncode == 2
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        cg.remove()


if __name__ == "__main__":
    main([test_convert])
