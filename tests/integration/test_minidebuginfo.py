#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Symbols where Fedora keeps them: the workload built without -rdynamic
(hot_alpha & co. in no .dynsym), stripped of its .symtab and given a
MiniDebugInfo section as Fedora's find-debuginfo makes one
(tests/make-minidebuginfo.sh), profiled in a cgroup. Its hot functions must
be named, in their 5:3:2 ratio, and summary.json must say its symbols came
from "minidebuginfo"; the unstripped workload's from "symtab"."""

import os
import subprocess

from cgproflib import (mapping_of, Agent, Cgroup, WORKLOAD, assert_shares, folded, log, main, profile, run_in_cgroup,
                       skip, workload)

BUILD = os.environ.get("CGPROF_BUILD_DIR", "build")
MINI = os.environ.get("CGPROF_WORKLOAD_MINIDEBUGINFO",
                      os.path.join(BUILD, "tests", "cgprof-workload-minidebuginfo"))
BOMB = os.environ.get("CGPROF_WORKLOAD_MINIDEBUGINFO_BOMB",
                      os.path.join(BUILD, "tests", "cgprof-workload.minidebuginfo-bomb"))


def test_minidebuginfo_symbols():
    if not os.access(MINI, os.X_OK):
        skip(f"{MINI} not built")
    # The fixture is what the test claims: .gnu_debugdata, no .symtab, and
    # no hot function in .dynsym.
    sections = subprocess.run(["readelf", "-SW", MINI], check=True, capture_output=True, text=True).stdout
    assert ".gnu_debugdata" in sections and ".symtab" not in sections, sections
    dynsyms = subprocess.run(["nm", "-D", "--defined-only", MINI], capture_output=True, text=True).stdout
    assert "hot_alpha" not in dynsyms, dynsyms

    cg_mini = Cgroup(f"cgprof-test-minidebuginfo-{os.getpid()}")
    cg_full = Cgroup(f"cgprof-test-symtab-{os.getpid()}")
    cg_bomb = Cgroup(f"cgprof-test-bomb-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="syms")],
        "targets": [
            {"name": "mini", "profileRef": "syms", "cgroupPatterns": [cg_mini.rel]},
            {"name": "full", "profileRef": "syms", "cgroupPatterns": [cg_full.rel]},
            {"name": "bomb", "profileRef": "syms", "cgroupPatterns": [cg_bomb.rel]},
        ],
    })
    try:
        agent.start()
        p = run_in_cgroup(cg_mini, [MINI, "--seconds", "3", "--name", "mini"])
        assert p.stdout.readline().decode().startswith("ready")
        q = workload(cg_full, 3, name="full")
        b = None
        if os.access(BOMB, os.X_OK):
            # A decompression bomb in .gnu_debugdata: the error is shown
            # where the user looks, and .dynsym still names what it can.
            b = run_in_cgroup(cg_bomb, [BOMB, "--seconds", "1", "--name", "bomb"])
            assert b.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0 and q.wait(60) == 0 and (b is None or b.wait(60) == 0)
        cg_mini.remove()
        cg_full.remove()
        cg_bomb.remove()

        if b is not None:
            r = agent.wait_summary(lambda s: s["cgroup"] == cg_bomb.rel)
            m = mapping_of(r, BOMB)
            log("bomb mapping:", m)
            assert m["symbols"] == "dynsym (.gnu_debugdata unusable)", m

        r = agent.wait_summary(lambda s: s["cgroup"] == cg_mini.rel)
        m = mapping_of(r, MINI)
        log("minidebuginfo mapping:", m)
        assert m["symbols"] == "minidebuginfo", m
        assert m["unsymbolizedShare"] < 0.001, m
        assert_shares(r)
        # The callers, static or not, are named too.
        chains = [st for st in folded(r) if st[-1] == "hot_alpha"]
        assert any(st[-4:-1] == ("main", "run_workload", "work_cycle") for st in chains), chains[:5]

        r = agent.wait_summary(lambda s: s["cgroup"] == cg_full.rel)
        m = mapping_of(r, WORKLOAD)
        log("unstripped mapping:", m)
        assert m["symbols"] == "symtab", m
        assert_shares(r)
        # Shared libraries have theirs too (Debian's libc: .dynsym and no
        # .symtab); the kernel has none of this.
        for x in r["mappings"]:
            if x["kernel"]:
                assert "symbols" not in x, x
            else:
                assert x["symbols"] in ("symtab", "dynsym", "minidebuginfo", "debug file", "gopclntab", "none",
                                        "debuginfod"), x
    finally:
        agent.cleanup()
        cg_mini.remove()
        cg_full.remove()
        cg_bomb.remove()


if __name__ == "__main__":
    main([test_minidebuginfo_symbols])
