#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Symbols from a debuginfod server: Debian's real debuginfod (elfutils)
serves, on loopback, the debug file of the workload built with -g and
stripped (its hot functions in no .dynsym; the debug file nowhere under
/usr/lib/debug). cgprofd with debuginfodUrls pointing at it must name
hot_alpha, hot_beta and hot_gamma in their 5:3:2 ratio, say
"symbols": "debuginfod" for the mapping, keep the file in its disk cache
(STATE_DIR/debuginfod), and not fetch it again: not for a second session,
nor after a restart. A stripped binary whose build ID the server does not
have is asked for once, and not again in the next session (the negative
cache), even after a restart.

Through a proxy that holds the server's answers back until the test lets
them go (on an event, not after a time): an answer let go after samples
were drained still names them before the report is written (late
resolution, stacks merged); one that has not come when the session ends
leaves the mapping "... (debuginfod pending)", and the agent stops at once
all the same, cancelling the fetch without recording a miss."""

import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

from cgproflib import (mapping_of, Agent, Cgroup, assert_shares, folded, log, main, profile, run_in_cgroup, skip,
                       skip_prereq, wait_for)

BUILD = os.environ.get("CGPROF_BUILD_DIR", "build")
STRIPPED = os.environ.get("CGPROF_WORKLOAD_DBGI_STRIPPED",
                          os.path.join(BUILD, "tests", "cgprof-workload-dbgi.stripped"))
DEBUG = os.environ.get("CGPROF_WORKLOAD_DBGI_DEBUG", os.path.join(BUILD, "tests", "cgprof-workload-dbgi.debug"))
UNKNOWN = os.environ.get("CGPROF_WORKLOAD_DBGI_UNKNOWN",
                         os.path.join(BUILD, "tests", "cgprof-workload-dbgi-unknown.stripped"))
SECONDS = 2


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split()[-1]
    raise AssertionError(f"{path} has no build ID")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """debuginfod -F DIR on loopback, its log (-v) in a file."""

    def __init__(self, tmp, served):
        self.dir = os.path.join(tmp, "served")
        os.makedirs(self.dir)
        for f in served:
            shutil.copy(f, self.dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(tmp, "debuginfod.log")
        self.logf = open(self.log_path, "wb")
        # -F: scan the directory for ELF and debug files; -d: its database;
        # -t 0: no rescan after the first; -g 0: no grooming.
        self.proc = subprocess.Popen(["debuginfod", "-F", "-p", str(self.port), "-d",
                                      os.path.join(tmp, "debuginfod.sqlite"), "-t", "0", "-g", "0", "-v",
                                      self.dir], stdout=self.logf, stderr=self.logf)

    def wait_serves(self, bid, timeout=60):
        """Polls until the server serves the build ID's debug file (the scan is done)."""
        start = time.monotonic()
        url = f"{self.url}/buildid/{bid}/debuginfo"
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"debuginfod exited ({self.proc.returncode}):\n{self.log()}")
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200:
                        return time.monotonic() - start
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() - start > timeout:
                raise AssertionError(f"debuginfod did not serve {bid} within {timeout} s:\n{self.log()}")
            time.sleep(0.05)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def agent_requests(self, bid):
        """Requests libdebuginfod (not this test) made for the build ID's debug file."""
        return [line for line in self.log().splitlines()
                if f"/buildid/{bid}/debuginfo" in line and "UA:elfutils" in line]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


class HeldProxy:
    """Forwards GETs to the server once the test lets them go (release()):
    until then each request waits, however long that is."""

    def __init__(self, upstream):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with proxy.lock:
                    proxy.requests += 1
                proxy.gate.wait()
                try:
                    with urllib.request.urlopen(upstream + self.path, timeout=30) as r:
                        body, status = r.read(), r.status
                except urllib.error.HTTPError as e:
                    body, status = b"", e.code
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up

            def log_message(self, *args):
                pass

        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.requests = 0
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def received(self):
        with self.lock:
            return self.requests

    def release(self):
        self.gate.set()

    def stop(self):
        self.gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def run_one(agent, binary, tag, seconds=SECONDS):
    cg = Cgroup(f"cgprof-test-debuginfod-{tag}-{os.getpid()}")
    try:
        p = run_in_cgroup(cg, [binary, "--seconds", str(seconds), "--name", tag])
        assert p.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0
        cg.remove()
        return agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
    finally:
        cg.remove()


def session_samples(agent, cg):
    """Samples drained so far by the session of cgroup cg (0 before it starts)."""
    r = agent.ctl("--json", "sessions")
    sessions = json.loads(r.stdout.splitlines()[-1]) if r.stdout.strip() else []
    return sum(s.get("samples") or 0 for s in sessions if s.get("cgroup") == cg.rel)


def run_late(agent, proxy, bid):
    """The served workload while the proxy holds the debug file back: once
    the agent asked for it and drained samples without it, the answer is let
    go; once the agent loaded it, the workload is ended. Returns the report."""
    cg = Cgroup(f"cgprof-test-debuginfod-late-{os.getpid()}")
    p = None
    try:
        p = run_in_cgroup(cg, [STRIPPED, "--seconds", "120", "--name", "late"])
        assert p.stdout.readline().decode().startswith("ready")
        wait_for(lambda: proxy.received() >= 1 and session_samples(agent, cg) > 0, 60,
                 "the debug file asked for, and samples drained without it")
        log(f"late: {session_samples(agent, cg)} samples drained, the answer let go")
        proxy.release()
        wait_for(lambda: f"Debug file of build ID {bid} from debuginfod" in agent.log(), 60,
                 "the agent to load the debug file")
        # A few more samples after it: drained with their names at once.
        drained = session_samples(agent, cg)
        wait_for(lambda: session_samples(agent, cg) > drained, 60, "a drain after the debug file came")
        p.kill()
        p.wait(60)
        cg.remove()
        return agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        cg.remove()


def unnamed_frames(r):
    """The frames of the report still unnamed ("[FILE]"), with their samples."""
    out = {}
    for st, n in folded(r).items():
        for f in st:
            if f.startswith("[") and f.endswith("]"):
                out[f] = out.get(f, 0) + n
    return out


def run_pair(agent, tag):
    """The served workload and the unknown one, each in its own cgroup, for
    SECONDS; returns their reports."""
    cg = Cgroup(f"cgprof-test-debuginfod-{tag}-{os.getpid()}")
    cg_unknown = Cgroup(f"cgprof-test-debuginfod-unknown-{tag}-{os.getpid()}")
    try:
        p = run_in_cgroup(cg, [STRIPPED, "--seconds", str(SECONDS), "--name", tag])
        q = run_in_cgroup(cg_unknown, [UNKNOWN, "--seconds", str(SECONDS), "--name", tag + "-u"])
        assert p.stdout.readline().decode().startswith("ready")
        assert q.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0 and q.wait(60) == 0
        cg.remove()
        cg_unknown.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        u = agent.wait_summary(lambda s: s["cgroup"] == cg_unknown.rel)
        return r, u
    finally:
        cg.remove()
        cg_unknown.remove()


def check_named(r, tag):
    m = mapping_of(r, STRIPPED)
    log(f"{tag}: mapping", json.dumps(m))
    assert m["symbols"] == "debuginfod", m
    assert m["unsymbolizedShare"] < 0.01, m
    assert r["unsymbolizedShare"] < 0.05, r["unsymbolizedShare"]
    assert_shares(r)
    chains = [st for st in folded(r) if st[-1] == "hot_alpha"]
    assert any(st[-4:-1] == ("main", "run_workload", "work_cycle") for st in chains), chains[:5]
    # No frame of the workload is left unnamed in the report, and no stack
    # is there twice (stacks that became equal were merged).
    assert not any(f"[{os.path.basename(STRIPPED)}]" in st for st in folded(r)), list(folded(r))[:5]
    with open(os.path.join(r["_dir"], "profile.folded")) as f:
        lines = [line.rpartition(" ")[0] for line in f]
    assert len(lines) == len(set(lines)), "a stack is in profile.folded twice"


def check_unknown(u, tag):
    m = mapping_of(u, UNKNOWN)
    log(f"{tag}: unknown mapping", json.dumps(m))
    assert m["symbols"] in ("dynsym", "none"), m
    assert m["unsymbolizedShare"] > 0.5, m


def test_debuginfod():
    if not shutil.which("debuginfod"):
        skip_prereq("no debuginfod server (Debian package debuginfod)")
    for f in (STRIPPED, DEBUG, UNKNOWN):
        if not os.access(f, os.R_OK):
            skip(f"{f} not built")
    bid, bid_unknown = build_id(STRIPPED), build_id(UNKNOWN)
    assert bid == build_id(DEBUG) and bid != bid_unknown
    # The fixture is what the test claims: no .symtab, no hot function in
    # .dynsym, and no local debug file to find.
    sections = subprocess.run(["readelf", "-SW", STRIPPED], check=True, capture_output=True, text=True).stdout
    assert ".symtab" not in sections and ".gnu_debugdata" not in sections, sections
    dynsyms = subprocess.run(["nm", "-D", "--defined-only", STRIPPED], capture_output=True, text=True).stdout
    assert "hot_alpha" not in dynsyms, dynsyms
    assert not os.path.exists(f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug")

    tmp = tempfile.mkdtemp(prefix="cgprof-test-debuginfod-")
    state = os.path.join(tmp, "state")
    server = Server(tmp, [DEBUG])
    agents = []
    t0 = time.monotonic()
    try:
        scan = server.wait_serves(bid)
        log(f"debuginfod serves the debug file {scan:.2f} s after its start")

        def agent(url=server.url + "/", state_dir=state):
            a = Agent({"profiles": [profile(name="dbgi")],
                       "targets": [{"name": "t", "profileRef": "dbgi",
                                    "cgroupPatterns": ["cgprof-test-debuginfod-*"]}],
                       "debuginfodUrls": [url]},
                      tmp=tempfile.mkdtemp(prefix="cgprof-test-", dir=tmp), state_dir=state_dir)
            agents.append(a)
            return a.start()

        # The answer is let go once samples were drained without it (named
        # with what was known then), and the session ends once the agent
        # has loaded it: the report names everything. Events, not times: on
        # a busy machine the first drain may come late, and the process's
        # start (the launching shell, ld.so) takes more samples.
        proxy = HeldProxy(server.url)
        try:
            a = agent(proxy.url, os.path.join(tmp, "state-late"))
            r = run_late(a, proxy, bid)
            check_named(r, "late")
            late = [tuple(map(int, m.groups())) for m in
                    re.finditer(r"(\d+) of (\d+) unresolved user frames resolved late", a.log())]
            log("late resolution:", re.findall(r"\d+ of \d+ unresolved user frames resolved late.*", a.log()))
            # Frames drained before the answer were named from it; none of
            # the workload's is left unnamed (check_named()). The frames
            # still unnamed are other files' (the launching shell's, the
            # dynamic loader's): no debug file of this server names them, and
            # how many samples they took depends on the machine's load.
            assert late and late[0][0] > 0, late
            log("late: frames left unnamed, all outside the workload:", unnamed_frames(r))
            assert a.stop() == 0

            # An answer that never comes in time: the report says so, and
            # SIGTERM cancels the fetch at once.
            proxy.gate.clear()
            state_pending = os.path.join(tmp, "state-pending")
            a = agent(proxy.url, state_pending)
            r = run_one(a, STRIPPED, "pending", seconds=1)
            m = mapping_of(r, STRIPPED)
            log("pending: mapping", json.dumps(m))
            assert m["symbols"] in ("dynsym (debuginfod pending)", "none (debuginfod pending)"), m
            assert a.status()["debuginfod"]["pending"] == 1
            t = time.monotonic()
            assert a.stop(timeout=20) == 0
            stop_s = time.monotonic() - t
            log(f"stopped in {stop_s:.2f} s with a fetch in flight")
            assert stop_s < 5, stop_s
            # A cancelled fetch is no miss: nothing in libdebuginfod's negative cache.
            assert not os.path.exists(os.path.join(state_pending, "debuginfod", bid, "debuginfo"))
        finally:
            proxy.stop()

        # First session: fetched while it runs, named before the report.
        a = agent()
        r, u = run_pair(a, "first")
        check_named(r, "first")
        check_unknown(u, "first")
        cached = os.path.join(state, "debuginfod", bid, "debuginfo")
        assert os.path.getsize(cached) == os.path.getsize(DEBUG), cached
        st = a.status()["debuginfod"]
        log("first session: status", json.dumps(st))
        assert st["fetched"] == 1 and st["notFound"] == 1 and st["failed"] == 0 and st["dropped"] == 0, st
        assert st["pending"] == 0 and st["fromCache"] == 0 and st["cacheBytes"] >= os.path.getsize(DEBUG), st
        assert len(server.agent_requests(bid)) == 1, server.agent_requests(bid)
        assert len(server.agent_requests(bid_unknown)) == 1, server.log()
        assert any(" 404 " in line for line in server.agent_requests(bid_unknown)), server.agent_requests(bid_unknown)
        fetch_ms = st["fetchMsecMax"]

        # Second session, same agent: nothing asked again.
        r, u = run_pair(a, "second")
        check_named(r, "second")
        check_unknown(u, "second")
        st = a.status()["debuginfod"]
        assert st["fetched"] == 1 and st["queued"] == 2, st
        assert a.stop() == 0

        # After a restart with the same state directory: the debug file
        # comes from the disk cache, and the unknown build ID from
        # libdebuginfod's negative cache: the server sees neither.
        a = agent()
        r, u = run_pair(a, "restart")
        check_named(r, "restart")
        check_unknown(u, "restart")
        st = a.status()["debuginfod"]
        log("after a restart: status", json.dumps(st))
        assert st["fetched"] == 0 and st["fromCache"] >= 1, st
        assert len(server.agent_requests(bid)) == 1, server.agent_requests(bid)
        assert len(server.agent_requests(bid_unknown)) == 1, server.agent_requests(bid_unknown)
        assert a.stop() == 0
        log(f"debuginfod scan {scan:.2f} s, fetch {fetch_ms:.1f} ms, test {time.monotonic() - t0:.1f} s")
    finally:
        for a in agents:
            a.cleanup()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main([test_debuginfod])
