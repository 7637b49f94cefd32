#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Profiles pulled over HTTP (docs/pull.md).

Host mode: on loopback, without a token, /debug/pprof/profile?cgroup= runs
a session of the test workload (5:3:2 in hot_alpha/hot_beta/hot_gamma) and
answers with its profile.pb.gz, which `go tool pprof -top` reads with the
right shares; /reports lists it and /reports/ID/FILE serves its files,
nothing outside; bad arguments are 400; a non-loopback listener with
"pprof" is refused, a Unix socket (0600) is served; over TLS, a certificate rewritten on disk is served to
the next connection without a restart.

Kubernetes mode, against the real kube-apiserver of kubelib (RBAC, service
account tokens), the agent running as its ServiceAccount with the
manifests' RBAC (the base's and the pull overlay's two create rights):
"pprof" without TLS is refused at load; over TLS, a
ServiceAccount of namespace team-a bound to a Role with get on pods/profile
(the manifests' example) gets its pod's profile with `curl` and its bearer
token (`kubectl create token`), shares checked with `go tool pprof`; team-b's
pod is 403, no token is 401, a host cgroup is 403 (no nodes/profile),
another namespace's report cannot be downloaded (403) and one of its own can;
the pulls are counted in /metrics. What the reviews cost, by the API
server's own count (apiserver_request_total) and the agent's: the same bad
token 200 times is one TokenReview; one token for 200 pod names keeps 64
of its decisions and evicts no other user's; a burst of pulls past the
user's rate and distinct tokens past the address's rate are 429 with
Retry-After (no review). http.tokenAudiences: a token made with --audience
cgprof is taken, a default one 401."""

import gzip
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time

import cgproflib
import test_pprof
from cgproflib import Agent, Cgroup, HOT, log, main, profile, wait_for, workload

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE = "node-a"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_cert(directory, name="server"):
    """A self-signed certificate for 127.0.0.1 (its own CA for curl)."""
    cert, key = os.path.join(directory, f"{name}.crt"), os.path.join(directory, f"{name}.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key + ".new",
                    "-out", cert + ".new", "-days", "1", "-subj", f"/CN={name}",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def install(src_cert, src_key, cert, key):
    """Moves a new pair in place, key first (the agent loads both or keeps the last)."""
    os.rename(src_key + ".new", key)
    os.rename(src_cert + ".new", cert)


def curl(url, token=None, cacert=None, timeout=120):
    """(status, body bytes) of a GET with curl."""
    out = tempfile.mktemp(prefix="cgprof-pull-")
    argv = ["curl", "-sS", "-o", out, "-w", "%{http_code}", "--max-time", str(timeout)]
    if cacert:
        argv += ["--cacert", cacert]
    if token:
        argv += ["-H", f"Authorization: Bearer {token}"]
    r = subprocess.run(argv + [url], capture_output=True, text=True, timeout=timeout + 30)
    assert r.returncode == 0, f"curl {url} failed ({r.returncode}): {r.stderr}"
    try:
        with open(out, "rb") as f:
            body = f.read()
    finally:
        os.unlink(out)
    return int(r.stdout), body


class GoPprof(test_pprof.GoPprof):
    """go tool pprof on a pulled profile (bytes)."""

    def __init__(self, tmp):
        super().__init__(tmp)
        self.tmp = tmp

    def top(self, data):
        path = os.path.join(self.tmp, "pulled.pb.gz")
        with open(path, "wb") as f:
            f.write(data)
        return test_pprof.parse_top(self.run("-top", path))


def assert_pprof_shares(gp, data):
    assert data[:2] == b"\x1f\x8b", f"not gzipped: {data[:300]!r}"
    gzip.decompress(data)
    flat = gp.top(data)
    log("pprof -top: " + ", ".join(f"{n} {flat.get(n)}%" for n in HOT))
    for name, want in zip(HOT, (50, 30, 20)):
        assert name in flat, f"{name} not in pprof -top: {flat}"
        assert abs(flat[name] - want) <= 5, f"{name}: flat {flat[name]}% is not {want}±5%"


def check_config(config, *args):
    tmp = tempfile.mkdtemp(prefix="cgprof-pull-check-")
    try:
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        r = subprocess.run([cgproflib.CGPROFD, "--check-config", "--config", path, *args], capture_output=True,
                           text=True, timeout=30)
        return r.returncode, r.stderr
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_config_checks():
    # pprof on a non-loopback address without Kubernetes: refused, naming the key.
    rc, err = check_config({"http": {"listen": "0.0.0.0:9469", "pprof": True}}, "--no-kubernetes")
    assert rc != 0 and "http.listen" in err and "loopback" in err, err
    rc, err = check_config({"http": {"listen": "127.0.0.1:9469", "pprof": True}}, "--no-kubernetes")
    assert rc == 0, err
    rc, err = check_config({"http": {"listen": "unix:/run/cgprof/http.sock", "pprof": True}}, "--no-kubernetes")
    assert rc == 0, err
    rc, err = check_config({"http": {"listen": "unix:run/http.sock", "pprof": True}}, "--no-kubernetes")
    assert rc != 0 and "http.listen" in err and "absolute" in err, err
    # One of the TLS pair without the other.
    rc, err = check_config({"http": {"listen": "127.0.0.1:9469", "tlsCertFile": "/x.crt"}}, "--no-kubernetes")
    assert rc != 0 and "http.tlsKeyFile" in err, err
    rc, err = check_config({"http": {"listen": "127.0.0.1:9469", "pprof": "yes"}}, "--no-kubernetes")
    assert rc != 0 and "http.pprof" in err, err


def test_host_loopback_and_tls_reload():
    tmp = tempfile.mkdtemp(prefix="cgprof-pull-")
    gp = GoPprof(tmp)
    cg = Cgroup(f"cgprof-test-pull-{os.getpid()}")
    port = free_port()
    cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
    c1, k1 = make_cert(tmp, "first")
    install(c1, k1, cert, key)
    agent = Agent({
        # A pull runs the default profile's event and frequency; without
        # Kubernetes only what the targets select may be pulled ("manual":
        # the target starts nothing by itself).
        "profiles": [profile(name="pull", frequency=999, start="manual")],
        "defaultProfileRef": "pull",
        "targets": [{"name": "pulled", "profileRef": "pull", "cgroupPatterns": [cg.rel]}],
        "http": {"listen": f"127.0.0.1:{port}", "pprof": True, "tlsCertFile": cert, "tlsKeyFile": key},
    })
    base = f"https://127.0.0.1:{port}"
    try:
        agent.start()
        proc = workload(cg, 120)
        # No token needed on loopback without Kubernetes.
        st, body = curl(f"{base}/debug/pprof/profile?seconds=4&cgroup={cg.rel}", cacert=cert)
        assert st == 200, (st, body[:300])
        assert_pprof_shares(gp, body)

        # The session's report, listed and downloaded.
        st, body = curl(f"{base}/reports", cacert=cert)
        assert st == 200, (st, body)
        reports = [r for r in json.loads(body) if r["cgroup"] == cg.rel]
        assert len(reports) == 1, reports
        sid = reports[0]["session"]
        summary = agent.wait_summary(lambda s: s.get("session") == sid)
        st, body = curl(f"{base}/reports/{sid}/profile.pb.gz", cacert=cert)
        assert st == 200
        with open(os.path.join(summary["_dir"], "profile.pb.gz"), "rb") as f:
            assert body == f.read(), "the download is not the report's file"
        st, body = curl(f"{base}/reports/{sid}/summary.json", cacert=cert)
        assert st == 200 and json.loads(body)["session"] == sid
        # Nothing but a report's own files, by a well-formed ID.
        for bad in (f"/reports/{sid}/config.json", f"/reports/{sid}/../summary.json", "/reports/..%2F..%2Fetc/passwd",
                    f"/reports/{sid.upper()}/summary.json", f"/reports/{'0' * 32}/summary.json",
                    f"/reports/{sid}x/summary.json", "/reports/%2e%2e/summary.json"):
            st, body = curl(base + bad, cacert=cert)
            assert st in (400, 404), (bad, st, body)
        # Bad arguments: a message naming what is wrong.
        for q, what in (("seconds=0&cgroup=x", "seconds"), ("seconds=301&cgroup=x", "seconds"),
                        ("cgroup=../x", "cgroup"), ("namespace=a", "pod"), ("cgroup=x&pod=y", "cgroup"),
                        ("cgroup=x&frobnicate=1", "frobnicate"), ("namespace=A_B&pod=p", "namespace")):
            st, body = curl(f"{base}/debug/pprof/profile?{q}", cacert=cert)
            assert st == 400 and what in body.decode(), (q, st, body)
        # A cgroup no target selects: 403 without "pullAnyCgroup".
        st, body = curl(f"{base}/debug/pprof/profile?seconds=1&cgroup=no/such/cgroup", cacert=cert)
        assert st == 403 and b"pullAnyCgroup" in body, (st, body)
        r = subprocess.run(["curl", "-sS", "-I", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", cert,
                            f"{base}/debug/pprof/profile?seconds=1&cgroup={cg.rel}"], capture_output=True, text=True,
                           timeout=60)
        assert r.stdout == "405", ("HEAD starts no session", r.stdout, r.stderr)
        st, body = curl(f"{base}/targets", cacert=cert)
        assert st == 200 and json.loads(body)["kubernetes"] is False, body

        # A new certificate on disk is what the next connection gets, with no restart.
        def served_cn():
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                with ctx.wrap_socket(s) as t:
                    der = t.getpeercert(binary_form=True)
            pem = ssl.DER_cert_to_PEM_cert(der)
            r = subprocess.run(["openssl", "x509", "-noout", "-subject"], input=pem, capture_output=True,
                               text=True, check=True)
            return r.stdout.strip()
        assert "first" in served_cn()
        c2, k2 = make_cert(tmp, "second")
        install(c2, k2, cert, key)
        wait_for(lambda: "second" in served_cn(), timeout=30, what="the new certificate served")
        st, body = curl(f"{base}/targets", cacert=cert)
        assert st == 200, st
        # A broken certificate is refused; the last good one stays.
        good = os.path.join(tmp, "good.crt")
        shutil.copy(cert, good)
        with open(cert + ".new", "w") as f:
            f.write("not a certificate\n")
        os.rename(cert + ".new", cert)
        wait_for(lambda: "does not load" in agent.log(), timeout=30, what="the broken certificate refused")
        assert "second" in served_cn()
        st, body = curl(f"{base}/metrics", cacert=good, timeout=30)
        text = body.decode()
        assert 'cgprof_http_pprof_requests_total{code="200"}' in text, text[-2000:]
        proc.kill()
        proc.wait()
        assert agent.stop() == 0
    finally:
        agent.cleanup()
        cg.remove()
        shutil.rmtree(tmp, ignore_errors=True)


def hang_up_pull(agent, sock, cg, sampled=False):
    """A pull of 300 s on cg over the Unix socket, its client gone once its
    session runs (the pull is waiting for it) and, with sampled, once it
    has samples (a session nobody waits for writes a report only then);
    the session's ID."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sock)
    c.sendall(f"GET /debug/pprof/profile?seconds=300&cgroup={cg.rel} HTTP/1.1\r\nHost: localhost\r\n\r\n"
              .encode())
    sid = wait_for(lambda: next((s["id"] for s in json.loads(agent.ctl("--json", "sessions").stdout)
                                 if s.get("cgroup") == cg.rel and (not sampled or s.get("samples", 0) > 0)), None),
                   what="the pull's session" + (" with samples" if sampled else ""))
    c.close()
    return sid


def check_hang_up(agent, sock, cg):
    """A client that hangs up while its pull of 300 s waits stops the
    session: it ends "stopped" (not "duration", 300 s later), its report is
    written, and the abandoned request is counted."""
    before = {s["session"] for s in agent.summaries()}
    sid = hang_up_pull(agent, sock, cg, sampled=True)
    report = agent.wait_summary(lambda s: s["session"] == sid and s["session"] not in before,
                                what="the abandoned pull's report")
    assert report["endReason"] == "stopped", report["endReason"]
    assert f"the client of the pull of session {sid} hung up" in agent.log()
    status, body = curl_unix(sock, "/metrics")
    assert status == 200 and "cgprof_http_requests_abandoned_total 1" in body.decode(), body[-2000:]


def curl_unix(sock, path):
    """(status, body bytes) of a GET on the Unix socket."""
    r = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", sock,
                        f"http://localhost{path}"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    body, _, code = r.stdout.rpartition(b"\n")
    return int(code), body


def test_host_unix_socket():
    """pprof on a Unix socket: owner-only (0600), served as on loopback, removed when the agent stops."""
    tmp = tempfile.mkdtemp(prefix="cgprof-pull-unix-")
    gp = GoPprof(tmp)
    cg = Cgroup(f"cgprof-test-pull-unix-{os.getpid()}")
    sock = os.path.join(tmp, "pull.sock")
    agent = Agent({"profiles": [profile(name="pull", frequency=999)], "defaultProfileRef": "pull",
                   "http": {"listen": f"unix:{sock}", "pprof": True, "pullAnyCgroup": True}})
    try:
        agent.start()
        st = os.stat(sock)
        assert (st.st_mode & 0o777) == 0o600 and st.st_uid == 0, oct(st.st_mode)
        proc = workload(cg, 60)
        r = subprocess.run(["curl", "-sS", "-o", os.path.join(tmp, "p.pb.gz"), "-w", "%{http_code}",
                            "--unix-socket", sock, f"http://localhost/debug/pprof/profile?seconds=4&cgroup={cg.rel}"],
                           capture_output=True, text=True, timeout=120)
        assert r.stdout == "200", (r.stdout, r.stderr)
        with open(os.path.join(tmp, "p.pb.gz"), "rb") as f:
            assert_pprof_shares(gp, f.read())
        check_hang_up(agent, sock, cg)
        proc.kill()
        proc.wait()
        assert agent.stop() == 0
        assert not os.path.exists(sock), "the socket file stays after the agent stopped"
    finally:
        agent.cleanup()
        cg.remove()
        shutil.rmtree(tmp, ignore_errors=True)


# ---- Kubernetes ----

class PullClient:
    """GETs on one kept-alive TLS connection (a request costs about a
    millisecond, not a curl): (status, headers (lower-case names), body)."""

    def __init__(self, port, cacert):
        self.port = port
        self.ctx = ssl.create_default_context(cafile=cacert)
        self.conn = None

    def close(self):
        if self.conn:
            self.conn.close()
        self.conn = None

    def get(self, path, token=None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        for attempt in range(2):
            if not self.conn:
                self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=60)
            try:
                self.conn.request("GET", path, headers=headers)
                r = self.conn.getresponse()
                body = r.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A kept-alive connection the agent closed meanwhile: once more on a new one.
                self.close()
                if attempt:
                    raise
                continue
            h = {k.lower(): v for k, v in r.getheaders()}
            if h.get("connection", "").lower() == "close":
                self.close()
            return r.status, h, body


def apiserver_reviews(kc):
    """(TokenReviews, SubjectAccessReviews) the API server answered, by its own metrics."""
    st, text = kc.api("GET", "/metrics", raw=True)
    assert st == 200, (st, text[:300])
    n = {"tokenreviews": 0, "subjectaccessreviews": 0}
    for line in text.splitlines():
        m = re.match(r'apiserver_request_total\{(.*)\} (\S+)$', line)
        if m and 'verb="POST"' in m.group(1):
            for r in n:
                if f'resource="{r}"' in m.group(1):
                    n[r] += int(float(m.group(2)))
    return n["tokenreviews"], n["subjectaccessreviews"]


def agent_metric(client, name, label):
    """A sample of the agent's /metrics ({label} as written, e.g. 'kind="token"')."""
    st, _, body = client.get("/metrics")
    assert st == 200, st
    m = re.search(rf'^{name}{{{label}}} (\d+)$', body.decode(), re.M)
    assert m, f"{name}{{{label}}} not in /metrics"
    return int(m.group(1))


def agent_reviews(client):
    return (agent_metric(client, "cgprof_http_auth_reviews_total", 'kind="token"'),
            agent_metric(client, "cgprof_http_auth_reviews_total", 'kind="access"'))


class ReviewCount:
    """The reviews asked since it was made, (TokenReviews,
    SubjectAccessReviews), by the API server's count once it equals the
    agent's (the API server counts a request as it ends)."""

    def __init__(self, kc, client):
        self.kc, self.client = kc, client
        self.api, self.agent = apiserver_reviews(kc), agent_reviews(client)

    def since(self, what):
        def same():
            a, b = apiserver_reviews(self.kc), agent_reviews(self.client)
            d = (a[0] - self.api[0], a[1] - self.api[1])
            return d if d == (b[0] - self.agent[0], b[1] - self.agent[1]) else None
        return wait_for(same, timeout=30, what=what)


def check_review_costs(kc, port, cert):
    """What pulls cost the API server, counted by it (and by the agent:
    both counts move together). The agent runs with pullRateLimit
    {perSecond: 0.01, burst: 250} and reviewRateLimit {perSecond: 0.01,
    burst: 600}: no refill worth counting during the test."""
    c = PullClient(port, cert)

    # The same bad token 200 times: one TokenReview (remembered 5 s).
    n = ReviewCount(kc, c)
    t0 = time.monotonic()
    for _ in range(200):
        st, _, body = c.get("/targets?namespace=team-a", "not-a-valid-token")
        assert st == 401, (st, body)
    elapsed = time.monotonic() - t0
    tr, sar = n.since("the bad token's reviews counted")
    log(f"200 requests with the same bad token in {elapsed:.2f} s: {tr} TokenReview(s), {sar} "
        f"SubjectAccessReview(s)")
    assert sar == 0 and 1 <= tr <= 1 + int(elapsed / 5), (tr, elapsed)

    # One user's decision cached (a new user's: its token and decision
    # fresh, 10 s), then another user (scraper) asks for 200 pod names: 1
    # TokenReview, 200 SubjectAccessReviews; it keeps its last 64
    # decisions, and the first user's is still there.
    tokens = {}
    for sa in ("watcher", "scraper"):
        kc.kubectl("create", "serviceaccount", sa, "-n", "team-a")
        kc.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                  "metadata": {"name": f"cgprof-pull-{sa}", "namespace": "team-a"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cgprof-pull"},
                  "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": "team-a"}]})
        tokens[sa] = kc.kubectl("create", "token", sa, "-n", "team-a").stdout.strip()
    scraper = tokens["scraper"]
    n = ReviewCount(kc, c)
    t0 = time.monotonic()
    st, _, body = c.get("/targets?namespace=team-a", tokens["watcher"])
    assert st == 200 and n.since("the watcher's reviews counted") == (1, 1), (st, body)
    n = ReviewCount(kc, c)
    for i in range(200):
        st, _, body = c.get(f"/debug/pprof/profile?seconds=1&namespace=team-a&pod=ghost-{i}", scraper)
        assert st == 404, (i, st, body)
    cost = n.since("the scraper's reviews counted")
    log(f"200 pod names with one token in {time.monotonic() - t0:.2f} s: {cost[0]} TokenReview(s), "
        f"{cost[1]} SubjectAccessReview(s)")
    assert cost == (1, 200), cost
    st, _, body = c.get("/targets?namespace=team-a", tokens["watcher"])
    assert st == 200, (st, body)
    assert time.monotonic() - t0 < 9, "too slow to tell the caches' 10 s from an eviction"
    assert n.since("the watcher's request counted") == cost, "the watcher's cached decision was evicted"
    st, _, _ = c.get("/debug/pprof/profile?seconds=1&namespace=team-a&pod=ghost-199", scraper)
    assert st == 404 and n.since("the last name's") == cost, "the last decision not kept"
    st, _, _ = c.get("/debug/pprof/profile?seconds=1&namespace=team-a&pod=ghost-0", scraper)
    assert st == 404 and n.since("the first name's") == (1, 201), "more than the user's share of decisions kept"

    # A burst of pulls past the scraper's rate: 429 with Retry-After, no
    # session, no review (202 of its 250 taken above).
    codes, retry = [], set()
    for _ in range(80):
        st, h, body = c.get("/debug/pprof/profile?seconds=1&namespace=team-a&pod=ghost-199", scraper)
        codes.append(st)
        if st == 429:
            assert b"Too many profile pulls" in body, body
            retry.add(h.get("retry-after"))
    ok = sum(1 for x in codes if x != 429)
    log(f"80 pulls at once past the rate: {ok} answered, {codes.count(429)} refused 429, Retry-After {retry}")
    assert set(codes) <= {404, 429} and 45 <= ok <= 50 and codes[-1] == 429, codes
    assert retry and all(r and r.isdigit() and int(r) >= 1 for r in retry), retry
    # Another user's pulls are its own.
    st, _, body = c.get("/debug/pprof/profile?seconds=1&namespace=team-a&pod=ghost-199", kc.token)
    assert st == 404, (st, body)
    assert agent_metric(c, "cgprof_http_rate_limited_total", 'what="pulls"') == codes.count(429)

    # Distinct tokens from one address: each one a TokenReview until the
    # address's burst is spent, then 429 with Retry-After and no review.
    n = ReviewCount(kc, c)
    codes = []
    t0 = time.monotonic()
    for i in range(500):
        st, h, body = c.get("/targets?namespace=team-a", f"random-{os.getpid()}-{i}")
        assert st in (401, 429) and (st == 401 or h.get("retry-after", "").isdigit()), (st, h, body)
        codes.append(st)
    tr, sar = n.since("the random tokens' reviews counted")
    log(f"500 random tokens in {time.monotonic() - t0:.2f} s: {tr} TokenReviews, {codes.count(401)} answered "
        f"401, {codes.count(429)} refused 429")
    assert tr == codes.count(401) and sar == 0, (tr, codes.count(401))
    assert codes.count(429) >= 50 and codes[-1] == 429, codes.count(429)
    assert agent_metric(c, "cgprof_http_rate_limited_total", 'what="reviews"') == codes.count(429)
    c.close()


def check_token_audiences(kc, agent_for, port, cert, key):
    """http.tokenAudiences ["cgprof"]: a token made for that audience is
    taken, a default one (the API server's audience) is 401, and so is the
    admin's static token."""
    agent = agent_for({"listen": f"127.0.0.1:{port}", "pprof": True, "tlsCertFile": cert, "tlsKeyFile": key,
                       "tokenAudiences": ["cgprof"]})
    base = f"https://127.0.0.1:{port}"
    try:
        agent.start()
        own = kc.kubectl("create", "token", "puller", "-n", "team-a", "--audience", "cgprof").stdout.strip()
        default = kc.kubectl("create", "token", "puller", "-n", "team-a").stdout.strip()
        st, body = curl(f"{base}/targets?namespace=team-a", token=own, cacert=cert)
        assert st == 200, (st, body)
        st, body = curl(f"{base}/targets?namespace=team-a", token=default, cacert=cert)
        assert st == 401, (st, body)
        st, body = curl(f"{base}/targets?namespace=team-a", token=kc.token, cacert=cert)
        assert st == 401, (st, body)
        assert agent.stop() == 0
    finally:
        agent.cleanup()

def role_objects(ns, sa):
    """The example of manifests/examples/pull-rbac.yaml, for namespace ns."""
    import yaml
    with open(os.path.join(SRC, "manifests", "examples", "pull-rbac.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    out = []
    for d in docs:
        d = json.loads(json.dumps(d))
        d["metadata"]["namespace"] = ns
        if d["kind"] == "RoleBinding":
            d["subjects"] = [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
        out.append(d)
    return out


def test_kubernetes_rbac():
    from kubelib import KubeCgroups, KubeCluster, new_container_id
    tmp = tempfile.mkdtemp(prefix="cgprof-pull-kube-")
    gp = GoPprof(tmp)
    with KubeCluster() as kc, KubeCgroups(driver="systemd") as cgs:
        port = free_port()
        cert, key = make_cert(tmp, "agent")
        install(cert, key, cert, key)

        # The agent runs as its own ServiceAccount with the manifests' RBAC:
        # the base's read-only role and the pull overlay's two create rights.
        import yaml
        kc.create_namespace("cgprof")
        for f in ("base/rbac.yaml", "overlays/pull/rbac.yaml"):
            with open(os.path.join(SRC, "manifests", f)) as fh:
                for obj in yaml.safe_load_all(fh):
                    if obj:
                        kc.apply(obj)
        agent_token = kc.kubectl("create", "token", "cgprof", "-n", "cgprof", "--duration", "1h").stdout.strip()
        agent_kubeconfig = os.path.join(tmp, "agent-kubeconfig")
        kc.write_kubeconfig(agent_kubeconfig, token=agent_token)

        def agent_for(http):
            a = Agent({"profiles": [profile(name="k8s")], "defaultProfileRef": "k8s", "http": http},
                      extra_args=["--kubeconfig", agent_kubeconfig, "--node-name", NODE])
            a.argv = (lambda orig: (lambda: [x for x in orig() if x != "--no-kubernetes"]))(a.argv)
            return a

        # pprof without TLS in Kubernetes mode: refused at load, naming the key.
        bad = agent_for({"listen": f"127.0.0.1:{port}", "pprof": True})
        try:
            bad.start(wait_ready=False)
            rc = bad.proc.wait(timeout=60)
            assert rc != 0 and "http.tlsCertFile" in bad.log(), bad.log()[-2000:]
        finally:
            bad.cleanup()

        pods, cids = {}, {}
        for ns in ("team-a", "team-b"):
            kc.create_namespace(ns)
            pod = kc.create_pod(ns, f"{ns}-app", NODE)
            cid = new_container_id()
            cg = cgs.container_for(pod, cid)
            proc = workload(cg, 300, name=ns[:15])
            kc.set_pod_running(ns, f"{ns}-app", {"main": cid})
            pods[ns] = (pod, cg, proc)
            cids[ns] = cid
        # A ServiceAccount of team-a, bound to the example Role.
        kc.kubectl("create", "serviceaccount", "puller", "-n", "team-a")
        for obj in role_objects("team-a", "puller"):
            kc.apply(obj)
        token = kc.kubectl("create", "token", "puller", "-n", "team-a").stdout.strip()
        assert token.count(".") == 2, "not a JWT"

        agent = agent_for({"listen": f"127.0.0.1:{port}", "pprof": True, "tlsCertFile": cert, "tlsKeyFile": key,
                           "pullRateLimit": {"perSecond": 0.01, "burst": 250},
                           "reviewRateLimit": {"perSecond": 0.01, "burst": 600}})
        base = f"https://127.0.0.1:{port}"
        try:
            agent.start()

            def pull(ns, tok, seconds=4):
                return curl(f"{base}/debug/pprof/profile?seconds={seconds}&namespace={ns}&pod={ns}-app",
                            token=tok, cacert=cert)

            # Its own namespace's pod: the profile, with the right shares.
            st, body = wait_for(lambda: (lambda r: r if r[0] != 404 else None)(pull("team-a", token)),
                                timeout=60, what="team-a's pod known to the agent")
            assert st == 200, (st, body[:500])
            assert_pprof_shares(gp, body)
            # Another namespace's pod: 403; no token, or a bad one: 401.
            st, body = pull("team-b", token)
            assert st == 403, (st, body)
            st, body = pull("team-a", None)
            assert st == 401, (st, body)
            # A pod of team-a whose status names team-b's container (who
            # may write pods/status in team-a can): the ID alone does not
            # map it to that container's cgroup, whose path says it is
            # team-b's pod's. Not found, and nothing of team-b profiled.
            kc.create_pod("team-a", "evil", NODE)
            kc.set_pod_running("team-a", "evil", {"main": cids["team-b"]})
            def evil_pull():
                st, body = curl(f"{base}/debug/pprof/profile?seconds=1&namespace=team-a&pod=evil", token=token,
                                cacert=cert)
                # Until the agent has the pod and its status: "not known"
                # or "no running container" (404); then the answer.
                return (st, body) if st != 404 or b"The cgroup of container main" in body else None

            st, body = wait_for(evil_pull, timeout=60, what="the agent to have pod team-a/evil's status")
            assert st == 404 and b"is not known on node" in body, (st, body)
            evil = [d for d, _, _ in os.walk(agent.report_dir) if "evil" in d]
            assert not evil, f"a report filed under team-a/evil: {evil}"
            r = subprocess.run(["curl", "-sS", "-D", "-", "-o", "/dev/null", "--cacert", cert,
                                f"{base}/debug/pprof/profile?namespace=team-a&pod=team-a-app"],
                               capture_output=True, text=True, timeout=60)
            assert "www-authenticate: bearer" in r.stdout.lower(), r.stdout
            st, body = pull("team-a", "not-a-token")
            assert st == 401, (st, body)
            # Two tokens: refused, not the first one taken.
            r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", cert,
                                "-H", "Authorization: Bearer not-a-token", "-H", f"Authorization: Bearer {token}",
                                f"{base}/debug/pprof/profile?seconds=1&namespace=team-a&pod=team-a-app"],
                               capture_output=True, text=True, timeout=60)
            assert r.stdout == "400", (r.stdout, r.stderr)
            # A host cgroup, or what spans namespaces, needs nodes/profile.
            st, body = curl(f"{base}/debug/pprof/profile?seconds=1&cgroup={pods['team-a'][1].rel}", token=token,
                            cacert=cert)
            assert st == 403, (st, body)
            st, body = curl(f"{base}/targets", token=token, cacert=cert)
            assert st == 403, (st, body)
            st, body = curl(f"{base}/targets?namespace=team-b", token=token, cacert=cert)
            assert st == 403, (st, body)
            st, body = curl(f"{base}/targets?namespace=team-a", token=token, cacert=cert)
            assert st == 200, (st, body)
            assert sorted(p["pod"] for p in json.loads(body)["pods"]) == ["evil", "team-a-app"], body
            # The cluster admin may do all of it: a team-b profile.
            st, body = pull("team-b", kc.token, seconds=2)
            assert st == 200, (st, body[:300])
            st, body = curl(f"{base}/reports", token=kc.token, cacert=cert)
            assert st == 200, (st, body)
            by_ns = {r["namespace"]: r["session"] for r in json.loads(body)}
            assert set(by_ns) >= {"team-a", "team-b"}, by_ns
            # Reports: its own namespace's, not another's.
            st, body = curl(f"{base}/reports?namespace=team-a", token=token, cacert=cert)
            assert st == 200 and {r["namespace"] for r in json.loads(body)} == {"team-a"}, (st, body)
            st, body = curl(f"{base}/reports/{by_ns['team-a']}/profile.pb.gz", token=token, cacert=cert)
            assert st == 200 and body[:2] == b"\x1f\x8b", (st, body[:300])
            st, known = curl(f"{base}/reports/{by_ns['team-b']}/profile.pb.gz", token=token, cacert=cert)
            assert st == 403, (st, known)
            # An unknown session: 404 only to who may see the node's reports;
            # to others the same 403 as a known one's, and nothing of whose.
            st, unknown = curl(f"{base}/reports/{'a' * 32}/profile.pb.gz", token=token, cacert=cert)
            assert st == 403, (st, unknown)
            assert known.replace(by_ns["team-b"].encode(), b"ID") == unknown.replace(b"a" * 32, b"ID"), \
                (known, unknown)
            assert b"team-b" not in known, known
            st, body = curl(f"{base}/reports/{'a' * 32}/profile.pb.gz", token=kc.token, cacert=cert)
            assert st == 404, (st, body)

            # What an authorized request costs, its reviews cached (10 s):
            # the same request again within the cache's life does not ask
            # the API server.
            t0 = time.monotonic()
            n = 20
            for _ in range(n):
                st, _ = curl(f"{base}/targets?namespace=team-a", token=token, cacert=cert)
                assert st == 200
            log(f"/targets?namespace=team-a: {(time.monotonic() - t0) / n * 1000:.1f} ms per curl (cached)")
            # The agent's side: from the request to its answer (its log).
            ms = [float(x) for x in re.findall(r"the targets answered 200 after ([\d.]+) ms", agent.log())]
            assert len(ms) == n + 1, ms
            log(f"/targets?namespace=team-a in the agent: {ms[0]:.3f} ms with a TokenReview and a "
                f"SubjectAccessReview, then {sorted(ms[1:])[n // 2]:.3f} ms (median) from the cache")
            st, body = curl(f"{base}/metrics", cacert=cert, timeout=30)
            text = body.decode()
            for code in ("200", "401", "403"):
                assert f'cgprof_http_pprof_requests_total{{code="{code}"}}' in text, code
            check_review_costs(kc, port, cert)
            for ns, (pod, cg, proc) in pods.items():
                proc.kill()
                proc.wait()
            assert agent.stop() == 0
            check_token_audiences(kc, agent_for, port, cert, key)
        finally:
            agent.cleanup()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main([test_config_checks, test_host_loopback_and_tls_reload, test_host_unix_socket, test_kubernetes_rbac])
