#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A distributed training job, profiled as a job (docs/training-jobs.md):
Debian's python3-torch (CPU, gloo), two ranks started the way torchrun
starts them (tests/python/launch-ranks.py: RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, ... in each rank's environment), each a DDP model fed by a
DataLoader with two worker processes (tests/python/train-job.py), rank 1's
data path made slower on purpose, rank 1 exiting with an error at the end.

- every rank's samples carry rank 0 or 1 in pprof (and `go tool pprof
  -tags` shows them) and in summary.json; the DataLoader workers carry
  their rank, role=worker and their rank's PID as parent;
- train_step is under both ranks (profile.folded with foldedRankRoot:
  "rank N;python3;..."), the workers' Synthetic.__getitem__ is named, and
  unnamed Python frames are few;
- the flame graph's subtitle names the ranks;
- the by-rank view (summary.json byRank) lists both ranks, its categories
  add up to 100 % ± 1 per rank, and it names rank 1, the slow one;
- the job ends (one rank with an error): its session ends with a complete
  report;
- a SECRET_TOKEN planted in the job's environment is in no report file, in
  no line of the agent's log and in no journal entry."""

import gzip
import os
import secrets
import subprocess
import time

from cgproflib import Agent, Cgroup, log, main, profile, run_in_cgroup, skip_prereq
from journallib import journal_alive
from test_pprof import GoPprof, KERNEL_MAPPING, decode_profile

PYTHON = "/usr/bin/python3"
SOURCE = os.environ.get("CGPROF_SOURCE_DIR", ".")
LAUNCH = os.path.join(SOURCE, "tests", "python", "launch-ranks.py")
TRAIN = os.path.join(SOURCE, "tests", "python", "train-job.py")
SECONDS = os.environ.get("CGPROF_TRAIN_SECONDS", "10")


def need_torch():
    if not os.access(PYTHON, os.X_OK):
        skip_prereq(f"{PYTHON} is not installed")
    r = subprocess.run([PYTHON, "-c", "import torch, torch.distributed; assert torch.distributed.is_available()"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        skip_prereq(f"torch is not importable by {PYTHON} (python3-torch): {r.stderr.strip().splitlines()[-1:]}")


def pprof_samples(report):
    """[(labels dict, stack of function names root first, count)] of the
    report's profile.pb.gz."""
    p = decode_profile(os.path.join(report["_dir"], "profile.pb.gz"))
    st = p["strings"]
    out = []
    for s in p["sample"]:
        labels = {st[k]: (st[v] if v else n) for k, v, n in s["label"]}
        names = []
        for lid in reversed(s["location_id"]):
            for fid in reversed(p["location"][lid]["function_id"]):
                names.append(st[p["function"][fid]["name"]] or "[unknown]")
        if s["value"][0]:
            out.append((labels, names, s["value"][0]))
    return out


def check_identity(report):
    procs = [p for p in report["processes"] if p["comm"].startswith("python3") and p["samples"] > 0]
    log("processes:", [{k: p.get(k) for k in ("pid", "rank", "localRank", "role", "parentPid", "samples")}
                       for p in procs])
    mains = {p["rank"]: p for p in procs if p.get("role") == "main"}
    assert sorted(mains) == [0, 1], procs
    for r, p in mains.items():
        assert p["localRank"] == r and p["worldSize"] == 2 and p["runId"].startswith("cgprof-"), p
        assert "parentPid" not in p, p
    workers = [p for p in procs if p.get("role") == "worker"]
    for r in (0, 1):
        mine = [w for w in workers if w["rank"] == r]
        assert len(mine) == 2, (r, workers)
        assert all(w["parentPid"] == mains[r]["pid"] for w in mine), (r, mine, mains[r])
    # The launcher has no rank.
    assert all("rank" not in p for p in procs if "launch-ranks" in p["cmdline"]), procs
    return mains


def check_pprof(report, tmp):
    samples = pprof_samples(report)
    total = sum(c for _, _, c in samples)

    def share(pred):
        return sum(c for lb, st, c in samples if pred(lb, st))

    for r in ("0", "1"):
        mine = share(lambda lb, st: lb.get("rank") == r)
        main_train = share(lambda lb, st: lb.get("rank") == r and lb.get("role") == "main" and "train_step" in st)
        worker_items = share(lambda lb, st: lb.get("rank") == r and lb.get("role") == "worker" and
                             "Synthetic.__getitem__" in st)
        log(f"rank {r}: {mine} samples, train_step {main_train}, workers' __getitem__ {worker_items}")
        assert mine > 0 and main_train > 0 and worker_items > 0, (r, mine, main_train, worker_items)
        assert share(lambda lb, st: lb.get("rank") == r and lb.get("local_rank") == r) == mine
    unnamed = share(lambda lb, st: "[python]" in st)
    ranked = share(lambda lb, st: "rank" in lb)
    log(f"unnamed Python frames in {unnamed} of {total} samples ({100.0 * unnamed / total:.2f} %)")
    # The workers' frames are named from their first sample; what stays
    # unnamed is code freed before the agent read it (modules' bodies run
    # by import, docs/python-frames.md).
    workers_unnamed = share(lambda lb, st: lb.get("role") == "worker" and "[python]" in st)
    workers = share(lambda lb, st: lb.get("role") == "worker")
    log(f"workers: unnamed Python frames in {workers_unnamed} of {workers} samples")
    assert workers_unnamed <= 0.01 * workers, (workers_unnamed, workers)
    assert unnamed <= 0.01 * total, (unnamed, total)
    assert ranked > 0.8 * total, (ranked, total)

    go = GoPprof(tmp)
    tags = go.run("-tags", os.path.join(report["_dir"], "profile.pb.gz"))
    log("go tool pprof -tags (rank):", [l.strip() for l in tags.splitlines() if l.strip()][:24])
    block = tags[tags.index(" rank:"):] if " rank:" in tags else ""
    assert block and all(f": {r}\n" in block or f": {r}" in block.split("\n\n")[0] for r in ("0", "1")), tags
    assert " role:" in tags and "worker" in tags and "main" in tags, tags


def check_folded(report):
    roots = {}
    with open(os.path.join(report["_dir"], "profile.folded")) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            st = stack.split(";")
            key = st[0] if st[0].startswith("rank ") else None
            if key and "train_step" in st:
                roots[key] = roots.get(key, 0) + int(count)
                assert st[1] == "python3", st[:3]
    log("train_step under folded roots:", roots)
    assert sorted(roots) == ["rank 0", "rank 1"], roots


def check_svg(report):
    with open(os.path.join(report["_dir"], "flame.svg")) as f:
        svg = f.read()
    assert "ranks 0, 1 of 2 (run cgprof-" in svg, svg[:2000]


def check_by_rank(report):
    by = report.get("byRank")
    assert by, "no byRank in summary.json"
    log("byRank:", {k: v for k, v in by.items() if k != "differences"})
    log("byRank differences:", by.get("differences", [])[:5])
    ranks = {r["rank"]: r for r in by["ranks"]}
    assert sorted(ranks) == [0, 1], by
    for r in ranks.values():
        shares = r["shares"]
        assert abs(sum(shares.values()) - 100) <= 1, r
        assert r["samples"] > 0 and r["cpuSeconds"] > 0, r
    # Rank 1's data path does more work: its data loading is the larger, and
    # the view names it, and its extra function first.
    assert ranks[1]["seconds"]["dataLoading"] > ranks[0]["seconds"]["dataLoading"], ranks
    assert by["straggler"]["rank"] == 1 and by["straggler"]["category"] == "dataLoading", by["straggler"]
    top = by["differences"][0]
    assert top["rank"] == 1 and top["function"] == "slow_augment", by["differences"][:3]


def check_ctl_by_rank(agent, report):
    out = agent.ctl("report", "--by", "rank", report["_dir"]).stdout
    log("cgprofctl report --by rank:\n" + out)
    rows = {l.split()[0]: l.split() for l in out.splitlines() if l[:1].isdigit()}
    assert sorted(rows) == ["0", "1"], out
    for r in rows.values():
        assert abs(sum(float(x) for x in r[4:8]) - 100) <= 1, r
    assert "Straggler: rank 1" in out and "slow_augment" in out, out
    j = agent.ctl("--json", "report", "--by", "rank", report["_dir"]).stdout
    assert '"straggler":{"rank":1' in j.replace(" ", ""), j


def check_secret(agent, secret, reports):
    leaks = []
    for dirpath, _, files in os.walk(reports):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                data = f.read()
            if name.endswith(".gz"):
                data = gzip.decompress(data)
            for needle in (secret.encode(), b"SECRET_TOKEN"):
                if needle in data:
                    leaks.append((path, needle))
    log_text = agent.log()
    for needle in (secret, "SECRET_TOKEN"):
        if needle in log_text:
            leaks.append(("cgprofd log", needle))
    if journal_alive():
        r = subprocess.run(["journalctl", "--no-pager", "-o", "export", "--since", "-10min"], capture_output=True,
                           timeout=120)
        if secret.encode() in r.stdout:
            leaks.append(("journal", secret))
    assert not leaks, leaks


def test_training_job():
    need_torch()
    cg = Cgroup(f"cgprof-test-training-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="train", frequency=199, formats=["folded", "json", "pprof", "svg"],
                             foldedRankRoot=True)],
        "targets": [{"name": "t", "profileRef": "train", "cgroupPatterns": [cg.rel]}],
    })
    secret = "cgprof-secret-" + secrets.token_hex(12)
    try:
        agent.start()
        env = dict(os.environ, SECRET_TOKEN=secret)
        p = run_in_cgroup(cg, [PYTHON, LAUNCH, "--nproc", "2", "--run-id", f"cgprof-{os.getpid()}", "--",
                               PYTHON, TRAIN, "--seconds", SECONDS, "--workers", "2", "--slow-rank", "1",
                               "--fail-rank", "1"], env=env)
        line = p.stdout.readline().decode()
        assert line.startswith("ready"), line
        # The job ends, rank 1 with an error after rank 0 finished.
        assert p.wait(300) == 3
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        log("endReason:", report["endReason"], "python:", report.get("python"))
        assert report["endReason"] and not report.get("partial"), report["endReason"]
        assert set(report["files"]) >= {"profile.folded", "summary.json", "profile.pb.gz", "flame.svg"}, \
            report["files"]
        check_identity(report)
        check_pprof(report, agent.tmp)
        check_folded(report)
        check_svg(report)
        check_by_rank(report)
        check_ctl_by_rank(agent, report)
        check_secret(agent, secret, agent.report_dir)
    finally:
        agent.cleanup()
        cg.remove()


if __name__ == "__main__":
    main([test_training_job])
