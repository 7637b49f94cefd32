#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The journal message catalog (systemd/cgprof.catalog):
- every CGPROF_MESSAGE_* of agent/base/journal.h has an entry (and nothing
  else does), with Subject, Defined-By: cgprof, Support and Documentation,
  and every @FIELD@ it uses is one that kind of entry always carries;
- `journalctl --root=TMP --update-catalog` accepts the installed file and
  `journalctl --root=TMP --list-catalog` lists every ID;
- end to end: the entries a host-mode session writes (start, end, and the
  machineConfig apply, drift and restore) are explained by `journalctl -x`,
  every line of their catalog text there with the entry's fields
  substituted. journalctl reads the catalog database compiled in TMP,
  bind-mounted over /var/lib/systemd/catalog in a private mount namespace:
  the host's catalog is not touched. Starts systemd-journald when no
  journal is running (and stops it after)."""

import os
import re
import shutil
import tempfile

from cgproflib import (BUILD, Agent, Cgroup, log, main, profile, read_sysctl, skip, skip_prereq, wait_for, workload,
                       write_sysctl)
from systemdlib import build_options, install, message_ids, parse_catalog, run
from journallib import ensure_journald, journal, stop_journald

# The fields each kind of entry always carries (agent/base/journal.c): a catalog
# text may only substitute these (a missing field would show as its name).
SESSION = {"CGPROF_EVENT", "CGPROF_SESSION", "CGPROF_PROFILE", "CGPROF_TARGET", "CGPROF_CGROUP"}
MACHINE = {"CGPROF_EVENT", "CGPROF_SYSCTL", "CGPROF_OLD_VALUE", "CGPROF_NEW_VALUE", "CGPROF_NODE"}
PROFILE_CONFIG = {"CGPROF_EVENT", "CGPROF_NAMESPACE", "CGPROF_PROFILE_CONFIG"}
ALWAYS = {
    "SESSION_START": SESSION,
    "SESSION_END": SESSION | {"CGPROF_REPORT", "CGPROF_SAMPLES", "CGPROF_LOST"},
    "SESSION_FAILURE": SESSION | {"ERRNO"},
    "MACHINE_APPLY": MACHINE,
    "MACHINE_DRIFT": MACHINE,
    "MACHINE_RESTORE": MACHINE,
    "PROFILE_CONFIG_REJECTED": PROFILE_CONFIG | {"CGPROF_ERROR"},
    "PROFILE_CONFIG_CONFLICT": PROFILE_CONFIG,
    "PROFILE_CONFIG_APPLIED": PROFILE_CONFIG | {"CGPROF_CHANGE"},
    "REPORT_INTERRUPTED": {"CGPROF_EVENT", "CGPROF_SESSION", "CGPROF_REPORT", "CGPROF_REASON",
                           "CGPROF_CHECKPOINT"},
    "REPORT_REMOVED": {"CGPROF_EVENT", "CGPROF_SESSION", "CGPROF_REPORT", "CGPROF_REASON", "CGPROF_CGROUP"},
}
COMMON = {"MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "MESSAGE_ID"}
CATALOG_DIR = "/var/lib/systemd/catalog"

root = None
catalog_path = None
ids = message_ids()


def setup():
    """The project installed (the test build, its own prefix) into a
    temporary root, and the catalog compiled there."""
    global root, catalog_path
    if shutil.which("journalctl") is None:
        skip_prereq("no journalctl")
    prefix = build_options(BUILD)["prefix"]
    if prefix not in ("/usr", "/usr/local"):
        skip(f"journalctl only reads catalogs under /usr and /usr/local, not {prefix}")
    root = tempfile.mkdtemp(prefix="cgprof-catalog-")
    install(BUILD, root)
    catalog_path = os.path.join(root, prefix.lstrip("/"), "lib/systemd/catalog/cgprof.catalog")
    assert os.path.isfile(catalog_path), f"meson install did not install {catalog_path}"


def test_entries():
    entries = parse_catalog(catalog_path)
    assert len(ids) >= 9, ids
    by_id = {v: k for k, v in ids.items()}
    assert set(entries) == set(by_id), \
        f"missing: {sorted(set(by_id) - set(entries))}, unknown: {sorted(set(entries) - set(by_id))}"
    for mid, e in entries.items():
        name = by_id[mid]
        h = e["headers"]
        assert h.get("Defined-By") == ["cgprof"], (name, h)
        for key in ("Subject", "Support", "Documentation"):
            assert h.get(key), f"{name}: no {key}:"
        used = set(re.findall(r"@([A-Z0-9_]+)@", h["Subject"][0] + e["text"]))
        assert used, f"{name}: substitutes no field"
        allowed = ALWAYS[name] | COMMON
        assert used <= allowed, f"{name}: uses {sorted(used - allowed)}, which its entries may lack"
        assert len(e["text"].strip()) > 200, f"{name}: hardly an explanation"


def test_update_and_list():
    r = run(["journalctl", f"--root={root}", "--update-catalog"], check=False)
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    assert os.path.isfile(os.path.join(root, CATALOG_DIR.lstrip("/"), "database"))
    listed = {}
    for line in run(["journalctl", f"--root={root}", "--list-catalog"]).stdout.splitlines():
        mid, _, rest = line.partition(" ")
        listed[mid] = rest
    log("\n".join(f"{k} {v}" for k, v in listed.items()))
    for name, mid in ids.items():
        assert mid in listed, f"--list-catalog does not list {name} ({mid})"
        assert listed[mid].startswith("cgprof: "), listed[mid]


def explained(*matches):
    """journalctl -x on the host's journal, with the catalog database built
    in the temporary root: {MESSAGE_ID: explanation lines}."""
    if not os.path.isdir(CATALOG_DIR):
        skip(f"no {CATALOG_DIR} to mount the test's catalog on")
    db = os.path.join(root, CATALOG_DIR.lstrip("/"))
    script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
    r = run(["unshare", "-m", "sh", "-c", script, "sh", db, CATALOG_DIR,
             "journalctl", "-x", "--no-pager", "-o", "short", *matches], env=dict(os.environ, LANG="C.UTF-8"))
    lines = r.stdout.splitlines()
    # Each entry: its message line, then the catalog text, each line
    # prefixed with "░░ " (or "-- " without UTF-8).
    out, cur = [], None
    for line in lines:
        if line.startswith("░░") or line.startswith("--"):
            if cur is not None:
                cur.append(line[3:] if len(line) > 2 else "")
        else:
            cur = []
            out.append(cur)
    return out


def render(entry, fields):
    """The catalog's text of one entry with fields substituted, as journalctl does."""
    def sub(s):
        return re.sub(r"@([A-Z0-9_]+)@", lambda m: fields.get(m.group(1), m.group(1)), s)
    h = entry["headers"]
    lines = ["Subject: " + sub(h["Subject"][0]), "Defined-By: cgprof"]
    lines += [sub(l) for l in entry["text"].rstrip("\n").split("\n")]
    return lines


def check_explained(entries, name, matches, since_us):
    """matches: of the agent's entries (journald received since since_us:
    a PID of an earlier process may match older ones)."""
    mid = ids[name]
    fields = wait_for(lambda: journal(f"MESSAGE_ID={mid}", *matches, since_us=since_us) or None,
                      what=f"the {name} entry")[0]
    # journalctl's --since takes whole seconds: one before the start.
    shown = explained(f"--since=@{since_us // 1000000}", f"MESSAGE_ID={mid}", *matches)[0]
    want = render(entries[mid], fields)
    shown_stripped = [l.rstrip() for l in shown]
    missing = [l for l in want if l.rstrip() not in shown_stripped]
    assert not missing, f"{name}: journalctl -x lacks\n" + "\n".join(missing) + "\nit shows:\n" + "\n".join(shown)
    assert not [l for l in shown if "@CGPROF_" in l], shown
    log(f"--- journalctl -x of {name}:\n" + "\n".join(shown[:6]) + "\n...")
    return fields


def test_journalctl_x():
    entries = parse_catalog(catalog_path)
    run(["journalctl", f"--root={root}", "--update-catalog"])
    ensure_journald()
    cg = Cgroup(f"cgprof-test-catalog-{os.getpid()}")
    sysctl = "kernel.perf_event_mlock_kb"
    original = read_sysctl(sysctl)
    want = str(int(original) + 4)
    agent = Agent({
        "machineConfig": [{"name": "kernel.perf_event_mlock_kb", "value": want}],
        "machineConfigInterval": "500ms",
        "profiles": [profile(name="catalogued")],
        "targets": [{"name": "ct", "profileRef": "catalogued", "cgroupPatterns": [cg.rel]}],
    })
    try:
        agent.start()
        pid = f"_PID={agent.proc.pid}"
        p = workload(cg, 1, name="catalog-work")
        assert p.wait(60) == 0
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        # Drift: someone else sets the sysctl back; the agent repairs it.
        write_sysctl(sysctl, original)
        wait_for(lambda: read_sysctl(sysctl) == want, what="the drift repair")
        assert agent.stop() == 0
        sid = report["session"]

        since = agent.started_us
        check_explained(entries, "SESSION_START", [f"CGPROF_SESSION={sid}"], since)
        end = check_explained(entries, "SESSION_END", [f"CGPROF_SESSION={sid}"], since)
        assert end["CGPROF_REPORT"] == report["_dir"] and int(end["CGPROF_SAMPLES"]) == report["samples"]["total"]
        for name in ("MACHINE_APPLY", "MACHINE_DRIFT", "MACHINE_RESTORE"):
            check_explained(entries, name, ["CGPROF_SYSCTL=kernel.perf_event_mlock_kb", pid], since)
    finally:
        agent.cleanup()
        cg.remove()
        write_sysctl(sysctl, original)


if __name__ == "__main__":
    setup()
    try:
        try:
            main([test_entries, test_update_and_list, test_journalctl_x])
        finally:
            stop_journald()
    finally:
        shutil.rmtree(root, ignore_errors=True)
