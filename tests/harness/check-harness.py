#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks the TAP that tests.h prints, on test-harness-fixture: the plan,
ok / not ok / # SKIP lines, named tests, an unknown name, a failed ASSERT."""
import os
import signal
import subprocess
import sys

fixture = sys.argv[1]
failures = 0


def run(args, env_fail):
    """Runs the fixture: its exit code, its plan line and its test lines as
    (status, "name[ # directive]"), checked to be numbered 1, 2, ... The
    order of the tests is the linker's: callers compare sorted lines."""
    env = dict(os.environ)
    env.pop("CGPROF_HARNESS_FAIL", None)
    if env_fail:
        env["CGPROF_HARNESS_FAIL"] = "1"
    p = subprocess.run([fixture] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = p.stdout.splitlines()
    tests = []
    for k, line in enumerate(lines[1:], 1):
        status, _, rest = line.partition(f" {k} - ")
        tests.append((status, rest) if status in ("ok", "not ok") and rest else ("BAD", line))
    return p.returncode, lines[0] if lines else None, tests, p.stdout + p.stderr


def check(what, got, want):
    global failures
    if got != want:
        failures += 1
        print(f"# FAILED: {what}: got {got!r}, want {want!r}")
    else:
        print(f"# ok: {what}")


SKIP = ("ok", "skips # SKIP frobnicator not installed (42)")
PASS = ("ok", "passes")
FAIL_OK = ("ok", "fails_when_asked")
FAILED = ("not ok", "fails_when_asked")

rc, plan, tests, out = run([], False)
check("all tests", (rc, plan, sorted(tests)), (0, "1..3", sorted([PASS, SKIP, FAIL_OK])))
# A failed ASSERT: "not ok", then abort(); the tests after it do not run.
rc, plan, tests, out = run([], True)
check("a failed ASSERT", (rc, plan, tests[-1:], FAILED in tests), (-signal.SIGABRT, "1..3", [FAILED], True))
# Named tests: the plan counts them only.
rc, plan, tests, out = run(["fails_when_asked", "skips"], False)
check("named tests", (rc, plan, sorted(tests)), (0, "1..2", sorted([SKIP, FAIL_OK])))
rc, plan, tests, out = run(["fails_when_asked"], True)
check("a named test failing", (rc, plan, tests), (-signal.SIGABRT, "1..1", [FAILED]))
rc, plan, tests, out = run(["nosuchtest"], False)
check("an unknown name", (rc, plan, tests), (1, "Bail out! No test named nosuchtest", []))
if failures:
    print(out)
sys.exit(1 if failures else 0)
