#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The image, built from the Dockerfile (scripts/image) and run in a real
container runtime (podman with runc) the way the DaemonSet runs it. The
podman flags come from the kustomized DaemonSet, by code (podman_run_args):
its capabilities, seccompProfile, readOnlyRootFilesystem, runAsUser,
allowPrivilegeEscalation, hostPID, the AppArmor annotation, the memory
limit, command, args, NODE_NAME, and every volume at its mountPath (a
hostPath that must exist is the host's own; a DirectoryOrCreate one is made
under a directory of the test, so that the test creates nothing on the host;
a configMap is a directory holding the test's config). A field it does not
know fails the test: a manifest a runtime would run differently breaks it.

One run with the DaemonSet as it is:
- the agent gets ready (the probes' command, cgprofctl status, in the
  container) and applies its machineConfig to the host's sysctls through
  the mounted /host/proc/sys (restored when it stops);
- it profiles a host cgroup: the workload's 5:3:2 shares, named although
  its binary was deleted after it started (/proc/PID/map_files), and named
  kernel frames (kptr_restrict=1 through machineConfig);
- it symbolizes a process of a second container (another image, another
  user, a 0700 directory) from that container's root, found by its cgroup;
- the reports land in the host directory mounted as the reports hostPath,
  and the root filesystem stays as the image had it (podman diff is empty).

The same with the other seccomp profile (the fallback patch's, or the
manifest's). Then, least privilege: a run without each capability the
DaemonSet adds, each showing the failure its comment in the manifest
predicts. SYS_ADMIN, under both seccomp profiles: it is what lets the agent
call bpf() (it implies CAP_BPF and CAP_PERFMON, and podman's default
profile allows bpf() and perf_event_open() only with it), so without it the
BPF load fails with EPERM. Then BPF and PERFMON (which the DaemonSet does
not add: nothing fails without them while SYS_ADMIN is held) in its place:
under the default profile the BPF load still fails (unless the profile
allows bpf() for CAP_BPF); unconfined the agent runs, but writing
kernel.kptr_restrict and /proc/PID/map_files fail with EPERM; with
CHECKPOINT_RESTORE too (kernels >= 5.9) only kptr_restrict does. Each run
logs what the kernel says to a command run in the agent's container with
those privileges.

Skips (77) only where podman cannot run containers here (and without
kubectl, which builds the kustomizations). Removes its containers, images
(the test's tags; scripts/image keeps the bootstrapped bases and the tagged
toolchain stage in podman's storage, /var/lib/containers/storage, for the
next build), cgroups and temporary directories, and restores the sysctls."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import cgproflib
from cgproflib import WORKLOAD, Cgroup, folded, log, run_in_cgroup, skip, skip_prereq, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("CGPROF_SOURCE_DIR", os.path.join(HERE, "..", ".."))
MANIFESTS = os.path.join(SOURCE_DIR, "manifests")
RUNTIME = os.environ.get("CGPROF_OCI_RUNTIME", "runc")
UNIQUE = f"{os.getpid()}"
IMAGE = f"localhost/cgprof-test:{UNIQUE}"
TARGET_IMAGE = f"localhost/cgprof-test-target:{UNIQUE}"
TARGET_BIN_NAME = f"cgprof-ctarget-{UNIQUE}"
TARGET_BIN = f"/opt/{TARGET_BIN_NAME}/{TARGET_BIN_NAME}"
TARGET_UID = 1000
HOT = cgproflib.HOT
# machineConfig of every run: kptr_restrict=1 hides kernel addresses from
# whoever lacks CAP_SYSLOG, and writing it takes CAP_SYS_ADMIN.
SYSCTLS = ("kernel.kptr_restrict", "kernel.perf_event_mlock_kb")


def podman(*args, check=True, timeout=600, **kw):
    r = subprocess.run(["podman", "--runtime", RUNTIME, *args], capture_output=True, text=True,
                       timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args[:3])} ... failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def ulimits():
    """Rootful podman's default rlimits can exceed the host's hard ones,
    which runc cannot set without CAP_SYS_RESOURCE: the hard limits (as
    scripts/image does)."""
    import resource
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    nofile = 1048576 if nofile == resource.RLIM_INFINITY else nofile
    nproc = pid_max if nproc == resource.RLIM_INFINITY or nproc > pid_max else nproc
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


# --------------------------------------------------------------------------
# the DaemonSet, as podman flags


def cgroup_layout():
    """'unified' when /sys/fs/cgroup is the v2 hierarchy, 'hybrid' when it
    is at /sys/fs/cgroup/unified (the manifests' overlay for that)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if post.split()[0] == "cgroup2":
                if pre.split()[4] == "/sys/fs/cgroup":
                    return "unified"
                if pre.split()[4] == "/sys/fs/cgroup/unified":
                    return "hybrid"
    skip("no cgroup2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified")


def kustomized():
    import yaml
    path = MANIFESTS if cgroup_layout() == "unified" else os.path.join(MANIFESTS, "overlays", "cgroup-v1-hybrid")
    r = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    objs = [o for o in yaml.safe_load_all(r.stdout) if o]
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    config = json.loads(next(o for o in objs if o["kind"] == "ConfigMap")["data"]["config.json"])
    log(f"manifests: {os.path.relpath(path, SOURCE_DIR)}")
    return ds, config


def quantity_bytes(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|k|M|G)?", str(q))
    assert m, f"memory quantity {q!r}"
    mult = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 10**3, "M": 10**6, "G": 10**9}
    return int(m.group(1)) * mult[m.group(2)]


KNOWN_SECURITY = {"privileged", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "runAsUser",
                  "capabilities", "seccompProfile"}


def podman_run_args(ds, host_root, config_dir, caps=None, seccomp=None):
    """(podman run options, the container's args) for the DaemonSet's agent
    container. caps / seccomp replace the manifest's capabilities.add and
    seccompProfile.type (the least-privilege runs)."""
    pod = ds["spec"]["template"]["spec"]
    meta = ds["spec"]["template"]["metadata"]
    assert len(pod["containers"]) == 1 and not pod.get("initContainers"), "one container"
    c = pod["containers"][0]
    opts = []
    assert not pod.get("hostNetwork") and not pod.get("hostIPC"), "hostNetwork/hostIPC: not what the test knows"
    if pod.get("hostPID"):
        opts += ["--pid", "host"]
    # The pod network is a network namespace of its own: here without any
    # interface but lo (no CNI).
    opts += ["--network", "none"]

    sc = dict(c.get("securityContext", {}))
    unknown = set(sc) - KNOWN_SECURITY
    assert not unknown, f"securityContext fields the test does not translate: {unknown}"
    if sc.get("privileged"):
        opts += ["--privileged"]
    if sc.get("allowPrivilegeEscalation") is False:
        opts += ["--security-opt", "no-new-privileges"]
    if sc.get("readOnlyRootFilesystem"):
        # No tmpfs on /tmp, /run, /var/tmp either: Kubernetes adds none.
        opts += ["--read-only", "--read-only-tmpfs=false"]
    if "runAsUser" in sc:
        opts += ["--user", str(sc["runAsUser"])]
    capabilities = sc.get("capabilities") or {}
    assert set(capabilities) <= {"add", "drop"}, capabilities
    for cap in capabilities.get("drop", []):
        opts += ["--cap-drop", cap]
    for cap in (caps if caps is not None else capabilities.get("add", [])):
        opts += ["--cap-add", cap if cap.startswith("CAP_") else "CAP_" + cap]
    seccomp_type = seccomp or (sc.get("seccompProfile") or {}).get("type", "RuntimeDefault")
    if seccomp_type == "Unconfined":
        opts += ["--security-opt", "seccomp=unconfined"]
    else:
        # The runtime's default: podman's (containers-common's seccomp.json).
        assert seccomp_type == "RuntimeDefault", seccomp_type
    for key, value in (meta.get("annotations") or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/"):
            assert key.endswith("/" + c["name"]) and value == "unconfined", (key, value)
            opts += ["--security-opt", "apparmor=unconfined"]

    limits = (c.get("resources") or {}).get("limits") or {}
    assert set(limits) <= {"memory"}, limits
    if "memory" in limits:
        opts += ["--memory", str(quantity_bytes(limits["memory"]))]

    for e in c.get("env", []):
        if "value" in e:
            opts += ["--env", f"{e['name']}={e['value']}"]
        else:
            assert e["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}, e
            opts += ["--env", f"{e['name']}={os.uname().nodename}"]

    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for vm in c.get("volumeMounts", []):
        v = volumes[vm["name"]]
        dst, ro = vm["mountPath"], bool(vm.get("readOnly"))
        assert not vm.get("subPath"), vm
        if "hostPath" in v:
            hp = v["hostPath"]
            kind = hp.get("type", "")
            if kind == "Directory":
                src = hp["path"]
                assert os.path.isdir(src), f"hostPath {src} (type Directory) does not exist here"
            else:
                assert kind == "DirectoryOrCreate", hp
                src = os.path.join(host_root, hp["path"].lstrip("/"))
                os.makedirs(src, exist_ok=True)
            opts += ["--mount", f"type=bind,source={src},destination={dst}" + (",ro=true" if ro else "")]
        elif "emptyDir" in v:
            ed = v["emptyDir"] or {}
            opt = f"type=tmpfs,destination={dst}"
            if "sizeLimit" in ed:
                opt += f",tmpfs-size={quantity_bytes(ed['sizeLimit'])}"
            opts += ["--mount", opt]
        elif "configMap" in v:
            opts += ["--mount", f"type=bind,source={config_dir},destination={dst},ro=true"]
        else:
            raise AssertionError(f"volume kind the test does not know: {v}")
    assert c.get("command"), "command"
    opts += ["--entrypoint", json.dumps(c["command"])]
    return opts, list(c.get("args", []))


def host_dir(ds, mount_path, host_root):
    """The host directory the test mounts at mount_path."""
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    vm = next(m for m in c["volumeMounts"] if m["mountPath"] == mount_path)
    v = next(v for v in pod["volumes"] if v["name"] == vm["name"])
    return os.path.join(host_root, v["hostPath"]["path"].lstrip("/"))


# --------------------------------------------------------------------------
# the images


def build_images(tmp):
    """The agent's image from the Dockerfile (scripts/image: the bases are
    bootstrapped once and stay in podman's storage), and the target's: the
    test workload, under a name only it has, as user 1000 in a 0700
    directory, on the local debian:12-slim base."""
    t0 = time.monotonic()
    r = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "image"), "--tag", IMAGE], capture_output=True,
                       text=True, timeout=3000, env=dict(os.environ, CGPROF_OCI_RUNTIME=RUNTIME))
    if r.returncode != 0:
        raise AssertionError(f"scripts/image failed ({r.returncode}):\n{r.stderr[-4000:]}")
    log(f"scripts/image: {time.monotonic() - t0:.0f} s\n{r.stdout}")

    ctx = os.path.join(tmp, "target-image")
    os.makedirs(ctx)
    shutil.copy(WORKLOAD, os.path.join(ctx, TARGET_BIN_NAME))
    with open(os.path.join(ctx, "Containerfile"), "w") as f:
        f.write(f"FROM docker.io/library/debian:12-slim\n"
                f"COPY --chown={TARGET_UID}:{TARGET_UID} --chmod=0700 {TARGET_BIN_NAME} {TARGET_BIN}\n"
                f"RUN chown {TARGET_UID}:{TARGET_UID} /opt/{TARGET_BIN_NAME} && chmod 0700 /opt/{TARGET_BIN_NAME}\n")
    podman("build", "--network", "none", *ulimits(), "--pull=never", "--tag", TARGET_IMAGE, ctx)


def check_image():
    """The runtime stage: the documented user, no compiler, no shell, no
    build paths or secrets in its configuration and history."""
    inspect = podman("image", "inspect", IMAGE).stdout
    info = json.loads(inspect)[0]
    cfg = info["Config"]
    log(f"image: {info['Size'] / 1e6:.0f} MB, {len(info['RootFS']['Layers'])} layers, user {cfg.get('User')!r}")
    assert cfg.get("User") == "0:0", cfg.get("User")
    assert cfg.get("Entrypoint") == ["/usr/sbin/cgprofd"], cfg.get("Entrypoint")
    hist = podman("history", "--no-trunc", "--format", "{{.CreatedBy}}", IMAGE).stdout
    text = inspect + hist
    for bad in (os.path.realpath(SOURCE_DIR), "/work/", "/root/", "PASSWORD", "TOKEN", "SECRET", "BEGIN ",
                "KEY="):
        assert bad.lower() not in text.lower(), f"{bad!r} in the image's config or history"
    env = cfg.get("Env") or []
    assert all(e.split("=", 1)[0] in ("PATH", "container") for e in env), env
    # What runs in the image, found by file name (no shell to ask with):
    # ls names the ones that exist.
    progs = [f"/usr/bin/{p}" for p in ("gcc", "cc", "c99", "clang", "ld", "as", "meson", "sh", "bash", "dash",
                                        "rbash")]
    r = podman("run", "--rm", "--network", "none", *ulimits(), "--entrypoint", '["/usr/bin/ls"]', IMAGE,
               "-d", "/usr/bin/cgprofctl", *progs, check=False)
    found = r.stdout.split()
    assert "/usr/bin/cgprofctl" in found, (r.returncode, r.stdout, r.stderr)
    assert not set(found) & set(progs), f"in the runtime image: {sorted(set(found) & set(progs))}"


# --------------------------------------------------------------------------
# one run of the agent


class Run:
    """The agent container with the DaemonSet's flags (or fewer
    capabilities), a host workload, a target container's process, and what
    came of them."""

    def __init__(self, name, ds, config, target, caps=None, seccomp=None, evidence=()):
        self.name = name
        # Commands run in the agent's container once it is ready, for the
        # log: what the kernel says to a process with these privileges.
        self.evidence = [[a.replace("{pid}", str(target.pid)).replace("{map_range}", target.map_range) for a in argv]
                         for argv in evidence]
        self.ds, self.target = ds, target
        self.tmp = tempfile.mkdtemp(prefix="cgprof-container-")
        self.host_root = os.path.join(self.tmp, "host")
        self.config_dir = os.path.join(self.tmp, "config")
        os.makedirs(self.config_dir)
        self.container = f"cgprof-test-agent-{UNIQUE}-{name}"
        self.cg = Cgroup(f"cgprof-test-container-{UNIQUE}-{name}")
        self.cg_kernel = Cgroup(f"cgprof-test-container-{UNIQUE}-{name}-dd")
        # Where the host workload starts, not profiled: it joins self.cg
        # once its binary is gone, so that the agent never saw the file.
        self.cg_hold = Cgroup(f"cgprof-test-container-{UNIQUE}-{name}-hold")
        self.orig = {s: cgproflib.read_sysctl(s) for s in SYSCTLS}
        self.want = {"kernel.kptr_restrict": "1" if self.orig["kernel.kptr_restrict"] != "1" else "2",
                     "kernel.perf_event_mlock_kb": str(int(self.orig["kernel.perf_event_mlock_kb"]) + 4)}
        c = ds["spec"]["template"]["spec"]["containers"][0]
        self.probe = c["livenessProbe"]["exec"]["command"]
        self.grace = ds["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        cfg = dict(config)
        cfg.update({
            "machineConfig": [{"name": k, "value": v} for k, v in self.want.items()],
            "enableDefault": False,
            "profiles": [cgproflib.profile(name="p", output="{CGROUP}", kernelStacks=True)],
            "targets": [{"name": "host", "profileRef": "p", "cgroupPatterns": [self.cg.rel]},
                        {"name": "kernel", "profileRef": "p", "cgroupPatterns": [self.cg_kernel.rel]},
                        {"name": "container", "profileRef": "p", "cgroupPatterns": [re.escape(target.cgroup)]}],
        })
        with open(os.path.join(self.config_dir, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        self.seccomp = seccomp or seccomp_of(c)
        self.opts, self.args = podman_run_args(ds, self.host_root, self.config_dir, caps, seccomp)
        self.reports = host_dir(ds, cfg["reportDir"], self.host_root)
        self.applied = None
        self.ready = False
        self.root_ro = None
        self.logs = ""
        self.diff = None
        self.exit_code = None
        self.summaries = {}

    def running(self):
        r = podman("inspect", "--format", "{{.State.Running}}", self.container, check=False)
        return r.stdout.strip() == "true"

    def exec(self, *argv, check=False):
        return podman("exec", self.container, *argv, check=check, timeout=60)

    def start(self):
        podman("run", "-d", "--name", self.container, *ulimits(), *self.opts, IMAGE, *self.args)

        def probe():
            if self.exec(*self.probe).returncode == 0:
                return "ready"
            if not self.running():
                return "exited"
            return None
        self.ready = wait_for(probe, timeout=90, what="the probe command", interval=0.5) == "ready"
        if self.ready:
            self.applied = {s: cgproflib.read_sysctl(s) for s in SYSCTLS}
            pid = podman("inspect", "--format", "{{.State.Pid}}", self.container).stdout.strip()
            with open(f"/proc/{pid}/mountinfo") as f:
                root = next(line.split() for line in f if line.split()[4] == "/")
            self.root_ro = "ro" in root[5].split(",")
            for argv in self.evidence:
                r = self.exec(*argv)
                log(f"  $ {' '.join(argv)}  (exit {r.returncode})\n  " +
                    "\n  ".join((r.stdout.splitlines()[:2] + r.stderr.splitlines()[:2])))

    def workloads(self):
        """The host workload (its binary deleted before it joins the profiled
        cgroup), dd for kernel frames, and the target container's workload,
        at the same time."""
        binary = os.path.join(self.tmp, "cgprof-hostwork")
        shutil.copy(WORKLOAD, binary)
        host = run_in_cgroup(self.cg_hold, [binary, "--seconds", "3"])
        line = host.stdout.readline().decode()
        assert line.startswith("ready"), f"workload did not start: {line!r}"
        os.unlink(binary)
        with open(os.path.join(self.cg.path, "cgroup.procs"), "w") as f:
            f.write(str(host.pid))
        dd = run_in_cgroup(self.cg_kernel, ["timeout", "2", "dd", "if=/dev/zero", "of=/dev/null", "bs=64k"],
                           stderr=subprocess.DEVNULL)
        tgt = self.target.run_workload(3)
        for p in (host, dd):
            p.wait(60)
        assert host.returncode == 0, host.returncode
        assert tgt.returncode == 0, (tgt.returncode, tgt.stderr)

    def stop(self):
        if self.ready:
            r = self.exec("cgprofctl", "stop", "--all")
            assert r.returncode == 0, r.stderr
            want = {self.cg.rel, self.cg_kernel.rel, self.target.cgroup}
            wait_for(lambda: want <= set(self.read_summaries()), timeout=60, what="the reports")
        podman("stop", "-t", str(self.grace), self.container, check=False, timeout=self.grace + 60)
        self.exit_code = int(podman("inspect", "--format", "{{.State.ExitCode}}", self.container).stdout)
        self.logs = podman("logs", self.container, check=False).stderr + \
            podman("logs", self.container, check=False).stdout
        # What differs from the image: the runtime's mount points only.
        # (Kubernetes adds none of podman's /tmp or /run tmpfs either.)
        diff = podman("diff", "--format", "json", self.container, check=False).stdout
        changes = [p for paths in (json.loads(diff or "{}") or {}).values() for p in paths or ()]
        mounts = set()
        for i, o in enumerate(self.opts):
            if o == "--mount":
                dst = dict(kv.split("=", 1) for kv in self.opts[i + 1].split(",") if "=" in kv)["destination"]
                while dst != "/":
                    mounts.add(dst)
                    dst = os.path.dirname(dst)
        self.diff = sorted(p for p in changes if p not in mounts)
        self.restored = {s: cgproflib.read_sysctl(s) for s in SYSCTLS}

    def read_summaries(self):
        out = {}
        for dirpath, _, files in os.walk(self.reports):
            if "summary.json" in files:
                with open(os.path.join(dirpath, "summary.json")) as f:
                    s = json.load(f)
                s["_dir"] = dirpath
                out[s.get("cgroup")] = s
        self.summaries = out
        return out

    def host_report(self):
        return self.summaries[self.cg.rel]

    def kernel_report(self):
        return self.summaries[self.cg_kernel.rel]

    def target_report(self):
        return self.summaries[self.target.cgroup]

    def cleanup(self):
        """Everything but the reports (remove() takes them)."""
        podman("rm", "-f", "-t", "0", self.container, check=False)
        self.cg.remove()
        self.cg_kernel.remove()
        self.cg_hold.remove()
        for s, v in self.orig.items():
            if cgproflib.read_sysctl(s) != v:
                cgproflib.write_sysctl(s, v)

    def remove(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def go(self):
        log(f"--- run {self.name}: podman run {' '.join(self.opts)} {IMAGE} {' '.join(self.args)}")
        try:
            self.start()
            if self.ready:
                self.workloads()
            self.stop()
        except BaseException:
            log(f"agent log of run {self.name}:\n" + podman("logs", self.container, check=False).stderr[-4000:])
            self.cleanup()
            self.remove()
            raise
        self.cleanup()
        log(f"run {self.name}: ready {self.ready}, exit {self.exit_code}, sysctls {self.applied}, "
            f"reports {sorted(self.summaries)}")
        for line in self.logs.splitlines():
            if re.search(r"fail|denied|not permitted|error|warn", line, re.IGNORECASE):
                log(f"  agent: {line}")
        return self


class Target:
    """The second container: the target image, idle; each run execs the
    workload in it (user 1000, in the container's cgroup)."""

    def __init__(self):
        self.name = f"cgprof-test-target-{UNIQUE}"
        podman("run", "-d", "--name", self.name, "--network", "none", *ulimits(), "--user", str(TARGET_UID),
               TARGET_IMAGE, "sleep", "infinity")
        self.pid = pid = int(podman("inspect", "--format", "{{.State.Pid}}", self.name).stdout)
        with open(f"/proc/{pid}/cgroup") as f:
            self.cgroup = next(line.split(":", 2)[2].strip() for line in f if line.startswith("0::")).lstrip("/")
        assert self.cgroup, "the target container is in the root cgroup v2"
        with open(f"/proc/{pid}/maps") as f:
            self.map_range = f.readline().split()[0]
        assert not os.path.exists(TARGET_BIN)
        log(f"target container {self.name}: cgroup {self.cgroup}")

    def run_workload(self, seconds):
        return subprocess.run(["podman", "--runtime", RUNTIME, "exec", "--user", str(TARGET_UID), self.name,
                               TARGET_BIN, "--seconds", str(seconds)], capture_output=True, text=True, timeout=120)

    def remove(self):
        podman("rm", "-f", "-t", "0", self.name, check=False)


# --------------------------------------------------------------------------
# what a report shows


def hot_named(report):
    return any(f in HOT for st in folded(report) for f in st)


def unnamed(report):
    """Samples, none of them in a named hot function: what a process looks
    like whose binary could not be read."""
    assert sum(folded(report).values()) > 0, f"no samples in {report['_dir']}"
    return not hot_named(report)


def kernel_frames(report):
    """(kernel frames, the named ones): an unnamed one is "[kernel]"."""
    kernel = [f for st in folded(report) for f in st if f.endswith("_[k]") or f == "[kernel]"]
    return kernel, [f for f in kernel if not f.startswith("[")]


def mapping(report, path):
    return next((m for m in report["mappings"] if m["file"] == path), None)


# --------------------------------------------------------------------------
# the tests


def check_full(r):
    """The DaemonSet as it is."""
    assert r.ready, f"the agent did not get ready:\n{r.logs[-3000:]}"
    assert r.applied == r.want, f"machineConfig not applied through the mount: {r.applied} != {r.want}"
    assert r.restored == r.orig, f"not restored: {r.restored} != {r.orig}"
    assert r.exit_code == 0, r.exit_code
    host = r.host_report()
    assert host["_dir"].startswith(r.reports + "/"), host["_dir"]
    cgproflib.assert_shares(host)
    kernel, named = kernel_frames(r.kernel_report())
    log(f"kernel frames: {len(kernel)}, named: {len(named)}, e.g. {named[:3]}")
    assert named, f"no kernel frame named: {kernel[:5]}"
    tgt = r.target_report()
    m = mapping(tgt, TARGET_BIN)
    assert m, f"no mapping of {TARGET_BIN}: {[x['file'] for x in tgt['mappings']]}"
    assert hot_named(tgt), "the target container's binary was not symbolized"
    log(f"target container: {TARGET_BIN} {m}")
    assert r.root_ro, "the root filesystem is not read-only"
    assert r.diff == [], f"the agent wrote to its root filesystem: {r.diff}"


def seccomp_of(c):
    return ((c.get("securityContext") or {}).get("seccompProfile") or {}).get("type", "RuntimeDefault")


# What the kernel says to the agent's container, run in it for the log
# ({pid}: the target container's process, a host PID).
EVIDENCE = {
    "SYS_ADMIN": [["head", "-c", "4", "/proc/{pid}/map_files/{map_range}"]],
    "SYS_PTRACE": [["ls", "/proc/{pid}/root/"], ["cat", "/proc/1/maps"]],
    "DAC_READ_SEARCH": [["ls", f"/proc/{{pid}}/root/opt/{TARGET_BIN_NAME}"]],
    "SYSLOG": [["head", "-n", "1", "/proc/kallsyms"]],
}


# The default seccomp profile of podman (containers.conf's seccomp_profile,
# default: containers-common's).
SECCOMP_PROFILES = ("/etc/containers/seccomp.json", "/usr/share/containers/seccomp.json")


def default_profile_allows(syscall, cap):
    """Whether podman's default seccomp profile lets syscall through for a
    process holding cap but not CAP_SYS_ADMIN."""
    path = next((p for p in SECCOMP_PROFILES if os.path.exists(p)), None)
    assert path, f"podman's default seccomp profile: none of {SECCOMP_PROFILES}"
    with open(path) as f:
        profile = json.load(f)
    for rule in profile.get("syscalls") or ():
        if syscall not in rule.get("names", ()) or rule.get("action") != "SCMP_ACT_ALLOW" or rule.get("args"):
            continue
        need = (rule.get("includes") or {}).get("caps") or []
        unless = (rule.get("excludes") or {}).get("caps") or []
        if (not need or cap in need) and cap not in unless and "CAP_SYS_ADMIN" not in need:
            return True
    return False


def check_bpf_eperm(r, what):
    """The agent exits: its BPF load fails with EPERM."""
    assert not r.ready and r.exit_code != 0, f"the agent ran {what}"
    assert "Failed to load the BPF sampler: Operation not permitted" in r.logs, r.logs[-3000:]


def check_without(cap, r):
    """What the manifest's comment says fails without cap."""
    log(f"without {cap} ({r.seccomp}): ready {r.ready}, sysctls {r.applied}, exit {r.exit_code}")
    if cap == "SYS_ADMIN":
        # Whatever the seccomp profile: without SYS_ADMIN (and without BPF
        # and PERFMON, which the DaemonSet does not add) bpf() is refused,
        # by podman's default profile (CAP_SYS_ADMIN only) and by the
        # kernel (bpf_capable()).
        check_bpf_eperm(r, f"without SYS_ADMIN under {r.seccomp}")
    elif cap == "SYS_PTRACE":
        assert r.ready, r.logs[-3000:]
        assert unnamed(r.host_report()) and unnamed(r.target_report()), \
            "symbolized processes with more capabilities / of another user without SYS_PTRACE"
    elif cap == "DAC_READ_SEARCH":
        assert r.ready, r.logs[-3000:]
        tgt = r.target_report()
        assert mapping(tgt, TARGET_BIN), [x["file"] for x in tgt["mappings"]]
        assert unnamed(tgt), "read another user's 0700 directory without DAC_READ_SEARCH"
        cgproflib.assert_shares(r.host_report())
    elif cap == "SYSLOG":
        assert r.ready and r.applied["kernel.kptr_restrict"] == r.want["kernel.kptr_restrict"], r.applied
        kernel, named = kernel_frames(r.kernel_report())
        log(f"kernel frames: {len(kernel)}, e.g. {kernel[:3]}")
        assert kernel and not named, f"kernel frames named without SYSLOG: {named[:3]}"
        cgproflib.assert_shares(r.host_report())
    else:
        raise AssertionError(f"no expectation for {cap}")


def check_instead(extra, r):
    """BPF and PERFMON (extra: CHECKPOINT_RESTORE too) in SYS_ADMIN's
    place: the path the manifest documents for a seccomp profile that
    allows bpf() for CAP_BPF."""
    log(f"BPF+PERFMON{''.join('+' + x for x in extra)} instead of SYS_ADMIN ({r.seccomp}): ready {r.ready}, "
        f"sysctls {r.applied}, exit {r.exit_code}")
    if r.seccomp == "RuntimeDefault" and not (default_profile_allows("bpf", "CAP_BPF")
                                              and default_profile_allows("perf_event_open", "CAP_PERFMON")):
        # podman's profile: bpf() and perf_event_open() for CAP_SYS_ADMIN
        # only, whatever else the container holds.
        check_bpf_eperm(r, "with BPF and PERFMON but not SYS_ADMIN under RuntimeDefault")
        return
    assert r.ready and r.exit_code == 0, r.logs[-3000:]
    # kptr_restrict: the kernel takes CAP_SYS_ADMIN to write it; the rest of
    # machineConfig applies.
    assert r.applied["kernel.kptr_restrict"] == r.orig["kernel.kptr_restrict"], r.applied
    assert r.applied["kernel.perf_event_mlock_kb"] == r.want["kernel.perf_event_mlock_kb"], r.applied
    assert "Failed to apply machineConfig: Operation not permitted" in r.logs, r.logs[-3000:]
    assert hot_named(r.target_report())
    kernel, named = kernel_frames(r.kernel_report())
    assert named, f"no kernel frame named: {kernel[:5]}"
    if "CHECKPOINT_RESTORE" in extra:
        # map_files takes CAP_SYS_ADMIN or, on kernels >= 5.9,
        # CAP_CHECKPOINT_RESTORE.
        cgproflib.assert_shares(r.host_report())
        assert hot_named(r.host_report()), "a deleted binary was not symbolized with CHECKPOINT_RESTORE"
    else:
        assert unnamed(r.host_report()), "a deleted binary was symbolized without map_files"


def kernel_at_least(major, minor):
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return (int(m.group(1)), int(m.group(2))) >= (major, minor)


def main():
    cgproflib.require_root()
    if not shutil.which("podman"):
        skip_prereq("podman not installed (scripts/deps)")
    if not shutil.which(RUNTIME):
        skip_prereq(f"OCI runtime {RUNTIME} not installed")
    r = subprocess.run(["podman", "--runtime", RUNTIME, "info"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        skip(f"podman cannot run here: {r.stderr.strip()[-300:]}")
    cgproflib.require_kustomize()  # it builds the manifests' kustomizations
    ds, config = kustomized()
    c = ds["spec"]["template"]["spec"]["containers"][0]
    caps = c["securityContext"]["capabilities"]["add"]
    # The DaemonSet leaves out BPF and PERFMON: SYS_ADMIN implies them (the
    # runs below show it, and what they would and would not replace).
    assert not {"BPF", "PERFMON", "CAP_BPF", "CAP_PERFMON"} & set(caps), \
        f"the DaemonSet adds BPF or PERFMON, which SYS_ADMIN implies: {caps}"
    failures = []
    target = None
    tmp = tempfile.mkdtemp(prefix="cgprof-images-")
    t0 = time.monotonic()
    try:
        build_images(tmp)
        target = Target()

        def test(name, fn):
            log(f"=== {name}")
            try:
                fn()
                log(f"--- {name}: ok")
            except Exception:
                import traceback
                traceback.print_exc()
                log(f"--- {name}: FAILED")
                failures.append(name)

        test("image", check_image)

        def run(name, caps=None, seccomp=None, evidence=(), check=None):
            r = Run(name, ds, config, target, caps=caps, seccomp=seccomp, evidence=evidence).go()
            try:
                check(r)
            finally:
                r.remove()

        test("daemonset", lambda: run("full", check=check_full))
        # podman's default seccomp profile instead of the manifest's.
        other = "RuntimeDefault" if seccomp_of(c) == "Unconfined" else "Unconfined"
        test(f"seccomp {other}", lambda: run(other.lower(), seccomp=other, check=check_full))
        for cap in caps:
            without = [x for x in caps if x != cap]
            test(f"without {cap}",
                 lambda cap=cap, without=without: run(cap.lower(), caps=without, evidence=EVIDENCE.get(cap, ()),
                                                      check=lambda r: check_without(cap, r)))
            if cap != "SYS_ADMIN":
                continue
            test(f"without SYS_ADMIN, {other}",
                 lambda without=without: run("sys_admin-" + other.lower(), caps=without, seccomp=other,
                                             check=lambda r: check_without("SYS_ADMIN", r)))
            # BPF and PERFMON in its place (the manifest's note): under
            # both profiles, then with CHECKPOINT_RESTORE for map_files.
            instead = [(seccomp, []) for seccomp in ("RuntimeDefault", "Unconfined")]
            if kernel_at_least(5, 9):
                instead.append(("Unconfined", ["CHECKPOINT_RESTORE"]))
            for seccomp, extra in instead:
                name = "bpf-perfmon" + "".join("-" + x.lower() for x in extra) + "-" + seccomp.lower()
                test(f"BPF+PERFMON{''.join('+' + x for x in extra)} instead of SYS_ADMIN, {seccomp}",
                     lambda extra=extra, seccomp=seccomp, name=name, without=without: run(
                         name, caps=without + ["BPF", "PERFMON"] + extra, seccomp=seccomp,
                         evidence=EVIDENCE["SYS_ADMIN"], check=lambda r: check_instead(extra, r)))
    finally:
        if target:
            target.remove()
        for img in (IMAGE, TARGET_IMAGE):
            podman("rmi", "-f", img, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"test_container: {time.monotonic() - t0:.0f} s")
    if failures:
        log("FAILED: " + ", ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
