#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Kubernetes client (agent/kube/kube-client.h: KubeWatch) through the probe
program tests/kube-watch-probe, against

- a REAL kube-apiserver v1.20.2 + etcd (kubelib.KubeCluster): list+watch of
  namespaces and of the pods of one node (field selector), ADDED/MODIFIED/
  DELETED in order, pagination, a real 410 after etcd compaction while the
  probe missed changes (relist, nothing duplicated or lost), an API server
  restart, an API server that stalls (SIGSTOP) longer than the idle timeout,
  and a tokenFile that is re-read (an invalid token, then a valid one);
- the fault server (kube_fault_server.FaultServer) for what a real server
  cannot be made to do on demand: a stream cut mid-event, malformed and
  oversized events, a slow trickle, a silent stream, ERROR 410 events, HTTP
  410/500 with backoff, an expired continue token, bookmarks and watch
  timeouts, a revoked token.

The probe's output is replayed as a consumer would (sync begin / ADDED... /
sync done, then events) and every line is checked: no object twice in one
sync, no ADDED for a known object, no MODIFIED/DELETED for an unknown one,
resourceVersions increasing along a watch.

Runs as any user; needs CGPROF_KUBE_WATCH_PROBE (set by meson). The real
server part skips when kube-apiserver cannot be built; then the whole test
exits 77 (skipped) if nothing failed. `test_kube_client.py NAME...` runs only
the tests whose names contain one of NAME."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kubelib  # noqa: E402
from cgproflib import SKIP, log, skip  # noqa: E402
from kube_fault_server import FaultServer  # noqa: E402

PROBE = os.environ.get("CGPROF_KUBE_WATCH_PROBE", "")


# ---------------------------------------------------------------------------
# the probe


class Replay:
    """A consumer of the probe's output: the objects it knows, and every
    breach of the contract seen."""

    def __init__(self):
        self.state = {}
        self.pending = None
        self.vanished = []
        self.syncs = 0
        self.violations = []
        self.last_rv = None

    def feed(self, m):
        if m.get("sync") == "begin":
            if self.pending is not None:
                # A list that failed half way may be started over.
                pass
            self.pending = {}
            self.vanished = []
            return
        if "vanished" in m:
            # The watch's relist bookkeeping: what the list did not report again.
            if self.pending is None:
                self.violations.append(f"vanished outside a sync: {m}")
            ns, _, name = m["vanished"].rpartition("/")
            self.vanished.append((ns or None, name))
            return
        if m.get("sync") == "done":
            if self.pending is None:
                self.violations.append(f"sync done without begin: {m}")
                self.pending = {}
            want = set(self.state) - set(self.pending)
            if set(self.vanished) != want or len(self.vanished) != len(want):
                self.violations.append(f"vanished {self.vanished}, expected {sorted(want, key=str)}")
            keys = ["/".join(k for k in key if k) for key in self.vanished]
            if keys != sorted(keys):
                self.violations.append(f"vanished not in key order: {keys}")
            self.state = self.pending
            self.pending = None
            self.vanished = []
            self.syncs += 1
            self.last_rv = None
            return
        if "event" not in m:
            return
        key = (m.get("namespace"), m.get("name"))
        t = m["event"]
        if self.pending is not None:
            if t != "ADDED":
                self.violations.append(f"{t} during a sync: {m}")
            if key in self.pending:
                self.violations.append(f"{key} twice in one sync: {m}")
            self.pending[key] = m
            return
        if self.syncs == 0:
            self.violations.append(f"event before the first sync: {m}")
        try:
            rv = int(m.get("rv"))
        except (TypeError, ValueError):
            rv = None
        if rv is not None and self.last_rv is not None and rv <= self.last_rv:
            self.violations.append(f"resourceVersion went from {self.last_rv} to {rv}: {m}")
        if rv is not None:
            self.last_rv = rv
        if t == "ADDED":
            if key in self.state:
                self.violations.append(f"ADDED again: {m}")
            self.state[key] = m
        elif t == "MODIFIED":
            if key not in self.state:
                self.violations.append(f"MODIFIED for an unknown object: {m}")
            self.state[key] = m
        elif t == "DELETED":
            if key not in self.state:
                self.violations.append(f"DELETED for an unknown object: {m}")
            self.state.pop(key, None)
        else:
            self.violations.append(f"unknown event type: {m}")


class Probe:
    """kube-watch-probe in the background; its JSON lines are collected (with
    the time they arrived) and replayed."""

    def __init__(self, kubeconfig, path, field_selector=None, **opts):
        self.argv = [PROBE, "--kubeconfig", kubeconfig, "--path", path]
        if field_selector:
            self.argv += ["--field-selector", field_selector]
        for k, v in opts.items():
            if v is not None:
                self.argv += [f"--{k.replace('_', '-')}", str(v)]
        self.lines = []
        self.bad_output = []
        self.replay = Replay()
        self.cv = threading.Condition()
        self.proc = None
        self.stderr = tempfile.NamedTemporaryFile(prefix="kube-watch-probe-", suffix=".log", delete=False)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.kill()
        if exc[0] is not None:
            log(f"probe stderr (tail):\n{self.log_tail()}")
        try:
            os.unlink(self.stderr.name)
        except OSError:
            pass
        return False

    def start(self):
        env = dict(os.environ, CGPROF_LOG_LEVEL=os.environ.get("CGPROF_LOG_LEVEL", "debug"))
        self.proc = kubelib.popen(self.argv + ["--log-level", "debug"], stdout=subprocess.PIPE,
                                  stderr=self.stderr, stdin=subprocess.DEVNULL, env=env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self):
        for raw in self.proc.stdout:
            t = time.monotonic()
            try:
                m = json.loads(raw)
                if not isinstance(m, dict):
                    raise ValueError("not an object")
            except ValueError:
                with self.cv:
                    self.bad_output.append(raw)
                    self.cv.notify_all()
                continue
            with self.cv:
                self.lines.append((t, m))
                self.replay.feed(m)
                self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

    def log_tail(self, n=60):
        try:
            with open(self.stderr.name, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def wait(self, pred, timeout=30, what="condition"):
        """Waits until pred(self) is true (checked on each output line)."""
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                v = pred(self)
                if v:
                    return v
                if self.proc.poll() is not None and not self.reader.is_alive():
                    raise AssertionError(f"probe exited ({self.proc.returncode}) waiting for {what}\n"
                                         f"{self.log_tail()}")
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}; last stats {self.stats()}\n"
                                         f"{self.log_tail()}")
                self.cv.wait(min(left, 0.2))

    # views (take the lock themselves; safe from wait() predicates too)

    def events(self, name=None, namespace=None):
        with self.cv:
            return [m for _, m in self.lines if "event" in m and (name is None or m.get("name") == name)
                    and (namespace is None or m.get("namespace") == namespace)]

    def vanished(self):
        """The keys the watch reported vanished after a relist, in order."""
        with self.cv:
            return [m["vanished"] for _, m in self.lines if "vanished" in m]

    def all_stats(self):
        with self.cv:
            return [(t, m["stats"]) for t, m in self.lines if "stats" in m]

    def stats(self):
        s = self.all_stats()
        return s[-1][1] if s else {}

    def state(self):
        with self.cv:
            return dict(self.replay.state)

    def keys(self):
        return set(self.state())

    def syncs(self):
        with self.cv:
            return self.replay.syncs

    def violations(self):
        with self.cv:
            return list(self.replay.violations) + [f"not JSON: {b!r}" for b in self.bad_output]

    def wait_synced(self, n=1, timeout=30):
        return self.wait(lambda p: p.syncs() >= n, timeout, f"sync #{n}")

    def wait_stats(self, pred, timeout=30, what="stats"):
        return self.wait(lambda p: pred(p.stats()) and p.stats(), timeout, what)

    def wait_keys(self, expected, timeout=30, what=None):
        expected = set(expected)
        return self.wait(lambda p: p.keys() == expected, timeout,
                         what or f"state == {len(expected)} objects (differs by: "
                         f"{sorted(self.keys() ^ expected)[:10]})")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=20):
        """SIGTERM; the probe prints its final stats and exits 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"probe did not exit on SIGTERM\n{self.log_tail()}")
        self.reader.join(10)
        assert rc == 0, f"probe exited {rc}\n{self.log_tail()}"
        return self.stats()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    def check(self):
        v = self.violations()
        assert not v, "contract violations:\n  " + "\n  ".join(v[:20])


# ---------------------------------------------------------------------------
# helpers



def sanitized(binary):
    """Whether the binary is built with AddressSanitizer (links libasan)."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "libasan" in out

def ok(cond, msg):
    if not cond:
        raise AssertionError(msg)


def types_of(probe, name, namespace=None):
    """Watch event types for one object since the last sync done (not the
    ADDED of a list)."""
    with probe.cv:
        out = []
        for _, m in probe.lines:
            if m.get("sync") in ("begin", "done"):
                out = []
            elif "event" in m and m.get("name") == name and (namespace is None or m.get("namespace") == namespace):
                out.append(m["event"])
        return out


# ---------------------------------------------------------------------------
# the real API server


KC = None


def real_keys(kind, field_selector=None):
    if kind == "namespaces":
        objs = KC.get("namespaces")["items"]
    else:
        objs = KC.get("pods", ns="*", field_selector=field_selector)["items"]
    return {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs}


def real_uids(kind, field_selector=None):
    if kind == "namespaces":
        objs = KC.get("namespaces")["items"]
    else:
        objs = KC.get("pods", ns="*", field_selector=field_selector)["items"]
    return {(o["metadata"].get("namespace"), o["metadata"]["name"]): o["metadata"]["uid"] for o in objs}


def check_uids(probe, kind, field_selector=None):
    want = real_uids(kind, field_selector)
    got = {k: m.get("uid") for k, m in probe.state().items()}
    ok(got == want, f"uids differ: {sorted(set(got.items()) ^ set(want.items()))[:6]}")


NODE_A = "spec.nodeName=node-a"


def test_real_namespaces():
    with Probe(KC.kubeconfig, "/api/v1/namespaces") as p:
        p.wait_synced()
        ok({"default", "kube-system", "kube-public"} <= {k[1] for k in p.keys()},
           f"system namespaces missing: {p.keys()}")
        p.wait_keys(real_keys("namespaces"))
        ok(all(k[0] is None for k in p.keys()), f"cluster-scoped objects have a namespace: {p.keys()}")
        KC.create_namespace("kc-ns-1", {"team": "ml"})
        p.wait(lambda p: ("ADDED" in types_of(p, "kc-ns-1")), what="ADDED kc-ns-1")
        KC.label("namespace", "kc-ns-1", None, "team=infra")
        p.wait(lambda p: types_of(p, "kc-ns-1")[-1:] == ["MODIFIED"], what="MODIFIED kc-ns-1")
        KC.delete_namespace("kc-ns-1")
        p.wait(lambda p: "DELETED" in types_of(p, "kc-ns-1"), what="DELETED kc-ns-1")
        t = types_of(p, "kc-ns-1")
        log("kc-ns-1 events:", t)
        ok(t[0] == "ADDED" and t[-1] == "DELETED" and set(t[1:-1]) <= {"MODIFIED"} and len(t) >= 3,
           f"events out of order: {t}")
        p.wait_keys(real_keys("namespaces"))
        check_uids(p, "namespaces")
        st = p.stop()
        log("final stats:", st)
        ok(st.get("synced") is True and st.get("relists") == 0, f"stats: {st}")
        ok(st.get("events", 0) >= 3, f"events not counted: {st}")
        p.check()
    # --exit-after-events: exits 0 by itself.
    p = Probe(KC.kubeconfig, "/api/v1/namespaces", exit_after_events=2)
    with p:
        rc = p.proc.wait(30)
        p.reader.join(5)
        ok(rc == 0, f"--exit-after-events: exit {rc}\n{p.log_tail()}")
        ok(len(p.events()) >= 2, f"--exit-after-events 2 printed {len(p.events())} events")


def test_real_pods_field_selector():
    ns = "kc-pods"
    KC.create_namespace(ns)
    a0 = KC.create_pod(ns, "a0", "node-a")
    KC.create_pod(ns, "b0", "node-b")
    with Probe(KC.kubeconfig, "/api/v1/pods", NODE_A) as p:
        p.wait_synced()
        ok((ns, "a0") in p.keys() and (ns, "b0") not in p.keys(), f"initial list: {p.keys()}")
        ok(p.state()[(ns, "a0")]["uid"] == a0["metadata"]["uid"], "uid of a0")
        a1 = KC.create_pod(ns, "a1", "node-a", labels={"app": "x"})
        KC.create_pod(ns, "b1", "node-b")
        KC.label("pod", "a1", ns, "app=y")
        KC.set_pod_running(ns, "a1", {"main": kubelib.new_container_id()})
        KC.label("pod", "b1", ns, "app=z")
        KC.delete_pod(ns, "a1")
        KC.delete_pod(ns, "b1")
        KC.delete_pod(ns, "b0")
        p.wait(lambda p: "DELETED" in types_of(p, "a1"), what="DELETED a1")
        t = types_of(p, "a1")
        log("a1 events:", t)
        # label, status, and the deletion (which may first set
        # deletionTimestamp: MODIFIED)
        ok(t[0] == "ADDED" and t[-1] == "DELETED" and set(t[1:-1]) == {"MODIFIED"} and len(t) >= 4,
           f"a1 events: {t}")
        ok(all(m["uid"] == a1["metadata"]["uid"] for m in p.events("a1")), "uid of a1 events")
        ok(not p.events("b0") and not p.events("b1"), f"pods of node-b reported: {p.events('b1')}")
        # rv of each event is the object's new resourceVersion, increasing
        rvs = [int(m["rv"]) for m in p.events("a1")]
        ok(rvs == sorted(rvs) and len(set(rvs)) == len(rvs), f"a1 rvs {rvs}")
        p.wait_keys(real_keys("pods", NODE_A))
        check_uids(p, "pods", NODE_A)
        st = p.stop()
        ok(st.get("relists") == 0 and st.get("reconnects") == 0 and st.get("lastError") == 0, f"stats: {st}")
        p.check()


def list_requests_total():
    st, text = KC.api("GET", "/metrics", raw=True)
    ok(st == 200, f"/metrics: {st}")
    n = 0
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="pods"' in line and 'verb="LIST"' in line \
                and 'scope="cluster"' in line:
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


def test_real_pagination():
    ns = "kc-page"
    KC.create_namespace(ns)
    t0 = time.monotonic()
    KC.create_pods_bulk(ns, [f"pa-{i:03d}" for i in range(130)], "node-a")
    KC.create_pods_bulk(ns, [f"pb-{i:03d}" for i in range(20)], "node-b")
    log(f"150 pods created in {time.monotonic() - t0:.1f}s")
    want = real_keys("pods", NODE_A)
    before = list_requests_total()
    with Probe(KC.kubeconfig, "/api/v1/pods", NODE_A, page_size=25) as p:
        p.wait_synced()
        after = list_requests_total()
        pages = after - before
        log(f"{len(want)} pods of node-a listed in {pages} LIST requests (page size 25)")
        ok(pages >= math.ceil(len(want) / 25), f"only {pages} LIST requests for {len(want)} pods")
        p.wait_keys(want)
        check_uids(p, "pods", NODE_A)
        p.stop()
        p.check()


def test_real_token_file():
    """The kubeconfig's tokenFile starts with a token the server refuses:
    the probe fails with lastError set; once the file holds a valid token
    (renamed over it, as kubelet rotates projected tokens) it syncs."""
    d = tempfile.mkdtemp(prefix="kc-token-")
    try:
        tf = os.path.join(d, "token")
        with open(tf, "w") as f:
            f.write("not-a-valid-token\n")
        kcfg = KC.write_kubeconfig(os.path.join(d, "kubeconfig"), token_file=tf)
        with Probe(kcfg, "/api/v1/namespaces", backoff_max_msec=500) as p:
            st = p.wait_stats(lambda s: s.get("lastError", 0) != 0, what="lastError after 401")
            log("with an invalid token:", st)
            ok(st.get("synced") is False and p.syncs() == 0, f"synced with an invalid token: {st}")
            ok(st.get("lastError") == -401, f"lastError {st.get('lastError')} is not -401")
            tmp = tf + ".new"
            with open(tmp, "w") as f:
                f.write(KC.token2 + "\n")
            os.rename(tmp, tf)
            p.wait_synced(timeout=30)
            p.wait_keys(real_keys("namespaces"))
            st = p.wait_stats(lambda s: s.get("synced") and s.get("lastError") == 0, what="lastError cleared")
            KC.create_namespace("kc-token-ns")
            p.wait(lambda p: "ADDED" in types_of(p, "kc-token-ns"), what="ADDED after recovery")
            p.stop()
            p.check()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_real_apiserver_restart():
    ns = "kc-restart"
    KC.create_namespace(ns)
    KC.create_pod(ns, "r0", "node-a")
    with Probe(KC.kubeconfig, "/api/v1/pods", NODE_A, backoff_max_msec=1000) as p:
        p.wait_synced()
        KC.create_pod(ns, "before-stop", "node-a")
        KC.stop_apiserver()
        time.sleep(1)
        KC.start_apiserver()
        KC.create_pod(ns, "after-start", "node-a")
        KC.delete_pod(ns, "r0")
        p.wait_keys(real_keys("pods", NODE_A), timeout=60)
        st = p.wait_stats(lambda s: s.get("synced"), what="synced after restart")
        log("after restart:", st)
        ok(st.get("reconnects", 0) + st.get("relists", 0) >= 1, f"no reconnect counted: {st}")
        ok(len([e for e in p.events("before-stop") if e["event"] == "ADDED"]) >= 1, "before-stop never seen")
        check_uids(p, "pods", NODE_A)
        p.stop()
        p.check()


def test_real_apiserver_stall():
    """SIGSTOP of the API server longer than --idle-sec: the probe notices the
    silence and reconnects; events after SIGCONT arrive."""
    ns = "kc-stall"
    KC.create_namespace(ns)
    KC.create_pod(ns, "ticker", "node-a")
    stop = threading.Event()

    def tick():
        i = 0
        while not stop.is_set():
            i += 1
            try:
                KC.api("PATCH", f"/api/v1/namespaces/{ns}/pods/ticker", {"metadata": {"labels": {"tick": str(i)}}},
                       content_type="application/merge-patch+json", timeout=2)
            except OSError:
                pass
            stop.wait(0.4)

    th = threading.Thread(target=tick, daemon=True)
    with Probe(KC.kubeconfig, "/api/v1/pods", NODE_A, idle_sec=3, backoff_max_msec=1000) as p:
        p.wait_synced()
        th.start()
        try:
            p.wait(lambda p: len(p.events("ticker")) >= 8, what="ticks")
            st = p.stats()
            ok(st.get("reconnects") == 0, f"reconnected while events flowed: {st}")
            t_pause = time.monotonic()
            KC.pause_apiserver()
            time.sleep(9)
            during = [s for t, s in p.all_stats() if t > t_pause]
            KC.resume_apiserver()
            t_resume = time.monotonic()
            log("stats during the stall:", during[-1] if during else None)
            ok(any(s.get("reconnects", 0) >= 1 or s.get("lastError", 0) != 0 for s in during),
               f"the stall went unnoticed for 9s with --idle-sec 3: {during[-1:]}")
            n = len(p.events("ticker"))
            p.wait(lambda p: len(p.events("ticker")) >= n + 3, timeout=30, what="ticks after SIGCONT")
        finally:
            stop.set()
            th.join()
            if KC.paused:
                KC.resume_apiserver()
        KC.create_pod(ns, "after-stall", "node-a")
        p.wait(lambda p: "ADDED" in types_of(p, "after-stall"), what="ADDED after the stall")
        p.wait_keys(real_keys("pods", NODE_A))
        st = p.stop()
        log("final:", st, f"(resumed {time.monotonic() - t_resume:.1f}s ago)")
        ok(st.get("reconnects", 0) >= 1, f"no reconnect: {st}")
        p.check()


def test_real_410_relist():
    """The probe misses changes (SIGSTOP), etcd is compacted past its
    resourceVersion while the API server is down: the watch gets a real 410,
    the probe relists and ends with exactly the server's objects."""
    ns = "kc-410"
    KC.create_namespace(ns)
    for n in ("keep-1", "keep-2", "keep-3", "del-1", "del-2"):
        KC.create_pod(ns, n, "node-a")
    KC.create_pod(ns, "other-1", "node-b")
    with Probe(KC.kubeconfig, "/api/v1/pods", NODE_A, backoff_max_msec=1000) as p:
        p.wait_synced()
        p.wait_keys(real_keys("pods", NODE_A))
        rv_before = p.wait_stats(lambda s: s.get("rv"), what="rv")["rv"]
        p.signal(signal.SIGSTOP)
        try:
            # SIGKILL: a graceful stop would wait (60 s) for the frozen
            # probe's HTTP/2 connection to drain.
            KC.kill_apiserver()
            KC.start_apiserver()
            # Changes the probe never sees as events.
            KC.delete_pod(ns, "del-1")
            KC.delete_pod(ns, "del-2")
            for n in ("new-1", "new-2", "new-3"):
                KC.create_pod(ns, n, "node-a")
            KC.label("pod", "keep-1", ns, "changed=yes")
            KC.stop_apiserver()
            rev = KC.etcd_bump(3)
            KC.compact_etcd(rev)
            log(f"probe at rv {rv_before}; etcd compacted at {rev}")
            KC.start_apiserver()
        finally:
            p.signal(signal.SIGCONT)
        st = p.wait_stats(lambda s: s.get("relists", 0) >= 1 and s.get("synced"), timeout=60,
                          what="a relist after 410")
        log("after the 410:", st)
        p.wait_keys(real_keys("pods", NODE_A))
        check_uids(p, "pods", NODE_A)
        ok(not any(e["event"] == "DELETED" for e in p.events("del-1")), "a DELETED it cannot have seen")
        # ... but the relist says they vanished (and only they).
        ok(p.vanished() == [f"{ns}/del-1", f"{ns}/del-2"], f"vanished: {p.vanished()}")
        # Watching goes on from the new list.
        KC.create_pod(ns, "new-4", "node-a")
        p.wait(lambda p: "ADDED" in types_of(p, "new-4"), what="ADDED after the relist")
        p.stop()
        p.check()


def test_real_bad_kubeconfig():
    d = tempfile.mkdtemp(prefix="kc-bad-")
    try:
        cases = {"missing file": os.path.join(d, "nope")}
        bad_yaml = os.path.join(d, "bad.yaml")
        with open(bad_yaml, "w") as f:
            f.write("apiVersion: v1\nclusters: [\n  - {name: x\n")
        cases["bad YAML"] = bad_yaml
        noctx = os.path.join(d, "noctx.yaml")
        kubelib.write_kubeconfig(noctx, "https://127.0.0.1:1", None, token="x")
        with open(noctx) as f:
            text = f.read().replace('current-context: "test"', 'current-context: "elsewhere"')
        with open(noctx, "w") as f:
            f.write(text)
        cases["unknown current-context"] = noctx
        for what, path in cases.items():
            r = subprocess.run([PROBE, "--kubeconfig", path, "--path", "/api/v1/namespaces"], capture_output=True,
                               text=True, timeout=30)
            log(f"{what}: exit {r.returncode}: {r.stderr.strip()[:200]}")
            ok(r.returncode == 1, f"{what}: exit {r.returncode}")
            ok(r.stderr.strip(), f"{what}: no message")
            ok(not r.stdout.strip(), f"{what}: printed {r.stdout[:200]!r}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------
# the fault server


CERTS = None
FTOKEN = kubelib.new_token()
FDIR = None


class Fault:
    """A FaultServer with a kubeconfig for it."""

    def __init__(self, **kw):
        kw.setdefault("bookmark_interval", 1)
        self.fs = FaultServer(CERTS["cert"], CERTS["key"], [FTOKEN], **kw)
        self.token_file = os.path.join(FDIR, f"token-{id(self)}")

    def __enter__(self):
        self.fs.start()
        with open(self.token_file, "w") as f:
            f.write(FTOKEN + "\n")
        self.kubeconfig = kubelib.write_kubeconfig(os.path.join(FDIR, f"kubeconfig-{id(self)}"), self.fs.url,
                                                   CERTS["ca"], token_file=self.token_file)
        return self

    def __exit__(self, *exc):
        self.fs.stop()
        if exc[0] is not None:
            log("fault server requests:\n  " + "\n  ".join(describe(r) for r in self.fs.requests()[-30:]))
        return False

    def probe(self, path="/api/v1/pods", field_selector=NODE_A, **opts):
        return Probe(self.kubeconfig, path, field_selector, **opts)

    def keys(self, resource="pods", node="node-a"):
        return {(k[0] or None, k[1]) for k, o in self.fs.current(resource).items()
                if node is None or o["spec"].get("nodeName") == node}


def describe(r):
    q = "&".join(f"{k}={v}" for k, v in r["query"].items() if k != "continue")
    if "continue" in r["query"]:
        q += "&continue=…"
    return f"{r['t']:.3f} {r['method']} {r['path']}?{q} -> {r.get('status')} {r.get('faults', '')}"


def watch_rvs(fs):
    return [r["query"].get("resourceVersion") for r in fs.requests("watch")]


def test_fault_pagination_and_watch():
    with Fault(page_max=7) as f:
        fs = f.fs
        for i in range(20):
            fs.add_pod("default", f"a-{i:02d}", "node-a")
        for i in range(10):
            fs.add_pod("other", f"b-{i:02d}", "node-b")
        with f.probe() as p:
            p.wait_synced()
            p.wait_keys(f.keys())
            lists = fs.requests("list")
            log(f"{len(lists)} LIST requests:", [describe(r) for r in lists])
            ok(len(lists) >= 3, f"20 pods at most 7 a page in {len(lists)} LIST requests")
            ok(all(r["query"].get("limit") for r in lists), "LIST without limit")
            ok("continue" not in lists[0]["query"] and all("continue" in r["query"] for r in lists[1:]),
               "continue tokens not followed")
            ok(all(r["query"].get("fieldSelector") == NODE_A for r in lists), "fieldSelector not on every page")
            w = p.wait(lambda p: fs.requests("watch"), what="a watch")[0]
            ok(w["query"].get("resourceVersion") == str(130), f"watch from {w['query']} not from the list's rv 130")
            ok(w["query"].get("allowWatchBookmarks") == "true", f"no allowWatchBookmarks: {w['query']}")
            ok(w["query"].get("fieldSelector") == NODE_A, "watch without the fieldSelector")
            fs.add_pod("default", "w-1", "node-a")
            fs.add_pod("default", "w-2", "node-b")
            fs.modify("pods", "w-1", "default", labels={"x": "1"})
            fs.modify("pods", "w-1", "default", fn=lambda o: o["spec"].update(nodeName="node-c"))  # leaves node-a
            fs.delete("pods", "a-00", "default")
            p.wait(lambda p: "DELETED" in types_of(p, "a-00"), what="DELETED a-00")
            ok(types_of(p, "w-1") == ["ADDED", "MODIFIED", "DELETED"], f"w-1: {types_of(p, 'w-1')}")
            ok(not p.events("w-2"), "node-b pod reported")
            p.wait_keys(f.keys())
            st = p.stop()
            ok(st["rv"] == str(fs.rv), f"final rv {st['rv']} != {fs.rv}")
            ok(st["relists"] == 0 and st["reconnects"] == 0, f"stats {st}")
            p.check()


def test_fault_continue_expired():
    """A continue token that expired (410) mid-list: a fresh list, each
    object once."""
    with Fault(page_max=5) as f:
        fs = f.fs
        for i in range(18):
            fs.add_pod("default", f"a-{i:02d}", "node-a")
        fs.fail_requests(410, 1, verb="continue")
        with f.probe() as p:
            p.wait_synced()
            p.wait_keys(f.keys())
            lists = fs.requests("list")
            log("LIST requests:", [describe(r) for r in lists])
            codes = [r.get("status") for r in lists]
            ok(410 in codes, f"the 410 was not hit: {codes}")
            i = codes.index(410)
            ok(i + 1 < len(lists) and "continue" not in lists[i + 1]["query"],
               "after an expired continue the list must start over")
            p.stop()
            p.check()


def test_fault_cut_mid_event():
    with Fault() as f:
        fs = f.fs
        fs.add_pod("default", "p0", "node-a")
        with f.probe(backoff_max_msec=500) as p:
            p.wait_synced()
            p.wait(lambda p: fs.requests("watch"), what="a watch")
            fs.add_pod("default", "p1", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "p1"), what="ADDED p1")  # primes last rv = p1's
            rv_p1 = p.events("p1")[-1]["rv"]
            fs.next_event_fault("cut")
            fs.add_pod("default", "p2", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "p2"), what="ADDED p2 after the cut")
            fs.add_pod("default", "p3", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "p3"), what="ADDED p3")
            rvs = watch_rvs(fs)
            log("watch resourceVersions:", rvs)
            ok(len(rvs) >= 2 and rvs[1] == rv_p1, f"after the cut the watch must resume from {rv_p1}: {rvs}")
            ok(len(p.events("p2")) == 1, f"p2 reported {len(p.events('p2'))} times")
            st = p.stop()
            ok(st["reconnects"] >= 1 and st["relists"] == 0, f"stats {st}")
            p.wait_keys(f.keys())
            p.check()


def test_fault_malformed_lines():
    variants = ["syntax", "binary", "notobject", "noobject", "nometadata", "badtype"]
    with Fault() as f:
        fs = f.fs
        with f.probe() as p:
            p.wait_synced()
            p.wait(lambda p: fs.requests("watch"), what="a watch")
            fs.next_event_fault("malformed", variants=variants)
            fs.add_pod("default", "good-1", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "good-1"), what="the event after malformed lines")
            fs.add_pod("default", "good-2", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "good-2"), what="the next event")
            st = p.wait_stats(lambda s: s.get("skipped", 0) >= 2, what="skipped counted")
            log("after malformed lines:", st)
            ok(not [e for e in p.events() if e["name"] and e["name"].startswith("malformed")],
               f"malformed events reported: {p.events()}")
            ok(all(e.get("name") for e in p.events()),
               f"an object without metadata.name was reported: {[e for e in p.events() if not e.get('name')]}")
            ok(st["relists"] == 0, f"relisted: {st}")
            p.wait_keys(f.keys())
            p.stop()
            p.check()


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def test_fault_oversized_event():
    with Fault() as f:
        fs = f.fs
        with f.probe(max_event_bytes=65536) as p:
            p.wait_synced()
            p.wait(lambda p: fs.requests("watch"), what="a watch")
            hwm0 = vm_hwm_kib(p.proc.pid)
            fs.next_event_fault("oversized", size=20 << 20)
            fs.add_pod("default", "after-big", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "after-big"), timeout=60, what="the event after a 20 MiB one")
            st = p.wait_stats(lambda s: s.get("skipped", 0) >= 1, what="oversized event skipped")
            hwm1 = vm_hwm_kib(p.proc.pid)
            log(f"skipped {st['skipped']}; VmHWM {hwm0} -> {hwm1} KiB")
            ok(not p.events("oversized"), "the oversized event was reported")
            # AddressSanitizer keeps freed memory in quarantine: the peak
            # says nothing about the probe's own buffering there.
            if not sanitized(PROBE):
                ok(hwm1 - hwm0 < 8 * 1024, f"the probe's peak memory grew by {hwm1 - hwm0} KiB for a skipped event")
            fs.add_pod("default", "after-big-2", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "after-big-2"), what="the next event")
            p.wait_keys(f.keys())
            p.stop()
            p.check()


def test_fault_slow_trickle():
    """An event dribbled 8 bytes per 100 ms for several seconds, longer than
    --idle-sec: the stream is not silent, nothing times out."""
    with Fault(bookmark_interval=0.5) as f:
        fs = f.fs
        with f.probe(idle_sec=2) as p:
            p.wait_synced()
            p.wait(lambda p: fs.requests("watch"), what="a watch")
            time.sleep(3)  # bookmarks keep an idle stream alive
            ok(p.stats().get("reconnects") == 0, f"reconnected on an idle stream with bookmarks: {p.stats()}")
            fs.next_event_fault("trickle", step=8, tick=0.1)
            t0 = time.monotonic()
            fs.add_pod("default", "slow", "node-a", labels={"pad": "x" * 20})
            p.wait(lambda p: "ADDED" in types_of(p, "slow"), timeout=60, what="the trickled event")
            took = time.monotonic() - t0
            log(f"trickled event arrived after {took:.1f}s")
            ok(took >= 2.5, f"the event was not trickled ({took:.1f}s)")
            st = p.stop()
            ok(st["reconnects"] == 0, f"reconnected during a trickle: {st}")
            p.check()


def test_fault_silent_stream():
    """The stream goes silent (no byte, no bookmark) for longer than
    --idle-sec: the probe reconnects from its last resourceVersion."""
    with Fault(bookmark_interval=0.5) as f:
        fs = f.fs
        with f.probe(idle_sec=2, backoff_max_msec=500) as p:
            p.wait_synced()
            p.wait(lambda p: fs.requests("watch"), what="a watch")
            last = p.wait_stats(lambda s: s.get("rv"), what="rv")["rv"]
            fs.next_event_fault("stall", seconds=10)
            fs.add_pod("default", "late", "node-a")
            t0 = time.monotonic()
            p.wait(lambda p: "ADDED" in types_of(p, "late"), timeout=30, what="the event after reconnecting")
            took = time.monotonic() - t0
            rvs = watch_rvs(fs)
            log(f"event after {took:.1f}s; watch rvs {rvs}")
            ok(took < 6, f"a silent stream was noticed only after {took:.1f}s with --idle-sec 2")
            ok(len(rvs) >= 2 and rvs[1] == last, f"reconnect not from {last}: {rvs}")
            st = p.stop()
            ok(st["reconnects"] >= 1 and st["relists"] == 0, f"stats {st}")
            ok(len(p.events("late")) == 1, "late reported twice")
            p.check()


def test_fault_error_410_event():
    with Fault() as f:
        fs = f.fs
        fs.add_pod("default", "p0", "node-a")
        with f.probe(backoff_max_msec=500) as p:
            p.wait_synced()
            p.wait(lambda p: fs.requests("watch"), what="a watch")
            fs.next_event_fault("error410")
            fs.add_pod("default", "p1", "node-a")
            st = p.wait_stats(lambda s: s.get("relists", 0) >= 1 and s.get("synced"), what="relist after ERROR 410")
            p.wait_synced(2)
            p.wait_keys(f.keys())
            ok(len(fs.requests("list")) >= 2, "no second LIST")
            fs.add_pod("default", "p2", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "p2"), what="events after the relist")
            log("after ERROR 410:", p.stats())
            p.stop()
            p.check()


def test_fault_http_410_watch():
    """A watch that fails with HTTP 410 (and a compacted history, so that the
    rv is really too old): relist."""
    with Fault(expired_watch="http") as f:
        fs = f.fs
        fs.add_pod("default", "p0", "node-a")
        with f.probe(backoff_max_msec=500) as p:
            p.wait_synced()
            p.wait(lambda p: fs.requests("watch"), what="a watch")
            fs.fail_requests(410, 1, verb="watch")
            fs.end_watches()
            st = p.wait_stats(lambda s: s.get("relists", 0) >= 1 and s.get("synced"), what="relist after HTTP 410")
            # And the real thing: compacted while the probe missed changes.
            p.signal(signal.SIGSTOP)
            fs.drop_connections()
            fs.delete("pods", "p0", "default")
            fs.add_pod("default", "p1", "node-a")
            fs.compact()
            p.signal(signal.SIGCONT)
            p.wait_stats(lambda s: s.get("relists", 0) >= 2 and s.get("synced"), what="relist after compaction")
            p.wait_keys(f.keys())
            codes = [r.get("status") for r in fs.requests("watch")]
            log("watch statuses:", codes, "stats:", p.stats())
            ok(codes.count(410) >= 2, f"watch statuses {codes}")
            ok(p.vanished() == ["default/p0"], f"vanished: {p.vanished()}")
            p.stop()
            p.check()


def test_fault_http_500_backoff():
    """Watches failing with HTTP 500: retries back off exponentially (with
    jitter) between --backoff-min-msec and --backoff-max-msec, from the same
    resourceVersion, and recover."""
    lo, hi = 0.1, 3.2
    with Fault() as f:
        fs = f.fs
        fs.add_pod("default", "p0", "node-a")
        with f.probe(backoff_min_msec=int(lo * 1000), backoff_max_msec=int(hi * 1000)) as p:
            p.wait_synced()
            p.wait(lambda p: fs.requests("watch"), what="a watch")
            time.sleep(1.2)  # a watch that lived > 1 s ended normally
            rv = p.stats()["rv"]
            fs.clear_log()
            fs.fail_requests(500, 10, verb="watch")
            fs.end_watches()
            p.wait(lambda p: [r for r in fs.requests("watch") if r.get("status") == 200], timeout=90,
                   what="a watch that succeeds again")
            p.wait_stats(lambda s: s.get("synced") and s.get("lastError") == 0, what="recovered")
            reqs = fs.requests("watch")
            ts = [r["t"] for r in reqs]
            gaps = [b - a for a, b in zip(ts, ts[1:])]
            log("watch statuses:", [r.get("status") for r in reqs])
            log("gaps (s):", " ".join(f"{g:.2f}" for g in gaps))
            ok([r.get("status") for r in reqs[:10]] == [500] * 10, "10 failures expected first")
            ok(all(r["query"].get("resourceVersion") == rv for r in reqs), f"resourceVersion changed: {watch_rvs(fs)}")
            # Not a hot loop, and capped (slack: timer accuracy, TLS handshakes).
            ok(all(g >= lo * 0.9 for g in gaps), f"retried faster than --backoff-min-msec: {gaps}")
            ok(all(g <= hi + 1.0 for g in gaps), f"waited longer than --backoff-max-msec: {gaps}")
            # Exponential: from the 5th retry on the ceiling is 16 x min; six
            # waits all below 8 x min would mean it does not grow (and the
            # average grows).
            ok(max(gaps[4:]) >= 8 * lo, f"backoff does not grow: {gaps}")
            ok(sum(gaps[-4:]) / 4 > sum(gaps[:2]) / 2, f"backoff does not grow on average: {gaps}")
            ok(p.stats().get("relists") == 0, f"relisted on 500: {p.stats()}")
            errs = {s.get("lastError") for _, s in p.all_stats()}
            ok(-500 in errs, f"lastError never -500: {errs}")
            fs.add_pod("default", "p1", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "p1"), what="events after recovery")
            p.stop()
            p.check()


def test_fault_first_list_fails():
    with Fault() as f:
        fs = f.fs
        fs.add_pod("default", "p0", "node-a")
        fs.fail_requests(500, 2, verb="list")
        fs.fail_requests(503, 1, verb="list")
        with f.probe(backoff_max_msec=400) as p:
            p.wait_synced()
            p.wait_keys(f.keys())
            codes = [r.get("status") for r in fs.requests("list")]
            ok(codes[:4] == [500, 500, 503, 200], f"LIST statuses {codes}")
            p.stop()
            p.check()


def test_fault_bookmarks_and_timeouts():
    """The server ends every watch after 2 s (timeoutSeconds) and sends
    bookmarks: the probe watches again from the bookmark's resourceVersion,
    without relisting."""
    with Fault(bookmark_interval=0.3, max_watch_sec=2) as f:
        fs = f.fs
        fs.add_pod("default", "p0", "node-a")
        with f.probe() as p:
            p.wait_synced()
            w = p.wait(lambda p: fs.requests("watch"), what="a watch")[0]
            ok(w["query"].get("timeoutSeconds"), f"no timeoutSeconds: {w['query']}")
            bumped = fs.bump_rv(50)  # other resources changed
            p.wait(lambda p: len(fs.requests("watch")) >= 3, timeout=20, what="watches after timeouts")
            rvs = watch_rvs(fs)
            log("watch resourceVersions:", rvs)
            ok(int(rvs[-1]) >= bumped, f"bookmarks not followed: rvs {rvs}, bumped to {bumped}")
            fs.add_pod("default", "p1", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "p1"), what="event after timeouts")
            st = p.stop()
            ok(st["relists"] == 0, f"relisted: {st}")
            ok(int(st["rv"]) >= bumped, f"rv {st['rv']}")
            ok(len(fs.requests("list")) == 1, "listed again")
            p.check()


def test_fault_token_revoked():
    """The server stops accepting the token (revoked): 401, lastError set;
    the rotated token in the tokenFile is picked up and the watch goes on
    from where it was."""
    new = kubelib.new_token()
    with Fault() as f:
        fs = f.fs
        fs.add_pod("default", "p0", "node-a")
        with f.probe(backoff_max_msec=500) as p:
            p.wait_synced()
            p.wait(lambda p: fs.requests("watch"), what="a watch")
            fs.set_tokens([new])
            fs.end_watches()
            st = p.wait_stats(lambda s: s.get("lastError") == -401, what="lastError -401")
            log("revoked:", st)
            with open(f.token_file + ".new", "w") as fh:
                fh.write(new + "\n")
            os.rename(f.token_file + ".new", f.token_file)
            p.wait(lambda p: len([r for r in fs.requests("watch") if r.get("status") == 200]) >= 2,
                   what="a watch with the new token")
            fs.add_pod("default", "p1", "node-a")
            p.wait(lambda p: "ADDED" in types_of(p, "p1"), what="event with the new token")
            st = p.wait_stats(lambda s: s.get("lastError") == 0, what="lastError cleared")
            ok(st["relists"] == 0, f"relisted after a 401: {st}")
            p.stop()
            p.check()


def test_fault_namespaces_cluster_scoped():
    with Fault() as f:
        fs = f.fs
        for n in ("default", "kube-system", "team-a"):
            fs.add_namespace(n)
        with f.probe(path="/api/v1/namespaces", field_selector=None) as p:
            p.wait_synced()
            p.wait_keys({(None, "default"), (None, "kube-system"), (None, "team-a")})
            fs.modify("namespaces", "team-a", labels={"cgprof.io/profile": "enabled"})
            fs.delete("namespaces", "kube-system")
            p.wait(lambda p: types_of(p, "kube-system") == ["DELETED"], what="DELETED kube-system")
            ok(types_of(p, "team-a") == ["MODIFIED"], f"team-a {types_of(p, 'team-a')}")
            p.stop()
            p.check()


FAULT_TESTS = [test_fault_pagination_and_watch, test_fault_continue_expired, test_fault_cut_mid_event,
               test_fault_malformed_lines, test_fault_oversized_event, test_fault_slow_trickle,
               test_fault_silent_stream, test_fault_error_410_event, test_fault_http_410_watch,
               test_fault_http_500_backoff, test_fault_first_list_fails, test_fault_bookmarks_and_timeouts,
               test_fault_token_revoked, test_fault_namespaces_cluster_scoped]
REAL_TESTS = [test_real_bad_kubeconfig, test_real_namespaces, test_real_pods_field_selector, test_real_pagination,
              test_real_token_file, test_real_apiserver_restart, test_real_apiserver_stall, test_real_410_relist]


def run(tests, failed):
    for t in tests:
        log(f"=== {t.__name__}")
        t0 = time.monotonic()
        try:
            t()
            log(f"--- {t.__name__}: ok ({time.monotonic() - t0:.1f}s)")
        except SystemExit:
            raise
        except Exception:
            traceback.print_exc()
            log(f"--- {t.__name__}: FAILED ({time.monotonic() - t0:.1f}s)")
            failed.append(t.__name__)


def main():
    global KC, CERTS, FDIR
    kubelib.install_sigterm_handler()
    if not PROBE or not os.access(PROBE, os.X_OK):
        skip(f"no kube-watch-probe (CGPROF_KUBE_WATCH_PROBE={PROBE!r})")
    only = sys.argv[1:]

    def pick(ts):
        return [t for t in ts if not only or any(o in t.__name__ for o in only)]

    failed = []
    skipped = False
    FDIR = tempfile.mkdtemp(prefix="kc-fault-")
    try:
        if pick(FAULT_TESTS):
            CERTS = kubelib.make_certs(FDIR)
            run(pick(FAULT_TESTS), failed)
        if pick(REAL_TESTS):
            try:
                cluster = kubelib.KubeCluster()
            except SystemExit as e:
                if e.code != SKIP:
                    raise
                log("SKIP: the real kube-apiserver tests")
                skipped = True
            else:
                with cluster as KC:
                    run(pick(REAL_TESTS), failed)
    finally:
        shutil.rmtree(FDIR, ignore_errors=True)
    if failed:
        log("FAILED:", " ".join(failed))
        sys.exit(1)
    sys.exit(SKIP if skipped else 0)


if __name__ == "__main__":
    main()
