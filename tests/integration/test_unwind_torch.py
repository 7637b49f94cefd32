#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Native stacks at production scale: a real PyTorch training loop.

Debian's python3-torch 1.13 (CPU build) under Debian's python3.11, an MLP
trained with loss.backward() and SGD (tests/unwind/torch-train.py),
profiled by cgprofd with the default profile (unwind auto, Python frames).
Neither the interpreter nor libtorch_cpu (1.4 M unwind rows), libtorch_python
nor BLAS keeps frame pointers: only their .eh_frame tables reach from BLAS
back to the Python frames. The test asserts what a PyTorch user needs:
  - of the samples whose leaf is in BLAS, >= 90 % have a libtorch frame
    (the dispatcher, at::native, the autograd engine) between the leaf and
    the innermost Python frame, and a Python frame above it;
  - <= 2 % of the table walks end in badFrame;
  - every torch and BLAS mapping of the report was unwound with its
    .eh_frame (loaded in full: not "not loaded: ..."); a file whose
    .eh_frame holds no FDE (Debian's libtorch.so shim) says "none".
Skips where python3-torch is not installed (scripts/deps installs it)."""

import os
import subprocess

from cgproflib import Agent, Cgroup, elf_section, log, main, profile, run_in_cgroup, skip_prereq
from test_pprof import decode_profile

SOURCE = os.environ.get("CGPROF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
WORKLOAD = os.path.join(SOURCE, "tests", "unwind", "torch-train.py")
PYTHON = "/usr/bin/python3.11"
FREQ = 999
SECONDS = 8

MIN_LIBTORCH_BETWEEN = 90.0  # % of the BLAS-leaf samples
MAX_BAD_FRAME = 2.0  # % of the table walks
MIN_BLAS_SAMPLES = 300


def require_torch():
    if not os.access(PYTHON, os.X_OK):
        skip_prereq(f"{PYTHON} (Debian's python3.11) is not installed")
    r = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True, text=True)
    if r.returncode != 0:
        skip_prereq("Debian's python3-torch is not installed (scripts/deps installs it): "
                    + (r.stderr.strip().splitlines() or ["?"])[-1])


def is_blas(path):
    return "blas" in os.path.basename(path).lower()


def is_torch(path):
    return "/torch/" in path or os.path.basename(path).startswith(("libtorch", "libc10"))


def has_fdes(path):
    """Whether the file's .eh_frame holds more than its terminator (a
    4-byte zero length): its functions have unwind rows."""
    try:
        _, size = elf_section(path, ".eh_frame")
    except AssertionError:
        return False
    return size > 4


def is_libtorch(path):
    return os.path.basename(path).startswith("libtorch")


def run_profiled():
    cg = Cgroup(f"cgprof-test-unwind-torch-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="torch", frequency=FREQ, formats=["folded", "json", "pprof"])],
        "targets": [{"name": "t", "profileRef": "torch", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        p = run_in_cgroup(cg, [PYTHON, WORKLOAD, "--seconds", str(SECONDS)])
        line = p.stdout.readline().decode()
        assert line.startswith("ready"), f"torch-train.py did not start: {line!r}"
        out = p.stdout.read().decode()
        assert p.wait(timeout=SECONDS + 120) == 0, f"torch-train.py exited {p.returncode}: {out!r}"
        log(f"workload: {out.strip()}")
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        status = agent.status()
        pprof = decode_profile(os.path.join(report["_dir"], "profile.pb.gz"))
        rc = agent.stop()
        assert rc == 0, f"cgprofd exited {rc}:\n{agent.log()[-4000:]}"
        return report, status, pprof
    finally:
        agent.cleanup()
        cg.remove()


def sample_frames(p, s):
    """[(function name, mapping file or None)] of a sample, leaf first."""
    st = p["strings"]
    out = []
    for lid in s["location_id"]:
        loc = p["location"][lid]
        m = p["mapping"].get(loc["mapping_id"])
        path = st[m["filename"]] if m else None
        for fid in loc["function_id"]:
            out.append((st[p["function"][fid]["name"]], path))
        if not loc["function_id"]:
            out.append(("[unknown]", path))
    return out


def blas_chain(p):
    """(BLAS-leaf samples, those with a libtorch frame between the leaf and
    the innermost Python frame and a Python frame, {commonest misses})."""
    total = good = 0
    misses = {}
    for s in p["sample"]:
        v = s["value"][0] if s["value"] else 0
        frames = sample_frames(p, s)
        if not v or not frames or not frames[0][1] or not is_blas(frames[0][1]):
            continue
        total += v
        libtorch = python = False
        for name, path in frames[1:]:
            if path is None and name not in ("[kernel]", "[unknown]") and not name.endswith("_[k]"):
                python = True  # the innermost Python frame (no ELF mapping)
                break
            if path and is_libtorch(path):
                libtorch = True
        if libtorch and python:
            good += v
        else:
            key = ";".join(f"{n}@{os.path.basename(m) if m else '-'}" for n, m in reversed(frames[:12]))
            misses[key] = misses.get(key, 0) + v
    return total, good, misses


def test_torch_training_loop():
    require_torch()
    report, status, p = run_profiled()
    unwind = report.get("unwind", {})
    log(f"summary unwind: {unwind}")
    if status:
        log(f"status unwindTables: {status.get('unwindTables')}")

    # Every torch and BLAS mapping: its whole .eh_frame table.
    lib_maps = [m for m in report["mappings"] if is_torch(m["file"]) or is_blas(m["file"])]
    assert any(is_libtorch(m["file"]) for m in lib_maps), \
        f"no libtorch mapping in the report: {[m['file'] for m in report['mappings']]}"
    for m in lib_maps:
        table = m.get("unwind", {}).get("table", "")
        log(f"  {m['file']}: {table}")
        if has_fdes(m["file"]):
            assert table.startswith(".eh_frame"), f"{m['file']} was not unwound with its .eh_frame: {table!r}"
        else:
            # Debian's libtorch.so is a shim (its code is libtorch_cpu's):
            # an .eh_frame of its terminator only, so no table. A sample
            # lands there rarely (its _fini at exit).
            assert table == "none", f"{m['file']} has no FDE, yet its table is {table!r}"

    # Table walks that ended in a broken frame.
    ends = unwind.get("tableWalkEnds", {})
    walks = unwind.get("walks", {}).get("tables", 0)
    assert walks > 0, f"no table walks: {unwind}"
    bad = 100.0 * ends.get("badFrame", 0) / walks
    log(f"badFrame: {ends.get('badFrame', 0)} of {walks} table walks ({bad:.2f} %)")
    assert bad <= MAX_BAD_FRAME, f"{bad:.2f} % of the table walks end in badFrame: {ends}"

    # BLAS leaves reach Python through libtorch.
    total, good, misses = blas_chain(p)
    pct = 100.0 * good / total if total else 0.0
    log(f"BLAS-leaf samples: {total}, with libtorch between the leaf and Python: {good} ({pct:.1f} %)")
    top = "\n".join(f"  {c} {k}" for k, c in sorted(misses.items(), key=lambda kv: -kv[1])[:8])
    assert total >= MIN_BLAS_SAMPLES, f"only {total} samples in BLAS: is the fixture working?"
    assert pct >= MIN_LIBTORCH_BETWEEN, \
        f"only {pct:.1f} % of the BLAS-leaf samples have libtorch between the leaf and Python; " \
        f"commonest misses (root first):\n{top}"


if __name__ == "__main__":
    main([test_torch_training_loop])
