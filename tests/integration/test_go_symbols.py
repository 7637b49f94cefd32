#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Go symbols: the Go workload (tests/go/) built as Go programs ship,
stripped (-ldflags="-s -w": no .symtab, no DWARF), profiled in a cgroup.
Its only symbols are its .gopclntab: main.goAlpha, main.goBeta and
main.goGamma must be named in their 5:3:2 ratio under main.main, the
mapping must say its symbols came from "gopclntab", and main.gammaStep,
which the compiler inlines into goGamma, must be a frame of its own under
goGamma: in profile.folded, and in profile.pb.gz as an inlined Line of
goGamma's Location, as go tool pprof shows it, with files and lines."""

import os
import re
import shutil
import subprocess
import tempfile

from cgproflib import Agent, Cgroup, folded, log, main, mapping_of, profile, run_in_cgroup, skip_prereq
from test_pprof import GoPprof

STRIPPED = os.environ.get("CGPROF_GO_WORKLOAD_STRIPPED")
SOURCE = os.environ.get("CGPROF_GO_SOURCE",
                        os.path.join(os.path.dirname(__file__), "..", "go", "main.go"))
HOT = ("main.goAlpha", "main.goBeta", "main.goGamma")


def marker_line(marker):
    with open(SOURCE) as f:
        for n, line in enumerate(f, 1):
            if f"// LINE:{marker}" in line:
                return n
    raise AssertionError(f"no marker {marker} in {SOURCE}")


def test_go_symbols():
    if not STRIPPED or not os.access(STRIPPED, os.X_OK):
        skip_prereq("the Go workload is not built (no Go toolchain)")
    # The fixture is what the test claims: a .gopclntab, no .symtab.
    sections = subprocess.run(["readelf", "-SW", STRIPPED], check=True, capture_output=True, text=True).stdout
    assert ".gopclntab" in sections and ".symtab" not in sections, sections

    tmp = tempfile.mkdtemp(prefix="cgprof-go-")
    cg = Cgroup(f"cgprof-test-go-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="go", formats=["folded", "json", "pprof"])],
        "targets": [{"name": "go", "profileRef": "go", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        p = run_in_cgroup(cg, [STRIPPED, "--seconds", "3"])
        assert p.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0
        cg.remove()

        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        m = mapping_of(r, STRIPPED)
        log("Go mapping:", m)
        assert m["symbols"] == "gopclntab", m
        assert m["unsymbolizedShare"] < 0.01, m

        # The shares: samples whose stack holds each function (goGamma's
        # own code is mostly gammaStep, inlined), among those holding one.
        stacks = folded(r)
        total = sum(stacks.values())
        hot = {n: sum(c for st, c in stacks.items() if n in st) for n in HOT}
        in_hot = sum(hot.values())
        log(f"{total} samples, {in_hot} in the hot functions: " +
            ", ".join(f"{n} {100.0 * c / in_hot:.1f}%" for n, c in hot.items()))
        assert in_hot >= 0.9 * total, (in_hot, total)
        for name, want in zip(HOT, (50, 30, 20)):
            share = 100.0 * hot[name] / in_hot
            assert abs(share - want) <= 5, f"{name}: {share:.1f}% is not {want}±5%"

        # main.main above them, the workload's process at the root. (Go code
        # is walked with .gopclntab's pcsp, exact in prologues too; where a
        # table is not loaded yet, by frame pointer: a sample in a
        # function's first instructions, before it pushed its frame
        # pointer, misses its caller and shows runtime.main there.)
        for name in HOT:
            callers = {}
            for st, c in stacks.items():
                if name in st:
                    caller = st[st.index(name) - 1]
                    callers[caller] = callers.get(caller, 0) + c
            assert set(callers) <= {"main.main", "runtime.main"}, (name, callers)
            assert callers.get("main.main", 0) >= 0.98 * sum(callers.values()), (name, callers)
        # gammaStep, inlined, is a frame under goGamma: most of goGamma's samples.
        inlined = sum(c for st, c in stacks.items() if st[-2:] == ("main.goGamma", "main.gammaStep"))
        log(f"goGamma: {hot['main.goGamma']} samples, {inlined} in inlined gammaStep")
        assert inlined >= 0.5 * hot["main.goGamma"], (inlined, hot["main.goGamma"])
        top = {t["name"]: t for t in r["topFunctions"]}
        assert top["main.gammaStep"]["file"].endswith("/main.go"), top["main.gammaStep"]

        # pprof: goGamma's Location lists gammaStep first, then goGamma,
        # with files and the lines of the source's markers.
        check_pprof_inline(os.path.join(r["_dir"], "profile.pb.gz"), tmp)
    finally:
        agent.cleanup()
        cg.remove()
        shutil.rmtree(tmp, ignore_errors=True)


def check_pprof_inline(path, tmp):
    pprof = GoPprof(tmp)
    step, call = marker_line("gammaStep"), marker_line("gammaCall")
    # -traces -lines: each sample's frames, leaf first, at their file:line;
    # pprof marks the inlined ones.
    traces = pprof.run("-traces", "-lines", "-symbolize=none", path)
    blocks = [b for b in re.split(r"^-+\+-+$", traces, flags=re.M) if "main.gammaStep" in b]
    assert blocks, traces[:3000]
    lines = [ln.strip() for ln in blocks[0].splitlines() if ln.strip()]
    log("a pprof trace through gammaStep:\n    " + "\n    ".join(lines))
    names = [re.sub(r"^\S+\s{2,}", "", ln) for ln in lines]
    i = next(k for k, n in enumerate(names) if n.startswith("main.gammaStep"))
    assert re.fullmatch(rf"main\.gammaStep \S*/main\.go:{step} \(inline\)", names[i]), names
    assert re.fullmatch(rf"main\.goGamma \S*/main\.go:{call}", names[i + 1]), names
    assert re.fullmatch(r"main\.main \S*/main\.go:\d+", names[i + 2]), names


if __name__ == "__main__":
    main([test_go_symbols])
