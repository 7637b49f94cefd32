# SPDX-License-Identifier: LGPL-2.1-or-later
"""perf as the reference for cgprof's stack unwinding tests, and the stack
arithmetic both sides share.

perf_record_dwarf() / perf_record_fp() run a program under
`perf record -e cpu-clock --call-graph dwarf` (resp. `-g`, frame pointers)
and return its stacks folded the way cgproflib.folded() returns a report's:
{(comm, root, ..., leaf): count}. perf's own names are normalised the way
our report's are compared (see norm()), and kernel frames are dropped: the
tests are about user stacks.

The helpers (user_stack, chain_share, leaf_shares, ...) take either kind of
dict (tuple keys, or "comm;root;...;leaf" strings)."""

import os
import re
import shutil
import subprocess
import tempfile

from cgproflib import skip, skip_prereq

PERF = shutil.which("perf")

# perf record's stderr when the kernel refuses the event (no perf events,
# paranoid sysctl, seccomp in a container, no such event).
_PERF_REFUSED = re.compile(r"(Permission denied|Operation not permitted|perf_event_paranoid|"
                           r"not supported|Access to performance monitoring|"
                           r"event syntax error|No permission|perf not found for kernel)", re.I)


def _perf_record(argv, seconds, call_graph, freq, extra_args=(), timeout_slack=120):
    if not PERF:
        skip_prereq("perf is not installed (linux-perf)")
    exe = argv[0] if "/" not in argv[0] else os.path.abspath(argv[0])
    if not (shutil.which(exe) if "/" not in exe else os.access(exe, os.X_OK)):
        raise AssertionError(f"no program {exe}")
    argv = [exe, *argv[1:]]
    tmp = tempfile.mkdtemp(prefix="cgprof-perf-")
    data = os.path.join(tmp, "perf.data")
    # perf's build-id cache (binaries and the vDSO, which perf script needs
    # to unwind through it) in the temp dir, not in root's ~/.debug.
    env = dict(os.environ, PERF_BUILDID_DIR=os.path.join(tmp, "debug"))
    try:
        cmd = [PERF, "record", "-e", "cpu-clock", "-F", str(freq), *call_graph, "-o", data,
               "--", *argv, "--seconds", str(seconds), *extra_args]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=seconds + timeout_slack, cwd=tmp, env=env)
        if r.returncode != 0 or not os.path.exists(data):
            if _PERF_REFUSED.search(r.stderr) and "ready" not in r.stdout:
                skip(f"perf record cannot sample cpu-clock here: {r.stderr.strip()[-400:]}")
            raise AssertionError(f"perf record {argv} failed ({r.returncode}): {r.stderr[-2000:]}")
        if not r.stdout.startswith("ready"):
            raise AssertionError(f"{argv[0]} did not start under perf: {r.stdout!r} {r.stderr[-2000:]}")
        # comm,tid then one line per frame: ip sym (dso), leaf first. No inline
        # expansion: our unwinder reports real frames, so must the reference.
        s = subprocess.run([PERF, "script", "-i", data, "-F", "comm,tid,ip,sym,dso", "--no-inline"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout_slack + 10 * seconds, cwd=tmp, env=env)
        if s.returncode != 0:
            raise AssertionError(f"perf script failed ({s.returncode}): {s.stderr[-2000:]}")
        return parse_perf_script(s.stdout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def perf_record_dwarf(argv, seconds, freq=999, stack_size=None, extra_args=()):
    """perf record --call-graph dwarf[,stack_size] -- argv --seconds S.
    perf copies stack_size bytes of user stack per sample (8192 by default)
    and unwinds them afterwards with the binaries' .eh_frame/.debug_frame."""
    cg = "dwarf" if stack_size is None else f"dwarf,{stack_size}"
    return _perf_record(argv, seconds, ["--call-graph", cg], freq, extra_args)


def perf_record_fp(argv, seconds, freq=999, extra_args=()):
    """perf record -g: the kernel walks the frame pointers."""
    return _perf_record(argv, seconds, ["-g"], freq, extra_args)


_FRAME = re.compile(r"^\s*([0-9a-fA-F]+)\s+(.*) \((.*)\)\s*$")


def parse_perf_script(text):
    """perf script -F comm,tid,ip,sym,dso output -> {(comm, root..leaf): n}.
    Kernel frames are dropped (the dso is [kernel.kallsyms] or a module)."""
    out = {}
    comm, frames = None, []

    def flush():
        if comm is not None:
            key = (comm, *reversed(frames))
            out[key] = out.get(key, 0) + 1

    for line in text.splitlines():
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        if not line[0].isspace():
            flush()
            # "comm tid": the comm may hold spaces, the tid is the last word.
            comm, frames = line.rstrip().rsplit(None, 1)[0], []
            continue
        m = _FRAME.match(line)
        if not m:
            continue
        _, sym, dso = m.groups()
        if dso.startswith("[kernel") or dso.endswith(".ko") or dso == "[bpf_prog]":
            continue
        frames.append(norm(sym))
    flush()
    return out


# --- names -----------------------------------------------------------------

_demangled = {}


def _demangle(names):
    todo = sorted({n for n in names if n.startswith("_Z") and n not in _demangled})
    if not todo:
        return
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        for n in todo:
            _demangled[n] = n
        return
    r = subprocess.run([cxxfilt], input="\n".join(todo) + "\n", stdout=subprocess.PIPE, text=True, check=True)
    for n, d in zip(todo, r.stdout.splitlines()):
        _demangled[n] = d


_CLONE = re.compile(r"(\.(constprop|isra|part|cold|lto_priv|localalias)(\.\d+)?)+$")


def _strip_params(name):
    """'app::Pipeline<int>::step(int) const' -> 'app::Pipeline<int>::step'."""
    n = name
    for suffix in (" const", " volatile", " &&", " &"):
        if n.endswith(suffix) and "(" in n:
            n = n[: -len(suffix)]
    if not n.endswith(")"):
        return n
    depth = 0
    for i in range(len(n) - 1, -1, -1):
        if n[i] == ")":
            depth += 1
        elif n[i] == "(":
            depth -= 1
            if depth == 0:
                return n[:i] if i > 0 else n
    return n


def norm(name):
    """A frame's name as the tests compare it: demangled (our reports keep
    C++ names mangled, perf demangles), without the parameter list, without
    GCC's clone suffixes (foo.constprop.0) or a symbol version (@@GLIBC_2.34)."""
    if name.startswith("_Z"):
        _demangle([name])
        name = _demangled.get(name, name)
    name = _strip_params(name)
    name = _CLONE.sub("", name)
    if "@@" in name:
        name = name.split("@@", 1)[0]
    return name


def normalize(stacks):
    """Any folded dict -> {(comm, frame...): n} with norm()ed user frames
    (kernel frames, "_[k]" in our reports, dropped)."""
    keys = [tuple(k.split(";")) if isinstance(k, str) else tuple(k) for k in stacks]
    _demangle([f for k in keys for f in k[1:]])
    out = {}
    for k, n in zip(keys, stacks.values()):
        frames = tuple(norm(f) for f in k[1:] if not f.endswith("_[k]"))
        key = (k[0], *frames)
        out[key] = out.get(key, 0) + n
    return out


# --- stack arithmetic --------------------------------------------------------

def of_comm(stacks, comm):
    """The samples of processes named comm (the kernel's 15-character comm)."""
    c = comm[:15]
    return {k: n for k, n in normalize(stacks).items() if k[0] == c}


def _matches(pattern, frame):
    if callable(pattern):
        return pattern(frame)
    if isinstance(pattern, (tuple, set, frozenset)):
        return frame in pattern
    return frame == pattern


def has_chain(frames, chain):
    """Whether frames (root..leaf) hold chain as consecutive frames, in order.
    A chain element is a name, a set/tuple of alternative names or a
    predicate; recursion is written out (["descend"] * 7), and since the
    frames around it must match too, it means exactly that many."""
    n = len(chain)
    for i in range(len(frames) - n + 1):
        if all(_matches(p, f) for p, f in zip(chain, frames[i:i + n])):
            return True
    return False


def ends_with_chain(frames, chain):
    n = len(chain)
    return len(frames) >= n and all(_matches(p, f) for p, f in zip(chain, frames[-n:]))


class Shares:
    """A process's samples as the tests judge them:
    total  - all its samples
    leaf   - samples whose innermost user frame is one of the designed leaves
             (the time the fixture is built to spend; the rest is startup,
             the clock, exception unwinding...)
    chain  - leaf samples whose stack ends with chain + [that leaf]
    leaves - each leaf's share of the leaf samples, in percent."""

    def __init__(self, stacks, comm, chain, leaves, what):
        self.what = what
        s = of_comm(stacks, comm)
        self.total = sum(s.values())
        self.leaf = sum(n for k, n in s.items() if len(k) > 1 and k[-1] in leaves)
        self.chain = sum(n for k, n in s.items()
                         if len(k) > 1 and k[-1] in leaves and ends_with_chain(k[1:], list(chain) + [k[-1]]))
        self.leaves = {x: 100.0 * sum(n for k, n in s.items() if len(k) > 1 and k[-1] == x) / max(self.leaf, 1)
                       for x in leaves}
        self.stacks = s
        self._chain = list(chain)

    @property
    def chain_pct(self):
        return 100.0 * self.chain / max(self.leaf, 1)

    @property
    def leaf_pct(self):
        return 100.0 * self.leaf / max(self.total, 1)

    def __str__(self):
        return (f"{self.what}: {self.total} samples, {self.leaf_pct:.1f}% in the leaves, "
                f"full chain {self.chain_pct:.1f}%, leaves "
                + ", ".join(f"{k} {v:.1f}%" for k, v in self.leaves.items()))

    def top(self, n=5):
        """The most common stacks, for a failure message."""
        return "\n".join(f"  {c:6d} {';'.join(k)}" for k, c in
                         sorted(self.stacks.items(), key=lambda kv: -kv[1])[:n])

    def missing(self, n=8):
        """The most common leaf stacks without the whole chain, for a
        failure message."""
        bad = {k: c for k, c in self.stacks.items()
               if len(k) > 1 and k[-1] in self.leaves and not ends_with_chain(k[1:], list(self._chain) + [k[-1]])}
        return "\n".join(f"  {c:6d} {';'.join(k)}" for k, c in sorted(bad.items(), key=lambda kv: -kv[1])[:n])


def share_with(stacks, comm, pred):
    """Percentage of comm's samples whose user frames (root..leaf) satisfy pred."""
    s = of_comm(stacks, comm)
    total = sum(s.values())
    return 100.0 * sum(n for k, n in s.items() if pred(k[1:])) / max(total, 1), total
