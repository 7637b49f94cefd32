#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Names that are not UTF-8 (issue 31, findings 6 and 11). A cgroup named
with the bytes \\xff\\xfe (anyone with a delegated subtree can make one),
with a process of such a name in it, selected by a target: the control API
works as ever (sessions, --json sessions, status, stop ID, stop --all,
reports and their filter), /reports and /targets answer valid UTF-8 JSON,
the report files are valid UTF-8, /metrics passes promtool check metrics,
and a pull of that cgroup (its bytes %-encoded) is served. An agent
started with --node-name $'node-\\xff' gives a valid status, Node
property, /targets and cgprof_info. Each invalid byte comes out as U+FFFD
(docs/control.md, "Names that are not UTF-8")."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse

from cgproflib import CGPROFCTL, Agent, Cgroup, log, main, profile, skip_prereq, wait_for, workload

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
TEST_CGROUP = f"cgprof-names-test-{os.getpid()}"
# The bytes \xff\xfe, as Python's file system encoding carries them in a str.
RAW = "\udcff\udcfe"
VALID = "\ufffd\ufffd"  # as every output must show them
ALL_FORMATS = ["folded", "json", "pprof", "svg", "speedscope"]


def ctl(agent, *args, rc=0):
    """cgprofctl's stdout, which must be valid UTF-8 (decoded strictly)."""
    r = subprocess.run([CGPROFCTL, "--bus-socket", agent.bus, *args], capture_output=True, timeout=60)
    out, err = r.stdout.decode("utf-8"), r.stderr.decode("utf-8", "replace")
    assert r.returncode == rc, f"cgprofctl {args}: exit {r.returncode}, wanted {rc}\n{out}\n{err}"
    return out


def ctl_json(agent, *args):
    return json.loads(ctl(agent, "--json", *args).splitlines()[-1])


def curl_unix(sock, path):
    """(status, body bytes) of a GET on the agent's Unix socket listener."""
    r = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", sock,
                        f"http://localhost{path}"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    body, _, code = r.stdout.rpartition(b"\n")
    return int(code), body


def get_json(sock, path):
    status, body = curl_unix(sock, path)
    assert status == 200, (path, status, body[:2000])
    return json.loads(body.decode("utf-8"))  # strict: invalid UTF-8 raises


def check_metrics(sock):
    """/metrics: valid UTF-8 that promtool's lint accepts. Returns the text."""
    status, body = curl_unix(sock, "/metrics")
    assert status == 200, (status, body[:2000])
    text = body.decode("utf-8")
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, timeout=60)
    log("promtool check metrics:", r.returncode, r.stdout, r.stderr)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), (r.stdout, r.stderr)
    return text


def check_report_files(report_dir, cgroup):
    """Every file of a report directory that is text is valid UTF-8, and
    summary.json names the cgroup and the process as the API does."""
    for name in os.listdir(report_dir):
        if name.endswith(".gz"):
            continue
        with open(os.path.join(report_dir, name), "rb") as f:
            f.read().decode("utf-8")
    with open(os.path.join(report_dir, "summary.json"), "rb") as f:
        summary = json.loads(f.read().decode("utf-8"))
    assert summary["cgroup"] == cgroup, summary["cgroup"]
    assert any(p["comm"] == "probe-" + VALID for p in summary["processes"]), summary["processes"]
    return summary


def wait_session(agent, cgroup):
    return wait_for(lambda: next((s for s in ctl_json(agent, "sessions")
                                  if s["cgroup"] == cgroup and s["samples"] > 0), None),
                    what=f"a session of {cgroup} with samples")


def test_cgroup_not_utf8():
    if not os.access(PROMTOOL, os.X_OK):
        skip_prereq("no promtool (Debian's prometheus package)")
    tmp = tempfile.mkdtemp(prefix="cgprof-names-")
    sock = os.path.join(tmp, "http.sock")
    cfg = {
        "profiles": [profile(name="names", formats=ALL_FORMATS)],
        "defaultProfileRef": "names",
        "targets": [{"name": "probes", "profileRef": "names", "cgroupPatterns": [f"{TEST_CGROUP}/probe-*"]}],
        "http": {"listen": f"unix:{sock}", "pprof": True, "pullAnyCgroup": True},
    }
    agent = Agent(cfg)
    cg = Cgroup(TEST_CGROUP)
    procs = []
    try:
        agent.start()
        # Two cgroups named with bytes that are not UTF-8, each with a
        # process named so too: the target selects both.
        first, second = cg.child("probe-" + RAW), cg.child("probe-" + RAW + "-2")
        assert os.path.isdir(os.fsencode(first.path)) and os.fsencode(first.path).endswith(b"probe-\xff\xfe")
        procs += [workload(first, 120, name="probe-" + RAW), workload(second, 120, name="probe-" + RAW)]
        rel1, rel2 = f"{TEST_CGROUP}/probe-{VALID}", f"{TEST_CGROUP}/probe-{VALID}-2"
        s1, s2 = wait_session(agent, rel1), wait_session(agent, rel2)

        # The control API, in text and JSON.
        out = ctl(agent, "sessions")
        assert s1["id"] in out and s2["id"] in out and rel1 in out, out
        out = ctl(agent, "status")
        assert "Active sessions: 2" in out and rel1 in out, out
        st = ctl_json(agent, "status")
        assert {x["cgroup"] for x in st["sessions"]} == {rel1, rel2}, st["sessions"]

        # The D-Bus API as any client sees it.
        if shutil.which("busctl"):
            r = subprocess.run(["busctl", f"--address=unix:path={agent.bus}", "--json=short", "call",
                                "io.cgprof.Agent1", "/io/cgprof/Agent1", "io.cgprof.Agent1", "ListSessions"],
                               capture_output=True, timeout=30)
            assert r.returncode == 0, r
            listed = json.loads(r.stdout.decode("utf-8"))["data"][0]
            assert {x[7] for x in listed} == {rel1, rel2}, listed

        # stop ID, then stop --all: each writes its report.
        out = ctl(agent, "stop", s1["id"])
        assert re.search(rf"^Stopped session {s1['id']} after ", out, re.M), out
        report1 = re.search(r"^Report: (.+)$", out, re.M).group(1)
        check_report_files(report1, rel1)
        out = ctl(agent, "stop", "--all")
        assert "Stopped 1 session." in out and s2["id"] in out, out
        report2 = re.search(r"^Report: (\S+) \(\d+ samples\)$", out, re.M).group(1)
        check_report_files(report2, rel2)
        assert ctl_json(agent, "sessions") == []

        # The reports: the listing, its filter (by the name as shown), /reports.
        listed = {x["session"]: x for x in ctl_json(agent, "reports")}
        assert listed[s1["id"]]["cgroup"] == rel1 and listed[s2["id"]]["cgroup"] == rel2, listed
        assert rel1 in ctl(agent, "reports")
        assert [x["session"] for x in ctl_json(agent, "reports", "--filter", f"cgroup:{rel1}")] == [s1["id"]]
        answered = {x["session"]: x for x in get_json(sock, "/reports")}
        assert answered[s1["id"]]["cgroup"] == rel1 and answered[s2["id"]]["cgroup"] == rel2, answered
        status, body = curl_unix(sock, f"/reports/{s1['id']}/summary.json")
        assert status == 200 and json.loads(body.decode("utf-8"))["cgroup"] == rel1
        targets = get_json(sock, "/targets")
        assert targets["kubernetes"] is False, targets

        # A pull of the cgroup, its bytes as they are (%-encoded): served,
        # and its session listed like the others.
        quoted = urllib.parse.quote(os.fsencode(f"{TEST_CGROUP}/probe-{RAW}"))
        status, body = curl_unix(sock, f"/debug/pprof/profile?seconds=1&cgroup={quoted}")
        assert status == 200 and body[:2] == b"\x1f\x8b", (status, body[:200])

        text = check_metrics(sock)
        assert 'cgprof_samples_total{profile="names"}' in text, text

        for p in procs:
            p.kill()
            p.wait()
        assert agent.stop() == 0, agent.log()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        cg.remove()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def test_node_name_not_utf8():
    if not os.access(PROMTOOL, os.X_OK):
        skip_prereq("no promtool (Debian's prometheus package)")
    tmp = tempfile.mkdtemp(prefix="cgprof-names-")
    sock = os.path.join(tmp, "http.sock")
    agent = Agent({"http": {"listen": f"unix:{sock}", "pprof": True}}, extra_args=["--node-name", "node-\udcff"])
    try:
        agent.start()
        node = "node-\ufffd"
        assert f"Node: {node}" in ctl(agent, "status"), ctl(agent, "status")
        assert ctl_json(agent, "status")["node"] == node
        assert ctl_json(agent, "check")["node"] == node
        if shutil.which("busctl"):
            r = subprocess.run(["busctl", f"--address=unix:path={agent.bus}", "--json=short", "get-property",
                                "io.cgprof.Agent1", "/io/cgprof/Agent1", "io.cgprof.Agent1", "Node"],
                               capture_output=True, timeout=30)
            assert r.returncode == 0 and json.loads(r.stdout.decode("utf-8"))["data"] == node, r
        assert get_json(sock, "/targets")["node"] == node
        text = check_metrics(sock)
        info = next(line for line in text.splitlines() if line.startswith("cgprof_info{"))
        assert f'node="{node}"' in info, info
        assert agent.stop() == 0, agent.log()
    finally:
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main([test_cgroup_not_utf8, test_node_name_not_utf8])
