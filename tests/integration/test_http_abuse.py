#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The HTTP listener against a hostile client (docs/pull.md, "Hardening").

Each case is a reproduction of a finding, run against the real listener of
a real agent, and the behaviour that is now right. The agent's CPU time,
RSS and open fds are read from /proc around each case: asserted only as
"no spin" (CPU well below a core during a hold of several seconds) and
"back to baseline" (fds). Timing goals are bench/http-abuse's.

- A half-sent TLS record (the 11 bytes of a ClientHello's start) held open
  on 16 connections: the agent does not spin (it did at 100 % of a core:
  libmicrohttpd 0.9.75 never saw the EAGAIN of GnuTLS's handshake reads),
  and a real TLS request is still answered meanwhile.
- Pulls whose client hangs up before anything was sampled (an empty
  cgroup): no report directory is written for them, the end is still in
  the log; an abandoned pull of a busy cgroup still writes its report
  (test_pull's check_hang_up)."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

from cgproflib import Agent, Cgroup, log, main, profile, wait_for
from test_pull import curl, curl_unix, free_port, install, make_cert

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def reports_on_disk(report_dir):
    """Report directories (with a summary.json) below report_dir."""
    return sorted(d for d, _, files in os.walk(report_dir) if "summary.json" in files)


# The start of a TLS 1.0 record of a ClientHello (type 22, length 512) and
# of the handshake message (type 1, length 508, version 3.3): 11 bytes of
# the 517 the record promises.
HALF_CLIENT_HELLO = bytes.fromhex("1603010200" "010001fc" "0303")


def test_tls_half_record_no_spin():
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-tls-")
    cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
    c, k = make_cert(tmp, "server")
    install(c, k, cert, key)
    port = free_port()
    agent = Agent({"profiles": [profile(name="pull")], "defaultProfileRef": "pull",
                   "http": {"listen": f"127.0.0.1:{port}", "pprof": True, "tlsCertFile": cert,
                            "tlsKeyFile": key, "maxConnections": 32}})
    socks = []
    try:
        agent.start()
        pid = agent.proc.pid
        st, _ = curl(f"https://127.0.0.1:{port}/metrics", cacert=cert, timeout=30)
        assert st == 200
        fds0 = open_fds(pid)
        for _ in range(16):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(HALF_CLIENT_HELLO)
            socks.append(s)
        # The agent has read them (its handshakes wait): then measure.
        time.sleep(0.5)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(5)
        cpu, wall = cpu_seconds(pid) - cpu0, time.monotonic() - t0
        log(f"16 half-sent TLS records held {wall:.1f} s: the agent used {cpu:.2f} s of CPU")
        # It spun a whole core before (5 s in 5 s); idle it uses ~0.
        assert cpu < 0.5 * wall / 5, f"the agent spins: {cpu:.2f} s of CPU in {wall:.1f} s"
        # A real client is answered meanwhile.
        st, body = curl(f"https://127.0.0.1:{port}/metrics", cacert=cert, timeout=30)
        assert st == 200, st
        stalled = [l for l in body.decode().splitlines() if l.startswith("cgprof_http_stalled_runs_total ")]
        assert stalled and int(stalled[0].split()[1]) > 0, stalled
        # The rest of the record arrives late, garbage: the connection is
        # closed, nothing else happens.
        for s in socks:
            s.sendall(b"\0" * 506)
        for s in socks:
            s.close()
        socks = []
        wait_for(lambda: open_fds(pid) <= fds0, timeout=30, what="the agent's fds back to their count")
        st, _ = curl(f"https://127.0.0.1:{port}/metrics", cacert=cert, timeout=30)
        assert st == 200
        assert agent.stop() == 0
    finally:
        for s in socks:
            s.close()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def hang_up_pull(agent, sock, cg):
    """A pull of 300 s on cg, its client gone once its session runs; the session's ID."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sock)
    c.sendall(f"GET /debug/pprof/profile?seconds=300&cgroup={cg.rel} HTTP/1.1\r\nHost: localhost\r\n\r\n"
              .encode())
    sid = wait_for(lambda: next((s["id"] for s in json.loads(agent.ctl("--json", "sessions").stdout)
                                 if s.get("cgroup") == cg.rel), None), what="the pull's session")
    c.close()
    wait_for(lambda: not [s for s in json.loads(agent.ctl("--json", "sessions").stdout) if s["id"] == sid],
             what=f"session {sid} to end")
    return sid


def test_abandoned_empty_pulls_write_nothing():
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-pull-")
    cg = Cgroup(f"cgprof-test-abuse-empty-{os.getpid()}")
    sock = os.path.join(tmp, "pull.sock")
    agent = Agent({"profiles": [profile(name="pull")], "defaultProfileRef": "pull",
                   "http": {"listen": f"unix:{sock}", "pprof": True}})
    try:
        agent.start()
        n = 20
        ids = [hang_up_pull(agent, sock, cg) for _ in range(n)]
        # Every end is in the log, none wrote a report.
        wait_for(lambda: all(f"Session {sid} for cgroup {cg.rel} ended (stopped) with no samples" in agent.log()
                             for sid in ids), what="the sessions' ends logged")
        found = reports_on_disk(agent.report_dir)
        assert not found, f"{len(found)} report(s) of abandoned empty pulls: {found[:3]}"
        st, body = curl_unix(sock, "/reports")
        assert st == 200 and json.loads(body) == [], body[:300]
        st, body = curl_unix(sock, "/metrics")
        assert f"cgprof_http_requests_abandoned_total {n}" in body.decode()
        log(f"{n} abandoned pulls of an empty cgroup: no report written")
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        cg.remove()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main([test_tls_half_record_no_spin, test_abandoned_empty_pulls_write_nothing])
