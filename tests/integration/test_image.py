#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The container image's recipe, without a container engine (test_container.py
builds the image with podman and runs it): the Dockerfile's build stage is
scripts/image-build, which this test runs into a temporary DESTDIR; then

- the Dockerfile's structure: a debian:12 toolchain stage (the packages), a
  build stage on it that RUNs scripts/image-build /out, a debian:12-slim
  runtime stage that copies
  exactly /out/usr/sbin/cgprofd and /out/usr/bin/cgprofctl and installs
  libraries only (no compiler, no -dev package);
- every shared library ldd resolves for the two binaries belongs (dpkg -S)
  to a package the runtime stage installs, or one of their dependencies;
- the installed binaries run (--version), carry no RPATH into the build
  tree, know every option the DaemonSet passes, and accept the ConfigMap's
  config (--check-config);
- the build stage's package list covers every dependency() and
  find_program() of the meson build (their pkg-config files and programs
  belong to those packages or their dependencies, or to an Essential one),
  and every package named in the Dockerfile exists in this Debian 12's
  archive."""

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import cgproflib

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("CGPROF_SOURCE_DIR", os.path.join(HERE, "..", ".."))
BUILD_DIR = os.environ.get("CGPROF_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
DOCKERFILE = os.path.join(SOURCE_DIR, "Dockerfile")
SCRIPT = os.path.join(SOURCE_DIR, "scripts", "image-build")
SKIP = 77


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def skip(why):
    """cgproflib.skip(): the reason on stdout, for scripts/test's list of skips."""
    print("SKIP:", why, flush=True)
    log("SKIP:", why)
    sys.exit(SKIP)


def skip_prereq(why):
    """cgproflib.skip_prereq(): a prerequisite of scripts/deps is missing (a failure with CI=true)."""
    print("SKIP (prerequisite):", why, flush=True)
    log("SKIP (prerequisite):", why)
    sys.exit(SKIP)


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


# --------------------------------------------------------------------------
# the Dockerfile


def dockerfile_stages():
    """[(from_line_words, [instructions])] with continuation lines joined;
    the ARGs before the first FROM (the bases: scripts/image bootstraps
    their defaults) substituted in the FROM lines with their defaults."""
    with open(DOCKERFILE) as f:
        text = f.read()
    text = re.sub(r"\\\n", " ", text)
    stages, args = [], {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            stages.append(([re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], w) for w in rest.split()], []))
        elif word.upper() == "ARG" and not stages:
            name, _, default = rest.strip().partition("=")
            args[name] = default
        else:
            assert stages, f"instruction before FROM: {line}"
            stages[-1][1].append((word.upper(), rest.strip()))
    return stages


def apt_packages(instructions):
    """The packages of every `apt-get install` in a stage's RUN lines."""
    pkgs = []
    for word, rest in instructions:
        if word != "RUN":
            continue
        for cmd in re.split(r"&&|;", rest):
            t = shlex.split(cmd)
            if len(t) >= 2 and t[0] == "apt-get" and "install" in t:
                pkgs += [x for x in t[t.index("install") + 1:] if not x.startswith("-")]
    return pkgs


# --------------------------------------------------------------------------
# Debian packages


def owner(path):
    """The package that owns path (merged /usr: /lib/... is /usr/lib/...)."""
    cands = [path, os.path.realpath(path)]
    for p in list(cands):
        if p.startswith("/usr/"):
            cands.append(p[4:])
        else:
            cands.append("/usr" + p)
    for p in cands:
        r = run(["dpkg", "-S", p])
        if r.returncode == 0:
            # "pkg:arch: /path" (or "diversion by ..." lines first)
            for line in r.stdout.splitlines():
                if ": " in line and not line.startswith("diversion"):
                    return line.split(": ", 1)[0].split(":")[0].split(",")[0].strip()
    return None


def closure(pkgs):
    """pkgs and everything they depend on (Depends, Pre-Depends), per
    apt-cache; alternatives count as included."""
    r = run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
             "--no-breaks", "--no-replaces", "--no-enhances", *pkgs])
    assert r.returncode == 0, r.stderr
    out = set()
    for line in r.stdout.splitlines():
        if line and not line[0].isspace():
            out.add(line.strip().strip("<>").split(":")[0])
    return out


def essential(pkg):
    r = run(["dpkg-query", "-W", "-f=${Essential}", pkg])
    return r.returncode == 0 and r.stdout.strip() == "yes"


def meson_requirements():
    """(dependency names, program names) the meson build requires."""
    deps, progs = set(), set()
    for dirpath, dirnames, files in os.walk(SOURCE_DIR):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "build"))]
        if "meson.build" not in files:
            continue
        with open(os.path.join(dirpath, "meson.build")) as f:
            text = f.read()
        for m in re.finditer(r"\b(dependency|find_program)\(\s*'([^']+)'([^)]*)\)", text):
            if re.search(r"required\s*:\s*false", m.group(3)):
                continue
            (deps if m.group(1) == "dependency" else progs).add(m.group(2))
    return deps, progs


def test_image(failures):
    stages = dockerfile_stages()
    assert len(stages) == 3, f"{len(stages)} stages"
    (t_from, t_ins), (b_from, b_ins), (r_from, r_ins) = stages
    assert t_from[0] == "debian:12" and [w.upper() for w in t_from[1:]] == ["AS", "TOOLCHAIN"], t_from
    assert b_from[0] == "toolchain" and [w.upper() for w in b_from[1:]] == ["AS", "BUILD"], b_from
    assert not [w for w, rest in b_ins if w == "RUN" and "apt-get" in rest], "packages go in the toolchain stage"
    assert r_from == ["debian:12-slim"], r_from
    runs = [rest for w, rest in b_ins if w == "RUN"]
    image_build = [r for r in runs if r.startswith("scripts/image-build ")]
    assert len(image_build) == 1, f"the build stage must RUN scripts/image-build once: {runs}"
    ib = shlex.split(image_build[0])
    assert ib[1] == "/out", ib
    copies = sorted(rest for w, rest in r_ins if w == "COPY")
    assert copies == ["--from=build /out/usr/bin/cgprofctl /usr/bin/cgprofctl",
                      "--from=build /out/usr/sbin/cgprofd /usr/sbin/cgprofd"], copies
    assert ("ENTRYPOINT", '["/usr/sbin/cgprofd"]') in r_ins, r_ins
    build_pkgs, runtime_pkgs = apt_packages(t_ins), apt_packages(r_ins)
    assert build_pkgs and runtime_pkgs, (build_pkgs, runtime_pkgs)
    tools = ("gcc", "clang", "cc", "meson", "ninja-build", "make", "binutils", "pkg-config", "bpftool")
    bad = [p for p in runtime_pkgs if p.endswith("-dev") or p in tools or p.startswith(("gcc-", "clang-"))]
    assert not bad, f"the runtime stage installs build tools: {bad}"
    with open(os.path.join(SOURCE_DIR, ".dockerignore")) as f:
        ignored = f.read().split()
    assert ".git" in ignored and "build*/" in ignored, ignored

    # Every package named exists in this Debian 12's archive.
    for p in build_pkgs + runtime_pkgs:
        r = run(["apt-cache", "show", "--no-all-versions", p])
        if r.returncode != 0 or not r.stdout.strip():
            failures.append(f"package {p} is not in the archive")

    # The build stage: exactly what the Dockerfile runs, into a temporary
    # DESTDIR (the build directory is kept between runs, for speed).
    builddir = os.path.join(BUILD_DIR, "image-build")
    with tempfile.TemporaryDirectory(prefix="cgprof-image-") as dest:
        r = run([SCRIPT, dest, builddir], timeout=1200)
        if r.returncode != 0:
            raise AssertionError(f"scripts/image-build failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        bins = {"cgprofd": os.path.join(dest, "usr", "sbin", "cgprofd"),
                "cgprofctl": os.path.join(dest, "usr", "bin", "cgprofctl")}
        with open(os.path.join(SOURCE_DIR, "meson.build")) as f:
            version = re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)
        runtime = closure(runtime_pkgs)
        for name, path in bins.items():
            assert os.access(path, os.X_OK), f"{path} not installed"
            r = run([path, "--version"], timeout=30)
            assert r.returncode == 0 and r.stdout.strip() == f"{name} {version}", (r.returncode, r.stdout, r.stderr)
            d = run(["readelf", "-d", path]).stdout
            assert not re.search(r"\((RUN)?PATH\)", d), f"{name} has an RPATH/RUNPATH:\n{d}"
            ldd = run(["ldd", path])
            assert ldd.returncode == 0, ldd.stderr
            for line in ldd.stdout.splitlines():
                line = line.strip()
                if "not found" in line:
                    failures.append(f"{name}: {line}")
                    continue
                m = re.match(r"(\S+) => (/\S+)", line) or re.match(r"(/\S+) \(", line)
                if not m:
                    continue  # linux-vdso.so.1
                lib = m.group(2) if m.lastindex == 2 else m.group(1)
                pkg = owner(lib)
                if pkg is None:
                    failures.append(f"{name}: {lib} belongs to no package")
                elif pkg not in runtime:
                    failures.append(f"{name}: {lib} is in {pkg}, which the runtime stage does not install")
                else:
                    log(f"{name}: {lib} <- {pkg}")

        # The options the DaemonSet passes exist, and the ConfigMap's config is valid.
        help_text = run([bins["cgprofd"], "--help"]).stdout
        ds_args = daemonset_args()
        for a in ds_args:
            opt = a.split("=", 1)[0]
            if opt not in help_text:
                failures.append(f"cgprofd --help does not know {opt}, which the DaemonSet passes")
        cfg = os.path.join(dest, "config.json")
        with open(cfg, "w") as f:
            f.write(configmap_config())
        r = run([bins["cgprofd"], "--check-config", "--config", cfg])
        if r.returncode != 0:
            failures.append(f"the image's cgprofd refuses the ConfigMap's config: {r.stderr}")

    # The build stage's packages cover what meson needs.
    build = closure(build_pkgs)
    deps, progs = meson_requirements()
    for d in sorted(deps):
        r = run(["pkg-config", "--variable=pcfiledir", d])
        pc = os.path.join(r.stdout.strip(), d + ".pc") if r.returncode == 0 else None
        pkg = owner(pc) if pc else None
        if pkg is None:
            failures.append(f"meson dependency {d}: no .pc file owned by a package")
        elif pkg not in build and not essential(pkg):
            failures.append(f"meson dependency {d} comes from {pkg}, which the build stage does not install")
    for p in sorted(progs):
        cands = [f"/usr/bin/{p}", f"/usr/sbin/{p}", shutil.which(p) or ""]
        pkg = next((x for x in (owner(c) for c in cands if c and os.path.exists(c)) if x), None)
        if pkg is None:
            failures.append(f"meson program {p}: not found in a package here")
        elif pkg not in build and not essential(pkg):
            failures.append(f"meson program {p} comes from {pkg}, which the build stage does not install")
    for must in ("gcc", "libc6-dev"):
        if must not in build_pkgs:
            failures.append(f"the build stage does not install {must}")


def kustomized():
    import yaml
    r = run(["kubectl", "kustomize", os.path.join(SOURCE_DIR, "manifests")], timeout=60)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def daemonset_args():
    ds = next(o for o in kustomized() if o["kind"] == "DaemonSet")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["/usr/sbin/cgprofd"], c["command"]
    return c["args"]


def configmap_config():
    return next(o for o in kustomized() if o["kind"] == "ConfigMap")["data"]["config.json"]


def main():
    for tool in ("meson", "ninja", "dpkg", "dpkg-query", "apt-cache", "ldd", "readelf", "pkg-config"):
        if not shutil.which(tool):
            skip_prereq(f"{tool} not installed")
    if importlib.util.find_spec("yaml") is None:
        skip_prereq("python3-yaml not installed")
    cgproflib.require_kustomize()  # the DaemonSet's arguments and the ConfigMap's config
    try:
        with open("/etc/os-release") as f:
            osr = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError:
        osr = {}
    if osr.get("ID") != "debian" or osr.get("VERSION_ID", "").strip('"') != "12":
        skip("not Debian 12: the image's package names cannot be checked here")
    r = run(["apt-cache", "show", "--no-all-versions", "libbpf1"])
    if r.returncode != 0 or not r.stdout.strip():
        skip("no apt package lists (apt-get update)")
    failures = []
    log("=== test_image")
    try:
        test_image(failures)
    except AssertionError as e:
        failures.append(f"{e}")
    if failures:
        log("--- test_image: FAILED\n" + "\n".join(failures))
        sys.exit(1)
    log("--- test_image: ok")


if __name__ == "__main__":
    main()
