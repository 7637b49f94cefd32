# SPDX-License-Identifier: LGPL-2.1-or-later
"""A small Kubernetes API test server (HTTPS on loopback, threaded) for the
faults a real API server cannot be made to produce on demand.

It follows the real API for collections of namespaces and pods:

  GET /api/v1/namespaces, /api/v1/pods, /api/v1/namespaces/NS/pods
    LIST  ?limit=&continue=&resourceVersion=&resourceVersionMatch=
          &fieldSelector=&labelSelector=
          {"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"N",
           "continue":"..."},"items":[...]}; pagination is consistent (pages
          are served from the snapshot at the first page's resourceVersion);
          the server may return fewer items than `limit` (page_max), as the
          API allows; an expired continue token is a 410 (reason Expired).
    WATCH ?watch=1&resourceVersion=&allowWatchBookmarks=&timeoutSeconds=
          200, Content-Type application/json, chunked, one newline-terminated
          JSON event per chunk: {"type":"ADDED|MODIFIED|DELETED","object":{..}},
          BOOKMARK events (when asked for and bookmark_interval is set), and
          ERROR events carrying a Status (410 Expired for a resourceVersion
          older than the last compaction — the stream then ends). A watch
          without resourceVersion (or "0") starts with synthetic ADDED events
          for the current objects. Objects that start/stop matching the field
          selector are ADDED/DELETED, as the real server does.
  Bearer-token auth (401 with a Status body), 404/405/400 with Status bodies.

Faults (one-shot, armed by the test):
  fail_requests(status, count, verb)   the next `count` list/watch/any
                                       requests get HTTP `status` (500, 410,
                                       429, 503, 401...) with a Status body
  next_event_fault(kind, **opts)       applies to the next ADDED/MODIFIED/
                                       DELETED event written on a watch:
     "cut"        half the event line, then the connection is cut (no
                  terminating chunk, no TLS close_notify)
     "malformed"  bad lines (variants: syntax, notobject, noobject, badtype,
                  binary) written before the real event
     "oversized"  an event of `size` bytes (default 20 MiB) for an object not
                  in the store, written before the real event
     "trickle"    the event dribbled `step` bytes every `tick` seconds
     "stall"      nothing for `seconds`, then the event
     "error410"   an ERROR event (Status 410 Expired) instead, the stream ends
  end_watches()      every open watch ends cleanly (as at timeoutSeconds)
  drop_connections() every open connection is cut
  set_tokens([...])  which bearer tokens are accepted from now on

Every request is logged (requests()): time, method, path, query, verb,
status, so tests can check resourceVersion continuity and backoff."""

import base64
import json
import os
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESOURCES = {"namespaces": ("Namespace", False), "pods": ("Pod", True)}


def status_obj(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
         "reason": reason, "code": code}
    if details:
        s["details"] = details
    return s


REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
           406: "NotAcceptable", 410: "Expired", 429: "TooManyRequests", 500: "InternalError",
           503: "ServiceUnavailable", 504: "Timeout"}


class _Event:
    __slots__ = ("rv", "resource", "type", "obj", "prev")

    def __init__(self, rv, resource, type_, obj, prev):
        self.rv, self.resource, self.type, self.obj, self.prev = rv, resource, type_, obj, prev


class _Cut(Exception):
    """The connection was cut on purpose."""


def _key(obj):
    m = obj["metadata"]
    return (m.get("namespace") or "", m["name"])


def _deep(o):
    return json.loads(json.dumps(o))


# ---------------------------------------------------------------------------
# selectors


def _field(obj, path):
    cur = obj
    for p in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    return "" if cur is None else str(cur)


SUPPORTED_FIELDS = {
    "namespaces": {"metadata.name", "status.phase"},
    "pods": {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
             "spec.serviceAccountName", "status.phase", "status.podIP", "status.nominatedNodeName"},
}


def parse_field_selector(resource, sel):
    """[(field, op, value)] or raises ValueError with the API's message."""
    out = []
    if not sel:
        return out
    for term in sel.split(","):
        term = term.strip()
        if not term:
            continue
        for op in ("!=", "==", "="):
            if op in term:
                f, v = term.split(op, 1)
                break
        else:
            raise ValueError(f"invalid selector: '{sel}'; can't understand '{term}'")
        f = f.strip()
        if f not in SUPPORTED_FIELDS[resource]:
            kind = RESOURCES[resource][0]
            raise ValueError(f'"{f}" is not a known field selector: only "'
                             + '", "'.join(sorted(SUPPORTED_FIELDS[resource])) + f'" ({kind})')
        out.append((f, "!=" if op == "!=" else "=", v.strip()))
    return out


def parse_label_selector(sel):
    """Equality-based and existence terms: a=b, a==b, a!=b, a, !a."""
    out = []
    if not sel:
        return out
    for term in sel.split(","):
        term = term.strip()
        if not term:
            continue
        if term.startswith("!"):
            out.append((term[1:].strip(), "!exists", None))
        elif "!=" in term:
            k, v = term.split("!=", 1)
            out.append((k.strip(), "!=", v.strip()))
        elif "=" in term:
            k, v = term.split("==", 1) if "==" in term else term.split("=", 1)
            out.append((k.strip(), "=", v.strip()))
        elif " in " in term or " notin " in term:
            raise ValueError(f"set-based selector not supported by the test server: {term}")
        else:
            out.append((term, "exists", None))
    return out


def _matches(obj, fields, labels, namespace):
    if obj is None:
        return False
    if namespace and obj["metadata"].get("namespace") != namespace:
        return False
    for f, op, v in fields:
        if (_field(obj, f) == v) != (op == "="):
            return False
    lab = obj["metadata"].get("labels") or {}
    for k, op, v in labels:
        if op == "exists" and k not in lab:
            return False
        if op == "!exists" and k in lab:
            return False
        if op == "=" and lab.get(k) != v:
            return False
        if op == "!=" and lab.get(k) == v:
            return False
    return True


# ---------------------------------------------------------------------------
# the server


class FaultServer:
    """Use as a context manager, or start()/stop().

    certfile/keyfile: the serving certificate (kubelib.make_certs).
    tokens: accepted bearer tokens. page_max: most items per LIST page even
    when the client's limit is larger (None: the client's limit).
    bookmark_interval: seconds between BOOKMARK events on idle watches that
    asked for them (None: none). max_watch_sec: end every watch after this
    many seconds at the latest (as the real server's request timeout does).
    expired_watch: how a watch from a compacted resourceVersion fails:
    "event" (200 + ERROR event, as kube-apiserver does) or "http" (HTTP 410)."""

    def __init__(self, certfile, keyfile, tokens, page_max=None, bookmark_interval=None, max_watch_sec=None,
                 expired_watch="event"):
        self.certfile, self.keyfile = certfile, keyfile
        self.tokens = set(tokens)
        self.page_max = page_max
        self.bookmark_interval = bookmark_interval
        self.max_watch_sec = max_watch_sec
        self.expired_watch = expired_watch
        self.lock = threading.Condition()
        self.rv = 100
        self.compacted_rv = 0
        self.base = {r: {} for r in RESOURCES}  # state at compacted_rv
        self.objects = {r: {} for r in RESOURCES}  # current state
        self.history = []  # _Event after compacted_rv
        self._log = []
        self._req_faults = []  # [verb, status, count]
        self._event_faults = []  # [(kind, opts)]
        self._end_gen = 0
        self._conns = set()
        self._stopping = False
        self.httpd = None

    # -- lifecycle

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.certfile, self.keyfile)
        ctx.set_alpn_protocols(["http/1.1"])
        outer = self

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 64

            def finish_request(self, request, client_address):
                request.settimeout(30)
                try:
                    s = ctx.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError):
                    return
                s.settimeout(None)
                with outer.lock:
                    outer._conns.add(s)
                try:
                    self.RequestHandlerClass(s, client_address, self)
                except (OSError, ssl.SSLError, _Cut):
                    pass
                finally:
                    with outer.lock:
                        outer._conns.discard(s)
                    try:
                        s.close()
                    except OSError:
                        pass

            def handle_error(self, request, client_address):
                pass

        handler = type("Handler", (_Handler,), {"fs": self})
        self.httpd = Server(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if not self.httpd:
            return
        with self.lock:
            self._stopping = True
            self.lock.notify_all()
        self.httpd.shutdown()
        self.drop_connections()
        self.httpd.server_close()
        self.httpd = None

    # -- the store (tests change objects through these; watches see them)

    def _emit(self, resource, type_, obj, prev):
        self.rv += 1
        if obj is not None:
            obj["metadata"]["resourceVersion"] = str(self.rv)
        ev = _Event(self.rv, resource, type_, _deep(obj), _deep(prev) if prev else None)
        self.history.append(ev)
        self.lock.notify_all()
        return ev

    def add(self, resource, name, namespace=None, labels=None, spec=None, status=None, annotations=None):
        kind, namespaced = RESOURCES[resource]
        meta = {"name": name, "uid": str(uuid.uuid4()),
                "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "labels": dict(labels or {})}
        if annotations:
            meta["annotations"] = dict(annotations)
        if namespaced:
            meta["namespace"] = namespace or "default"
        obj = {"metadata": meta, "spec": spec or {}, "status": status or {}}
        with self.lock:
            if _key(obj) in self.objects[resource]:
                raise KeyError(f"{resource} {_key(obj)} exists")
            self.objects[resource][_key(obj)] = obj
            self._emit(resource, "ADDED", obj, None)
            return _deep(obj)

    def add_namespace(self, name, labels=None):
        return self.add("namespaces", name, labels=labels, spec={"finalizers": ["kubernetes"]},
                        status={"phase": "Active"})

    def add_pod(self, namespace, name, node, labels=None, annotations=None):
        spec = {"nodeName": node, "containers": [{"name": "main", "image": "x"}], "restartPolicy": "Always",
                "schedulerName": "default-scheduler"}
        return self.add("pods", name, namespace, labels, spec, {"phase": "Pending", "qosClass": "BestEffort"},
                        annotations)

    def modify(self, resource, name, namespace=None, labels=None, fn=None):
        """Sets labels (merged; a None value removes) and/or applies fn(obj)."""
        with self.lock:
            k = (namespace or "", name) if RESOURCES[resource][1] else ("", name)
            obj = self.objects[resource][k]
            prev = _deep(obj)
            if labels:
                lab = obj["metadata"].setdefault("labels", {})
                for lk, lv in labels.items():
                    if lv is None:
                        lab.pop(lk, None)
                    else:
                        lab[lk] = lv
            if fn:
                fn(obj)
            self._emit(resource, "MODIFIED", obj, prev)
            return _deep(obj)

    def delete(self, resource, name, namespace=None):
        with self.lock:
            k = (namespace or "", name) if RESOURCES[resource][1] else ("", name)
            obj = self.objects[resource].pop(k)
            prev = _deep(obj)
            self._emit(resource, "DELETED", obj, prev)
            return _deep(obj)

    def bump_rv(self, n=1):
        """Advances the resourceVersion as changes to other resources would."""
        with self.lock:
            self.rv += n
            return self.rv

    def compact(self, rv=None):
        """Forgets history up to rv (default: now): older watches and
        continue tokens get 410."""
        with self.lock:
            rv = self.rv if rv is None else rv
            for ev in self.history:
                if ev.rv > rv:
                    break
                _apply(self.base[ev.resource], ev)
            self.history = [e for e in self.history if e.rv > rv]
            self.compacted_rv = max(self.compacted_rv, rv)
            return rv

    def current(self, resource):
        with self.lock:
            return {k: _deep(v) for k, v in self.objects[resource].items()}

    def _state_at(self, resource, rv):
        st = {k: v for k, v in self.base[resource].items()}
        for ev in self.history:
            if ev.rv > rv:
                break
            if ev.resource == resource:
                _apply(st, ev)
        return st

    # -- faults

    def set_tokens(self, tokens):
        with self.lock:
            self.tokens = set(tokens)

    def fail_requests(self, status, count=1, verb="any"):
        """The next `count` requests of `verb` ("list", "watch", "any", or
        "continue": a LIST with a continue token) get HTTP `status` with a
        Status body."""
        with self.lock:
            self._req_faults.append([verb, status, count])

    def next_event_fault(self, kind, **opts):
        assert kind in ("cut", "malformed", "oversized", "trickle", "stall", "error410"), kind
        with self.lock:
            self._event_faults.append((kind, opts))

    def pending_faults(self):
        with self.lock:
            return list(self._event_faults) + [tuple(f) for f in self._req_faults if f[2] > 0]

    def end_watches(self):
        """Ends every open watch cleanly (terminating chunk), like a timeout."""
        with self.lock:
            self._end_gen += 1
            self.lock.notify_all()

    def drop_connections(self):
        """Cuts every open connection (no TLS close_notify)."""
        with self.lock:
            conns = list(self._conns)
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def open_watches(self):
        with self.lock:
            return sum(1 for r in self._log if r["verb"] == "watch" and r.get("open"))

    # -- the request log

    def _record(self, entry):
        with self.lock:
            self._log.append(entry)

    def requests(self, verb=None, resource=None):
        with self.lock:
            return [dict(r) for r in self._log if (verb is None or r["verb"] == verb)
                    and (resource is None or r.get("resource") == resource)]

    def clear_log(self):
        with self.lock:
            self._log.clear()

    def _take_req_fault(self, verb, has_continue=False):
        with self.lock:
            for f in self._req_faults:
                if f[2] > 0 and (f[0] in (verb, "any") or (f[0] == "continue" and verb == "list" and has_continue)):
                    f[2] -= 1
                    return f[1]
        return None

    def _take_event_fault(self):
        with self.lock:
            if self._event_faults:
                return self._event_faults.pop(0)
        return None


def _apply(state, ev):
    k = _key(ev.obj if ev.obj is not None else ev.prev)
    if ev.type == "DELETED":
        state.pop(k, None)
    else:
        state[k] = ev.obj


def _encode_continue(rv, start):
    tok = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).encode()
    return base64.urlsafe_b64encode(tok).decode().rstrip("=")


def _decode_continue(tok):
    raw = base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4))
    d = json.loads(raw)
    if d.get("v") != "meta.k8s.io/v1" or not isinstance(d.get("rv"), int) or not isinstance(d.get("start"), str):
        raise ValueError("bad continue token")
    return d["rv"], d["start"]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cgprof-fault-server"
    sys_version = ""
    fs = None  # the FaultServer

    def log_message(self, fmt, *args):
        pass

    # -- plumbing

    def _send_json(self, code, obj, headers=()):
        body = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        self.entry["status"] = code
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in headers:
            self.send_header(k, v)
        if len(body) <= 2048:
            # Like Go's net/http: a small body gets a Content-Length, a larger
            # one is chunked.
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 32768):
                self._chunk(body[i:i + 32768])
            self._end_chunks()

    def _send_status(self, code, message, reason=None, details=None, headers=()):
        self._send_json(code, status_obj(code, reason or REASONS.get(code, "Unknown"), message, details), headers)

    def _chunk(self, data):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")

    def _cut(self):
        """Cuts the connection: no terminating chunk, no TLS close_notify."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise _Cut()

    # -- requests

    def do_POST(self):
        self._other()

    do_PUT = do_PATCH = do_DELETE = do_POST

    def _other(self):
        u = urllib.parse.urlsplit(self.path)
        self.entry = {"t": time.monotonic(), "method": self.command, "path": u.path, "query": {}, "verb": "other"}
        self.fs._record(self.entry)
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        self._send_status(405, f"{self.command} is not supported by the test server")

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        watch = q.get("watch", "").lower() in ("1", "true")
        self.entry = {"t": time.monotonic(), "method": "GET", "path": u.path, "query": q,
                      "verb": "watch" if watch else "list"}
        fs = self.fs
        resource, namespace = None, None
        parts = u.path.strip("/").split("/")
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
            if len(rest) == 1 and rest[0] in RESOURCES:
                resource = rest[0]
            elif len(rest) == 3 and rest[0] == "namespaces" and rest[2] in RESOURCES and RESOURCES[rest[2]][1]:
                resource, namespace = rest[2], rest[1]
        self.entry["resource"] = resource
        fs._record(self.entry)
        auth = self.headers.get("Authorization", "")
        with fs.lock:
            ok = auth.startswith("Bearer ") and auth[7:].strip() in fs.tokens
        if not ok:
            return self._send_status(401, "Unauthorized")
        if resource is None:
            if u.path in ("/readyz", "/livez", "/healthz"):
                self.entry["verb"] = "other"
                body = b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.entry["status"] = 200
                return
            self.entry["verb"] = "other"
            return self._send_status(404, "the server could not find the requested resource")
        fault = fs._take_req_fault(self.entry["verb"], bool(q.get("continue")))
        if fault is not None:
            return self._injected(fault)
        try:
            fields = parse_field_selector(resource, q.get("fieldSelector", ""))
            labels = parse_label_selector(q.get("labelSelector", ""))
        except ValueError as e:
            return self._send_status(400, str(e))
        if watch:
            return self._watch(resource, namespace, fields, labels, q)
        return self._list(resource, namespace, fields, labels, q)

    def _injected(self, code):
        msgs = {500: "Internal error occurred: injected by the test server",
                410: "too old resource version: injected by the test server",
                429: "Too many requests, please try again later.",
                503: "the server is currently unable to handle the request",
                401: "Unauthorized", 403: "forbidden: injected by the test server"}
        headers = [("Retry-After", "1")] if code in (429, 503) else []
        self._send_status(code, msgs.get(code, "injected by the test server"), headers=headers)

    def _list(self, resource, namespace, fields, labels, q):
        fs = self.fs
        kind = RESOURCES[resource][0]
        try:
            limit = int(q["limit"]) if q.get("limit") else 0
        except ValueError:
            return self._send_status(400, f"invalid limit {q['limit']!r}")
        cont = q.get("continue", "")
        rvq = q.get("resourceVersion", "")
        with fs.lock:
            if cont:
                if rvq not in ("", "0") or q.get("resourceVersionMatch"):
                    return self._send_status(400, "specifying resource version is not allowed when using continue")
                try:
                    rv, start = _decode_continue(cont)
                except (ValueError, TypeError, json.JSONDecodeError):
                    return self._send_status(400, "continue key is not valid: incorrect encoded start resourceVersion")
                if rv < fs.compacted_rv:
                    return self._send_status(
                        410, "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter, or use the continue token in "
                        "this response to retrieve the remainder of the results. Continuing with the provided "
                        "token results in an inconsistent list - objects that were created, modified, or deleted "
                        "between the time the first chunk was returned and now may show up in the list.",
                        reason="Expired")
                state = fs._state_at(resource, rv)
            else:
                start = ""
                if rvq not in ("", "0"):
                    try:
                        want = int(rvq)
                    except ValueError:
                        return self._send_status(400, f"invalid resource version: {rvq}")
                    if q.get("resourceVersionMatch") == "Exact":
                        if want < fs.compacted_rv:
                            return self._send_status(410, f"too old resource version: {want} ({fs.compacted_rv})")
                        if want > fs.rv:
                            return self._send_status(504, f"Too large resource version: {want}, current: {fs.rv}",
                                                     reason="Timeout")
                        rv, state = want, fs._state_at(resource, want)
                    else:
                        if want > fs.rv:
                            return self._send_status(504, f"Too large resource version: {want}, current: {fs.rv}",
                                                     reason="Timeout")
                        rv, state = fs.rv, dict(fs.objects[resource])
                else:
                    rv, state = fs.rv, dict(fs.objects[resource])
            keys = sorted(k for k, o in state.items() if _matches(o, fields, labels, namespace))
            keys = [k for k in keys if "/".join(k) > start] if start else keys
            page = min(limit, fs.page_max or limit) if limit else len(keys)
            items = [_deep(state[k]) for k in keys[:page]]
        meta = {"resourceVersion": str(rv)}
        if len(keys) > page:
            meta["continue"] = _encode_continue(rv, "/".join(keys[page - 1]))
            meta["remainingItemCount"] = len(keys) - page
        self._send_json(200, {"kind": kind + "List", "apiVersion": "v1", "metadata": meta, "items": items})

    # -- watch

    def _watch(self, resource, namespace, fields, labels, q):
        fs = self.fs
        kind = RESOURCES[resource][0]
        rvq = q.get("resourceVersion", "")
        bookmarks = q.get("allowWatchBookmarks", "").lower() in ("1", "true")
        try:
            timeout = int(q["timeoutSeconds"]) if q.get("timeoutSeconds") else 1800
        except ValueError:
            return self._send_status(400, "invalid timeoutSeconds")
        if fs.max_watch_sec:
            timeout = min(timeout, fs.max_watch_sec)
        initial = []
        with fs.lock:
            end_gen = fs._end_gen
            if rvq in ("", "0"):
                my_rv = fs.rv
                for k in sorted(fs.objects[resource]):
                    o = fs.objects[resource][k]
                    if _matches(o, fields, labels, namespace):
                        initial.append(("ADDED", _deep(o)))
                expired = None
            else:
                try:
                    my_rv = int(rvq)
                except ValueError:
                    return self._send_status(400, f"invalid resource version: {rvq}")
                expired = my_rv < fs.compacted_rv
        if expired and fs.expired_watch == "http":
            return self._send_status(410, f"too old resource version: {my_rv} ({fs.compacted_rv})")
        self.entry["status"] = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.entry["open"] = True
        try:
            if expired:
                self._write_event("ERROR", status_obj(410, "Expired",
                                                      f"too old resource version: {my_rv} ({fs.compacted_rv})"),
                                  fault=False)
                self._end_chunks()
                return
            for t, o in initial:
                if not self._deliver(t, o, kind):
                    return
            deadline = time.monotonic() + timeout
            next_bm = time.monotonic() + fs.bookmark_interval if fs.bookmark_interval else None
            while True:
                evs, bm_rv = [], None
                with fs.lock:
                    while True:
                        if fs._stopping:
                            self._cut_quietly()
                            return
                        if fs._end_gen != end_gen:
                            break
                        evs = [e for e in fs.history if e.rv > my_rv and e.resource == resource]
                        if evs:
                            break
                        now = time.monotonic()
                        if now >= deadline:
                            break
                        if bookmarks and next_bm is not None and now >= next_bm:
                            bm_rv = fs.rv
                            break
                        wait = deadline - now
                        if bookmarks and next_bm is not None:
                            wait = min(wait, next_bm - now)
                        fs.lock.wait(max(0.01, min(wait, 0.5)))
                    ended = fs._end_gen != end_gen or (not evs and bm_rv is None)
                if ended and not evs:
                    self._end_chunks()
                    return
                for e in evs:
                    my_rv = e.rv
                    was = _matches(e.prev, fields, labels, namespace)
                    now_m = _matches(e.obj, fields, labels, namespace)
                    if e.type == "ADDED" and now_m:
                        t = "ADDED"
                    elif e.type == "MODIFIED" and was and now_m:
                        t = "MODIFIED"
                    elif e.type == "MODIFIED" and now_m:
                        t = "ADDED"
                    elif e.type == "MODIFIED" and was:
                        t = "DELETED"
                    elif e.type == "DELETED" and was:
                        t = "DELETED"
                    else:
                        continue
                    if not self._deliver(t, e.obj, kind):
                        return
                if bm_rv is not None:
                    my_rv = max(my_rv, bm_rv)
                    self._write_event("BOOKMARK", {"kind": kind, "apiVersion": "v1",
                                                   "metadata": {"resourceVersion": str(bm_rv),
                                                                "creationTimestamp": None},
                                                   "spec": {"containers": None} if kind == "Pod" else {},
                                                   "status": {}}, fault=False)
                    next_bm = time.monotonic() + fs.bookmark_interval
        except (OSError, ssl.SSLError):
            self.close_connection = True
        finally:
            self.entry["open"] = False
            self.entry["ended"] = time.monotonic()

    def _cut_quietly(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _deliver(self, type_, obj, kind):
        """Writes one event, applying an armed fault. False: the stream ended."""
        o = {"kind": kind, "apiVersion": "v1", **_deep(obj)}
        f = self.fs._take_event_fault()
        if f is None:
            self._write_event(type_, o)
            return True
        kind_, opts = f
        self.entry.setdefault("faults", []).append(kind_)
        line = (json.dumps({"type": type_, "object": o}, separators=(",", ":")) + "\n").encode()
        if kind_ == "cut":
            n = max(1, int(len(line) * opts.get("fraction", 0.5)))
            self.wfile.write(f"{len(line):x}\r\n".encode() + line[:n])
            time.sleep(opts.get("delay", 0.05))
            self._cut()
        if kind_ == "malformed":
            for v in opts.get("variants", ["syntax"]):
                self._chunk(_malformed(v, kind, o))
            self._chunk(line)
            return True
        if kind_ == "oversized":
            size = opts.get("size", 20 << 20)
            bogus = {"kind": kind, "apiVersion": "v1",
                     "metadata": {"name": opts.get("name", "oversized"), "namespace": o["metadata"].get("namespace"),
                                  "uid": str(uuid.uuid4()), "resourceVersion": o["metadata"]["resourceVersion"],
                                  "annotations": {"big": ""}}}
            head, _, tail = json.dumps({"type": "ADDED", "object": bogus}, separators=(",", ":")).partition(
                '"big":""')
            head = (head + '"big":"').encode()
            tail = ('"' + tail + "\n").encode()
            pad = max(0, size - len(head) - len(tail))
            self._chunk(head)
            blk = b"a" * 65536
            while pad > 0:
                self._chunk(blk[:pad])
                pad -= len(blk)
            self._chunk(tail)
            self._chunk(line)
            return True
        if kind_ == "trickle":
            step, tick = opts.get("step", 8), opts.get("tick", 0.1)
            for i in range(0, len(line), step):
                self._chunk(line[i:i + step])
                time.sleep(tick)
            return True
        if kind_ == "stall":
            time.sleep(opts.get("seconds", 5))
            self._chunk(line)
            return True
        if kind_ == "error410":
            with self.fs.lock:
                crv = self.fs.compacted_rv
            self._write_event("ERROR", status_obj(410, "Expired",
                                                  f"too old resource version: {o['metadata']['resourceVersion']} "
                                                  f"({crv})"), fault=False)
            self._end_chunks()
            return False
        raise AssertionError(kind_)

    def _write_event(self, type_, obj, fault=True):
        self._chunk((json.dumps({"type": type_, "object": obj}, separators=(",", ":")) + "\n").encode())


def _malformed(variant, kind, o):
    name = f"malformed-{variant}"
    good = {"kind": kind, "apiVersion": "v1",
            "metadata": {"name": name, "namespace": o["metadata"].get("namespace"), "uid": str(uuid.uuid4()),
                         "resourceVersion": o["metadata"]["resourceVersion"]}}
    if variant == "syntax":
        return (json.dumps({"type": "ADDED", "object": good})[:-2] + ",,}}\n").encode()
    if variant == "notobject":
        return b'["ADDED", 1, 2, 3]\n'
    if variant == "noobject":
        return b'{"type":"ADDED"}\n'
    if variant == "nometadata":
        return (json.dumps({"type": "ADDED", "object": {"kind": kind, "apiVersion": "v1"}}) + "\n").encode()
    if variant == "badtype":
        return (json.dumps({"type": "EXPLODED", "object": good}) + "\n").encode()
    if variant == "binary":
        return b"\x00\xff\xfe{\"type\":\x01\x02\n"
    raise AssertionError(variant)


if __name__ == "__main__":
    # Manual use: python3 kube_fault_server.py DIR  (certs are made in DIR)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kubelib
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    certs = kubelib.make_certs(d)
    tok = kubelib.new_token()
    with FaultServer(certs["cert"], certs["key"], [tok], page_max=5, bookmark_interval=5) as fs:
        kubelib.write_kubeconfig(os.path.join(d, "kubeconfig"), fs.url, certs["ca"], token=tok)
        for i in range(12):
            fs.add_pod("default", f"pod-{i}", "node-a" if i % 2 else "node-b")
        print(f"serving {fs.url}; kubeconfig {os.path.join(d, 'kubeconfig')}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
