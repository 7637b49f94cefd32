#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cgprofd inside the sandbox of cgprofd.service. systemd is not PID 1 on
the test machine, so the unit cannot be started; its settings that could
break the agent are applied here with the kernel mechanisms systemd uses,
read from the unit meson makes (build/systemd/cgprofd.service) and, for
Kubernetes mode, its drop-in (build/systemd/kubernetes.conf), merged as
systemd merges them (an empty assignment resets a list, later lines add to
it, the last value of a single-valued setting wins):
- CapabilityBoundingSet= (PR_CAPBSET_DROP), NoNewPrivileges=, UMask=,
  LimitNOFILE= and LimitMEMLOCK=;
- SystemCallFilter= and SystemCallErrorNumber=: a seccomp filter (libseccomp)
  allowing @default, the listed syscalls and groups, minus the ~ ones, each
  group as `systemd-analyze syscall-filter` expands it; other calls fail
  with EPERM;
- RestrictAddressFamilies=: a second seccomp filter, built as systemd builds
  it: socket() with a family not in the list fails with EAFNOSUPPORT;
- PrivateNetwork=yes: a network namespace of its own;
- MemoryDenyWriteExecute= (PR_SET_MDWE, the same rule, on kernels >= 6.3);
- ProtectProc=invisible (a procfs with hidepid=invisible); ReadOnlyPaths=
  and ReadWritePaths= under /proc and /sys (bind mounts, read-only
  recursively); ProtectHome=yes (empty /home, /root, /run/user);
- the mode the unit's ExecStart= runs the agent in: --no-kubernetes, or
  --kubeconfig (the test's kubeconfig for the unit's path).
In the unit's sandbox, socket() refuses AF_INET and AF_INET6, and the agent
must start, apply a machineConfig sysctl, profile a workload of another
user run from a 0700 directory under /home with its user frames and kernel
frames named, write the report, and restore the sysctl when it stops. In
the sandbox of the unit and the drop-in, the agent must reach a real
kube-apiserver on 127.0.0.1 and profile a labelled namespace's pod, whose
report it writes when the pod is deleted; in the unit's sandbox alone, the
same agent does not get through. ProtectSystem=, PrivateTmp=,
PrivateDevices=, IPAddressDeny= and the rest are not reproduced (the test's
own files live in /tmp)."""

import ctypes
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

SELF = os.path.abspath(__file__)
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_MDWE = 24, 38, 47, 4, 65
PR_MDWE_REFUSE_EXEC_GAIN = 1
SCMP_ACT_ALLOW, SCMP_ACT_ERRNO = 0x7fff0000, 0x00050000
SCMP_CMP_LT, SCMP_CMP_EQ, SCMP_CMP_GT = 2, 4, 6
# What probe() tries to open.
PROBED_FAMILIES = ("AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET")


class ScmpArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def probe():
    """What a process sees of the network: {"families": {AF_name: 0 or the
    errno of socket()}, "netns": its network namespace}."""
    families = {}
    for name in PROBED_FAMILIES:
        try:
            socket.socket(getattr(socket, name), socket.SOCK_DGRAM).close()
            families[name] = 0
        except OSError as e:
            families[name] = e.errno
    return {"families": families, "netns": os.readlink("/proc/self/ns/net")}


def restrict_address_families(seccomp, families):
    """RestrictAddressFamilies= (an allow list) as systemd's
    seccomp_restrict_address_families() builds it: a filter of its own in
    which socket() fails with EAFNOSUPPORT for a family below the lowest
    allowed, above the highest, or one of the gaps between them."""
    ctx = seccomp.seccomp_init(SCMP_ACT_ALLOW)
    assert ctx
    nr = seccomp.seccomp_syscall_resolve_name(b"socket")
    refuse = SCMP_ACT_ERRNO | errno.EAFNOSUPPORT

    def rule(op, family):
        cmp = ScmpArgCmp(0, op, family, 0)
        r = seccomp.seccomp_rule_add_array(ctx, refuse, nr, 1, ctypes.byref(cmp))
        assert r == 0, f"seccomp_rule_add_array: {r}"

    if not families:
        assert seccomp.seccomp_rule_add(ctx, refuse, nr, 0) == 0
    else:
        lo, hi = min(families), max(families)
        rule(SCMP_CMP_LT, lo)
        rule(SCMP_CMP_GT, hi)
        for f in range(lo + 1, hi):
            if f not in families:
                rule(SCMP_CMP_EQ, f)
    r = seccomp.seccomp_load(ctx)
    assert r == 0, f"seccomp_load: {r}"


def exec_sandboxed(spec_path, argv):
    """Runs in the agent's process (already in its own mount namespace, and
    network namespace if PrivateNetwork=yes): sets the sandbox up, then
    execs argv, or with argv None prints what probe() sees as JSON and
    exits. (Python may live under /root, which the sandbox hides:
    everything is imported first.)"""
    import resource

    with open(spec_path) as f:
        spec = json.load(f)

    def sh(*a):
        subprocess.run(a, check=True)

    sh("mount", "--make-rprivate", "/")
    if spec["protect_proc"]:
        sh("mount", "-t", "proc", "-o", f"nosuid,nodev,noexec,hidepid={spec['protect_proc']}", "proc", "/proc")
    for p in spec["read_only"]:
        if not os.path.exists(p):
            continue
        if not os.path.ismount(p):
            sh("mount", "--bind", p, p)
        with open("/proc/self/mountinfo") as f:
            points = [l.split()[4] for l in f]
        for mp in points:
            if mp == p or mp.startswith(p + "/"):
                subprocess.run(["mount", "-o", "remount,bind,ro", mp], stderr=subprocess.DEVNULL)
    for p in spec["read_write"]:
        if os.path.exists(p):
            sh("mount", "--bind", p, p)
            sh("mount", "-o", "remount,bind,rw", p)
    for p in spec["inaccessible"]:
        if os.path.isdir(p):
            sh("mount", "-t", "tmpfs", "-o", "mode=0000", "tmpfs", p)

    for res, v in spec["limits"].items():
        v = resource.RLIM_INFINITY if v == -1 else v
        try:
            resource.setrlimit(getattr(resource, res), (v, v))
        except ValueError:
            # No CAP_SYS_RESOURCE here to raise the hard limit (systemd, as
            # PID 1, has it): the highest allowed will do.
            hard = resource.getrlimit(getattr(resource, res))[1]
            print(f"sandbox: {res} stays at {hard}, not {v}", file=sys.stderr)
            resource.setrlimit(getattr(resource, res), (hard, hard))
    os.umask(int(spec["umask"], 8))

    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libcap = ctypes.CDLL("libcap.so.2", use_errno=True)
    keep = set()
    for name in spec["capabilities"]:
        v = ctypes.c_int()
        assert libcap.cap_from_name(name.lower().encode(), ctypes.byref(v)) == 0, name
        keep.add(v.value)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if cap not in keep and prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap}")
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if spec["no_new_privileges"] and prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if spec["memory_deny_write_execute"] and prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        print("sandbox: no PR_SET_MDWE on this kernel: MemoryDenyWriteExecute= not reproduced", file=sys.stderr)

    seccomp = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    seccomp.seccomp_init.restype = ctypes.c_void_p
    seccomp.seccomp_init.argtypes = [ctypes.c_uint32]
    seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    seccomp.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    seccomp.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                               ctypes.POINTER(ScmpArgCmp)]
    seccomp.seccomp_load.argtypes = [ctypes.c_void_p]
    # First: the syscall filter below may not allow seccomp() itself.
    if spec["address_families"] is not None:
        restrict_address_families(seccomp, spec["address_families"])
    ctx = seccomp.seccomp_init(SCMP_ACT_ERRNO | (spec["errno"] & 0xffff))
    assert ctx
    for name in spec["syscalls"]:
        nr = seccomp.seccomp_syscall_resolve_name(name.encode())
        if nr >= 0:
            seccomp.seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)
    r = seccomp.seccomp_load(ctx)
    assert r == 0, f"seccomp_load: {r}"
    if argv is None:
        print(json.dumps(probe()), flush=True)
        sys.exit(0)
    os.execv(argv[0], argv)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] in ("--exec", "--probe"):
    exec_sandboxed(sys.argv[2], sys.argv[4:] if sys.argv[1] == "--exec" else None)

from cgproflib import (BUILD, HOT, WORKLOAD, Agent, Cgroup, folded, log, main, profile, read_sysctl,
                       skip, skip_prereq, wait_for, workload, write_sysctl)  # noqa: E402
from kubelib import KubeCgroups, KubeCluster, new_container_id  # noqa: E402
from systemdlib import DROPIN, merge_units, run, unit_value, unit_values  # noqa: E402

UNIT_FILE = os.path.join(BUILD, "systemd", "cgprofd.service")
DROPIN_FILE = os.path.join(BUILD, "systemd", DROPIN)
NOBODY = 65534
groups = {}


def expand(item):
    """A syscall name, or a group's names as systemd-analyze lists them."""
    if not item.startswith("@"):
        return {item}
    if item not in groups:
        out = set()
        for line in run(["systemd-analyze", "syscall-filter", item]).stdout.splitlines()[1:]:
            line = line.strip()
            if line and not line.startswith("#"):
                out |= expand(line)
        groups[item] = out
    return groups[item]


def sandbox_spec(unit, *dropins):
    """What the unit and its drop-ins ask for, in the form exec_sandboxed()
    applies."""
    entries = merge_units(unit, *dropins)

    def values(key):
        return [w for v in unit_values(entries, key) for w in v.split()]

    def flag(key):
        return unit_value(entries, key, "no") == "yes"

    # SystemCallFilter=: an allow list (the first line is not ~) starts from
    # @default; each line then adds or (with ~) removes, in order.
    allowed = set()
    for i, line in enumerate(unit_values(entries, "SystemCallFilter")):
        deny = line.startswith("~")
        assert i > 0 or not deny, "the unit's SystemCallFilter= is a deny list: this test expects an allow list"
        if i == 0:
            allowed |= expand("@default")
        for item in line.lstrip("~").split():
            allowed = allowed - expand(item) if deny else allowed | expand(item)
    err = unit_value(entries, "SystemCallErrorNumber", "EPERM")
    proc_sys = [p.lstrip("-") for p in values("ReadWritePaths") if p.lstrip("-").startswith(("/proc", "/sys"))]
    limits = {}
    for key, res in (("LimitNOFILE", "RLIMIT_NOFILE"), ("LimitMEMLOCK", "RLIMIT_MEMLOCK")):
        for v in unit_values(entries, key):
            limits[res] = -1 if v == "infinity" else int(v)  # RLIM_INFINITY
    protect_home = unit_value(entries, "ProtectHome", "no")
    protect_proc = unit_value(entries, "ProtectProc", "")
    umask = unit_value(entries, "UMask", "0022")
    # RestrictAddressFamilies=: an allow list, the union of its lines (None:
    # not set, every family).
    families = None
    if unit_values(entries, "RestrictAddressFamilies"):
        assert not any(v.startswith("~") for v in unit_values(entries, "RestrictAddressFamilies")), \
            "the unit's RestrictAddressFamilies= is a deny list: this test expects an allow list"
        families = sorted({getattr(socket, f) for f in values("RestrictAddressFamilies")})
    (exec_start,) = unit_values(entries, "ExecStart")
    return {
        "capabilities": values("CapabilityBoundingSet"),
        "no_new_privileges": flag("NoNewPrivileges"),
        "memory_deny_write_execute": flag("MemoryDenyWriteExecute"),
        "syscalls": sorted(allowed),
        "errno": getattr(errno, err),
        "protect_proc": "" if protect_proc in ("", "default") else protect_proc,
        "read_only": [p.lstrip("-") for p in values("ReadOnlyPaths") if p.lstrip("-").startswith(("/proc", "/sys"))],
        "read_write": proc_sys,
        "inaccessible": ["/home", "/root", "/run/user"] if protect_home == "yes" else [],
        "limits": limits,
        "umask": umask,
        "address_families": families,
        "private_network": flag("PrivateNetwork"),
        "exec_start": exec_start.split(),
    }


def mode_args(spec, kubeconfig=None):
    """The options of the unit's ExecStart= that choose the agent's mode:
    --no-kubernetes, or --kubeconfig with `kubeconfig` for the unit's file.
    (The config, state directory and control socket are the test's own.)"""
    out, argv = [], spec["exec_start"][1:]
    while argv:
        a = argv.pop(0)
        if a in ("--config", "--state-dir"):
            argv.pop(0)
        elif a == "--kubeconfig":
            argv.pop(0)
            assert kubeconfig, "the unit runs the agent in Kubernetes mode"
            out += [a, kubeconfig]
        else:
            out.append(a)
    return out


def unshare(spec):
    return ["unshare", "-m"] + (["-n"] if spec["private_network"] else [])


def check_sockets(spec):
    """Inside the sandbox, socket() refuses exactly the families outside
    RestrictAddressFamilies= with EAFNOSUPPORT (the others work as they do
    here), and the network namespace is private iff PrivateNetwork=yes."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(spec, f)
        f.flush()
        r = run([*unshare(spec), sys.executable, SELF, "--probe", f.name])
    inside, outside = json.loads(r.stdout), probe()
    log(f"socket() here: {outside['families']}; in the sandbox: {inside['families']}")
    for name, err in outside["families"].items():
        allowed = spec["address_families"] is None or getattr(socket, name) in spec["address_families"]
        want = err if allowed else errno.EAFNOSUPPORT
        assert inside["families"][name] == want, \
            f"socket({name}) in the sandbox: {inside['families'][name]}, want {want} (here: {err})"
    assert (inside["netns"] != outside["netns"]) == spec["private_network"], (inside["netns"], outside["netns"])


class SandboxedAgent(Agent):
    """The agent in the sandbox of spec, in the mode its ExecStart= says."""

    def __init__(self, config, spec, kubeconfig=None):
        super().__init__(config)
        self.spec = spec
        self.mode = mode_args(spec, kubeconfig)
        self.spec_path = os.path.join(self.tmp, "sandbox.json")
        with open(self.spec_path, "w") as f:
            json.dump(spec, f)

    def argv(self):
        agent = [a for a in super().argv() if a != "--no-kubernetes"] + self.mode
        return [*unshare(self.spec), sys.executable, SELF, "--exec", self.spec_path, "--", *agent]


def test_agent_in_sandbox():
    if not os.path.isfile(UNIT_FILE):
        skip(f"no {UNIT_FILE}")
    for tool in ("systemd-analyze", "unshare"):
        if shutil.which(tool) is None:
            skip_prereq(f"no {tool}")
    spec = sandbox_spec(UNIT_FILE)
    log("sandbox:", json.dumps({k: v for k, v in spec.items() if k != "syscalls"}), f"{len(spec['syscalls'])} syscalls")
    assert "bpf" in spec["syscalls"] and "perf_event_open" in spec["syscalls"]
    assert spec["address_families"] == [socket.AF_UNIX] and spec["private_network"], spec
    assert mode_args(spec) == ["--no-kubernetes"], spec["exec_start"]
    if not os.path.isdir("/home"):
        skip("no /home")
    check_sockets(spec)

    # The workload: another user's binary in a 0700 directory under /home,
    # which the sandbox hides from the agent.
    home = tempfile.mkdtemp(prefix="cgprof-sandbox-", dir="/home")
    binary = os.path.join(home, "workload")
    shutil.copy(WORKLOAD, binary)
    for p, mode in ((home, 0o700), (binary, 0o700)):
        os.chown(p, NOBODY, NOBODY)
        os.chmod(p, mode)

    cg = Cgroup(f"cgprof-test-sandbox-{os.getpid()}")
    sysctl = "kernel.perf_event_mlock_kb"
    original = read_sysctl(sysctl)
    want = str(int(original) + 4)
    agent = SandboxedAgent({
        "machineConfig": [{"name": "kernel.perf_event_mlock_kb", "value": want}],
        "profiles": [profile(name="sandboxed", kernelStacks=True)],
        "targets": [{"name": "st", "profileRef": "sandboxed", "cgroupPatterns": [cg.rel]}],
    }, spec)
    procs = []
    try:
        agent.start()
        assert read_sysctl(sysctl) == want, "machineConfig was not applied through the sandbox"

        def as_nobody():
            with open(os.path.join(cg.path, "cgroup.procs"), "w") as f:
                f.write("0")
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

        def in_cgroup():
            with open(os.path.join(cg.path, "cgroup.procs"), "w") as f:
                f.write("0")

        procs.append(subprocess.Popen([binary, "--seconds", "2", "--name", "sandbox-work"], preexec_fn=as_nobody,
                                      stdout=subprocess.DEVNULL))
        # Time in the kernel, for kernel frames.
        procs.append(subprocess.Popen(["timeout", "2", "dd", "if=/dev/zero", "of=/dev/null", "bs=64k"],
                                      preexec_fn=in_cgroup, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for p in procs:
            p.wait(60)
        assert procs[0].returncode == 0, procs[0].returncode
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        stacks = folded(report)
        work = {st: c for st, c in stacks.items() if st[0] == "sandbox-work"}
        log(f"{sum(stacks.values())} samples, {sum(work.values())} of sandbox-work")
        assert any("hot_alpha" in st for st in work), \
            "the other user's binary under /home was not symbolized:\n" + "\n".join(map(";".join, list(work)[:5]))
        kernel = [f for st in stacks for f in st if f.endswith("_[k]")]
        named = [f for f in kernel if not f.startswith("[")]
        log(f"kernel frames: {len(kernel)}, named: {len(named)}, e.g. {named[:3]}")
        assert named, f"no kernel frame was named: {kernel[:5]}"
        assert agent.stop() == 0
        assert read_sysctl(sysctl) == original, "machineConfig was not restored through the sandbox"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        agent.cleanup()
        cg.remove()
        shutil.rmtree(home, ignore_errors=True)
        write_sysctl(sysctl, original)


def test_agent_in_kubernetes_sandbox():
    for f in (UNIT_FILE, DROPIN_FILE):
        if not os.path.isfile(f):
            skip(f"no {f}")
    for tool in ("systemd-analyze", "unshare"):
        if shutil.which(tool) is None:
            skip_prereq(f"no {tool}")
    spec = sandbox_spec(UNIT_FILE, DROPIN_FILE)
    log("sandbox:", json.dumps({k: v for k, v in spec.items() if k != "syscalls"}), f"{len(spec['syscalls'])} syscalls")
    # The drop-in's settings, merged into the unit's: its ExecStart= replaced
    # the unit's, its families were added to AF_UNIX, PrivateNetwork= is off.
    assert spec["syscalls"] == sandbox_spec(UNIT_FILE)["syscalls"]
    assert spec["address_families"] == sorted([socket.AF_UNIX, socket.AF_INET, socket.AF_INET6]), spec
    assert not spec["private_network"], spec
    check_sockets(spec)

    # The node: the host name, as the drop-in leaves it (or $NODE_NAME, which
    # the agent inherits from the test, as it would from Environment=).
    node = os.environ.get("NODE_NAME") or socket.gethostname()
    config = {"enableDefault": True, "defaultProfileRef": "k8s", "profiles": [profile(name="k8s")]}
    with KubeCluster() as kc, KubeCgroups(driver="systemd") as cgs:
        assert mode_args(spec, kc.kubeconfig) == ["--kubeconfig", kc.kubeconfig], spec["exec_start"]
        kc.create_namespace("sandboxed", labels={"cgprof.io/profile": "enabled"})
        pod = kc.create_pod("sandboxed", "web-0", node, qos="burstable")
        cid = new_container_id()
        cg = cgs.container_for(pod, cid)
        proc = workload(cg, 60, name="web-0")
        kc.set_pod_running("sandboxed", "web-0", {"main": cid})
        agents = []
        try:
            # The control: in the unit's sandbox alone (its own network, no
            # AF_INET), the same agent in Kubernetes mode does not get
            # through to the API server.
            base = SandboxedAgent(dict(config), sandbox_spec(UNIT_FILE))
            agents.append(base)
            base.mode = mode_args(spec, kc.kubeconfig)
            base.start()
            st = wait_for(lambda: (lambda k: k if k["podWatch"]["lastError"] else None)(base.status()["kubernetes"]),
                          what="the pod watch's error in the unit's sandbox")
            log(f"in the unit's sandbox alone: {st}")
            assert not st["podWatch"]["synced"] and st["pods"] == 0 and base.status()["sessions"] == [], st
            assert base.stop() == 0

            agent = SandboxedAgent(dict(config), spec, kubeconfig=kc.kubeconfig)
            agents.append(agent)
            agent.start()
            s = wait_for(lambda: next((x for x in agent.status()["sessions"]
                                       if x.get("pod") == "web-0" and x["samples"] > 0), None),
                         timeout=60, what="samples of the pod's container")
            assert s["namespace"] == "sandboxed" and s["containerId"] == cid and s["cgroup"] == cg.rel, s
            k = agent.status()["kubernetes"]
            assert k["server"] == kc.server and k["podWatch"]["synced"] and k["namespaceWatch"]["synced"], k
            # Deleting the pod ends its session, which writes the report.
            kc.delete_pod("sandboxed", "web-0")
            r = agent.wait_summary(lambda x: x.get("pod") == "web-0", what="the report of sandboxed/web-0")
            assert r["namespace"] == "sandboxed" and r["container"] == "main" and r["containerId"] == cid, r
            assert r["node"] == node and r["endReason"] == "pod-deleted", r
            rel = os.path.relpath(r["_dir"], agent.report_dir).split("/")
            assert rel[:3] == ["sandboxed", "web-0", "main"], rel
            stacks = folded(r)
            log(f"{sum(stacks.values())} samples; leaves: {sorted({st[-1] for st in stacks})[:10]}")
            assert all(any(st[-1] == h for st in stacks) for h in HOT), "the workload's functions are not named"
            assert agent.stop() == 0
        finally:
            proc.kill()
            proc.wait()
            for a in agents:
                a.cleanup()


if __name__ == "__main__":
    main([test_agent_in_sandbox, test_agent_in_kubernetes_sandbox])
