# SPDX-License-Identifier: LGPL-2.1-or-later
"""Kubernetes test harness for cgprof's integration tests.

- KubeCluster: a real kube-apiserver (v1.20.2, built from Debian's source
  package by tests/kube/build-kube-apiserver, or the binary that
  CGPROF_KUBE_APISERVER names) backed by a real etcd (Debian's etcd-server,
  or CGPROF_ETCD), on loopback, with its own CA, serving certificate,
  service-account key pair and static tokens; a kubeconfig that kubectl and
  cgprofd --kubeconfig both use;
  helpers to create namespaces and pods, mark pods Running with container IDs,
  delete them, and to produce real faults (stop/start or SIGSTOP/SIGCONT the
  API server, compact etcd, rotate the token file).
- KubeCgroups: container cgroups laid out as kubelet + containerd lay them
  out (systemd or cgroupfs driver), created at the cgroup2 root and removed
  again (only what it created).
- make_certs(), write_kubeconfig(), new_container_id(): small helpers also
  used with kube_fault_server.FaultServer.

Everything cleans up after itself: on normal exit, on exceptions, and on
SIGTERM (meson's timeout), which is turned into SystemExit so that `with`
blocks and atexit handlers run. Child processes get PR_SET_PDEATHSIG, so
even a SIGKILLed test does not leave etcd or kube-apiserver running.

Example:

    with KubeCluster() as kc, KubeCgroups(driver="systemd") as cgs:
        kc.create_namespace("ml", labels={"team": "ml"})
        pod = kc.create_pod("ml", "trainer-0", node="node-a", labels={"app": "trainer"},
                            containers=["main"], qos="burstable")
        cid = new_container_id()
        kc.set_pod_running("ml", "trainer-0", {"main": "containerd://" + cid})
        cg = cgs.container_for(pod, cid)          # a cgproflib.Cgroup
        proc = cgproflib.workload(cg, 5)
        ... cgprofd --kubeconfig kc.kubeconfig --node-name node-a ...
"""

import atexit
import base64
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

import cgproflib
from cgproflib import log, skip, skip_prereq

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("CGPROF_SOURCE_DIR", os.path.join(HERE, "..", ".."))
BUILD_SCRIPT = os.path.join(SOURCE_DIR, "tests", "kube", "build-kube-apiserver")
# A kube-apiserver of the user's (a newer one) instead of the one
# BUILD_SCRIPT builds; an etcd instead of Debian's (docs/testing.md).
APISERVER_ENV = "CGPROF_KUBE_APISERVER"
ETCD_ENV = "CGPROF_ETCD"

# --------------------------------------------------------------------------
# process hygiene


_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """preexec_fn: the child gets SIGKILL when the thread that started it
    exits (start long-lived children from the main thread)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def popen(argv, **kw):
    """subprocess.Popen whose child dies with the test (PR_SET_PDEATHSIG)."""
    return subprocess.Popen(argv, preexec_fn=_die_with_parent, **kw)


_cleanups = []
_cleanups_lock = threading.Lock()


def _run_cleanups():
    with _cleanups_lock:
        pending = list(reversed(_cleanups))
        _cleanups.clear()
    for fn in pending:
        try:
            fn()
        except Exception as e:  # cleanup must go on
            log(f"kubelib: cleanup {fn}: {e!r}")


atexit.register(_run_cleanups)


def _register_cleanup(fn):
    with _cleanups_lock:
        _cleanups.append(fn)


def _unregister_cleanup(fn):
    with _cleanups_lock:
        try:
            _cleanups.remove(fn)
        except ValueError:
            pass


def install_sigterm_handler():
    """SIGTERM (and SIGHUP) raise SystemExit in the main thread, so context
    managers and atexit handlers clean up. Idempotent; only replaces the
    default disposition."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_term)


def _on_term(signum, frame):
    signal.signal(signum, signal.SIG_IGN)  # a second one must not interrupt the cleanup
    log(f"kubelib: signal {signum}: cleaning up")
    raise SystemExit(128 + signum)


# --------------------------------------------------------------------------
# small helpers


def free_port():
    """A free TCP port on 127.0.0.1 (free now; bind soon)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def new_container_id():
    """A random container ID as containerd makes them: 64 hex digits."""
    return secrets.token_hex(32)


def new_token():
    return secrets.token_hex(16)


def _write_atomic(path, data, mode=0o600):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def _run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def make_certs(directory, hosts=("127.0.0.1", "localhost"), bits=2048):
    """Creates with openssl in `directory`: a CA (ca.crt, ca.key), a serving
    certificate for `hosts` signed by it (server.crt, server.key; SANs for
    every host), and an RSA key pair for service-account tokens (sa.key,
    sa.pub). Returns a dict of the paths."""
    if not shutil.which("openssl"):
        skip_prereq("openssl not installed")
    d = directory
    p = {k: os.path.join(d, f) for k, f in (("ca", "ca.crt"), ("ca_key", "ca.key"), ("cert", "server.crt"),
                                             ("key", "server.key"), ("sa_key", "sa.key"), ("sa_pub", "sa.pub"))}
    _run(["openssl", "req", "-x509", "-newkey", f"rsa:{bits}", "-nodes", "-sha256", "-days", "3",
          "-keyout", p["ca_key"], "-out", p["ca"], "-subj", "/CN=cgprof-test-ca",
          "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    csr = os.path.join(d, "server.csr")
    _run(["openssl", "req", "-new", "-newkey", f"rsa:{bits}", "-nodes", "-sha256",
          "-keyout", p["key"], "-out", csr, "-subj", "/CN=cgprof-test-server"])
    sans = ",".join(("IP:" if h.replace(".", "").isdigit() or ":" in h else "DNS:") + h for h in hosts)
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n"
                f"subjectAltName={sans}\n")
    _run(["openssl", "x509", "-req", "-in", csr, "-CA", p["ca"], "-CAkey", p["ca_key"], "-CAcreateserial",
          "-sha256", "-days", "3", "-extfile", ext, "-out", p["cert"]])
    _run(["openssl", "genrsa", "-out", p["sa_key"], str(bits)])
    _run(["openssl", "rsa", "-in", p["sa_key"], "-pubout", "-out", p["sa_pub"]])
    return p


def write_kubeconfig(path, server, ca_file=None, token=None, token_file=None, ca_data=None,
                     context="test", user="test-user", cluster="test-cluster"):
    """Writes a kubeconfig (block YAML, as kubectl writes them): one cluster
    (server, certificate-authority file or -data), one user (token or
    tokenFile), one context, current-context set. Returns path."""
    q = json.dumps  # a JSON string is a valid double-quoted YAML scalar
    lines = ["apiVersion: v1", "kind: Config", "clusters:", f"- name: {q(cluster)}", "  cluster:",
             f"    server: {q(server)}"]
    if ca_file:
        lines.append(f"    certificate-authority: {q(ca_file)}")
    if ca_data:
        lines.append(f"    certificate-authority-data: {q(base64.b64encode(ca_data.encode()).decode())}")
    lines += ["users:", f"- name: {q(user)}", "  user:"]
    if token is not None:
        lines.append(f"    token: {q(token)}")
    if token_file:
        lines.append(f"    tokenFile: {q(token_file)}")
    if token is None and not token_file:
        lines[-1] = "  user: {}"
    lines += ["contexts:", f"- name: {q(context)}", "  context:", f"    cluster: {q(cluster)}",
              f"    user: {q(user)}", f"current-context: {q(context)}", "preferences: {}", ""]
    _write_atomic(path, "\n".join(lines))
    return path


def find_apiserver():
    """Path of the kube-apiserver binary: $CGPROF_KUBE_APISERVER if set (an
    error if it cannot run), else the one tests/kube/build-kube-apiserver
    built and cached (building it if needed: the first build takes minutes;
    a build already running is waited for). Skips (77, a prerequisite) when
    it cannot be built."""
    own = os.environ.get(APISERVER_ENV)
    if own:
        if not os.access(own, os.X_OK):
            raise KubeError(f"{APISERVER_ENV}={own} is not an executable file")
        return own
    if not os.path.exists(BUILD_SCRIPT):
        skip_prereq(f"no {BUILD_SCRIPT}")
    try:
        r = subprocess.run([BUILD_SCRIPT], capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        skip_prereq(f"{BUILD_SCRIPT} took more than 30 minutes")
    path = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    if r.returncode != 0 or not os.access(path, os.X_OK):
        skip_prereq(f"{BUILD_SCRIPT} failed (rc {r.returncode}): {r.stderr.strip()[-2000:]}")
    return path


def apiserver_version(path):
    """(major, minor) of a kube-apiserver binary ("Kubernetes v1.20.2")."""
    r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"v(\d+)\.(\d+)", r.stdout)
    if r.returncode != 0 or not m:
        raise KubeError(f"{path} --version: rc {r.returncode}, {r.stdout.strip()!r} {r.stderr.strip()[-500:]!r}")
    return int(m.group(1)), int(m.group(2))


# --------------------------------------------------------------------------
# the cluster


class KubeError(RuntimeError):
    pass


class KubeCluster:
    """A real kube-apiserver + etcd on loopback.

    Tokens (static token file, both in group system:masters):
      .token   the admin token (user "test-admin")
      .token2  a second admin token (user "test-admin-2"), for rotation tests
      extra_users: [(token, user, uid, [groups])] for RBAC-limited identities
      (e.g. ("t", "system:serviceaccount:cgprof:cgprof", "uid", ["system:serviceaccounts"])).
    The static token file cannot change while the API server runs, so every
    token a test will rotate to must be accepted from the start.

    Kubeconfig (.kubeconfig): server, certificate-authority (file), and the
    user as `tokenFile: <.token_file>` (use_token_file=True, the default:
    rotate_token() rewrites that file) or an inline `token:`.
    """

    def __init__(self, use_token_file=True, initial_token=None, extra_users=(), watch_cache=True,
                 extra_apiserver_args=(), tmp=None):
        install_sigterm_handler()
        for tool in ("openssl", "kubectl"):
            if not shutil.which(tool):
                skip_prereq(f"{tool} not installed")
        self.apiserver_bin = find_apiserver()
        self.apiserver_version = apiserver_version(self.apiserver_bin)
        self.etcd_bin = os.environ.get(ETCD_ENV) or shutil.which("etcd")
        if not self.etcd_bin:
            skip_prereq("etcd not installed (etcd-server)")
        self.tmp = tmp or tempfile.mkdtemp(prefix="cgprof-kube-")
        self.token = new_token()
        self.token2 = new_token()
        self.extra_users = list(extra_users)
        self.use_token_file = use_token_file
        self.initial_token = initial_token
        self.watch_cache = watch_cache
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.etcd = None
        self.apiserver = None
        self.paused = False
        self._kubectl_subresource = None
        self._cleanup_fn = self.cleanup
        _register_cleanup(self._cleanup_fn)
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"

    # -- lifecycle

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    def start(self):
        t0 = time.monotonic()
        self.certs = make_certs(self.tmp)
        self.ca = self.certs["ca"]
        self.tokens_csv = os.path.join(self.tmp, "tokens.csv")
        rows = [(self.token, "test-admin", "test-admin-uid", ["system:masters"]),
                (self.token2, "test-admin-2", "test-admin-2-uid", ["system:masters"])] + self.extra_users
        with open(self.tokens_csv, "w") as f:
            for tok, user, uid, groups in rows:
                f.write(f'{tok},{user},{uid},"{",".join(groups)}"\n')
        self.token_file = os.path.join(self.tmp, "token")
        _write_atomic(self.token_file, (self.initial_token or self.token) + "\n")
        self.kubeconfig = os.path.join(self.tmp, "kubeconfig")
        if self.use_token_file:
            write_kubeconfig(self.kubeconfig, self.server, self.ca, token_file=self.token_file)
        else:
            write_kubeconfig(self.kubeconfig, self.server, self.ca, token=self.initial_token or self.token)
        # kubectl's own kubeconfig always works (admin token inline).
        self.admin_kubeconfig = os.path.join(self.tmp, "admin-kubeconfig")
        write_kubeconfig(self.admin_kubeconfig, self.server, self.ca, token=self.token)
        self._ssl = ssl.create_default_context(cafile=self.ca)
        self.start_etcd()
        self.start_apiserver()
        self._wait_default_namespace()
        log(f"kubelib: kube-apiserver ready at {self.server} in {time.monotonic() - t0:.1f}s (tmp {self.tmp})")

    def start_etcd(self):
        self.etcd_log = os.path.join(self.tmp, "etcd.log")
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        argv = [self.etcd_bin, "--name", "default", "--data-dir", os.path.join(self.tmp, "etcd"),
                "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"default={peer}", "--log-level", "warn"]
        with open(self.etcd_log, "ab") as lf:
            self.etcd = popen(argv, stdout=lf, stderr=lf, stdin=subprocess.DEVNULL)
        end = time.monotonic() + 30
        while True:
            if self.etcd.poll() is not None:
                raise KubeError(f"etcd exited ({self.etcd.returncode}):\n{self._tail(self.etcd_log)}")
            try:
                with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as r:
                    if json.load(r).get("health") == "true":
                        return
            except (OSError, ValueError):
                pass
            if time.monotonic() > end:
                raise KubeError(f"etcd not healthy after 30s:\n{self._tail(self.etcd_log)}")
            time.sleep(0.1)

    def apiserver_argv(self):
        c = self.certs
        a = [self.apiserver_bin,
             f"--etcd-servers={self.etcd_url}",
             "--bind-address=127.0.0.1", f"--secure-port={self.port}", "--advertise-address=127.0.0.1",
             "--endpoint-reconciler-type=none",
             f"--tls-cert-file={c['cert']}", f"--tls-private-key-file={c['key']}",
             f"--client-ca-file={c['ca']}",
             f"--token-auth-file={self.tokens_csv}",
             "--service-account-issuer=https://kubernetes.default.svc",
             f"--service-account-key-file={c['sa_pub']}",
             f"--service-account-signing-key-file={c['sa_key']}",
             "--service-cluster-ip-range=10.0.0.0/24",
             "--authorization-mode=RBAC",
             "--allow-privileged=true",
             "--disable-admission-plugins=ServiceAccount",
             f"--cert-dir={os.path.join(self.tmp, 'apiserver-certs')}"]
        if self.apiserver_version < (1, 24):
            a.append("--insecure-port=0")  # the flag is gone since 1.24
        if not self.watch_cache:
            a.append("--watch-cache=false")
        return a + self.extra_apiserver_args

    def start_apiserver(self, timeout=90):
        """Starts kube-apiserver (same ports, certs and etcd) and waits for
        /readyz (authenticated, TLS verified with the CA)."""
        if self.apiserver and self.apiserver.poll() is None:
            raise KubeError("kube-apiserver already running")
        self.apiserver_log = os.path.join(self.tmp, "kube-apiserver.log")
        with open(self.apiserver_log, "ab") as lf:
            lf.write(f"==== start {time.strftime('%H:%M:%S')}\n".encode())
            lf.flush()
            self.apiserver = popen(self.apiserver_argv(), stdout=lf, stderr=lf, stdin=subprocess.DEVNULL)
        self.paused = False
        end = time.monotonic() + timeout
        last = None
        while True:
            if self.apiserver.poll() is not None:
                raise KubeError(f"kube-apiserver exited ({self.apiserver.returncode}):\n"
                                f"{self._tail(self.apiserver_log)}")
            try:
                st, body = self.api("GET", "/readyz", timeout=5, raw=True)
                if st == 200:
                    return
                last = f"{st} {body[-500:]!r}"
            except (OSError, ssl.SSLError) as e:
                last = repr(e)
            if time.monotonic() > end:
                raise KubeError(f"kube-apiserver not ready after {timeout}s ({last}):\n"
                                f"{self._tail(self.apiserver_log)}")
            time.sleep(0.2)

    def stop_apiserver(self, timeout=30):
        """SIGTERM (graceful: open watches are closed) and waits; SIGKILL
        after `timeout` s (a graceful stop waits for HTTP/2 clients to let
        go: a SIGSTOPped client holds it up to 60 s — use kill_apiserver()
        then)."""
        p = self.apiserver
        if not p or p.poll() is not None:
            return
        if self.paused:
            p.send_signal(signal.SIGCONT)
            self.paused = False
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def kill_apiserver(self):
        """SIGKILL: connections die without a goodbye."""
        p = self.apiserver
        if p and p.poll() is None:
            p.kill()
            p.wait()
        self.paused = False

    def restart_apiserver(self):
        self.stop_apiserver()
        self.start_apiserver()

    def pause_apiserver(self):
        """SIGSTOP: the server stalls (the kernel still accepts TCP
        connections into the backlog, nothing answers)."""
        self.apiserver.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume_apiserver(self):
        self.apiserver.send_signal(signal.SIGCONT)
        self.paused = False

    def cleanup(self):
        """Kills everything and removes the temp dir. Idempotent."""
        _unregister_cleanup(self._cleanup_fn)
        for p in (self.apiserver, self.etcd):
            if p and p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                    p.wait(30)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        self.apiserver = self.etcd = None
        if self.tmp and os.path.isdir(self.tmp):
            if os.environ.get("CGPROF_KEEP_KUBE_TMP"):
                log(f"kubelib: keeping {self.tmp}")
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)

    @staticmethod
    def _tail(path, n=40):
        try:
            with open(path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def apiserver_log_tail(self, n=40):
        return self._tail(self.apiserver_log, n)

    # -- the API, directly

    def api(self, method, path, body=None, content_type="application/json", token=None, timeout=30,
            raw=False):
        """One request to the API server (urllib, TLS verified with the CA,
        bearer token: the admin token unless given). Returns (status,
        parsed JSON body) — or (status, text) with raw=True. HTTP errors are
        returned, not raised."""
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            data = data.encode() if isinstance(data, str) else data
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._ssl) as r:
                st, text = r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            st, text = e.code, e.read().decode(errors="replace")
        if raw:
            return st, text
        try:
            return st, json.loads(text) if text else None
        except ValueError:
            return st, text

    def api_ok(self, method, path, body=None, **kw):
        st, obj = self.api(method, path, body, **kw)
        if st // 100 != 2:
            raise KubeError(f"{method} {path}: {st} {obj}")
        return obj

    def _wait_default_namespace(self, timeout=30):
        end = time.monotonic() + timeout
        while self.api("GET", "/api/v1/namespaces/default")[0] != 200:
            if time.monotonic() > end:
                raise KubeError("namespace default not created")
            time.sleep(0.2)

    # -- kubectl

    def kubectl(self, *args, input=None, check=True, timeout=60, kubeconfig=None):
        """kubectl with the admin kubeconfig (or `kubeconfig`). Returns the
        CompletedProcess (text); raises KubeError on failure when check."""
        argv = ["kubectl", f"--kubeconfig={kubeconfig or self.admin_kubeconfig}",
                f"--cache-dir={os.path.join(self.tmp, 'kubectl-cache')}", *args]
        r = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise KubeError(f"kubectl {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
        return r

    def apply(self, obj):
        """kubectl apply of one object (or a List); returns the applied object(s)."""
        return json.loads(self.kubectl("apply", "-o", "json", "-f", "-", input=json.dumps(obj)).stdout)

    def create(self, obj):
        """kubectl create (works with generateName); returns the object."""
        return json.loads(self.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(obj)).stdout)

    def get(self, kind, name=None, ns=None, selector=None, field_selector=None):
        args = ["get", kind] + ([name] if name else [])
        if ns == "*":
            args.append("-A")
        elif ns:
            args += ["-n", ns]
        if selector:
            args += ["-l", selector]
        if field_selector:
            args += ["--field-selector", field_selector]
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def create_namespace(self, name, labels=None):
        return self.apply({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": name, "labels": dict(labels or {})}})

    def delete_namespace(self, name, finalize=True):
        """Deletes a namespace. There is no namespace controller: with
        finalize the namespace's finalizer is cleared so that it is really
        gone (a DELETED event) instead of staying Terminating. Its objects
        stay in etcd (no controller deletes them): delete pods first."""
        self.kubectl("delete", "namespace", name, "--wait=false")
        if finalize:
            st, ns = self.api("GET", f"/api/v1/namespaces/{name}")
            if st == 200:
                ns["spec"]["finalizers"] = []
                st, obj = self.api("PUT", f"/api/v1/namespaces/{name}/finalize", ns)
                if st not in (200, 404, 409):
                    raise KubeError(f"finalize namespace {name}: {st} {obj}")

    def label(self, kind, name, ns, *labels):
        """label("pod", "p", "ns", "a=b", "c-") — `key=value` sets (overwrites),
        `key-` removes. ns None for cluster-scoped kinds."""
        args = ["label", kind, name, "--overwrite", *labels]
        if ns:
            args += ["-n", ns]
        self.kubectl(*args)

    def annotate(self, kind, name, ns, *annotations):
        args = ["annotate", kind, name, "--overwrite", *annotations]
        if ns:
            args += ["-n", ns]
        self.kubectl(*args)

    @staticmethod
    def pod_manifest(ns, name, node, labels=None, owner=None, containers=("main",), generate_name=None,
                     qos="besteffort", annotations=None, init_containers=()):
        """A Pod bound to `node` (spec.nodeName), image "x" (nothing pulls
        it). owner: {"kind","name"[,"apiVersion","uid","controller"]} or
        (kind, name). qos: "besteffort" (no resources), "burstable"
        (requests only), "guaranteed" (requests == limits); the API server
        sets status.qosClass from them."""
        res = {"besteffort": None,
               "burstable": {"requests": {"cpu": "10m", "memory": "16Mi"}},
               "guaranteed": {"requests": {"cpu": "100m", "memory": "64Mi"},
                              "limits": {"cpu": "100m", "memory": "64Mi"}}}[qos.lower()]

        def container(n):
            c = {"name": n, "image": "x"}
            if res:
                c["resources"] = json.loads(json.dumps(res))
            return c

        meta = {"namespace": ns, "labels": dict(labels or {})}
        if annotations:
            meta["annotations"] = dict(annotations)
        if generate_name:
            meta["generateName"] = generate_name
        else:
            meta["name"] = name
        if owner:
            if isinstance(owner, (tuple, list)):
                owner = {"kind": owner[0], "name": owner[1]}
            o = {"apiVersion": owner.get("apiVersion", "apps/v1"), "kind": owner["kind"], "name": owner["name"],
                 "uid": owner.get("uid", str(uuid.uuid4())), "controller": owner.get("controller", True),
                 "blockOwnerDeletion": owner.get("blockOwnerDeletion", True)}
            meta["ownerReferences"] = [o]
        spec = {"nodeName": node, "containers": [container(n) for n in containers],
                "terminationGracePeriodSeconds": 0}
        if init_containers:
            spec["initContainers"] = [container(n) for n in init_containers]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    def create_pod(self, ns, name, node, labels=None, owner=None, containers=("main",), generate_name=None,
                   qos="besteffort", annotations=None, init_containers=()):
        """Creates a Pod (see pod_manifest) and returns it as the API server
        stored it (metadata.uid, metadata.name when generated,
        status.qosClass)."""
        return self.create(self.pod_manifest(ns, name, node, labels, owner, containers, generate_name, qos,
                                             annotations, init_containers))

    def patch_pod_status(self, ns, name, status):
        """Merge-patches the pod's status subresource (lists such as
        containerStatuses are replaced whole). Returns the pod."""
        patch = json.dumps({"status": status})
        if self._kubectl_subresource is None:
            h = self.kubectl("patch", "--help", check=False).stdout
            self._kubectl_subresource = "--subresource" in h
        if self._kubectl_subresource:
            r = self.kubectl("patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge",
                             "-p", patch, "-o", "json")
            return json.loads(r.stdout)
        return self.api_ok("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", patch,
                           content_type="application/merge-patch+json")

    @staticmethod
    def _now():
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def set_pod_running(self, ns, name, container_ids, pod_ip="10.1.0.10", init_container_ids=None):
        """Marks the pod Running with its containers running under the given
        IDs: {container name: "containerd://<64 hex>"} (a bare 64-hex ID
        gets "containerd://" prepended). Returns the pod."""
        now = self._now()

        def status(n, cid, running=True):
            if "://" not in cid:
                cid = "containerd://" + cid
            st = {"name": n, "containerID": cid, "ready": running, "started": running, "restartCount": 0,
                  "image": "x", "imageID": ""}
            st["state"] = ({"running": {"startedAt": now}} if running else
                           {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now,
                                           "finishedAt": now, "containerID": cid}})
            return st

        cond = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
        s = {"phase": "Running", "conditions": cond, "hostIP": "127.0.0.1", "podIP": pod_ip,
             "podIPs": [{"ip": pod_ip}], "startTime": now,
             "containerStatuses": [status(n, c) for n, c in container_ids.items()]}
        if init_container_ids:
            s["initContainerStatuses"] = [status(n, c, running=False) for n, c in init_container_ids.items()]
        return self.patch_pod_status(ns, name, s)

    def set_pod_finished(self, ns, name, container_ids, phase="Succeeded", exit_code=0):
        """Marks the pod's containers terminated and the pod Succeeded/Failed."""
        now = self._now()
        sts = []
        for n, cid in container_ids.items():
            if "://" not in cid:
                cid = "containerd://" + cid
            sts.append({"name": n, "containerID": cid, "ready": False, "started": False, "restartCount": 0,
                        "image": "x", "imageID": "",
                        "state": {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0
                                                 else "Error", "startedAt": now, "finishedAt": now,
                                                 "containerID": cid}}})
        return self.patch_pod_status(ns, name, {"phase": phase, "containerStatuses": sts})

    def delete_pod(self, ns, name):
        """Deletes at once (--grace-period=0 --force: no kubelet confirms)."""
        self.kubectl("delete", "pod", name, "-n", ns, "--grace-period=0", "--force", "--wait=false",
                     "--ignore-not-found")

    def create_pods_bulk(self, ns, names, node, labels=None, threads=8):
        """Creates many pods fast (parallel POSTs, not kubectl)."""
        errors = []
        it = iter(list(names))
        lock = threading.Lock()

        def worker():
            while True:
                with lock:
                    n = next(it, None)
                if n is None:
                    return
                st, obj = self.api("POST", f"/api/v1/namespaces/{ns}/pods",
                                   self.pod_manifest(ns, n, node, labels))
                if st != 201:
                    errors.append(f"{n}: {st} {obj}")

        ts = [threading.Thread(target=worker) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if errors:
            raise KubeError(f"{len(errors)} pod creations failed: {errors[:3]}")

    # -- etcd

    def _etcd(self, path, body):
        req = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)

    def etcd_revision(self):
        """etcd's current revision (the newest resourceVersion)."""
        h = self._etcd("/v3/kv/range", {"key": base64.b64encode(b"/cgprof-test/").decode()})
        return int(h["header"]["revision"])

    def etcd_bump(self, n=1):
        """Advances etcd's revision by n writes to a key outside /registry
        (the API server never sees them). Returns the new revision."""
        for i in range(n):
            self._etcd("/v3/kv/put", {"key": base64.b64encode(b"/cgprof-test/bump").decode(),
                                      "value": base64.b64encode(str(i).encode()).decode()})
        return self.etcd_revision()

    def compact_etcd(self, revision=None):
        """Compacts etcd at `revision` (default: the current one): a watch or
        a continue token from an older resourceVersion then gets a real 410.
        Returns the revision compacted."""
        rev = revision or self.etcd_revision()
        try:
            self._etcd("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            if "compacted" not in body:  # already compacted there: fine
                raise KubeError(f"etcd compaction at {rev}: {e.code} {body}")
        return rev

    # -- tokens

    def rotate_token(self, new_token):
        """Writes new_token into the kubeconfig's tokenFile (write to a
        temporary file and rename, as kubelet's projected volumes do). The
        API server's static token file cannot change at runtime: rotate to
        .token2 (or an extra_users token) for a valid one, or to anything
        else for a token that fails with 401."""
        _write_atomic(self.token_file, new_token + "\n")

    def write_kubeconfig(self, path, token=None, token_file=None):
        """Another kubeconfig for this server (inline token or tokenFile)."""
        return write_kubeconfig(path, self.server, self.ca, token=token, token_file=token_file)


# --------------------------------------------------------------------------
# container cgroups as kubelet + containerd make them


QOS = ("guaranteed", "burstable", "besteffort")
_RUNTIME_PREFIX = {"containerd": "cri-containerd-", "crio": "crio-", "docker": "docker-"}
_STATE_DIR = "/run/cgprof-test" if os.path.isdir("/run") else tempfile.gettempdir()


def _qos_of(q):
    q = (q or "besteffort").lower()
    if q not in QOS:
        raise ValueError(f"bad QoS class {q!r}")
    return q


def pod_cgroup_rel(uid, qos, driver="systemd"):
    """The pod's cgroup, relative to the cgroup2 root, as kubelet names it."""
    qos = _qos_of(qos)
    if driver == "systemd":
        u = uid.replace("-", "_")
        if qos == "guaranteed":
            return f"kubepods.slice/kubepods-pod{u}.slice"
        return f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{u}.slice"
    if driver == "cgroupfs":
        if qos == "guaranteed":
            return f"kubepods/pod{uid}"
        return f"kubepods/{qos}/pod{uid}"
    raise ValueError(f"bad cgroup driver {driver!r}")


def container_cgroup_rel(uid, qos, container_id, driver="systemd", runtime="containerd"):
    """The container's cgroup relative to the cgroup2 root: for systemd
    `<pod>/cri-containerd-<id>.scope` (crio-, docker- for those runtimes),
    for cgroupfs `<pod>/<id>` (CRI-O: crio-<id>)."""
    pod = pod_cgroup_rel(uid, qos, driver)
    if driver == "systemd":
        return f"{pod}/{_RUNTIME_PREFIX[runtime]}{container_id}.scope"
    return f"{pod}/{'crio-' if runtime == 'crio' else ''}{container_id}"


class KubeCgroups:
    """Creates container cgroups the way kubelet (driver "systemd" or
    "cgroupfs") and containerd do, at the cgroup2 root, where the agent looks
    for kubepods.slice / kubepods. Parents (kubepods*, QoS and pod level) are
    created only if absent; cleanup() kills the processes in the container and
    pod cgroups it created and removes, bottom-up, only the directories it
    created (a parent that has other children, e.g. a real node's pods, is
    left alone). A record in /run/cgprof-test lets the next run remove what a
    SIGKILLed run left behind."""

    def __init__(self, driver="systemd", runtime="containerd"):
        if driver not in ("systemd", "cgroupfs"):
            raise ValueError(f"bad cgroup driver {driver!r}")
        install_sigterm_handler()
        self.driver = driver
        self.runtime = runtime
        self.root = cgproflib.cgroup_root()
        if not os.access(self.root, os.W_OK):
            skip(f"cannot write {self.root}")
        self.created = []  # relative paths, in creation order
        self.record = os.path.join(_STATE_DIR, f"kubecgroups-{os.getpid()}.json")
        _reap_stale_records()
        top = "kubepods.slice" if driver == "systemd" else "kubepods"
        if os.path.isdir(os.path.join(self.root, top)):
            log(f"kubelib: {top} already exists under {self.root}: creating test pods inside it")
        self._cleanup_fn = self.cleanup
        _register_cleanup(self._cleanup_fn)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    def _save(self):
        os.makedirs(_STATE_DIR, exist_ok=True)
        _write_atomic(self.record, json.dumps({"root": self.root, "created": self.created}), 0o644)

    def _mkdirs(self, rel):
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            try:
                os.mkdir(os.path.join(self.root, sub))
            except FileExistsError:
                continue
            self.created.append(sub)
            self._save()
        return cgproflib.Cgroup(rel)

    def pod_rel(self, uid, qos):
        return pod_cgroup_rel(uid, qos, self.driver)

    def container_rel(self, uid, qos, container_id):
        return container_cgroup_rel(uid, qos, container_id, self.driver, self.runtime)

    def pod(self, uid, qos="besteffort"):
        """Creates (if absent) the QoS and pod level cgroups; returns the pod's Cgroup."""
        return self._mkdirs(self.pod_rel(uid, qos))

    def container(self, uid, qos, container_id):
        """Creates the container's cgroup (and its parents); returns a
        cgproflib.Cgroup (run processes in it with cgproflib.run_in_cgroup or
        cgproflib.workload)."""
        if container_id.startswith(("containerd://", "cri-o://", "docker://")):
            container_id = container_id.split("://", 1)[1]
        return self._mkdirs(self.container_rel(uid, qos, container_id))

    def container_for(self, pod, container_id):
        """As container(), with the UID and QoS class of a pod object (as
        returned by KubeCluster.create_pod)."""
        qos = pod.get("status", {}).get("qosClass") or "BestEffort"
        return self.container(pod["metadata"]["uid"], qos, container_id)

    def remove(self, cg_or_rel):
        """Removes one cgroup we created (a container's or a pod's, with the
        ones below it we created), killing its processes first."""
        rel = cg_or_rel.rel if isinstance(cg_or_rel, cgproflib.Cgroup) else cg_or_rel
        mine = [c for c in self.created if c == rel or c.startswith(rel + "/")]
        self._remove(mine)

    def remove_container(self, cg):
        self.remove(cg)

    def remove_pod(self, uid, qos):
        self.remove(self.pod_rel(uid, qos))

    def _remove(self, rels):
        rels = sorted(rels, key=lambda r: r.count("/"), reverse=True)
        # Kill only in the container and pod cgroups (never a shared parent
        # such as kubepods.slice: it may hold a real node's pods).
        for rel in rels:
            if _is_pod_or_container(rel):
                _kill_cgroup(os.path.join(self.root, rel))
        for rel in rels:
            _rmdir(os.path.join(self.root, rel))
            if rel in self.created:
                self.created.remove(rel)
        if self.created:
            self._save()
        else:
            try:
                os.unlink(self.record)
            except FileNotFoundError:
                pass

    def cleanup(self):
        _unregister_cleanup(self._cleanup_fn)
        self._remove(list(self.created))


def _is_pod_level(name):
    return name.startswith("pod") or ("-pod" in name and name.endswith(".slice"))


def _is_pod_or_container(rel):
    """A pod's cgroup or one right below it (a container's), never a
    kubepods or QoS level one."""
    parts = rel.split("/")
    return _is_pod_level(parts[-1]) or (len(parts) >= 2 and _is_pod_level(parts[-2]))


def _kill_cgroup(path):
    """Kills every process in the cgroup subtree at path."""
    if not os.path.isdir(path):
        return
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
        return
    except OSError:
        pass
    for dirpath, _, _ in os.walk(path):
        try:
            with open(os.path.join(dirpath, "cgroup.procs")) as f:
                for pid in f.read().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        except OSError:
            pass


def _rmdir(path, timeout=5.0):
    """rmdir; retries while processes die, gives up (leaving it) when other
    cgroups live below it."""
    end = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError as e:
            if e.errno != errno.EBUSY:
                log(f"kubelib: rmdir {path}: {e}")
                return False
            try:
                if any(os.path.isdir(os.path.join(path, n)) for n in os.listdir(path)):
                    log(f"kubelib: leaving {path}: other cgroups below it")
                    return False
            except OSError:
                pass
            if time.monotonic() > end:
                log(f"kubelib: cannot remove {path}: busy")
                return False
            time.sleep(0.05)


def _reap_stale_records():
    """Removes what KubeCgroups of a dead test process left behind."""
    try:
        names = os.listdir(_STATE_DIR)
    except FileNotFoundError:
        return
    for n in names:
        if not (n.startswith("kubecgroups-") and n.endswith(".json")):
            continue
        try:
            pid = int(n[len("kubecgroups-"):-len(".json")])
        except ValueError:
            continue
        if pid == os.getpid() or os.path.exists(f"/proc/{pid}"):
            continue
        path = os.path.join(_STATE_DIR, n)
        try:
            with open(path) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            os.unlink(path)
            continue
        log(f"kubelib: removing cgroups left by dead test process {pid}: {rec.get('created')}")
        root = rec.get("root") or cgproflib.cgroup_root()
        rels = sorted(rec.get("created", []), key=lambda r: r.count("/"), reverse=True)
        for rel in rels:
            if _is_pod_or_container(rel):
                _kill_cgroup(os.path.join(root, rel))
        for rel in rels:
            _rmdir(os.path.join(root, rel))
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
