# SPDX-License-Identifier: LGPL-2.1-or-later
"""Container churn on a Kubernetes node, for test_churn.py and bench/churn.

Plays kubelet + containerd against a real API server (kubelib.KubeCluster)
while cgprofd profiles the node: N containers, K at once, each living L
seconds (uniform in [min_life, max_life]):

  1. the pod is created bound to the node, in a namespace labelled
     cgprof.io/profile=enabled (the agent's enableDefault targets it);
  2. its pod cgroup, its sandbox's cgroup (a "pause" process: `sleep`) and
     its container's cgroup are made as kubelet (systemd driver) and
     containerd make them;
  3. 1-3 processes run in the container: `sleep L` always, plus up to two
     of the tests' workload spinning for up to 1 s and a CPython loop busy
     ~10 % of the time for L seconds;
  4. the status is patched Running with the container's ID (the agent then
     discards a provisional session of the sandbox, if it started one);
  5. when the processes have exited, the pod goes one of three ways, in
     turn: its cgroups are removed first (session ends "cgroup-removed"),
     its status says terminated first ("container-exited"), or it is
     deleted first ("pod-deleted"); every 10th container never gets a status
     (it dies at once: a session may end still provisional);
  6. the cgroups are removed and the pod deleted.

The agent's RSS, open fds and CPU are sampled every second. A warm-up
(the first tenth of the containers) ends with the agent idle (no session,
no pod, a few drains passed); so does the end: snapshots of both idle
points compare without the live containers' fds and buffers. Then the
agent's BPF maps are counted and its accounting read back (status
counters, reports on disk, journal entries)."""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

import cgproflib
import kubelib
from journallib import MSG_END, MSG_FAILURE, MSG_START, process_journal

NODE = "churn-node"
NAMESPACE = "churn"
PROFILE_LABEL = "cgprof.io/profile"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
# A CPython process busy about 10 % of the time for argv[1] seconds: its
# interpreter, thread state and code objects are looked up by the agent.
PY_LOOP = """
import sys, time
end = time.monotonic() + float(sys.argv[1])
def spin(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
while time.monotonic() < end:
    spin(20000)
    time.sleep(0.02)
"""

# The agent's BPF maps by name (as the kernel keeps it, 15 characters at
# most) and what occupancy each must come back to once nothing is profiled:
# "zero" (entries are removed when a session or process goes), "lru" (an
# LRU hash: entries of dead processes stay until evicted or their slot is
# reused; bounded by max_entries), "inactive" (an array: no slot has its
# ACTIVE flag).
MAPS = {
    "cgroups": "zero",
    "sessions": "inactive",
    "counts0": "zero",
    "counts1": "zero",
    "stacks0": "zero",
    "stacks1": "zero",
    "long_stacks0": "zero",
    "long_stacks1": "zero",
    "unwind_procs": "zero",
    "unwind_mappings": "zero",
    "python_procs": "zero",
    "procs_seen": "lru",
    "python_threads": "lru",
}
SESSION_ACTIVE = 1  # bpf/profile.h CGPROF_SESSION_ACTIVE


class ChurnError(Exception):
    pass


def read_file(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def proc_status_kb(pid, key):
    for line in (read_file(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def proc_cpu_seconds(pid):
    """utime+stime of a live process (its threads included), in seconds."""
    stat = read_file(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_fds(pid):
    """(count, {kind: count}) of a process's open fds."""
    kinds = {}
    d = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(d)
    except OSError:
        return None, {}
    for fd in fds:
        try:
            t = os.readlink(os.path.join(d, fd))
        except OSError:
            continue
        if t.startswith("anon_inode:"):
            k = t[len("anon_inode:"):].strip("[]")
        elif t.startswith(("socket:", "pipe:")):
            k = t.partition(":")[0]
        elif t.startswith("/sys/fs/cgroup"):
            k = "cgroup"
        else:
            k = "file"
        kinds[k] = kinds.get(k, 0) + 1
    return len(fds), kinds


def snapshot(pid):
    fds, kinds = proc_fds(pid)
    return {"t": time.monotonic(), "rss_kb": proc_status_kb(pid, "VmRSS"), "hwm_kb": proc_status_kb(pid, "VmHWM"),
            "fds": fds, "fd_kinds": kinds, "cpu_s": proc_cpu_seconds(pid),
            "threads": proc_status_kb(pid, "Threads")}


def kube_agent(kubeconfig, hz=99, node=NODE, log_level="info", attach_mode=None, tmp=None):
    """A cgproflib.Agent with Kubernetes on (the API server of kubeconfig,
    this node), profiling every pod of a labelled namespace (enableDefault)
    at hz with the default formats, until each container ends."""
    config = {"enableDefault": True, "defaultProfileRef": "churn",
              "profiles": [{"name": "churn", "event": "cpu-clock", "frequency": hz, "duration": "0"}]}
    a = cgproflib.Agent(config, attach_mode=attach_mode, tmp=tmp,
                        extra_args=["--kubeconfig", kubeconfig, "--node-name", node])
    argv = a.argv

    def kube_argv():
        out = [x for x in argv() if x != "--no-kubernetes"]
        out[out.index("--log-level") + 1] = log_level
        return out

    a.argv = kube_argv
    return a


# --------------------------------------------------------------------------
# BPF maps


def agent_map_ids(pid):
    """IDs of the BPF maps process pid holds fds of (/proc/PID/fdinfo)."""
    ids = set()
    d = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(d):
        m = re.search(r"^map_id:\s*(\d+)$", read_file(os.path.join(d, fd)) or "", re.M)
        if m:
            ids.add(int(m.group(1)))
    return ids


def bpftool(*args):
    r = subprocess.run(["bpftool", "--json", *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise ChurnError(f"bpftool {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout or "null")


def _value_bytes(entry):
    """An entry's value as bytes (bpftool's "value" is a list of "0x.." strings)."""
    v = entry.get("value")
    if isinstance(v, list):
        return bytes(int(x, 16) for x in v)
    return None


def map_occupancy(pid):
    """{name: {"id", "type", "max", "entries", "expect"}} of the agent's maps
    that MAPS names. entries: the number of keys (hash, LRU, LPM trie) or,
    for the sessions array, the slots whose ACTIVE flag is set."""
    if not shutil.which("bpftool"):
        raise ChurnError("bpftool not installed")
    ids = agent_map_ids(pid)
    shown = {m["id"]: m for m in bpftool("map", "show") if m.get("id") in ids}
    out = {}
    for mid, m in sorted(shown.items()):
        name = m.get("name", "")
        if name not in MAPS:
            continue
        dump = bpftool("map", "dump", "id", str(mid)) or []
        if MAPS[name] == "inactive":
            n = 0
            for e in dump:
                f = e.get("formatted", {}).get("value")
                if isinstance(f, dict) and "flags" in f:
                    flags = int(f["flags"])
                else:
                    b = _value_bytes(e)
                    flags = int.from_bytes(b[4:8], "little") if b and len(b) >= 8 else 0
                n += bool(flags & SESSION_ACTIVE)
        else:
            n = len(dump)
        out[name] = {"id": mid, "type": m.get("type"), "max": m.get("max_entries"), "entries": n,
                     "expect": MAPS[name]}
    missing = set(MAPS) - set(out)
    if missing:
        raise ChurnError(f"the agent holds no map named {', '.join(sorted(missing))}")
    return out


# --------------------------------------------------------------------------
# the churn


class Sampler(threading.Thread):
    """The agent's RSS, fds and CPU every `interval` seconds, with how many
    containers were done then."""

    def __init__(self, pid, churn, interval=1.0):
        super().__init__(daemon=True)
        self.pid, self.churn, self.interval = pid, churn, interval
        self.series = []
        self.stop_ev = threading.Event()

    def run(self):
        while not self.stop_ev.is_set():
            s = snapshot(self.pid)
            if s["rss_kb"] is None:
                return
            s["done"] = self.churn.done
            self.series.append(s)
            self.stop_ev.wait(self.interval)

    def stop(self):
        self.stop_ev.set()
        self.join()


class Churn:
    """N containers, `concurrency` at once, against the cluster kc, the
    cgroups cgs (a kubelib.KubeCgroups) and the agent (pid, a status()
    callable returning `cgprofctl --json status`)."""

    def __init__(self, kc, cgs, agent_pid, agent_started_us, status, workload, containers=1000, concurrency=8, min_life=1.0,
                 max_life=5.0, seed=1, namespace=NAMESPACE, node=NODE, warmup=0.1, log=cgproflib.log):
        if containers < 1 or concurrency < 1 or not 0 < min_life <= max_life:
            raise ValueError("bad churn parameters")
        self.kc, self.cgs, self.pid, self.status = kc, cgs, agent_pid, status
        # When the agent started (CLOCK_REALTIME µs): its journal entries
        # are the ones of its PID since then (PIDs wrap).
        self.started_us = agent_started_us
        self.workload = workload
        self.n, self.k = containers, concurrency
        self.min_life, self.max_life = min_life, max_life
        self.ns, self.node = namespace, node
        self.log = log
        # Enough warm-up containers for every process kind and ending.
        self.n_warm = min(containers, max(int(containers * warmup), 6))
        self.rng = random.Random(seed)
        self.plans = [self.plan(i) for i in range(containers)]
        self.cg_lock = threading.Lock()  # KubeCgroups keeps a list and a record file
        self.done = 0
        self.errors = []
        self.snapshots = {}
        self.sampler = None
        # Status patches go straight to the API (a kubectl process each is ~0.2 s).
        kc._kubectl_subresource = False

    def plan(self, i):
        life = self.rng.uniform(self.min_life, self.max_life)
        extra = [("work", "python")[i % 2]] if i % 3 else []
        if self.rng.random() < 0.5:
            extra.append(self.rng.choice(("work", "python")))
        ending = ("cgroup-removed", "container-exited", "pod-deleted")[i % 3]
        return {"name": f"churn-{i:04d}", "life": life, "kinds": ["sleep"] + extra[:2], "ending": ending,
                "status": i % 10 != 9, "work_s": self.rng.uniform(0.2, min(1.0, life))}

    def argv(self, kind, plan):
        if kind == "sleep":
            return ["sleep", f"{plan['life']:.3f}"]
        if kind == "work":
            return [self.workload, "--seconds", f"{plan['work_s']:.3f}", "--name", "churn-work"]
        return [PYTHON, "-c", PY_LOOP, f"{plan['life']:.3f}"]

    @staticmethod
    def spawn(cg, argv):
        """argv in cgroup cg, entered before exec() (cgproflib.run_in_cgroup's way)."""
        procs = os.path.join(cg.path, "cgroup.procs")
        wrapper = [cgproflib.LAUNCHER, "-c", 'echo 0 > "$0" && exec "$@"', procs]
        return subprocess.Popen(wrapper + argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    # ---- kubelet's part

    def one(self, i):
        p = self.plans[i]
        ns, name = self.ns, p["name"]
        pod = self.kc.api_ok("POST", f"/api/v1/namespaces/{ns}/pods", self.kc.pod_manifest(ns, name, self.node))
        uid, qos = pod["metadata"]["uid"], pod["status"].get("qosClass", "BestEffort")
        cid, sandbox_id = kubelib.new_container_id(), kubelib.new_container_id()
        with self.cg_lock:
            self.cgs.pod(uid, qos)
            sandbox = self.cgs.container(uid, qos, sandbox_id)
            cg = self.cgs.container(uid, qos, cid)
        procs = [self.spawn(sandbox, ["sleep", f"{p['life'] + 60:.0f}"])]  # the pause container
        try:
            procs += [self.spawn(cg, self.argv(k, p)) for k in p["kinds"]]
            if p["status"]:
                self.kc.set_pod_running(ns, name, {"main": cid})
            for q in procs[1:]:
                q.wait(p["life"] + 120)
            if p["status"] and p["ending"] == "container-exited":
                self.kc.set_pod_finished(ns, name, {"main": cid})
            if p["ending"] == "pod-deleted":
                self.delete_pod(ns, name)
            with self.cg_lock:
                self.cgs.remove_pod(uid, qos)  # kills the pause process
            if p["ending"] != "pod-deleted":
                self.delete_pod(ns, name)
        finally:
            for q in procs:
                if q.poll() is None:
                    q.kill()
                q.wait()

    def delete_pod(self, ns, name):
        st, obj = self.kc.api("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}",
                              {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        if st not in (200, 202, 404):
            raise ChurnError(f"delete pod {ns}/{name}: {st} {obj}")

    def run_range(self, first, last):
        it = iter(range(first, last))
        lock = threading.Lock()

        def worker():
            while not self.errors:
                with lock:
                    i = next(it, None)
                if i is None:
                    return
                try:
                    self.one(i)
                except Exception as e:  # stops the others: a harness error
                    self.errors.append(f"{self.plans[i]['name']}: {e!r}")
                    return
                with lock:
                    self.done += 1
                    if self.done % max(1, self.n // 10) == 0:
                        s = snapshot(self.pid)
                        self.log(f"churn: {self.done}/{self.n} containers, agent RSS "
                                 f"{s['rss_kb'] / 1024:.1f} MiB, {s['fds']} fds, CPU {s['cpu_s']:.1f} s")

        ts = [threading.Thread(target=worker) for _ in range(min(self.k, last - first))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if self.errors:
            raise ChurnError(f"{len(self.errors)} containers failed: {self.errors[:3]}")

    def wait_idle(self, drains=3, timeout=120):
        """Until the agent has no session and no pod, then `drains` more
        drains. Returns the status then."""
        end = time.monotonic() + timeout
        first = None
        while True:
            st = self.status()
            idle = not st["sessions"] and st.get("kubernetes", {}).get("pods", 0) == 0
            if idle and first is None:
                first = st["drains"]["count"]
            elif not idle:
                first = None
            if idle and st["drains"]["count"] >= first + drains:
                return st
            if time.monotonic() > end:
                raise ChurnError(f"the agent is not idle {timeout} s after the last container: "
                                 f"{len(st['sessions'])} sessions, {st.get('kubernetes', {}).get('pods')} pods")
            time.sleep(0.2)

    def run(self):
        """Warm-up, idle, the rest, idle. Fills self.snapshots: start (idle,
        before any container), warm (idle after the warm-up), end (idle
        after the last), and self.status_end."""
        self.kc.create_namespace(self.ns, labels={PROFILE_LABEL: "enabled"})
        self.wait_idle(drains=2)
        self.snapshots["start"] = snapshot(self.pid)
        self.sampler = Sampler(self.pid, self)
        self.sampler.start()
        self.t_start = time.monotonic()
        try:
            self.log(f"churn: warm-up, {self.n_warm} containers")
            self.run_range(0, self.n_warm)
            self.wait_idle()
            self.snapshots["warm"] = snapshot(self.pid)
            self.log(f"churn: {self.n - self.n_warm} more containers, {self.k} at once")
            self.run_range(self.n_warm, self.n)
            self.t_last = time.monotonic()
            self.status_end = self.wait_idle()
            self.snapshots["end"] = snapshot(self.pid)
        finally:
            self.sampler.stop()
        self.wall_s = self.t_last - self.t_start

    # ---- what is checked

    def accounting(self, report_dir, agent_log=""):
        """The agent's sessions counted four ways: its status counters,
        summary.json files under report_dir, and its journal entries (by
        MESSAGE_ID, from its PID). The agent sends an entry to stderr
        instead when no journal socket is there (agent/base/journal.c): on this
        shared machine another test may stop the journald in use and start
        its own, so the entries of agent_log (its stderr) count too."""
        st = self.status_end
        reports = []
        for dirpath, _, files in os.walk(report_dir):
            if "summary.json" in files:
                with open(os.path.join(dirpath, "summary.json")) as f:
                    reports.append(json.load(f))
        kinds = {"start": MSG_START, "end": MSG_END, "failure": MSG_FAILURE}
        on_stderr = {m: [] for m in kinds.values()}
        for m in re.finditer(r" CGPROF_EVENT=(start|end|failure) CGPROF_SESSION=([0-9a-f]{32})\b", agent_log):
            on_stderr[kinds[m.group(1)]].append(m.group(2))

        def read_journal():
            by_kind = {m: list(v) for m, v in on_stderr.items()}
            for e in process_journal(self.pid, self.started_us):
                if e.get("MESSAGE_ID") in by_kind:
                    by_kind[e["MESSAGE_ID"]].append(e.get("CGPROF_SESSION"))
            return by_kind

        # journald stores what it received a little later: read until it
        # has an end entry per report (or give up after a while and count).
        end = time.monotonic() + 30
        while True:
            by_kind = read_journal()
            if len(by_kind[MSG_END]) + len(by_kind[MSG_FAILURE]) >= len(reports) or time.monotonic() > end:
                break
            time.sleep(0.5)
        ids = [r["session"] for r in reports]
        starts, ends = by_kind[MSG_START], by_kind[MSG_END]
        per_session_ok = sum(1 for sid in ids if starts.count(sid) == 1 and ends.count(sid) == 1)
        return {
            "started": st["sessionsStarted"],
            "ended": st["sessionsEnded"],
            "failed": st["sessionsFailed"],
            "discarded": st.get("sessionsDiscarded"),
            "reports": len(reports),
            "report_sessions": len(set(ids)),
            "containers_profiled": len({r.get("pod") for r in reports if r.get("container") == "main"}),
            "end_reasons": count_by(r.get("endReason") for r in reports),
            "samples": sum(r.get("samples", {}).get("total", 0) for r in reports),
            "journal_start": len(starts),
            "journal_end": len(ends),
            "journal_failure": len(by_kind[MSG_FAILURE]),
            "journal_sessions_complete": per_session_ok,
            "journal_on_stderr": sum(len(v) for v in on_stderr.values()),
        }

    def growth(self):
        """(RSS kB, fds) at the end less after the warm-up (both idle)."""
        w, e = self.snapshots["warm"], self.snapshots["end"]
        return e["rss_kb"] - w["rss_kb"], e["fds"] - w["fds"]


def count_by(xs):
    out = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def invariants(acc, maps, snaps):
    """[(name, ok, detail)] of what must hold after a churn."""
    out = []
    d = acc["discarded"]
    out.append(("sessions started = reports written + discarded",
                d is not None and acc["started"] == acc["reports"] + d + acc["failed"],
                f"{acc['started']} = {acc['reports']} + {d} (+ {acc['failed']} failed)"))
    out.append(("sessions ended = reports written (one summary.json each)",
                acc["ended"] == acc["reports"] == acc["report_sessions"],
                f"ended {acc['ended']}, summary.json {acc['reports']}, distinct sessions {acc['report_sessions']}"))
    out.append(("no session failed", acc["failed"] == 0 and acc["journal_failure"] == 0,
                f"sessionsFailed {acc['failed']}, failure entries {acc['journal_failure']}"))
    out.append(("journal: one start and one end entry per reported session",
                acc["journal_start"] == acc["journal_end"] == acc["reports"] == acc["journal_sessions_complete"],
                f"start {acc['journal_start']}, end {acc['journal_end']}, sessions with both "
                f"{acc['journal_sessions_complete']} of {acc['reports']}"
                + (f" ({acc['journal_on_stderr']} entries on stderr: no journal socket then)"
                   if acc["journal_on_stderr"] else "")))
    for name, m in sorted(maps.items()):
        if m["expect"] == "lru":
            continue
        out.append((f"BPF map {name} empty" if m["expect"] == "zero" else f"BPF map {name}: no active slot",
                    m["entries"] == 0, f"{m['entries']} of {m['max']}"))
    return out
