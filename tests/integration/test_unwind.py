#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""DWARF stack unwinding ("unwind": "dwarf" in a profile) against perf
record --call-graph dwarf, on programs built without frame pointers.

Each fixture (tests/unwind/) spends its CPU time in known leaves, in a
designed ratio, under a fixed call chain. For each, in the same test:
  - perf record --call-graph dwarf runs it (the reference; the test first
    checks that perf sees the chain and the ratio, i.e. that the fixture is
    what it claims to be);
  - cgprofd profiles it in a cgroup with DWARF unwinding;
  - of the samples in the leaves, >= 95 % must hold the whole chain from main
    to the leaf, frame for frame (recursion included, exactly as deep), each
    leaf's share must be within 5 points of the design, and both must be
    within 5 points of perf's.
The frame pointer build's frameless leaf shows what DWARF adds even there
(perf -g loses the leaf's caller), and Debian's own python3.11 (no frame
pointers) must reach main/Py_BytesMain/Py_RunMain at least as often as perf,
over the samples walked with its tables (those taken while the agent loaded
them cannot), less the two runs' sampling noise, measured from them.

The numbers (ours and perf's) are logged for each fixture."""

import math
import os

from cgproflib import Agent, Cgroup, folded, log, main, profile, run_in_cgroup, skip_prereq
from perflib import Shares, ends_with_chain, of_comm, perf_record_dwarf, perf_record_fp, share_with

BUILD = os.environ.get("CGPROF_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
SOURCE = os.environ.get("CGPROF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def fixture(var, name):
    return os.environ.get(var, os.path.join(BUILD, "tests", name))


NOFP = fixture("CGPROF_UNWIND_NOFP", "cgprof-unwind-nofp")
FP = fixture("CGPROF_UNWIND_FP", "cgprof-unwind-fp")
CXX = fixture("CGPROF_UNWIND_CXX", "cgprof-unwind-cxx")
SHLIB = fixture("CGPROF_UNWIND_SHLIB", "cgprof-unwind-shlib")
DEEP = fixture("CGPROF_UNWIND_DEEP", "cgprof-unwind-deep")
SIGNAL = fixture("CGPROF_UNWIND_SIGNAL", "cgprof-unwind-signal")
PY_WORKLOAD = os.environ.get("CGPROF_UNWIND_PY", os.path.join(SOURCE, "tests", "unwind", "py-workload.py"))
PYTHON = "/usr/bin/python3.11"
PY_ROOTS = {"main", "Py_BytesMain", "Py_RunMain"}

# What the profile asks for: the feature under test.
PROFILE_KEYS = {"unwind": "dwarf"}
FREQ = 999
SECONDS = 3  # ~3000 samples a run

MIN_CHAIN = 95.0  # % of the leaf samples with the whole chain
TOLERANCE = 5.0  # points: a leaf's share against the design, ours against perf's
MIN_LEAF_SAMPLES = 1000  # enough for 5 points to be > 5 standard deviations

# The fixtures' chains (main .. the leaf's caller) and leaves with their
# designed shares (%).
C_CHAIN = ["main", "run_all", "stage_outer"] + ["descend"] * 7 + ["stage_inner"]
C_LEAVES = {"hot_alpha": 50, "hot_beta": 30, "hot_gamma": 20}
CXX_CHAIN = ["main", "app::Runner::run", "app::Pipeline<int>::step", "app::MixStage::process"]
CXX_LEAVES = {"app::hot_a": 70, "app::hot_b": 30}
SHLIB_CHAIN = ["main", "lib_entry", "lib_mid"]
SHLIB_LEAVES = {"lib_hot_x": 60, "lib_hot_y": 40}
DEEP_CHAIN = ["main", "deep_start"] + ["recurse"] * 110
DEEP_LEAVES = {"deep_leaf": 100}
DEEPER_CHAIN = ["main", "deep_start"] + ["recurse"] * 400  # --deep
SIGNAL_CHAIN = ["main", "interrupted_work"]  # then the trampoline, then the handler
SIGNAL_HANDLER = "alarm_handler"
MIN_SIGNAL_CHAIN = 90.0  # % of the handler's samples with main -> interrupted_work under it
MIN_SIGNAL_SAMPLES = 300  # in the handler (~650 in 3 s: the CPU timer fires every ~10 ms, the handler spins 3 ms)


def ours_label():
    return "cgprofd " + (" ".join(f"{k}={v}" for k, v in PROFILE_KEYS.items()) or "(default profile)")


def require(path):
    if not os.access(path, os.X_OK):
        raise AssertionError(f"fixture {path} is missing: build the tests (meson compile)")
    return path


def agent_run(tag, argv, seconds=SECONDS):
    """Runs argv (+ --seconds) alone in a new cgroup that cgprofd profiles
    with PROFILE_KEYS; returns the report's folded stacks."""
    return agent_run_report(tag, argv, seconds)[0]


def agent_run_report(tag, argv, seconds=SECONDS):
    """agent_run(), and the report's summary.json too: (stacks, summary)."""
    cg = Cgroup(f"cgprof-test-unwind-{tag}-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="unwind", frequency=FREQ, **PROFILE_KEYS)],
        "targets": [{"name": "t", "profileRef": "unwind", "cgroupPatterns": [cg.rel]}],
    })
    try:
        try:
            agent.start()
        except AssertionError:
            if "unknown key" in agent.log() and "unwind" in agent.log():
                raise AssertionError("cgprofd does not accept the profile key \"unwind\": "
                                     + agent.log().strip().splitlines()[-1]) from None
            raise
        p = run_in_cgroup(cg, [*argv, "--seconds", str(seconds)])
        line = p.stdout.readline().decode()
        assert line.startswith("ready"), f"{argv[0]} did not start: {line!r}"
        assert p.wait(timeout=seconds + 60) == 0, f"{argv} exited {p.returncode}"
        # Removing the cgroup ends the session, which writes its report.
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        st = report.get("stacks", {})
        log(f"[{tag}] cgprofd report: {report['samples'].get('total')} samples, stacks "
            + str({k: v for k, v in st.items() if k != "userDepthHistogram"}))
        stacks = folded(report)
        rc = agent.stop()
        assert rc == 0, f"cgprofd exited {rc}:\n{agent.log()[-4000:]}"
        return stacks, report
    finally:
        agent.cleanup()
        cg.remove()


def assert_fixture(ref, chain_min=MIN_CHAIN, ratio=None):
    """The fixture is what it claims: perf's DWARF unwinding sees the chain
    and the ratio. (A failure here is the fixture's or perf's, not ours.)"""
    assert ref.leaf >= MIN_LEAF_SAMPLES, f"fixture broken? {ref}\n{ref.top()}"
    assert ref.leaf_pct >= 90, f"fixture broken: its time is not in its leaves: {ref}\n{ref.top()}"
    assert ref.chain_pct >= chain_min, f"fixture broken: {ref}\n{ref.top()}"
    for leaf, want in (ratio or {}).items():
        assert abs(ref.leaves[leaf] - want) <= TOLERANCE, f"fixture broken: {leaf} is not {want}%: {ref}"


def assert_ours(tag, ours, ref, ratio):
    """Our profile against the design and against perf's."""
    assert ours.leaf >= MIN_LEAF_SAMPLES, f"[{tag}] too few samples: {ours}\n{ours.top()}"
    # The leaf is the sampled instruction, whatever the unwinding: as many
    # samples land in the leaves as perf's (none lost, none empty).
    assert abs(ours.leaf_pct - ref.leaf_pct) <= TOLERANCE, \
        f"[{tag}] {ours.leaf_pct:.1f}% of our samples in the leaves, perf {ref.leaf_pct:.1f}%\nours:\n{ours.top()}"
    assert ours.chain_pct >= MIN_CHAIN, \
        f"[{tag}] only {ours.chain_pct:.1f}% of our samples hold the whole chain: {ours}\n" \
        f"our commonest stacks without it:\n{ours.missing()}"
    for leaf, want in ratio.items():
        assert abs(ours.leaves[leaf] - want) <= TOLERANCE, f"[{tag}] {leaf} is not {want}±{TOLERANCE}%: {ours}"
    # Agreement with perf, like with like: both over the samples in the
    # leaves, the same chain frame for frame. perf --call-graph dwarf copies
    # 8 KB of stack per sample and these stacks use under 2 KB, so perf's
    # walks are whole (100 % by hand); what either side loses is its
    # unwinder's, and the margin is the two runs' sampling noise (a share
    # near 50 % over ~3000 samples: ~1 point, so 5 points is > 3 sigma of
    # the difference).
    assert abs(ours.chain_pct - ref.chain_pct) <= TOLERANCE, \
        f"[{tag}] full chain: ours {ours.chain_pct:.1f}% vs perf {ref.chain_pct:.1f}%\n" \
        f"our commonest stacks without it:\n{ours.missing()}"
    for leaf in ratio:
        assert abs(ours.leaves[leaf] - ref.leaves[leaf]) <= TOLERANCE, \
            f"[{tag}] {leaf}: ours {ours.leaves[leaf]:.1f}% vs perf {ref.leaves[leaf]:.1f}%"


def compare(tag, exe, chain, ratio, extra=()):
    require(exe)
    comm = os.path.basename(exe)
    argv = [exe, *extra]
    ref = Shares(perf_record_dwarf(argv[:1], SECONDS, freq=FREQ, extra_args=extra), comm, chain, ratio,
                 f"[{tag}] perf --call-graph dwarf")
    log(ref)
    assert_fixture(ref, ratio=ratio)
    ours = Shares(agent_run(tag, argv), comm, chain, ratio, f"[{tag}] {ours_label()}")
    log(ours)
    assert_ours(tag, ours, ref, ratio)
    return ref, ours


def test_c_without_frame_pointers():
    compare("c-nofp", NOFP, C_CHAIN, C_LEAVES)


def test_c_with_frame_pointers():
    """The frame pointer build: DWARF must do at least what the frame
    pointers do (perf -g sees the whole chain too)."""
    require(FP)
    fpref = Shares(perf_record_fp([FP], SECONDS, freq=FREQ), os.path.basename(FP), C_CHAIN, C_LEAVES,
                   "[c-fp] perf -g")
    log(fpref)
    assert_fixture(fpref, ratio=C_LEAVES)
    compare("c-fp", FP, C_CHAIN, C_LEAVES)


def test_frameless_leaf():
    """main -> work_unit -> hot_leaf in the frame pointer build, hot_leaf
    with no frame: a frame pointer walk skips work_unit, DWARF does not."""
    require(FP)
    comm = os.path.basename(FP)
    argv = [FP, "--frameless"]
    leaves = {"hot_leaf": 100}

    fpref = Shares(perf_record_fp([FP], SECONDS, freq=FREQ, extra_args=["--frameless"]), comm,
                   ["main", "work_unit"], leaves, "[frameless] perf -g")
    lost, _ = share_with(fpref.stacks, comm, lambda f: ends_with_chain(f, ["main", "hot_leaf"]))
    log(fpref, f"; main;hot_leaf (work_unit lost) {lost:.1f}%")
    # The fixture: the frame pointer walk really loses work_unit.
    assert fpref.leaf >= MIN_LEAF_SAMPLES, fpref
    assert fpref.chain_pct <= TOLERANCE, f"fixture broken: hot_leaf has a frame: {fpref}\n{fpref.top()}"
    assert lost >= MIN_CHAIN, f"fixture broken: {fpref}\n{fpref.top()}"

    ref = Shares(perf_record_dwarf([FP], SECONDS, freq=FREQ, extra_args=["--frameless"]), comm,
                 ["main", "work_unit"], leaves, "[frameless] perf --call-graph dwarf")
    log(ref)
    assert_fixture(ref)

    ours = Shares(agent_run("frameless", argv), comm, ["main", "work_unit"], leaves,
                  f"[frameless] {ours_label()}")
    log(ours)
    assert_ours("frameless", ours, ref, leaves)


def test_cxx():
    if not os.path.exists(CXX) and "CGPROF_UNWIND_CXX" not in os.environ:
        skip_prereq("the C++ fixture was not built (no C++ compiler: scripts/deps installs g++)")
    ref, ours = compare("c++", CXX, CXX_CHAIN, CXX_LEAVES)
    # The samples taken while an exception was in flight (inside libgcc's
    # unwinder or the personality routine): few, logged for comparison.
    def throwing(frames):
        return any(x in ("__cxa_throw", "_Unwind_RaiseException") for x in frames)

    for who, s in (("perf", ref), ("ours", ours)):
        n = sum(c for k, c in s.stacks.items() if throwing(k[1:]))
        whole = sum(c for k, c in s.stacks.items() if throwing(k[1:]) and "app::Runner::run" in k)
        log(f"[c++] {who}: {n} samples during a throw, {whole} of them reach app::Runner::run")


def test_shared_library():
    compare("shlib", SHLIB, SHLIB_CHAIN, SHLIB_LEAVES)


def test_deep_recursion():
    compare("deep", DEEP, DEEP_CHAIN, DEEP_LEAVES)


def test_deeper_recursion():
    """400 recursive frames (406 with main's callers): past the 128 frames
    of the stacks' short tier, under the walk's 512. perf's own walk stops
    at kernel.perf_event_max_stack (127): judged against the design alone,
    frame for frame, and no sample may be counted truncated."""
    require(DEEP)
    comm = os.path.basename(DEEP)
    stacks, report = agent_run_report("deeper", [DEEP, "--deep"])
    ours = Shares(stacks, comm, DEEPER_CHAIN, DEEP_LEAVES, f"[deeper] {ours_label()}")
    log(ours)
    assert ours.leaf >= MIN_LEAF_SAMPLES, f"[deeper] too few samples: {ours}\n{ours.top()}"
    assert ours.chain_pct >= MIN_CHAIN, \
        f"[deeper] only {ours.chain_pct:.1f}% of our samples hold the whole chain: {ours}\n" \
        f"our commonest stacks without it:\n{ours.missing()}"
    st = report["stacks"]
    assert st["maxUserDepth"] >= len(DEEPER_CHAIN) + 1, st
    assert st["truncatedSamples"] == 0, st


def through_signal(frames, chain, handler):
    """frames (root first) end with chain, at most one frame (the signal
    trampoline: glibc's __restore_rt, often without a symbol), handler."""
    n = len(chain)
    if not frames or frames[-1] != handler:
        return False
    return any(len(frames) >= n + 1 + gap and list(frames[-n - 1 - gap:-1 - gap]) == chain for gap in (1, 0))


def test_signal_handler():
    """A SIGALRM handler spinning above the function it interrupted: the
    walk goes through glibc's signal trampoline (its unwind entry, with the
    'S' augmentation, says the interrupted registers are in the ucontext on
    the stack) into the interrupted function, then on to main."""
    require(SIGNAL)
    comm = os.path.basename(SIGNAL)
    s = of_comm(agent_run("signal", [SIGNAL]), comm)
    handler = {k[1:]: c for k, c in s.items() if len(k) > 1 and k[-1] == SIGNAL_HANDLER}
    n = sum(handler.values())
    ok = sum(c for k, c in handler.items() if through_signal(k, SIGNAL_CHAIN, SIGNAL_HANDLER))
    top = "\n".join(f"  {c:6d} {';'.join(k[-6:])}" for k, c in sorted(handler.items(), key=lambda kv: -kv[1])[:8])
    pct = 100.0 * ok / max(n, 1)
    log(f"[signal] {sum(s.values())} samples, {n} in {SIGNAL_HANDLER}, {pct:.1f}% of them under "
        f"{' -> '.join(SIGNAL_CHAIN)}; commonest:\n{top}")
    assert n >= MIN_SIGNAL_SAMPLES, f"[signal] too few samples in the handler: {n} of {sum(s.values())}\n{top}"
    assert pct >= MIN_SIGNAL_CHAIN, f"[signal] only {pct:.1f}% of the handler's samples reach main:\n{top}"


def noise_margin(share1, n1, share2, n2, sigmas=4):
    """Points by which two shares (%) of two separate runs, over n1 and n2
    samples, may differ by sampling alone: `sigmas` standard deviations of
    the difference of two binomial proportions, measured from the runs
    themselves. A share is taken as at least one sample away from 0 and 100 %
    (a share of 100 % over n samples is known to about 1/n)."""
    var = 0.0
    for share, n in ((share1, n1), (share2, n2)):
        q = min(max(share / 100, 1 / n), 1 - 1 / n)
        var += q * (1 - q) / n
    return 100 * sigmas * math.sqrt(var)


def unrooted(stacks, n=8):
    """The commonest of python3.11's stacks that reach no root (for a failure
    message), root side first, long ones cut in the middle."""
    s = of_comm(stacks, os.path.basename(PYTHON))
    bad = sorted(((c, k) for k, c in s.items() if not PY_ROOTS & set(k[1:])), key=lambda x: -x[0])
    out = []
    for c, k in bad[:n]:
        f = list(k)
        if len(f) > 14:
            f = f[:7] + ["..."] + f[-6:]
        out.append(f"  {c:6d} {';'.join(f)}")
    return "\n".join(out)


def test_python_interpreter():
    """Debian's python3.11 (no frame pointers) running pure Python: the
    interpreter's native stack down to main. Python 3.11 runs Python calls
    in the same C frame, so the native stacks are ~15 frames deep whatever
    the Python recursion; main tail-calls Py_BytesMain, so main itself is
    not on the stack (perf shows __libc_start_call_main;Py_BytesMain)."""
    if not os.access(PYTHON, os.X_OK):
        skip_prereq(f"no {PYTHON}")
    if not os.path.exists(PY_WORKLOAD):
        raise AssertionError(f"no {PY_WORKLOAD}")
    comm = os.path.basename(PYTHON)
    argv = [PYTHON, PY_WORKLOAD]

    def rooted(frames):
        return bool(PY_ROOTS & set(frames))

    seconds = 8
    ref, ref_total = share_with(perf_record_dwarf(argv, seconds, freq=FREQ), comm, rooted)
    log(f"[python] perf --call-graph dwarf: {ref_total} samples, {ref:.2f}% reach main/Py_BytesMain/Py_RunMain")
    assert ref_total >= MIN_LEAF_SAMPLES and ref >= 90, "perf cannot unwind python3.11 here"
    stacks, report = agent_run_report("python", argv, seconds)
    s = of_comm(stacks, comm)
    total = sum(s.values())
    reached = sum(n for k, n in s.items() if rooted(k[1:]))
    assert total >= MIN_LEAF_SAMPLES, f"too few samples of {comm}: {total}"
    # The samples taken before the agent had loaded python3.11's tables were
    # walked by frame pointer (counted as pending), which this build has
    # not: they cannot reach main. How many there are is how long the
    # loading took, i.e. the machine's load (on an idle one a handful, the
    # interpreter's first milliseconds; under load, up to 1 %), not the
    # unwinder's doing: they are left out, at most as many as did not reach
    # a root (the session's pending count may include the launching
    # shell's few).
    pending = report["unwind"]["walks"]["pending"]
    excused = min(pending, total - reached)
    ours = 100.0 * reached / (total - excused)
    log(f"[python] {ours_label()}: {total} samples, {100.0 * reached / total:.2f}% reach "
        f"main/Py_BytesMain/Py_RunMain; {pending} walked while the tables loaded, {ours:.2f}% of the others")
    # At least perf's share, less the sampling noise of two separate runs
    # (perf's share is ~99.9 %: its unrooted samples are the interpreter's
    # start in ld.so, a handful a run).
    margin = noise_margin(ours, total - excused, ref, ref_total)
    log(f"[python] margin: {margin:.2f} points (4 standard deviations of the two runs' difference)")
    assert ours >= ref - margin, \
        f"ours {ours:.2f}% < perf's {ref:.2f}% - {margin:.2f}; our stacks that do not:\n" + unrooted(stacks)


if __name__ == "__main__":
    main([
        test_c_without_frame_pointers,
        test_c_with_frame_pointers,
        test_frameless_leaf,
        test_cxx,
        test_shared_library,
        test_deep_recursion,
        test_deeper_recursion,
        test_signal_handler,
        test_python_interpreter,
    ])
