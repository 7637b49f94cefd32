#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Unwind tables at production scale: a process that dlopen()s every CUDA
library in /usr/local/cuda/lib64 (they load without a GPU) and Debian's
libtorch_cpu (python3-torch): 4-6 M rows of unwind tables, against the
default budget (unwindTableRows).

The process loads them all first, then the agent starts (default settings)
and reads its mappings at its first sample: every library is seen at once,
and its table built on the agent's worker. Then
  - every mapping of those libraries is loaded: the agent's log names each
    file's table ("Unwind table of PATH"), none is refused, and status says
    no table is pending or did not fit;
  - the summary's mappings of those libraries that samples hit (and the
    program's own) say .eh_frame (or debug_frame), never "not loaded: ...";
  - the memory status reports for the tables is positive and within the
    budget; the walks reach main.
Skips with the reason where /usr/local/cuda is absent; the libtorch part
where python3-torch is not installed."""

import glob
import os
import re
import time

from cgproflib import Agent, Cgroup, folded, log, main, profile, run_in_cgroup, skip

BUILD = os.environ.get("CGPROF_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
DLOPEN = os.environ.get("CGPROF_UNWIND_DLOPEN", os.path.join(BUILD, "tests", "cgprof-unwind-dlopen"))
CUDA_LIB = "/usr/local/cuda/lib64"
TORCH_CPU = "/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so"


def libraries():
    """The CUDA libraries (each file once) and libtorch_cpu when present."""
    if not os.path.isdir(CUDA_LIB):
        skip(f"{CUDA_LIB} is absent (no CUDA toolkit on this machine)")
    seen, libs = set(), []
    for p in sorted(glob.glob(os.path.join(CUDA_LIB, "*.so*"))):
        real = os.path.realpath(p)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        libs.append(p)
    if os.path.isfile(TORCH_CPU):
        libs.append(TORCH_CPU)
    else:
        log(f"{TORCH_CPU} is absent (python3-torch not installed): CUDA libraries only")
    return libs


def mapped_files(pid, roots):
    """The files under roots (folders, or files) the process maps executable
    (their real paths, as /proc/PID/maps names them)."""
    files = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and "x" in parts[1]:
                path = parts[5].strip()
                if any(path.startswith(r) for r in roots):
                    files.add(path)
    return files


def wait_tables_built(agent, timeout=240):
    deadline = time.monotonic() + timeout
    while True:
        u = agent.status()["unwindTables"]
        if u["processes"] >= 1 and u["tablesPending"] == 0 and u["tablesBuilt"] > 0:
            return u
        assert time.monotonic() < deadline, f"tables still pending after {timeout} s: {u}"
        time.sleep(0.5)


def test_cuda_and_torch_tables_fit():
    libs = libraries()
    roots = [os.path.realpath(CUDA_LIB) + "/", os.path.realpath(TORCH_CPU)]
    cg = Cgroup(f"cgprof-test-unwind-scale-{os.getpid()}")
    # Default unwinding ("auto") and budget (no unwindTableRows).
    agent = Agent({
        "profiles": [profile(name="p")],
        "targets": [{"name": "t", "profileRef": "p", "cgroupPatterns": [cg.rel]}],
    })
    p = None
    try:
        p = run_in_cgroup(cg, [DLOPEN, "--seconds", "600"] + libs)
        ready = p.stdout.readline().decode()
        assert ready.startswith("ready"), ready
        files = mapped_files(p.pid, roots)
        log(f"{len(libs)} libraries given, {len(files)} files mapped executable under {roots}")
        assert len(files) >= len(libs) // 2, files

        agent.start()
        u = wait_tables_built(agent)
        time.sleep(4)  # samples walked with all the tables in (those before: some pending)
        st = agent.status()
        u = st["unwindTables"]
        log("unwindTables:", u)
        # The builds ran on the worker: the loop's longest dispatch (CPU
        # and wall time), for the record.
        log("eventLoop:", st["eventLoop"])
        p.terminate()
        p.wait(60)
        cg.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        text = agent.log()

        lines = text.splitlines()
        for line in lines:
            if "map entries loaded for unwinding" in line and f"PID {p.pid}:" in line:
                log(line[line.index("PID"):])
        for i, line in enumerate(lines):
            if "An event loop dispatch took" in line:
                log("slow dispatch, after:\n  " + "\n  ".join(x[:200] for x in lines[max(0, i - 3):i + 1]))
        assert u["tablesNotFitted"] == 0, u
        assert u["tablesPending"] == 0, u
        assert 0 < u["bytesUsed"] <= u["bytesBudget"], u
        assert 0 < u["rowsUsed"] <= u["rowsMax"], u
        assert u["shards"] >= 1 and u["shards"] <= u["shardsMax"], u
        assert u["rulesInterned"] > 0, u
        # Every library's table is in (not "does not fit", not left out).
        loaded = set(re.findall(r"Unwind table of (\S+): \d+ rows", text))
        missing = sorted(f for f in files if f not in loaded)
        assert not missing, f"no table loaded for {missing}"
        assert "does not fit in the budget" not in text
        if os.path.isfile(TORCH_CPU):
            m = re.search(r"Unwind table of \S+/libtorch_cpu\.so[^:]*: (\d+) rows.*built in ([0-9.]+) ms, made compact "
                          r"in ([0-9.]+) ms", text)
            assert m, [line for line in text.splitlines() if "libtorch_cpu" in line]
            log(f"libtorch_cpu: {m.group(1)} rows, built in {m.group(2)} ms, made compact in {m.group(3)} ms")

        # What the summary says of the mappings samples hit.
        for m in r["mappings"]:
            table = (m.get("unwind") or {}).get("table")
            if m["file"] in files or m["file"] == DLOPEN:
                assert table in (".eh_frame", ".debug_frame"), m
        stacks = folded(r)
        spin = sum(v for k, v in stacks.items() if k and k[-1] == "scale_leaf")
        whole = sum(v for k, v in stacks.items() if list(k[-3:]) == ["main", "scale_spin", "scale_leaf"])
        log(f"scale_leaf: {spin} samples, {whole} with main -> scale_spin -> scale_leaf; unwind: {r['unwind']}")
        assert spin > 0
        assert whole >= 0.9 * spin, (whole, spin)
        assert agent.proc.poll() is None, agent.log()[-3000:]
        assert agent.stop() == 0
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        agent.cleanup()
        cg.remove()


if __name__ == "__main__":
    main([test_cuda_and_torch_tables_fit])
