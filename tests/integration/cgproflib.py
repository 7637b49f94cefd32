# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers for cgprof's integration tests: run cgprofd as a user does (a
config file, real cgroups, real perf events and BPF, a real journal), run
the test workload in a cgroup, and read the reports back.

Every test exits 77 (skipped) when a facility is missing, saying why on
stdout (skip(), or skip_prereq() for what scripts/deps installs), and cleans up the
cgroups, processes and sysctls it touched."""

import json
import mmap
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
BUILD = os.environ.get("CGPROF_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
CGPROFD = os.path.join(BUILD, "agent", "cgprofd")
CGPROFCTL = os.path.join(BUILD, "agent", "cgprofctl")
WORKLOAD = os.environ.get("CGPROF_WORKLOAD", os.path.join(BUILD, "tests", "cgprof-workload"))
HOT = ("hot_alpha", "hot_beta", "hot_gamma")


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# The test main() runs now: a skip names it.
_current_test = None


def skip(why):
    """Skips (exit 77) for want of something of the machine that no package
    gives: root, a kernel feature, a mount, a namespace. The reason goes to
    stdout, as "SKIP: why", where meson's testlog.json keeps it for
    scripts/test's closing list of skips."""
    _skip("SKIP", why)


def skip_prereq(why):
    """Skips (exit 77) for want of a prerequisite that scripts/deps installs:
    a package, a tool, a fixture built from them, the Kubernetes tests' API
    server. Printed "SKIP (prerequisite): why": with CI=true, scripts/test
    counts it as a failure."""
    _skip("SKIP (prerequisite)", why)


def _skip(marker, why):
    where = f"{_current_test}: " if _current_test else ""
    print(f"{marker}: {where}{why}", flush=True)
    log(f"{marker}: {where}{why}")
    sys.exit(SKIP)


def kustomize_problem():
    """Why kubectl cannot build manifests/' kustomizations (kubectl
    kustomize, apply -k), or None. It must be 1.21 or newer: v1.20's, Debian
    12's only one, has kustomize v2.0.3, which takes no directory in
    `resources`."""
    if not shutil.which("kubectl"):
        return "kubectl not installed (kubernetes-client)"
    r = subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60)
    try:
        v = json.loads(r.stdout)["clientVersion"]
        version = (int(v["major"]), int(re.match(r"\d+", v["minor"]).group()))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AssertionError(f"kubectl version --client -o json: {r.stdout.strip()[-300:]!r} "
                             f"{r.stderr.strip()[-300:]!r}")
    if version < (1, 21):
        return (f"kubectl {v.get('gitVersion')} cannot build manifests/ (its kustomize v2 takes no directory in "
                "resources): put a kubectl of 1.21 or newer first on PATH (Debian 12 has 1.20 only)")
    return None


def require_kustomize():
    """Skips without a kubectl that builds manifests/ (kustomize_problem()):
    none at all is a prerequisite (scripts/deps installs Debian's
    kubernetes-client when none is on PATH), an old one not."""
    why = kustomize_problem()
    if why and not shutil.which("kubectl"):
        skip_prereq(why)
    if why:
        skip(why)


def require_root():
    if os.geteuid() != 0:
        skip("needs root")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        skip("no kernel BTF")


def cgroup_root():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if post.split()[0] == "cgroup2" and pre.split()[3] == "/":
                return pre.split()[4].replace("\\040", " ")
    skip("no cgroup2 mount")


def sysctl_path(name):
    """kernel.perf_event_mlock_kb -> /proc/sys/kernel/perf_event_mlock_kb"""
    return "/proc/sys/" + name.replace(".", "/")


def read_sysctl(name):
    with open(sysctl_path(name)) as f:
        return f.read().strip()


def write_sysctl(name, value):
    with open(sysctl_path(name), "w") as f:
        f.write(str(value) + "\n")


def wait_for(pred, timeout=30.0, what="condition", interval=0.05):
    """Polls pred() until it returns a true value; fails the test after timeout.
    (A bound on waiting, not a timing assertion.)"""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


class Cgroup:
    def __init__(self, rel):
        self.root = cgroup_root()
        self.rel = rel
        self.path = os.path.join(self.root, rel)
        os.makedirs(self.path, exist_ok=True)

    def child(self, name):
        return Cgroup(os.path.join(self.rel, name))

    def kill_all(self):
        for dirpath, dirnames, _ in os.walk(self.path, topdown=False):
            try:
                with open(os.path.join(dirpath, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                pass

    def remove(self):
        """Kills what runs in it and removes it and its children."""
        if not os.path.isdir(self.path):
            return
        self.kill_all()
        for dirpath, dirnames, _ in os.walk(self.path, topdown=False):
            for _ in range(100):
                try:
                    os.rmdir(dirpath)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)

    def usage_usec(self):
        with open(os.path.join(self.path, "cpu.stat")) as f:
            for line in f:
                k, v = line.split()
                if k == "usage_usec":
                    return int(v)
        return 0


# The shell run_in_cgroup() starts programs with: it runs in the cgroup
# for a moment before its exec(), and the agent reports those samples as
# its own process (comm "sh"), as it should.
LAUNCHER = "/bin/sh"
LAUNCHER_COMM = "sh"


def run_in_cgroup(cg, argv, **kw):
    """Starts argv inside cgroup cg: a small shell moves itself into the
    cgroup and execs argv, as a container runtime's init does (a Python
    preexec_fn would run this interpreter in the cgroup for milliseconds
    first, and its samples would be the target's)."""
    procs = os.path.join(cg.path, "cgroup.procs")
    wrapper = [LAUNCHER, "-c", 'echo 0 > "$0" && exec "$@"', procs]
    return subprocess.Popen(wrapper + list(argv), stdout=subprocess.PIPE, **kw)


def workload(cg, seconds, name=None, extra=()):
    argv = [WORKLOAD, "--seconds", str(seconds)]
    if name:
        argv += ["--name", name]
    argv += list(extra)
    p = run_in_cgroup(cg, argv)
    line = p.stdout.readline().decode()
    assert line.startswith("ready"), f"workload did not start: {line!r}"
    return p


def profile(**kw):
    p = {
        "name": "test",
        "event": "cpu-clock",
        "frequency": 999,
        "duration": "0",
        "formats": ["folded", "json"],
    }
    p.update(kw)
    return p


def config_refused(profile_kw, says):
    """cgprofd --check-config refuses a config whose one profile has
    profile_kw (beside profile()'s defaults), saying `says` (the key's path
    and what is wrong); returns the line that says it."""
    agent = Agent({"profiles": [profile(name="bad", **profile_kw)], "targets": []})
    try:
        r = subprocess.run(agent.argv() + ["--check-config"], capture_output=True, text=True, timeout=30)
        out = r.stderr + r.stdout
        assert r.returncode != 0, f"{profile_kw} accepted: {out}"
        assert says in out, (says, out)
        return next(line for line in out.splitlines() if says in line)
    finally:
        agent.cleanup()


class Agent:
    """cgprofd with a config file, a private state dir, report dir and control
    socket. Waits for READY=1 through a real NOTIFY_SOCKET."""

    def __init__(self, config, attach_mode=None, tmp=None, extra_args=(), state_dir=None):
        self.tmp = tmp or tempfile.mkdtemp(prefix="cgprof-test-")
        self.report_dir = config.setdefault("reportDir", os.path.join(self.tmp, "reports"))
        self.state_dir = state_dir or os.path.join(self.tmp, "state")
        self.config_path = os.path.join(self.tmp, "config.json")
        self.bus = os.path.join(self.tmp, "bus")
        self.log_path = os.path.join(self.tmp, "cgprofd.log")
        self.write_config(config)
        self.attach_mode = attach_mode
        self.extra_args = list(extra_args)
        self.proc = None

    def write_config(self, config):
        with open(self.config_path + ".new", "w") as f:
            json.dump(config, f, indent=2)
        os.rename(self.config_path + ".new", self.config_path)

    def argv(self):
        a = [CGPROFD, "--config", self.config_path, "--state-dir", self.state_dir,
             "--bus-socket", self.bus, "--no-kubernetes", "--log-level", "debug"]
        if self.attach_mode:
            a += ["--attach-mode", self.attach_mode]
        return a + self.extra_args

    def start(self, wait_ready=True, preexec_fn=None):
        notify_path = os.path.join(self.tmp, "notify")
        if os.path.exists(notify_path):
            os.unlink(notify_path)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(notify_path)
        # Like systemd, always read the notify socket: a full socket would
        # block the agent's sd_notify().
        self.messages = []
        self.notify_cv = threading.Condition()
        threading.Thread(target=self._read_notify, args=(self.notify,), daemon=True).start()
        env = dict(os.environ, NOTIFY_SOCKET=notify_path)
        self.logf = open(self.log_path, "ab")
        def child_setup():
            # The agent dies with the test, even a SIGKILLed one: no orphans.
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
            if preexec_fn:
                preexec_fn()

        # When it started (CLOCK_REALTIME µs): its journal entries are from
        # then on (journallib.process_journal()).
        self.started_us = time.time_ns() // 1000
        self.proc = subprocess.Popen(self.argv(), stdout=self.logf, stderr=self.logf, env=env,
                                     preexec_fn=child_setup)
        if wait_ready:
            self.wait_notify("READY=1")
        return self

    def _read_notify(self, sock):
        while True:
            try:
                msg = sock.recv(4096).decode()
            except OSError:
                return
            with self.notify_cv:
                self.messages.extend(msg.split("\n"))
                self.notify_cv.notify_all()

    def wait_notify(self, what, timeout=60):
        """Waits for a notify message sent since the last wait for the same one."""
        end = time.monotonic() + timeout
        exited_at = None
        with self.notify_cv:
            while True:
                if what in self.messages:
                    self.messages = self.messages[self.messages.index(what) + 1:]
                    return what
                if self.proc.poll() is not None:
                    # Its last messages may still be in the socket, or read
                    # by the reader thread and not yet listed (a busy
                    # machine): the reader gets them; wait for it a while.
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > 5:
                        raise AssertionError(f"cgprofd exited ({self.proc.returncode}) before {what}:\n{self.log()}")
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"cgprofd did not send {what}:\n{self.log()}")
                self.notify_cv.wait(min(left, 0.2))

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=60):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=timeout)
        rc = self.proc.returncode if self.proc else None
        if rc not in (0, None):
            log(f"cgprofd exited with {rc}; its log ends:\n" + "\n".join(self.log().splitlines()[-80:]))
        return rc

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def ctl(self, *args, check=True):
        r = subprocess.run([CGPROFCTL, "--bus-socket", self.bus, *args], capture_output=True, text=True,
                           timeout=30)
        if check and r.returncode != 0:
            raise AssertionError(f"cgprofctl {args} failed ({r.returncode}): {r.stderr}")
        return r

    def status(self):
        return json.loads(self.ctl("--json", "status").stdout)

    def summaries(self):
        out = []
        for dirpath, _, files in os.walk(self.report_dir):
            if "summary.json" in files:
                with open(os.path.join(dirpath, "summary.json")) as f:
                    s = json.load(f)
                s["_dir"] = dirpath
                out.append(s)
        return out

    def wait_summary(self, pred=lambda s: True, timeout=60, what="a report"):
        return wait_for(lambda: next((s for s in self.summaries() if pred(s)), None), timeout, what)

    def cleanup(self):
        # An agent that exited with an error (or a sanitizer report) on its
        # own: show why before its directory goes.
        rc = self.proc.poll() if self.proc else None
        if rc is not None and rc != 0:
            log(f"cgprofd exited with {rc}; its log ends:\n" + "\n".join(self.log().splitlines()[-80:]))
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


def folded(report):
    """{stack tuple: count} of a report's profile.folded."""
    out = {}
    with open(os.path.join(report["_dir"], "profile.folded")) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            out[tuple(stack.split(";"))] = out.get(tuple(stack.split(";")), 0) + int(count)
    return out


def mapping_of(report, path):
    """summary.json's mappings[] entry of a file (by its real path)."""
    real = os.path.realpath(path)
    for m in report["mappings"]:
        if os.path.realpath(m["file"]) == real:
            return m
    raise AssertionError(f"no mapping for {path}: {[m['file'] for m in report['mappings']]}")


def self_shares(report, names=HOT):
    """Self (leaf) samples of each function as a percentage of all samples."""
    f = folded(report)
    total = sum(f.values())
    assert total > 0, "empty profile"
    return {n: 100.0 * sum(c for st, c in f.items() if st[-1] == n) / total for n in names}, total


def assert_shares(report, expected=(50, 30, 20), tolerance=5):
    shares, total = self_shares(report)
    log(f"shares over {total} samples: " + ", ".join(f"{k} {v:.1f}%" for k, v in shares.items()))
    for name, want in zip(HOT, expected):
        assert abs(shares[name] - want) <= tolerance, f"{name}: {shares[name]:.1f}% is not {want}±{tolerance}%"


def elf_section(path, name):
    """(file offset, size) of a section of a 64-bit little-endian ELF file;
    AssertionError when it has none. Maps the file: only the headers and
    the section names are read (a libtorch_cpu is hundreds of MB)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path} is not a 64-bit LE ELF file"
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

        def sh(i):
            return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)

        strtab = sh(shstrndx)
        for i in range(shnum):
            s = sh(i)
            at = strtab[4] + s[0]
            if data[at:data.find(b"\0", at)].decode() == name:
                return s[4], s[5]
    raise AssertionError(f"{path} has no {name}")


def main(tests):
    """Runs test functions in order; prints a line per test. A test that
    skips (exit 77) does not stop the others, so it cannot hide their
    failures: the file fails if any test failed, else is skipped if any
    test skipped."""
    global _current_test
    require_root()
    failed, skipped = 0, []
    for t in tests:
        log(f"=== {t.__name__}")
        _current_test = t.__name__
        try:
            t()
            log(f"--- {t.__name__}: ok")
        except SystemExit as e:
            if e.code != SKIP:
                raise
            log(f"--- {t.__name__}: skipped")
            skipped.append(t.__name__)
        except Exception:
            import traceback
            traceback.print_exc()
            log(f"--- {t.__name__}: FAILED")
            failed += 1
        finally:
            _current_test = None
    if not failed and skipped:
        log(f"skipped: {', '.join(skipped)}")
    sys.exit(1 if failed else SKIP if skipped else 0)
