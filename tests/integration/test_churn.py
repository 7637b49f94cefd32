#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Container churn, short (bench/churn is the long one): against a real
kube-apiserver, 30 containers (pods, sandbox and container cgroups, 1-3
short-lived processes each, 4 at once, 0.5-1.5 s) start and stop while
cgprofd profiles them (churnlib.py says how). Afterwards, with the agent
idle:
- every session is accounted for: sessions started = reports written +
  sessions discarded (sandboxes), no failure; one journal start and one end
  entry per reported session (in the journal, or on the agent's stderr
  while no journal socket answered);
- the agent's BPF maps that hold per-session and per-process entries are
  empty again, and no session slot is active (the LRU maps are exempt);
- the agent holds no more fds than after the warm-up, bar a small slack;
- it exits 0 at SIGTERM with no sanitizer report: in the ASan tree a leak
  makes LeakSanitizer fail the exit (ASAN_OPTIONS abort_on_error=1).
No timing is asserted."""

import churnlib
from cgproflib import WORKLOAD, log, main
from journallib import ensure_journald, stop_journald
from kubelib import KubeCgroups, KubeCluster

CONTAINERS = 30
CONCURRENCY = 4
# fds the agent may hold after the churn beyond those it held, idle, after
# the warm-up: both points have no session and no pod, so per-session fds
# (perf events, cgroup directories, inotify watches) are gone at both. What
# may differ is not per container: libcurl's connection cache towards the
# API server (a watch reconnect or a request that overlapped a watch can
# leave one more connection, at most its cache size of a few) and a file
# the symbolizer keeps open for a binary first seen after the warm-up (the
# warm-up runs every kind of process, so none are expected). 4 covers those;
# a leak of one fd per container would be 24 here.
FD_SLACK = 4


def sanitizer_reports(text):
    return [line for line in text.splitlines()
            if "Sanitizer" in line or "runtime error:" in line]


def test_churn():
    with KubeCluster() as kc, KubeCgroups(driver="systemd") as cgs:
        agent = churnlib.kube_agent(kc.kubeconfig, hz=199, log_level="debug")
        try:
            agent.start()
            churn = churnlib.Churn(kc, cgs, agent.proc.pid, agent.started_us, agent.status, WORKLOAD, containers=CONTAINERS,
                                   concurrency=CONCURRENCY, min_life=0.5, max_life=1.5, seed=14)
            churn.run()
            maps = churnlib.map_occupancy(agent.proc.pid)
            acc = churn.accounting(agent.report_dir, agent.log())
            snaps = churn.snapshots
            for k in ("start", "warm", "end"):
                s = snaps[k]
                log(f"{k}: RSS {s['rss_kb']} kB, {s['fds']} fds {s['fd_kinds']}, CPU {s['cpu_s']:.2f} s")
            log(f"accounting: {acc}")
            log("maps: " + ", ".join(f"{n} {m['entries']}/{m['max']} ({m['expect']})"
                                      for n, m in sorted(maps.items())))
            bad = []
            for name, ok, detail in churnlib.invariants(acc, maps, snaps):
                log(f"{'OK' if ok else 'MISMATCH'}: {name}: {detail}")
                if not ok:
                    bad.append(f"{name}: {detail}")
            assert not bad, bad
            # How many containers got a session depends on how fast the
            # agent is (a container lives 0.5 s): not asserted beyond one.
            assert acc["containers_profiled"] > 0, acc
            _, fd_growth = churn.growth()
            assert fd_growth <= FD_SLACK, (f"{fd_growth} more fds after the churn than after the warm-up: "
                                           f"{snaps['warm']['fd_kinds']} -> {snaps['end']['fd_kinds']}")
            rc = agent.stop()
            assert rc == 0, f"cgprofd exited {rc} at SIGTERM"
            reports = sanitizer_reports(agent.log())
            assert not reports, reports[:20]
        finally:
            agent.cleanup()


if __name__ == "__main__":
    ensure_journald()
    try:
        main([test_churn])
    finally:
        stop_journald()
