#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""machineConfig against the real /proc/sys: applied at start, drift
repaired on the interval, originals restored at exit — also after a crash
(SIGKILL) and restart — and sysctls outside the allow-list refused. The test
restores every sysctl it touched, whatever happens."""

import json
import os
import signal

import cgproflib
from cgproflib import Agent, log, main, wait_for

SYSCTLS = {
    "kernel.perf_event_mlock_kb": None,
    "kernel.perf_event_paranoid": None,
}


path, read, write = cgproflib.sysctl_path, cgproflib.read_sysctl, cgproflib.write_sysctl


def originals():
    return {n: read(n) for n in SYSCTLS}


ORIG = originals()
# Values different from the originals, harmless for a root-run test.
WANT = {
    "kernel.perf_event_mlock_kb": str(int(ORIG["kernel.perf_event_mlock_kb"]) + 516),
    "kernel.perf_event_paranoid": "1" if ORIG["kernel.perf_event_paranoid"] != "1" else "0",
}


def config(restore=True):
    return {
        "machineConfig": [{"name": n, "value": v} for n, v in WANT.items()],
        "restoreMachineConfig": restore,
        "machineConfigInterval": "500ms",
        "profiles": [{"name": "p"}],
        "targets": [],
    }


def test_apply_drift_restore():
    agent = Agent(config())
    try:
        agent.start()
        assert originals() == WANT, originals()
        with open(os.path.join(agent.state_dir, "machine-config.json")) as f:
            saved = json.load(f)["originals"]
        assert saved == ORIG, saved
        # Someone changes a setting: the agent sets it back on its interval.
        write("kernel.perf_event_mlock_kb", 4096)
        wait_for(lambda: read("kernel.perf_event_mlock_kb") == WANT["kernel.perf_event_mlock_kb"],
                 what="drift repair")
        wait_for(lambda: "drifted to 4096" in agent.log(), what="the drift log entry")
        assert agent.stop() == 0
        assert originals() == ORIG, originals()
        assert not os.path.exists(os.path.join(agent.state_dir, "machine-config.json"))
    finally:
        agent.cleanup()


def test_crash_restart_restores_true_originals():
    agent = Agent(config())
    try:
        agent.start()
        assert originals() == WANT
        agent.kill()                      # a crash: nothing restored
        assert originals() == WANT
        agent.start()                     # the restart must not take WANT for the originals
        assert originals() == WANT
        assert agent.stop() == 0
        assert originals() == ORIG, originals()
    finally:
        agent.cleanup()


def test_no_restore():
    agent = Agent(config(restore=False))
    try:
        agent.start()
        assert agent.stop() == 0
        assert originals() == WANT, "restoreMachineConfig: false must leave the settings"
    finally:
        agent.cleanup()
        for n, v in ORIG.items():
            write(n, v)


def test_refused_sysctl():
    core = read("kernel.core_pattern")
    agent = Agent({"machineConfig": [{"name": "kernel.core_pattern", "value": "|/tmp/evil"}],
                   "profiles": [{"name": "p"}], "targets": []})
    try:
        agent.start(wait_ready=False)
        assert agent.proc.wait(30) != 0
        assert "machineConfig[0].name" in agent.log(), agent.log()
        assert read("kernel.core_pattern") == core
    finally:
        agent.cleanup()
    agent = Agent({"machineConfig": [{"name": "kernel/../kernel.core_pattern", "value": "x"}],
                   "profiles": [{"name": "p"}], "targets": []})
    try:
        agent.start(wait_ready=False)
        assert agent.proc.wait(30) != 0
        assert "machineConfig[0].name" in agent.log(), agent.log()
    finally:
        agent.cleanup()


def restore_all():
    for n, v in ORIG.items():
        try:
            if read(n) != v:
                write(n, v)
                log(f"restored {n}={v}")
        except OSError as e:
            log(f"failed to restore {n}: {e}")


if __name__ == "__main__":
    import atexit
    atexit.register(restore_all)
    signal.signal(signal.SIGTERM, lambda *a: (restore_all(), os._exit(1)))
    main([test_apply_drift_restore, test_crash_restart_restores_true_originals, test_no_restore, test_refused_sysctl])
