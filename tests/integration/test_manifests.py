#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""manifests/ against a real kube-apiserver (v1.20) + etcd, and offline.

- Offline (kubectl kustomize, no kubeconfig, no network): manifests/, the
  overlays (openshift, cgroup-v1-hybrid) and the privileged patch build, and
  contain what they promise: the DaemonSet's least-privilege security
  context, mounts, probes, priority, tolerations; the ClusterRole's exact
  rules; the SCC of the OpenShift overlay matching the DaemonSet; the hybrid
  overlay's unified cgroup root.
- `kubectl apply -k manifests/` creates every object: the CRD becomes
  Established with its schema stored whole, and the server's own validation
  accepts the Namespace, RBAC, PriorityClass, ConfigMap and DaemonSet (read
  back), a pod made from the DaemonSet's template (dry run: admission
  resolves its PriorityClass), the overlays' DaemonSets and the privileged
  patch.
- ProfileConfig: the examples in manifests/examples/ are accepted and
  stored unpruned; bad objects are refused by the server's schema with the
  field named (wrong types, bad enums and patterns, machineConfig and the
  other cluster-only keys, namespaceSelector and cgroupPatterns in a target,
  duplicate names); unknown fields are refused by kubectl's client-side
  validation and pruned silently by the server itself.
- The ConfigMap's config.json passes `cgprofd --check-config`.
- RBAC, with a token of the cgprof ServiceAccount from the TokenRequest API
  (not the admin token): its rules are exactly get/list/watch on pods,
  namespaces and profileconfigs; list and watch work cluster-wide; writes,
  secrets, configmaps, events and nodes are forbidden (403). Then cgprofd
  itself runs with that token and the DaemonSet's arguments: its pod,
  namespace and ProfileConfig watches sync, a labelled pod is profiled with
  the ConfigMap's default profile, and an example ProfileConfig's target
  profiles a pod."""

import copy
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse

import cgproflib
from cgproflib import CGPROFD, Agent, log, main, skip_prereq, wait_for
from kubelib import SOURCE_DIR, KubeCgroups, KubeCluster, new_container_id

try:
    import yaml
except ImportError:  # pragma: no cover
    yaml = None

MANIFESTS = os.path.join(SOURCE_DIR, "manifests")
BASE = os.path.join(MANIFESTS, "base")
OVERLAYS = os.path.join(MANIFESTS, "overlays")
EXAMPLES = os.path.join(MANIFESTS, "examples")
PRIVILEGED_PATCH = os.path.join(MANIFESTS, "patches", "privileged.yaml")
SECCOMP_PATCH = os.path.join(MANIFESTS, "patches", "seccomp-unconfined.yaml")
OLD_KERNEL_PATCH = os.path.join(MANIFESTS, "patches", "kernel-before-5.11.yaml")
NODE = "node-a"
# test_container.py shows what fails without each (SYS_RESOURCE: nothing
# on kernels >= 5.11; patches/kernel-before-5.11.yaml adds it. BPF and
# PERFMON: nothing while SYS_ADMIN is held, which implies them and which the
# default seccomp profiles want for bpf()).
CAPS = ["SYS_ADMIN", "SYS_PTRACE", "DAC_READ_SEARCH", "SYSLOG"]
SA_USER = "system:serviceaccount:cgprof:cgprof"

kc = None

# --------------------------------------------------------------------------
# helpers


def offline_env():
    """kubectl with no cluster to talk to: no kubeconfig, and a proxy that
    refuses every connection, so that anything networked fails."""
    env = dict(os.environ, KUBECONFIG="/nonexistent/kubeconfig", HTTPS_PROXY="http://127.0.0.1:9",
               HTTP_PROXY="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9", http_proxy="http://127.0.0.1:9")
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    return env


def kustomize(path):
    """The objects `kubectl kustomize path` renders, offline."""
    r = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True, env=offline_env(),
                       timeout=60)
    assert r.returncode == 0, f"kubectl kustomize {path} failed: {r.stderr}"
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def by_kind(objs):
    out = {}
    for o in objs:
        out.setdefault(o["kind"], []).append(o)
    return out


def one(objs, kind, name=None):
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} objects, not 1: {[o['metadata']['name'] for o in found]}"
    return found[0]


def agent_container(ds):
    cs = ds["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in cs] == ["cgprofd"], cs
    return cs[0]


def mounts(ds):
    """{mountPath: (volume, readOnly)} of the agent container."""
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    out = {}
    for m in agent_container(ds)["volumeMounts"]:
        out[m["mountPath"]] = (vols[m["name"]], bool(m.get("readOnly")))
    return out


def config_of(objs):
    cm = one(objs, "ConfigMap", "cgprof-config")
    return cm["data"]["config.json"]


def check_config(text, tmp, env=None):
    path = os.path.join(tmp, "config.json")
    with open(path, "w") as f:
        f.write(text)
    return subprocess.run([CGPROFD, "--check-config", "--config", path], capture_output=True, text=True,
                          timeout=30, env=env), path


def example_files():
    fs = sorted(f for f in os.listdir(EXAMPLES) if f.startswith("profileconfig-") and f.endswith(".yaml"))
    assert fs, "no manifests/examples/profileconfig-*.yaml"
    return [os.path.join(EXAMPLES, f) for f in fs]


def pc(ns, name, spec):
    return {"apiVersion": "cgprof.io/v1", "kind": "ProfileConfig", "metadata": {"namespace": ns, "name": name},
            "spec": spec}


def post_pc(obj, token=None):
    """POSTs straight to the API (no kubectl: no client-side validation)."""
    ns = obj["metadata"]["namespace"]
    return kc.api("POST", f"/apis/cgprof.io/v1/namespaces/{ns}/profileconfigs", obj, token=token)


def delete_pc(ns, name):
    kc.kubectl("delete", "profileconfig", "-n", ns, name, "--ignore-not-found")


def wait_crd_served():
    wait_for(lambda: any(c["type"] == "Established" and c["status"] == "True"
                         for c in kc.get("crd", "profileconfigs.cgprof.io").get("status", {}).get("conditions", [])),
             timeout=60, what="the ProfileConfig CRD to be Established")
    wait_for(lambda: kc.kubectl("get", "profileconfigs", "-A", check=False).returncode == 0, timeout=60,
             what="profileconfigs to be served")


def ensure_namespace(name, labels=None):
    if kc.api("GET", f"/api/v1/namespaces/{name}")[0] != 200:
        kc.create_namespace(name, labels)


def sa_token():
    """A token for the cgprof ServiceAccount from the TokenRequest API."""
    st, obj = kc.api("POST", "/api/v1/namespaces/cgprof/serviceaccounts/cgprof/token",
                     {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"expirationSeconds": 3600}})
    assert st == 201, f"TokenRequest: {st} {obj}"
    return obj["status"]["token"]


# --------------------------------------------------------------------------
# offline


def test_base_builds_offline_with_least_privilege():
    objs = kustomize(MANIFESTS)
    assert objs == kustomize(BASE), "manifests/ is manifests/base/"
    kinds = by_kind(objs)
    assert sorted(kinds) == sorted(["Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
                                    "ClusterRoleBinding", "PriorityClass", "ConfigMap", "DaemonSet"]), sorted(kinds)
    assert all(len(v) == 1 for v in kinds.values()), {k: len(v) for k, v in kinds.items()}
    for o in objs:
        if o["kind"] in ("ServiceAccount", "ConfigMap", "DaemonSet"):
            assert o["metadata"]["namespace"] == "cgprof", o["metadata"]
        assert o["metadata"]["labels"].get("app.kubernetes.io/part-of") == "cgprof", o["metadata"]

    # RBAC: exactly get/list/watch on pods, namespaces, nodes, profileconfigs.
    role = one(objs, "ClusterRole", "cgprof")
    triples = sorted((g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
                     for v in rule["verbs"])
    want = sorted((g, r, v) for g, r in (("", "pods"), ("", "namespaces"), ("", "nodes"),
                                         ("cgprof.io", "profileconfigs"))
                  for v in ("get", "list", "watch"))
    assert triples == want, triples
    assert not any("resourceNames" in r or "nonResourceURLs" in r for r in role["rules"]), role["rules"]
    crb = one(objs, "ClusterRoleBinding", "cgprof")
    assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cgprof"}
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "cgprof", "namespace": "cgprof"}]

    crd = one(objs, "CustomResourceDefinition", "profileconfigs.cgprof.io")
    s = crd["spec"]
    assert s["group"] == "cgprof.io" and s["scope"] == "Namespaced", s
    assert s["names"]["kind"] == "ProfileConfig" and s["names"]["plural"] == "profileconfigs"
    assert s["names"]["singular"] == "profileconfig" and "cgpc" in s["names"]["shortNames"]
    assert [(v["name"], v["served"], v["storage"]) for v in s["versions"]] == [("v1", True, True)]

    pcl = one(objs, "PriorityClass")
    ds = one(objs, "DaemonSet", "cgprof")
    spec = ds["spec"]["template"]["spec"]
    c = agent_container(ds)
    assert spec["hostPID"] is True
    assert spec["serviceAccountName"] == "cgprof"
    assert spec["priorityClassName"] == pcl["metadata"]["name"] == "cgprof-node-agent"
    assert 0 < pcl["value"] < 1000000000 and not pcl.get("globalDefault"), pcl
    # "operator: Exists" without a key tolerates every taint.
    assert spec["tolerations"] == [{"operator": "Exists"}], spec["tolerations"]
    assert spec["terminationGracePeriodSeconds"] >= 30
    assert ds["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"]
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"

    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False, sc
    assert sc["readOnlyRootFilesystem"] is True, sc
    assert sc["capabilities"] == {"drop": ["ALL"], "add": CAPS}, sc["capabilities"]
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, sc
    ann = ds["spec"]["template"]["metadata"]["annotations"]
    assert ann["container.apparmor.security.beta.kubernetes.io/cgprofd"] == "unconfined", ann
    # /metrics: the port the config listens on, declared and annotated.
    config = json.loads(config_of(objs))
    port = int(config["http"]["listen"].rpartition(":")[2])
    assert c["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}], c["ports"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == str(port), ann
    assert ann["prometheus.io/path"] == "/metrics", ann

    res = c["resources"]
    assert res["requests"]["cpu"] and res["requests"]["memory"] and res["limits"]["memory"], res
    assert "cpu" not in res.get("limits", {}), res
    assert c["livenessProbe"]["exec"]["command"] == ["cgprofctl", "status"], c["livenessProbe"]

    args = c["args"]
    assert "--cgroup-root=/host/sys/fs/cgroup" in args and "--sysctl-root=/host/proc/sys" in args, args
    assert "--config=/etc/cgprof/config.json" in args, args
    m = mounts(ds)
    want_mounts = {
        "/host/sys/fs/cgroup": ("/sys/fs/cgroup", True),
        "/host/proc/sys/kernel": ("/proc/sys/kernel", False),
        "/sys/kernel/btf": ("/sys/kernel/btf", True),
        "/run/systemd/journal": ("/run/systemd/journal", False),
        "/var/lib/cgprof/reports": ("/var/lib/cgprof/reports", False),
        "/var/lib/cgprof/state": ("/var/lib/cgprof/state", False),
    }
    for path, (host, ro) in want_mounts.items():
        vol, got_ro = m[path]
        assert vol.get("hostPath", {}).get("path") == host and got_ro == ro, (path, vol, got_ro)
    assert m["/etc/cgprof"][0]["configMap"]["name"] == "cgprof-config" and m["/etc/cgprof"][1]
    assert "emptyDir" in m["/run/cgprof"][0]
    # Runtimes refuse mount points inside /proc.
    assert not [p for p in m if p == "/proc" or p.startswith("/proc/")], list(m)
    assert not spec.get("hostNetwork") and not spec.get("hostIPC")


def test_overlays_and_privileged_patch_build_offline():
    base = kustomize(MANIFESTS)
    base_ds = one(base, "DaemonSet", "cgprof")
    base_config = json.loads(config_of(base))

    # OpenShift: SCC granting exactly the DaemonSet's needs, used through
    # RBAC by the cgprof ServiceAccount; no sysctls.
    os_objs = kustomize(os.path.join(OVERLAYS, "openshift"))
    assert all(o["metadata"]["labels"].get("app.kubernetes.io/part-of") == "cgprof" for o in os_objs)
    assert "namespace" not in one(os_objs, "SecurityContextConstraints")["metadata"], "the SCC is cluster-scoped"
    ds = one(os_objs, "DaemonSet", "cgprof")
    c = agent_container(ds)
    assert not any(a.startswith("--sysctl-root") for a in c["args"]), c["args"]
    assert "/host/proc/sys/kernel" not in mounts(ds)
    assert not any(v.get("hostPath", {}).get("path", "").startswith("/proc")
                   for v in ds["spec"]["template"]["spec"]["volumes"])
    assert c["securityContext"]["seLinuxOptions"] == {"type": "spc_t"}, c["securityContext"]
    cfg = json.loads(config_of(os_objs))
    assert cfg["machineConfig"] == [], cfg
    assert {k: v for k, v in cfg.items() if k != "machineConfig"} == \
        {k: v for k, v in base_config.items() if k != "machineConfig"}, "the overlay's config drifted from the base's"
    scc = one(os_objs, "SecurityContextConstraints", "cgprof")
    assert scc["apiVersion"] == "security.openshift.io/v1"
    sc = c["securityContext"]
    assert scc["allowedCapabilities"] == sc["capabilities"]["add"] and scc["requiredDropCapabilities"] == ["ALL"]
    assert scc["allowHostPID"] is True and scc["allowHostDirVolumePlugin"] is True
    assert scc["allowPrivilegedContainer"] is False and scc["allowPrivilegeEscalation"] is False
    assert not scc["allowHostNetwork"] and not scc["allowHostIPC"] and not scc["allowHostPorts"]
    assert scc["readOnlyRootFilesystem"] is True and scc["runAsUser"]["type"] == "RunAsAny"
    assert scc["seLinuxContext"]["seLinuxOptions"]["type"] == sc["seLinuxOptions"]["type"]
    assert scc["seccompProfiles"] == ["runtime/default"] and sc["seccompProfile"]["type"] == "RuntimeDefault"
    vol_kinds = {k for v in ds["spec"]["template"]["spec"]["volumes"] for k in v if k != "name"}
    assert vol_kinds <= set(scc["volumes"]), (vol_kinds, scc["volumes"])
    assert not scc.get("users") and not scc.get("groups"), "granted through RBAC only"
    role = one(os_objs, "Role", "cgprof-scc")
    assert role["metadata"]["namespace"] == "cgprof"
    assert role["rules"] == [{"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
                              "resourceNames": ["cgprof"], "verbs": ["use"]}], role["rules"]
    rb = one(os_objs, "RoleBinding", "cgprof-scc")
    assert rb["roleRef"]["name"] == "cgprof-scc" and rb["subjects"] == [
        {"kind": "ServiceAccount", "name": "cgprof", "namespace": "cgprof"}]
    with tempfile.TemporaryDirectory() as tmp:
        r, path = check_config(config_of(os_objs), tmp)
        assert r.returncode == 0, r.stderr

    # The Prometheus Operator's PodMonitor: the agent pods' metrics port.
    pm_objs = kustomize(os.path.join(OVERLAYS, "podmonitor"))
    pm = one(pm_objs, "PodMonitor", "cgprof")
    assert pm["apiVersion"] == "monitoring.coreos.com/v1" and pm["metadata"]["namespace"] == "cgprof"
    assert pm["spec"]["selector"]["matchLabels"].items() <= base_ds["spec"]["template"]["metadata"]["labels"].items()
    assert [(e["port"], e["path"]) for e in pm["spec"]["podMetricsEndpoints"]] == [("metrics", "/metrics")]
    assert one(pm_objs, "DaemonSet", "cgprof") == base_ds

    # cgroup v1 hybrid: the unified hierarchy, and cpu attach mode.
    hy = kustomize(os.path.join(OVERLAYS, "cgroup-v1-hybrid"))
    ds = one(hy, "DaemonSet", "cgprof")
    c = agent_container(ds)
    assert "--cgroup-root=/host/sys/fs/cgroup/unified" in c["args"], c["args"]
    assert "--attach-mode=cpu" in c["args"], c["args"]
    vol, ro = mounts(ds)["/host/sys/fs/cgroup/unified"]
    assert vol["hostPath"]["path"] == "/sys/fs/cgroup/unified" and ro
    assert "/host/sys/fs/cgroup" not in mounts(ds)
    # Nothing else changed.
    assert [o for o in hy if o["kind"] != "DaemonSet"] == [o for o in base if o["kind"] != "DaemonSet"]
    undo = copy.deepcopy(ds)
    uc = agent_container(undo)
    uc["args"] = [a for a in uc["args"] if a != "--attach-mode=cpu"]
    uc["args"] = ["--cgroup-root=/host/sys/fs/cgroup" if a.startswith("--cgroup-root=") else a for a in uc["args"]]
    for m in uc["volumeMounts"]:
        if m["name"] == "cgroup":
            m["mountPath"] = "/host/sys/fs/cgroup"
    for v in undo["spec"]["template"]["spec"]["volumes"]:
        if v["name"] == "cgroup":
            v["hostPath"]["path"] = "/sys/fs/cgroup"
    assert undo == base_ds, "the hybrid overlay changes only the cgroup root and the attach mode"

    # The privileged fallback, as a kustomization of one's own would use it.
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(PRIVILEGED_PATCH, os.path.join(tmp, "privileged.yaml"))
        with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
            f.write(f"resources:\n  - {os.path.relpath(BASE, tmp)}\npatches:\n  - path: privileged.yaml\n")
        pr = kustomize(tmp)
    sc = agent_container(one(pr, "DaemonSet", "cgprof"))["securityContext"]
    assert sc["privileged"] is True and sc["allowPrivilegeEscalation"] is True and "capabilities" not in sc, sc

    # The seccomp and old-kernel fallbacks, the same way: each changes its
    # one field.
    for patch, entry in ((SECCOMP_PATCH, "  - path: p.yaml\n"),
                         (OLD_KERNEL_PATCH, "  - path: p.yaml\n    target: {kind: DaemonSet, name: cgprof}\n")):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(patch, os.path.join(tmp, "p.yaml"))
            with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
                f.write(f"resources:\n  - {os.path.relpath(BASE, tmp)}\npatches:\n{entry}")
            pds = one(kustomize(tmp), "DaemonSet", "cgprof")
        want = copy.deepcopy(base_ds)
        wsc = agent_container(want)["securityContext"]
        if patch == SECCOMP_PATCH:
            wsc["seccompProfile"] = {"type": "Unconfined"}
        else:
            wsc["capabilities"]["add"].append("SYS_RESOURCE")
        assert pds == want, (patch, agent_container(pds)["securityContext"])


def test_gpu_overlay_and_gpu_config_example():
    """The gpu-nodes overlay is the base with the DaemonSet on GPU nodes
    only; the GPU tuning example passes --check-config, differs from the
    ConfigMap's config in machineConfig only, and its entries for one sysctl
    cannot both select a node (made to overlap, it is refused)."""
    base = kustomize(MANIFESTS)
    objs = kustomize(os.path.join(OVERLAYS, "gpu-nodes"))
    ds = one(objs, "DaemonSet", "cgprof")
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}, ds
    ds = copy.deepcopy(ds)
    del ds["spec"]["template"]["spec"]["nodeSelector"]
    assert ds == one(base, "DaemonSet", "cgprof"), "the overlay changes more than the nodeSelector"
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objs) == \
        sorted((o["kind"], o["metadata"]["name"]) for o in base)

    path = os.path.join(EXAMPLES, "config-gpu-tuning.json")
    with open(path) as f:
        text = f.read()
    r = subprocess.run([CGPROFD, "--check-config", "--config", path], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (r.stdout, r.stderr)
    cfg, base_cfg = json.loads(text), json.loads(config_of(base))
    assert {k: v for k, v in cfg.items() if k != "machineConfig"} == \
        {k: v for k, v in base_cfg.items() if k != "machineConfig"}, "the example drifted from the ConfigMap"
    gpu = [e for e in cfg["machineConfig"]
           if e.get("nodeSelector", {}).get("matchLabels") == {"nvidia.com/gpu.present": "true"}]
    assert {e["name"] for e in gpu} == {"kernel.perf_event_paranoid", "kernel.kptr_restrict"}, gpu
    cfg["machineConfig"][2]["nodeSelector"] = {}
    with tempfile.TemporaryDirectory() as tmp:
        r, _ = check_config(json.dumps(cfg), tmp)
    assert r.returncode == 1 and "machineConfig[2].name: duplicate sysctl" in r.stderr, r.stderr
    assert "machineConfig[0]" in r.stderr, r.stderr


def test_gpu_durations_overlay():
    """The gpu-durations overlay (docs/gpu.md, kernel durations): the
    gpu-nodes DaemonSet plus the host directory of the CUPTI library and its
    socket, the init container that copies the library there, and the
    agent's --cupti-socket in it; nothing else changes."""
    gpu = one(kustomize(os.path.join(OVERLAYS, "gpu-nodes")), "DaemonSet", "cgprof")
    ds = one(kustomize(os.path.join(OVERLAYS, "gpu-durations")), "DaemonSet", "cgprof")
    spec = ds["spec"]["template"]["spec"]
    vol = [v for v in spec["volumes"] if v["name"] == "cupti"]
    assert vol == [{"name": "cupti", "hostPath": {"path": "/var/run/cgprof-cupti", "type": "DirectoryOrCreate"}}], vol
    c = agent_container(ds)
    assert "--cupti-socket=/run/cgprof-cupti/cupti.sock" in c["args"], c["args"]
    assert "/run/cgprof-cupti" in mounts(ds)
    init = spec["initContainers"]
    assert [i["name"] for i in init] == ["cupti-library"], init
    assert init[0]["volumeMounts"] == [{"name": "cupti", "mountPath": "/out"}], init
    ds = copy.deepcopy(ds)
    spec = ds["spec"]["template"]["spec"]
    del spec["initContainers"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "cupti"]
    c = agent_container(ds)
    c["args"].remove("--cupti-socket=/run/cgprof-cupti/cupti.sock")
    c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "cupti"]
    assert ds == gpu, "the overlay changes more than the CUPTI library's directory"


def test_configmap_passes_check_config():
    with tempfile.TemporaryDirectory() as tmp:
        text = config_of(kustomize(MANIFESTS))
        r, path = check_config(text, tmp)
        assert r.returncode == 0, f"cgprofd --check-config: {r.returncode} {r.stdout} {r.stderr}"
        assert r.stdout.strip() == f"{path}: ok", r.stdout
        # And it does check: a bad value is refused with its key path.
        cfg = json.loads(text)
        cfg["profiles"][0]["frequency"] = 0
        r, path = check_config(json.dumps(cfg), tmp)
        assert r.returncode == 1 and "profiles[0].frequency" in r.stderr, (r.returncode, r.stderr)


def test_pull_overlay_builds_offline():
    """manifests/overlays/pull: pprof over TLS from the Secret cgprof-tls,
    and exactly create on tokenreviews and subjectaccessreviews for the
    agent's ServiceAccount, nothing else; the base keeps pprof off."""
    base = kustomize(MANIFESTS)
    assert not json.loads(config_of(base))["http"].get("pprof"), "the base must keep pprof off"
    objs = kustomize(os.path.join(OVERLAYS, "pull"))
    assert all(o["metadata"]["labels"].get("app.kubernetes.io/part-of") == "cgprof" for o in objs)
    # The base's read-only role is untouched; the reviews come in a role of their own.
    assert one(objs, "ClusterRole", "cgprof") == one(base, "ClusterRole", "cgprof")
    role = one(objs, "ClusterRole", "cgprof-pull")
    triples = sorted((g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
                     for v in rule["verbs"])
    assert triples == [("authentication.k8s.io", "tokenreviews", "create"),
                       ("authorization.k8s.io", "subjectaccessreviews", "create")], triples
    assert not any("resourceNames" in r or "nonResourceURLs" in r for r in role["rules"]), role["rules"]
    crb = one(objs, "ClusterRoleBinding", "cgprof-pull")
    assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cgprof-pull"}
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "cgprof", "namespace": "cgprof"}]
    assert sorted(o["kind"] for o in objs) == sorted([o["kind"] for o in base] + ["ClusterRole",
                                                                                 "ClusterRoleBinding"])
    # The Secret, read-only, where the config looks for it.
    ds = one(objs, "DaemonSet", "cgprof")
    vol, ro = mounts(ds)["/etc/cgprof-tls"]
    assert ro and vol["secret"]["secretName"] == "cgprof-tls", vol
    assert ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scheme"] == "https"
    cfg, base_cfg = json.loads(config_of(objs)), json.loads(config_of(base))
    assert cfg["http"] == dict(base_cfg["http"], pprof=True, tlsCertFile="/etc/cgprof-tls/tls.crt",
                               tlsKeyFile="/etc/cgprof-tls/tls.key"), cfg["http"]
    assert {k: v for k, v in cfg.items() if k != "http"} == {k: v for k, v in base_cfg.items() if k != "http"}, \
        "the overlay's config drifted from the base's"
    # As the agent checks it in a cluster: accepted with TLS, refused without.
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="10.0.0.1")
        r, path = check_config(json.dumps(cfg), tmp, env=env)
        assert r.returncode == 0, (r.returncode, r.stderr)
        no_tls = dict(cfg, http={k: v for k, v in cfg["http"].items() if not k.startswith("tls")})
        r, path = check_config(json.dumps(no_tls), tmp, env=env)
        assert r.returncode == 1 and "http.tlsCertFile" in r.stderr, (r.returncode, r.stderr)
        # Outside a cluster, pprof on 0.0.0.0 is refused (loopback only).
        r, path = check_config(json.dumps(cfg), tmp,
                               env={k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"})
        assert r.returncode == 1 and "http.listen" in r.stderr, (r.returncode, r.stderr)


# --------------------------------------------------------------------------
# against the API server


def test_apply_creates_every_object():
    r = kc.kubectl("apply", "-k", MANIFESTS)
    log(r.stdout.strip())
    wait_crd_served()
    crd = kc.get("crd", "profileconfigs.cgprof.io")
    conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conds.get("Established") == "True" and conds.get("NamesAccepted") == "True", conds
    assert "NonStructuralSchema" not in conds, conds
    built = kustomize(MANIFESTS)
    # The server kept the schema whole: nothing it did not understand was dropped.
    want = one(built, "CustomResourceDefinition")["spec"]["versions"][0]
    got = crd["spec"]["versions"][0]
    assert got["schema"] == want["schema"], "the stored schema differs from the manifest's"
    assert got["additionalPrinterColumns"] == want["additionalPrinterColumns"]

    # Every object is there, as the server's validation accepted it.
    for o in built:
        kind, name, ns = o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")
        back = kc.get(kind.lower() if kind != "CustomResourceDefinition" else "crd", name, ns)
        assert back["metadata"]["name"] == name, back["metadata"]
    ds = kc.get("daemonset", "cgprof", "cgprof")
    want_ds = one(built, "DaemonSet")
    c, wc = agent_container(ds), agent_container(want_ds)
    assert c["securityContext"] == wc["securityContext"], (c["securityContext"], wc["securityContext"])
    assert c["args"] == wc["args"] and c["resources"] == wc["resources"]
    assert ds["spec"]["template"]["metadata"]["annotations"] == want_ds["spec"]["template"]["metadata"]["annotations"]
    assert kc.get("configmap", "cgprof-config", "cgprof")["data"] == one(built, "ConfigMap")["data"]
    # Applying again changes nothing.
    again = kc.kubectl("apply", "-k", MANIFESTS).stdout
    assert all(line.endswith("unchanged") for line in again.strip().splitlines()), again

    # A pod as the DaemonSet controller would make it: pod validation and
    # admission (the PriorityClass resolves) accept it. Dry run: no kubelet.
    tmpl = ds["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "cgprof-dryrun", "namespace": "cgprof", "labels": tmpl["metadata"]["labels"],
                        "annotations": tmpl["metadata"]["annotations"]},
           "spec": dict(tmpl["spec"], nodeName=NODE)}
    st, obj = kc.api("POST", "/api/v1/namespaces/cgprof/pods?dryRun=All", pod)
    assert st == 201, f"the DaemonSet's pod was refused: {st} {obj}"
    assert obj["spec"]["priority"] == one(built, "PriorityClass")["value"], obj["spec"].get("priority")
    assert obj["spec"].get("preemptionPolicy") == "Never", obj["spec"].get("preemptionPolicy")
    # The claim in priorityclass.yaml: this server lets any namespace use
    # system-node-critical (we still use our own).
    crit = copy.deepcopy(pod)
    crit["spec"]["priorityClassName"] = "system-node-critical"
    crit["spec"].pop("priority", None)
    crit["spec"].pop("preemptionPolicy", None)
    st, obj = kc.api("POST", "/api/v1/namespaces/cgprof/pods?dryRun=All", crit)
    assert st == 201, f"system-node-critical outside kube-system: {st} {obj}"
    # The API server refuses allowPrivilegeEscalation: false with
    # capabilities.add spelled CAP_SYS_ADMIN (docs/kubernetes.md): the manifests spell it
    # SYS_ADMIN, as runtimes take either.
    bad = copy.deepcopy(pod)
    bad["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = [
        "CAP_SYS_ADMIN" if x == "SYS_ADMIN" else x for x in CAPS]
    st, obj = kc.api("POST", "/api/v1/namespaces/cgprof/pods?dryRun=All", bad)
    assert st == 422 and "CAP_SYS_ADMIN" in json.dumps(obj), (st, obj)

    # The overlays' DaemonSets and the privileged patch pass the server's
    # validation too (the SCC itself needs an OpenShift server).
    for overlay in ("openshift", "cgroup-v1-hybrid"):
        ods = one(kustomize(os.path.join(OVERLAYS, overlay)), "DaemonSet")
        r = kc.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(ods), check=False)
        assert r.returncode == 0, f"{overlay}: {r.stderr}"
    r = kc.kubectl("-n", "cgprof", "patch", "daemonset", "cgprof", "--patch-file", PRIVILEGED_PATCH,
                   "--dry-run=server", "-o", "json")
    sc = agent_container(json.loads(r.stdout))["securityContext"]
    assert sc["privileged"] is True and "capabilities" not in sc, sc
    # The other fallbacks, with the commands their comments give.
    r = kc.kubectl("-n", "cgprof", "patch", "daemonset", "cgprof", "--patch-file", SECCOMP_PATCH,
                   "--dry-run=server", "-o", "json")
    sc = agent_container(json.loads(r.stdout))["securityContext"]
    assert sc["seccompProfile"] == {"type": "Unconfined"} and sc["capabilities"]["add"] == CAPS, sc
    r = kc.kubectl("-n", "cgprof", "patch", "daemonset", "cgprof", "--type", "json", "--patch-file",
                   OLD_KERNEL_PATCH, "--dry-run=server", "-o", "json")
    sc = agent_container(json.loads(r.stdout))["securityContext"]
    assert sc["capabilities"]["add"] == CAPS + ["SYS_RESOURCE"], sc


def test_profileconfig_examples_accepted():
    for path in example_files():
        with open(path) as f:
            want = yaml.safe_load(f)
        ns = want["metadata"]["namespace"]
        ensure_namespace(ns)
        r = kc.kubectl("apply", "-f", path)
        log(r.stdout.strip())
        got = kc.get("profileconfig", want["metadata"]["name"], ns)
        # Stored as written: no field of the example was pruned as unknown.
        assert got["spec"] == want["spec"], f"{path}: stored {got['spec']} != {want['spec']}"
    # The printer columns.
    out = kc.kubectl("get", "cgpc", "-A").stdout.splitlines()
    assert out[0].split() == ["NAMESPACE", "NAME", "PROFILES", "TARGETS", "DEFAULT", "AGE"], out[0]
    row = next(l.split() for l in out[1:] if l.split()[:2] == ["team-a", "team-a"])
    # v1.20 prints the first element of a [*] column only.
    assert row[2] == "web" and row[3] == "web" and row[4] == "web", row


BAD = [
    # (what, spec, substrings of the server's message)
    ("frequency as a string", {"profiles": [{"name": "p", "frequency": "99"}]},
     ["spec.profiles.frequency", "must be of type integer"]),
    ("frequency out of range", {"profiles": [{"name": "p", "frequency": 100001}]},
     ["spec.profiles.frequency", "less than or equal to 100000"]),
    ("frequency 0", {"profiles": [{"name": "p", "frequency": 0}]}, ["greater than or equal to 1"]),
    ("bad event", {"profiles": [{"name": "p", "event": "cpu-cycle"}]},
     ["spec.profiles.event", "Unsupported value: \"cpu-cycle\""]),
    ("bad start", {"profiles": [{"name": "p", "start": "later"}]}, ["spec.profiles.start", "Unsupported value"]),
    ("kernelStacks as a string", {"profiles": [{"name": "p", "kernelStacks": "yes"}]},
     ["spec.profiles.kernelStacks", "must be of type boolean"]),
    ("duration without a unit", {"profiles": [{"name": "p", "duration": "20"}]},
     ["spec.profiles.duration", "should match"]),
    ("duration as a number", {"profiles": [{"name": "p", "duration": 20}]},
     ["spec.profiles.duration", "must be of type string"]),
    ("profile name ..", {"profiles": [{"name": ".."}]}, ["spec.profiles.name", "should match"]),
    ("profile name with a slash", {"profiles": [{"name": "a/b"}]}, ["spec.profiles.name", "should match"]),
    ("profile without a name", {"profiles": [{"event": "cpu-clock"}]}, ["spec.profiles", "name", "Required"]),
    ("duplicate format", {"profiles": [{"name": "p", "formats": ["folded", "folded"]}]},
     ["spec.profiles[0].formats[1]", "Duplicate value"]),
    ("bad format", {"profiles": [{"name": "p", "formats": ["flame"]}]}, ["spec.profiles.formats", "Unsupported"]),
    ("no formats", {"profiles": [{"name": "p", "formats": []}]}, ["spec.profiles.formats", "at least 1 items"]),
    ("absolute output", {"profiles": [{"name": "p", "output": "/etc/cron.d/x"}]},
     ["spec.profiles.output", "should match"]),
    ("output climbing out", {"profiles": [{"name": "p", "output": "{POD}/../../x"}]},
     ["spec.profiles.output", "should match"]),
    ("output with %{ENV}", {"profiles": [{"name": "p", "output": "{POD}/%{HOSTNAME}"}]},
     ["spec.profiles.output", "should match"]),
    ("empty includePatterns", {"profiles": [{"name": "p", "includePatterns": []}]},
     ["spec.profiles.includePatterns", "at least 1 items"]),
    ("duplicate profile names", {"profiles": [{"name": "p"}, {"name": "p"}]},
     ["spec.profiles[1]", "Duplicate value"]),
    ("duplicate target names", {"targets": [{"name": "t", "containers": ["a"]}, {"name": "t", "containers": ["b"]}]},
     ["spec.targets[1]", "Duplicate value"]),
    ("targets as an object", {"targets": {"name": "t"}}, ["spec.targets", "must be of type array"]),
    ("bad operator", {"targets": [{"name": "t", "podSelector": {
        "matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]}}]},
     ["spec.targets.podSelector.matchExpressions.operator", "Unsupported value: \"Equals\""]),
    ("In without values", {"targets": [{"name": "t", "podSelector": {
        "matchExpressions": [{"key": "a", "operator": "In"}]}}]},
     ["spec.targets.podSelector.matchExpressions", "oneOf"]),
    ("Exists with values", {"targets": [{"name": "t", "podSelector": {
        "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]}}]},
     ["spec.targets.podSelector.matchExpressions", "oneOf"]),
    ("bad label value", {"targets": [{"name": "t", "podSelector": {"matchLabels": {"app": "-x-"}}}]},
     ["spec.targets.podSelector.matchLabels", "should match"]),
    ("empty owner", {"targets": [{"name": "t", "owner": {}}]}, ["spec.targets.owner", "at least 1 properties"]),
    ("empty containers", {"targets": [{"name": "t", "containers": []}]}, ["spec.targets.containers", "at least 1"]),
    ("disabled as a string", {"targets": [{"name": "t", "disabled": "true"}]},
     ["spec.targets.disabled", "must be of type boolean"]),
    ("namespaceSelector in a target", {"targets": [{"name": "t", "namespaceSelector": {"matchLabels": {"a": "b"}}}]},
     ["spec.targets.namespaceSelector", "not allowed in a ProfileConfig"]),
    ("cgroupPatterns in a target", {"targets": [{"name": "t", "cgroupPatterns": ["system.slice/*"]}]},
     ["spec.targets.cgroupPatterns", "not allowed in a ProfileConfig"]),
    ("machineConfig", {"machineConfig": [{"name": "kernel.perf_event_paranoid", "value": "-1"}]},
     ["spec.machineConfig", "not allowed in a ProfileConfig: only the cluster config sets machineConfig"]),
    ("empty machineConfig", {"machineConfig": []},
     ["spec.machineConfig", "only the cluster config sets machineConfig"]),
    ("reportDir", {"reportDir": "/etc"}, ["spec.reportDir", "only the cluster config sets reportDir"]),
    ("restoreMachineConfig", {"restoreMachineConfig": False}, ["spec.restoreMachineConfig", "not allowed"]),
    ("machineConfigInterval", {"machineConfigInterval": "1s"}, ["spec.machineConfigInterval", "not allowed"]),
    ("enableDefault", {"enableDefault": True}, ["spec.enableDefault", "only the cluster config sets enableDefault"]),
    ("the reason itself as a value", {"reportDir": "(not allowed in a ProfileConfig: only the cluster config sets "
                                                   "reportDir)"}, ["spec.reportDir", "must not validate"]),
    ("no spec", None, ["spec", "Required value"]),
]


def test_bad_profileconfigs_refused_by_the_server():
    ensure_namespace("team-a")
    failures = []
    for i, (what, spec, needles) in enumerate(BAD):
        obj = pc("team-a", f"bad-{i}", spec)
        if spec is None:
            del obj["spec"]
        st, body = post_pc(obj)
        msg = body.get("message", "") if isinstance(body, dict) else str(body)
        if st != 422 or not all(n in msg for n in needles):
            failures.append(f"{what}: {st} {msg!r} (wanted 422 with {needles})")
            if st == 201:
                delete_pc("team-a", f"bad-{i}")
        else:
            log(f"refused as it should: {what}: {msg}")
    assert not failures, "\n".join(failures)
    left = [i["metadata"]["name"] for i in kc.get("profileconfig", None, "team-a")["items"]]
    assert not [n for n in left if n.startswith("bad-")], left


def test_unknown_fields_kubectl_refuses_server_prunes():
    ensure_namespace("team-a")
    obj = pc("team-a", "unknown", {"targets": [{"name": "t", "containers": ["a"], "containerz": ["b"]}],
                                   "profilez": []})
    # kubectl's default (strict) validation: this v1.20 server has no
    # server-side field validation, so kubectl checks against the schema the
    # server publishes, and refuses before sending.
    r = kc.kubectl("apply", "-f", "-", input=json.dumps(obj), check=False)
    assert r.returncode != 0 and "unknown field" in r.stderr and "containerz" in r.stderr, r.stderr
    assert kc.api("GET", "/apis/cgprof.io/v1/namespaces/team-a/profileconfigs/unknown")[0] == 404
    # A wrong type is refused there as well, before the server sees it.
    r = kc.kubectl("apply", "-f", "-", input=json.dumps(pc("team-a", "wrongtype", {"profiles": [
        {"name": "p", "frequency": "99"}]})), check=False)
    assert r.returncode != 0 and "frequency" in r.stderr, r.stderr
    # The server itself (any client, or kubectl --validate=false) prunes
    # them: the object is stored without them.
    st, body = post_pc(obj)
    assert st == 201, (st, body)
    assert body["spec"] == {"targets": [{"name": "t", "containers": ["a"]}]}, body["spec"]
    delete_pc("team-a", "unknown")
    r = kc.kubectl("apply", "--validate=false", "-f", "-", input=json.dumps(obj))
    assert kc.get("profileconfig", "unknown", "team-a")["spec"] == {"targets": [{"name": "t", "containers": ["a"]}]}
    delete_pc("team-a", "unknown")
    # A null cluster-only key is "not set": pruned, accepted.
    st, body = post_pc(pc("team-a", "nullrd", {"reportDir": None}))
    assert st == 201 and body["spec"] == {}, (st, body)
    delete_pc("team-a", "nullrd")


# --------------------------------------------------------------------------
# RBAC and the agent with the ServiceAccount's token


def test_rbac_of_the_service_account():
    ensure_namespace("team-a")
    token = sa_token()
    pod = kc.create_pod("team-a", "rbac-probe", NODE)

    # Who the token is, and exactly what it may do.
    st, rev = kc.api("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                     {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                      "spec": {"namespace": "team-a"}}, token=token)
    assert st == 201, (st, rev)
    triples = set()
    for rule in rev["status"]["resourceRules"]:
        for g in rule.get("apiGroups", []):
            for res in rule.get("resources", []):
                for v in rule.get("verbs", []):
                    triples.add((g, res, v))
    # What every authenticated user may do (system:basic-user).
    basic = {("authorization.k8s.io", r, "create") for r in ("selfsubjectaccessreviews", "selfsubjectrulesreviews")}
    want = {(g, r, v) for g, r in (("", "pods"), ("", "namespaces"), ("", "nodes"),
                                   ("cgprof.io", "profileconfigs"))
            for v in ("get", "list", "watch")}
    assert triples - basic == want, f"rules beyond get/list/watch: {sorted(triples - basic - want)}; " \
                                    f"missing: {sorted(want - triples)}"

    allowed = [
        ("GET", "/api/v1/pods"),
        ("GET", "/api/v1/pods?fieldSelector=" + urllib.parse.quote(f"spec.nodeName={NODE}")),
        ("GET", "/api/v1/namespaces/team-a/pods/rbac-probe"),
        ("GET", "/api/v1/namespaces"),
        ("GET", "/api/v1/namespaces/team-a"),
        ("GET", "/apis/cgprof.io/v1/profileconfigs"),
        ("GET", "/apis/cgprof.io/v1/namespaces/team-a/profileconfigs"),
        ("GET", "/api/v1/pods?watch=1&timeoutSeconds=1&allowWatchBookmarks=true"),
        ("GET", "/api/v1/namespaces?watch=1&timeoutSeconds=1"),
        ("GET", "/apis/cgprof.io/v1/profileconfigs?watch=1&timeoutSeconds=1"),
        ("GET", "/api/v1/nodes?fieldSelector=" + urllib.parse.quote(f"metadata.name={NODE}")),
        ("GET", "/api/v1/nodes?fieldSelector=" + urllib.parse.quote(f"metadata.name={NODE}") +
         "&watch=1&timeoutSeconds=1&allowWatchBookmarks=true"),
    ]
    for method, path in allowed:
        st, body = kc.api(method, path, token=token, raw=True)
        assert st == 200, f"{method} {path} as the ServiceAccount: {st} {body[:300]}"

    pod_body = kc.pod_manifest("team-a", "sa-made", NODE)
    forbidden = [
        ("POST", "/api/v1/namespaces/team-a/pods", pod_body, None),
        ("PATCH", "/api/v1/namespaces/team-a/pods/rbac-probe", {"metadata": {"labels": {"x": "y"}}},
         "application/merge-patch+json"),
        ("PATCH", "/api/v1/namespaces/team-a/pods/rbac-probe/status", {"status": {"phase": "Failed"}},
         "application/merge-patch+json"),
        ("DELETE", "/api/v1/namespaces/team-a/pods/rbac-probe", None, None),
        ("POST", "/apis/cgprof.io/v1/namespaces/team-a/profileconfigs", pc("team-a", "sa-made", {}), None),
        ("PATCH", "/apis/cgprof.io/v1/namespaces/team-a/profileconfigs/team-a", {"spec": {}},
         "application/merge-patch+json"),
        ("DELETE", "/apis/cgprof.io/v1/namespaces/team-a/profileconfigs/team-a", None, None),
        ("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sa-ns"}}, None),
        ("PATCH", "/api/v1/namespaces/team-a", {"metadata": {"labels": {"cgprof.io/profile": "enabled"}}},
         "application/merge-patch+json"),
        ("GET", "/api/v1/namespaces/cgprof/configmaps/cgprof-config", None, None),
        ("POST", "/api/v1/namespaces/cgprof/configmaps",
         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, None),
        ("PATCH", "/api/v1/namespaces/cgprof/configmaps/cgprof-config", {"data": {"config.json": "{}"}},
         "application/merge-patch+json"),
        ("GET", "/api/v1/secrets", None, None),
        ("GET", "/api/v1/namespaces/cgprof/secrets", None, None),
        ("POST", "/api/v1/namespaces/team-a/events",
         {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
          "involvedObject": {"kind": "Pod", "name": "rbac-probe", "namespace": "team-a"}}, None),
        ("POST", "/apis/events.k8s.io/v1/namespaces/team-a/events",
         {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}}, None),
        ("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {"x": "y"}}}, "application/merge-patch+json"),
        ("DELETE", f"/api/v1/nodes/{NODE}", None, None),
        ("POST", "/api/v1/namespaces/cgprof/serviceaccounts/cgprof/token",
         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}, None),
        ("DELETE", "/apis/apps/v1/namespaces/cgprof/daemonsets/cgprof", None, None),
    ]
    for method, path, body, ctype in forbidden:
        kw = {"content_type": ctype} if ctype else {}
        st, obj = kc.api(method, path, body, token=token, **kw)
        msg = obj.get("message", "") if isinstance(obj, dict) else str(obj)
        assert st == 403 and SA_USER in msg, f"{method} {path} as the ServiceAccount: {st} {msg}"
    # Nothing happened.
    assert kc.get("pod", "rbac-probe", "team-a")["metadata"]["uid"] == pod["metadata"]["uid"]
    assert "x" not in kc.get("pod", "rbac-probe", "team-a")["metadata"].get("labels", {})
    kc.delete_pod("team-a", "rbac-probe")


def daemonset_args(agent_tmp):
    """The DaemonSet's cgprofd arguments, with its container paths mapped to
    this host: --config and --state-dir are the test agent's, the host cgroup
    root is this machine's, and the sysctl root a private directory (the
    ConfigMap's machineConfig is empty, so nothing is written)."""
    c = agent_container(one(kustomize(MANIFESTS), "DaemonSet"))
    assert c["command"] == ["/usr/sbin/cgprofd"], c["command"]
    out = []
    for a in c["args"]:
        opt = a.split("=", 1)[0]
        if opt in ("--config", "--state-dir"):
            continue  # the Agent harness passes its own
        if opt == "--cgroup-root":
            a = f"--cgroup-root={cgproflib.cgroup_root()}"
        elif opt == "--sysctl-root":
            os.makedirs(os.path.join(agent_tmp, "sysctl", "kernel"), exist_ok=True)
            a = f"--sysctl-root={os.path.join(agent_tmp, 'sysctl')}"
        out.append(a)
    return out


def test_agent_runs_with_the_service_account_token():
    """cgprofd with a kubeconfig holding the ServiceAccount's token (not an
    admin token), the DaemonSet's arguments and the ConfigMap's config:
    everything it needs to list and watch, it can."""
    ensure_namespace("sa-labelled", labels={"cgprof.io/profile": "enabled"})
    ensure_namespace("team-a")
    token = sa_token()
    tmp = tempfile.mkdtemp(prefix="manifests-test-")
    # The workload under a name the default profile does not exclude (it
    # leaves out "(^|/)cgprof", i.e. cgprof itself).
    busy = os.path.join(tmp, "busy-loop")
    shutil.copy(cgproflib.WORKLOAD, busy)
    sa_kubeconfig = kc.write_kubeconfig(os.path.join(tmp, "sa-kubeconfig"), token=token)
    config = json.loads(config_of(kustomize(MANIFESTS)))
    config["reportDir"] = os.path.join(tmp, "reports")
    agent_tmp = os.path.join(tmp, "agent")
    os.makedirs(agent_tmp)
    agent = Agent(config, tmp=agent_tmp, extra_args=["--kubeconfig", sa_kubeconfig, "--node-name", NODE,
                                                     "--kube-backoff-max", "1000", *daemonset_args(agent_tmp)])
    agent.argv = (lambda orig: (lambda: [x for x in orig() if x != "--no-kubernetes"]))(agent.argv)
    procs = []
    try:
        with KubeCgroups(driver="systemd") as cgs:
            def run_pod(ns, name, labels=None, container="main"):
                p = kc.create_pod(ns, name, NODE, labels=labels, containers=(container,), qos="burstable")
                cid = new_container_id()
                cg = cgs.container_for(p, cid)
                proc = cgproflib.run_in_cgroup(cg, [busy, "--seconds", "120"])
                assert proc.stdout.readline().decode().startswith("ready")
                procs.append(proc)
                kc.set_pod_running(ns, name, {container: cid})

            run_pod("sa-labelled", "web-0")
            kc.apply({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": NODE, "labels": {"cgprof.io/pool": "general"}}})
            agent.start()
            log("agent argv: " + " ".join(agent.argv()))

            def kube():
                return agent.status()["kubernetes"]

            wait_for(lambda: kube()["podWatch"]["synced"] and kube()["namespaceWatch"]["synced"] and
                     kube()["nodeWatch"]["synced"], timeout=60,
                     what="the pod, namespace and node watches to sync with the ServiceAccount's token")
            # Its own Node's labels, read with the same token.
            wait_for(lambda: agent.status()["machineConfig"]["labelsSource"] == "node", timeout=60,
                     what="the agent to read its Node")
            assert "cgprof.io/pool=general" in agent.status()["machineConfig"]["labels"]
            k = kube()
            for w in ("podWatch", "namespaceWatch", "nodeWatch"):
                assert k[w]["lastError"] not in (401, 403), (w, k[w])
            assert k["pods"] >= 1 and k["namespaces"] >= 3, k

            # The labelled namespace's pod, with the ConfigMap's default profile.
            s = wait_for(lambda: next((x for x in agent.status()["sessions"] if x.get("pod") == "web-0"), None),
                         timeout=60, what="a session for sa-labelled/web-0")
            assert s["profile"] == "default" and s["namespace"] == "sa-labelled", s

            # ProfileConfig objects, listed and watched with the same token
            # ("unavailable" would be 403 without the RBAC rule).
            assert "profileConfigWatch" in k, f"no profileConfigWatch in the status: {k}"
            wait_for(lambda: kube()["profileConfigWatch"]["synced"], timeout=60,
                     what="the ProfileConfig watch to sync")
            assert kube()["profileConfigWatch"]["unavailable"] == 0, kube()["profileConfigWatch"]
            kc.kubectl("apply", "-f", os.path.join(EXAMPLES, "profileconfig-team.yaml"))
            wait_for(lambda: any(p["namespace"] == "team-a" and p["name"] == "team-a" and p["state"] == "applied"
                                 for p in kube().get("profileConfigs", [])), timeout=60,
                     what="the example ProfileConfig to be applied")
            run_pod("team-a", "shop-0", labels={"app": "web"}, container="app")
            s = wait_for(lambda: next((x for x in agent.status()["sessions"] if x.get("pod") == "shop-0"), None),
                         timeout=60, what="a session for team-a/shop-0 from the example ProfileConfig")
            assert s["target"] == "web" and s["profile"] == "web" and s["container"] == "app", s

            time.sleep(2)
            assert agent.stop() == 0
            r = agent.wait_summary(lambda x: x.get("pod") == "web-0", what="the report of sa-labelled/web-0")
            assert r["samples"]["total"] > 0, r["samples"]
            rel = os.path.relpath(r["_dir"], config["reportDir"]).split("/")
            assert rel[:3] == ["sa-labelled", "web-0", "main"], rel
            folded = cgproflib.folded(r)
            assert any(st[-1] == "hot_alpha" for st in folded), "the workload's hot function is in the report"
            refused = [l for l in agent.log().splitlines()
                       if re.search(r"HTTP 40[13]|is forbidden|Not allowed to|Unauthorized", l)]
            assert not refused, "the agent was refused something:\n" + "\n".join(refused)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
        for ns, name in (("sa-labelled", "web-0"), ("team-a", "shop-0")):
            kc.delete_pod(ns, name)
        kc.kubectl("delete", "node", NODE, "--ignore-not-found", check=False)


if __name__ == "__main__":
    if yaml is None:
        skip_prereq("python3-yaml not installed")
    cgproflib.require_kustomize()
    with KubeCluster() as cluster:
        kc = cluster
        main([test_base_builds_offline_with_least_privilege, test_overlays_and_privileged_patch_build_offline,
              test_gpu_overlay_and_gpu_config_example, test_gpu_durations_overlay,
              test_configmap_passes_check_config, test_pull_overlay_builds_offline, test_apply_creates_every_object,
              test_profileconfig_examples_accepted, test_bad_profileconfigs_refused_by_the_server,
              test_unknown_fields_kubectl_refuses_server_prunes, test_rbac_of_the_service_account,
              test_agent_runs_with_the_service_account_token])
