#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Journal entries as a user reads them: a session's start and end can be
read back with `journalctl CGPROF_SESSION=<id>`, with their MESSAGE_IDs and
fields; machineConfig changes are logged the same way. Starts
systemd-journald itself when no journal socket exists (and stops it after)."""

import os

from cgproflib import Agent, Cgroup, log, main, profile, wait_for, workload
from journallib import MSG_END, MSG_START, ensure_journald, journal, process_journal, stop_journald

MSG_APPLY = "30bae784dc024758944a1b223fbeff2d"
MSG_RESTORE = "43b5e54dc6a144ee89f3469a3b47b339"


def test_session_entries():
    cg = Cgroup(f"cgprof-test-journal-{os.getpid()}")
    mlock = open("/proc/sys/kernel/perf_event_mlock_kb").read().strip()
    want = str(int(mlock) + 4)
    agent = Agent({
        "machineConfig": [{"name": "kernel.perf_event_mlock_kb", "value": want}],
        "profiles": [profile(name="journalled")],
        "targets": [{"name": "jt", "profileRef": "journalled", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        p = workload(cg, 1, name="journal-work")
        assert p.wait(60) == 0
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        assert agent.stop() == 0
        sid = report["session"]

        entries = wait_for(lambda: (lambda e: e if len(e) >= 2 else None)(journal(f"CGPROF_SESSION={sid}")),
                           what="the session's journal entries")
        by_id = {e["MESSAGE_ID"]: e for e in entries}
        log("journal:", [(e["MESSAGE_ID"], e["MESSAGE"]) for e in entries])
        assert set(by_id) == {MSG_START, MSG_END}, by_id.keys()
        start, end = by_id[MSG_START], by_id[MSG_END]
        for e in (start, end):
            assert e["CGPROF_PROFILE"] == "journalled"
            assert e["CGPROF_CGROUP"] == cg.rel
            assert e["CGPROF_TARGET"] == "jt"
        assert end["CGPROF_REPORT"] == report["_dir"]
        assert int(end["CGPROF_SAMPLES"]) == report["samples"]["total"]
        assert int(end["CGPROF_LOST"]) == report["samples"]["lost"]

        # machineConfig changes: applied at start, restored at exit.
        changes = process_journal(agent.proc.pid, agent.started_us, "CGPROF_SYSCTL=kernel.perf_event_mlock_kb")
        kinds = {e["MESSAGE_ID"]: e for e in changes}
        assert MSG_APPLY in kinds and MSG_RESTORE in kinds, changes
        assert kinds[MSG_APPLY]["CGPROF_NEW_VALUE"] == want
        assert kinds[MSG_RESTORE]["CGPROF_NEW_VALUE"] == mlock
    finally:
        agent.cleanup()
        cg.remove()
        with open("/proc/sys/kernel/perf_event_mlock_kb", "w") as f:
            f.write(mlock)


if __name__ == "__main__":
    ensure_journald()
    try:
        main([test_session_entries])
    finally:
        stop_journald()
