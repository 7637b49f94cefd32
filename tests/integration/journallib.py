# SPDX-License-Identifier: LGPL-2.1-or-later
"""The journal for cgprof's integration tests (and benchmarks): use the
running systemd-journald, or start one when no journal socket answers (and
stop it after); read entries back with journalctl."""

import json
import os
import socket
import subprocess

from cgproflib import skip, wait_for

SOCKET = "/run/systemd/journal/socket"
JOURNALD = "/lib/systemd/systemd-journald"
# agent/base/journal.h's CGPROF_MESSAGE_SESSION_*.
MSG_START = "22a9421dda4449b4a16d369fcaece6bf"
MSG_END = "1a54d886fa99449d8c335898f05aa9fe"
MSG_FAILURE = "67da3839196441e9bd8eab33f19bd0ae"

journald = None


def journal_alive():
    """A socket file can outlive its journald: connect to know."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.connect(SOCKET)
        return True
    except OSError:
        return False
    finally:
        s.close()


def ensure_journald():
    """A journald that answers: the running one, or one started here."""
    global journald
    if journal_alive():
        return
    if not os.access(JOURNALD, os.X_OK):
        skip("no journal socket and no systemd-journald")
    journald = subprocess.Popen([JOURNALD], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(journal_alive, timeout=30, what="the journal socket")


def stop_journald():
    """Stops the journald ensure_journald() started (none otherwise)."""
    global journald
    if journald:
        journald.terminate()
        journald.wait(30)
        journald = None
        for sock in ("socket", "stdout", "dev-log", "io.systemd.journal"):
            try:
                os.unlink(f"/run/systemd/journal/{sock}")
            except OSError:
                pass


def journal(*matches, since_us=None):
    """The entries that match (journalctl match arguments), as dicts; with
    since_us (CLOCK_REALTIME µs), only those journald received from then on.
    A _PID= match needs since_us: PIDs wrap (pid_max is 32768 here) and the
    journal keeps an earlier process's entries under the same PID."""
    r = subprocess.run(["journalctl", "--no-pager", "-o", "json", *matches], capture_output=True, text=True,
                       timeout=120)
    out = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    if since_us is not None:
        out = [e for e in out if int(e.get("__REALTIME_TIMESTAMP", 0)) >= since_us]
    return out


def process_journal(pid, since_us, *matches):
    """The entries process pid sent since since_us (when it started)."""
    return journal(f"_PID={pid}", *matches, since_us=since_us)
