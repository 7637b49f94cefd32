#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Confused deputy (issue 14): an unprivileged user in its own user and
mount namespace puts a symlink at /usr/lib/debug/.build-id/xx/yyyy.debug
(its binary's build ID) to a debug file only root may read. The agent, as
root, could open it; it must not use it, or the report (which the user may
read) would name functions the user could not see. A debug file the user
can read, reached the same way, is used (the control case).

Skipped when unprivileged user namespaces are not available."""

import os
import shutil
import subprocess
import tempfile

from cgproflib import (Agent, Cgroup, folded, log, main, mapping_of, profile, require_root, run_in_cgroup, skip,
                       skip_prereq)

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
USERNS = ["unshare", "--user", "--map-root-user", "--mount"]
SECONDS = 3

SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) void secret_alpha(void) {
        for (int i = 0; i < 100000; i++)
                sink += (unsigned long) i * TAG;
}

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
        double end = now() + (argc > 1 ? atof(argv[1]) : 1);

        printf("ready\n");
        fflush(stdout);
        while (now() < end)
                secret_alpha();
        return 0;
}
"""

# Inside the namespaces, as "root" there (nobody outside): a private
# /usr/lib/debug with the symlink, then the binary.
PLANT = """set -e
mount -t tmpfs -o mode=0755 cgprof-deputy /usr/lib/debug
mkdir -p "/usr/lib/debug/.build-id/$1"
ln -s "$3" "/usr/lib/debug/.build-id/$1/$2.debug"
exec "$4" "$5"
"""


def require_userns():
    try:
        with open("/proc/sys/kernel/unprivileged_userns_clone") as f:
            if f.read().strip() == "0":
                skip("unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)")
    except FileNotFoundError:
        pass
    if not os.path.isdir("/usr/lib/debug"):
        skip("no /usr/lib/debug to mount over")
    for tool in ("setpriv", "unshare", "gcc", "objcopy", "strip", "readelf"):
        if not shutil.which(tool):
            skip_prereq(f"no {tool}")
    p = subprocess.run(NOBODY + USERNS + ["sh", "-c", "mount -t tmpfs none /usr/lib/debug"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        skip(f"an unprivileged user cannot mount in its own user namespace: {p.stderr.strip()}")


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    raise AssertionError(f"{path} has no build ID")


def build_fixture(tmp, name, tag, debug_mode, debug_dir=None):
    """A stripped binary (0755, for nobody to run) and its debug file (owned
    by root, mode debug_mode, in debug_dir if given)."""
    src = os.path.join(tmp, "deputy.c")
    if not os.path.exists(src):
        with open(src, "w") as f:
            f.write(SOURCE)
    binary = os.path.join(tmp, name)
    debug = os.path.join(tmp, name + ".debug")
    subprocess.run(["gcc", "-g", "-O1", "-fno-omit-frame-pointer", f"-DTAG={tag}", "-Wl,--build-id", "-o",
                    binary, src], check=True)
    subprocess.run(["objcopy", "--only-keep-debug", binary, debug], check=True)
    subprocess.run(["strip", binary], check=True)
    os.chmod(binary, 0o755)
    os.chmod(debug, debug_mode)
    if debug_dir:
        os.rename(debug, os.path.join(debug_dir, os.path.basename(debug)))
        debug = os.path.join(debug_dir, os.path.basename(debug))
    bid = build_id(binary)
    assert build_id(debug) == bid
    dynsyms = subprocess.run(["nm", "-D", "--defined-only", binary], capture_output=True, text=True).stdout
    assert "secret_alpha" not in dynsyms, dynsyms
    return binary, debug, bid


def run_as_nobody(cg, binary, debug, bid):
    p = run_in_cgroup(cg, NOBODY + USERNS + ["sh", "-c", PLANT, "sh", bid[:2], bid[2:], debug, binary,
                                             str(SECONDS)])
    line = p.stdout.readline().decode()
    assert line.startswith("ready"), f"{binary} did not start: {line!r}"
    return p


def test_deputy():
    require_root()
    require_userns()

    tmp = tempfile.mkdtemp(prefix="cgprof-deputy-")
    cg_secret = Cgroup(f"cgprof-test-deputy-secret-{os.getpid()}")
    cg_open = Cgroup(f"cgprof-test-deputy-open-{os.getpid()}")
    cg_hidden = Cgroup(f"cgprof-test-deputy-hidden-{os.getpid()}")
    agent = None
    try:
        os.chmod(tmp, 0o755)
        private = os.path.join(tmp, "private")
        os.mkdir(private, 0o700)
        # Three builds (three build IDs, three files): a debug file for
        # root only, one for everyone, and one for everyone in a directory
        # only root may search.
        secret_bin, secret_debug, secret_id = build_fixture(tmp, "secret", 3, 0o600)
        open_bin, open_debug, open_id = build_fixture(tmp, "open", 5, 0o644)
        hidden_bin, hidden_debug, hidden_id = build_fixture(tmp, "hidden", 9, 0o644, private)
        assert len({secret_id, open_id, hidden_id}) == 3
        # nobody cannot read the first nor the last itself.
        for debug in (secret_debug, hidden_debug):
            p = subprocess.run(NOBODY + ["cat", debug], capture_output=True)
            assert p.returncode != 0, debug

        agent = Agent({
            "profiles": [profile(name="deputy")],
            "targets": [
                {"name": "secret", "profileRef": "deputy", "cgroupPatterns": [cg_secret.rel]},
                {"name": "open", "profileRef": "deputy", "cgroupPatterns": [cg_open.rel]},
                {"name": "hidden", "profileRef": "deputy", "cgroupPatterns": [cg_hidden.rel]},
            ],
        })
        agent.start()
        ps = run_as_nobody(cg_secret, secret_bin, secret_debug, secret_id)
        po = run_as_nobody(cg_open, open_bin, open_debug, open_id)
        ph = run_as_nobody(cg_hidden, hidden_bin, hidden_debug, hidden_id)
        assert ps.wait(60) == 0 and po.wait(60) == 0 and ph.wait(60) == 0
        cg_secret.remove()
        cg_open.remove()
        cg_hidden.remove()

        for cg, binary, bid, what in ((cg_secret, secret_bin, secret_id, "root-only debug file"),
                                      (cg_hidden, hidden_bin, hidden_id, "debug file in a root-only directory")):
            r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
            m = mapping_of(r, binary)
            log(what + ", mapping:", m)
            assert m["symbols"] != "debug file", m
            frames = {f for st in folded(r) for f in st}
            assert not any("secret_alpha" in f for f in frames), sorted(frames)
            assert m["unsymbolizedShare"] > 0.5, m
            assert "Not using the process's debug file of build ID " + bid in agent.log()

        r = agent.wait_summary(lambda s: s["cgroup"] == cg_open.rel)
        m = mapping_of(r, open_bin)
        log("readable debug file, mapping:", m)
        assert m["symbols"] == "debug file", m
        leaves = [st[-1] for st in folded(r)]
        assert "secret_alpha" in leaves, leaves[:10]
    finally:
        if agent:
            agent.cleanup()
        cg_secret.remove()
        cg_open.remove()
        cg_hidden.remove()
        shutil.rmtree(tmp, ignore_errors=True)


def test_deputy_cache():
    """The agent keeps a binary's symbols per file: those root's process got
    from a root-only debug file (planted in its own mount namespace) are not
    handed to nobody's process running the same file."""
    require_root()
    require_userns()

    tmp = tempfile.mkdtemp(prefix="cgprof-deputy-")
    cg_root = Cgroup(f"cgprof-test-deputy-root-{os.getpid()}")
    cg_nobody = Cgroup(f"cgprof-test-deputy-nobody-{os.getpid()}")
    agent = None
    try:
        os.chmod(tmp, 0o755)
        binary, debug, bid = build_fixture(tmp, "shared", 7, 0o600)
        agent = Agent({
            "profiles": [profile(name="deputy")],
            "targets": [
                {"name": "root", "profileRef": "deputy", "cgroupPatterns": [cg_root.rel]},
                {"name": "nobody", "profileRef": "deputy", "cgroupPatterns": [cg_nobody.rel]},
            ],
        })
        agent.start()

        # Root, in a mount namespace of its own: its debug file is used.
        p = run_in_cgroup(cg_root, ["unshare", "--mount", "sh", "-c", PLANT, "sh", bid[:2], bid[2:], debug,
                                    binary, "1"])
        assert p.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0
        cg_root.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg_root.rel)
        m = mapping_of(r, binary)
        log("root's mapping:", m)
        assert m["symbols"] == "debug file", m

        # nobody, the same file, the host's mounts: not from the cache.
        p = run_in_cgroup(cg_nobody, NOBODY + [binary, "1"])
        assert p.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0
        cg_nobody.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg_nobody.rel)
        m = mapping_of(r, binary)
        log("nobody's mapping:", m)
        assert m["symbols"] != "debug file", m
        frames = {f for st in folded(r) for f in st}
        assert not any("secret_alpha" in f for f in frames), sorted(frames)
        assert "Not sharing the debug symbols of " + binary in agent.log()
    finally:
        if agent:
            agent.cleanup()
        cg_root.remove()
        cg_nobody.remove()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main([test_deputy, test_deputy_cache])
