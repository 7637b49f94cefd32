#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""systemd/ as a host installs it:
- `meson install --destdir` (prefix /usr) puts every file where the unit,
  docs/operations.md and the catalog say, and systemd-tmpfiles creates the
  state and report directories from the installed snippet; another prefix moves the
  unit's binary and config paths with it;
- `systemd-analyze verify` passes on the installed unit, against this host
  with the installed tree laid over it (and fails when the binary is
  missing from the tree, so it does look there);
- `systemd-analyze security --offline=yes` rates the unit no worse than the
  docs/operations.md says;
- the Kubernetes-mode drop-in, installed as an example (not enabled), names
  the installed binary and sysconfdir; enabled in the tree's
  /etc/systemd/system/cgprofd.service.d/, `systemd-analyze verify` passes
  (and fails once the drop-in lacks its `ExecStart=` reset, so it is read),
  and `systemd-analyze security` gives up exactly the network settings it
  changes and rates the two no worse than docs/operations.md says;
- the default /etc/cgprof/config.json passes `cgprofd --check-config` and
  profiles nothing: the agent run with it, while a busy cgroup exists, has
  no sessions (yet it can profile that cgroup when asked to)."""

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
import xml.etree.ElementTree as ET

from cgproflib import BUILD, CGPROFD, Agent, Cgroup, log, main, skip_prereq, workload
from systemdlib import (DROPIN, DROPIN_DIR, DROPIN_EXAMPLE, REPORT_DIR, STATE_DIR, UNIT, UsrTree, build_options,
                        install, merge_units, on_host, parse_catalog, parse_unit, documented_security_score, run,
                        unit_value, unit_values)

tree = None

# What the unit, docs/operations.md and the catalog name, with --prefix=/usr.
EXPECTED = {
    "/usr/sbin/cgprofd": True,  # executable
    "/usr/bin/cgprofctl": True,
    "/usr/bin/kubectl-cgprof": True,
    "/usr/lib/systemd/system/cgprofd.service": False,
    "/usr/lib/tmpfiles.d/cgprof.conf": False,
    "/usr/lib/systemd/catalog/cgprof.catalog": False,
    "/usr/share/dbus-1/system.d/io.cgprof.Agent1.conf": False,
    "/usr/share/doc/cgprof/README.md": False,
    "/usr/share/doc/cgprof/docs/operations.md": False,
    DROPIN_EXAMPLE: False,
    "/etc/cgprof/config.json": False,
}
# The sysctls machineConfig accepts (common/config/config.c): the unit leaves
# exactly these writable in /proc/sys.
SYSCTLS = ["kernel.perf_event_paranoid", "kernel.perf_event_max_stack", "kernel.perf_event_mlock_kb",
           "kernel.perf_event_max_sample_rate", "kernel.perf_cpu_time_max_percent", "kernel.kptr_restrict"]


def need_tree():
    global tree
    if tree is None:
        for tool in ("systemd-analyze", "systemd-tmpfiles", "meson"):
            if shutil.which(tool) is None:
                skip_prereq(f"no {tool}")
        tree = UsrTree()
    return tree


def exec_start(entries):
    (line,) = unit_values(entries, "ExecStart")
    return line.split()


def option(argv, name):
    return argv[argv.index(name) + 1]


def installed_files(root):
    out = set()
    for dirpath, _, files in os.walk(root):
        for f in files:
            out.add("/" + os.path.relpath(os.path.join(dirpath, f), root))
    return out


def check_unit_paths(root, prefix, sysconfdir):
    """The unit installed under root names the binary and config that the
    same install put there, and the documentation it links to exists."""
    unit = os.path.join(root, prefix.lstrip("/"), "lib/systemd/system", UNIT)
    entries = parse_unit(unit)
    argv = exec_start(entries)
    assert argv[0] == os.path.join(prefix, "sbin", "cgprofd"), argv
    assert os.access(os.path.join(root, argv[0].lstrip("/")), os.X_OK), f"{argv[0]} is not installed"
    config = option(argv, "--config")
    assert config == os.path.join(sysconfdir, "cgprof", "config.json"), config
    assert os.path.isfile(os.path.join(root, config.lstrip("/"))), f"{config} is not installed"
    for doc in unit_values(entries, "Documentation", section="Unit"):
        assert doc.startswith("file://"), doc
        assert os.path.isfile(os.path.join(root, doc[len("file://"):].lstrip("/"))), f"{doc} is not installed"
    catalog = os.path.join(root, prefix.lstrip("/"), "lib/systemd/catalog/cgprof.catalog")
    for mid, e in parse_catalog(catalog).items():
        for key in ("Support", "Documentation"):
            for url in e["headers"].get(key, []):
                if url.startswith("file://"):
                    assert os.path.isfile(os.path.join(root, url[len("file://"):].lstrip("/"))), \
                        f"catalog {mid}: {key}: {url} is not installed"
    return argv, config


def check_dropin(root, prefix, sysconfdir):
    """The Kubernetes drop-in installed under root, merged with the unit as
    systemd merges them: the same agent, config and state, with
    --kubeconfig in sysconfdir instead of --no-kubernetes, and the network
    opened. It is installed as an example only: nothing is in a drop-in
    directory of the unit."""
    unit = os.path.join(root, prefix.lstrip("/"), "lib/systemd/system", UNIT)
    dropin = os.path.join(root, prefix.lstrip("/"), "share/doc/cgprof/examples/cgprofd.service.d", DROPIN)
    enabled = [f for f in installed_files(root) if f"/{UNIT}.d/" in f and "/share/doc/" not in f]
    assert not enabled, f"meson install enabled a drop-in: {enabled}"
    base = exec_start(parse_unit(unit))
    merged = merge_units(unit, dropin)
    argv = exec_start(merged)
    log("Kubernetes mode:", " ".join(argv))
    assert argv[0] == base[0], argv
    assert "--no-kubernetes" not in argv, argv
    assert option(argv, "--kubeconfig") == os.path.join(sysconfdir, "cgprof", "kubeconfig"), argv
    for o in ("--config", "--state-dir"):
        assert option(argv, o) == option(base, o), (o, argv, base)
    assert unit_value(merged, "PrivateNetwork", "no") == "no"
    assert unit_values(merged, "IPAddressDeny") == []
    assert {f for v in unit_values(merged, "RestrictAddressFamilies") for f in v.split()} == \
        {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert "network-online.target" in unit_values(merged, "After", section="Unit")


def test_install_layout():
    t = need_tree()
    files = installed_files(t.root)
    log("installed:", sorted(files))
    for path, executable in EXPECTED.items():
        assert path in files, f"meson install did not install {path}"
        if executable:
            assert os.stat(t.path(path)).st_mode & stat.S_IXUSR, f"{path} is not executable"
    stray = [f for f in files if not (f.startswith("/usr/") or f.startswith("/etc/"))]
    assert not stray, f"installed outside /usr and /etc: {stray}"

    argv, config = check_unit_paths(t.root, "/usr", "/etc")
    check_dropin(t.root, "/usr", "/etc")
    assert option(argv, "--state-dir") == STATE_DIR, argv
    assert "--no-kubernetes" in argv, argv
    entries = parse_unit(t.path("/usr/lib/systemd/system/" + UNIT))
    for line in unit_values(entries, "ExecReload"):
        assert os.access(line.split()[0], os.X_OK), f"ExecReload= runs {line.split()[0]}, which is not here"

    # The agent can write what it must: its state and report directories,
    # and the machineConfig sysctls; /sys and the rest of /proc/sys are
    # read-only.
    rw = [p.lstrip("-") for v in unit_values(entries, "ReadWritePaths") for p in v.split()]
    ro = [p.lstrip("-") for v in unit_values(entries, "ReadOnlyPaths") for p in v.split()]
    with open(t.path(config)) as f:
        report_dir = json.load(f)["reportDir"]
    assert report_dir == REPORT_DIR, report_dir
    for d in (STATE_DIR, report_dir):
        assert any(d == p or d.startswith(p + "/") for p in rw), f"{d} is not in ReadWritePaths= {rw}"
    assert "/proc/sys" in ro and "/sys" in ro, ro
    assert sorted(p for p in rw if p.startswith("/proc/sys/")) == \
        sorted("/proc/sys/" + s.replace(".", "/") for s in SYSCTLS), rw

    # systemd-tmpfiles, as docs/operations.md runs it, makes the directories the
    # unit and the config use, with their modes.
    run(["systemd-tmpfiles", f"--root={t.root}", "--create", "cgprof.conf"])
    for d, mode in (("/var/lib/cgprof", 0o755), (report_dir, 0o755), (STATE_DIR, 0o700)):
        st = os.stat(t.path(d))
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == mode, \
            f"{d}: mode {stat.S_IMODE(st.st_mode):o}, want {mode:o}"

    # The D-Bus policy is well-formed and names the API.
    policy = ET.parse(t.path("/usr/share/dbus-1/system.d/io.cgprof.Agent1.conf")).getroot()
    assert policy.tag == "busconfig"
    assert any(e.get("own") == "io.cgprof.Agent1" for e in policy.iter("allow"))

    # Another prefix (the test build's own, /usr/local by default) moves the
    # binary and the config, and the unit and the agent's default follow.
    opts = build_options(BUILD)
    prefix = opts["prefix"]
    sysconfdir = os.path.join(prefix, opts["sysconfdir"])
    if prefix != "/usr":
        other = tempfile.mkdtemp(prefix="cgprof-prefix-")
        try:
            install(BUILD, other)
            _, config = check_unit_paths(other, prefix, sysconfdir)
            check_dropin(other, prefix, sysconfdir)
        finally:
            shutil.rmtree(other, ignore_errors=True)
    else:
        config = "/etc/cgprof/config.json"
    helptext = run([CGPROFD, "--help"]).stdout
    assert f"(default: {config})" in helptext, f"cgprofd's default config is not {config}:\n{helptext}"


def test_verify():
    t = need_tree()
    r = verify(t.root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "" and r.stderr.strip() == "", f"verify warned:\n{r.stdout}{r.stderr}"

    # The control: without the binary in the tree, verify fails. So it
    # checked ExecStart= in the installed tree, not somewhere else.
    bad = tempfile.mkdtemp(prefix="cgprof-verify-")
    try:
        shutil.copytree(t.root, os.path.join(bad, "root"), symlinks=True)
        os.unlink(os.path.join(bad, "root/usr/sbin/cgprofd"))
        r = on_host(os.path.join(bad, "root"), ["systemd-analyze", "verify", "--root={MERGED}", UNIT])
        assert r.returncode != 0 and "/usr/sbin/cgprofd" in r.stderr, (r.returncode, r.stderr)
    finally:
        shutil.rmtree(bad, ignore_errors=True)


@contextlib.contextmanager
def with_dropin(t, edit=None):
    """A copy of the installed tree with the example drop-in (passed through
    edit, if given) enabled in /etc/systemd/system/cgprofd.service.d/.
    Yields the copy's root."""
    tmp = tempfile.mkdtemp(prefix="cgprof-dropin-")
    try:
        root = os.path.join(tmp, "root")
        shutil.copytree(t.root, root, symlinks=True)
        with open(t.path(DROPIN_EXAMPLE)) as f:
            text = f.read()
        os.makedirs(os.path.join(root, DROPIN_DIR.lstrip("/")))
        with open(os.path.join(root, DROPIN_DIR.lstrip("/"), DROPIN), "w") as f:
            f.write(edit(text) if edit else text)
        yield root
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def verify(root):
    r = on_host(root, ["systemd-analyze", "verify", "--root={MERGED}", UNIT])
    log(f"systemd-analyze verify --root=... {UNIT}: exit {r.returncode}, output {r.stdout + r.stderr!r}")
    return r


def security(root):
    """`systemd-analyze security --offline=yes` of the unit under root:
    (exposure level, {setting: passed}, output)."""
    r = on_host(root, ["systemd-analyze", "security", "--offline=yes", "--root={MERGED}", "--no-pager", UNIT])
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"Overall exposure level for cgprofd\.service: (\d+\.\d)", r.stdout)
    assert m, f"no exposure level in:\n{r.stdout}"
    checks = {l[2:].split()[0]: l[0] == "✓" for l in r.stdout.splitlines() if l[:2] in ("✓ ", "✗ ")}
    return float(m.group(1)), checks, r.stdout


def test_security_score():
    t = need_tree()
    score, _, out = security(t.root)
    stated = documented_security_score()
    log("\n".join(l for l in out.splitlines() if l.startswith("✗")))
    log(f"exposure level {score} (docs/operations.md: {stated})")
    assert score <= stated, f"the unit's exposure level is {score}, worse than docs/operations.md's {stated}"
    with open(t.path("/usr/lib/systemd/system/" + UNIT)) as f:
        m = re.search(r"systemd-analyze security cgprofd\.service` scores it (\d+\.\d)", f.read())
    assert m and float(m.group(1)) == stated, f"the unit's comment says {m and m.group(1)}, docs/operations.md {stated}"
    if score < stated:
        log(f"NOTE: the unit now rates {score}, better than docs/operations.md's {stated}: update docs/operations.md")


def test_verify_dropin():
    t = need_tree()
    with with_dropin(t) as root:
        r = verify(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "" and r.stderr.strip() == "", f"verify warned:\n{r.stdout}{r.stderr}"

    # The control: without its empty ExecStart=, the drop-in adds a second
    # command to a Type=notify unit, which systemd refuses. So verify read
    # the drop-in from that directory.
    with with_dropin(t, lambda text: text.replace("\nExecStart=\n", "\n", 1)) as root:
        r = verify(root)
    assert r.returncode != 0 and "more than one ExecStart=" in r.stderr, (r.returncode, r.stderr)


def test_security_score_dropin():
    t = need_tree()
    base, base_checks, _ = security(t.root)
    with with_dropin(t) as root:
        score, checks, out = security(root)
    stated = documented_security_score(DROPIN)
    log("\n".join(l for l in out.splitlines() if l.startswith("✗")))
    log(f"with {DROPIN}: exposure level {score} (docs/operations.md: {stated}; without it {base})")
    # systemd-analyze read the drop-in: what it opens, and only that, is
    # now exposed.
    assert set(checks) == set(base_checks), set(checks) ^ set(base_checks)
    changed = {k: (base_checks[k], checks[k]) for k in checks if checks[k] != base_checks[k]}
    assert changed == {k: (True, False) for k in ("PrivateNetwork=", "IPAddressDeny=",
                                                  "RestrictAddressFamilies=~AF_(INET|INET6)")}, changed
    assert score <= stated, f"the exposure level with {DROPIN} is {score}, worse than docs/operations.md's {stated}"
    with open(t.path(DROPIN_EXAMPLE)) as f:
        m = re.search(r"With this drop-in, `systemd-analyze security cgprofd\.service` scores (\d+\.\d)", f.read())
    assert m and float(m.group(1)) == stated, f"the drop-in's comment says {m and m.group(1)}, docs/operations.md {stated}"
    if score < stated:
        log(f"NOTE: the unit with {DROPIN} now rates {score}, better than docs/operations.md's {stated}: update docs/operations.md")


def sysctls():
    out = {}
    for s in SYSCTLS:
        try:
            with open("/proc/sys/" + s.replace(".", "/")) as f:
                out[s] = f.read().strip()
        except OSError:
            pass
    return out


class DefaultConfigAgent(Agent):
    """cgprofd with the installed config, unmodified. Its reportDir is
    /var/lib/cgprof/reports, so it runs in a mount namespace with a tmpfs on
    /var/lib: nothing on the host is created."""

    def __init__(self, config_path):
        super().__init__({})
        self.installed_config = config_path

    def argv(self):
        a = [CGPROFD, "--config", self.installed_config, "--state-dir", self.state_dir, "--bus-socket", self.bus,
             "--no-kubernetes", "--log-level", "debug"]
        return ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o mode=0755 tmpfs /var/lib && exec "$@"', "sh", *a]


def test_default_config_profiles_nothing():
    t = need_tree()
    config = t.path("/etc/cgprof/config.json")
    with open(config) as f:
        c = json.load(f)
    assert c.get("targets") == [], c.get("targets")
    assert c.get("enableDefault") is False, c.get("enableDefault")
    assert c.get("machineConfig") == [], c.get("machineConfig")

    r = run([CGPROFD, "--check-config", "--config", config], check=False)
    assert r.returncode == 0 and r.stdout == f"{config}: ok\n", (r.returncode, r.stdout, r.stderr)
    # The control: --check-config does refuse a bad file, naming the key.
    with tempfile.NamedTemporaryFile("w", suffix=".json") as bad:
        json.dump(dict(c, profiles=[dict(c["profiles"][0], frequency=0)]), bad)
        bad.flush()
        r = run([CGPROFD, "--check-config", "--config", bad.name], check=False)
        assert r.returncode == 1 and "profiles[0].frequency" in r.stderr, (r.returncode, r.stderr)

    before = sysctls()
    cg = Cgroup(f"cgprof-test-default-{os.getpid()}")
    later = None
    agent = DefaultConfigAgent(config)
    busy = []
    try:
        busy.append(workload(cg, 30))
        agent.start()
        # A cgroup that appears while the agent runs is not profiled either.
        later = Cgroup(f"cgprof-test-default-later-{os.getpid()}")
        busy.append(workload(later, 30))
        # Long enough for the cgroup watch and a few drains.
        time.sleep(3)
        sessions = json.loads(agent.ctl("--json", "sessions").stdout)
        assert sessions == [], sessions
        assert agent.ctl("sessions").stdout == "No sessions.\n"
        status = agent.status()
        assert status["sessionsStarted"] == 0 and status["sessionsFailed"] == 0, status
        assert status["cgroupsWatched"] >= 2, status
        # The only target listed is enableDefault, switched off.
        targets = json.loads(agent.ctl("--json", "targets").stdout)
        assert [t for t in targets if not t["disabled"]] == [], targets
        assert sysctls() == before, "the default config changed a sysctl"

        # The control: the agent does see the cgroup, and profiles it when
        # asked to.
        agent.ctl("start", "--cgroup", cg.rel, "--duration", "10s")
        sessions = json.loads(agent.ctl("--json", "sessions").stdout)
        assert [s["cgroup"] for s in sessions] == [cg.rel], sessions
        agent.ctl("stop", "--all")
        assert agent.stop() == 0
    finally:
        for p in busy:
            p.kill()
            p.wait()
        agent.cleanup()
        cg.remove()
        if later:
            later.remove()


if __name__ == "__main__":
    try:
        main([test_install_layout, test_verify, test_security_score, test_verify_dropin, test_security_score_dropin,
              test_default_config_profiles_nothing])
    finally:
        if tree:
            tree.cleanup()
