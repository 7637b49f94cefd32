#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checkpoints (the profile's checkpointInterval):
- a session with `duration: 0` writes its report so far every interval,
  marked "partial": true, each checkpoint replacing the last in the same
  directory, with no temporary file left; SIGKILL the agent: the
  checkpoint stays, the registry entry too; at restart the report is
  marked "interrupted": true with the reason, one journal entry per report,
  `go tool pprof -top` reads its profile.pb.gz, and the machineConfig sysctl
  (below a private --sysctl-root) is restored at the next clean stop to its
  value from before the first start;
- a per-process template: one checkpoint per process, each marked
  interrupted after a crash; the next session's final reports replace its
  checkpoints in the same directories;
- a session whose duration ends before the interval writes none.
Starts systemd-journald when no journal is running (and stops it after)."""

import json
import os
import shutil
import subprocess
import tempfile
import time

from cgproflib import Agent, Cgroup, log, main, profile, read_sysctl, skip_prereq, wait_for, workload
from systemdlib import message_ids
from journallib import ensure_journald, journal, stop_journald

MSG_INTERRUPTED = message_ids()["REPORT_INTERRUPTED"]
SYSCTL = "kernel.perf_event_mlock_kb"


def files_below(d):
    return sorted(os.path.relpath(os.path.join(p, f), d) for p, _, fs in os.walk(d) for f in fs)


def summary(path):
    with open(os.path.join(path, "summary.json")) as f:
        return json.load(f)


def pprof_top(path):
    go = shutil.which("go")
    if not go:
        skip_prereq("no go (golang-go) for go tool pprof")
    home = tempfile.mkdtemp(prefix="cgprof-go-")
    try:
        env = dict(os.environ, HOME=home, GOCACHE=os.path.join(home, "cache"), GOPATH=os.path.join(home, "path"),
                   PPROF_TMPDIR=home, GOFLAGS="", GO111MODULE="off")
        r = subprocess.run([go, "tool", "pprof", "-top", path], capture_output=True, text=True, timeout=300,
                           env=env)
        assert r.returncode == 0, f"go tool pprof -top {path} failed ({r.returncode}):\n{r.stderr}"
        return r.stdout
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_crash_and_recovery():
    ensure_journald()
    # A private sysctl root (--sysctl-root): tests of other trees running
    # on this machine may change the real sysctl at the same time.
    tmp = tempfile.mkdtemp(prefix="cgprof-test-")
    sysctls = os.path.join(tmp, "sysctl")
    os.makedirs(os.path.join(sysctls, "kernel"))
    sysctl_file = os.path.join(sysctls, *SYSCTL.split("."))
    orig = read_sysctl(SYSCTL)
    want = str(int(orig) + 4)
    with open(sysctl_file, "w") as f:
        f.write(orig + "\n")

    def sysctl():
        with open(sysctl_file) as f:
            return f.read().strip()

    cg = Cgroup(f"cgprof-test-checkpoint-{os.getpid()}")
    agent = Agent({
        "machineConfig": [{"name": SYSCTL, "value": want}],
        "profiles": [profile(name="cp", duration="0", checkpointInterval="1s",
                             formats=["folded", "json", "pprof"])],
        "targets": [{"name": "t", "profileRef": "cp", "cgroupPatterns": [cg.rel]}],
    }, tmp=tmp, extra_args=["--sysctl-root", sysctls])
    registry = os.path.join(agent.state_dir, "checkpoints")
    w = None
    try:
        w = workload(cg, 120)
        agent.start()
        assert sysctl() == want
        first = agent.wait_summary(lambda s: s.get("partial") is True and s["samples"]["total"] > 0,
                                   what="a checkpoint")
        sid, d = first["session"], first["_dir"]
        assert first["endReason"] is None and "interrupted" not in first, first
        # The next checkpoint replaces it in the same directory.
        wait_for(lambda: summary(d)["samples"]["total"] > first["samples"]["total"], what="a second checkpoint")
        st = agent.status()["checkpoints"]
        log(f"checkpoints: {st}")
        assert st["written"] >= 2 and st["failed"] == 0, st
        assert [s["_dir"] for s in agent.summaries()] == [d]
        assert files_below(d) == ["profile.folded", "profile.pb.gz", "summary.json"], files_below(d)
        with open(os.path.join(registry, sid)) as f:
            entry = json.load(f)
        assert entry["reportDir"] == agent.report_dir and \
            [os.path.join(agent.report_dir, x) for x in entry["dirs"]] == [d], entry

        # A crash: nothing ends the session, nothing restores the sysctl.
        agent.kill()
        last = summary(d)
        assert last["partial"] is True and last["session"] == sid
        assert sysctl() == want
        # What a write cut short would leave: a temporary file.
        with open(os.path.join(d, ".#profile.folded.AbCdEf"), "w") as f:
            f.write("half")

        agent.start()
        marked = summary(d)
        assert marked["interrupted"] is True and marked["partial"] is True, marked
        assert "killed or crashed" in marked["interruptedReason"], marked["interruptedReason"]
        assert marked["samples"]["total"] == last["samples"]["total"]
        assert files_below(d) == ["profile.folded", "profile.pb.gz", "summary.json"], files_below(d)
        assert not os.path.exists(os.path.join(registry, sid))
        assert agent.status()["checkpoints"]["interruptedFound"] == 1
        assert ", 1 interrupted found at start" in agent.ctl("status").stdout
        entries = wait_for(lambda: [e for e in journal(f"CGPROF_SESSION={sid}")
                                    if e["MESSAGE_ID"] == MSG_INTERRUPTED] or None,
                           what="the interrupted report's journal entry")
        log("journal:", [e["MESSAGE"] for e in entries])
        assert len(entries) == 1, entries
        assert entries[0]["CGPROF_REPORT"] == d and entries[0]["CGPROF_REASON"] == marked["interruptedReason"]
        assert entries[0]["CGPROF_CHECKPOINT"] == marked["end"]

        top = pprof_top(os.path.join(d, "profile.pb.gz"))
        assert "hot_alpha" in top, top

        # The restarted agent profiles the cgroup in a new session; the
        # sysctl is restored to the value from before the first start.
        new = agent.wait_summary(lambda s: s["session"] != sid and s.get("partial") is True,
                                 what="the new session's checkpoint")
        assert agent.stop() == 0
        assert sysctl() == orig, sysctl()
        final = summary(new["_dir"])
        assert "partial" not in final and final["endReason"] == "agent-stopped", final
        assert os.listdir(registry) == []
        assert summary(d)["interrupted"] is True  # a restart leaves a marked report alone
    finally:
        agent.cleanup()
        if w:
            w.kill()
        cg.remove()


def test_per_process():
    """One checkpoint per process; after a crash each is marked
    interrupted; the next session's final reports replace its own
    checkpoints, directory for directory."""
    cg = Cgroup(f"cgprof-test-checkpoint-pp-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="pp", duration="0", checkpointInterval="1s",
                             output="pp/{PROCESS_NAME}-{PROCESS_ID}/{UID}")],
        "targets": [{"name": "t", "profileRef": "pp", "cgroupPatterns": [cg.rel]}],
    })
    ws = []

    def checkpoints(pred):
        return sorted(s["_dir"] for s in agent.summaries()
                      if s.get("partial") and s["samples"]["total"] > 0 and pred(s))

    try:
        agent.start()
        ws = [workload(cg, 60, name=n) for n in ("cp-one", "cp-two")]
        # The launcher shell (run_in_cgroup()) may have its own directory
        # too, "sh-PID", when a sample caught it before its exec().
        workers = lambda s: "/cp-one-" in s["_dir"] or "/cp-two-" in s["_dir"]
        dirs = wait_for(lambda: (lambda d: d if len(d) == 2 else None)(checkpoints(workers)),
                        what="a checkpoint per process")
        log("checkpoints:", dirs)
        sid = summary(dirs[0])["session"]

        agent.kill()
        agent.start()
        assert all(summary(d)["interrupted"] is True for d in dirs)
        marked = [s for s in agent.summaries() if s.get("interrupted")]
        assert all(s["session"] == sid for s in marked), marked
        assert agent.status()["checkpoints"]["interruptedFound"] == len(marked) >= 2

        new = wait_for(lambda: (lambda d: d if len(d) == 2 else None)(
            checkpoints(lambda s: s["session"] != sid)), what="the next session's checkpoints")
        for w in ws:
            w.kill()
            w.wait()
        agent.ctl("stop", "--all")
        wait_for(lambda: all("partial" not in s for s in agent.summaries() if s["session"] != sid),
                 what="the final reports")
        finals = [s for s in agent.summaries() if s["session"] != sid]
        assert sorted(s["_dir"] for s in finals) == new, finals
        assert all(s["endReason"] == "stopped" for s in finals)
        assert os.listdir(os.path.join(agent.state_dir, "checkpoints")) == []
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        for w in ws:
            w.kill()
        cg.remove()


def test_short_session_writes_none():
    cg = Cgroup(f"cgprof-test-checkpoint-short-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="short", duration="1s", checkpointInterval="2s")],
        "targets": [{"name": "t", "profileRef": "short", "cgroupPatterns": [cg.rel]}],
    })
    w = None
    try:
        w = workload(cg, 30)
        agent.start()
        r = agent.wait_summary(lambda s: s["endReason"] == "duration")
        time.sleep(2.5)  # past the interval: nothing more is written
        assert "partial" not in r and len(agent.summaries()) == 1
        assert agent.status()["checkpoints"]["written"] == 0
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        if w:
            w.kill()
        cg.remove()


if __name__ == "__main__":
    try:
        main([test_crash_and_recovery, test_per_process, test_short_session_writes_none])
    finally:
        stop_journald()
