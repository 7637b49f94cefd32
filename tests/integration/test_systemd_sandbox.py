#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cgprofd inside the sandbox of cgprofd.service. systemd is not PID 1 on
the test machine, so the unit cannot be started; its settings that could
break the agent are applied here with the kernel mechanisms systemd uses,
read from the unit meson installs (build/systemd/cgprofd.service):
- CapabilityBoundingSet= (PR_CAPBSET_DROP), NoNewPrivileges=, UMask=,
  LimitNOFILE= and LimitMEMLOCK=;
- SystemCallFilter= and SystemCallErrorNumber=: a seccomp filter (libseccomp)
  allowing @default, the listed syscalls and groups, minus the ~ ones, each
  group as `systemd-analyze syscall-filter` expands it; other calls fail
  with EPERM;
- MemoryDenyWriteExecute= (PR_SET_MDWE, the same rule, on kernels >= 6.3);
- ProtectProc=invisible (a procfs with hidepid=invisible); ReadOnlyPaths=
  and ReadWritePaths= under /proc and /sys (bind mounts, read-only
  recursively); ProtectHome=yes (empty /home, /root, /run/user).
Then the agent must start, apply a machineConfig sysctl, profile a workload
of another user run from a 0700 directory under /home with its user frames
and kernel frames named, write the report, and restore the sysctl when it
stops. ProtectSystem=, PrivateTmp=, PrivateDevices=, PrivateNetwork= and the
rest are not reproduced (the test's own files live in /tmp)."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

SELF = os.path.abspath(__file__)
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_MDWE = 24, 38, 47, 4, 65
PR_MDWE_REFUSE_EXEC_GAIN = 1
SCMP_ACT_ALLOW = 0x7fff0000


def exec_sandboxed(spec_path, argv):
    """Runs in the agent's process (already in its own mount namespace):
    sets the sandbox up, then execs argv. (Python may live under /root,
    which the sandbox hides: everything is imported first.)"""
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
    seccomp.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = seccomp.seccomp_init(0x00050000 | (spec["errno"] & 0xffff))  # SCMP_ACT_ERRNO
    assert ctx
    for name in spec["syscalls"]:
        nr = seccomp.seccomp_syscall_resolve_name(name.encode())
        if nr >= 0:
            seccomp.seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)
    r = seccomp.seccomp_load(ctx)
    assert r == 0, f"seccomp_load: {r}"
    os.execv(argv[0], argv)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--exec":
    exec_sandboxed(sys.argv[2], sys.argv[4:])

import errno  # noqa: E402

from cgproflib import (BUILD, WORKLOAD, Agent, Cgroup, folded, log, main, profile, read_sysctl, skip,
                       write_sysctl)  # noqa: E402
from systemdlib import parse_unit, run, unit_values  # noqa: E402

UNIT_FILE = os.path.join(BUILD, "systemd", "cgprofd.service")
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


def sandbox_spec(unit):
    """What the unit asks for, in the form exec_sandboxed() applies."""
    entries = parse_unit(unit)

    def values(key):
        return [w for v in unit_values(entries, key) for w in v.split()]

    def flag(key):
        return any(v == "yes" for v in unit_values(entries, key))

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
    (err,) = unit_values(entries, "SystemCallErrorNumber") or ["EPERM"]
    proc_sys = [p.lstrip("-") for p in values("ReadWritePaths") if p.lstrip("-").startswith(("/proc", "/sys"))]
    limits = {}
    for key, res in (("LimitNOFILE", "RLIMIT_NOFILE"), ("LimitMEMLOCK", "RLIMIT_MEMLOCK")):
        for v in unit_values(entries, key):
            limits[res] = -1 if v == "infinity" else int(v)  # RLIM_INFINITY
    (protect_home,) = unit_values(entries, "ProtectHome") or ["no"]
    (protect_proc,) = unit_values(entries, "ProtectProc") or [""]
    (umask,) = unit_values(entries, "UMask") or ["0022"]
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
    }


class SandboxedAgent(Agent):
    def __init__(self, config, spec):
        super().__init__(config)
        self.spec_path = os.path.join(self.tmp, "sandbox.json")
        with open(self.spec_path, "w") as f:
            json.dump(spec, f)

    def argv(self):
        return ["unshare", "-m", sys.executable, SELF, "--exec", self.spec_path, "--", *super().argv()]


def test_agent_in_sandbox():
    if not os.path.isfile(UNIT_FILE):
        skip(f"no {UNIT_FILE}")
    for tool in ("systemd-analyze", "unshare"):
        if shutil.which(tool) is None:
            skip(f"no {tool}")
    spec = sandbox_spec(UNIT_FILE)
    log("sandbox:", json.dumps({k: v for k, v in spec.items() if k != "syscalls"}), f"{len(spec['syscalls'])} syscalls")
    assert "bpf" in spec["syscalls"] and "perf_event_open" in spec["syscalls"]
    if not os.path.isdir("/home"):
        skip("no /home")

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


if __name__ == "__main__":
    main([test_agent_in_sandbox])
