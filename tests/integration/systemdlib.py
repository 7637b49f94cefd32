# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers for the tests of systemd/: install the project into a temporary
root, run a command against "this host with that tree installed on top"
without touching the host, read unit files and the numbers
docs/operations.md states.

systemd is not PID 1 on the test machine, so nothing here starts the unit:
systemd-analyze and journalctl work on files (--root, --offline)."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from cgproflib import BUILD, log, skip

SOURCE = os.environ.get("CGPROF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
# Where the unit and its sandbox are documented ("Installing on a host
# (systemd)"), with the scores the tests hold it to.
OPERATIONS_DOC = os.path.join(SOURCE, "docs", "operations.md")
JOURNAL_H = os.path.join(SOURCE, "agent", "base", "journal.h")
UNIT = "cgprofd.service"
# The Kubernetes-mode drop-in: installed as an example (with --prefix=/usr,
# at DROPIN_EXAMPLE), enabled by copying it into DROPIN_DIR.
DROPIN = "kubernetes.conf"
DROPIN_EXAMPLE = "/usr/share/doc/cgprof/examples/cgprofd.service.d/" + DROPIN
DROPIN_DIR = "/etc/systemd/system/cgprofd.service.d"
# What the unit's ExecStart= runs the agent with (docs/operations.md says the same).
STATE_DIR = "/var/lib/cgprof/state"
REPORT_DIR = "/var/lib/cgprof/reports"


def run(argv, check=True, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 600), **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def build_options(build):
    r = run(["meson", "introspect", build, "--buildoptions"])
    return {o["name"]: o["value"] for o in json.loads(r.stdout)}


def install(build, destdir, rebuild=False):
    """meson install of a configured build directory into destdir."""
    argv = ["meson", "install", "-C", build, "--destdir", destdir]
    if not rebuild:
        argv.append("--no-rebuild")
    run(argv)


class UsrTree:
    """The project installed with --prefix=/usr into a temporary root, as the
    install steps of docs/operations.md do. The test's build directory is
    used when its prefix is /usr; otherwise a build directory configured with --prefix=/usr
    is made (and removed) in the temporary directory."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="cgprof-systemd-")
        self.root = os.path.join(self.tmp, "root")
        if build_options(BUILD)["prefix"] == "/usr":
            self.build = BUILD
            install(BUILD, self.root)
        else:
            self.build = os.path.join(self.tmp, "build")
            log(f"{BUILD} has prefix {build_options(BUILD)['prefix']}: configuring {self.build} with --prefix=/usr")
            run(["meson", "setup", self.build, SOURCE, "--prefix=/usr"])
            install(self.build, self.root, rebuild=True)

    def path(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def on_host(root, argv, **kw):
    """Runs argv in a private mount namespace where MERGED (the first
    occurrence of "{MERGED}" in argv is replaced by it) is this host's root
    with the tree `root` laid over it, read-only: the installed files are
    there, and so is everything the host has (units, /bin/kill). The tree
    is copied into a tmpfs first: overlayfs refuses a lower layer that is
    inside another one (here, /)."""
    if shutil.which("unshare") is None:
        skip("no unshare")
    base = tempfile.mkdtemp(prefix="cgprof-overlay-")
    layer, merged = os.path.join(base, "layer"), os.path.join(base, "merged")
    os.makedirs(layer)
    os.makedirs(merged)
    script = ('set -e; mount --make-rprivate /; mount -t tmpfs tmpfs "$1"; cp -a "$2/." "$1/"; '
              'mount -t overlay overlay -o ro,lowerdir="$1":/ "$3"; shift 3; exec "$@"')
    argv = [a.replace("{MERGED}", merged) for a in argv]
    try:
        return run(["unshare", "-m", "sh", "-c", script, "sh", layer, root, merged, *argv], check=False, **kw)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def parse_unit(path):
    """[(section, key, value)] in file order (no line continuations in ours)."""
    out, section = [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                continue
            k, _, v = line.partition("=")
            out.append((section, k.strip(), v.strip()))
    return out


def merge_units(*paths):
    """A unit file and its drop-ins, in order, merged as systemd does for
    the settings the tests read: each file's lines follow the earlier ones',
    and an empty assignment (ExecStart=, IPAddressDeny=) drops every earlier
    value of its key. List settings are then all the values left; for a
    single-valued one the last wins (unit_value())."""
    out = []
    for path in paths:
        for s, k, v in parse_unit(path):
            if v == "":
                out = [e for e in out if e[:2] != (s, k)]
            else:
                out.append((s, k, v))
    return out


def unit_values(entries, key, section="Service"):
    return [v for s, k, v in entries if s == section and k == key]


def unit_value(entries, key, default, section="Service"):
    """A single-valued setting: its last assignment, or default."""
    return (unit_values(entries, key, section) or [default])[-1]


def documented_security_score(dropin=None):
    """The exposure level docs/operations.md states: the number in the line
    "`systemd-analyze security cgprofd.service` rates ... **N** ..." or,
    with dropin, in "`systemd-analyze security` rates the unit with
    `DROPIN` **N**"."""
    with open(OPERATIONS_DOC) as f:
        text = f.read()
    if dropin:
        m = re.search(r"systemd-analyze security` rates the unit with\s+`" + re.escape(dropin) +
                      r"`\s+\*\*(\d+\.\d)\*\*", text)
    else:
        m = re.search(r"systemd-analyze security[^\n]*?cgprofd\.service`[^\n]*?\*\*(\d+\.\d)\*\*", text)
    if not m:
        raise AssertionError(f"docs/operations.md states no systemd-analyze security score for cgprofd.service"
                             f"{' with ' + dropin if dropin else ''}")
    return float(m.group(1))


def message_ids():
    """{CGPROF_MESSAGE_NAME: id} from agent/journal.h."""
    with open(JOURNAL_H) as f:
        return dict(re.findall(r'#define\s+CGPROF_MESSAGE_(\w+)\s+"([0-9a-f]{32})"', f.read()))


def parse_catalog(path):
    """{id: {"headers": {key: [values]}, "text": str}} of a catalog file."""
    entries, cur = {}, None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                continue  # a comment, wherever it is (systemd's catalog.c)
            if line.startswith("-- "):
                mid = line[3:].split()[0]
                assert mid not in entries, f"{path}: {mid} twice"
                cur = entries[mid] = {"headers": {}, "text": "", "in_headers": True}
                continue
            if cur is None:
                continue  # comments before the first entry
            if cur["in_headers"]:
                if not line:
                    cur["in_headers"] = False
                    continue
                k, _, v = line.partition(": ")
                cur["headers"].setdefault(k, []).append(v)
            else:
                cur["text"] += line + "\n"
    for e in entries.values():
        del e["in_headers"]
    return entries
