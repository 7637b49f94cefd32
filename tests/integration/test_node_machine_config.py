#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""machineConfig per node, against a real kube-apiserver + etcd: the agent
watches its own Node; an entry with a nodeSelector applies while the Node's
labels match it and is restored to its original when they stop matching,
an entry without one stays; another Node's labels do nothing; an API server
restart and a real 410 Gone on the node watch change nothing applied; a
deleted Node keeps its last known labels. Each change is a journal entry
naming the node, the sysctl, both values and the entry. Also: nodeLabels
on a host (no Kubernetes), and two entries that can both select one node
refused at load with both key paths.

The sysctls live in a private --sysctl-root seeded with the node's real
values (as test_checkpoint.py does): the other trees' tests on this machine
change the real kernel.perf_event_paranoid at the same time. The agent's
code path is the same; test_machine_config.py covers the real /proc/sys."""

import json
import os
import shutil
import signal
import tempfile

from cgproflib import Agent, log, main, read_sysctl, wait_for
from journallib import ensure_journald, process_journal, stop_journald
from kubelib import KubeCluster

NODE = "node-tuned"
OTHER_NODE = "node-other"
LABEL = "cgprof.io/tuning"
PARANOID = "kernel.perf_event_paranoid"
MLOCK = "kernel.perf_event_mlock_kb"
# agent/base/journal.h
MSG_APPLY = "30bae784dc024758944a1b223fbeff2d"
MSG_RESTORE = "43b5e54dc6a144ee89f3469a3b47b339"

kc = None


class Sysctls:
    """A private sysctl tree with the real values of the sysctls used."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="cgprof-node-sysctl-")
        self.root = os.path.join(self.tmp, "sys")
        os.makedirs(os.path.join(self.root, "kernel"))
        self.orig = {}
        for name in (PARANOID, MLOCK):
            self.orig[name] = read_sysctl(name)
            self.write(name, self.orig[name])

    def path(self, name):
        return os.path.join(self.root, *name.split("."))

    def read(self, name):
        with open(self.path(name)) as f:
            return f.read().strip()

    def write(self, name, value):
        with open(self.path(name), "w") as f:
            f.write(f"{value}\n")

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def scoped_config(mlock):
    return {
        "machineConfig": [
            {"name": PARANOID, "value": "-1", "nodeSelector": {"matchLabels": {LABEL: "open"}}},
            {"name": MLOCK, "value": mlock},
        ],
        "machineConfigInterval": "500ms",
        "profiles": [{"name": "p"}],
        "targets": [],
    }


def kube_agent(config, sysctls):
    args = ["--kubeconfig", kc.kubeconfig, "--node-name", NODE, "--kube-backoff-max", "1000",
            "--kube-watch-idle", "5", "--sysctl-root", sysctls.root]
    a = Agent(config, extra_args=args)
    a.argv = (lambda orig: (lambda: [x for x in orig() if x != "--no-kubernetes"]))(a.argv)
    return a


def check(agent):
    """cgprofctl --json check: {sysctl name: row}, and the whole answer."""
    j = json.loads(agent.ctl("--json", "check").stdout)
    return {s["name"]: s for s in j["sysctls"]}, j


def changes(agent, mid, sysctl):
    return process_journal(agent.proc.pid, agent.started_us, f"MESSAGE_ID={mid}", f"CGPROF_SYSCTL={sysctl}")


def node(name, labels):
    return kc.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})


def agent_labels(agent):
    return agent.status()["machineConfig"]["labels"]


def mark(agent, value):
    """Labels the agent's Node with an unrelated marker and waits until the
    agent has seen it: every event before it has been handled too."""
    kc.label("node", NODE, None, f"cgprof.io/marker={value}")
    wait_for(lambda: f"cgprof.io/marker={value}" in agent_labels(agent), timeout=60,
             what=f"the agent to see marker {value}")


def test_node_labels_select_entries():
    s = Sysctls()
    mlock = str(int(s.orig[MLOCK]) + 516)
    paranoid_orig = s.orig[PARANOID]
    if paranoid_orig == "-1":
        s.write(PARANOID, "2")
        paranoid_orig = "2"
    node(NODE, {LABEL: "open"})
    node(OTHER_NODE, {})
    agent = kube_agent(scoped_config(mlock), s)
    try:
        agent.start()
        # Both apply once the Node is read.
        wait_for(lambda: s.read(PARANOID) == "-1", timeout=60, what="paranoid applied on the labelled node")
        assert s.read(MLOCK) == mlock
        rows, j = check(agent)
        assert j["node"] == NODE and j["labelsSource"] == "node", j
        assert rows[PARANOID] == {"name": PARANOID, "desired": "-1", "entry": "machineConfig[0]",
                                  "nodeSelector": "cgprof.io/tuning=open", "actual": "-1",
                                  "state": "applied"}, rows
        assert rows[MLOCK]["entry"] == "machineConfig[1]" and rows[MLOCK]["nodeSelector"] == "", rows
        assert rows[MLOCK]["state"] == "applied", rows
        e = wait_for(lambda: changes(agent, MSG_APPLY, PARANOID) or None, what="the apply entry")[-1]
        assert e["CGPROF_NODE"] == NODE and e["CGPROF_MACHINE_ENTRY"] == "machineConfig[0]", e
        assert e["CGPROF_NODE_SELECTOR"] == "cgprof.io/tuning=open", e
        assert e["CGPROF_OLD_VALUE"] == paranoid_orig and e["CGPROF_NEW_VALUE"] == "-1", e
        # The text output names the same.
        text = agent.ctl("check").stdout
        assert "machineConfig[0] (cgprof.io/tuning=open)" in text and "applied" in text, text

        # The label removed: paranoid back to its original, the unscoped entry stays.
        kc.label("node", NODE, None, f"{LABEL}-")
        wait_for(lambda: s.read(PARANOID) == paranoid_orig, timeout=60, what="paranoid restored")
        assert s.read(MLOCK) == mlock
        e = wait_for(lambda: changes(agent, MSG_RESTORE, PARANOID) or None, what="the restore entry")[-1]
        assert e["CGPROF_NODE"] == NODE and e["CGPROF_MACHINE_ENTRY"] == "machineConfig[0]", e
        assert e["CGPROF_OLD_VALUE"] == "-1" and e["CGPROF_NEW_VALUE"] == paranoid_orig, e
        assert "no longer select" in e["MESSAGE"], e
        rows, _ = check(agent)
        assert rows[PARANOID]["state"] == "restored" and rows[PARANOID]["desired"] == "", rows
        assert rows[MLOCK]["state"] == "applied", rows

        # Another node's label: nothing here (the marker comes after it).
        kc.label("node", OTHER_NODE, None, f"{LABEL}=open")
        mark(agent, "1")
        assert s.read(PARANOID) == paranoid_orig
        assert len(changes(agent, MSG_APPLY, PARANOID)) == 1

        # Re-added: applied again.
        kc.label("node", NODE, None, f"{LABEL}=open")
        wait_for(lambda: s.read(PARANOID) == "-1", timeout=60, what="paranoid applied again")
        wait_for(lambda: len(changes(agent, MSG_APPLY, PARANOID)) == 2 or None, what="the second apply entry")

        def counts():
            return (len(changes(agent, MSG_APPLY, PARANOID)), len(changes(agent, MSG_RESTORE, PARANOID)),
                    len(changes(agent, MSG_APPLY, MLOCK)), len(changes(agent, MSG_RESTORE, MLOCK)))

        before = counts()
        # API server restart: the watch reconnects, nothing applied changes.
        reconnects = agent.status()["kubernetes"]["nodeWatch"]["reconnects"]
        kc.restart_apiserver()
        mark(agent, "2")
        assert agent.status()["kubernetes"]["nodeWatch"]["reconnects"] > reconnects
        assert (s.read(PARANOID), s.read(MLOCK)) == ("-1", mlock)

        # A real 410 Gone on the node watch: etcd moves on and is compacted
        # while the API server is down; the watch relists.
        relists = agent.status()["kubernetes"]["nodeWatch"]["relists"]
        kc.stop_apiserver()
        kc.etcd_bump(20)
        kc.compact_etcd()
        kc.start_apiserver()
        wait_for(lambda: agent.status()["kubernetes"]["nodeWatch"]["relists"] > relists, timeout=60,
                 what="a relist of the node watch after 410 Gone")
        mark(agent, "3")
        assert (s.read(PARANOID), s.read(MLOCK)) == ("-1", mlock)
        assert counts() == before, (counts(), before)

        # The Node deleted: its last known labels stay, and it is logged.
        kc.kubectl("delete", "node", NODE)
        wait_for(lambda: "was deleted: machineConfig keeps going by its last known labels" in agent.log(),
                 timeout=60, what="the deleted-node log line")
        _, j = check(agent)
        assert j["labelsSource"].startswith("node (deleted"), j
        assert "cgprof.io/tuning=open" in j["labels"], j
        assert (s.read(PARANOID), s.read(MLOCK)) == ("-1", mlock)
        assert counts() == before, (counts(), before)

        # Stopped: every original back.
        assert agent.stop() == 0
        assert (s.read(PARANOID), s.read(MLOCK)) == (paranoid_orig, s.orig[MLOCK])
    finally:
        agent.cleanup()
        s.cleanup()
        for n in (NODE, OTHER_NODE):
            kc.kubectl("delete", "node", n, "--ignore-not-found", check=False)


def test_not_read_yet_only_unscoped():
    """A Node that does not exist: only the unscoped entry applies, and
    status and check say why; created with the label, the scoped one too."""
    s = Sysctls()
    mlock = str(int(s.orig[MLOCK]) + 516)
    agent = kube_agent(scoped_config(mlock), s)
    try:
        agent.start()
        wait_for(lambda: s.read(MLOCK) == mlock, timeout=60, what="the unscoped entry")
        wait_for(lambda: "does not exist: only the machineConfig entries without nodeSelector apply" in agent.log(),
                 timeout=60, what="the node-missing log line")
        st = agent.status()["machineConfig"]
        assert st["nodeRead"] is False and "only entries without nodeSelector apply" in st["note"], st
        rows, j = check(agent)
        assert j["labelsSource"].startswith("none"), j
        assert rows[PARANOID]["state"] == "waiting for the node's labels", rows
        assert s.read(PARANOID) == s.orig[PARANOID]
        node(NODE, {LABEL: "open"})
        wait_for(lambda: s.read(PARANOID) == "-1", timeout=60, what="paranoid once the Node exists")
        assert agent.stop() == 0
        assert (s.read(PARANOID), s.read(MLOCK)) == (s.orig[PARANOID], s.orig[MLOCK])
    finally:
        agent.cleanup()
        s.cleanup()
        kc.kubectl("delete", "node", NODE, "--ignore-not-found", check=False)


def test_host_node_labels():
    """No Kubernetes: nodeLabels in the config are the host's labels; a
    reload without the label restores the scoped entry."""
    s = Sysctls()
    mlock = str(int(s.orig[MLOCK]) + 516)
    config = scoped_config(mlock)
    config["nodeLabels"] = {LABEL: "open"}
    if s.orig[PARANOID] == "-1":
        s.write(PARANOID, "2")
    orig = s.read(PARANOID)
    agent = Agent(config, extra_args=["--sysctl-root", s.root])
    try:
        agent.start()
        assert (s.read(PARANOID), s.read(MLOCK)) == ("-1", mlock)
        _, j = check(agent)
        assert j["labelsSource"] == "nodeLabels" and j["labels"] == "cgprof.io/tuning=open", j
        config["nodeLabels"] = {LABEL: "closed"}
        agent.write_config(config)
        agent.signal(signal.SIGHUP)
        wait_for(lambda: s.read(PARANOID) == orig, what="paranoid restored after the reload")
        assert s.read(MLOCK) == mlock
        assert agent.stop() == 0
        assert (s.read(PARANOID), s.read(MLOCK)) == (orig, s.orig[MLOCK])
    finally:
        agent.cleanup()
        s.cleanup()


def test_overlapping_entries_refused():
    """Two entries for one sysctl that one node can both match: refused at
    load, both key paths named (the agent does not start)."""
    config = {
        "machineConfig": [
            {"name": PARANOID, "value": "-1", "nodeSelector": {"matchLabels": {LABEL: "open"}}},
            {"name": PARANOID, "value": "1", "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}}},
        ],
        "profiles": [{"name": "p"}], "targets": [],
    }
    s = Sysctls()
    agent = Agent(config, extra_args=["--sysctl-root", s.root])
    try:
        agent.start(wait_ready=False)
        assert agent.proc.wait(30) != 0
        out = agent.log()
        assert "machineConfig[1].name: duplicate sysctl" in out and "machineConfig[0]" in out, out
        assert "{cgprof.io/tuning=open,nvidia.com/gpu.present=true}" in out, out
        assert s.read(PARANOID) == s.orig[PARANOID]
    finally:
        agent.cleanup()
        s.cleanup()
    # Disjoint selectors are fine.
    config["machineConfig"][1]["nodeSelector"] = {
        "matchExpressions": [{"key": LABEL, "operator": "NotIn", "values": ["open"]}]}
    s = Sysctls()
    agent = Agent(config, extra_args=["--sysctl-root", s.root])
    try:
        agent.start()
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        s.cleanup()


def with_cluster(t):
    """The cluster, started on first use: without a kube-apiserver the
    tests that need one skip, the others still run."""
    def run():
        global kc
        if kc is None:
            kc = KubeCluster().__enter__()
        t()
    run.__name__ = t.__name__
    return run


if __name__ == "__main__":
    ensure_journald()
    try:
        main([test_overlapping_entries_refused, test_host_node_labels,
              with_cluster(test_node_labels_select_entries), with_cluster(test_not_read_yet_only_unscoped)])
    finally:
        if kc:
            kc.cleanup()
        stop_journald()
