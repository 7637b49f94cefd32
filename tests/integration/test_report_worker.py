#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reports are written off the event loop. The report directory is on a
disk that stalls on demand (gatefs.py: a FUSE file system whose file
creations wait while a gate file exists). While a report's write is stuck
there, the agent still answers: status shows the report queued, sessions
list, other sessions keep sampling; `cgprofctl stop` answers only once its
report is written, whole. On SIGTERM with a write stuck, the agent waits
for it and exits cleanly afterwards with every report complete."""

import json
import os
import signal
import subprocess
import tempfile
import threading

from cgproflib import CGPROFCTL, Agent, Cgroup, log, main, profile, skip, skip_prereq, wait_for, workload

SYSTEM_PYTHON = "/usr/bin/python3"
GATEFS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gatefs.py")


class GateDisk:
    """A FUSE mount over a backing directory; close() shuts the gate (file
    creations wait), open() lets them through."""

    def __init__(self):
        if not os.path.exists("/dev/fuse"):
            skip("no /dev/fuse")
        r = subprocess.run([SYSTEM_PYTHON, "-c", "import fusepy"], capture_output=True, text=True)
        if r.returncode != 0:
            skip_prereq(f"no fusepy module for {SYSTEM_PYTHON} (python3-fusepy): {r.stderr.strip()}")
        self.tmp = tempfile.mkdtemp(prefix="cgprof-gatefs-")
        self.backing = os.path.join(self.tmp, "backing")
        self.mount = os.path.join(self.tmp, "mnt")
        self.gate = os.path.join(self.tmp, "gate")
        self.blocked = os.path.join(self.tmp, "blocked")
        os.mkdir(self.backing)
        os.mkdir(self.mount)
        self.proc = subprocess.Popen([SYSTEM_PYTHON, GATEFS, self.backing, self.mount, self.gate, self.blocked],
                                     stderr=subprocess.PIPE)
        try:
            wait_for(lambda: os.path.ismount(self.mount) or self.proc.poll() is not None, what="the FUSE mount")
        except AssertionError:
            self.cleanup()
            raise
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode()
            self.cleanup()
            skip(f"cannot mount a FUSE file system here: {err.strip()}")

    def close(self):
        if os.path.exists(self.blocked):
            os.unlink(self.blocked)
        with open(self.gate, "w"):
            pass

    def open(self):
        os.unlink(self.gate)

    def is_blocking(self):
        return os.path.exists(self.blocked)

    def cleanup(self):
        if os.path.exists(self.gate):
            os.unlink(self.gate)
        subprocess.run(["umount", "-l", self.mount], capture_output=True)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def agent_on(disk, cgroups):
    return Agent({
        "reportDir": os.path.join(disk.mount, "reports"),
        "profiles": [profile(name="w", formats=["folded", "pprof", "svg", "json"], checkpointInterval="0")],
        "targets": [{"name": "t", "profileRef": "w", "cgroupPatterns": [cg.rel for cg in cgroups]}],
    })


def session_ids(agent):
    return sorted(s["id"] for s in agent.status()["sessions"])


def complete(report_dir):
    with open(os.path.join(report_dir, "summary.json")) as f:
        s = json.load(f)
    assert not s.get("partial"), s
    for name in ("profile.folded", "profile.pb.gz", "flame.svg"):
        assert os.path.getsize(os.path.join(report_dir, name)) > 0, name
    return s


def test_stop_waits_for_its_report_not_the_loop():
    disk = GateDisk()
    a_cg, b_cg = Cgroup(f"cgprof-test-rw-a-{os.getpid()}"), Cgroup(f"cgprof-test-rw-b-{os.getpid()}")
    agent = agent_on(disk, [a_cg, b_cg])
    procs = []
    try:
        agent.start()
        procs = [workload(a_cg, 60), workload(b_cg, 60)]
        wait_for(lambda: len(agent.status()["sessions"]) == 2 and
                 all(s["samples"] > 0 for s in agent.status()["sessions"]), what="two sessions with samples")
        sid_a = next(s["id"] for s in agent.status()["sessions"] if s["cgroup"] == a_cg.rel)

        disk.close()
        # `cgprofctl stop` in the background: it answers once the report is written.
        result = {}
        stopper = threading.Thread(target=lambda: result.update(r=subprocess.run(
            [CGPROFCTL, "--bus-socket", agent.bus, "stop", sid_a], capture_output=True, text=True, timeout=300)))
        stopper.start()
        wait_for(disk.is_blocking, what="the report write to wait at the gate")

        # The write is stuck on the worker; the loop answers, and says so.
        st = agent.status()
        log("while stuck:", st["reportQueue"], st["eventLoop"])
        assert st["reportQueue"]["directories"] == 1, st["reportQueue"]
        assert [s["cgroup"] for s in st["sessions"]] == [b_cg.rel], st["sessions"]
        before = st["sessions"][0]["samples"]
        # The other session keeps sampling (the drains go on).
        wait_for(lambda: agent.status()["sessions"][0]["samples"] > before, what="the other session's samples")
        assert stopper.is_alive() and "r" not in result, result

        disk.open()
        stopper.join()
        r = result["r"]
        assert r.returncode == 0, r.stderr
        report = next(line.split(": ", 1)[1] for line in r.stdout.splitlines() if line.startswith("Report: "))
        s = complete(report)
        assert s["session"] == sid_a and s["endReason"] == "stopped" and s["samples"]["total"] > 0, s
        assert agent.status()["reportQueue"]["directories"] == 0
    finally:
        for p in procs:
            p.kill()
            p.wait()
        agent.cleanup()
        a_cg.remove()
        b_cg.remove()
        disk.cleanup()


def test_sigterm_waits_for_the_reports():
    disk = GateDisk()
    cgs = [Cgroup(f"cgprof-test-rw-t{i}-{os.getpid()}") for i in range(3)]
    agent = agent_on(disk, cgs)
    procs = []
    try:
        agent.start()
        procs = [workload(cg, 60) for cg in cgs]
        wait_for(lambda: len(agent.status()["sessions"]) == 3 and
                 all(s["samples"] > 0 for s in agent.status()["sessions"]), what="three sessions with samples")
        ids = session_ids(agent)

        disk.close()
        agent.signal(signal.SIGTERM)
        wait_for(disk.is_blocking, what="a report write to wait at the gate")
        # Stuck on the worker: the agent is still there, and still answers.
        assert agent.proc.poll() is None
        st = agent.status()
        log("stopping, stuck:", st["reportQueue"])
        assert st["reportQueue"]["directories"] >= 1, st["reportQueue"]

        disk.open()
        assert agent.proc.wait(timeout=120) == 0, agent.log()[-2000:]
        reports = {}
        for dirpath, _, files in os.walk(os.path.join(disk.mount, "reports")):
            if "summary.json" in files:
                s = complete(dirpath)
                reports[s["session"]] = s
        assert sorted(reports) == ids, (sorted(reports), ids)
        assert all(s["endReason"] == "agent-stopped" for s in reports.values())
        assert "Stopped: the last reports were written" in agent.log()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        agent.cleanup()
        for cg in cgs:
            cg.remove()
        disk.cleanup()


if __name__ == "__main__":
    main([test_stop_waits_for_its_report_not_the_loop, test_sigterm_waits_for_the_reports])
