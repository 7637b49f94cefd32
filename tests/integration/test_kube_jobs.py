#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""One report per distributed job in Kubernetes (docs/training-jobs.md, "One
report per job"), against a real kube-apiserver + etcd (kubelib.py; the
test plays kubelet as test_kube.py does): pods with the same Kubeflow
training.kubeflow.org/job-name label are one job in their namespace, and
the same name in two namespaces is two jobs.

- ml-a/mnist-worker-0 and -1 (job-name mnist): one job report in
  ml-a/_jobs/mnist/, listing the two pods' reports and their processes;
- ml-b/mnist-worker-0 and -1 (the same job name): their own job report in
  ml-b/_jobs/mnist/, with none of ml-a's data;
- ml-a/web-0 (no job label): in no job report."""

import os

import test_kube
from cgproflib import log, main, wait_for
from kubelib import KubeCgroups, KubeCluster
from test_kube import agent_for, report_of, run_pod, stop_pod

JOB_LABEL = "training.kubeflow.org/job-name"


def job_pods(ns, n=2):
    return [(ns, f"mnist-worker-{i}", {"cgprof.io/profile": "enabled", JOB_LABEL: "mnist",
                                       "training.kubeflow.org/replica-index": str(i)}) for i in range(n)]


def check_job(agent, job, ns, pods):
    rel = os.path.relpath(job["_dir"], agent.report_dir)
    log(f"job report {rel}:", job["job"])
    assert rel.split("/")[:3] == [ns, "_jobs", "mnist"], rel
    assert job["namespace"] == ns and job["job"]["source"] == "kubeflow" and job["job"]["name"] == "mnist", job
    assert job["jobLabels"] == {JOB_LABEL: "mnist"}, job.get("jobLabels")
    own = sorted(os.path.relpath(report_of(agent, ns, name)["_dir"], agent.report_dir) for _, name, _ in pods)
    assert sorted(job["job"]["reports"]) == own, (job["job"]["reports"], own)
    assert all(r.startswith(ns + "/") for r in job["job"]["reports"]), job["job"]["reports"]
    pids = sorted(p["pid"] for p in job["processes"] if p["samples"] > 0)
    want = sorted(p["pid"] for _, name, _ in pods for p in report_of(agent, ns, name)["processes"]
                  if p["samples"] > 0)
    assert pids == want, (pids, want)


def test_kubeflow_job_per_namespace():
    kc = test_kube.kc
    with KubeCgroups(driver="systemd") as cgs:
        for ns in ("ml-a", "ml-b"):
            kc.create_namespace(ns)
        agent = agent_for({"enableDefault": True})
        try:
            agent.start()
            pods = job_pods("ml-a") + job_pods("ml-b") + [("ml-a", "web-0", {"cgprof.io/profile": "enabled"})]
            running = [(ns, name, run_pod(cgs, ns, name, labels=labels, seconds=30)) for ns, name, labels in pods]
            for ns, name, _ in running:
                test_kube.wait_session(agent, ns, name)
            # Every pod sampled something before it ends.
            wait_for(lambda: all(s["samples"] > 0 for s in agent.status()["sessions"]), timeout=60,
                     what="samples in every session")
            for ns, name, p in running:
                kc.set_pod_finished(ns, name, {"main": p["cid"]})
            for ns, name, p in running:
                report_of(agent, ns, name)
                stop_pod(cgs, p)
            jobs = {}
            wait_for(lambda: len([s for s in agent.summaries() if s.get("job")]) >= 2, timeout=60,
                     what="the two jobs' reports")
            for s in agent.summaries():
                if s.get("job"):
                    assert s["namespace"] not in jobs, (s["_dir"], jobs)
                    jobs[s["namespace"]] = s
            assert sorted(jobs) == ["ml-a", "ml-b"], jobs
            check_job(agent, jobs["ml-a"], "ml-a", job_pods("ml-a"))
            check_job(agent, jobs["ml-b"], "ml-b", job_pods("ml-b"))
            web = report_of(agent, "ml-a", "web-0")
            assert not any(os.path.relpath(web["_dir"], agent.report_dir) in j["job"]["reports"]
                           for j in jobs.values())
            assert agent.stop() == 0
        finally:
            agent.cleanup()


if __name__ == "__main__":
    with KubeCluster() as cluster:
        test_kube.kc = cluster
        main([test_kubeflow_job_per_namespace])
