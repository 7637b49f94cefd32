#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Per-namespace ProfileConfig objects, against a real kube-apiserver + etcd
with the CRD from manifests/: a ProfileConfig that targets everything
profiles only its own namespace's pods, and its reports stay below its
namespace's directory whatever its output says; a cluster target switched
off in one namespace keeps working in the others; an edit takes effect
without restarting the agent (sessions of pods no longer selected end with
their reports, newly selected pods start); deleting the object ends its
sessions with reports; two enabled targets with one name in one namespace
are reported naming both objects while everything else keeps working; and
an object that sets machineConfig or reportDir is refused: by the server's
schema, and by the agent too when a looser (older) CRD lets it through."""

import json
import os
import subprocess
import time

import yaml

import cgproflib
from cgproflib import Agent, log, main, profile, skip, wait_for, workload
from kubelib import SOURCE_DIR, KubeCgroups, KubeCluster, new_container_id

NODE = "node-a"
kc = None


def crd_from_manifests():
    """The ProfileConfig CRD exactly as `kubectl kustomize manifests/` renders it;
    with a kubectl too old for manifests/ (Debian's v1.20), its file as it is
    (kustomize only adds a label to it)."""
    why = cgproflib.kustomize_problem()
    if why:
        log(f"{why}: the CRD is read from manifests/base/crd-profileconfig.yaml")
        with open(os.path.join(SOURCE_DIR, "manifests", "base", "crd-profileconfig.yaml")) as f:
            text = f.read()
    else:
        text = subprocess.run(["kubectl", "kustomize", os.path.join(SOURCE_DIR, "manifests")], capture_output=True,
                              text=True, check=True).stdout
    for doc in yaml.safe_load_all(text):
        if doc.get("kind") == "CustomResourceDefinition" and doc["metadata"]["name"] == "profileconfigs.cgprof.io":
            return doc
    raise AssertionError("manifests/ has no CustomResourceDefinition profileconfigs.cgprof.io")


def install_crd(crd):
    kc.kubectl("apply", "-f", "-", input=json.dumps(crd))
    wait_for(lambda: any(c["type"] == "Established" and c["status"] == "True"
                         for c in kc.get("crd", "profileconfigs.cgprof.io").get("status", {}).get("conditions", [])),
             timeout=60, what="the ProfileConfig CRD to be Established")
    # The API is served once discovery has it.
    wait_for(lambda: kc.kubectl("get", "profileconfigs", "-A", check=False).returncode == 0, timeout=60,
             what="profileconfigs to be served")


def profile_config(ns, name, spec):
    return {"apiVersion": "cgprof.io/v1", "kind": "ProfileConfig", "metadata": {"namespace": ns, "name": name},
            "spec": spec}


def apply_pc(ns, name, spec, check=True):
    return kc.kubectl("apply", "-f", "-", input=json.dumps(profile_config(ns, name, spec)), check=check)


def delete_pc(ns, name):
    kc.kubectl("delete", "profileconfig", "-n", ns, name)


def agent_for(config):
    config.setdefault("profiles", [profile(name="cluster")])
    config.setdefault("defaultProfileRef", "cluster")
    args = ["--kubeconfig", kc.kubeconfig, "--node-name", NODE, "--kube-backoff-max", "1000",
            "--kube-watch-idle", "5"]
    a = Agent(config, extra_args=args)
    a.argv = (lambda orig: (lambda: [x for x in orig() if x != "--no-kubernetes"]))(a.argv)
    return a


def run_pod(cgs, ns, name, labels=None, seconds=90):
    pod = kc.create_pod(ns, name, NODE, labels=labels, qos="burstable")
    cid = new_container_id()
    cg = cgs.container_for(pod, cid)
    proc = workload(cg, seconds, name=name[:15])
    kc.set_pod_running(ns, name, {"main": cid})
    return {"name": name, "ns": ns, "cid": cid, "cg": cg, "proc": proc}


def stop_pods(*pods):
    for p in pods:
        p["proc"].kill()
        p["proc"].wait()


def sessions(agent):
    return {(s["namespace"], s["pod"]): s for s in agent.status()["sessions"] if s.get("pod")}


def wait_sessions(agent, want, what):
    """Waits until the set of profiled (namespace, pod) is exactly `want`, and stays so for a moment."""
    def exact():
        return set(sessions(agent)) == set(want)
    wait_for(exact, timeout=60, what=what)
    time.sleep(2)
    got = sessions(agent)
    assert set(got) == set(want), f"{what}: sessions {sorted(got)} != {sorted(want)}"
    return got


def report_of(agent, ns, name, pred=lambda s: True):
    return agent.wait_summary(lambda s: s.get("namespace") == ns and s.get("pod") == name and pred(s),
                              what=f"the report of {ns}/{name}")


def pc_status(agent, ns, name):
    for p in agent.status()["kubernetes"]["profileConfigs"]:
        if p["namespace"] == ns and p["name"] == name:
            return p
    return None


def under(path, directory):
    return os.path.commonpath([os.path.realpath(path), os.path.realpath(directory)]) == os.path.realpath(directory)


def test_isolation_output_edit_delete():
    """A ProfileConfig in tenant-a that targets every pod profiles tenant-a's
    pods only, writes below reportDir/tenant-a/ even when its output names
    another namespace, follows edits live, and its deletion ends its sessions
    with reports."""
    with KubeCgroups(driver="systemd") as cgs:
        kc.create_namespace("tenant-a")
        kc.create_namespace("tenant-b")
        a0 = run_pod(cgs, "tenant-a", "app-0")
        a1 = run_pod(cgs, "tenant-a", "app-1")
        b0 = run_pod(cgs, "tenant-b", "app-0")
        agent = agent_for({"targets": []})
        try:
            agent.start()
            pid = agent.proc.pid
            wait_for(lambda: agent.status()["kubernetes"]["profileConfigWatch"]["synced"], timeout=60,
                     what="the ProfileConfig watch to sync")
            assert sessions(agent) == {}
            # Everything, from tenant-a: and an output that tries to write into tenant-b's directory.
            apply_pc("tenant-a", "everything", {
                "profiles": [{"name": "tenant", "frequency": 199, "duration": "0",
                              "output": "tenant-b/{POD}/{TIMESTAMP}_{UID}", "formats": ["folded", "json"]}],
                "targets": [{"name": "all-pods", "profileRef": "tenant", "podNamePatterns": [".*"]}],
            })
            got = wait_sessions(agent, {("tenant-a", "app-0"), ("tenant-a", "app-1")},
                                "tenant-a's pods only")
            assert got[("tenant-a", "app-0")]["target"] == "all-pods"
            assert got[("tenant-a", "app-0")]["profileConfig"] == "everything"
            assert got[("tenant-a", "app-0")]["profile"] == "tenant"
            st = pc_status(agent, "tenant-a", "everything")
            assert st and st["state"] == "applied", st

            # An edit: only app-1 now. app-0's session ends with its report.
            apply_pc("tenant-a", "everything", {
                "profiles": [{"name": "tenant", "frequency": 199, "duration": "0",
                              "output": "tenant-b/{POD}/{TIMESTAMP}_{UID}", "formats": ["folded", "json"]}],
                "targets": [{"name": "all-pods", "profileRef": "tenant", "podNamePatterns": ["^app-1$"]}],
            })
            r0 = report_of(agent, "tenant-a", "app-0")
            assert r0["endReason"] == "untargeted", r0["endReason"]
            assert r0["profileConfig"] == "everything" and r0["frequency"] == 199, r0
            assert r0["samples"]["total"] > 0, r0["samples"]
            # Below the namespace's directory, whatever the output said.
            rel = os.path.relpath(r0["_dir"], agent.report_dir).split("/")
            assert rel[:3] == ["tenant-a", "tenant-b", "app-0"], rel
            assert under(r0["_dir"], os.path.join(agent.report_dir, "tenant-a"))
            wait_sessions(agent, {("tenant-a", "app-1")}, "only app-1 after the edit")
            assert agent.proc.pid == pid and agent.proc.poll() is None, "the agent restarted"

            # Deleting the object ends its sessions, with reports.
            delete_pc("tenant-a", "everything")
            r1 = report_of(agent, "tenant-a", "app-1")
            assert r1["endReason"] == "untargeted", r1["endReason"]
            assert under(r1["_dir"], os.path.join(agent.report_dir, "tenant-a"))
            wait_sessions(agent, set(), "no sessions after the delete")
            assert pc_status(agent, "tenant-a", "everything") is None
            # Nothing was ever written for tenant-b.
            assert not os.path.exists(os.path.join(agent.report_dir, "tenant-b"))
            log("journal entries:", [l for l in agent.log().splitlines() if "ProfileConfig tenant-a/everything" in l])
            assert "ProfileConfig tenant-a/everything added" in agent.log()
            assert "ProfileConfig tenant-a/everything changed" in agent.log()
            assert "ProfileConfig tenant-a/everything removed" in agent.log()
            stop_pods(a0, a1, b0)
            assert agent.stop() == 0
        finally:
            agent.cleanup()


def test_disable_cluster_target_and_conflicts():
    """The cluster target "web" is switched off in tenant-c only; two enabled
    targets named "dup" in tenant-c are reported naming both objects, the
    older one applies, and the newer object's other target still works."""
    with KubeCgroups(driver="systemd") as cgs:
        kc.create_namespace("tenant-c")
        kc.create_namespace("tenant-d")
        c_web = run_pod(cgs, "tenant-c", "web-0")
        d_web = run_pod(cgs, "tenant-d", "web-0")
        c_job = run_pod(cgs, "tenant-c", "job-0")
        c_etl = run_pod(cgs, "tenant-c", "etl-0")
        agent = agent_for({"profiles": [profile(name="cluster"), profile(name="batch", frequency=49)],
                           "targets": [{"name": "web", "podNamePatterns": ["^web-"]}]})
        try:
            agent.start()
            wait_sessions(agent, {("tenant-c", "web-0"), ("tenant-d", "web-0")}, "the cluster target everywhere")
            apply_pc("tenant-c", "quiet", {"targets": [{"name": "web", "disabled": True}]})
            r = report_of(agent, "tenant-c", "web-0")
            assert r["endReason"] == "untargeted", r["endReason"]
            wait_sessions(agent, {("tenant-d", "web-0")}, "web switched off in tenant-c only")

            apply_pc("tenant-c", "first", {"targets": [{"name": "dup", "podNamePatterns": ["^job-"],
                                                        "profileRef": "batch"}]})
            time.sleep(1.1)  # creationTimestamp has a one-second resolution
            apply_pc("tenant-c", "second", {"targets": [{"name": "dup", "podNamePatterns": ["^etl-"]},
                                                        {"name": "etl", "podNamePatterns": ["^etl-"]}]})
            got = wait_sessions(agent, {("tenant-d", "web-0"), ("tenant-c", "job-0"), ("tenant-c", "etl-0")},
                                "the older dup, and second's other target")
            assert got[("tenant-c", "job-0")]["profileConfig"] == "first"
            assert got[("tenant-c", "job-0")]["target"] == "dup"
            assert got[("tenant-c", "job-0")]["profile"] == "batch"  # a cluster profile, by name
            assert got[("tenant-c", "etl-0")]["profileConfig"] == "second"
            assert got[("tenant-c", "etl-0")]["target"] == "etl"
            msg = ('ProfileConfig tenant-c/second: target "dup" is left out: ProfileConfig tenant-c/first has an '
                   'enabled target of that name in namespace tenant-c.')
            assert msg in agent.log(), agent.log()[-3000:]
            assert "CGPROF_CONFLICT_WITH=ProfileConfig tenant-c/first" in agent.log()
            st = pc_status(agent, "tenant-c", "second")
            assert st["conflicts"] == [msg], st
            # cgprofctl check says why tenant-c/web-0 is not profiled.
            check = agent.ctl("check", "tenant-c/web-0").stdout
            assert "disabled in namespace tenant-c by ProfileConfig quiet" in check, check
            # A cluster profile's output is the cluster admin's: not forced below the namespace.
            stop_pods(c_web, d_web, c_job, c_etl)
            assert agent.stop() == 0
        finally:
            agent.cleanup()


def test_cluster_only_settings_refused():
    """machineConfig / reportDir in a ProfileConfig: the server's schema
    refuses them; with a looser CRD (as an older install might have) the
    agent refuses the object, says so naming the key, and the sysctl stays."""
    rv = kc.kubectl("apply", "-f", "-", check=False, input=json.dumps(profile_config(
        "tenant-e", "sneaky", {"machineConfig": [{"name": "kernel.perf_event_max_stack", "value": "64"}]})))
    assert rv.returncode != 0, "the server accepted machineConfig in a ProfileConfig"
    assert "machineConfig" in rv.stderr, rv.stderr
    rv = kc.kubectl("apply", "-f", "-", check=False, input=json.dumps(profile_config(
        "tenant-e", "sneaky", {"reportDir": "/etc"})))
    assert rv.returncode != 0 and "reportDir" in rv.stderr, rv.stderr

    # An older, looser CRD: the spec is not checked by the server at all.
    loose = crd_from_manifests()
    for v in loose["spec"]["versions"]:
        v["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
        v.pop("additionalPrinterColumns", None)
    install_crd(loose)
    before = open("/proc/sys/kernel/perf_event_max_stack").read().strip()
    with KubeCgroups(driver="systemd") as cgs:
        p = run_pod(cgs, "tenant-e", "app-0")
        agent = agent_for({"targets": []})
        try:
            agent.start()
            apply_pc("tenant-e", "sneaky", {
                "machineConfig": [{"name": "kernel.perf_event_max_stack", "value": "64"}],
                "targets": [{"name": "all", "podNamePatterns": [".*"]}]})
            apply_pc("tenant-e", "escape", {"reportDir": "/etc", "targets": [{"name": "x", "podNamePatterns": [".*"]}]})
            apply_pc("tenant-e", "env", {"profiles": [{"name": "p", "output": "%{HOME}"}],
                                         "targets": [{"name": "y", "profileRef": "p", "podNamePatterns": [".*"]}]})
            wait_for(lambda: all((pc_status(agent, "tenant-e", n) or {}).get("state") == "refused"
                                 for n in ("sneaky", "escape", "env")), timeout=60,
                     what="the three objects to be refused")
            assert pc_status(agent, "tenant-e", "sneaky")["error"] == (
                "spec.machineConfig: not allowed in a ProfileConfig: only the cluster config sets machineConfig")
            assert pc_status(agent, "tenant-e", "escape")["error"] == (
                "spec.reportDir: not allowed in a ProfileConfig: only the cluster config sets reportDir")
            assert pc_status(agent, "tenant-e", "env")["error"] == (
                "spec.profiles[0].output: %{...} (the agent's environment) is not allowed in a ProfileConfig")
            assert ("ProfileConfig tenant-e/sneaky refused: spec.machineConfig: not allowed in a ProfileConfig"
                    in agent.log())
            time.sleep(2)
            assert sessions(agent) == {}, "a refused object selected pods"
            assert open("/proc/sys/kernel/perf_event_max_stack").read().strip() == before

            # Fixing it applies it; breaking it again keeps the last good version.
            apply_pc("tenant-e", "sneaky", {"targets": [{"name": "all", "podNamePatterns": [".*"]}]})
            wait_sessions(agent, {("tenant-e", "app-0")}, "the fixed object applies")
            apply_pc("tenant-e", "sneaky", {"reportDir": "/", "targets": [{"name": "all", "podNamePatterns": [".*"]}]})
            wait_for(lambda: pc_status(agent, "tenant-e", "sneaky")["state"] == "stale", timeout=30,
                     what="the broken edit to be refused")
            wait_sessions(agent, {("tenant-e", "app-0")}, "the last good version still applies")
            stop_pods(p)
            assert agent.stop() == 0
        finally:
            agent.cleanup()
            install_crd(crd_from_manifests())


if __name__ == "__main__":
    with KubeCluster() as cluster:
        kc = cluster
        install_crd(crd_from_manifests())
        kc.create_namespace("tenant-e")
        main([test_isolation_output_edit_delete, test_disable_cluster_target_and_conflicts,
              test_cluster_only_settings_refused])
