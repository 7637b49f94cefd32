#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Session lifecycle as a user sees it: processes excluded by pattern are in
no report, a process that lives 300 ms is still symbolized, a cgroup created
after the agent started is picked up, SIGTERM mid-session writes the report,
a bad config is refused with its key path, an invalid reload keeps the last
good config, and cgprofctl status answers."""

import json
import os
import re
import signal
import subprocess
import time

from cgproflib import (LAUNCHER_COMM, CGPROFD, Agent, Cgroup, HOT, folded, log, main, profile, wait_for, workload)


def test_excluded_process_absent():
    cg = Cgroup(f"cgprof-test-exclude-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="p", excludePatterns=["--name excluded-worker"])],
        "targets": [{"name": "t", "profileRef": "p", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        a = workload(cg, 1.5, name="wanted-worker")
        b = workload(cg, 1.5, name="excluded-worker")
        assert a.wait(60) == 0 and b.wait(60) == 0
        cg.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        roots = {st[0] for st in folded(r)}
        log("roots:", roots, "samples:", r["samples"])
        assert roots - {LAUNCHER_COMM} == {"wanted-worker"}, roots  # (the launching shell, if sampled)
        assert all("excluded-worker" not in p["cmdline"] for p in r["processes"]), r["processes"]
        assert r["samples"]["excluded"] > 0
        with open(os.path.join(r["_dir"], "profile.folded")) as f:
            assert "excluded-worker" not in f.read()
    finally:
        agent.cleanup()
        cg.remove()


def test_short_lived_process_symbolized():
    cg = Cgroup(f"cgprof-test-short-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="p")],
        "targets": [{"name": "t", "profileRef": "p", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        # Mid-session: a process that exits after 300 ms, long before the
        # session ends (and within one drain interval).
        time.sleep(0.5)
        p = workload(cg, 0.3, name="short-lived")
        assert p.wait(60) == 0
        pid = p.pid
        time.sleep(1.5)
        agent.signal(signal.SIGTERM)
        assert agent.proc.wait(60) == 0
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        procs = [x for x in r["processes"] if x["pid"] == pid]
        assert procs and procs[0]["comm"] == "short-lived", r["processes"]
        stacks = folded(r)
        resolved = {st[-1] for st in stacks if st[0] == "short-lived"}
        log("short-lived leaf frames:", resolved)
        for name in HOT:
            assert name in resolved, f"{name} not symbolized for the short-lived process"
    finally:
        agent.cleanup()
        cg.remove()


def test_cgroup_created_later_and_sigterm():
    parent = f"cgprof-test-later-{os.getpid()}"
    agent = Agent({
        "profiles": [profile(name="p")],
        "targets": [{"name": "t", "profileRef": "p", "cgroupPatterns": [parent + "/job-*"]}],
    })
    outer = Cgroup(parent)
    try:
        agent.start()
        assert agent.status()["sessions"] == []
        cg = outer.child("job-1")   # created after the agent started: inotify
        wait_for(lambda: any(s["cgroup"] == cg.rel for s in agent.status()["sessions"]), what="a session")
        p = workload(cg, 30)
        time.sleep(1.5)
        # SIGTERM mid-session: the session's report is written before exit.
        agent.signal(signal.SIGTERM)
        assert agent.proc.wait(60) == 0, agent.log()
        p.kill()
        p.wait()
        reports = [s for s in agent.summaries() if s["cgroup"] == cg.rel]
        assert len(reports) == 1, reports
        r = reports[0]
        assert r["endReason"] == "agent-stopped"
        assert r["samples"]["total"] > 0
        assert {st[-1] for st in folded(r)} & set(HOT)
        # Default output template for a host cgroup: {CGROUP}/{TIMESTAMP}_{UID}.
        rel = os.path.relpath(r["_dir"], agent.report_dir)
        assert rel.split("/")[0] == cg.rel.replace("/", "_"), rel
    finally:
        agent.cleanup()
        outer.remove()


def test_output_template_and_per_process():
    cg = Cgroup(f"cgprof-test-template-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="pp", output="by-proc/{PROFILE}/{PROCESS_NAME}-{PROCESS_ID}/{UID}")],
        "targets": [{"name": "t", "profileRef": "pp", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        a = workload(cg, 1, name="../../escape")
        b = workload(cg, 1, name="second")
        assert a.wait(60) == 0 and b.wait(60) == 0
        cg.remove()
        def names():
            dirs = sorted(os.path.relpath(s["_dir"], agent.report_dir) for s in agent.summaries())
            return dirs, {d.split("/")[2].rsplit("-", 1)[0] for d in dirs}

        wait_for(lambda: {".._.._escape", "second"} <= names()[1], what="the two workloads' reports")
        dirs, found = names()
        log("report dirs:", dirs)
        # Every report stays inside reportDir, one per process (and one for
        # a launching shell sampled before its exec(), if it was).
        for d in dirs:
            parts = d.split("/")
            assert parts[0] == "by-proc" and parts[1] == "pp" and ".." not in parts, d
        assert found - {LAUNCHER_COMM} == {".._.._escape", "second"}, found
        assert not os.path.exists(os.path.join(os.path.dirname(agent.report_dir), "escape"))
    finally:
        agent.cleanup()
        cg.remove()


def test_per_process_names():
    """A name with a newline and an invalid byte keeps all of itself and
    becomes one safe directory; two entries that name the same directory
    (a workload that calls itself "sh", like the shell it was exec()ed
    from, in the same PID) share one report instead of overwriting."""
    cg = Cgroup(f"cgprof-test-names-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="pp", output="names/{PROCESS_NAME}-{PROCESS_ID}/{UID}")],
        "targets": [{"name": "t", "profileRef": "pp", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        a = workload(cg, 1.5, name=b"nl\nx\xffz")
        b = workload(cg, 1.5, name=LAUNCHER_COMM)
        assert a.wait(60) == 0 and b.wait(60) == 0
        cg.remove()
        wait_for(lambda: "Finished profiling cgroup" in agent.log(), what="the session's end")
        dirs = sorted(os.path.relpath(s["_dir"], agent.report_dir) for s in agent.summaries())
        log("report dirs:", dirs)
        names = [d.split("/")[1] for d in dirs]
        assert f"nl_x_z-{a.pid}" in names, names
        # The journal line lists each directory once: none was written twice.
        line = next(l for l in agent.log().splitlines() if "Finished profiling cgroup" in l)
        listed = re.search(r"report in (.*?)\.(\s|$)", line).group(1).split(" ")
        assert len(listed) == len(set(listed)) == len(dirs), (listed, dirs)
        # The shell's and the workload's samples of that PID are in one report.
        sh = [s for s in agent.summaries() if s["_dir"].split("/")[-2] == f"{LAUNCHER_COMM}-{b.pid}"]
        assert len(sh) == 1, [s["_dir"] for s in agent.summaries()]
        procs = sh[0]["processes"]
        assert any("cgprof-workload" in p["cmdline"] for p in procs), procs
        assert sum(p["samples"] for p in procs) == sh[0]["samples"]["total"], (procs, sh[0]["samples"])
    finally:
        agent.cleanup()
        cg.remove()


def fill(path):
    """Fills the file system of path with one file (until ENOSPC); returns it."""
    filler = os.path.join(path, "filler")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_full_disk():
    """A report that does not fit (a full tmpfs as reportDir): the error
    says ENOSPC with the path, nothing partial is left, the failure is
    counted, and the agent goes on. The report waits in memory and is
    written again on a timer (here after 1 s, 3 s, 3 s): when space returns
    it appears, whole; a report that never fits is dropped after the last
    attempt, with a log line, and counted."""
    import tempfile
    tmp = tempfile.mkdtemp(prefix="cgprof-test-full-")
    small = os.path.join(tmp, "small")
    os.mkdir(small)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", small]).returncode != 0:
        os.rmdir(small)
        os.rmdir(tmp)
        from cgproflib import skip
        skip("cannot mount a tmpfs here")
    cg = Cgroup(f"cgprof-test-full-{os.getpid()}")
    cg2 = Cgroup(f"cgprof-test-full2-{os.getpid()}")
    agent = Agent({
        "reportDir": small,
        "profiles": [profile(name="p", formats=["folded", "json", "pprof", "svg"])],
        "targets": [{"name": "t", "profileRef": "p", "cgroupPatterns": [cg.rel, cg2.rel]}],
    })
    os.environ["CGPROF_REPORT_RETRY_DELAYS"] = "1s,3s,3s"
    try:
        agent.start()
        filler = fill(small)
        w = workload(cg, 1)
        assert w.wait(60) == 0
        cg.remove()
        wait_for(lambda: "Failed to write the report" in agent.log(), what="the report's failure")
        line = next(l for l in agent.log().splitlines() if "Failed to write the report" in l)
        log(line)
        assert "No space left on device" in line and small in line, line
        assert "Input/output error" not in agent.log()
        # The first retry fails too, and leaves nothing either.
        wait_for(lambda: "Attempt 2 to write the report" in agent.log(), what="the first retry")
        left = [os.path.join(d, f) for d, _, fs in os.walk(small) for f in fs if f != "filler"]
        dirs = [d for d, sub, fs in os.walk(small) if d != small and not sub and not fs]
        assert left == [] and dirs == [], (left, dirs)
        assert agent.proc.poll() is None
        st = agent.status()
        log("while full:", st["sessionsFailed"], st["reportRetries"])
        assert st["sessionsFailed"] == 1 and st["reportRetries"]["pending"] == 1, st
        assert st["reportRetries"]["pendingBytes"] > 0, st

        # Space returns: the next attempt writes the whole report.
        os.unlink(filler)
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel, what="the report written on retry")
        assert sorted(r["files"]) == ["flame.svg", "profile.folded", "profile.pb.gz", "summary.json"], r
        assert sorted(os.listdir(r["_dir"])) == sorted(r["files"]), os.listdir(r["_dir"])
        assert r["samples"]["total"] > 0 and r["endReason"] == "cgroup-removed"
        assert "on attempt 3: report in " + r["_dir"] in agent.log()
        st = agent.status()["reportRetries"]
        assert st == {"pending": 0, "pendingBytes": 0, "queued": 1, "written": 1, "dropped": 0}, st

        # A report that never fits: dropped after the last attempt.
        filler = fill(small)
        w = workload(cg2, 1)
        assert w.wait(60) == 0
        cg2.remove()
        wait_for(lambda: "Dropped the report" in agent.log(), timeout=60, what="the report dropped")
        line = next(l for l in agent.log().splitlines() if "Dropped the report" in l)
        log(line)
        assert "after 4 failed attempts" in line and "No space left on device" in line, line
        st = agent.status()
        assert st["reportRetries"]["dropped"] == 1 and st["reportRetries"]["pending"] == 0, st
        assert st["sessionsFailed"] == 2
        left = [os.path.join(d, f) for d, _, fs in os.walk(small) for f in fs if f != "filler"]
        assert sorted(left) == sorted(os.path.join(r["_dir"], f) for f in r["files"]), left
        assert agent.stop() == 0
    finally:
        del os.environ["CGPROF_REPORT_RETRY_DELAYS"]
        agent.cleanup()
        cg.remove()
        cg2.remove()
        subprocess.run(["umount", small])
        os.rmdir(small)
        os.rmdir(tmp)


def test_bad_config_and_reload():
    # Invalid at start: exit non-zero, error names the key path.
    agent = Agent({"profiles": [profile(name="p", frequency=0)], "targets": []})
    try:
        agent.start(wait_ready=False)
        rc = agent.proc.wait(30)
        assert rc != 0
        assert "profiles[0].frequency" in agent.log(), agent.log()
    finally:
        agent.cleanup()

    cg = Cgroup(f"cgprof-test-reload-{os.getpid()}")
    good = {
        "profiles": [profile(name="p")],
        "targets": [{"name": "t", "profileRef": "p", "cgroupPatterns": ["nothing-matches-this"]}],
    }
    agent = Agent(dict(good))
    try:
        agent.start()
        # An invalid reload is logged with its key path and the old config kept.
        agent.write_config({"profiles": [profile(name="p")], "targets": [{"name": "t", "bogus": 1}]})
        agent.signal(signal.SIGHUP)
        wait_for(lambda: "targets[0].bogus" in agent.log(), what="the reload error")
        assert agent.proc.poll() is None
        assert agent.status()["sessions"] == []
        # A valid reload that targets the cgroup starts its session.
        good["targets"][0]["cgroupPatterns"] = [cg.rel]
        agent.write_config(good)
        agent.signal(signal.SIGHUP)
        wait_for(lambda: any(s["cgroup"] == cg.rel for s in agent.status()["sessions"]), what="a session")
        # cgprofctl status in text form too.
        out = agent.ctl("status").stdout
        assert "Active sessions: 1" in out and cg.rel in out, out
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        cg.remove()


def test_notify_duration_and_event_fallback():
    """sd_notify READY/WATCHDOG/STOPPING as under systemd (Type=notify,
    WatchdogSec=); a session ends at its duration; a hardware event the
    machine lacks falls back to cpu-clock and the summary says so."""
    cg = Cgroup(f"cgprof-test-duration-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="short", duration="1500ms", event="cycles")],
        "targets": [{"name": "t", "profileRef": "short", "cgroupPatterns": [cg.rel]}],
    })
    os.environ["WATCHDOG_USEC"] = "400000"
    try:
        agent.start()
        agent.wait_notify("WATCHDOG=1", timeout=10)
        p = workload(cg, 4)
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel, what="the duration to end the session")
        assert p.poll() is None, "the session must end at its duration, not with the workload"
        assert r["endReason"] == "duration", r["endReason"]
        assert 1.4 <= r["durationSec"] <= 10, r["durationSec"]
        assert r["requestedEvent"] == "cycles"
        if r["event"] == "cpu-clock":
            assert r["eventFallback"], r
        else:
            assert r["event"] == "cycles" and not r["eventFallback"]
        p.wait(60)
        # A session that ended is not restarted for the same cgroup.
        assert agent.status()["sessions"] == []
        agent.signal(signal.SIGTERM)
        agent.wait_notify("STOPPING=1", timeout=30)
        assert agent.proc.wait(60) == 0
    finally:
        del os.environ["WATCHDOG_USEC"]
        agent.cleanup()
        cg.remove()


def test_open_files_limit_raised():
    """A service gets 1024 open files by default, which a node's sessions
    (perf events and BPF links per CPU) outgrow: the agent raises its soft
    limit to the hard one."""
    import resource
    agent = Agent({"profiles": [profile(name="p")], "targets": []})
    try:
        agent.start(preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 8192)))
        with open(f"/proc/{agent.proc.pid}/limits") as f:
            line = next(l for l in f if l.startswith("Max open files"))
        soft, hard = line.split()[3:5]
        assert (soft, hard) == ("8192", "8192"), line
        assert agent.stop() == 0
    finally:
        agent.cleanup()


MANY_MAPPINGS = r"""
import ctypes, mmap, os, sys, time
n, seconds = int(sys.argv[1]), float(sys.argv[2])
fd = os.open(os.path.realpath(sys.executable), os.O_RDONLY)
# The same page of one file mapped executable again and again: one
# mapping (VMA) each, never merged (every one is at file offset 0). libc's
# mmap(): Python's mmap module keeps a dup()ed fd per mapping.
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
for _ in range(n):
    if libc.mmap(None, 4096, mmap.PROT_READ | mmap.PROT_EXEC, mmap.MAP_PRIVATE, fd, 0) in (None, 2**64 - 1):
        sys.exit(f"mmap: {os.strerror(ctypes.get_errno())}")
kids = []
for _ in range(3):  # forked children inherit every mapping
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        os._exit(0)
    kids.append(pid)
print("ready", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    pass
for k in kids:
    os.waitpid(k, 0)
"""


def test_many_mappings():
    """A process that maps one file 20,000 times (and forks spinning
    children that inherit the mappings) is loaded up to a bound, with the
    file opened once: the agent says which process it capped, answers its
    control socket throughout, and the session's report has the samples."""
    n = 20000
    try:
        max_maps = int(open("/proc/sys/vm/max_map_count").read())
    except OSError:
        max_maps = 65530
    if max_maps < n + 1000:
        log(f"SKIP (part): vm.max_map_count {max_maps} is below {n + 1000}")
        return
    cg = Cgroup(f"cgprof-test-maps-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="maps", pythonFrames=False)],
        "targets": [{"name": "t", "profileRef": "maps", "cgroupPatterns": [cg.rel]}],
    })
    from cgproflib import run_in_cgroup
    try:
        agent.start()
        p = run_in_cgroup(cg, ["/usr/bin/python3", "-c", MANY_MAPPINGS, str(n), "4"])
        assert p.stdout.readline().decode().startswith("ready")
        wait_for(lambda: "more executable mappings than the walker loads" in agent.log(),
                 what="the agent to cap the process's mappings")
        st = agent.status()
        assert st["unwindTables"]["processesCapped"] >= 1, st["unwindTables"]
        assert p.wait(60) == 0
        st = agent.status()
        log("eventLoop:", st["eventLoop"], "unwindTables:", st["unwindTables"], "procMaps:", st["procMaps"])
        # The mappings of the process and its children were read off the
        # event loop (one read per process event, handed to the loop).
        assert st["procMaps"]["readOffLoop"] >= 5, st["procMaps"]
        cg.remove()
        summary = wait_for(lambda: next(iter(agent.summaries()), None), what="the session's report")
        log("samples:", summary["samples"]["total"], "processes:", len(summary["processes"]))
        assert summary["samples"]["total"] > 0
        assert len([q for q in summary["processes"] if q["samples"] > 0]) >= 2, summary["processes"]
    finally:
        agent.cleanup()
        cg.remove()


def test_cgprofctl_usage():
    r = subprocess.run([CGPROFD.replace("cgprofd", "cgprofctl"), "frobnicate"], capture_output=True, text=True)
    assert r.returncode == 2, r
    r = subprocess.run([CGPROFD.replace("cgprofd", "cgprofctl"), "--bus-socket", "/nonexistent/bus", "status"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "/nonexistent/bus" in r.stderr, r


if __name__ == "__main__":
    main([test_excluded_process_absent, test_short_lived_process_symbolized, test_cgroup_created_later_and_sigterm, test_per_process_names, test_full_disk,
          test_output_template_and_per_process, test_bad_config_and_reload, test_notify_duration_and_event_fallback,
          test_open_files_limit_raised, test_many_mappings, test_cgprofctl_usage])
