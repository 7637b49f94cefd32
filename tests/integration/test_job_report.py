#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""One report per distributed job across its sessions on a node
(docs/training-jobs.md, "One report per job"): the job of
test_training.py (Debian's python3-torch, gloo, two ranks started as
torchrun starts them, tests/python/launch-ranks.py), each rank in a cgroup
of its own, as the ranks of a job run in pods of their own, each cgroup a
session of its own; and a third cgroup running a rank of another run.

- each of the three cgroups has its own report;
- the two ranks' sessions write one job report beside them, in
  _jobs/<run id>/: summary.json "job" names the run, the two sessions and
  their report directories; its byRank view lists both ranks; its
  profile.folded has a rank root per rank with train_step under it; its
  pprof samples carry rank 0 and 1; flame.svg is there;
- the third cgroup's process (another run ID) is in no job report, and its
  session gets no job report of its own (a job of one session has its
  session's report)."""

import os
import subprocess

from cgproflib import Agent, Cgroup, log, main, profile, run_in_cgroup
from test_training import LAUNCH, PYTHON, TRAIN, check_folded, need_torch, pprof_samples

SECONDS = os.environ.get("CGPROF_TRAIN_SECONDS", "8")
OTHER = ("import time\n"
         "t = time.time()\n"
         "while time.time() - t < 4:\n"
         "    sum(i * i for i in range(1000))\n")


def job_reports(agent):
    return [s for s in agent.summaries() if s.get("job")]


def check_job_report(agent, job, ranks, run_id):
    log("job:", job["job"], "dir:", os.path.relpath(job["_dir"], agent.report_dir))
    assert job["job"]["source"] == "torchelastic" and job["job"]["name"] == run_id, job["job"]
    rel = os.path.relpath(job["_dir"], agent.report_dir)
    assert rel.split("/")[:2] == ["_jobs", run_id], rel
    assert job["endReason"] == "job-ended", job["endReason"]
    # It lists the two sessions and their own reports, beside it.
    assert sorted(job["job"]["sessions"]) == sorted(r["session"] for r in ranks), job["job"]
    own = sorted(os.path.relpath(r["_dir"], agent.report_dir) for r in ranks)
    assert sorted(job["job"]["reports"]) == own, (job["job"]["reports"], own)
    assert set(job["files"]) >= {"profile.folded", "summary.json", "profile.pb.gz", "flame.svg"}, job["files"]
    # Both ranks' processes, and only this run's.
    procs = [p for p in job["processes"] if p["samples"] > 0]
    assert {p.get("rank") for p in procs if p.get("role") == "main"} == {0, 1}, procs
    assert all(p.get("runId") == run_id for p in job["processes"]), job["processes"]
    assert job["samples"]["total"] == sum(p["samples"] for p in job["processes"])
    # One view across the ranks of the job.
    by = job.get("byRank")
    assert by and sorted(r["rank"] for r in by["ranks"]) == [0, 1], by
    for r in by["ranks"]:
        assert abs(sum(r["shares"].values()) - 100) <= 1, r
    # The ranks side by side in the folded file (rank roots: always in a
    # job's report), with their labels in pprof.
    check_folded(job)
    labels = {lb.get("rank") for lb, _, _ in pprof_samples(job)}
    assert {"0", "1"} <= labels, labels
    out = agent.ctl("report", "--by", "rank", job["_dir"]).stdout
    log("cgprofctl report --by rank (job):\n" + out)
    assert sorted(l.split()[0] for l in out.splitlines() if l[:1].isdigit()) == ["0", "1"], out


def test_job_report():
    need_torch()
    pid = os.getpid()
    cgs = [Cgroup(f"cgprof-test-job-{pid}-rank{r}") for r in (0, 1)]
    other = Cgroup(f"cgprof-test-job-{pid}-other")
    run_id, other_run = f"cgprof-job-{pid}", f"cgprof-other-{pid}"
    agent = Agent({
        "profiles": [profile(name="train", frequency=99, formats=["folded", "json", "pprof"])],
        "targets": [{"name": "t", "profileRef": "train", "cgroupPatterns": [c.rel for c in cgs + [other]]}],
    })
    try:
        agent.start()
        launch = [PYTHON, LAUNCH, "--nproc", "2", "--run-id", run_id]
        for c in cgs:
            launch += ["--cgroup-procs", os.path.join(c.path, "cgroup.procs")]
        p = subprocess.Popen(launch + ["--", PYTHON, TRAIN, "--seconds", SECONDS, "--workers", "2"],
                             stdout=subprocess.PIPE)
        assert p.stdout.readline().decode().startswith("ready")
        o = run_in_cgroup(other, [PYTHON, "-c", OTHER],
                          env=dict(os.environ, RANK="0", WORLD_SIZE="2", TORCHELASTIC_RUN_ID=other_run))
        assert o.wait(120) == 0
        assert p.wait(300) == 0
        for c in cgs + [other]:
            c.remove()
        ranks = [agent.wait_summary(lambda s, c=c: s["cgroup"] == c.rel, what=f"{c.rel}'s report") for c in cgs]
        mine = agent.wait_summary(lambda s: s["cgroup"] == other.rel, what="the other run's report")
        job = agent.wait_summary(lambda s: s.get("job"), what="the job's report")
        assert all(not r.get("job") for r in ranks + [mine])
        assert [p.get("runId") for p in mine["processes"] if p.get("rank") is not None] == [other_run], \
            mine["processes"]
        check_job_report(agent, job, ranks, run_id)
        # One job report: none for the other run, whose process is in none.
        jobs = job_reports(agent)
        assert len(jobs) == 1, [j["_dir"] for j in jobs]
        assert not os.path.exists(os.path.join(agent.report_dir, "_jobs", other_run))
    finally:
        agent.cleanup()
        for c in cgs + [other]:
            c.remove()


if __name__ == "__main__":
    main([test_job_report])
