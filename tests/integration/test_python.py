#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Python frames: CPython running pure Python (tests/python/py-hot.py),
profiled from the outside, without touching it.

Every case runs on Debian's own python3.11 (a static executable); the single
process and the namespace cases also run on each CPython 3.7 to 3.13 of the
pyenv root ($PYENV_ROOT, default /root/.pyenv: libpython3.X.so builds) —
the cases that differ per version (where the interpreter is, its frame
layout and line table), while threads, venv and pythonFrames off are the
agent's and the same on every version. A version not on the machine is one
skip with the reason; one that is there and fails is a failure. On 3.12,
-X perf's trampoline frames: named from the perf map, and left out where
the walk names the same calls.
CGPROF_PY_ONLY=REGEX runs only the cases whose function name matches;
CGPROF_PY_DEBUG=1 logs the top stacks without the hot functions.

- Its three hot Python functions have inclusive shares of 50/30/20 (±5
  points), the Python call chain <module> -> main -> work_cycle -> hot_* is
  in ≥ 95 % of its samples, between the interpreter's native frames, and
  the line numbers in profile.pb.gz point into the functions' bodies.
- Threads: three threads each in their own hot function and a fourth hashing
  with the GIL released each get their own stack.
- The same in a new PID and mount namespace with the interpreter
  bind-mounted at another path (a container's own python).
- A program that looks like CPython 3.99 is reported unsupported and still
  gets its native stacks."""

import ast
import glob
import gzip
import importlib.machinery
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import tempfile

from cgproflib import (Agent, Cgroup, assert_shares, folded, log, main, profile, run_in_cgroup, skip, skip_prereq)
from test_pprof import fields, ints

PYTHON = "/usr/bin/python3.11"
PYENV_ROOT = os.environ.get("PYENV_ROOT", "/root/.pyenv")
# The versions the agent walks (docs/python-frames.md), each tested on its
# pyenv build when there is one.
PYENV_VERSIONS = ("3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
BUILD = os.environ.get("CGPROF_BUILD_DIR", "build")
SOURCE = os.environ.get("CGPROF_SOURCE_DIR", ".")
PY_HOT = os.environ.get("CGPROF_PY_HOT", os.path.join(SOURCE, "tests", "python", "py-hot.py"))
FAKE = os.environ.get("CGPROF_FAKE_PYTHON", os.path.join(BUILD, "tests", "python3.99"))
HOT = ("hot_alpha", "hot_beta", "hot_gamma")
CHAIN = ("<module>", "main", "work_cycle")
SECONDS = "4"


def need_python():
    if not os.access(PYTHON, os.X_OK):
        skip_prereq(f"{PYTHON} (Debian's python3.11) is not installed")


def function_lines(path):
    """{function name: (first line, last line)} of the module's functions."""
    with open(path) as f:
        tree = ast.parse(f.read())
    return {n.name: (n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def pprof_lines(report):
    """[(function name, file, line)] of every Python-looking line of the
    report's profile.pb.gz, with the samples that have it."""
    with open(os.path.join(report["_dir"], "profile.pb.gz"), "rb") as f:
        raw = gzip.decompress(f.read())
    strings, functions, locations, samples = [], {}, {}, []
    for num, wt, v in fields(raw):
        if num == 6:
            strings.append(v.decode())
        elif num == 5:
            fn = dict((n, x) for n, _, x in fields(v))
            functions[fn[1]] = (fn.get(2, 0), fn.get(4, 0))
        elif num == 4:
            loc = {"lines": []}
            for n, _, x in fields(v):
                if n == 1:
                    loc["id"] = x
                elif n == 4:
                    ln = dict((k, y) for k, _, y in fields(x))
                    loc["lines"].append((ln.get(1, 0), ln.get(2, 0)))
            locations[loc["id"]] = loc
        elif num == 2:
            s = {"loc": [], "value": []}
            for n, w, x in fields(v):
                if n == 1:
                    s["loc"] += ints(w, x)
                elif n == 2:
                    s["value"] += ints(w, x)
            samples.append(s)
    out = {}
    for s in samples:
        for lid in s["loc"]:
            for fid, line in locations[lid]["lines"]:
                name, file = functions[fid]
                key = (strings[name], strings[file], line)
                out[key] = out.get(key, 0) + s["value"][0]
    return out


def inclusive_shares(stacks, names, pending=0):
    """Inclusive shares of names over the samples, less pending ones (taken
    before the agent registered the process with the Python walk: no Python
    frame can be among them)."""
    total = sum(stacks.values()) - pending
    assert total > 0, "empty profile"
    return {n: 100.0 * sum(c for st, c in stacks.items() if n in st) / total for n in names}, total


def pyenv_python(version):
    """The newest pyenv build of version (3.X) here, or None."""
    found = glob.glob(os.path.join(PYENV_ROOT, "versions", f"{version}.*", "bin", f"python{version}"))
    found = [p for p in found if os.access(p, os.X_OK)]
    return max(found, key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("/")[-3])]) if found else None


def python_stacks(report, comm="python3.11"):
    return {st: c for st, c in folded(report).items() if st[0] == comm}


def has_chain(st, chain):
    """Whether chain is a contiguous run of st."""
    n = len(chain)
    return any(st[i:i + n] == chain for i in range(len(st) - n + 1))


def check_single(report, where, comm="python3.11", pyfile="py-hot.py", version="3.11", native_root=True):
    stacks = python_stacks(report, comm)
    py = report["python"]
    # How soon the agent registers a new process with the Python walk is a
    # latency (bench/start-latency), not what this test checks: its
    # samples before that are "pending" in summary.json (milliseconds on a
    # quiet machine, a second once under a loaded CI), and left out of the
    # shares below. They are native stacks: no Python frame to check.
    pending = py["walkFailures"]["pending"]
    shares, total = inclusive_shares(stacks, HOT, pending)
    log(f"[{where}] python summary: {py}")
    if os.environ.get("CGPROF_PY_DEBUG"):
        for st, c in sorted(stacks.items(), key=lambda x: -x[1])[:8]:
            if not any(h in st for h in HOT):
                log(f"[{where}] no hot: {c} {';'.join(st)}")
    log(f"[{where}] inclusive shares over {total} samples ({pending} pending left out): " +
        ", ".join(f"{k} {v:.1f}%" for k, v in shares.items()))
    for name, want in zip(HOT, (50, 30, 20)):
        assert abs(shares[name] - want) <= 5, f"{name}: {shares[name]:.1f}% is not {want}±5%"

    # The chain, as the user wrote it, under the interpreter's native frames
    # (no _PyEval_EvalFrameDefault left where Python frames replaced it).
    # Before 3.11 every Python call is a call of the evaluation loop: the
    # interpreter's own native frames of the call (call_function,
    # _PyFunction_Vectorcall, ...) stay between the Python frames, so the
    # chain is looked for among the Python frames (the fixture's functions).
    pyenv_old = tuple(int(x) for x in version.split(".")) < (3, 11)
    names = set(function_lines(PY_HOT)) | {"<module>"}

    def chain_of(st):
        return tuple(f for f in st if f in names) if pyenv_old else st

    with_chain = sum(c for st, c in stacks.items() if any(has_chain(chain_of(st), CHAIN + (h,)) for h in HOT))
    share = 100.0 * with_chain / total
    log(f"[{where}] <module>;main;work_cycle;hot_*: {share:.1f}% of the samples")
    without = sorted(((st, c) for st, c in stacks.items() if not any(has_chain(st, CHAIN + (h,)) for h in HOT)),
                     key=lambda x: -x[1])
    assert share >= 95, ("stacks without the chain, most samples first:",
                         [(";".join(st), c) for st, c in without[:8]], report.get("python"))
    top = max(stacks.items(), key=lambda x: x[1])[0]
    if native_root:
        runmain = "pymain_main" if version == "3.7" else "Py_RunMain"  # 3.7 has no Py_RunMain
        assert runmain in top and "<module>" in top and top.index(runmain) < top.index("<module>"), top
    assert "_PyEval_EvalFrameDefault" not in top[:top.index("hot_alpha" if "hot_alpha" in top else top[-1])], top

    py = report["python"]
    assert py["enabled"] and py["samples"] > 0
    assert py["withPythonFrames"] >= 0.95 * (py["samples"] - pending), py
    procs = [p for p in report["processes"] if p["comm"] == comm]
    assert procs and procs[0].get("pythonFrames") == version, procs

    # Lines: every sampled line of a function is one of its own.
    lines = function_lines(PY_HOT)
    seen = {}
    for (name, file, line), count in pprof_lines(report).items():
        if name in lines and file.endswith(pyfile):
            first, last = lines[name]
            # The def line is the function's too: 3.11+ give it to RESUME,
            # the function's first instruction.
            assert first <= line <= last, f"{name} at line {line}, not in its lines {first}..{last}"
            seen[name] = seen.get(name, 0) + count
    assert all(seen.get(h, 0) > 0 for h in HOT + ("work_cycle",)), seen


def profile_python(argv, name, check, extra_profile=None):
    """Profiles argv in a cgroup of its own; check(report) runs on the
    report while its files exist."""
    cg = Cgroup(f"cgprof-test-python-{name}-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="py", formats=["folded", "json", "pprof"], **(extra_profile or {}))],
        "targets": [{"name": "t", "profileRef": "py", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        p = run_in_cgroup(cg, argv)
        line = p.stdout.readline().decode()
        assert line.startswith("ready"), line
        assert p.wait(120) == 0
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        try:
            check(report)
        except AssertionError:
            # What the agent said of the interpreter and its code objects.
            for line in agent.log().splitlines():
                if "CPython" in line or "code object" in line:
                    log(f"[agent] {line}")
            raise
    finally:
        agent.cleanup()
        cg.remove()


def test_python_frames():
    need_python()
    profile_python([PYTHON, PY_HOT, "--seconds", SECONDS], "single", lambda r: check_single(r, "python3.11"))


DEEP_PY = """
import os, sys, time
def down(n):
    if n:
        return down(n - 1) ^ 1
    end = time.process_time() + float(sys.argv[1])
    acc = 0
    while time.process_time() < end:
        for i in range(1000):
            acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc
print("ready", os.getpid(), flush=True)
down(300)
"""
DEEP_PY_FRAMES = 301  # down(300) .. down(0)


def test_python_3_11_deep_recursion():
    """301 Python frames over the interpreter's native ones: the merged
    stack (over 128 frames) is whole, from Py_RunMain through <module> to
    the innermost down()."""
    need_python()

    def check(report):
        stacks = python_stacks(report)
        total = sum(stacks.values())
        leaf = {st: c for st, c in stacks.items() if "down" in st}
        whole = sum(c for st, c in leaf.items()
                    if st.count("down") == DEEP_PY_FRAMES and "<module>" in st and "Py_RunMain" in st
                    and st.index("Py_RunMain") < st.index("<module>") < st.index("down"))
        top = max(stacks.items(), key=lambda x: x[1])[0] if stacks else ()
        log(f"[deep python3.11] {total} samples, {sum(leaf.values())} in down(), {whole} with all "
            f"{DEEP_PY_FRAMES} down() frames under <module> and Py_RunMain; stacks "
            f"{ {k: v for k, v in report['stacks'].items() if k != 'userDepthHistogram'} }; "
            f"commonest: {len(top)} frames, {';'.join(top[:12])};...")
        assert sum(leaf.values()) >= 0.9 * total, top
        assert whole >= 0.95 * sum(leaf.values()), top
        assert report["python"]["truncated"] == 0, report["python"]
        assert report["stacks"]["maxUserDepth"] > DEEP_PY_FRAMES, report["stacks"]

    profile_python([PYTHON, "-c", DEEP_PY, SECONDS], "deep", check)


def test_python_threads():
    need_python()
    run_threads(PYTHON, "threads")


def run_threads(python, name):
    comm = os.path.basename(python)
    profile_python([python, PY_HOT, "--seconds", SECONDS, "--threads"], name,
                   lambda r: check_threads(r, comm))


def check_threads(report, comm="python3.11"):
    stacks = python_stacks(report, comm)
    total = sum(stacks.values())
    for t, h in (("thread_alpha", "hot_alpha"), ("thread_beta", "hot_beta"), ("thread_gamma", "hot_gamma")):
        mine = {st: c for st, c in stacks.items() if t in st}
        n = sum(mine.values())
        log(f"[threads {comm}] {t}: {n} samples ({100.0 * n / total:.1f}%)")
        assert n > 0.05 * total, f"{t}: {n} of {total} samples"
        # Its own hot function and nobody else's.
        others = [x for x in HOT if x != h]
        assert sum(c for st, c in mine.items() if h in st) >= 0.95 * n, sorted(mine.items(), key=lambda x: -x[1])[:3]
        assert not any(o in st for st in mine for o in others), [st for st in mine if any(o in st for o in others)][:3]
    # The hashing thread, the GIL released: the C code of hashlib under its
    # own Python frames, never under another thread's.
    hashing = {st: c for st, c in stacks.items() if "hash_loop" in st}
    n = sum(hashing.values())
    log(f"[threads {comm}] thread_hash: {n} samples; top: {max(hashing.items(), key=lambda x: x[1])[0][-4:] if hashing else None}")
    assert n > 0.05 * total, f"hash_loop: {n} of {total}"
    assert not any(h in st for st in hashing for h in HOT)
    native_leaves = sum(c for st, c in hashing.items() if st[-1] != "hash_loop" and "sha256" in ";".join(st[-3:]).lower())
    assert native_leaves >= 0.5 * n, sorted(hashing.items(), key=lambda x: -x[1])[:3]


def test_python_venv_module():
    """python -m in a virtualenv: the venv's python is a symlink to the
    interpreter, the program is a module run by runpy."""
    need_python()
    run_venv(PYTHON, "3.11", "venv -m")


def run_venv(python, version, where):
    with tempfile.TemporaryDirectory(prefix="cgprof-pyvenv-") as d:
        r = subprocess.run([python, "-m", "venv", "--without-pip", f"{d}/venv"], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"{python} -m venv failed: {r.stderr.strip()}")
        with open(PY_HOT) as src, open(f"{d}/py_hot.py", "w") as dst:
            dst.write(src.read())
        argv = ["sh", "-c", f'cd {d} && exec {d}/venv/bin/python -m py_hot --seconds {SECONDS}']
        profile_python(argv, f"venv-{version}",
                       lambda r: check_single(r, where, comm="python", pyfile="py_hot.py", version=version))


def test_python_module_freed():
    """The script ends, its <module> code object is freed, and the process
    lingers at exit (atexit) past a drain: the samples of its last second,
    drained then, still have <module> (the agent keeps the name of a code
    object whose memory is no longer one)."""
    need_python()
    profile_python([PYTHON, PY_HOT, "--seconds", SECONDS, "--linger", "2.5"], "freed",
                   lambda r: check_single(r, "module freed"))


def test_python_namespace():
    """A container's python: its own PID and mount namespace, the
    interpreter and the script bind-mounted at other paths."""
    need_python()
    run_namespace(PYTHON, "3.11")


def run_namespace(python, version):
    if subprocess.run(["unshare", "--pid", "--mount", "--fork", "true"], capture_output=True).returncode != 0:
        skip("unshare --pid --mount is not permitted here")
    with tempfile.TemporaryDirectory(prefix="cgprof-pyns-") as d:
        for f in ("python", "app.py"):
            open(os.path.join(d, f), "w").close()
        script = (f"mount --make-rprivate / && mount --bind {python} {d}/python && "
                  f"mount --bind {PY_HOT} {d}/app.py && exec {d}/python {d}/app.py --seconds {SECONDS}")

        def check(report):
            maps = [m["file"] for m in report["mappings"]]
            assert any(m == f"{d}/python" for m in maps), maps
            check_single(report, f"namespace {version}", comm="python", pyfile="app.py", version=version)

        profile_python(["unshare", "--pid", "--mount", "--fork", "sh", "-c", script], "ns", check)


def test_python_perf_trampoline():
    """3.12's perf trampolines (python -X perf writes /tmp/perf-PID.map): with
    pythonFrames off the trampoline frames are named from the map
    (py::FUNCTION:FILE); with it on, the walk's frames win and the
    trampoline frame of each evaluation loop call is left out."""
    p = pyenv_python("3.12")
    if not p:
        skip(f"no CPython 3.12 under {PYENV_ROOT}/versions")
    comm = os.path.basename(p)

    def check_off(report):
        stacks = python_stacks(report, comm)
        total = sum(stacks.values())
        named = sum(c for st, c in stacks.items() if any(f.startswith("py::") and f.endswith("py-hot.py") for f in st))
        log(f"[-X perf, pythonFrames off] a py::FUNCTION:py-hot.py frame in {100.0 * named / total:.1f}% of {total} samples")
        assert named >= 0.9 * total, sorted(stacks.items(), key=lambda x: -x[1])[:3]

    def check_on(report):
        # The native walk stops at the trampoline (JIT code without an
        # unwind table): no Py_RunMain at the root.
        check_single(report, "-X perf", comm=comm, version="3.12", native_root=False)
        stacks = python_stacks(report, comm)
        with_tramp = sum(c for st, c in stacks.items() if any(f.startswith("py::") for f in st))
        log(f"[-X perf] samples with a py:: frame left: {with_tramp}")
        assert with_tramp <= 0.01 * sum(stacks.values()), [st for st in stacks if any(f.startswith("py::") for f in st)][:3]

    profile_python([p, "-X", "perf", PY_HOT, "--seconds", "2"], "perf-off", check_off, {"pythonFrames": False})
    profile_python([p, "-X", "perf", PY_HOT, "--seconds", SECONDS], "perf-on", check_on)


def patched_libpython(lib, d, version_hex, tstate_size=None):
    """A copy of lib (3.13's libpython) in d that says it is version_hex:
    its Py_Version and its _Py_DebugOffsets.version, and, with tstate_size,
    a _Py_DebugOffsets whose thread state is that small. Where those are in
    _Py_DebugOffsets comes from the offsets table (3.13's layout)."""
    spec = importlib.util.spec_from_loader(
        "python_offsets", importlib.machinery.SourceFileLoader(
            "python_offsets", os.path.join(SOURCE, "scripts", "python-offsets")))
    po = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(po)
    layout = po.parse_table(os.path.join(SOURCE, "common", "symbols", "python-offsets.h"))[(3, 13)]
    syms = {}
    for line in subprocess.run(["readelf", "-W", "--dyn-syms", lib], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[-1] in ("Py_Version", "_PyRuntime"):
            syms[f[-1]] = int(f[1], 16)
    sections = []
    for line in subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        m = re.search(r"\]\s+\S+\s+PROGBITS\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m:
            sections.append(tuple(int(x, 16) for x in m.groups()))

    def offset(vaddr):
        return next(off + vaddr - addr for addr, off, size in sections if addr <= vaddr < addr + size)

    out = os.path.join(d, os.path.basename(lib))
    shutil.copyfile(lib, out)
    with open(out, "r+b") as f:
        for vaddr in (syms["Py_Version"], syms["_PyRuntime"] + layout["dbg_version"]):
            f.seek(offset(vaddr))
            f.write(struct.pack("<Q", version_hex))
        if tstate_size is not None:
            f.seek(offset(syms["_PyRuntime"] + layout["dbg_tstate_size"]))
            f.write(struct.pack("<Q", tstate_size))
    return out


def test_python_debug_offsets_later_version():
    """A CPython after the table's, walked with what its _Py_DebugOffsets
    publishes: pyenv's 3.13 with a copy of its libpython that says 3.14
    (Py_Version and _Py_DebugOffsets.version patched), so the agent has no
    table for it. And one whose _Py_DebugOffsets lacks a field the walk
    needs (its thread state's size cut to 8 bytes): refused, the field
    named, native stacks kept."""
    p = pyenv_python("3.13")
    if not p:
        skip(f"no CPython 3.13 under {PYENV_ROOT}/versions")
    lib = os.path.join(os.path.dirname(os.path.dirname(p)), "lib", "libpython3.13.so.1.0")
    comm = os.path.basename(p)

    def check_broken(report):
        procs = [x for x in report["processes"] if x["comm"] == comm]
        log(f"[3.14 without thread_state.thread_id] processes: {procs}")
        assert procs and procs[0].get("pythonFrames") == \
            "unsupported version 3.14 (_Py_DebugOffsets: no thread_state.thread_id)", procs
        assert report["python"]["withPythonFrames"] == 0, report["python"]
        assert any("_PyEval_EvalFrameDefault" in st for st in python_stacks(report, comm))

    with tempfile.TemporaryDirectory(prefix="cgprof-py314-") as d, \
            tempfile.TemporaryDirectory(prefix="cgprof-py314-broken-") as broken:
        patched_libpython(lib, d, 0x030e00a1)
        patched_libpython(lib, broken, 0x030e00a1, tstate_size=8)
        profile_python(["env", f"LD_LIBRARY_PATH={d}", p, PY_HOT, "--seconds", SECONDS], "dbg314",
                       lambda r: check_single(r, "3.14 via _Py_DebugOffsets", comm=comm, version="3.14"))
        profile_python(["env", f"LD_LIBRARY_PATH={broken}", p, PY_HOT, "--seconds", "2"], "dbg314-broken",
                       check_broken)


def pyenv_tests(version):
    """The single process, threads, venv and namespace cases on pyenv's
    CPython version."""
    def python():
        p = pyenv_python(version)
        if not p:
            skip(f"no CPython {version} under {PYENV_ROOT}/versions")
        return p

    def single():
        p = python()
        profile_python([p, PY_HOT, "--seconds", SECONDS], f"single-{version}",
                       lambda r: check_single(r, f"pyenv {version}", comm=os.path.basename(p), version=version))

    def threads():
        run_threads(python(), f"threads-{version}")

    def venv():
        run_venv(python(), version, f"venv -m {version}")

    def namespace():
        run_namespace(python(), version)

    tag = version.replace(".", "_")
    single.__name__ = f"test_python_{tag}_frames"
    threads.__name__ = f"test_python_{tag}_threads"
    venv.__name__ = f"test_python_{tag}_venv_module"
    namespace.__name__ = f"test_python_{tag}_namespace"
    return [single, threads, venv, namespace]


PY_FORK = os.path.join(SOURCE, "tests", "python", "py-fork.py")


def check_fork(report, where, min_procs=3):
    """Forked children: their Python frames named from their first samples
    (child_work;child_spin under each child), ≤ 1 % of samples with an
    unnamed Python frame, parent and children alike."""
    stacks = python_stacks(report)
    total = sum(stacks.values())
    py = report["python"]
    unnamed = sum(c for st, c in stacks.items() if "[python]" in st)
    children = sum(c for st, c in stacks.items() if has_chain(st, ("child_work", "child_spin")))
    parent = sum(c for st, c in stacks.items() if has_chain(st, ("parent_work", "parent_spin")))
    log(f"[{where}] {total} samples: children {children}, parent {parent}, unnamed {unnamed}; python {py}")
    if os.environ.get("CGPROF_PY_DEBUG"):
        for st, c in sorted(stacks.items(), key=lambda x: -x[1])[:12]:
            if "child_spin" not in st and "parent_spin" not in st:
                log(f"[{where}] other: {c} {';'.join(st)}")
    procs = [p for p in report["processes"] if p["comm"] == "python3.11"]
    assert len(procs) >= min_procs, procs
    assert all(p.get("pythonFrames") == "3.11" for p in procs), procs
    assert unnamed <= 0.01 * total, sorted(((c, st) for st, c in stacks.items() if "[python]" in st), reverse=True)[:4]
    # Two children and the parent spin for the same time.
    assert children >= 0.5 * total and parent >= 0.15 * total, (children, parent, total)
    # Walks that failed: a child's last samples, its memory torn down as
    # it exits (readError), are a few.
    failures = py["walkFailures"]
    assert sum(failures.values()) <= 0.02 * py["samples"], py


def test_python_fork():
    """os.fork() children running Python code they inherited: named."""
    need_python()
    profile_python([PYTHON, PY_FORK, "--seconds", SECONDS], "fork", lambda r: check_fork(r, "os.fork"))


def test_python_fork_multiprocessing():
    """multiprocessing's 'fork' children (a DataLoader's workers): named."""
    need_python()
    profile_python([PYTHON, PY_FORK, "--seconds", SECONDS, "--mode", "mp"], "mp",
                   lambda r: check_fork(r, "multiprocessing fork"))


def test_python_fork_short_lived():
    """Children forked anew every 0.2 s (a DataLoader's workers, each
    epoch), most of them gone before the agent's next drain: their Python
    frames named from their first sample (the walk takes the parent's
    registration at the child's first sample, and the agent names the
    frames of a child that exited from its parent's code objects)."""
    need_python()
    profile_python([PYTHON, PY_FORK, "--seconds", SECONDS, "--child-seconds", "0.2"], "short",
                   lambda r: check_fork(r, "short-lived children", min_procs=10))


def test_python_unsupported():
    """A CPython without offsets (3.99): unsupported, native stacks kept."""
    if not os.access(FAKE, os.X_OK):
        skip(f"{FAKE} not built")
    cg = Cgroup(f"cgprof-test-python-fake-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="py")],
        "targets": [{"name": "t", "profileRef": "py", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        p = run_in_cgroup(cg, [FAKE, "--seconds", "3"])
        assert p.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0
        cg.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        procs = [x for x in r["processes"] if x["comm"] == "python3.99"]
        log("[3.99] processes:", procs, "python:", r.get("python"))
        assert procs and procs[0].get("pythonFrames") == "unsupported version 3.99", procs
        assert r["python"]["samples"] == 0 and r["python"]["withPythonFrames"] == 0, r["python"]
        assert_shares(r)
        chains = [st for st in folded(r) if st[-1] == "hot_alpha"]
        assert any(st[-4:-1] == ("main", "run_workload", "work_cycle") for st in chains), chains[:3]
    finally:
        agent.cleanup()
        cg.remove()


def test_python_off():
    """pythonFrames: false: the interpreter's frames only, as before."""
    need_python()

    def check(report):
        stacks = python_stacks(report)
        assert not any("hot_alpha" in st for st in stacks), "Python frames although pythonFrames is false"
        assert any("_PyEval_EvalFrameDefault" in st for st in stacks)
        assert "python" not in report

    profile_python([PYTHON, PY_HOT, "--seconds", "2"], "off", check, {"pythonFrames": False})


if __name__ == "__main__":
    only = os.environ.get("CGPROF_PY_ONLY")
    main([t for t in [test_python_frames, test_python_3_11_deep_recursion, test_python_threads, test_python_venv_module,
                      test_python_module_freed, test_python_namespace, test_python_fork, test_python_fork_multiprocessing,
                      test_python_fork_short_lived,
                      test_python_unsupported,
          test_python_off, test_python_perf_trampoline, test_python_debug_offsets_later_version] + [t for v in PYENV_VERSIONS for t in pyenv_tests(v)] if not only or re.search(only, t.__name__)])
