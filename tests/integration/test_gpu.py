#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""CUDA kernel launches counted under the CPU stacks that made them
(profile key "gpu": {"launches": true}, docs/gpu.md), without a GPU: the
nvcc-built fixture (tests/cuda/cuda-launch.cu) calls the runtime's launch
entry point once per launch, which fails with "insufficient driver" here,
and the agent's uprobe counts each call.

- Three kernels launched 5:3:2 from three distinct host call paths: the
  launch counts per kernel are exact (cuda.folded), each kernel sits under
  its own path, and the CPU profile (profile.folded) holds no launch.
- The same with cudart linked statically (the probes in the executable).
- A Python caller (ctypes) of a library that launches: its Python frames
  name the caller.
- A process of a cgroup outside the session that launches is not counted.
- A process that dlclose()s a library linked with libcudart does not break
  the session: its launches before and after are counted.
- "gpu": {"launches": "yes"} is refused with the key's path."""

import gzip
import os
import subprocess

from cgproflib import Agent, Cgroup, config_refused, log, main, profile, run_in_cgroup, skip_prereq, wait_for
from test_pprof import fields, ints

SHARED = os.environ.get("CGPROF_CUDA_LAUNCH_SHARED", "")
STATIC = os.environ.get("CGPROF_CUDA_LAUNCH_STATIC", "")
LIB = os.environ.get("CGPROF_CUDA_LAUNCH_LIB", "")
PYTHON = "/usr/bin/python3.11"
ROUNDS = 100  # alpha 500, beta 300, gamma 200
KERNELS = {"k_alpha(float*, int)": ("path_alpha", 5), "k_beta(float*, int)": ("path_beta", 3),
           "k_gamma(int*)": ("path_gamma", 2)}
MODULE = "[cuda kernel]"


def need_fixture(path):
    if not path or not os.access(path, os.X_OK):
        skip_prereq("the CUDA launch fixture was not built (no nvcc: the CUDA toolkit is not installed)")


def launches(report):
    """{stack tuple: count} of a report's cuda.folded."""
    out = {}
    with open(os.path.join(report["_dir"], "cuda.folded")) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            key = tuple(stack.split(";"))
            out[key] = out.get(key, 0) + int(count)
    return out


def cpu_folded(report):
    with open(os.path.join(report["_dir"], "profile.folded")) as f:
        return f.read()


def per_kernel(stacks):
    out = {}
    for st, n in stacks.items():
        out[st[-1]] = out.get(st[-1], 0) + n
    return out


class Session:
    """An agent with one session on a fresh cgroup, counting launches."""

    def __init__(self, tag, **keys):
        self.cg = Cgroup(f"cgprof-test-gpu-{tag}-{os.getpid()}")
        self.agent = Agent({
            "profiles": [profile(name="gpu", gpu={"launches": True}, formats=["folded", "json", "pprof", "svg"],
                                 **keys)],
            "targets": [{"name": "t", "profileRef": "gpu", "cgroupPatterns": [self.cg.rel]}],
        })
        self.agent.start()

    def start(self, argv, cg=None):
        """Starts argv in the cgroup; returns once the agent attached the
        launch probes of the files it maps (the process spins until then)."""
        p = run_in_cgroup(cg or self.cg, argv, stdin=subprocess.PIPE)
        line = p.stdout.readline().decode()
        assert line.startswith("ready"), f"{argv} did not start: {line!r}"
        return p

    def launched(self, argv, probed="libcudart.so"):
        """Starts argv, waits for the probes of the file named probed, and
        lets it launch; returns the process (it waits for its stdin)."""
        p = self.start(argv)
        self.wait_probes(probed)
        self.go(p)
        return p

    def wait_probes(self, what):
        wait_for(lambda: f"CUDA launch probes in " in self.agent.log() and what in self.agent.log(), 60,
                 f"the launch probes in {what}")

    def go(self, p):
        p.stdin.write(b"go\n")
        p.stdin.flush()
        line = p.stdout.readline().decode()
        assert line.startswith("done"), f"no launches: {line!r}"
        return line

    def finish(self, p):
        p.stdin.close()
        assert p.wait(timeout=60) == 0, f"the fixture exited {p.returncode}"

    def report(self, alive=None):
        """Ends the session: by removing its cgroup, or, while the process
        alive still runs (its Python code objects still readable), by
        cgprofctl stop."""
        if alive:
            self.agent.ctl("stop", "--all")
        else:
            self.cg.remove()
        report = self.agent.wait_summary(lambda s: s["cgroup"] == self.cg.rel)
        if alive:
            self.finish(alive)
        rc = self.agent.stop()
        assert rc == 0, f"cgprofd exited {rc}:\n{self.agent.log()[-4000:]}"
        return report

    def cleanup(self):
        self.agent.cleanup()
        self.cg.remove()


def check_kernels(report, comm):
    stacks = launches(report)
    log("launches: " + str(per_kernel(stacks)))
    want = {k: n * ROUNDS for k, (_, n) in KERNELS.items()}
    assert per_kernel(stacks) == want, (f"{per_kernel(stacks)} != {want}; samples: {report['samples']}; "
                                        f"stacks: {stacks}; short CPU stacks: "
                                        + str([l for l in cpu_folded(report).splitlines() if l.count(";") < 3 or "Launch" in l or "path_" in l]))
    for st, n in stacks.items():
        assert st[0] == comm, st
        path = KERNELS[st[-1]][0]
        others = [p for k, (p, _) in KERNELS.items() if p != path]
        assert path in st and "main" in st, f"{st[-1]} not under main..{path}: {st}"
        assert not any(o in st for o in others), st
    # Launches are not CPU samples.
    assert MODULE not in cpu_folded(report) and "k_alpha(float*, int) " not in cpu_folded(report)
    # summary.json: per kernel, per stack, and the probes attached.
    cuda = report["cudaLaunches"]
    assert cuda["total"] == 10 * ROUNDS, cuda
    assert {k["name"]: k["launches"] for k in cuda["kernels"]} == want, cuda["kernels"]
    assert [k["name"] for k in cuda["kernels"]] == list(KERNELS), cuda["kernels"]
    assert sum(x["launches"] for x in cuda["stacks"]) == 10 * ROUNDS, cuda["stacks"]
    assert any("cudaLaunchKernel" in p["entryPoints"] for p in cuda["probes"]), cuda["probes"]
    assert "cuda.folded" in report["files"], report["files"]
    # pprof: cuda_launches/count; the SVG: the kernels in their own palette.
    with open(os.path.join(report["_dir"], "cuda.pb.gz"), "rb") as f:
        pb = gzip.decompress(f.read())
    strings, types, samples, raw = [], [], 0, []
    for num, wt, v in fields(pb):
        if num == 6:
            strings.append(v.decode())
        elif num == 1:
            types.append(dict((n, x) for n, _, x in fields(v)))
        elif num == 2:
            raw.append(v)
    assert [(strings[t[1]], strings[t[2]]) for t in types] == [("cuda_launches", "count")], types
    # Each sample's dimensions as labels: the launch program read nvcc's
    # dim3 registers right (x86-64 SysV: x|y in one, z in the next).
    dims = {}
    for v in raw:
        count, labels = 0, {}
        for n, w, x in fields(v):
            if n == 2:
                count += ints(w, x)[0]
            elif n == 3:
                lab = dict((a, b) for a, _, b in fields(x))
                labels[strings[lab[1]]] = strings[lab.get(2, 0)]
        samples += count
        key = (labels.get("grid"), labels.get("block"), labels.get("stream"))
        dims[key] = dims.get(key, 0) + count
    assert samples == 10 * ROUNDS and "k_gamma(int*)" in strings, samples
    assert dims == {("4x1x1", "128x1x1", "0x0"): 5 * ROUNDS, ("2x3x1", "32x4x1", "0x0"): 3 * ROUNDS,
                    ("1x1x1", "64x1x1", "0x0"): 2 * ROUNDS}, dims
    with open(os.path.join(report["_dir"], "cuda.svg")) as f:
        svg = f.read()
    assert 'data-name="k_beta(float*, int)"' in svg and 'data-kind="cuda"' in svg


def run_fixture(tag, path, probed):
    need_fixture(path)
    s = Session(tag)
    try:
        p = s.launched([path, str(ROUNDS)], probed)
        s.finish(p)
        report = s.report()
        try:
            check_kernels(report, os.path.basename(path)[:15])
        except AssertionError:
            log("agent log:\n" + "\n".join(l for l in s.agent.log().splitlines() if "cuda" in l.lower()))
            raise
        return report
    finally:
        s.cleanup()


def test_runtime_shared():
    run_fixture("shared", SHARED, "libcudart.so")


def test_runtime_static():
    run_fixture("static", STATIC, os.path.basename(STATIC or "cuda-launch-static"))


PY_CALLER = """
import ctypes, select, sys
lib = ctypes.CDLL(sys.argv[1])
def spin():
    while not select.select([sys.stdin], [], [], 0)[0]:
        sum(range(10000))
    sys.stdin.readline()
def py_launcher(n):
    return lib.launch_alpha(n)
print("ready", flush=True)
spin()
py_launcher(int(sys.argv[2]))
print("done", flush=True)
sys.stdin.readline()
"""


def test_python_caller():
    need_fixture(LIB)
    if not os.access(PYTHON, os.X_OK):
        skip_prereq(f"{PYTHON} is not installed")
    s = Session("python")
    try:
        p = s.launched([PYTHON, "-c", PY_CALLER, LIB, str(ROUNDS)])
        report = s.report(alive=p)
        stacks = launches(report)
        log("python launches: " + str(per_kernel(stacks)))
        assert per_kernel(stacks) == {"k_alpha(float*, int)": ROUNDS}, stacks
        for st in stacks:
            assert "py_launcher" in st and "path_alpha" in st, st
            assert st.index("py_launcher") < st.index("path_alpha"), st
    finally:
        s.cleanup()


def test_outside_cgroup():
    need_fixture(SHARED)
    s = Session("outside")
    other = Cgroup(f"cgprof-test-gpu-other-{os.getpid()}")
    try:
        p = s.start([SHARED, str(ROUNDS)])
        s.wait_probes("libcudart.so")
        q = s.start([SHARED, str(ROUNDS)], cg=other)
        s.go(q)  # the probes are attached: its launches fire them
        s.go(p)
        s.finish(q)
        s.finish(p)
        report = s.report()
        pids = {pr["pid"] for pr in report["processes"]}
        assert q.pid not in pids, (q.pid, pids)
        assert sum(launches(report).values()) == 10 * ROUNDS, launches(report)
    finally:
        s.cleanup()
        other.remove()


def test_dlclose():
    need_fixture(SHARED)
    need_fixture(LIB)
    s = Session("dlclose")
    try:
        p = s.launched([SHARED, str(ROUNDS), "--dlclose", LIB])
        s.finish(p)
        report = s.report()
        got = per_kernel(launches(report))
        # Every launch counted, the program's own named. The library's
        # kernel is named when its symbols were read before it was unloaded
        # (a library loaded and unloaded between two looks at the process's
        # mappings is not): "[kernel 0x...]" otherwise.
        assert sum(got.values()) == 2 * ROUNDS and got.get("k_beta(float*, int)") == ROUNDS, got
        other = [k for k in got if k != "k_beta(float*, int)"]
        assert len(other) == 1 and (other[0] == "k_alpha(float*, int)" or other[0].startswith("[kernel 0x")), got
    finally:
        s.cleanup()


def test_dlopen_before_end():
    """A library dlopen()ed just before its launches, and the session ended
    at once (cgprofctl stop) while the process lives: the agent's snapshot
    of its mappings predates the library, and the re-read its last drain
    asks for must be done before the report is written. Every launch of
    the library's kernel is named, under the library's functions."""
    need_fixture(SHARED)
    need_fixture(LIB)
    s = Session("dlopen")
    try:
        p = s.launched([SHARED, str(ROUNDS), "--dlopen", LIB])
        report = s.report(alive=p)
        stacks = launches(report)
        log("launches: " + str(per_kernel(stacks)))
        assert per_kernel(stacks) == {"k_alpha(float*, int)": ROUNDS, "k_beta(float*, int)": ROUNDS}, stacks
        for st in stacks:
            if st[-1] == "k_alpha(float*, int)":
                assert "launch_alpha" in st and "path_alpha" in st, st
                assert st.index("launch_alpha") < st.index("path_alpha"), st
            assert "[unknown]" not in st, st
    finally:
        s.cleanup()


def test_bad_config():
    log(config_refused({"gpu": {"launches": "yes"}}, "profiles[0].gpu.launches: must be a boolean"))

if __name__ == "__main__":
    main([test_runtime_shared, test_runtime_static, test_python_caller, test_outside_cgroup, test_dlclose, test_dlopen_before_end,
          test_bad_config])
