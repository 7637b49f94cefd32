#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Off-CPU profiles (profile "events": ["cpu", "offcpu"]): where threads wait
and for how long, per cgroup.

- Designed waits (tests/offcpu/offcpu-workload.c): a thread's 100 ms cycle
  is 30 % on CPU, 30 % in nanosleep(), 20 % blocked reading a pipe, 20 %
  waiting on a contended pthread mutex. On CPU (profile.folded samples x
  period; plus the session's run-queue time for the CPU step, the only
  runnable one) plus off CPU (offcpu.folded, µs) per designed function is
  within ±5 points of that; the total is within 5 % of the thread's measured wall
  time (with the session's run-queue time); each wait has its kernel
  reason (do_nanosleep / hrtimer_nanosleep, pipe_read, futex). pprof has
  the off_cpu/nanoseconds sample type (go tool pprof -sample_index=off_cpu
  reads it), offcpu.svg is drawn, summary.json "offCpu" has the top
  functions and reasons.
- Migration: a thread that sleeps while pinned alternately to CPU 0 and 1
  is off CPU its sleep time (±5 %), never more.
- Python (Debian's python3.11): a thread in queue.Queue.get() and one in
  time.sleep() appear with their Python frames and their kernel reasons.
- Bad input: "events": ["gpu"] and "offCpuMinUsec": -1 are refused with the
  key's path."""

import json
import os
import shutil
import subprocess
import tempfile
import time

from cgproflib import (CGPROFCTL, Agent, BUILD, Cgroup, config_refused, log, main, profile, run_in_cgroup,
                       skip_prereq)

OFFCPU = os.environ.get("CGPROF_OFFCPU_WORKLOAD", os.path.join(BUILD, "tests", "cgprof-offcpu-workload"))
PY_WAITS = os.environ.get("CGPROF_OFFCPU_PY",
                          os.path.join(os.path.dirname(__file__), "..", "offcpu", "py-waits.py"))
PYTHON = "/usr/bin/python3.11"
FREQ = 999
STEPS = ("step_cpu", "step_sleep", "step_pipe", "step_mutex")
KEPT = []  # report copies, removed at the end
DESIGN = {"step_cpu": 30, "step_sleep": 30, "step_pipe": 20, "step_mutex": 20}


def read_folded(report, name):
    out = {}
    with open(os.path.join(report["_dir"], name)) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            key = tuple(stack.split(";"))
            out[key] = out.get(key, 0) + int(count)
    return out


def run_session(cg_name, argv, seconds, extra_args=(), **profile_kw):
    """Runs argv in a new cgroup under a session of an off-CPU profile;
    returns (its report, its stdout lines, the agent's status)."""
    cg = Cgroup(f"{cg_name}-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="waits", events=["cpu", "offcpu"], formats=["folded", "json", "pprof", "svg"],
                             **profile_kw)],
        "targets": [{"name": "t", "profileRef": "waits", "cgroupPatterns": [cg.rel]}],
    }, extra_args=extra_args)
    try:
        agent.start()
        status = agent.status()
        if status.get("offCpu") != "available":
            skip_prereq(f"off-CPU profiling not available here: {status.get('offCpu')}")
        p = run_in_cgroup(cg, argv)
        assert p.stdout.readline().decode().startswith("ready")
        out = p.communicate(timeout=seconds + 60)[0].decode().splitlines()
        assert p.returncode == 0, out
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        assert agent.stop() == 0, agent.log()
        # The report outlives the agent's directory.
        keep = tempfile.mkdtemp(prefix="cgprof-test-offcpu-report-")
        shutil.copytree(report["_dir"], keep, dirs_exist_ok=True)
        KEPT.append(keep)
        report["_dir"] = keep
        return report, out, status
    finally:
        agent.cleanup()
        cg.remove()


def has_frame(stack, *names):
    return any(any(n in f for n in names) for f in stack)


def test_designed_waits():
    """Waits recorded as this kernel lets the agent: by a task work on the
    thread's way back to user mode (kernel 6.18+), else at sys_exit."""
    designed_waits()


def test_designed_waits_sys_exit():
    """The same with waits recorded at sys_exit, as on kernels before 6.18
    (forced where the kernel has the task work)."""
    designed_waits(["--bench-bpf-variant", "offcpu-sys-exit"], "sys_exit")


def designed_waits(extra_args=(), record_at=None):
    report, out, status = run_session("cgprof-test-offcpu", [OFFCPU, "--seconds", "4"], 4, extra_args)
    measured = json.loads(out[-1])
    oc = report["offCpu"]
    log(f"offCpu: {json.dumps({k: v for k, v in oc.items() if k != 'processes'})[:1500]}")
    assert oc["unavailable"] is None and oc["minUsec"] == 1000 and oc["probability"] == 1
    assert oc["recordedWaits"] > 0
    assert oc["recordAt"] == (record_at or status["offCpuRecordAt"]), (oc["recordAt"], status)
    log(f"waits recorded at {oc['recordAt']}: {oc['recordedWaits']}, of which "
        f"{oc['recordedAtSwitchOut']} at a later switch-out")
    check_designed_shares(report, measured)
    reasons = [r["name"] for r in oc["topKernelReasons"][:6]]
    assert any("nanosleep" in r for r in reasons) and any("pipe_read" in r for r in reasons) and \
        any("futex" in r for r in reasons), reasons
    assert "offcpu.folded" in report["files"] and "offcpu.svg" in report["files"], report["files"]
    with open(os.path.join(report["_dir"], "offcpu.svg")) as f:
        svg = f.read()
    assert "off CPU" in svg and "step_sleep" in svg
    check_pprof(report)
    check_wallclock(report, measured)
    check_rerender(report)


def check_rerender(report):
    """cgprofctl report re-renders the report from profile.pb.gz: summary.json
    keeps its "offCpu" counts and "wallClock" threads, offcpu.* are written
    again from pprof's off_cpu values (the same stacks), and the wall-clock
    files (per thread: not in pprof) are kept and still listed."""
    d = tempfile.mkdtemp(prefix="cgprof-test-offcpu-rerender-")
    KEPT.append(d)
    shutil.copytree(report["_dir"], d, dirs_exist_ok=True)
    os.remove(os.path.join(d, "offcpu.folded"))
    with open(os.path.join(d, "wallclock.folded")) as f:
        wall_before = f.read()
    r = subprocess.run([CGPROFCTL, "report", "--format", "folded,json,pprof,svg", d], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(d, "summary.json")) as f:
        s = json.load(f)
    old, new = report["offCpu"], s.get("offCpu")
    assert new, sorted(s)
    for k in ("minUsec", "probability", "recordedWaits", "recordedSec", "shortSec", "runQueueSec", "recordAt",
              "recordedAtSwitchOut", "unattributedSec"):
        assert new.get(k) == old.get(k), (k, new.get(k), old.get(k))
    assert abs(new["stackedSec"] - old["stackedSec"]) <= 0.001 * old["stackedSec"] + 1e-3, (new, old)
    assert [x["name"] for x in new["topFunctions"][:4]] == [x["name"] for x in old["topFunctions"][:4]]
    assert [x["name"] for x in new["topKernelReasons"][:3]] == [x["name"] for x in old["topKernelReasons"][:3]]
    assert s["wallClock"] == report["wallClock"]
    assert "offcpu.folded" in s["files"] and "wallclock.folded" in s["files"] and "wallclock.svg" in s["files"], \
        s["files"]
    again = read_folded({"_dir": d}, "offcpu.folded")
    before = read_folded(report, "offcpu.folded")
    assert abs(sum(again.values()) - sum(before.values())) <= 0.001 * sum(before.values()), \
        (sum(again.values()), sum(before.values()))
    for step in STEPS[1:]:
        a = sum(c for st, c in again.items() if step in st)
        b = sum(c for st, c in before.items() if step in st)
        assert abs(a - b) <= 0.001 * b + 10, (step, a, b)
    with open(os.path.join(d, "wallclock.folded")) as f:
        assert f.read() == wall_before
    log(f"re-rendered: offCpu and wallClock kept, offcpu.folded {sum(again.values())} µs "
        f"({sum(before.values())} before)")


def check_designed_shares(report, measured):
    """The designed workload's steps: on + off CPU per step within ±5 points
    of the design, each wait with its kernel reason, the worker's on + off
    + run queue within 5 % of its measured wall time."""
    oc = report["offCpu"]
    on = read_folded(report, "profile.folded")
    off = read_folded(report, "offcpu.folded")
    period_us = 1e6 / FREQ
    wall = {}
    for step in STEPS:
        on_us = sum(c for st, c in on.items() if step in st) * period_us
        off_us = sum(c for st, c in off.items() if step in st)
        wall[step] = (on_us, off_us)
    # Waiting for a CPU (preempted, runnable) is not stacked: the session's
    # run-queue time goes to the one step that is runnable, step_cpu (the
    # others block), as a loaded machine stretches it.
    a, b = wall["step_cpu"]
    wall["step_cpu"] = (a + oc["runQueueSec"] * 1e6, b)
    total = sum(a + b for a, b in wall.values())
    worker_on = sum(c for st, c in on.items() if "worker_main" in st) * period_us
    worker_off = sum(c for st, c in off.items() if "worker_main" in st)
    log("wall-clock view: " + ", ".join(f"{k} on {a / 1e3:.0f} ms + off {b / 1e3:.0f} ms" for k, (a, b) in wall.items()))
    log(f"measured (µs): {measured}; worker on+off {(worker_on + worker_off) / 1e3:.0f} ms, "
        f"run queue {oc['runQueueSec'] * 1e3:.0f} ms")
    for step in STEPS:
        share = 100.0 * sum(wall[step]) / total
        assert abs(share - DESIGN[step]) <= 5, f"{step}: {share:.1f}% of the wall-clock view, designed {DESIGN[step]}%"
    # Off CPU, the waiting steps, each with its kernel reason.
    for step, reasons in (("step_sleep", ("nanosleep",)), ("step_pipe", ("pipe_read",)),
                          ("step_mutex", ("futex",))):
        mine = {st: c for st, c in off.items() if step in st}
        with_reason = sum(c for st, c in mine.items() if has_frame(st[st.index(step):], *reasons))
        assert with_reason >= 0.9 * sum(mine.values()), f"{step}: {reasons} in {with_reason} of {sum(mine.values())} µs"
    # The thread's time: on + off + waiting for a CPU is its wall time (±5 %).
    accounted = worker_on + worker_off + oc["runQueueSec"] * 1e6
    assert abs(accounted - measured["worker_wall"]) <= 0.05 * measured["worker_wall"], (accounted, measured)


def wait_record_at(agent, want, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        at = agent.status().get("offCpuRecordAt")
        if at == want:
            return
        assert time.monotonic() < deadline, f"offCpuRecordAt is {at}, not {want}"
        time.sleep(0.1)


def test_way_switch():
    """Where the kernel has the task work: a session that keeps every wait
    (offCpuMinUsec 0) switches the node to sys_exit while it runs, and back
    when it ends; the designed waits of a session running across both keep
    their shares (no wait lost or counted twice at the switches)."""
    cg = Cgroup(f"cgprof-test-offcpu-sw-{os.getpid()}")
    cg0_rel = f"cgprof-test-offcpu-sw0-{os.getpid()}"  # made once the first session runs
    cg0 = None
    agent = Agent({
        "profiles": [profile(name="waits", events=["cpu", "offcpu"], formats=["folded", "json"]),
                     profile(name="every", events=["offcpu"], formats=["json"], offCpuMinUsec=0)],
        "targets": [{"name": "t", "profileRef": "waits", "cgroupPatterns": [cg.rel]},
                    {"name": "t0", "profileRef": "every", "cgroupPatterns": [cg0_rel]}],
    })
    try:
        agent.start()
        status = agent.status()
        if status.get("offCpu") != "available":
            skip_prereq(f"off-CPU profiling not available here: {status.get('offCpu')}")
        if status.get("offCpuRecordAt") != "sys_exit" and status.get("offCpuRecordAt") != "task-work":
            raise AssertionError(f"offCpuRecordAt: {status.get('offCpuRecordAt')}")
        if status["offCpuRecordAt"] == "sys_exit":
            skip_prereq("this kernel has no BPF task work (6.18+): waits are always recorded at sys_exit")
        check = agent.ctl("check").stdout
        assert "Off-CPU profiling: available (waits recorded by a BPF task work" in check, check
        p = run_in_cgroup(cg, [OFFCPU, "--seconds", "5"])
        assert p.stdout.readline().decode().startswith("ready")
        wait_record_at(agent, "task-work")
        time.sleep(1)
        cg0 = Cgroup(cg0_rel)
        assert cg0.rel == cg0_rel, (cg0.rel, cg0_rel)
        p0 = run_in_cgroup(cg0, [OFFCPU, "--ping-pong", "20000"])
        assert p0.stdout.readline().decode().startswith("ready")
        wait_record_at(agent, "sys_exit")
        log("a session with offCpuMinUsec 0 runs: waits recorded at sys_exit")
        assert p0.wait(timeout=120) == 0
        cg0.remove()
        r0 = agent.wait_summary(lambda s: s["cgroup"] == cg0.rel)
        assert r0["offCpu"]["recordAt"] == "sys_exit" and r0["offCpu"]["recordedWaits"] > 1000, r0["offCpu"]
        wait_record_at(agent, "task-work")
        log("it ended: task work again")
        out = p.communicate(timeout=60)[0].decode().splitlines()
        assert p.returncode == 0, out
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        log(f"across the switches: {report['offCpu']['recordedWaits']} waits recorded "
            f"({report['offCpu']['recordedAtSwitchOut']} at a later switch-out)")
        check_designed_shares(report, json.loads(out[-1]))
        assert agent.stop() == 0, agent.log()
    finally:
        agent.cleanup()
        cg.remove()
        if cg0:
            cg0.remove()


def check_wallclock(report, measured):
    """The wall-clock view per thread: the worker and its helper (named
    with pthread_setname_np) each on CPU + off CPU + waiting for a CPU
    within 5 % of its measured wall time, from summary.json "wallClock"
    (the kernel's totals), and from wallclock.folded ("process;thread;...",
    µs: CPU samples x period, waits, [run queue], [short waits])."""
    threads = {t["name"]: t for t in report["wallClock"]["threads"]}
    log("wallClock: " + "; ".join(
        f"{t['name']} ({t['tid']}): on {t['onCpuSec'] * 1e3:.0f} ms, off {t['offCpuSec'] * 1e3:.0f} ms "
        f"(unstacked {t['unstackedSec'] * 1e3:.1f}), run queue {t['runQueueSec'] * 1e3:.1f} ms, "
        f"wall {t['wallSec'] * 1e3:.0f} ms" for t in threads.values()))
    assert "wallclock.folded" in report["files"] and "wallclock.svg" in report["files"], report["files"]
    folded = read_folded(report, "wallclock.folded")
    per_thread = {}
    for st, c in folded.items():
        per_thread[st[1]] = per_thread.get(st[1], 0) + c
    log(f"wallclock.folded per thread (ms): { {k: round(v / 1e3) for k, v in per_thread.items()} }")
    for name, key in (("ow-worker", "worker_wall"), ("ow-helper", "helper_wall")):
        t = threads[name]
        assert t["pid"] != t["tid"], t
        total = t["onCpuSec"] + t["offCpuSec"] + t["runQueueSec"]
        assert abs(total - t["wallSec"]) < 1e-6, t
        wall = measured[key] / 1e6
        assert abs(total - wall) <= 0.05 * wall, (name, total, wall)
        assert abs(per_thread[name] / 1e6 - wall) <= 0.05 * wall, (name, per_thread[name], wall)
    # The worker's designed steps sit under its thread; it computes, its
    # helper barely does (how much of the worker's CPU step is run-queue
    # time depends on the machine's load).
    assert any(st[1] == "ow-worker" and "step_mutex" in st for st in folded), list(folded)[:3]
    assert threads["ow-worker"]["onCpuSec"] > threads["ow-helper"]["onCpuSec"], threads
    with open(os.path.join(report["_dir"], "wallclock.svg")) as f:
        svg = f.read()
    assert "wall clock" in svg and "ow-worker" in svg
    # The other formats merge the threads: no thread frame in them.
    assert not any("ow-worker" in st for st in read_folded(report, "profile.folded"))


def test_no_torn_stacks():
    """A wait is recorded at its system call's return, where the CPU sample
    may interrupt the recording on its CPU: each keeps its own stack.
    Ping-pong over two pipes, every wait recorded (offCpuMinUsec 0): the
    recording programs run between most of the samples' hits, and a wait
    whose stack a sample overwrote would show the sample's kernel frames (the
    recording program's own: a BPF map lookup in the system call's exit)."""
    report, out, _ = run_session("cgprof-test-offcpu-pp", [OFFCPU, "--ping-pong", "300000"], 30,
                                 offCpuMinUsec=0)
    oc = report["offCpu"]
    off = read_folded(report, "offcpu.folded")
    total = sum(off.values())
    torn = {st: c for st, c in off.items()
            if any(f.endswith("_[k]") and ("bpf" in f or "syscall_exit" in f or "lookup_nulls" in f) for f in st)}
    in_pipe = sum(c for st, c in off.items() if has_frame(st, "pipe_read", "pipe_wait"))
    log(f"{out[-1]}; {oc['recordedWaits']} waits recorded, {total} µs stacked, {in_pipe} µs in pipe_read, "
        f"{len(torn)} stacks through the recording path, "
        f"{oc['lostWaits']} lost")
    for st, c in sorted(torn.items(), key=lambda kv: -kv[1])[:3]:
        log(f"  {c} µs: {';'.join(st)}")
    assert oc["recordedWaits"] > 10000, oc
    # Every wait kept: recorded at sys_exit, where a task work each would
    # cost more (docs/offcpu.md).
    assert oc["recordAt"] == "sys_exit", oc["recordAt"]
    assert not torn, f"{sum(torn.values())} of {total} µs of waits with the recording path's kernel stack"
    # The main thread's waits are in pipe reads (the ponger's too).
    assert in_pipe >= 0.95 * total, (in_pipe, total)


def check_pprof(report):
    go = shutil.which("go")
    if not go:
        log("no go: pprof's off_cpu not read by go tool pprof")
        return
    path = os.path.join(report["_dir"], "profile.pb.gz")
    r = subprocess.run([go, "tool", "pprof", "-sample_index=off_cpu", "-top", "-nodecount=40", path],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, HOME=os.environ.get("HOME", "/root"), GOFLAGS="-mod=mod"))
    assert r.returncode == 0, r.stderr
    log("go tool pprof -sample_index=off_cpu -top:\n" + "\n".join(r.stdout.splitlines()[10:22]))
    assert "step_sleep" in r.stdout and "step_mutex" in r.stdout, r.stdout


def test_migration():
    report, out, _ = run_session("cgprof-test-offcpu-migrate", [OFFCPU, "--migrate", "--seconds", "3"], 3)
    measured = json.loads(out[-1])
    off = read_folded(report, "offcpu.folded")
    mine = sum(c for st, c in off.items() if "migrate_sleep" in st)
    log(f"slept {measured['slept'] / 1e3:.0f} ms measured ({measured['flips']} flips), "
        f"{mine / 1e3:.0f} ms off CPU in migrate_sleep")
    assert measured["flips"] > 100
    assert abs(mine - measured["slept"]) <= 0.05 * measured["slept"], (mine, measured)
    # Never more than it slept (the whole of its time in migrate_sleep).
    assert mine <= measured["slept"] * 1.005 + 1000, (mine, measured)


def page_faults(extra_args=()):
    if not os.path.exists("/proc/sys/vm/unprivileged_userfaultfd"):
        skip_prereq("this kernel has no userfaultfd (CONFIG_USERFAULTFD)")
    report, out, status = run_session("cgprof-test-offcpu-uffd", [OFFCPU, "--page-faults", "--seconds", "3"], 3,
                                      extra_args)
    measured = json.loads(out[-1])
    oc = report["offCpu"]
    off = read_folded(report, "offcpu.folded")
    short = {st: c for st, c in off.items() if "fault_short" in st}
    long_ = {st: c for st, c in off.items() if "fault_long" in st}
    in_uffd = sum(c for st, c in off.items() if has_frame(st, "handle_userfault"))
    log(f"recorded at {oc['recordAt']}: {oc['recordedWaits']} waits, {oc['recordedAtSwitchOut']} at a later "
        f"switch-out; fault_short {sum(short.values()) / 1e3:.0f} ms (measured {measured['short_us'] / 1e3:.0f}), "
        f"fault_long {sum(long_.values()) / 1e3:.0f} ms (measured {measured['long_us'] / 1e3:.0f}), "
        f"{in_uffd / 1e3:.0f} ms in handle_userfault")
    return report, measured, short, long_, in_uffd


def test_page_faults():
    """A wait outside any system call (a page fault userfaultfd holds for
    5 or 15 ms): with the task work (6.18+) it is recorded as the thread
    returns to user mode, under the function that faulted, with its kernel
    reason."""
    at = run_session_status()
    if at != "task-work":
        skip_prereq(f"this kernel has no BPF task work (6.18+): waits are recorded at {at}")
    report, measured, short, long_, in_uffd = page_faults()
    oc = report["offCpu"]
    assert oc["recordAt"] == "task-work", oc["recordAt"]
    total = sum(short.values()) + sum(long_.values())
    assert in_uffd >= 0.9 * total, (in_uffd, total)
    for mine, want in ((short, measured["short_us"]), (long_, measured["long_us"])):
        assert abs(sum(mine.values()) - want) <= 0.05 * want, (sum(mine.values()), want)
    assert oc["recordedAtSwitchOut"] <= 0.05 * oc["recordedWaits"], oc


def test_page_faults_sys_exit():
    """The same where waits are recorded at sys_exit (before 6.18): the
    thread returns to user mode without a system call, so each wait is
    recorded at its next switch-out (the next fault: with the user stack of
    the other function), and counted as such (docs/offcpu.md, Limits)."""
    report, measured, short, long_, in_uffd = page_faults(["--bench-bpf-variant", "offcpu-sys-exit"])
    oc = report["offCpu"]
    assert oc["recordAt"] == "sys_exit", oc["recordAt"]
    # The faulting thread's waits (the handler's sleeps end in system calls).
    assert oc["recordedAtSwitchOut"] >= 0.9 * measured["faults"], (oc["recordedAtSwitchOut"], measured)
    # Its kernel reason stays right.
    assert in_uffd >= 0.9 * (measured["short_us"] + measured["long_us"]), (in_uffd, measured)


def run_session_status():
    """The agent's offCpuRecordAt on this kernel (an agent started and
    stopped)."""
    agent = Agent({"profiles": [profile(name="w", events=["cpu", "offcpu"])], "targets": []})
    try:
        agent.start()
        status = agent.status()
        if status.get("offCpu") != "available":
            skip_prereq(f"off-CPU profiling not available here: {status.get('offCpu')}")
        assert agent.stop() == 0, agent.log()
        return status["offCpuRecordAt"]
    finally:
        agent.cleanup()


def test_python():
    if not os.access(PYTHON, os.X_OK):
        skip_prereq(f"{PYTHON} is not installed")
    report, _, _ = run_session("cgprof-test-offcpu-py", [PYTHON, PY_WAITS, "3"], 3)
    off = read_folded(report, "offcpu.folded")
    queue_ = {st: c for st, c in off.items() if "wait_on_queue" in st}
    sleepy = {st: c for st, c in off.items() if "sleepy" in st}
    log(f"queue.get: {sum(queue_.values()) / 1e3:.0f} ms, time.sleep: {sum(sleepy.values()) / 1e3:.0f} ms")
    top = sorted(off.items(), key=lambda kv: -kv[1])[:4]
    for st, c in top:
        log(f"  {c / 1e3:.0f} ms: " + ";".join(st[-14:]))
    assert sum(queue_.values()) >= 2e6 and sum(sleepy.values()) >= 2e6, (sum(queue_.values()), sum(sleepy.values()))
    # The Python callers, and the right kernel reason under each.
    assert any("Queue.get" in st and "futex" in ";".join(st) for st in queue_), list(queue_)[:3]
    assert any("sleepy" in st and "nanosleep" in ";".join(st) for st in sleepy), list(sleepy)[:3]
    q_reason = sum(c for st, c in queue_.items() if "futex" in ";".join(st))
    s_reason = sum(c for st, c in sleepy.items() if "nanosleep" in ";".join(st))
    assert q_reason >= 0.9 * sum(queue_.values()) and s_reason >= 0.9 * sum(sleepy.values())


def test_unavailable():
    """Off-CPU profiling turned off on the node (as on a kernel without the
    tracepoints): status and check say why, and a profile asking for "cpu"
    and "offcpu" still samples CPU; one with only "offcpu" fails to start."""
    cg = Cgroup(f"cgprof-test-offcpu-off-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="waits", events=["cpu", "offcpu"]), profile(name="only", events=["offcpu"])],
        "targets": [{"name": "t", "profileRef": "waits", "cgroupPatterns": [cg.rel]}],
    }, extra_args=["--no-offcpu"])
    try:
        agent.start()
        status = agent.status()
        assert "--no-offcpu" in status["offCpu"], status["offCpu"]
        check = agent.ctl("check").stdout
        assert "Off-CPU profiling: off-CPU profiling is turned off" in check, check
        log(f"status offCpu: {status['offCpu']}")
        p = run_in_cgroup(cg, [OFFCPU, "--seconds", "1"])
        assert p.stdout.readline().decode().startswith("ready")
        p.communicate(timeout=60)
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        assert report["samples"]["total"] > 0, report["samples"]
        assert "--no-offcpu" in report["offCpu"]["unavailable"], report["offCpu"]
        assert report["offCpu"]["recordedWaits"] == 0
        # Only off-CPU time asked for: the session cannot start.
        cg2 = Cgroup(f"cgprof-test-offcpu-only-{os.getpid()}")
        try:
            r = agent.ctl("start", "--cgroup", cg2.rel, "--profile", "only", check=False)
            log(f"start of an offcpu-only profile: rc {r.returncode}: {(r.stderr or r.stdout).strip()}")
            assert r.returncode != 0
        finally:
            cg2.remove()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.cleanup()
        cg.remove()


def test_bad_input():
    for bad, path in (({"events": ["gpu"]}, "profiles[0].events[0]"),
                      ({"offCpuMinUsec": -1}, "profiles[0].offCpuMinUsec"),
                      ({"offCpuProbability": 2}, "profiles[0].offCpuProbability")):
        log(f"{bad}: {config_refused(bad, path)}")


if __name__ == "__main__":
    try:
        main([test_bad_input, test_unavailable, test_designed_waits, test_designed_waits_sys_exit, test_way_switch,
              test_page_faults, test_page_faults_sys_exit, test_no_torn_stacks, test_migration, test_python])
    finally:
        for d in KEPT:
            shutil.rmtree(d, ignore_errors=True)
