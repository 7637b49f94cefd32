#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The speedscope report of a real session: cgprofd profiles the test
workload (5:3:2 in hot_alpha/hot_beta/hot_gamma) at 999 Hz with the folded,
JSON and speedscope formats; profile.speedscope.json must validate against
the speedscope file-format schema (tests/speedscope-schema.json, with
Debian's python3-jsonschema under /usr/bin/python3), hold the same stacks and
totals as profile.folded and summary.json, and show the 5:3:2 shares."""

import json
import os
import subprocess

from cgproflib import (LAUNCHER_COMM, Agent, Cgroup, HOT, assert_shares, folded, log, main, profile, skip_prereq,
                       workload)

SYSTEM_PYTHON = "/usr/bin/python3"
SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "speedscope-schema.json")

VALIDATE = """
import json, sys
import jsonschema
with open(sys.argv[1]) as f:
    schema = json.load(f)
with open(sys.argv[2]) as f:
    doc = json.load(f)
jsonschema.Draft7Validator.check_schema(schema)
jsonschema.Draft7Validator(schema).validate(doc)
"""


def require_jsonschema():
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        skip_prereq(f"no {SYSTEM_PYTHON}")
    r = subprocess.run([SYSTEM_PYTHON, "-c", "import jsonschema"], capture_output=True, text=True)
    if r.returncode != 0:
        skip_prereq(f"no jsonschema module for {SYSTEM_PYTHON} (python3-jsonschema): {r.stderr.strip()}")


def validate(path):
    r = subprocess.run([SYSTEM_PYTHON, "-c", VALIDATE, SCHEMA, path], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"{path} does not match the speedscope schema:\n{r.stderr}"


def folded_name(name):
    """A frame name as profile.folded renders it."""
    return "".join("_" if c == ";" or ord(c) < 0x20 or c == "\x7f" else c for c in name)


def speedscope_stacks(doc, frequency):
    """{stack tuple of names: samples} of the file's one sampled profile."""
    frames = doc["shared"]["frames"]
    (p,) = doc["profiles"]
    assert p["type"] == "sampled"
    assert p["unit"] == "nanoseconds", p["unit"]
    assert len(p["samples"]) == len(p["weights"])
    assert p["startValue"] == 0
    assert p["endValue"] == sum(p["weights"]), (p["endValue"], sum(p["weights"]))
    out = {}
    for sample, weight in zip(p["samples"], p["weights"]):
        assert weight > 0
        # Weights are count x 1e9/frequency, rounded: convert them back.
        count = round(weight * frequency / 1e9)
        assert abs(count * 1e9 / frequency - weight) <= 0.5 + 1e-6, (weight, count)
        st = tuple(folded_name(frames[i]["name"] or "[unknown]") for i in sample)
        out[st] = out.get(st, 0) + count
    return out


def test_speedscope_report():
    require_jsonschema()
    cg = Cgroup(f"cgprof-test-speedscope-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="speedscope", formats=["folded", "json", "speedscope"])],
        "targets": [{"name": "test-cgroup", "profileRef": "speedscope", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        p = workload(cg, 3)
        assert p.wait(timeout=60) == 0
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        assert report["frequency"] == 999
        assert "profile.speedscope.json" in report["files"], report["files"]
        path = os.path.join(report["_dir"], "profile.speedscope.json")
        validate(path)

        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
        assert doc["exporter"].startswith("cgprof@"), doc["exporter"]
        assert doc["activeProfileIndex"] == 0

        stacks = speedscope_stacks(doc, report["frequency"])
        total = sum(stacks.values())
        log(f"speedscope: {len(doc['profiles'][0]['samples'])} samples, {len(doc['shared']['frames'])} frames, "
            f"{total} samples in all; summary {report['samples']['total']}")

        # The same totals and stacks as profile.folded and summary.json.
        fold = folded(report)
        assert total == sum(fold.values()) == report["samples"]["total"], \
            (total, sum(fold.values()), report["samples"]["total"])
        assert stacks == fold, "speedscope stacks differ from profile.folded: " + repr(
            sorted(set(stacks.items()) ^ set(fold.items()))[:10])

        # Root first: the process, main ... the hot function.
        # (The launching shell may have been sampled before its exec().)
        assert {st[0] for st in stacks} - {LAUNCHER_COMM} == {"cgprof-workload"}, set(st[0] for st in stacks)
        for name in HOT:
            chain = ("run_workload", "work_cycle", name)
            assert any(st[-3:] == chain and "main" in st for st in stacks), f"no main..{chain} sample"

        # Frames name their module.
        files = {fr["name"]: fr.get("file") for fr in doc["shared"]["frames"]}
        assert files["hot_alpha"] == "cgprof-workload", files["hot_alpha"]

        # 5:3:2, from the speedscope file itself.
        shares = {n: 100.0 * sum(c for st, c in stacks.items() if st[-1] == n) / total for n in HOT}
        log("speedscope shares: " + ", ".join(f"{k} {v:.1f}%" for k, v in shares.items()))
        assert abs(shares["hot_alpha"] - 50) <= 5, shares
        assert_shares(report)

        rc = agent.stop()
        assert rc == 0, f"cgprofd exited {rc}:\n{agent.log()}"
    finally:
        agent.cleanup()
        cg.remove()


if __name__ == "__main__":
    main([test_speedscope_report])
