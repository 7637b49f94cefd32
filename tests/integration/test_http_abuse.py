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
- TLS 1.2 and later only, forward-secret AEAD suites (the default
  http.tlsPriorities): a TLS 1.0 or 1.1 client, or one offering only
  static-RSA AES128-SHA, is refused; an ECDHE-GCM TLS 1.2 client and a TLS
  1.3 one are served. A priority string GnuTLS does not take, or one that
  allows TLS 1.0, is a config error naming http.tlsPriorities.
- Requests as RFC 7230 wants them, and none a web page sends: %00 in the
  path or the query is 400 (it truncated the path); GET with
  Content-Length: 0 is served; HEAD on the profile is 405 with Allow: GET;
  a bad Content-Length gets one status line; HTTP/1.1 without Host is 400;
  "?seconds" without a value is 400. On loopback, a Host that does not name
  the listener (DNS rebinding) is 403 unless in http.allowedHosts, and so
  are requests with Origin or Sec-Fetch-Site: cross-site (CSRF); a cgroup
  no target selects is 403 unless http.pullAnyCgroup.
- A reportDir below a directory others may write (not sticky), or one
  group-writable itself, is refused at start, naming the directory (who
  writes there could plant a summary.json and take over a session's
  downloads); "reportDirStrictModes": false starts with a warning.
- Slots: a slowloris of 200 connections trickling header bytes, with
  long pulls waiting, leaves /metrics answering (past maxConnections the
  connection that waited longest for its head is taken back); none waits
  longer than the 10 s head deadline; one IP address holds at most
  maxConnectionsPerClient, and pulls at most half of the slots (503).
- Downloads are streamed from the file: 40 clients that do not read a
  60 MiB report's file hold the agent's RSS within a few MiB of where it
  was (it held each file whole before: +280 MB), one that reads gets every
  byte, and fds come back when they go.
- Pulls whose client hangs up before anything was sampled (an empty
  cgroup): no report directory is written for them, the end is still in
  the log; an abandoned pull of a busy cgroup still writes its report
  (test_pull's check_hang_up).
- reportRetention: 30 reports planted in reportDir before the start (one
  older than maxAge): the index loads them, the one too old goes ("age"),
  then the oldest while more than maxReports ("count"), each with its
  journal entry, counted in /metrics; the newest stay on disk.
- /reports paged: ?limit=7 gives 7, newest first, and a Link header to the
  next page; following the links gives every report once; the last page
  has none. A pull's new report is listed at once (the index is updated by
  the write, not by a walk)."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

import re
import urllib.parse
import uuid

from cgproflib import Agent, Cgroup, log, main, profile, wait_for, workload
from journallib import ensure_journald, process_journal, stop_journald
from test_pull import curl, curl_unix, free_port, hang_up_pull, install, make_cert

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
                            "tlsKeyFile": key, "maxConnections": 32, "maxConnectionsPerClient": 0}})
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


def handshake(port, *args):
    """The protocol and cipher an openssl client got from the listener, or None when refused."""
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-brief", *args],
                       input="", capture_output=True, text=True, timeout=30)
    if "CONNECTION ESTABLISHED" not in r.stderr:
        return None
    proto = re.search(r"Protocol version: (\S+)", r.stderr)
    cipher = re.search(r"Ciphersuite: (\S+)", r.stderr)
    return (proto.group(1) if proto else "?", cipher.group(1) if cipher else "?")


def test_tls_versions_and_suites():
    from test_pull import check_config
    for bad, what in (("NORMAL:+FROBNICATE", "GnuTLS does not take"), ("NORMAL:+VERS-TLS1.0", "only TLS 1.2 and later"),
                      ("", "priority string")):
        rc, err = check_config({"http": {"listen": "127.0.0.1:9469", "tlsPriorities": bad}}, "--no-kubernetes")
        assert rc != 0 and "http.tlsPriorities" in err and what in err, (bad, err)
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-tlsv-")
    cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
    c, k = make_cert(tmp, "server")
    install(c, k, cert, key)
    port = free_port()
    agent = Agent({"http": {"listen": f"127.0.0.1:{port}", "tlsCertFile": cert, "tlsKeyFile": key}})
    try:
        agent.start()
        # A client that offers only what must be refused (SECLEVEL=0: the
        # client itself would refuse TLS 1.0/1.1 otherwise).
        for args in (["-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"], ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"],
                     ["-tls1_2", "-cipher", "AES128-SHA:@SECLEVEL=0"], ["-tls1_2", "-cipher", "AES128-SHA256"],
                     ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-SHA256"]):
            got = handshake(port, *args)
            assert got is None, f"{args}: served {got}"
        for args, want in ((["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"], ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256")),
                           (["-tls1_2", "-cipher", "ECDHE-RSA-CHACHA20-POLY1305"], ("TLSv1.2", "ECDHE-RSA-CHACHA20-POLY1305")),
                           (["-tls1_3"], ("TLSv1.3", None))):
            got = handshake(port, *args)
            assert got and got[0] == want[0] and (want[1] is None or got[1] == want[1]), (args, got)
        log("TLS 1.0, 1.1, static RSA and CBC refused; ECDHE-GCM/ChaCha20 on TLS 1.2 and TLS 1.3 served")
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def raw(port, request):
    """The raw answer (bytes) to a raw request on 127.0.0.1:port."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b


def status_of(answer):
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else None


def test_request_quirks_and_guard():
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-quirks-")
    port = free_port()
    cg = Cgroup(f"cgprof-test-abuse-q-{os.getpid()}")
    agent = Agent({"profiles": [profile(name="pull", start="manual")], "defaultProfileRef": "pull",
                   "targets": [{"name": "t", "profileRef": "pull", "cgroupPatterns": [cg.rel]}],
                   "http": {"listen": f"127.0.0.1:{port}", "pprof": True, "allowedHosts": ["node-a.example"]}},
                  tmp=tmp)

    def get(path, *headers, version="1.1", host="localhost"):
        h = "".join(f"{x}\r\n" for x in headers)
        host_line = f"Host: {host}\r\n" if host else ""
        return raw(port, f"GET {path} HTTP/{version}\r\n{host_line}{h}Connection: close\r\n\r\n".encode())

    try:
        agent.start()
        proc = workload(cg, 60)
        ans = get(f"/debug/pprof/profile?seconds=1&cgroup={cg.rel}")
        assert status_of(ans) == 200, ans[:300]
        sid = json.loads(get("/reports").split(b"\r\n\r\n", 1)[1])[0]["session"]
        assert status_of(get(f"/reports/{sid}/summary.json")) == 200
        # %00: the path it cut was served before.
        for path in (f"/reports/{sid}/summary.json%00.x", f"/reports?namespace=a%00b",
                     f"/debug/pprof/profile?seconds=1&cgroup={cg.rel}%00x"):
            ans = get(path)
            assert status_of(ans) == 400 and b"%00" in ans, (path, ans[:300])
        assert status_of(get("/metrics", "Content-Length: 0")) == 200
        assert status_of(get("/metrics", "Content-Length: 5")) == 413
        ans = raw(port, f"HEAD /debug/pprof/profile?seconds=1&cgroup={cg.rel} HTTP/1.1\r\nHost: localhost\r\n"
                        "Connection: close\r\n\r\n".encode())
        assert status_of(ans) == 405 and re.search(rb"(?im)^Allow: GET\r$", ans), ans[:300]
        # libmicrohttpd 0.9.75 answers this one itself, and writes its
        # status line and headers twice before closing (its bug: docs/pull.md).
        ans = get("/metrics", "Content-Length: abc")
        assert status_of(ans) == 400 and b"Content-Length" in ans, ans[:500]
        ans = get("/metrics", host=None)
        assert status_of(ans) == 400, ans[:300]
        ans = get(f"/debug/pprof/profile?seconds&cgroup={cg.rel}")
        assert status_of(ans) == 400 and b"seconds" in ans, ans[:300]
        # Who may reach it: local programs, not pages.
        for host in ("localhost", f"localhost:{port}", "127.0.0.1", f"127.0.0.1:{port}", "node-a.example"):
            assert status_of(get("/metrics", host=host)) == 200, host
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1:1", "localhost.evil.example"):
            ans = get("/reports", host=host)
            assert status_of(ans) == 403 and b"Host" in ans, (host, ans[:300])
        assert status_of(get("/metrics", host=None, version="1.0")) == 403
        for header in ("Origin: http://evil.example", "Origin: null", "Sec-Fetch-Site: cross-site",
                       "Sec-Fetch-Site: same-site"):
            ans = get(f"/debug/pprof/profile?seconds=1&cgroup={cg.rel}", header)
            assert status_of(ans) == 403 and b"web pages" in ans, (header, ans[:300])
        assert status_of(get("/metrics", "Sec-Fetch-Site: none")) == 200
        # A cgroup of the host no target selects.
        ans = get("/debug/pprof/profile?seconds=1&cgroup=system.slice")
        assert status_of(ans) == 403 and b"pullAnyCgroup" in ans, ans[:300]
        log("%00, Content-Length, HEAD, Host, Origin, Sec-Fetch-Site and untargeted cgroups answered as they should")
        proc.kill()
        proc.wait()
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        cg.remove()
        shutil.rmtree(tmp, ignore_errors=True)


def test_report_dir_strict_modes():
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-strict-")
    shared = os.path.join(tmp, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    report_dir = os.path.join(shared, "reports")
    try:
        for strict, own_mode in ((True, None), (True, 0o775), (False, None)):
            if own_mode is not None:
                os.chmod(shared, 0o755)
                os.makedirs(report_dir, exist_ok=True)
                os.chmod(report_dir, own_mode)
            config = {"reportDir": report_dir}
            if not strict:
                os.chmod(shared, 0o777)
                config["reportDirStrictModes"] = False
            agent_tmp = os.path.join(tmp, f"agent-{strict}-{own_mode}")
            os.mkdir(agent_tmp)
            agent = Agent(config, tmp=agent_tmp)
            try:
                if strict:
                    agent.start(wait_ready=False)
                    rc = agent.proc.wait(timeout=60)
                    where = shared if own_mode is None else report_dir
                    assert rc != 0 and f"reportDir: {where} is writable by group or others" in agent.log(), \
                        agent.log()[-2000:]
                else:
                    agent.start()
                    assert f"reportDir: {shared} is writable by group or others, and not sticky" in agent.log(), \
                        agent.log()[-2000:]
                    assert agent.stop() == 0
            finally:
                agent.kill()
        log("reportDir below a world-writable directory, or group-writable: refused; allowed when not strict")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def metric(text, name):
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def get_from(port, path, source="127.0.0.1", timeout=30):
    """(status, body) of a GET from a given loopback source address."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    return status_of(out), out.split(b"\r\n\r\n", 1)[-1]


def test_slots_slowloris():
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-slots-")
    port = free_port()
    cgs = [Cgroup(f"cgprof-test-abuse-slots-{os.getpid()}-{i}") for i in range(17)]
    agent = Agent({"profiles": [profile(name="pull")], "defaultProfileRef": "pull",
                   "http": {"listen": f"127.0.0.1:{port}", "pprof": True, "pullAnyCgroup": True,
                            "maxConnections": 32, "maxConnectionsPerClient": 0, "timeout": "60s"}}, tmp=tmp)
    socks, pulls = [], []
    try:
        agent.start()
        # 16 long pulls (half of 32), of 16 cgroups: they wait; a 17th is 503.
        for cg in cgs[:16]:
            p = socket.create_connection(("127.0.0.1", port), timeout=10)
            p.sendall(f"GET /debug/pprof/profile?seconds=60&cgroup={cg.rel} HTTP/1.1\r\nHost: localhost\r\n\r\n"
                      .encode())
            pulls.append(p)
        wait_for(lambda: len(json.loads(agent.ctl("--json", "sessions").stdout)) == 16 or None,
                 what="the 16 pulls' sessions running")
        st, body = get_from(port, f"/debug/pprof/profile?seconds=1&cgroup={cgs[16].rel}")
        assert st == 503, (st, body)
        # 200 connections trickling a request's head, a byte a second.
        t0 = time.monotonic()
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.setblocking(False)
            socks.append(s)
        answered = 0
        for second in range(3):
            for s in socks:
                try:
                    s.send(b"G")
                except OSError:
                    pass
            st, body = get_from(port, "/metrics")
            assert st == 200 and b"cgprof_sessions_started_total" in body, (st, body[:200])
            answered += 1
            time.sleep(1)
        text = get_from(port, "/metrics")[1].decode()
        evicted = metric(text, "cgprof_http_connections_evicted_total")
        log(f"200 slowloris connections + 16 waiting pulls: /metrics answered {answered} of 3, "
            f"{evicted:.0f} connections taken back")
        assert evicted and evicted >= 150, text[-2000:]
        # The survivors that keep trickling are cut at the head deadline.
        wait_for(lambda: (metric(get_from(port, "/metrics")[1].decode(), "cgprof_http_head_timeouts_total") or 0) > 0,
                 timeout=30, what="a head deadline")
        for s in socks:
            s.close()
        socks = []
        for p in pulls:
            p.close()
        pulls = []
        assert agent.stop() == 0
    finally:
        for s in socks + pulls:
            s.close()
        agent.cleanup()
        for cg in cgs:
            cg.remove()
        shutil.rmtree(tmp, ignore_errors=True)


def test_per_client_limit():
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-perip-")
    port = free_port()
    agent = Agent({"http": {"listen": f"127.0.0.1:{port}", "maxConnectionsPerClient": 4}}, tmp=tmp)
    socks = []
    try:
        agent.start()
        for _ in range(4):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(0.5)
        # A 5th from the same address is refused at once; another address is served.
        extra = socket.create_connection(("127.0.0.1", port), timeout=10)
        extra.settimeout(10)
        assert extra.recv(1) == b"", "a 5th connection from one address was kept"
        extra.close()
        st, _ = get_from(port, "/metrics", source="127.0.0.2")
        assert st == 200
        assert agent.stop() == 0
    finally:
        for s in socks:
            s.close()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


def test_downloads_streamed():
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-dl-")
    report_dir = os.path.join(tmp, "reports")
    sid = plant_report(report_dir, "big/r", time.time_ns() // 1000, size=60 * 1024 * 1024)
    port = free_port()
    agent = Agent({"reportDir": report_dir, "reportRetention": {"maxBytes": 0},
                   "http": {"listen": f"127.0.0.1:{port}", "pprof": True, "maxConnections": 64}}, tmp=tmp)
    socks = []
    try:
        agent.start()
        pid = agent.proc.pid
        wait_for(lambda: "Indexed 1 reports" in agent.log(), what="the index loaded")
        request = f"GET /reports/{sid}/profile.folded HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
        # One whole download: every byte.
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            s.sendall(request)
            data = b""
            while len(data) < 60 * 1024 * 1024 + 100:
                b = s.recv(1 << 20)
                if not b:
                    break
                data += b
                if b"\r\n\r\n" in data and len(data.split(b"\r\n\r\n", 1)[1]) >= 60 * 1024 * 1024:
                    break
            head, body = data.split(b"\r\n\r\n", 1)
            assert head.startswith(b"HTTP/1.1 200") and body == b"x" * (60 * 1024 * 1024), head
        fds0, rss0 = open_fds(pid), rss_kib(pid)
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(request)
            socks.append(s)
        time.sleep(3)
        rss = rss_kib(pid)
        log(f"40 stalled downloads of a 60 MiB file: agent RSS {rss0 / 1024:.1f} -> {rss / 1024:.1f} MiB")
        assert rss - rss0 < 32 * 1024, f"RSS grew by {(rss - rss0) / 1024:.1f} MiB"
        for s in socks:
            s.close()
        socks = []
        wait_for(lambda: open_fds(pid) <= fds0, timeout=30, what="the agent's fds back to their count")
        assert agent.stop() == 0
    finally:
        for s in socks:
            s.close()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def hang_up_pull_ended(agent, sock, cg):
    """test_pull's hang-up, and the session's end; its ID."""
    sid = hang_up_pull(agent, sock, cg)
    wait_for(lambda: not [s for s in json.loads(agent.ctl("--json", "sessions").stdout) if s["id"] == sid],
             what=f"session {sid} to end")
    return sid


def test_abandoned_empty_pulls_write_nothing():
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-pull-")
    cg = Cgroup(f"cgprof-test-abuse-empty-{os.getpid()}")
    sock = os.path.join(tmp, "pull.sock")
    agent = Agent({"profiles": [profile(name="pull")], "defaultProfileRef": "pull",
                   "http": {"listen": f"unix:{sock}", "pprof": True, "pullAnyCgroup": True}})
    try:
        agent.start()
        n = 20
        ids = [hang_up_pull_ended(agent, sock, cg) for _ in range(n)]
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


def get_unix(sock, path):
    """(status, headers dict (lower-case names), body bytes) of a GET on the Unix socket."""
    r = subprocess.run(["curl", "-sS", "-D", "-", "-o", "-", "--unix-socket", sock, f"http://localhost{path}"],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), headers, body


def plant_report(report_dir, rel, start_usec, size=1000):
    """A report as the agent writes one (summary.json and profile.folded), its session ID."""
    d = os.path.join(report_dir, rel)
    os.makedirs(d)
    sid = uuid.uuid4().hex
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump({"session": sid, "startUsec": start_usec, "cgroup": "planted", "namespace": "", "pod": "",
                   "container": "", "samples": {"total": 1}}, f)
    with open(os.path.join(d, "profile.folded"), "w") as f:
        f.write("x" * size)
    return sid


def test_retention_and_paging():
    ensure_journald()
    tmp = tempfile.mkdtemp(prefix="cgprof-abuse-retention-")
    report_dir = os.path.join(tmp, "reports")
    sock = os.path.join(tmp, "pull.sock")
    now = time.time_ns() // 1000
    hour = 3600 * 10 ** 6
    # r00 is 11 days old (maxAge 240h), r01..r29 one hour apart, newest last.
    planted = [(f"planted/r{i:02}", now - (11 * 24 * hour if i == 0 else (30 - i) * hour)) for i in range(30)]
    sids = {rel: plant_report(report_dir, rel, start) for rel, start in planted}
    cg = Cgroup(f"cgprof-test-abuse-ret-{os.getpid()}")
    agent = Agent({"profiles": [profile(name="pull")], "defaultProfileRef": "pull", "reportDir": report_dir,
                   "reportRetention": {"maxReports": 20, "maxAge": "240h", "maxBytes": 0},
                   "http": {"listen": f"unix:{sock}", "pprof": True, "pullAnyCgroup": True}}, tmp=tmp)
    try:
        agent.start()
        wait_for(lambda: "Indexed 30 reports" in agent.log(), what="the index loaded")
        # r00 by age, then r01..r09 by count (29 left, 20 wanted).
        gone = [rel for rel, _ in planted[:10]]
        kept = [rel for rel, _ in planted[10:]]
        wait_for(lambda: not any(os.path.exists(os.path.join(report_dir, rel)) for rel in gone),
                 what="the oldest reports removed")
        for rel in kept:
            assert os.path.isfile(os.path.join(report_dir, rel, "summary.json")), f"{rel} was removed"
        metrics = curl_unix(sock, "/metrics")[1].decode()
        assert 'cgprof_reports_removed_total{reason="age"} 1' in metrics, metrics
        assert 'cgprof_reports_removed_total{reason="count"} 9' in metrics, metrics
        assert "cgprof_reports 20" in metrics
        assert "cgprof_reports_removed_bytes_total " in metrics
        entries = wait_for(lambda: (lambda e: e if len(e) == 10 else None)(
            process_journal(agent.proc.pid, agent.started_us, "CGPROF_EVENT=report-removed")),
            what="10 report-removed journal entries")
        by_report = {e["CGPROF_REPORT"]: e for e in entries}
        for rel in gone:
            e = by_report[os.path.join(report_dir, rel)]
            assert e["CGPROF_SESSION"] == sids[rel]
            assert e["CGPROF_REASON"] == ("age" if rel == "planted/r00" else "count"), e
            assert e["MESSAGE_ID"] == "55484d78af6b4b7db546fb74f628be32"

        # Paged: 7 + 7 + 6, newest first, each once; Link until the last.
        listed, path, pages = [], "/reports?limit=7", 0
        while path:
            st, headers, body = get_unix(sock, path)
            assert st == 200, (st, body)
            page = json.loads(body)
            listed += page
            pages += 1
            link = headers.get("link")
            if link:
                assert headers.get("x-cgprof-more") == "true"
                path = re.fullmatch(r'<([^>]+)>; rel="next"', link).group(1)
                assert len(page) == 7, len(page)
            else:
                path = None
        assert pages == 3, pages
        assert [r["session"] for r in listed] == [sids[rel] for rel in reversed(kept)], \
            "not every kept report once, newest first"
        st, _, body = get_unix(sock, "/reports?limit=0")
        assert st == 400 and b"limit" in body, (st, body)
        st, _, body = get_unix(sock, "/reports?after=" + urllib.parse.quote("1.x"))
        assert st == 400 and b"after" in body, (st, body)

        # A pull's report is listed at once, and the oldest planted one goes.
        proc = workload(cg, 30)
        st, _, _ = get_unix(sock, f"/debug/pprof/profile?seconds=1&cgroup={cg.rel}")
        assert st == 200
        st, _, body = get_unix(sock, "/reports?limit=1")
        assert json.loads(body)[0]["cgroup"] == cg.rel, body[:300]
        wait_for(lambda: not os.path.exists(os.path.join(report_dir, kept[0])), what=f"{kept[0]} removed")
        proc.kill()
        proc.wait()
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        cg.remove()
        stop_journald()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main([test_tls_half_record_no_spin, test_tls_versions_and_suites, test_request_quirks_and_guard,
          test_report_dir_strict_modes, test_slots_slowloris, test_per_client_limit, test_downloads_streamed, test_abandoned_empty_pulls_write_nothing,
          test_retention_and_paging])
