#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks scripts/test-summary.py, scripts/test's closing lines, on synthetic
meson testlog.json files: the totals, every skip listed with its reason (an
integration test's "SKIP: why" lines, a TAP "# SKIP why", else a first line),
and CI=true turning a prerequisite skip, or a skip without a reason, into a
failure. The skip lines themselves come from the real cgproflib.skip() and
skip_prereq(), run in a child."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("CGPROF_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(SOURCE, "scripts", "test-summary.py")
INTEGRATION = os.path.join(SOURCE, "tests", "integration")
failures = 0


def check(what, got, want):
    global failures
    if got != want:
        failures += 1
        print(f"# FAILED: {what}:\n#   got  {got!r}\n#   want {want!r}")
    else:
        print(f"# ok: {what}")


def cgproflib_run(code):
    """Runs python code with cgproflib imported: (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-c", "import cgproflib\n" + code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=INTEGRATION), timeout=60)
    return p.returncode, p.stdout, p.stderr


def record(name, result, stdout, suite="integration"):
    return {"name": f"cgprof:{suite} / {name}", "result": result, "stdout": stdout, "returncode": 0,
            "duration": 0.1, "starttime": 0, "env": {}, "command": [name]}


def write_log(tree, records):
    os.makedirs(os.path.join(tree, "meson-logs"))
    with open(os.path.join(tree, "meson-logs", "testlog.json"), "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def summary(trees, ci):
    env = dict(os.environ)
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    p = subprocess.run([sys.executable, SCRIPT, *trees], capture_output=True, text=True, env=env, timeout=60)
    return p.returncode, p.stdout.splitlines(), p.stderr


# The skip lines as the integration tests print them: on stdout, 77.
rc, out, err = cgproflib_run("cgproflib.skip('no cgroup2 mount')")
check("skip(): exit 77, the reason on stdout", (rc, out), (77, "SKIP: no cgroup2 mount\n"))
rc, out_prereq, err = cgproflib_run("cgproflib.skip_prereq('etcd not installed (etcd-server)')")
check("skip_prereq(): exit 77, marked on stdout", (rc, out_prereq),
      (77, "SKIP (prerequisite): etcd not installed (etcd-server)\n"))
rc, out_main, err = cgproflib_run("""
cgproflib.require_root = lambda: None
def test_a():
    pass
def test_b():
    cgproflib.skip_prereq('kubectl not installed')
def test_c():
    cgproflib.skip('no /home')
cgproflib.main([test_a, test_b, test_c])
""")
check("main(): each skip names its test", (rc, out_main),
      (77, "SKIP (prerequisite): test_b: kubectl not installed\nSKIP: test_c: no /home\n"))

tmp = tempfile.mkdtemp(prefix="cgprof-summary-")
try:
    build, asan = os.path.join(tmp, "build"), os.path.join(tmp, "build-asan")
    tap_ok = "1..3\nok 1 - parses\nok 2 - map_files # SKIP /proc/PID/map_files needs root\nok 3 - vdso\n"
    write_log(build, [
        record("test-symbolizer", "OK", tap_ok, suite="unit"),
        record("test_profile.py", "OK", ""),
        record("test_host.py", "SKIP", out),
        record("test_kube.py", "SKIP", out_prereq),
        record("test_ctl.py", "FAIL", ""),
    ])
    write_log(asan, [
        record("fuzz-gopclntab", "SKIP", "no Go toolchain for the seeds, skipping\n", suite="fuzz"),
        record("test_jit.py", "SKIP", out_main),
        record("test_quiet.py", "SKIP", ""),
        record("test-python-runtime", "OK", "1..2\nok 1 - offsets\n"
               "ok 2 - live # SKIP (prerequisite) /usr/bin/python3.11 not installed\n", suite="unit"),
    ])
    listed = [
        "skipped:",
        "  build/test-symbolizer: ok 2 - map_files # SKIP /proc/PID/map_files needs root",
        "  build/test_host.py: SKIP: no cgroup2 mount",
        "  build/test_kube.py: SKIP (prerequisite): etcd not installed (etcd-server)",
        "  build-asan/fuzz-gopclntab: no Go toolchain for the seeds, skipping",
        "  build-asan/test_jit.py: SKIP (prerequisite): test_b: kubectl not installed",
        "  build-asan/test_jit.py: SKIP: test_c: no /home",
        "  build-asan/test_quiet.py: (no reason on stdout)",
        "  build-asan/test-python-runtime: ok 2 - live # SKIP (prerequisite) /usr/bin/python3.11 not installed",
    ]
    rc, lines, err = summary([build, asan], ci=False)
    check("totals, then every skip with its reason", (rc, lines, err),
          (1, ["tests: 3 passed, 1 failed, 5 skipped (2 subtests skipped)"] + listed, ""))

    # CI=true: the prerequisite skips and the one without a reason fail.
    rc, lines, err = summary([build, asan], ci=True)
    check("CI=true: prerequisite skips fail", (rc, lines), (1, [
        "tests: 2 passed, 5 failed, 2 skipped (2 subtests skipped)",
        "skipped:",
        "  build/test-symbolizer: ok 2 - map_files # SKIP /proc/PID/map_files needs root",
        "  build/test_host.py: SKIP: no cgroup2 mount",
        "  build-asan/fuzz-gopclntab: no Go toolchain for the seeds, skipping",
        "  build-asan/test_jit.py: SKIP: test_c: no /home",
        "failed (CI=true: a prerequisite that scripts/deps installs is missing, or a skip gives no reason):",
        "  build/test_kube.py: SKIP (prerequisite): etcd not installed (etcd-server)",
        "  build-asan/test_jit.py: SKIP (prerequisite): test_b: kubectl not installed",
        "  build-asan/test_quiet.py: (no reason on stdout)",
        "  build-asan/test-python-runtime: ok 2 - live # SKIP (prerequisite) /usr/bin/python3.11 not installed",
    ]))

    # Only skips of the machine: exit 0, also with CI=true.
    clean = os.path.join(tmp, "clean")
    write_log(clean, [record("test-symbolizer", "OK", tap_ok, suite="unit"), record("test_host.py", "SKIP", out)])
    want = ["tests: 1 passed, 0 failed, 1 skipped (1 subtests skipped)", "skipped:",
            "  clean/test-symbolizer: ok 2 - map_files # SKIP /proc/PID/map_files needs root",
            "  clean/test_host.py: SKIP: no cgroup2 mount"]
    check("skips of the machine only", summary([clean], ci=False)[:2], (0, want))
    check("skips of the machine only, CI=true", summary([clean], ci=True)[:2], (0, want))

    # A tree without a test log (its meson test never ran) is a failure.
    rc, lines, err = summary([clean, os.path.join(tmp, "none")], ci=False)
    check("a missing testlog.json fails", (rc, lines[0], lines[1].startswith("no test log: ")),
          (1, "tests: 1 passed, 1 failed, 1 skipped (1 subtests skipped)", True))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

sys.exit(1 if failures else 0)
