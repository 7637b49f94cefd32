#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""scripts/kubectl-cgprof against a stub kubectl: no cluster, no root. The
stub (first on PATH) records its argv, answers `get pod` / `get pods` from a
canned table, and plays the agent's container for `exec` (cgprofctl prints
its arguments and exits with a chosen status; test, tar and rm act on a fake
agent file system in a temporary directory). The tests check which kubectl
commands the plugin runs, in which order, with which arguments, and its
output and exit status."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("CGPROF_SOURCE_DIR", os.path.join(HERE, "..", ".."))
PLUGIN = os.path.join(SOURCE, "scripts", "kubectl-cgprof")

SELECTOR = "app.kubernetes.io/name=cgprof,app.kubernetes.io/component=agent"
REPORTS = "/var/lib/cgprof/reports"

STUB = r'''#!/usr/bin/env python3
import json, os, shutil, subprocess, sys

args = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
with open(os.environ["STUB_CANNED"]) as f:
    canned = json.load(f)
root = os.environ["STUB_AGENT_ROOT"]

while args and args[0].startswith(("--context=", "--kubeconfig=")):
    args = args[1:]

def opt(name):
    return args[args.index(name) + 1] if name in args else None

if args[:2] == ["get", "pod"]:
    ns, pod = opt("-n"), args[2] if args[2] != "-n" else args[4]
    node = canned["pods"].get(f"{ns}/{pod}")
    if node is None:
        print(f'Error from server (NotFound): pods "{pod}" not found', file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(node)  # jsonpath output has no newline
    sys.exit(0)

if args[:2] == ["get", "pods"]:
    ns = opt("-n")
    agents = canned["agents"].get(ns, {})
    fields = dict(kv.split("=", 1) for kv in (opt("--field-selector") or "").split(",") if kv)
    if opt("-o") == "name":
        for node, agent in agents.items():
            if fields.get("spec.nodeName") in (None, node):
                print(f"pod/{agent}")
    else:
        for node, agent in agents.items():
            print(f"{agent} {node}")
    sys.exit(0)

if args[0] == "exec":
    cmd = args[args.index("--") + 1:]
    if canned.get("exec_error"):
        print(canned["exec_error"], file=sys.stderr)
        sys.exit(1)
    def local(path):
        return os.path.join(root, path.lstrip("/"))
    if cmd[0] == "cgprofctl":
        if "--json" in cmd:
            print(json.dumps([{"agent": opt("-n") + "/" + args[3], "args": cmd[1:]}]))
        else:
            print("CGPROFCTL " + args[3] + " " + " ".join(cmd[1:]))
        sys.exit(canned.get("cgprofctl_rc", 0))
    if cmd[0] == "test" and cmd[1] == "-d":
        sys.exit(0 if os.path.isdir(local(cmd[2])) else 1)
    if cmd[0] == "tar":
        c = cmd.index("-C")
        sys.exit(subprocess.run(["tar", "-C", local(cmd[c + 1])] + cmd[c + 2:]).returncode)
    if cmd[0] == "rm" and cmd[1] == "-rf":
        shutil.rmtree(local(cmd[-1]), ignore_errors=True)
        sys.exit(0)
    print(f"stub: unexpected exec {cmd}", file=sys.stderr)
    sys.exit(99)

print(f"stub: unexpected kubectl {args}", file=sys.stderr)
sys.exit(99)
'''


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Stub:
    """A temporary directory with the stub kubectl, its log, the canned
    answers, and the fake file system of the agents."""

    def __init__(self, pods=None, agents=None, cgprofctl_rc=0):
        self.dir = tempfile.mkdtemp(prefix="cgprof-kubectl-")
        self.bin = os.path.join(self.dir, "bin")
        os.makedirs(self.bin)
        with open(os.path.join(self.bin, "kubectl"), "w") as f:
            f.write(STUB)
        os.chmod(os.path.join(self.bin, "kubectl"), 0o755)
        self.log = os.path.join(self.dir, "kubectl.log")
        self.root = os.path.join(self.dir, "agent-root")
        os.makedirs(self.root)
        self.canned = {
            "pods": pods if pods is not None else {"team-a/web-0": "node-a", "team-b/api-0": "node-b"},
            "agents": agents if agents is not None else {"cgprof": {"node-a": "cgprof-aaaaa",
                                                                    "node-b": "cgprof-bbbbb"}},
            "cgprofctl_rc": cgprofctl_rc,
        }
        self.write_canned()

    def write_canned(self):
        with open(os.path.join(self.dir, "canned.json"), "w") as f:
            json.dump(self.canned, f)

    def run(self, *args, env=None):
        open(self.log, "w").close()
        e = dict(os.environ, PATH=self.bin + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
                 STUB_LOG=self.log, STUB_CANNED=os.path.join(self.dir, "canned.json"),
                 STUB_AGENT_ROOT=self.root)
        e.pop("CGPROF_NAMESPACE", None)
        e.pop("CGPROF_REPORT_DIR", None)
        e.update(env or {})
        r = subprocess.run(["bash", PLUGIN, *args], capture_output=True, text=True, env=e, timeout=60)
        with open(self.log) as f:
            r.calls = [json.loads(line) for line in f]
        log(f"$ kubectl cgprof {' '.join(args)} -> {r.returncode}")
        for c in r.calls:
            log("    kubectl " + " ".join(c))
        if r.stderr:
            log("    stderr: " + r.stderr.strip().replace("\n", "\n            "))
        return r

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def get_pod(ns, pod):
    return ["get", "pod", "-n", ns, pod, "-o", "jsonpath={.spec.nodeName}"]


def get_agent(node, ns="cgprof"):
    return ["get", "pods", "-n", ns, "-l", SELECTOR, "--field-selector",
            f"spec.nodeName={node},status.phase=Running", "-o", "name"]


def exec_(agent, *cmd, ns="cgprof"):
    return ["exec", "-n", ns, agent, "-c", "cgprofd", "--", *cmd]


def expect(r, rc, calls, stdout=None, stderr=None):
    assert r.returncode == rc, f"exit {r.returncode}, wanted {rc}: {r.stderr}"
    assert r.calls == calls, "kubectl calls:\n" + "\n".join(map(str, r.calls)) + "\nwanted:\n" + \
        "\n".join(map(str, calls))
    if stdout is not None:
        assert stdout in r.stdout, f"{stdout!r} not in stdout {r.stdout!r}"
    if stderr is not None:
        assert stderr in r.stderr, f"{stderr!r} not in stderr {r.stderr!r}"


# --------------------------------------------------------------------------


def test_check():
    s = Stub()
    try:
        r = s.run("check", "team-a/web-0")
        expect(r, 0, [get_pod("team-a", "web-0"), get_agent("node-a"),
                      exec_("cgprof-aaaaa", "cgprofctl", "check", "team-a/web-0")],
               stdout="CGPROFCTL cgprof-aaaaa check team-a/web-0")
        # check --node: the node's machineConfig.
        r = s.run("check", "--node", "node-b")
        expect(r, 0, [get_agent("node-b"), exec_("cgprof-bbbbb", "cgprofctl", "check")],
               stdout="CGPROFCTL cgprof-bbbbb check")
        # A container, --json (before or after the command), the other node.
        r = s.run("check", "team-b/api-0/main", "--json")
        expect(r, 0, [get_pod("team-b", "api-0"), get_agent("node-b"),
                      exec_("cgprof-bbbbb", "cgprofctl", "--json", "check", "team-b/api-0/main")])
        assert json.loads(r.stdout)[0]["args"] == ["--json", "check", "team-b/api-0/main"]
        # cgprofctl's exit status is the plugin's.
        for rc in (1, 3):
            s.canned["cgprofctl_rc"] = rc
            s.write_canned()
            assert s.run("--json", "check", "team-a/web-0").returncode == rc
    finally:
        s.cleanup()


def test_start():
    s = Stub()
    try:
        r = s.run("start", "team-a/web-0", "--container", "main", "--profile", "fast", "--duration", "10s")
        expect(r, 0, [get_pod("team-a", "web-0"), get_agent("node-a"),
                      exec_("cgprof-aaaaa", "cgprofctl", "start", "--pod", "team-a/web-0", "--container",
                            "main", "--profile", "fast", "--duration", "10s")],
               stdout="CGPROFCTL cgprof-aaaaa start --pod team-a/web-0 --container main")
        r = s.run("start", "team-b/api-0")
        expect(r, 0, [get_pod("team-b", "api-0"), get_agent("node-b"),
                      exec_("cgprof-bbbbb", "cgprofctl", "start", "--pod", "team-b/api-0")])
        # Usage errors never reach kubectl.
        for args in (("start",), ("start", "team-a"), ("start", "team-a/web-0/main"),
                     ("start", "team-a/web-0", "--bogus"), ("start", "team-a/web-0", "--duration"),
                     ("start", "a/b", "c/d")):
            r = s.run(*args)
            expect(r, 2, [], stderr="kubectl cgprof:")
    finally:
        s.cleanup()


def test_stop():
    s = Stub()
    try:
        sid = "0123456789abcdef0123456789abcdef"
        r = s.run("stop", sid, "--node", "node-b")
        expect(r, 0, [get_agent("node-b"), exec_("cgprof-bbbbb", "cgprofctl", "stop", sid)],
               stdout=f"CGPROFCTL cgprof-bbbbb stop {sid}")
        r = s.run("stop", "--all", "--pod", "team-a/web-0")
        expect(r, 0, [get_pod("team-a", "web-0"), get_agent("node-a"),
                      exec_("cgprof-aaaaa", "cgprofctl", "stop", "--all")])
        # An unknown session: cgprofctl says 3, so does the plugin.
        s.canned["cgprofctl_rc"] = 3
        s.write_canned()
        expect(s.run("stop", sid, "--node", "node-a"), 3,
               [get_agent("node-a"), exec_("cgprof-aaaaa", "cgprofctl", "stop", sid)])
        # Where is the agent? And ID or --all, not both, not neither.
        expect(s.run("stop", sid), 2, [], stderr="--node NODE or --pod")
        expect(s.run("stop", "--node", "node-a"), 2, [], stderr="session ID or --all")
        expect(s.run("stop", sid, "--all", "--node", "node-a"), 2, [])
        expect(s.run("stop", sid, "--node", "node-a", "--pod", "team-a/web-0"), 2, [])
    finally:
        s.cleanup()


def test_sessions():
    s = Stub()
    try:
        r = s.run("sessions", "--node", "node-a")
        expect(r, 0, [get_agent("node-a"), exec_("cgprof-aaaaa", "cgprofctl", "sessions")],
               stdout="CGPROFCTL cgprof-aaaaa sessions")
        r = s.run("sessions", "--pod", "team-b/api-0")
        expect(r, 0, [get_pod("team-b", "api-0"), get_agent("node-b"),
                      exec_("cgprof-bbbbb", "cgprofctl", "sessions")])
        # Every node's agent, each under a heading.
        list_all = ["get", "pods", "-n", "cgprof", "-l", SELECTOR, "--field-selector", "status.phase=Running",
                    "-o", 'jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{"\\n"}{end}']
        r = s.run("sessions")
        expect(r, 0, [list_all, exec_("cgprof-aaaaa", "cgprofctl", "sessions"),
                      exec_("cgprof-bbbbb", "cgprofctl", "sessions")])
        assert "Node node-a (cgprof-aaaaa):\nCGPROFCTL cgprof-aaaaa sessions" in r.stdout, r.stdout
        assert "Node node-b (cgprof-bbbbb):\nCGPROFCTL cgprof-bbbbb sessions" in r.stdout, r.stdout
        # --json: one object keyed by node name.
        r = s.run("--json", "sessions")
        expect(r, 0, [list_all, exec_("cgprof-aaaaa", "cgprofctl", "--json", "sessions"),
                      exec_("cgprof-bbbbb", "cgprofctl", "--json", "sessions")])
        j = json.loads(r.stdout)
        assert sorted(j) == ["node-a", "node-b"] and j["node-b"][0]["agent"] == "cgprof/cgprof-bbbbb", j
        expect(s.run("sessions", "extra"), 2, [])
    finally:
        s.cleanup()


def test_download_and_remove_source():
    s = Stub()
    try:
        def report(pod, name):
            d = os.path.join(s.root, REPORTS.lstrip("/"), "team-a", pod, "main", name)
            os.makedirs(d)
            with open(os.path.join(d, "summary.json"), "w") as f:
                json.dump({"pod": pod}, f)
            return d

        mine = [report("web-0", "1795290117243_aaaaaaaa"), report("web-0", "1795290127243_bbbbbbbb")]
        other = report("web-1", "1795290117243_cccccccc")
        s.canned["pods"]["team-a/web-1"] = "node-a"
        s.write_canned()
        dest = os.path.join(s.dir, "dest")
        src = f"{REPORTS}/team-a/web-0"

        r = s.run("download", "team-a/web-0", dest)
        expect(r, 0, [get_pod("team-a", "web-0"), get_agent("node-a"),
                      exec_("cgprof-aaaaa", "test", "-d", src),
                      exec_("cgprof-aaaaa", "tar", "-C", REPORTS, "-cf", "-", "team-a/web-0")],
               stdout=f"to {dest}/team-a/web-0")
        for d in mine:
            rel = os.path.relpath(d, os.path.join(s.root, REPORTS.lstrip("/")))
            with open(os.path.join(dest, rel, "summary.json")) as f:
                assert json.load(f) == {"pod": "web-0"}
        assert not os.path.exists(os.path.join(dest, "team-a", "web-1")), "another pod's reports came along"
        assert all(os.path.isdir(d) for d in mine), "download without --remove-source removed the source"

        # --remove-source: copied, then removed on the node; other pods' stay.
        dest2 = os.path.join(s.dir, "dest2")
        r = s.run("download", "team-a/web-0", dest2, "--remove-source")
        expect(r, 0, [get_pod("team-a", "web-0"), get_agent("node-a"),
                      exec_("cgprof-aaaaa", "test", "-d", src),
                      exec_("cgprof-aaaaa", "tar", "-C", REPORTS, "-cf", "-", "team-a/web-0"),
                      exec_("cgprof-aaaaa", "rm", "-rf", "--", src)],
               stdout=f"Removed {src} on node node-a")
        assert os.path.isdir(os.path.join(dest2, "team-a", "web-0", "main", "1795290127243_bbbbbbbb"))
        assert not os.path.exists(os.path.join(s.root, src.lstrip("/"))), "source not removed"
        assert os.path.isdir(other), "another pod's reports were removed"

        # Nothing left: not found, nothing copied or removed.
        r = s.run("download", "team-a/web-0", dest, "--remove-source")
        expect(r, 3, [get_pod("team-a", "web-0"), get_agent("node-a"),
                      exec_("cgprof-aaaaa", "test", "-d", src)], stderr="no reports of team-a/web-0")

        # A pod that is gone: --node says where its reports are; another
        # report directory and agent namespace.
        os.makedirs(os.path.join(s.root, "data/reports/team-z/gone-0/main/1_x"))
        s.canned["agents"]["tools"] = {"node-c": "cgprof-ccccc"}
        s.write_canned()
        dest3 = os.path.join(s.dir, "dest3")
        r = s.run("--agent-namespace", "tools", "--report-dir", "/data/reports", "download", "team-z/gone-0",
                  dest3, "--node", "node-c")
        expect(r, 0, [get_agent("node-c", ns="tools"),
                      exec_("cgprof-ccccc", "test", "-d", "/data/reports/team-z/gone-0", ns="tools"),
                      exec_("cgprof-ccccc", "tar", "-C", "/data/reports", "-cf", "-", "team-z/gone-0",
                            ns="tools")])
        assert os.path.isdir(os.path.join(dest3, "team-z/gone-0/main/1_x"))

        # kubectl exec itself fails: a failure that says why, not "not found".
        s.canned["exec_error"] = "error: unable to upgrade connection: container not found"
        s.write_canned()
        r = s.run("download", "team-a/web-1", dest)
        expect(r, 1, [get_pod("team-a", "web-1"), get_agent("node-a"),
                      exec_("cgprof-aaaaa", "test", "-d", f"{REPORTS}/team-a/web-1")],
               stderr="unable to upgrade connection")
        del s.canned["exec_error"]
        s.write_canned()

        # Names that could climb out of the report directory are refused.
        for ref in ("../etc", "team-a/..", "team-a/web-0/x", "Team-A/web-0", "team-a/.."):
            expect(s.run("download", ref, dest), 2, [])
        expect(s.run("download", "team-a/web-0"), 2, [], stderr="destination")
    finally:
        s.cleanup()


def test_errors():
    s = Stub()
    try:
        # No such pod: a clear message, exit 3, and nothing run on an agent.
        for args in (("check", "team-a/missing"), ("start", "team-a/missing"),
                     ("download", "team-a/missing", "/nonexistent-dest")):
            r = s.run(*args)
            expect(r, 3, [get_pod("team-a", "missing")], stderr="pod team-a/missing not found")
        # No agent on the node.
        s.canned["pods"]["team-c/db-0"] = "node-x"
        s.write_canned()
        r = s.run("check", "team-c/db-0")
        expect(r, 1, [get_pod("team-c", "db-0"), get_agent("node-x")],
               stderr="no cgprof agent runs on node node-x")
        # A pod not scheduled yet.
        s.canned["pods"]["team-c/pending-0"] = ""
        s.write_canned()
        expect(s.run("check", "team-c/pending-0"), 1, [get_pod("team-c", "pending-0")],
               stderr="not scheduled")
        # Usage.
        for args in ((), ("bogus",), ("check",), ("check", "nopod"), ("check", "a/b", "c"),
                     ("--bogus", "check", "a/b"), ("--agent-namespace",), ("--agent-namespace", "../x", "sessions")):
            r = s.run(*args)
            expect(r, 2, [], stderr="kubectl cgprof:")
        r = s.run("--help")
        expect(r, 0, [], stdout="kubectl cgprof [OPTIONS...] COMMAND")
        assert "download NS/POD DEST" in r.stdout
    finally:
        s.cleanup()


def test_agent_namespace_and_kubectl_flags():
    s = Stub(agents={"monitoring": {"node-a": "cgprof-mmmmm"}})
    try:
        r = s.run("check", "team-a/web-0", env={"CGPROF_NAMESPACE": "monitoring"})
        expect(r, 0, [get_pod("team-a", "web-0"), get_agent("node-a", ns="monitoring"),
                      exec_("cgprof-mmmmm", "cgprofctl", "check", "team-a/web-0", ns="monitoring")])
        # The option wins over the environment; --context/--kubeconfig reach every call.
        r = s.run("--agent-namespace", "monitoring", "--context", "prod", "--kubeconfig=/k", "check",
                  "team-a/web-0", env={"CGPROF_NAMESPACE": "elsewhere"})
        flags = ["--context=prod", "--kubeconfig=/k"]
        expect(r, 0, [flags + get_pod("team-a", "web-0"), flags + get_agent("node-a", ns="monitoring"),
                      flags + exec_("cgprof-mmmmm", "cgprofctl", "check", "team-a/web-0", ns="monitoring")])
    finally:
        s.cleanup()


def main():
    if shutil.which("tar") is None:
        print("SKIP: no tar", flush=True)
        sys.exit(77)
    tests = [test_check, test_start, test_stop, test_sessions, test_download_and_remove_source, test_errors,
             test_agent_namespace_and_kubectl_flags]
    failed = 0
    for t in tests:
        log(f"=== {t.__name__}")
        try:
            t()
            log(f"--- {t.__name__}: ok")
        except Exception:
            import traceback
            traceback.print_exc()
            log(f"--- {t.__name__}: FAILED")
            failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
