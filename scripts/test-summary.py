#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""scripts/test's closing lines, from meson's meson-logs/testlog.json of each
build tree given:

    tests: 33 passed, 0 failed, 1 skipped (2 subtests skipped)
    skipped:
      build/test_jit.py: SKIP (prerequisite): test_java: javac not installed
      build/test-symbolizer: ok 12 - map_files # SKIP /proc/PID/map_files needs root

The totals count meson's result per test (a TAP test is OK when its subtests
pass or skip, SKIP when all of them skip, FAIL, ERROR or TIMEOUT otherwise)
and the TAP subtests that skipped ("ok K - name # SKIP why"). Then every skip
with its reason, as the test printed it on stdout: an integration test's
"SKIP: why" or "SKIP (prerequisite): why" lines (cgproflib.skip() and
skip_prereq()), else its first line; a TAP subtest's "# SKIP why", where
"# SKIP (prerequisite) why" is TEST_SKIP_PREREQ().

A prerequisite skip says that something scripts/deps installs is missing.
With CI=true in the environment (or --ci), that is a failure, and so is a
skip that gives no reason: the test counts as failed and is listed under
"failed (CI=true)". Exits 1 when any test failed (a missing testlog.json
counts as one), else 0.
"""

import argparse
import json
import os
import re
import sys

# An integration test's reason line (cgproflib.skip(), skip_prereq()).
SKIP_LINE = re.compile(r"^SKIP(\s*\(prerequisite\))?:?\s*(.*)$")
# A TAP subtest that skipped, and a plan that skips the whole file.
TAP_SKIP = re.compile(r"^ok\b[^#]*#\s*skip\S*\s*(.*)$", re.IGNORECASE)
TAP_PLAN_SKIP = re.compile(r"^1\.\.0\b\s*#\s*skip\S*\s*(.*)$", re.IGNORECASE)
PREREQ = re.compile(r"^\(prerequisite\):?\s*")


class Skip:
    def __init__(self, tree, test, text, prereq):
        self.tree, self.test, self.text, self.prereq = tree, test, text, prereq

    def __str__(self):
        return f"{self.tree}/{self.test}: {self.text}"


def test_name(t):
    """meson's "project:suite / name" without the suites."""
    return t["name"].rpartition(" / ")[2]


def skips_of(tree, t):
    """The skips of one test record: [Skip]."""
    out = []
    name = test_name(t)
    stdout = t.get("stdout") or ""
    for line in stdout.splitlines():
        line = line.strip()
        m = TAP_SKIP.match(line) or TAP_PLAN_SKIP.match(line)
        if m:
            reason = m.group(1).strip()
            prereq = bool(PREREQ.match(reason))
            out.append(Skip(tree, name, line if reason else f"{line} (no reason given)", prereq))
    if t["result"] != "SKIP" or out:
        return out
    # A skipped test that is not TAP: its "SKIP...:" lines, else its first line.
    for line in stdout.splitlines():
        m = SKIP_LINE.match(line.strip())
        if m:
            out.append(Skip(tree, name, line.strip(), bool(m.group(1))))
    if not out:
        first = next((line.strip() for line in stdout.splitlines() if line.strip()), "")
        out.append(Skip(tree, name, first or "(no reason on stdout)", False))
    return out


def no_reason(s):
    return s.text.endswith("(no reason on stdout)") or s.text.endswith("(no reason given)")


def summarize(trees, ci, out=sys.stdout):
    """Prints the summary of the build trees; returns the exit status."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    subtests_skipped = 0
    skipped, ci_failures, missing = [], [], []
    for d in trees:
        tree = os.path.basename(os.path.normpath(d))
        path = os.path.join(d, "meson-logs", "testlog.json")
        try:
            with open(path) as f:
                records = [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError) as e:
            counts["failed"] += 1
            missing.append(f"{path}: {e}")
            continue
        for t in records:
            r = t["result"]
            key = "passed" if r == "OK" else "skipped" if r == "SKIP" else "failed"
            skips = skips_of(tree, t)
            if r != "SKIP":
                subtests_skipped += len(skips)
            if ci and key != "failed" and any(s.prereq or no_reason(s) for s in skips):
                key = "failed"
                ci_failures += [s for s in skips if s.prereq or no_reason(s)]
                skips = [s for s in skips if not (s.prereq or no_reason(s))]
            counts[key] += 1
            skipped += skips
    print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped "
          f"({subtests_skipped} subtests skipped)", file=out)
    for m in missing:
        print(f"no test log: {m}", file=out)
    if skipped:
        print("skipped:", file=out)
        for s in skipped:
            print(f"  {s}", file=out)
    if ci_failures:
        print("failed (CI=true: a prerequisite that scripts/deps installs is missing, or a skip gives no reason):",
              file=out)
        for s in ci_failures:
            print(f"  {s}", file=out)
    return 1 if counts["failed"] else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="scripts/test's summary of meson's test logs")
    ap.add_argument("--ci", action="store_true", default=os.environ.get("CI") == "true",
                    help="prerequisite skips and skips without a reason fail (default: CI=true in the environment)")
    ap.add_argument("trees", nargs="+", metavar="BUILD_DIR")
    a = ap.parse_args(argv)
    return summarize(a.trees, a.ci)


if __name__ == "__main__":
    sys.exit(main())
