#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cgprofd on a Kubernetes node, against a real kube-apiserver + etcd: the
test plays kubelet (binds pods to the node, creates their containers'
cgroups with real processes, patches their status with container IDs) and
checks what the agent does: labelled namespaces and pods are profiled
(systemd and cgroupfs cgroup drivers), pods already running at start too,
unlabelling ends the session with a report, selectors/owner/name patterns
pick exactly the right pods, and API server restarts, stalls, a real 410
Gone and a rotated token leave the agent with the right sessions and no
duplicates."""

import os
import signal
import time

import cgproflib
from cgproflib import Agent, assert_shares, folded, log, main, profile, wait_for, workload
from kubelib import KubeCgroups, KubeCluster, new_container_id

NODE = "node-a"
OTHER_NODE = "node-b"

kc = None


def agent_for(config, **kw):
    config.setdefault("profiles", [profile(name="k8s")])
    config.setdefault("defaultProfileRef", "k8s")
    args = ["--kubeconfig", kc.kubeconfig, "--node-name", NODE, "--kube-backoff-max", "1000",
            "--kube-watch-idle", "5"]
    a = Agent(config, extra_args=args, **kw)
    a.argv = (lambda orig: (lambda: [x for x in orig() if x != "--no-kubernetes"]))(a.argv)
    return a


def run_pod(cgs, ns, name, labels=None, owner=None, qos="burstable", seconds=60, status=True, node=NODE,
            generate_name=None):
    """A pod as kubelet would run it: bound to the node, its container's cgroup
    with the workload in it, then (optionally) its status with the ID."""
    pod = kc.create_pod(ns, name, node, labels=labels, owner=owner, qos=qos, generate_name=generate_name)
    name = pod["metadata"]["name"]
    cid = new_container_id()
    cg = cgs.container_for(pod, cid)
    proc = workload(cg, seconds, name=name[:15])
    if status:
        kc.set_pod_running(ns, name, {"main": cid})
    return {"pod": pod, "name": name, "cid": cid, "cg": cg, "proc": proc}


def sessions_of(agent, ns, name):
    return [s for s in agent.status()["sessions"] if s.get("namespace") == ns and s.get("pod") == name]


def wait_session(agent, ns, name, what=None):
    return wait_for(lambda: (lambda l: l[0] if l else None)(sessions_of(agent, ns, name)), timeout=60,
                    what=what or f"a session for {ns}/{name}")


def stop_pod(cgs, p):
    p["proc"].kill()
    p["proc"].wait()


def report_of(agent, ns, name):
    return agent.wait_summary(lambda s: s.get("namespace") == ns and s.get("pod") == name,
                              what=f"the report of {ns}/{name}")


def test_namespace_label_systemd_driver_and_unlabel():
    with KubeCgroups(driver="systemd") as cgs:
        kc.create_namespace("team-a")
        agent = agent_for({"enableDefault": True})
        try:
            agent.start()
            p = run_pod(cgs, "team-a", "trainer-0")
            time.sleep(2)
            assert sessions_of(agent, "team-a", "trainer-0") == [], "not labelled yet"
            # Labelling the namespace is all a user does.
            kc.label("namespace", "team-a", None, "cgprof.io/profile=enabled")
            s = wait_session(agent, "team-a", "trainer-0")
            assert s["container"] == "main" and s["containerId"] == p["cid"], s
            time.sleep(3)
            # Removing the label ends the session, which writes its report.
            kc.label("namespace", "team-a", None, "cgprof.io/profile-")
            r = report_of(agent, "team-a", "trainer-0")
            assert r["endReason"] == "untargeted", r["endReason"]
            assert r["container"] == "main" and r["containerId"] == p["cid"] and r["node"] == NODE
            rel = os.path.relpath(r["_dir"], agent.report_dir).split("/")
            assert rel[:3] == ["team-a", "trainer-0", "main"], rel
            assert_shares(r)
            assert sessions_of(agent, "team-a", "trainer-0") == []
            stop_pod(cgs, p)
            assert agent.stop() == 0
        finally:
            agent.cleanup()


def test_cgroupfs_driver_pod_label_and_running_at_start():
    with KubeCgroups(driver="cgroupfs") as cgs:
        kc.create_namespace("team-b")
        # Already running, labelled itself, before the agent starts.
        p = run_pod(cgs, "team-b", "web-0", labels={"cgprof.io/profile": "enabled"}, qos="besteffort")
        q = run_pod(cgs, "team-b", "web-1", qos="guaranteed")  # not labelled
        agent = agent_for({"enableDefault": True})
        try:
            agent.start()
            s = wait_session(agent, "team-b", "web-0")
            assert s["cgroup"] == p["cg"].rel, s
            time.sleep(3)
            assert sessions_of(agent, "team-b", "web-1") == []
            # The container exits: its session ends with a report.
            kc.set_pod_finished("team-b", "web-0", {"main": p["cid"]})
            r = report_of(agent, "team-b", "web-0")
            assert r["endReason"] in ("container-exited", "cgroup-removed"), r["endReason"]
            assert r["samples"]["total"] > 0
            stop_pod(cgs, p)
            stop_pod(cgs, q)
            assert agent.stop() == 0
        finally:
            agent.cleanup()


def test_selectors_owner_and_name_patterns():
    targets = [
        {"name": "by-selector", "namespaceSelector": {"matchLabels": {"team": "ml"}},
         "podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["trainer"]},
                                              {"key": "tier", "operator": "NotIn", "values": ["canary"]}]}},
        {"name": "by-owner", "owner": {"kind": "DaemonSet", "name": "collector"}},
        {"name": "by-name", "podNamePatterns": ["^batch-"]},
    ]
    with KubeCgroups(driver="systemd") as cgs:
        kc.create_namespace("ml", labels={"team": "ml"})
        kc.create_namespace("web", labels={"team": "web"})
        want = {
            ("ml", "trainer-0"): run_pod(cgs, "ml", "trainer-0", labels={"app": "trainer"}),
            ("web", "collector-x"): run_pod(cgs, "web", "collector-x", owner=("DaemonSet", "collector")),
            ("web", "batch-7"): run_pod(cgs, "web", "batch-7"),
        }
        gen = run_pod(cgs, "web", None, generate_name="batch-gen-")  # name pattern via generateName
        want[("web", gen["name"])] = gen
        not_want = {
            ("ml", "trainer-canary"): run_pod(cgs, "ml", "trainer-canary", labels={"app": "trainer", "tier": "canary"}),
            ("web", "trainer-1"): run_pod(cgs, "web", "trainer-1", labels={"app": "trainer"}),
            ("ml", "other-0"): run_pod(cgs, "ml", "other-0", labels={"app": "other"}),
            ("web", "collector-y"): run_pod(cgs, "web", "collector-y", owner=("DaemonSet", "other")),
            ("web", "xbatch-1"): run_pod(cgs, "web", "xbatch-1"),
        }
        elsewhere = run_pod(cgs, "ml", "trainer-far", labels={"app": "trainer"}, node=OTHER_NODE)
        agent = agent_for({"targets": targets})
        try:
            agent.start()
            for (ns, name) in want:
                wait_session(agent, ns, name)
            time.sleep(2)
            got = {(s["namespace"], s["pod"]) for s in agent.status()["sessions"]}
            assert got == set(want), f"sessions {sorted(got)} != {sorted(want)}"
            by_target = {(s["namespace"], s["pod"]): s["target"] for s in agent.status()["sessions"]}
            assert by_target[("ml", "trainer-0")] == "by-selector"
            assert by_target[("web", "collector-x")] == "by-owner"
            assert by_target[("web", "batch-7")] == "by-name"
            for p in list(want.values()) + list(not_want.values()) + [elsewhere]:
                stop_pod(cgs, p)
            assert agent.stop() == 0
        finally:
            agent.cleanup()


def test_early_start_before_status_and_sandbox():
    """The pod is known as a target before its containers start: sampling
    begins from the cgroup alone (inotify), before the status names the
    container; the status then confirms it, and the sandbox (pause)
    container's cgroup of the same pod is discarded, not reported."""
    with KubeCgroups(driver="systemd") as cgs:
        kc.create_namespace("early", labels={"cgprof.io/profile": "enabled"})
        agent = agent_for({"enableDefault": True})
        try:
            agent.start()
            pod = kc.create_pod("early", "svc-0", NODE, qos="burstable")
            wait_for(lambda: agent.status()["kubernetes"]["pods"] >= 1, what="the pod to be listed")
            cid, sandbox = new_container_id(), new_container_id()
            sb = cgs.container_for(pod, sandbox)
            sb_proc = cgproflib.run_in_cgroup(sb, ["sleep", "600"])
            cg = cgs.container_for(pod, cid)
            proc = workload(cg, 60, name="svc")
            # Sampling starts before any status update: two provisional sessions.
            wait_for(lambda: len(sessions_of(agent, "early", "svc-0")) == 2, what="provisional sessions")
            s = {x["containerId"]: x for x in sessions_of(agent, "early", "svc-0")}
            assert "container" not in s[cid] and "container" not in s[sandbox], s
            wait_for(lambda: (lambda l: l and l[0]["samples"] > 0)(
                [x for x in sessions_of(agent, "early", "svc-0") if x["containerId"] == cid]),
                what="samples before the status")
            # The status arrives: the container is confirmed, the sandbox dropped.
            kc.set_pod_running("early", "svc-0", {"main": cid})
            wait_for(lambda: [x.get("container") for x in sessions_of(agent, "early", "svc-0")] == ["main"],
                     what="the confirmed session only")
            kc.delete_pod("early", "svc-0")
            r = report_of(agent, "early", "svc-0")
            assert r["endReason"] == "pod-deleted" and r["container"] == "main", r
            assert r["containerId"] == cid
            assert_shares(r)
            time.sleep(1)
            assert [x["containerId"] for x in agent.summaries()] == [cid], "the sandbox wrote no report"
            for p in (proc, sb_proc):
                p.kill()
                p.wait()
            assert agent.stop() == 0
        finally:
            agent.cleanup()


def count_sessions(agent, ns, name):
    return len(sessions_of(agent, ns, name))


def test_apiserver_restart_stall_410_and_token_rotation():
    with KubeCgroups(driver="systemd") as cgs:
        kc.create_namespace("faults", labels={"cgprof.io/profile": "enabled"})
        # The agent starts with a token the server refuses: 401 until the file is rotated.
        kc.rotate_token("not-a-valid-token")
        agent = agent_for({"enableDefault": True})
        try:
            a = run_pod(cgs, "faults", "a-0")
            agent.start()
            time.sleep(3)
            assert count_sessions(agent, "faults", "a-0") == 0, "401: nothing can be listed"
            kc.rotate_token(kc.token2)  # a valid token: the file is re-read
            sid = wait_session(agent, "faults", "a-0", "a session after the token rotation")["id"]

            # API server restart: the watch reconnects, nothing duplicated.
            kc.restart_apiserver()
            b = run_pod(cgs, "faults", "b-0")
            wait_session(agent, "faults", "b-0", "a session after the restart")
            assert [s["id"] for s in sessions_of(agent, "faults", "a-0")] == [sid]

            # Stall (SIGSTOP) longer than the watch's idle timeout.
            kc.pause_apiserver()
            time.sleep(8)
            kc.resume_apiserver()
            c = run_pod(cgs, "faults", "c-0")
            wait_session(agent, "faults", "c-0", "a session after the stall")
            st = agent.status()["kubernetes"]["podWatch"]
            assert st["reconnects"] >= 1, st

            # A real 410 Gone: the API server is down while etcd moves on and
            # is compacted; the agent's watch comes back with an old
            # resourceVersion, gets 410, relists and reconciles.
            relists = st["relists"]
            kc.stop_apiserver()
            kc.etcd_bump(20)
            kc.compact_etcd()
            kc.start_apiserver()
            kc.delete_pod("faults", "b-0")  # must end b-0's session after the relist
            d = run_pod(cgs, "faults", "d-0")
            wait_session(agent, "faults", "d-0", "a session after the 410")
            wait_for(lambda: agent.status()["kubernetes"]["podWatch"]["relists"] > relists, timeout=60,
                     what="a relist after 410 Gone")
            rb = report_of(agent, "faults", "b-0")
            assert rb["endReason"] == "pod-deleted", rb["endReason"]
            # No duplicates, the right sessions.
            for name, n in (("a-0", 1), ("b-0", 0), ("c-0", 1), ("d-0", 1)):
                assert count_sessions(agent, "faults", name) == n, (name, agent.status()["sessions"])
            assert [s["id"] for s in sessions_of(agent, "faults", "a-0")] == [sid]
            for p in (a, b, c, d):
                stop_pod(cgs, p)
            assert agent.stop() == 0
            # Every session wrote exactly one report.
            reports = [(s["namespace"], s["pod"]) for s in agent.summaries()]
            assert sorted(reports) == sorted(set(reports)), reports
        finally:
            agent.cleanup()
            kc.rotate_token(kc.token)


if __name__ == "__main__":
    with KubeCluster() as cluster:
        kc = cluster
        main([test_namespace_label_systemd_driver_and_unlabel, test_early_start_before_status_and_sandbox,
              test_cgroupfs_driver_pod_label_and_running_at_start,
              test_selectors_owner_and_name_patterns, test_apiserver_restart_stall_410_and_token_rotation])
