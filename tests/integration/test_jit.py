#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""JIT-compiled code named from the runtime's perf map, for real runtimes in
their own PID and mount namespaces (a container's view: PID 1, a private
/tmp), run only with the runtime's own standard flags:

  - Node: node --perf-basic-prof app.js, which writes /tmp/perf-<PID>.map
    as it compiles;
  - the JVM: java -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit,
    and jcmd PID Compiler.perfmap after a warm-up, which writes
    /tmp/perf-<PID>.map of the code compiled so far.

Each workload runs three hot functions in a 5:3:2 ratio of CPU time. The
test asserts that the three are named in the profile with that ratio
(shares among the three functions' self samples, within 5 points), that
the agent read the map through /proc/<host PID>/root/tmp/perf-<NSpid>.map
(NSpid: the PID inside the namespace, 1 here; no such file on the host), and
that the summary's mapping for it says "symbols": "perf map".

Skipped (77) when node or java/javac/jcmd is missing, or unshare cannot make
the namespaces."""

import os
import re
import shutil
import subprocess
import tempfile
import time

from cgproflib import Agent, Cgroup, folded, log, main, profile, skip, skip_prereq, wait_for

RATIO = {"hotAlpha": 50, "hotBeta": 30, "hotGamma": 20}
TOLERANCE = 5.0
MIN_NAMED = 500  # samples in the three functions: enough for 5 points to mean something

NODE_APP = r"""
'use strict';
// Three hot functions with the same body, run for 5:3:2 iterations (a
// round of ~10 us, far below the sampling period, so that the samples
// cannot lock in step with it). The
// driver is never optimized (so it inlines none of them) and each of them
// is its own compiled function in the perf map.
function hotAlpha(n) { let x = 0; for (let i = 0; i < n; i++) x = (x + i * 7) % 1000003; return x; }
function hotBeta(n) { let x = 0; for (let i = 0; i < n; i++) x = (x + i * 7) % 1000003; return x; }
function hotGamma(n) { let x = 0; for (let i = 0; i < n; i++) x = (x + i * 7) % 1000003; return x; }
function drive(seconds) {
    const end = Date.now() + seconds * 1000;
    let s = 0;
    while (Date.now() < end) { s += hotAlpha(5000); s += hotBeta(3000); s += hotGamma(2000); }
    return s;
}
%NeverOptimizeFunction(drive);
// Each optimized before the work starts, on this thread: left to the
// concurrent compiler, the one optimized last runs slower code longest,
// the more so on a loaded machine, and the 5:3:2 time shares drift.
for (const f of [hotAlpha, hotBeta, hotGamma]) {
    %PrepareFunctionForOptimization(f);
    f(1000); f(1000);
    %OptimizeFunctionOnNextCall(f);
    f(1000);
}
console.log('ready');
console.log('done', drive(Number(process.argv[2])));
"""

JAVA_APP = r"""
public class Hot {
    // The same body three times, run for 5:3:2 iterations (a round of
    // ~10 us: the samples cannot lock in step with it); the JVM is told
    // not to inline them (-XX:CompileCommand=dontinline,Hot::hot*).
    static long hotAlpha(long n) { long x = 0; for (long i = 0; i < n; i++) x = (x + i * 7) % 1000003; return x; }
    static long hotBeta(long n) { long x = 0; for (long i = 0; i < n; i++) x = (x + i * 7) % 1000003; return x; }
    static long hotGamma(long n) { long x = 0; for (long i = 0; i < n; i++) x = (x + i * 7) % 1000003; return x; }
    public static void main(String[] a) {
        long end = System.nanoTime() + (long) (Double.parseDouble(a[0]) * 1e9);
        long s = 0;
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) { s += hotAlpha(5000); s += hotBeta(3000); s += hotGamma(2000); }
        System.out.println("done " + s);
    }
}
"""


def need(*programs):
    for p in programs:
        if not shutil.which(p):
            skip_prereq(f"{p} not installed")


def workdir():
    # Not under /tmp: the workload's /tmp is a private tmpfs.
    return tempfile.mkdtemp(prefix="cgprof-test-jit-", dir="/var/tmp")


def run_in_namespaces(cg, argv, cwd):
    """Starts argv in cgroup cg, in new PID and mount namespaces with a
    private tmpfs on /tmp, as a container runtime would: a shell joins the
    cgroup, then unshare forks the namespace's PID 1, which mounts /tmp and
    execs argv. Returns the Popen of the outer shell."""
    procs = os.path.join(cg.path, "cgroup.procs")
    wrapper = ["/bin/sh", "-c",
               'echo 0 > "$0" && exec unshare --pid --mount --fork --mount-proc --propagation private '
               'sh -c \'mount -t tmpfs tmpfs /tmp && exec "$@"\' sh "$@"', procs]
    return subprocess.Popen(wrapper + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)


def process_in(cg, comm):
    """The host PID of the process named comm in cgroup cg, or None."""
    with open(os.path.join(cg.path, "cgroup.procs")) as f:
        for pid in f.read().split():
            try:
                with open(f"/proc/{pid}/comm") as c:
                    if c.read().strip() == comm:
                        return int(pid)
            except OSError:
                pass
    return None


def nspid_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    return [pid]


def check_namespaces():
    r = subprocess.run(["unshare", "--pid", "--mount", "--fork", "--mount-proc", "--propagation", "private",
                        "sh", "-c", "mount -t tmpfs tmpfs /tmp && echo $$"], capture_output=True, text=True)
    if r.returncode != 0 or r.stdout.strip() != "1":
        skip(f"cannot make PID and mount namespaces here: {r.stderr.strip()}")


def shares(report, comm):
    """Self samples of the three functions (matched by name in the leaf
    frame, whatever the runtime adds around it), as shares among the
    three; and how many of the process's samples they are."""
    counts = dict.fromkeys(RATIO, 0)
    process_total = 0
    for stack, n in folded(report).items():
        if stack[0] != comm:
            continue
        process_total += n
        for name in RATIO:
            if re.search(rf"\b{name}\b", stack[-1]):
                counts[name] += n
    named = sum(counts.values())
    log(f"{comm}: {named} of the process's {process_total} samples in the three functions; leaves:",
        {k: v for k, v in sorted(leaves(report, comm).items(), key=lambda kv: -kv[1])[:8]})
    assert named >= MIN_NAMED, f"only {named} samples named {list(RATIO)}"
    got = {k: 100.0 * v / named for k, v in counts.items()}
    log("shares among the three: " + ", ".join(f"{k} {v:.1f}% (want {RATIO[k]})" for k, v in got.items()))
    for name, want in RATIO.items():
        assert abs(got[name] - want) <= TOLERANCE, f"{name}: {got[name]:.1f}% is not {want}±{TOLERANCE}%"
    return named, process_total


def leaves(report, comm):
    out = {}
    for stack, n in folded(report).items():
        if stack[0] == comm:
            out[stack[-1]] = out.get(stack[-1], 0) + n
    return out


def assert_found_in_namespace(agent, report, host_pid, nspid):
    assert nspid != host_pid and nspid in (1, 2), (host_pid, nspid)
    path = f"/tmp/perf-{nspid}.map"
    # The agent read the process's own file, through its root ...
    through = f"/proc/{host_pid}/root{path}"
    assert through in agent.log(), f"the agent did not read {through}"
    # ... not one of the host's.
    assert not os.path.exists(f"/tmp/perf-{host_pid}.map")
    m = [x for x in report["mappings"] if x["file"] == path]
    log("JIT mapping:", m)
    assert m and m[0]["symbols"] == "perf map", report["mappings"]


def profile_jit(tag, argv, comm, cwd, during=None, seconds=4):
    """Runs argv (printing 'ready' once started) in cwd (node --perf-basic-prof
    also writes a V8 log there), in namespaces in a cgroup
    profiled by the agent; during(host_pid) runs once it is ready. Returns
    the report, the agent, the host PID and the NSpid."""
    cg = Cgroup(f"cgprof-test-jit-{tag}-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="jit")],
        "targets": [{"name": "jit", "profileRef": "jit", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        t0 = time.monotonic()
        p = run_in_namespaces(cg, argv, cwd)
        line = p.stdout.readline().decode()
        assert line.startswith("ready"), f"{tag} did not start: {line!r} {p.stderr.read().decode()[-2000:]}"
        host_pid = wait_for(lambda: process_in(cg, comm), 10, f"the {comm} process")
        nspid = nspid_of(host_pid)[-1]
        log(f"{tag}: host PID {host_pid}, NSpid {nspid_of(host_pid)}, ready after {time.monotonic() - t0:.1f} s")
        if during:
            during(host_pid)
        out, err = p.communicate(timeout=60 + seconds)
        assert p.returncode == 0, f"{tag} failed ({p.returncode}): {err.decode()[-2000:]}"
        log(f"{tag}: ran {time.monotonic() - t0:.1f} s")
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        return report, agent, host_pid, nspid
    except BaseException:
        agent.cleanup()
        raise
    finally:
        cg.remove()


def test_node_perf_basic_prof():
    need("node", "unshare")
    check_namespaces()
    d = workdir()
    agent = None
    try:
        app = os.path.join(d, "app.js")
        with open(app, "w") as f:
            f.write(NODE_APP)
        report, agent, host_pid, nspid = profile_jit(
            "node", ["node", "--perf-basic-prof", "--allow-natives-syntax", app, "3"], "node", d)
        shares(report, "node")
        assert_found_in_namespace(agent, report, host_pid, nspid)
    finally:
        if agent:
            agent.cleanup()
        shutil.rmtree(d, ignore_errors=True)


def test_java_perfmap():
    need("java", "javac", "jcmd", "unshare")
    check_namespaces()
    d = workdir()
    agent = None
    try:
        with open(os.path.join(d, "Hot.java"), "w") as f:
            f.write(JAVA_APP)
        t0 = time.monotonic()
        subprocess.run(["javac", "-d", d, os.path.join(d, "Hot.java")], check=True)
        log(f"javac: {time.monotonic() - t0:.1f} s")

        def perfmap(host_pid):
            # Warm-up: the hot methods compiled (C2) before the map is
            # written; jcmd reaches the JVM in its namespace by the host PID
            # (through /proc/PID/root/tmp/.java_pid<NSpid>).
            time.sleep(1.0)
            t = time.monotonic()
            r = subprocess.run(["jcmd", str(host_pid), "Compiler.perfmap"], capture_output=True, text=True,
                               timeout=60)
            log(f"jcmd Compiler.perfmap: {time.monotonic() - t:.1f} s: {r.stdout.strip()} {r.stderr.strip()}")
            assert r.returncode == 0, r

        report, agent, host_pid, nspid = profile_jit(
            "java", ["java", "-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit",
                     "-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,Hot::hot*",
                     # Compiled at once, in the final tier, the thread
                     # waiting for it: otherwise each function spends a
                     # while of its share in slower tiers, and on a loaded
                     # machine the one compiled last runs slow longest.
                     "-XX:-TieredCompilation", "-Xbatch",
                     "-cp", d, "Hot", "4"], "java", d, during=perfmap, seconds=4)
        shares(report, "java")
        assert_found_in_namespace(agent, report, host_pid, nspid)
    finally:
        if agent:
            agent.cleanup()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main([test_node_perf_basic_prof, test_java_perfmap])
