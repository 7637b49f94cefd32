#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""CUDA kernel GPU time under the CPU stacks that launched them (profile key
"gpu": {"durations": true}, docs/gpu.md: kernel durations), without a GPU.

No GPU, no driver: CUPTI cannot run here. The fixture
(tests/cuda/cupti-fixture.c) PLAYS CUPTI'S PART: it links the real
libcgprof-cupti.so and calls its cgprof_cupti_launch(correlation) as the
library's CUPTI callback would at each launch (the agent's real uprobe on
it takes the stack and the ID), from three call paths 5:3:2, then sends the
kernel records a GPU would have produced, with known durations, as
cupti-wire datagrams on the agent's socket (what the library's activity
buffer callback sends). What CUPTI itself does on a GPU is not tested here
(scripts/gpu-check, on a GPU machine).

- Each kernel's GPU time (cuda-time.folded, ns) sits under its own call
  path, with exact totals; summary.json cudaKernelTime says the same and
  counts the records joined, not joined and dropped; cuda-time.pb.gz has
  one sample type, cuda_kernel/nanoseconds.
- A datagram from another process claiming the fixture's pid and its
  correlation IDs is credited to its sender (which launched nothing): not
  joined, the fixture's times unchanged.
- Records of correlation IDs never launched are counted not joined.
- The launches through the library are not counted as launches, nor as
  CPU samples.
- "gpu": {"durations": "yes"} is refused with the key's path."""

import gzip
import os
import re
import subprocess

from cgproflib import Agent, Cgroup, config_refused, log, main, profile, run_in_cgroup, skip_prereq, wait_for
from test_pprof import fields, ints

FIXTURE = os.environ.get("CGPROF_CUPTI_FIXTURE", "")
ROUNDS = 100  # alpha 500, beta 300, gamma 200 launches
KERNELS = {"k_alpha(float*, int)": ("path_alpha", 5, 1000), "k_beta(float*, int)": ("path_beta", 3, 2000),
           "k_gamma(int*)": ("path_gamma", 2, 3000)}
UNKNOWN, DROPPED, CLAIMED = 7, 5, 50


def need_fixture():
    if not FIXTURE or not os.access(FIXTURE, os.X_OK):
        skip_prereq("the CUPTI fixture was not built (the CUDA toolkit's CUPTI, cupti.h and libcupti.so, "
                    "was not found: libcgprof-cupti.so is not built)")


def folded_file(report, name):
    out = {}
    path = os.path.join(report["_dir"], name)
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            key = tuple(stack.split(";"))
            out[key] = out.get(key, 0) + int(count)
    return out


def start(cg, argv):
    p = run_in_cgroup(cg, argv, stdin=subprocess.PIPE)
    return p


def say(p, expect):
    p.stdin.write(b"go\n")
    p.stdin.flush()
    line = p.stdout.readline().decode()
    assert line.startswith(expect), f"expected {expect!r}: {line!r}"
    return line


def test_durations():
    need_fixture()
    cg = Cgroup(f"cgprof-test-gpu-dur-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="gpu", gpu={"durations": True}, formats=["folded", "json", "pprof", "svg"])],
        "targets": [{"name": "t", "profileRef": "gpu", "cgroupPatterns": [cg.rel]}],
    })
    sock = os.path.join(agent.tmp, "cupti.sock")
    agent.extra_args += ["--cupti-socket", sock]
    p = q = None
    try:
        agent.start()
        p = start(cg, [FIXTURE, str(ROUNDS), sock])
        assert p.stdout.readline().decode().startswith("ready")
        wait_for(lambda: "CUDA launch probes in " in agent.log() and "cgprof_cupti_launch" in agent.log(), 60,
                 "the probe on cgprof_cupti_launch")
        # And the library's unwind table: walked by frame pointer from the
        # probed function's first instruction (its frame not pushed yet),
        # a launch would lose its caller, the device stub that names it.
        wait_for(lambda: re.search(r"Unwind table of \S*libcgprof-cupti\.so:", agent.log()), 60,
                 "the unwind table of libcgprof-cupti.so")
        say(p, "launched")
        # Another process of the session claims the fixture's pid and its
        # first CLAIMED correlation IDs (alpha's), 1 s each.
        q = start(cg, [FIXTURE, "claim", sock, str(p.pid), "1", str(CLAIMED)])
        assert q.stdout.readline().decode().startswith("sent")
        say(p, "done")
        agent.ctl("stop", "--all")
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        for x in (p, q):
            x.stdin.close()
            assert x.wait(timeout=60) == 0
        rc = agent.stop()
        assert rc == 0, f"cgprofd exited {rc}"
        try:
            check(report, os.path.basename(FIXTURE)[:15])
        except AssertionError:
            log("agent log:\n" + "\n".join(l for l in agent.log().splitlines()
                                             if "cuda" in l.lower() or "cupti" in l.lower()))
            raise
    finally:
        for x in (p, q):
            if x and x.poll() is None:
                x.kill()
        agent.cleanup()
        cg.remove()


def check(report, comm):
    stacks = folded_file(report, "cuda-time.folded")
    log("GPU time stacks: " + str(stacks))
    per_kernel = {}
    for st, ns in stacks.items():
        per_kernel[st[-1]] = per_kernel.get(st[-1], 0) + ns
    want = {k: n * ROUNDS * ns for k, (_, n, ns) in KERNELS.items()}
    assert per_kernel == want, f"{per_kernel} != {want}"
    for st in stacks:
        assert st[0] == comm, st
        path = KERNELS[st[-1]][0]
        assert "main" in st and path in st, f"{st[-1]} not under main..{path}: {st}"
        assert not any(p in st for p, _, _ in KERNELS.values() if p != path), st
        # The library's own frames are left out: the launch calls the kernel.
        assert "cgprof_cupti_launch" not in st, st
    t = report["cudaKernelTime"]
    log("cudaKernelTime: " + str({k: v for k, v in t.items() if k != "stacks"}))
    assert t["joined"] == 10 * ROUNDS and t["joinedNs"] == sum(want.values()), t
    assert t["totalNs"] == sum(want.values()), t
    assert {k["name"]: k["ns"] for k in t["kernels"]} == want, t["kernels"]
    assert t["notJoined"] == UNKNOWN + CLAIMED, t
    assert t["notJoinedNs"] == UNKNOWN * 500 + CLAIMED * 10**9, t
    assert t["dropped"] == DROPPED and t["pending"] == 0, t
    assert t["records"] == 10 * ROUNDS + UNKNOWN + CLAIMED, t
    # Not launches (no gpu.launches), not CPU samples.
    assert "cudaLaunches" not in report or report["cudaLaunches"]["total"] == 0, report.get("cudaLaunches")
    cpu = folded_file(report, "profile.folded")
    assert not any("k_alpha(float*, int)" in st or "[GPU time]" in st for st in cpu), \
        [st for st in cpu if "k_alpha" in ";".join(st)]
    assert "cuda-time.folded" in report["files"] and "cuda-time.pb.gz" in report["files"], report["files"]
    # pprof: one sample type, cuda_kernel/nanoseconds, the same total.
    with open(os.path.join(report["_dir"], "cuda-time.pb.gz"), "rb") as f:
        pb = gzip.decompress(f.read())
    strings, types, total = [], [], 0
    for num, wt, v in fields(pb):
        if num == 6:
            strings.append(v.decode())
        elif num == 1:
            types.append(dict((n, x) for n, _, x in fields(v)))
        elif num == 2:
            for n, w, x in fields(v):
                if n == 2:
                    total += sum(ints(w, x))
    assert [(strings[t[1]], strings[t[2]]) for t in types] == [("cuda_kernel", "nanoseconds")], types
    assert total == sum(want.values()), total
    with open(os.path.join(report["_dir"], "cuda-time.svg")) as f:
        assert 'data-name="k_beta(float*, int)"' in f.read()


def test_bad_config():
    log(config_refused({"gpu": {"durations": "yes"}}, "profiles[0].gpu.durations: must be a boolean"))

if __name__ == "__main__":
    main([test_durations, test_bad_config])
