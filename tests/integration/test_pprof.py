#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""profile.pb.gz as its readers see it: cgprofd profiles the test workload
(5:3:2 in hot_alpha/hot_beta/hot_gamma) at 999 Hz with the folded, JSON and
pprof formats; `go tool pprof` reads the profile (flat shares, callers,
labels), and the protobuf, decoded here by hand, holds the same stacks and
totals as profile.folded and summary.json."""

import gzip
import os
import re
import shutil
import subprocess
import tempfile

from cgproflib import Agent, Cgroup, HOT, folded, log, main, profile, skip_prereq, workload

FREQUENCY = 999
KERNEL_MAPPING = "[kernel.kallsyms]"


# ---- A tiny protobuf decoder: just what pprof's Profile message needs ----

def varint(b, i):
    r = shift = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return r, i


def fields(b):
    """(field number, wire type, value) of each field of a message."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise AssertionError(f"wire type {wt}")
        yield num, wt, v


def ints(wt, v):
    """A repeated integer field's values, packed or not."""
    if wt != 2:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def i64(x):
    return x - (1 << 64) if x >= 1 << 63 else x


def decode_profile(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:2] == b"\x1f\x8b", "profile.pb.gz is not gzipped"
    raw = gzip.decompress(data)

    p = {"sample_type": [], "sample": [], "mapping": {}, "location": {}, "function": {}, "strings": [],
         "comment": [], "period": 0, "period_type": None, "default_sample_type": 0, "time_nanos": 0,
         "duration_nanos": 0}
    for num, wt, v in fields(raw):
        if num == 1:
            vt = dict((n, x) for n, _, x in fields(v))
            p["sample_type"].append((vt.get(1, 0), vt.get(2, 0)))
        elif num == 2:
            s = {"location_id": [], "value": [], "label": []}
            for n, w, x in fields(v):
                if n == 1:
                    s["location_id"] += ints(w, x)
                elif n == 2:
                    s["value"] += [i64(y) for y in ints(w, x)]
                elif n == 3:
                    lb = dict((k, y) for k, _, y in fields(x))
                    s["label"].append((lb.get(1, 0), lb.get(2, 0), i64(lb.get(3, 0))))
            p["sample"].append(s)
        elif num == 3:
            m = dict((n, x) for n, _, x in fields(v))
            p["mapping"][m[1]] = {"start": m.get(2, 0), "limit": m.get(3, 0), "filename": m.get(5, 0),
                                  "build_id": m.get(6, 0), "has_functions": m.get(7, 0)}
        elif num == 4:
            loc = {"mapping_id": 0, "address": 0, "function_id": []}
            for n, _, x in fields(v):
                if n == 1:
                    loc["id"] = x
                elif n == 2:
                    loc["mapping_id"] = x
                elif n == 3:
                    loc["address"] = x
                elif n == 4:
                    loc["function_id"].append(dict((k, y) for k, _, y in fields(x)).get(1, 0))
            p["location"][loc["id"]] = loc
        elif num == 5:
            fn = dict((n, x) for n, _, x in fields(v))
            p["function"][fn[1]] = {"name": fn.get(2, 0), "system_name": fn.get(3, 0)}
        elif num == 6:
            p["strings"].append(v.decode())
        elif num == 9:
            p["time_nanos"] = i64(v)
        elif num == 10:
            p["duration_nanos"] = i64(v)
        elif num == 11:
            vt = dict((n, x) for n, _, x in fields(v))
            p["period_type"] = (vt.get(1, 0), vt.get(2, 0))
        elif num == 12:
            p["period"] = i64(v)
        elif num == 13:
            p["comment"] += ints(wt, v)
        elif num == 14:
            p["default_sample_type"] = i64(v)
    return p


def pprof_folded(p):
    """{stack tuple: count} rendered like profile.folded: comm first, then the
    frames root first, kernel frames suffixed "_[k]"."""
    st = p["strings"]
    out = {}
    for s in p["sample"]:
        labels = {st[k]: (st[v] if v else n) for k, v, n in s["label"]}
        names = []
        for lid in reversed(s["location_id"]):
            loc = p["location"][lid]
            m = p["mapping"].get(loc["mapping_id"])
            kernel = m is not None and st[m["filename"]] == KERNEL_MAPPING
            for fid in reversed(loc["function_id"]):
                name = st[p["function"][fid]["name"]] or "[unknown]"
                name = re.sub(r"[;\x00-\x1f\x7f]", "_", name)
                names.append(name + ("_[k]" if kernel and name != "[kernel]" else ""))
        key = tuple([labels["comm"]] + names)
        if s["value"][0]:
            out[key] = out.get(key, 0) + s["value"][0]
    return out


# ---- go tool pprof ----

class GoPprof:
    def __init__(self, tmp):
        self.go = shutil.which("go")
        if not self.go:
            skip_prereq("no go (golang-go) for go tool pprof")
        home = os.path.join(tmp, "go-home")
        for d in ("", "cache", "path", "binaries"):
            os.makedirs(os.path.join(home, d), exist_ok=True)
        self.env = dict(os.environ, HOME=home, GOCACHE=os.path.join(home, "cache"),
                        GOPATH=os.path.join(home, "path"), PPROF_TMPDIR=home,
                        PPROF_BINARY_PATH=os.path.join(home, "binaries"), GOFLAGS="", GO111MODULE="off")

    def run(self, *args):
        r = subprocess.run([self.go, "tool", "pprof", *args], capture_output=True, text=True, timeout=300,
                           env=self.env)
        assert r.returncode == 0, f"go tool pprof {' '.join(args)} failed ({r.returncode}):\n{r.stderr}"
        return r.stdout


TOP_LINE = re.compile(r"^\s*(\S+)\s+([\d.]+)%\s+([\d.]+)%\s+(\S+)\s+([\d.]+)%\s+(.+?)\s*$")


def parse_top(text):
    """{function: flat%} of `pprof -top`."""
    out = {}
    for line in text.splitlines():
        m = TOP_LINE.match(line)
        if m:
            out[m.group(6)] = float(m.group(2))
    return out


def parse_traces(text):
    """[(value, [leaf, caller, ...])] of `pprof -traces`."""
    out = []
    for block in re.split(r"^-+\+-+$", text, flags=re.M):
        stack = None
        for line in block.splitlines():
            if stack is None:
                m = re.match(r"^\s*(\d\S*)\s{2,}(\S.*?)\s*$", line)
                if m and not re.match(r"^\s*\S+:\s", line):
                    stack = (m.group(1), [m.group(2)])
            elif line.strip():
                stack[1].append(line.strip())
        if stack:
            out.append(stack)
    return out


def parse_raw_samples(text):
    """[(values, location ids)] of the Samples section of `pprof -raw`."""
    out, in_samples = [], False
    for line in text.splitlines():
        if line.startswith("Samples:"):
            in_samples = True
            continue
        if in_samples:
            m = re.match(r"^\s*((?:-?\d+\s+)+?-?\d+):((?:\s+\d+)*)\s*$", line)
            if m:
                out.append(([int(x) for x in m.group(1).split()], [int(x) for x in m.group(2).split()]))
            elif line and not line.startswith(" ") and not line.startswith("samples/"):
                in_samples = False
    return out


def test_pprof():
    if not shutil.which("go"):
        skip_prereq("no go (golang-go) for go tool pprof")
    tmp = tempfile.mkdtemp(prefix="cgprof-pprof-")
    go = GoPprof(tmp)
    cg = Cgroup(f"cgprof-test-pprof-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="pprof", frequency=FREQUENCY, formats=["folded", "json", "pprof"])],
        "targets": [{"name": "test-cgroup", "profileRef": "pprof", "cgroupPatterns": [cg.rel]}],
    }, tmp=tmp)
    try:
        agent.start()
        p = workload(cg, 3)
        workload_pid = p.pid
        assert p.wait(timeout=60) == 0
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        rc = agent.stop()
        assert rc == 0, f"cgprofd exited {rc}:\n{agent.log()}"

        path = os.path.join(report["_dir"], "profile.pb.gz")
        assert os.path.exists(path), os.listdir(report["_dir"])
        assert "profile.pb.gz" in report["files"], report["files"]
        total = report["samples"]["total"]
        log(f"summary: {total} samples")

        # go tool pprof: flat shares of the hot functions.
        top = go.run("-top", "-nodecount=1000", path)
        log(top)
        flat = parse_top(top)
        for name, want in zip(HOT, (50, 30, 20)):
            assert name in flat, f"{name} not in pprof -top"
            assert abs(flat[name] - want) <= 5, f"{name}: flat {flat[name]}% is not {want}±5%"

        # Callers: work_cycle and run_workload, leaf first.
        traces = parse_traces(go.run("-traces", path))
        assert traces, "no traces"
        for name in HOT:
            assert any(st[:3] == [name, "work_cycle", "run_workload"] and "main" in st for _, st in traces), \
                f"no {name} <- work_cycle <- run_workload trace"

        # Labels.
        tags = go.run("-tags", path)
        log(tags)
        for key in ("pid", "comm", "cgroup"):
            assert re.search(rf"^\s*{key}:", tags, re.M), f"no {key} label in:\n{tags}"
        assert cg.rel in tags, tags
        assert "cgprof-workload" in tags, tags
        assert re.search(rf"\b{workload_pid}\b", tags), f"pid {workload_pid} not in:\n{tags}"

        # The raw samples, as pprof reads them.
        raw = parse_raw_samples(go.run("-raw", path))
        assert raw, "no samples in pprof -raw"
        raw_total = sum(v[0] for v, _ in raw)

        # The protobuf itself.
        pb = decode_profile(path)
        st = pb["strings"]
        assert st[0] == ""
        assert [(st[t], st[u]) for t, u in pb["sample_type"]] == [("samples", "count"), ("cpu", "nanoseconds")]
        assert pb["period_type"] and (st[pb["period_type"][0]], st[pb["period_type"][1]]) == ("cpu", "nanoseconds")
        assert st[pb["default_sample_type"]] == "cpu"
        assert abs(pb["period"] - 1e9 / FREQUENCY) <= 1, pb["period"]
        assert pb["duration_nanos"] > 0 and pb["time_nanos"] > 0
        assert any(st[c].startswith("cgprof session ") for c in pb["comment"]), [st[c] for c in pb["comment"]]

        pb_total = 0
        for s in pb["sample"]:
            count, ns = s["value"]
            assert abs(ns - count * 1e9 / FREQUENCY) <= count, (count, ns)
            pb_total += count
            keys = {st[k] for k, _, _ in s["label"]}
            assert {"pid", "comm", "cgroup"} <= keys, keys
        folded_stacks = folded(report)
        folded_total = sum(folded_stacks.values())
        # (pprof -raw leaves out samples without locations: a stack lost in the kernel.)
        located_total = sum(s["value"][0] for s in pb["sample"] if s["location_id"])
        log(f"totals: folded {folded_total}, pprof {pb_total}, pprof -raw {raw_total} "
            f"(located {located_total}), summary {total}")
        assert folded_total == pb_total == total
        assert raw_total == located_total

        # The same stacks as profile.folded.
        assert pprof_folded(pb) == folded_stacks

        # Every location resolves; kernel frames sit in [kernel.kallsyms].
        kernel_frames = any(f.endswith("_[k]") for stack in folded_stacks for f in stack)
        mapping_files = {st[m["filename"]] for m in pb["mapping"].values()}
        log(f"mappings: {sorted(mapping_files)}; kernel frames: {kernel_frames}")
        for loc in pb["location"].values():
            assert loc["mapping_id"] == 0 or loc["mapping_id"] in pb["mapping"], loc
            assert all(f in pb["function"] for f in loc["function_id"]), loc
        if kernel_frames:
            assert KERNEL_MAPPING in mapping_files, mapping_files
        assert any(m["has_functions"] for m in pb["mapping"].values())
        assert any(os.path.basename(f) == "cgprof-workload" for f in mapping_files), mapping_files
    finally:
        agent.cleanup()
        cg.remove()


if __name__ == "__main__":
    main([test_pprof])
