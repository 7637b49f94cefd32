#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Go stacks, exactly: the Go workload (tests/go/) with --leaves spends its
time in three frameless leaves (main.leafAlpha, leafBeta, leafGamma: they
call nothing, so Go gives them no frame and no frame pointer) in a 5:3:2
ratio, called from main.main. Go binaries ship no .eh_frame; cgprof
unwinds their Go functions with .gopclntab's pcsp table, the stack pointer
delta at every address, as Go's own traceback does.

Profiled with the default settings, stripped (-ldflags="-s -w": no
.symtab, no DWARF) and unstripped:
  - main.main must be directly above the leaf in >= 95 % of the leaf
    samples (and runtime.main above it), each leaf's share within 5 points
    of 50/30/20;
  - the mapping's unwind table must say it came from ".gopclntab";
  - >= 95 % of the walks complete (up to runtime.goexit or mstart), and the
    samples in time.now's vDSO call, which runs on another stack (g0's),
    still under runtime.goexit;runtime.main;main.main.
First, the fixture is what it claims: walked by frame pointer
("unwind": "frame-pointer"), the leaves' caller is lost (main.main above
the leaf in few samples)."""

import os
import subprocess

from cgproflib import Agent, Cgroup, folded, log, main, mapping_of, profile, run_in_cgroup, skip_prereq

UNSTRIPPED = os.environ.get("CGPROF_GO_WORKLOAD")
STRIPPED = os.environ.get("CGPROF_GO_WORKLOAD_STRIPPED")
CGO = os.environ.get("CGPROF_GO_CGO_WORKLOAD")
LEAVES = {"main.leafAlpha": 50, "main.leafBeta": 30, "main.leafGamma": 20}
SECONDS = 3  # ~3000 samples at 999 Hz
MIN_CALLER = 95.0  # % of the leaf samples with main.main right above the leaf
TOLERANCE = 5.0  # points


def require(path):
    if not path or not os.access(path, os.X_OK):
        skip_prereq("the Go workload is not built (no Go toolchain)")
    return path


def run(path, tag, **profile_keys):
    """The workload with --leaves in a cgroup of its own, profiled; returns
    (report, folded stacks)."""
    cg = Cgroup(f"cgprof-test-gounwind-{tag}-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="go", **profile_keys)],
        "targets": [{"name": "go", "profileRef": "go", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        p = run_in_cgroup(cg, [path, "--seconds", str(SECONDS), "--leaves"])
        assert p.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0
        cg.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        stacks = folded(r)
        return r, stacks
    finally:
        agent.cleanup()
        cg.remove()


def leaf_stats(stacks):
    """Per leaf: (samples, samples with main.main right above it, with
    runtime.main above that)."""
    out = {}
    for leaf in LEAVES:
        n = caller = chain = 0
        for st, c in stacks.items():
            if st[-1] != leaf:
                continue
            n += c
            if len(st) >= 2 and st[-2] == "main.main":
                caller += c
                if len(st) >= 3 and st[-3] == "runtime.main":
                    chain += c
        out[leaf] = (n, caller, chain)
    return out


def summarize(label, stacks):
    stats = leaf_stats(stacks)
    total = sum(n for n, _, _ in stats.values())
    caller = sum(c for _, c, _ in stats.values())
    chain = sum(c for _, _, c in stats.values())
    assert total > 0, f"{label}: no samples in the leaves: {sorted(stacks.items(), key=lambda x: -x[1])[:10]}"
    shares = {leaf: 100.0 * n / total for leaf, (n, _, _) in stats.items()}
    log(f"{label}: {total} leaf samples; main.main above the leaf {100.0 * caller / total:.1f}%, "
        f"runtime.main;main.main {100.0 * chain / total:.1f}%; shares " +
        ", ".join(f"{leaf} {s:.1f}%" for leaf, s in shares.items()))
    return total, 100.0 * caller / total, 100.0 * chain / total, shares


def test_fixture_frameless():
    """By frame pointer, a frameless leaf hides its caller: the fixture is
    what it claims."""
    path = require(STRIPPED)
    _, stacks = run(path, "fp", unwind="frame-pointer")
    _, caller, _, _ = summarize("frame-pointer walk (stripped)", stacks)
    assert caller < 50.0, f"main.main above the leaf in {caller:.1f}% by frame pointer: are the leaves frameless?"


def check_build(path, tag):
    r, stacks = run(path, tag)
    m = mapping_of(r, path)
    log(f"{tag} mapping: {m}")
    log(f"{tag} unwind: {r.get('unwind')}")
    assert m["unwind"]["table"] == ".gopclntab", m
    # Go keeps frame pointers (its rows count from rsp, pcsp being exact).
    assert m["likelyNoFramePointers"] is False, m
    others = sorted(((c, st) for st, c in stacks.items() if st[-1] not in LEAVES), reverse=True)
    log(f"{tag}: the other stacks, most samples first:\n    " +
        "\n    ".join(f"{c} {';'.join(st)}" for c, st in others[:8]))
    # The walks end where Go's traceback does (runtime.goexit, mstart):
    # complete, the vDSO call of time.now (on the g0 stack) included.
    u = r["unwind"]
    assert u["tableWalkEnds"]["complete"] >= 0.95 * u["walks"]["tables"], u
    vdso = {st: c for st, c in stacks.items() if "time.now" in st}
    through = sum(c for st, c in vdso.items() if st[:4] == (st[0], "runtime.goexit", "runtime.main", "main.main"))
    log(f"{tag}: {sum(vdso.values())} samples in time.now, {through} of them under main.main")
    assert through >= 0.9 * sum(vdso.values()), vdso
    total, caller, chain, shares = summarize(f"default settings ({tag})", stacks)
    assert total >= 500, total
    assert caller >= MIN_CALLER, f"{tag}: main.main above the leaf in {caller:.1f}% < {MIN_CALLER}%"
    assert chain >= MIN_CALLER, f"{tag}: runtime.main;main.main above the leaf in {chain:.1f}%"
    for leaf, want in LEAVES.items():
        assert abs(shares[leaf] - want) <= TOLERANCE, f"{tag}: {leaf} {shares[leaf]:.1f}% is not {want}±{TOLERANCE}%"


def test_stripped():
    check_build(require(STRIPPED), "stripped")


def test_unstripped():
    path = require(UNSTRIPPED)
    # The unstripped build has Go's .debug_frame too: .gopclntab wins.
    sections = subprocess.run(["readelf", "-SW", path], check=True, capture_output=True, text=True).stdout
    assert ".gopclntab" in sections and ".symtab" in sections, sections
    check_build(path, "unstripped")


def test_cgo():
    """A cgo binary: Go functions from .gopclntab, C from .eh_frame, and
    the stack switch of asmcgocall (to the g0 stack) followed by rbp: the
    C leaf's samples reach main.main."""
    path = require(CGO)
    cg = Cgroup(f"cgprof-test-gounwind-cgo-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="go")],
        "targets": [{"name": "go", "profileRef": "go", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        p = run_in_cgroup(cg, [path, "--seconds", str(SECONDS)])
        assert p.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0
        cg.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        stacks = folded(r)
    finally:
        agent.cleanup()
        cg.remove()
    m = mapping_of(r, path)
    log(f"cgo mapping: {m}")
    log(f"cgo unwind: {r.get('unwind')}")
    assert m["unwind"]["table"] == ".gopclntab+.eh_frame", m
    for leaf in ("main.goLeaf", "c_leaf"):
        mine = {st: c for st, c in stacks.items() if st[-1] == leaf}
        n = sum(mine.values())
        under = sum(c for st, c in mine.items() if st[1:4] == ("runtime.goexit", "runtime.main", "main.main"))
        top = sorted(((c, st) for st, c in mine.items()), reverse=True)[:3]
        log(f"cgo: {leaf}: {n} samples, {100.0 * under / max(n, 1):.1f}% under runtime.goexit;runtime.main;"
            f"main.main; most: " + " | ".join(f"{c} {';'.join(st)}" for c, st in top))
        assert n >= 200, (leaf, n)
        assert under >= MIN_CALLER / 100.0 * n, (leaf, under, n)
    # The C leaf: its C wrapper, asmcgocall, then Go (cgocall, whose rbp
    # the step starts from, is not shown).
    c = {st: n for st, n in stacks.items() if st[-1] == "c_leaf"}
    chain = sum(n for st, n in c.items() if len(st) >= 4 and st[-3] == "runtime.asmcgocall" and
                st[-4] == "main._Cfunc_c_leaf")
    assert chain >= MIN_CALLER / 100.0 * sum(c.values()), (chain, sum(c.values()))


if __name__ == "__main__":
    main([test_fixture_frameless, test_stripped, test_unstripped, test_cgo])
