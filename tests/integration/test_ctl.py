#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cgprofctl against a real cgprofd (its private bus socket, real cgroups,
perf events and BPF): every command, in text and --json; sessions show their
progress; start/stop write a report at once; reports lists and filters it;
record runs a command in a transient cgroup and prints its hot functions;
exit codes (2 usage, 3 not found); a client that is not root is refused; the
bus survives clients that hang up mid-call or stall. check and start --pod
run against a real kube-apiserver (skipped when it cannot be had)."""

import json
import os
import shutil
import re
import signal
import socket
import struct
import subprocess
import time

import cgproflib
from cgproflib import CGPROFCTL, WORKLOAD, Agent, Cgroup, log, main, profile, wait_for, workload

TEST_CGROUP = f"cgprof-ctl-test-{os.getpid()}"
ID_RE = re.compile(r"\b[0-9a-f]{32}\b")


def config():
    return {
        "profiles": [profile(name="test"),
                     profile(name="slow", frequency=99, duration="30s")],
        "defaultProfileRef": "test",
        "targets": [{"name": "web", "profileRef": "slow", "cgroupPatterns": ["system.slice/nginx.service"]}],
    }


def ctl_json(agent, *args):
    """The JSON cgprofctl prints last (record's command prints first)."""
    r = agent.ctl("--json", *args)
    return json.loads(r.stdout.splitlines()[-1])


def expect_rc(r, rc, stderr=None):
    assert r.returncode == rc, f"exit {r.returncode}, wanted {rc}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    if stderr:
        assert re.search(stderr, r.stderr), f"{stderr!r} not in stderr {r.stderr!r}"


def session_of(agent, sid):
    return next((s for s in ctl_json(agent, "sessions") if s["id"] == sid), None)


class Running:
    """An agent and a test cgroup, cleaned up however the test ends."""

    def __init__(self, cfg=None, **kw):
        self.agent = Agent(cfg or config(), **kw)
        self.cg = Cgroup(TEST_CGROUP)
        self.procs = []

    def __enter__(self):
        self.agent.start()
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()
        self.cg.remove()
        if exc[0] is None:
            assert self.agent.stop() == 0, self.agent.log()
        self.agent.cleanup()
        return False

    def workload(self, name, seconds=60):
        cg = self.cg.child(name)
        p = workload(cg, seconds, name=name)
        self.procs.append(p)
        return cg


# --------------------------------------------------------------------------


def test_status_and_targets():
    with Running() as t:
        a = t.agent
        r = a.ctl("status")
        assert "Version:" in r.stdout and "Active sessions: 0" in r.stdout, r.stdout
        j = ctl_json(a, "status")
        assert j["version"] and j["sessions"] == [], j
        # The loop measures its dispatches: handlers ran (the control call
        # itself is one) and the longest is reported.
        loop = j["eventLoop"]
        assert loop["dispatches"] > 0 and loop["dispatchMaxMsec"] >= loop["dispatchMeanMsec"] > 0, loop
        assert "Event loop: longest dispatch" in r.stdout, r.stdout

        r = a.ctl("targets")
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["TARGET", "PROFILE", "KIND", "DISABLED"], r.stdout
        assert any(line.split()[:4] == ["web", "slow", "cgroup", "no"] for line in lines[1:]), r.stdout
        j = ctl_json(a, "targets")
        web = next(x for x in j if x["name"] == "web")
        assert web == {"name": "web", "profile": "slow", "kind": "cgroup", "disabled": False}, j

        # The API itself, as any D-Bus client sees it: introspectable, with properties.
        if shutil.which("busctl"):
            addr = f"--address=unix:path={a.bus}"
            r = subprocess.run(["busctl", addr, "introspect", "io.cgprof.Agent1", "/io/cgprof/Agent1",
                                "io.cgprof.Agent1"], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0 and ".StartSession" in r.stdout and ".Targets" in r.stdout, r
            r = subprocess.run(["busctl", addr, "get-property", "io.cgprof.Agent1", "/io/cgprof/Agent1",
                                "io.cgprof.Agent1", "Targets"], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0 and r.stdout.startswith("a(sssb)") and '"web" "slow" "cgroup" false' in r.stdout, r


def test_start_sessions_stop_reports():
    with Running() as t:
        a = t.agent
        cg = t.workload("untargeted")
        r = a.ctl("sessions")
        assert r.stdout.strip() == "No sessions.", r.stdout

        # An untargeted cgroup (given as its full path) starts on demand.
        r = a.ctl("start", "--cgroup", cg.path)
        assert f"of cgroup:{cg.rel}" in r.stdout and "runs until stopped" in r.stdout, r.stdout
        sid = ID_RE.search(r.stdout).group(0)

        # Progress: elapsed time and samples so far, in JSON and in the table.
        s = wait_for(lambda: (lambda x: x if x and x["samples"] > 0 and x["elapsedUsec"] > 500000 else None)(
            session_of(a, sid)), what="samples in the session")
        assert s["state"] == "running" and s["cgroup"] == cg.rel and s["profile"] == "test", s
        assert s["target"] and s["startUsec"] > 0 and s["durationUsec"] == 0 and s["remainingUsec"] is None, s
        r = a.ctl("sessions")
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["ID", "STATE", "TARGET", "PROFILE", "PROFILING", "ELAPSED", "REMAINING",
                                    "SAMPLES"], r.stdout
        row = next(line for line in lines if line.startswith(sid))
        assert re.search(r"\s\d+\.\ds\s+until stopped\s+\d+$", row), row
        assert int(row.split()[-1]) > 0, row
        assert cg.rel in row, row

        # Only one session per cgroup.
        expect_rc(a.ctl("start", "--cgroup", cg.rel, check=False), 1, "already")

        # stop (by a prefix of its ID) writes the report before it answers.
        r = a.ctl("stop", sid[:8])
        m = re.search(r"^Stopped session (\w+) after [\d.]+s, (\d+) samples\.$", r.stdout, re.M)
        assert m and m.group(1) == sid and int(m.group(2)) > 0, r.stdout
        report = re.search(r"^Report: (.+)$", r.stdout, re.M).group(1)
        with open(os.path.join(report, "summary.json")) as f:
            summary = json.load(f)
        assert summary["session"] == sid and summary["endReason"] == "stopped", summary
        assert int(m.group(2)) == summary["samples"]["total"], (m.group(2), summary["samples"])
        assert ctl_json(a, "sessions") == []
        expect_rc(a.ctl("stop", sid, check=False), 3, "No session")

        # A given profile and duration: the remaining time counts down.
        j = ctl_json(a, "start", "--cgroup", cg.rel, "--profile", "slow", "--duration", "20s")
        sid2 = j["id"]
        assert j["profile"] == "slow" and j["durationUsec"] == 20e6, j
        assert 0 < j["remainingUsec"] <= 20e6, j
        r = a.ctl("sessions")
        row = next(line for line in r.stdout.splitlines() if line.startswith(sid2))
        assert re.search(r"\s\d+\.\ds\s+\d+\.\ds\s+\d+$", row), row
        # --duration 0: until stopped, whatever the profile says.
        cg2 = t.workload("second")
        j = ctl_json(a, "start", "--cgroup", cg2.rel, "--profile", "slow", "--duration", "0")
        assert j["durationUsec"] == 0 and j["remainingUsec"] is None, j
        sid3 = j["id"]

        # stop --all: both, each with its report.
        wait_for(lambda: all(x["samples"] > 0 for x in ctl_json(a, "sessions")), what="samples")
        r = a.ctl("stop", "--all")
        assert "Stopped 2 sessions." in r.stdout, r.stdout
        assert sid2 in r.stdout and sid3 in r.stdout, r.stdout
        dirs = re.findall(r"^Report: (\S+) \(\d+ samples\)$", r.stdout, re.M)
        assert len(dirs) == 2 and all(os.path.isfile(os.path.join(d, "summary.json")) for d in dirs), dirs
        assert ctl_json(a, "stop", "--all") == []

        # reports: newest first, filters by cgroup and time.
        r = a.ctl("reports")
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["STARTED", "SESSION", "SAMPLES", "PROFILED", "REPORT"], r.stdout
        assert all(any(x in line for line in lines) for x in (sid, sid2, sid3)), r.stdout
        j = ctl_json(a, "reports")
        assert {x["session"] for x in j} == {sid, sid2, sid3}, j
        assert [x["startUsec"] for x in j] == sorted((x["startUsec"] for x in j), reverse=True), j
        mine = next(x for x in j if x["session"] == sid)
        assert mine["reportDir"] == report and mine["cgroup"] == cg.rel and mine["samples"] > 0, mine
        assert mine["namespace"] == "" and mine["pod"] == "", mine
        j = ctl_json(a, "reports", "--filter", f"cgroup:{cg2.rel}")
        assert [x["session"] for x in j] == [sid3], j
        assert {x["session"] for x in ctl_json(a, "reports", "--since", "1h")} == {sid, sid2, sid3}
        # A UNIX time: the last session's start keeps it, and no other.
        since = int(next(x for x in ctl_json(a, "reports") if x["session"] == sid3)["startUsec"] // 1e6)
        assert sid3 in {x["session"] for x in ctl_json(a, "reports", "--since", str(since))}
        assert ctl_json(a, "reports", "--since", str(int(time.time()) + 3600)) == []
        assert a.ctl("reports", "--since", str(int(time.time()) + 3600)).stdout.strip() == "No reports."
        assert ctl_json(a, "reports", "--filter", "some-namespace") == []
        expect_rc(a.ctl("reports", "--filter", "a/b/c/d", check=False), 2, "filter")


def record_slice():
    return os.path.join(cgproflib.cgroup_root(), "cgprof-record.slice")


def record_cgroups():
    """The records' cgroups, or None once their slice is gone."""
    try:
        return sorted(x for x in os.listdir(record_slice()) if x.startswith("record-"))
    except FileNotFoundError:
        return None


def test_record():
    with Running() as t:
        a = t.agent
        if record_cgroups() == []:
            os.rmdir(record_slice())  # left empty by an earlier version
        # Each record removes its cgroup, and the last one the slice too.
        before = record_cgroups()
        r = a.ctl("record", "--", WORKLOAD, "--seconds", "2")
        log(r.stdout)
        report = re.search(r"^Report: (.+)$", r.stdout, re.M).group(1)
        assert os.path.isfile(os.path.join(report, "summary.json")), report
        top = r.stdout[r.stdout.index("Top functions"):]
        assert re.search(r"^\s+\d+\.\d\d%\s+\d+\s+hot_alpha$", top, re.M), top
        assert record_cgroups() == before, "the transient cgroup was left behind"

        # --json, and --frequency picks the profile that samples at it.
        j = ctl_json(a, "record", "--frequency", "99", "--", WORKLOAD, "--seconds", "2")
        assert j["exitStatus"] == 0 and j["cgroup"].startswith("cgprof-record.slice/record-"), j
        assert "hot_alpha" in [f["name"] for f in j["topFunctions"]], j
        with open(os.path.join(j["reportDir"], "summary.json")) as f:
            s = json.load(f)
        assert s["frequency"] == 99 and s["profile"] == "slow", (s["frequency"], s["profile"])
        r = a.ctl("record", "--frequency", "12345", "--", "true", check=False)
        expect_rc(r, 2, "no profile .* samples at that frequency")

        # SIGTERM to cgprofctl reaches the command; the report is still written.
        p = subprocess.Popen([CGPROFCTL, "--bus-socket", a.bus, "record", "--", "sleep", "60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: any(x["cgroup"].startswith("cgprof-record.slice/")
                                 for x in ctl_json(a, "sessions")), what="the record session")
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=30)
        finally:
            p.kill()
        assert p.returncode == 0, err
        assert "sleep was killed by signal Terminated" in out, out
        assert re.search(r"^Report: /", out, re.M), out
        assert ctl_json(a, "sessions") == []
        assert record_cgroups() == before

        # The session stopped by someone else: record finds its report.
        p = subprocess.Popen([CGPROFCTL, "--bus-socket", a.bus, "record", "--", "sleep", "3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: any(x["cgroup"].startswith("cgprof-record.slice/")
                                 for x in ctl_json(a, "sessions")), what="the record session")
            dirs = ctl_json(a, "stop", "--all")
            out, err = p.communicate(timeout=30)
        finally:
            p.kill()
        assert p.returncode == 0 and "ended session" in err, err
        assert re.search(r"^Report: (.+)$", out, re.M).group(1) == dirs[0], (out, dirs)
        assert record_cgroups() == before

        # A command that does not exist: an error, nothing left behind.
        expect_rc(a.ctl("record", "--", "/nonexistent/command", check=False), 1, "Failed to execute")
        assert record_cgroups() == before

        # Records at once: each gets its own cgroup and report, however
        # their slice comes and goes between them.
        ps = [subprocess.Popen([CGPROFCTL, "--bus-socket", a.bus, "--json", "record", "--", WORKLOAD, "--seconds",
                                str(0.5 + i / 4)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for i in range(4)]
        outs = [p.communicate(timeout=60) for p in ps]
        assert all(p.returncode == 0 for p in ps), outs
        js = [json.loads(out.splitlines()[-1]) for out, _ in outs]
        assert len({j["cgroup"] for j in js}) == 4 and len({j["reportDir"] for j in js}) == 4, js
        assert all("hot_alpha" in [f["name"] for f in j["topFunctions"]] for j in js), js
        assert record_cgroups() == before


def test_usage_and_not_found():
    with Running() as t:
        a = t.agent
        for args, what in [((), "Missing command"), (("bogus",), "Unknown command 'bogus'"),
                           (("status", "extra"), "unexpected argument"),
                           (("start",), "needs either --pod"), (("start", "--pod", "nopod"), "NAMESPACE/POD"),
                           (("start", "--cgroup", "x", "--container", "c"), "--container needs --pod"),
                           (("start", "--cgroup", "x", "--duration", "5"), "invalid duration"),
                           (("stop",), "session ID or --all"), (("stop", "xyz!"), "not a session ID"),
                           (("check", "nopod"), "NAMESPACE/POD"), (("sessions", "--all"), "--all does not apply"),
                           (("reports", "--since", "soon"), "--since"), (("record",), "missing argument"),
                           (("--frequency", "0", "record", "true"), "--frequency"),
                           (("--nope", "status"), "Unknown option '--nope'")]:
            r = a.ctl(*args, check=False)
            expect_rc(r, 2, re.escape(what))
            assert "Usage:" in r.stderr or "--help" in r.stderr, r.stderr
        # Not found: a session, a cgroup, a profile (refused: 2), a pod
        # (this agent runs without Kubernetes), a report directory.
        expect_rc(a.ctl("stop", "0" * 32, check=False), 3, "No session")
        expect_rc(a.ctl("start", "--cgroup", "no/such/cgroup", check=False), 3, "No cgroup")
        t.workload("w")
        expect_rc(a.ctl("start", "--cgroup", f"{TEST_CGROUP}/w", "--profile", "nope", check=False), 2,
                  "No profile named nope")
        expect_rc(a.ctl("check", "default/web-0", check=False), 3, "Kubernetes is not enabled")
        expect_rc(a.ctl("report", "/nonexistent/report", check=False), 3)
        # No agent at all.
        r = subprocess.run([CGPROFCTL, "--bus-socket", "/nonexistent/bus", "status"], capture_output=True,
                           text=True)
        expect_rc(r, 1, "is cgprofd running")
        r = subprocess.run([CGPROFCTL, "--help"], capture_output=True, text=True)
        assert r.returncode == 0 and "3 not found" in r.stdout and "record" in r.stdout


def as_nobody():
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def test_non_root_refused():
    with Running() as t:
        a = t.agent
        argv = [CGPROFCTL, "--bus-socket", a.bus, "status"]
        # The socket's directory and mode keep others out...
        r = subprocess.run(argv, capture_output=True, text=True, preexec_fn=as_nobody, timeout=30)
        expect_rc(r, 1, "permission denied: only root may control cgprofd")
        # ...and so does the agent's peer check when they do not.
        os.chmod(a.tmp, 0o755)
        os.chmod(a.bus, 0o666)
        try:
            for cmd in (["status"], ["sessions"], ["stop", "--all"]):
                r = subprocess.run([CGPROFCTL, "--bus-socket", a.bus, *cmd], capture_output=True, text=True,
                                   preexec_fn=as_nobody, timeout=30)
                expect_rc(r, 1, "permission denied: only root may control cgprofd")
        finally:
            os.chmod(a.bus, 0o600)
            os.chmod(a.tmp, 0o700)
        assert "Refusing bus connection from UID 65534" in a.log()
        assert a.status()["version"]


# A D-Bus client by hand, to misbehave.

def _align(buf, n):
    buf.extend(b"\0" * (-len(buf) % n))


def _string(buf, s, sig="s"):
    b = s.encode()
    if sig == "g":
        buf.append(len(b))
    else:
        _align(buf, 4)
        buf.extend(struct.pack("<I", len(b)))
    buf.extend(b + b"\0")


def method_call(member, serial=1):
    """A little-endian METHOD_CALL of member (ListReports("", 0), or no arguments)."""
    body = bytearray()
    sig = ""
    if member == "ListReports":
        sig = "st"
        _string(body, "")
        _align(body, 8)
        body.extend(struct.pack("<Q", 0))
    msg = bytearray(b"l\x01\x00\x01")
    msg.extend(struct.pack("<III", len(body), serial, 0))  # the fields' length is patched below
    fields = [(1, "o", "/io/cgprof/Agent1"), (2, "s", "io.cgprof.Agent1"), (3, "s", member)]
    if sig:
        fields.append((8, "g", sig))
    for code, t, v in fields:
        _align(msg, 8)
        msg.append(code)
        _string(msg, t, "g")
        _string(msg, v, t)
    struct.pack_into("<I", msg, 12, len(msg) - 16)
    _align(msg, 8)
    return bytes(msg + body)


def raw_client(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    # BEGIN pipelined with AUTH, as sd-bus clients do. (BEGIN sent after OK in
    # one segment with the first message leaves that message unanswered until
    # more data arrives: the agent's sd-bus only looks at its socket again.)
    s.sendall(b"\0AUTH EXTERNAL 30\r\nBEGIN\r\n")
    assert s.recv(4096).startswith(b"OK "), "auth"
    return s


def test_bus_survives_bad_clients():
    with Running() as t:
        a = t.agent
        # Many reports make ListReports' answer large.
        cg = t.workload("w")
        for _ in range(5):
            sid = ctl_json(a, "start", "--cgroup", cg.rel)["id"]
            a.ctl("stop", sid)

        # The hand-made client works when it behaves...
        s = raw_client(a.bus)
        s.sendall(method_call("ListReports"))
        assert s.recv(65536)[:2] == b"l\x02", "no method return"
        s.close()

        # ...a call whose caller hangs up before the answer,
        for _ in range(20):
            s = raw_client(a.bus)
            s.sendall(method_call("ListReports", serial=7))
            s.close()
        # half a message, then gone,
        s = raw_client(a.bus)
        s.sendall(method_call("ListReports")[:21])
        s.close()
        # a client that stops in the middle of authenticating and stays,
        stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stalled.connect(a.bus)
        stalled.sendall(b"\0AUTH EXTER")
        # a client that stops in the middle of a message and stays,
        half = raw_client(a.bus)
        half.sendall(method_call("GetStatus")[:10])
        # garbage instead of a message,
        s = raw_client(a.bus)
        s.sendall(b"\xff" * 64)
        s.close()
        # and cgprofctl killed while it waits for its answer.
        for _ in range(5):
            p = subprocess.Popen([CGPROFCTL, "--bus-socket", a.bus, "reports"], stdout=subprocess.DEVNULL)
            time.sleep(0.005)
            p.kill()
            p.wait()
        # The agent still answers, with the stalled clients still connected.
        assert a.ctl("status").returncode == 0
        assert len(ctl_json(a, "reports")) == 5
        stalled.close()
        half.close()
        assert a.proc.poll() is None, a.log()
        assert a.ctl("sessions").stdout.strip() == "No sessions."


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_bus_survives_emfile():
    """Out of file descriptors, the control socket pauses accepting (no busy
    loop, no flood of log lines) and answers again once fds are free."""
    import resource
    with Running() as t:
        a = t.agent
        pid = a.proc.pid
        assert a.ctl("status").returncode == 0
        # Idle, with a little headroom: the limit is reached by connections.
        idle = fd_count(pid)
        limit = idle + 8
        old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, old[1]))  # the soft limit only
        log(f"agent has {idle} fds at idle, limit {limit}")
        clients = []
        try:
            failed = "Too many open files"  # strerror(EMFILE), in the agent's log
            for _ in range(limit + 32):
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.connect(a.bus)
                clients.append(c)
            wait_for(lambda: failed in a.log(), timeout=30, what="accept() to fail with EMFILE")
            assert fd_count(pid) >= limit - 1
            # Exhausted for a while: the agent waits, it does not spin.
            t0, c0 = time.monotonic(), cpu_ticks(pid)
            time.sleep(2)
            wall, cpu = time.monotonic() - t0, (cpu_ticks(pid) - c0) / os.sysconf("SC_CLK_TCK")
            log(f"while exhausted: {cpu:.2f} s CPU in {wall:.2f} s")
            assert cpu < wall / 2, f"the agent spun: {cpu:.2f} s CPU in {wall:.2f} s"
            n = sum(failed in line for line in a.log().splitlines())
            assert n < 50, f"{n} accept failures logged: not backing off"
        finally:
            for c in clients:
                c.close()
        # Every fd back: the control API works again.
        wait_for(lambda: a.ctl("--json", "status", check=False).returncode == 0, timeout=60,
                 what="the control socket to answer again")
        assert "Accepting control connections again" in a.log()
        assert a.proc.poll() is None, a.log()
        resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
        assert a.status() is not None


def test_session_waits_for_fds():
    """A session that cannot start for lack of file descriptors (EMFILE) is
    not given up: status counts it as waiting, and it starts once fds are
    there again, without any new event for its cgroup."""
    import resource
    cfg = config()
    cfg["targets"].append({"name": "fds", "profileRef": "test", "cgroupPatterns": [f"{TEST_CGROUP}/starved"]})
    with Running(cfg) as t:
        a = t.agent
        pid = a.proc.pid
        assert a.status() is not None
        old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        # No room for a session's perf events (one per CPU), its BPF links
        # and cgroup fd: the start fails with EMFILE.
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (fd_count(pid) + 1, old[1]))
        try:
            cg = t.workload("starved")
            wait_for(lambda: "waits for file descriptors" in a.log(), what="the session to wait for fds")
        finally:
            # The limit back: the control socket, and the retry, have fds again.
            resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
        st = a.status()
        log("waiting:", st.get("sessionsWaitingForFds"), "failed:", st.get("sessionsFailed"))
        assert st["sessionsFailed"] >= 1, st
        running = lambda: next((s for s in a.status()["sessions"] if s["cgroup"] == cg.rel), None)
        s = wait_for(running, what="the session to start once fds are back")
        log("started after the limit was raised:", s["id"])
        assert a.status()["sessionsWaitingForFds"] == 0
        wait_for(lambda: session_of(a, s["id"]) and session_of(a, s["id"])["samples"] > 0,
                 what="samples in the session that waited")


# --------------------------------------------------------------------------
# Kubernetes: check and start --pod against a real API server.

def test_kubernetes_check_and_start_pod():
    try:
        from kubelib import KubeCgroups, KubeCluster, new_container_id
        kc = KubeCluster()
    except SystemExit:
        log("SKIP (part): no kube-apiserver: check and start --pod against Kubernetes not run")
        return
    node = "node-a"
    with kc, KubeCgroups(driver="systemd") as cgs:
        kc.create_namespace("team-a")
        kc.create_namespace("ml", labels={"team": "ml"})
        cfg = config()
        cfg["enableDefault"] = True
        cfg["targets"].append({"name": "ml-trainers", "profileRef": "test",
                               "namespaceSelector": {"matchLabels": {"team": "ml"}},
                               "podNamePatterns": ["^trainer-"]})
        agent = Agent(cfg, extra_args=["--kubeconfig", kc.kubeconfig, "--node-name", node])
        agent.argv = (lambda orig: (lambda: [x for x in orig() if x != "--no-kubernetes"]))(agent.argv)
        try:
            agent.start()
            pod = kc.create_pod("team-a", "web-0", node)
            cid = new_container_id()
            cg = cgs.container_for(pod, cid)
            proc = workload(cg, 60, name="web")
            kc.set_pod_running("team-a", "web-0", {"main": cid})
            kc.create_pod("team-a", "elsewhere-0", "node-b")
            wait_for(lambda: agent.ctl("check", "team-a/web-0", check=False).returncode == 0,
                     what="the pod known to the agent")

            # Not targeted: every target's failed condition.
            r = agent.ctl("check", "team-a/web-0")
            assert r.stdout.startswith("team-a/web-0 is not targeted."), r.stdout
            assert re.search(r"^ml-trainers\s+.*(namespaceSelector|podNamePatterns)", r.stdout, re.M), r.stdout
            assert re.search(r"^web\s+cgroupPatterns", r.stdout, re.M), r.stdout
            assert re.search(r"^enableDefault\s+.*labelled cgprof.io/profile=enabled", r.stdout, re.M), r.stdout
            j = ctl_json(agent, "check", "team-a/web-0/main")
            assert j["targeted"] is False and j["target"] == "" and j["container"] == "main", j
            reasons = {x["target"]: x["reason"] for x in j["reasons"]}
            assert set(reasons) == {"web", "ml-trainers", "enableDefault"}, reasons

            # Labelled: targeted, by which target and profile.
            kc.label("pod", "web-0", "team-a", "cgprof.io/profile=enabled")
            wait_for(lambda: ctl_json(agent, "check", "team-a/web-0")["targeted"], what="targeted")
            r = agent.ctl("check", "team-a/web-0")
            assert 'targeted by target "enableDefault" with profile "test"' in r.stdout, r.stdout
            # Its session started by itself; stop it, then start it by hand.
            s = wait_for(lambda: next((x for x in ctl_json(agent, "sessions") if x["pod"] == "web-0"), None),
                         what="the pod's session")
            assert (s["namespace"], s["container"]) == ("team-a", "main"), s
            agent.ctl("stop", s["id"])
            j = ctl_json(agent, "start", "--pod", "team-a/web-0", "--container", "main", "--duration", "0")
            assert (j["namespace"], j["pod"], j["container"]) == ("team-a", "web-0", "main"), j
            r = agent.ctl("sessions")
            assert "team-a/web-0/main" in r.stdout, r.stdout
            r = agent.ctl("stop", j["id"])
            assert re.search(r"^Report: /", r.stdout, re.M), r.stdout
            assert [x["pod"] for x in ctl_json(agent, "reports", "--filter", "team-a/web-0")] == ["web-0"] * 2

            # Not found: a pod of another node, a pod that does not exist, a container.
            for ref in ("team-a/elsewhere-0", "team-a/nope", "team-a/web-0/nope"):
                expect_rc(agent.ctl("check", ref, check=False), 3)
            expect_rc(agent.ctl("start", "--pod", "team-a/nope", check=False), 3)
            proc.kill()
            proc.wait()
            assert agent.stop() == 0
        finally:
            agent.cleanup()


if __name__ == "__main__":
    main([test_status_and_targets, test_start_sessions_stop_reports, test_record, test_usage_and_not_found,
          test_non_root_refused, test_bus_survives_bad_clients, test_bus_survives_emfile, test_session_waits_for_fds,
          test_kubernetes_check_and_start_pod])
