#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""/metrics as Prometheus sees it: a real Prometheus server (Debian's
prometheus package) scrapes a running agent on loopback; after a session,
a PromQL query through its HTTP API returns the session's samples (as its
summary.json counts them), and promtool check metrics finds nothing wrong
with the exposition. Then slow and malicious clients: silent and trickling
connections fill the listener, and the agent's control socket still
answers; the connection limit, the idle timeout and the request limits
hold."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from cgproflib import Agent, Cgroup, log, main, profile, skip_prereq, wait_for, workload

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

FAMILIES = [
    "cgprof_sessions", "cgprof_sessions_started_total", "cgprof_sessions_ended_total",
    "cgprof_sessions_failed_total", "cgprof_samples_total", "cgprof_samples_lost_total",
    "cgprof_samples_expected_total", "cgprof_stack_collisions_total", "cgprof_unsymbolized_frames_total",
    "cgprof_bpf_program_run_seconds_total", "cgprof_bpf_program_runs_total", "cgprof_drain_duration_seconds",
    "cgprof_report_write_duration_seconds", "cgprof_event_loop_dispatch_duration_seconds",
    "cgprof_machine_config_applies_total", "cgprof_machine_config_drift_repairs_total",
    "cgprof_machine_config_refusals_total", "cgprof_kube_watch_connected", "cgprof_kube_watch_relists_total",
    "cgprof_kube_watch_gone_total", "cgprof_kube_watch_reconnects_total",
    "cgprof_kube_watch_last_event_age_seconds", "process_cpu_seconds_total", "process_resident_memory_bytes",
    "process_open_fds", "process_max_fds", "process_start_time_seconds", "process_virtual_memory_bytes",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path="/metrics", method="GET", timeout=30):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def families(text):
    """{family: type} of an exposition's # TYPE lines."""
    return {l.split()[2]: l.split()[3] for l in text.splitlines() if l.startswith("# TYPE ")}


def sample_value(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


class Prometheus:
    """prometheus on loopback, its config and storage in a temp dir,
    scraping one target every second."""

    def __init__(self, target):
        self.tmp = tempfile.mkdtemp(prefix="cgprof-prometheus-")
        self.port = free_port()
        cfg = os.path.join(self.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: cgprof\n    metrics_path: /metrics\n"
                    f"    static_configs:\n      - targets: ['{target}']\n")
        self.log_path = os.path.join(self.tmp, "prometheus.log")
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(self.tmp, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.logf, stderr=self.logf, cwd=self.tmp)
        wait_for(lambda: self.ready(), 60, "prometheus to start")

    def ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("prometheus exited:\n" + open(self.log_path, errors="replace").read())
        try:
            return get(self.port, "/-/ready", timeout=2)[0] == 200
        except OSError:
            return False

    def query(self, promql):
        status, _, body = get(self.port, "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert status == 200, body
        d = json.loads(body)
        assert d["status"] == "success", d
        return d["data"]["result"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.logf.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def test_prometheus_scrape():
    if not os.access(PROMETHEUS, os.X_OK) or not os.access(PROMTOOL, os.X_OK):
        skip_prereq("no prometheus/promtool (Debian's prometheus package)")
    port = free_port()
    cg = Cgroup(f"cgprof-test-metrics-{os.getpid()}")
    agent = Agent({
        "http": {"listen": f"127.0.0.1:{port}"},
        "profiles": [profile(name="metrics-test")],
        "targets": [{"name": "t", "profileRef": "metrics-test", "cgroupPatterns": [cg.rel]}],
    })
    prom = None
    try:
        agent.start()
        # A finished session: its counters are final.
        p = workload(cg, 1.5)
        assert p.wait(60) == 0
        cg.remove()
        summary = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        samples = summary["samples"]["total"]
        assert samples > 0, summary["samples"]
        wait_for(lambda: agent.status()["sessionsEnded"] >= 1, 30, "the session's end to be counted")

        status, headers, text = get(port)
        assert status == 200, text
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4"), headers
        fam = families(text)
        for f in FAMILIES:
            assert f in fam, f"family {f} missing:\n{text}"
        for line in text.splitlines():
            if line.startswith("# TYPE ") and line.split()[3] == "counter":
                assert line.split()[2].endswith("_total"), line
        assert sample_value(text, 'cgprof_samples_total{profile="metrics-test"}') == samples, text
        assert sample_value(text, 'cgprof_sessions_ended_total{reason="cgroup-removed"}') == 1, text
        assert sample_value(text, "cgprof_sessions_started_total") >= 1
        assert sample_value(text, 'cgprof_samples_expected_total{profile="metrics-test"}') == \
            summary["samples"]["expected"]
        assert sample_value(text, "process_resident_memory_bytes") > 0

        # promtool's lint of the exposition.
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        log("promtool check metrics:", r.returncode, r.stdout, r.stderr)
        assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), (r.stdout, r.stderr)

        # A real Prometheus scrapes the agent; PromQL sees the session's samples.
        prom = Prometheus(f"127.0.0.1:{port}")
        query = 'cgprof_samples_total{job="cgprof",profile="metrics-test"}'

        def scraped():
            res = prom.query(query)
            return res if res else None
        res = wait_for(scraped, 60, "Prometheus to scrape the agent")
        log("PromQL", query, "->", res)
        assert len(res) == 1, res
        assert float(res[0]["value"][1]) >= samples, (res, samples)
        assert float(res[0]["value"][1]) == samples, (res, samples)  # a finished session's: exact
        up = prom.query('up{job="cgprof"}')
        assert up and float(up[0]["value"][1]) == 1, up
        # Every scrape was one HTTP request the agent answered.
        assert sample_value(get(port)[2], "cgprof_http_requests_total") >= 2
    finally:
        if prom:
            prom.stop()
        agent.cleanup()
        cg.remove()


def recv_closed(s):
    """True once the server closed the connection (EOF or reset)."""
    try:
        s.setblocking(False)
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def raw_request(port, data, timeout=30):
    """Sends data, returns what the server answered before closing."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        out = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                out += d
                if b"\r\n\r\n" in out and b"Connection: close" not in out and b"Content-Length" in out:
                    head, _, body = out.partition(b"\r\n\r\n")
                    n = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                    if len(body) >= n:
                        break
        except ConnectionResetError:
            pass
        return out


def test_slow_clients():
    port = free_port()
    limit = 4
    agent = Agent({"http": {"listen": f"127.0.0.1:{port}", "maxConnections": limit, "timeout": "2s"}})
    socks = []
    try:
        agent.start()
        # Silent clients, and clients trickling a request a byte at a time:
        # more than the limit.
        for i in range(3 * limit):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            if i % 2:
                s.sendall(b"G")
            socks.append(s)
        for _ in range(3):
            for i, s in enumerate(socks):
                if i % 2:
                    try:
                        s.sendall(b"E")
                    except OSError:
                        pass
            # The loop is free: the control socket answers meanwhile.
            st = agent.status()
            assert st["pid"] == agent.proc.pid

        # Past the limit, connections are not served: they are closed at
        # once or wait in the backlog until slots free up.
        # The idle timeout closes the silent and stalled ones.
        wait_for(lambda: all(recv_closed(s) for s in socks[:limit]) or None, 60,
                 "the idle connections to be closed")
        for s in socks:
            s.close()
        socks = []

        # The listener serves again.
        status, _, text = get(port)
        assert status == 200 and "cgprof_sessions_started_total" in text

        # Request limits: headers past the memory limit, a body, another
        # method, another path. None of it stops the agent.
        big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (256 * 1024) + b"\r\n\r\n"
        out = raw_request(port, big)
        log("oversized request ->", out[:60])
        assert out == b"" or out.startswith(b"HTTP/1.1 431") or out.startswith(b"HTTP/1.1 413"), out[:200]
        out = raw_request(port, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
                                b"Connection: close\r\n\r\nhello")
        assert out.startswith(b"HTTP/1.1 413"), out[:200]
        assert get(port, method="POST")[0] == 405
        assert get(port, "/nope")[0] == 404
        assert get(port, "/metrics?x=1")[0] == 200
        out = raw_request(port, b"\x00\xff garbage \r\n\r\n")
        assert out == b"" or out.startswith(b"HTTP/1.1 400"), out[:200]
        assert get(port, method="HEAD")[0] == 200
        st = agent.status()
        assert st["pid"] == agent.proc.pid
        assert agent.proc.poll() is None
        # A clean exit (under ASan: no leak of the listener's state).
        assert agent.stop() == 0
    finally:
        for s in socks:
            s.close()
        agent.cleanup()


def test_listen_failure():
    """A port taken: the agent runs on without /metrics and says why."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        agent = Agent({"http": {"listen": f"127.0.0.1:{port}"}})
        try:
            agent.start()
            assert agent.status()["pid"] == agent.proc.pid
            assert "no /metrics" in agent.log(), agent.log()
        finally:
            agent.cleanup()


if __name__ == "__main__":
    main([test_prometheus_scrape, test_slow_clients, test_listen_failure])
