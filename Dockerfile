# SPDX-License-Identifier: LGPL-2.1-or-later
# cgprof's container image, for manifests/ (the DaemonSet runs
# /usr/sbin/cgprofd; its probes and kubectl cgprof run cgprofctl):
#
#   docker build -t cgprof:0.1.0 .
#   scripts/image        (podman; no registry needed, see below)
#
# Stages on Debian 12. The toolchain stage installs the compilers and the
# -dev packages; the build stage runs scripts/image-build, which builds without the tests
# and benchmarks (-Dtests=false -Dbench=false) and meson-installs into
# /out. The runtime stage is debian:12-slim with the shared libraries of
# cgprofd and cgprofctl (from Debian's archive) and those two binaries:
# no compiler, no headers, no shell. tests/integration/test_image.py runs the
# same script and checks that every library the binaries load comes from a
# package this runtime stage installs; tests/integration/test_container.py
# builds the image with scripts/image and runs it as the DaemonSet does.
#
# Without a registry: scripts/image bootstraps the two Debian bases from
# Debian's archive (mmdebstrap), tags them with these names and builds this
# file with podman. BUILD_BASE and RUNTIME_BASE name other bases (a mirror
# of the public images): --build-arg RUNTIME_BASE=registry.example/debian:12-slim.
ARG BUILD_BASE=debian:12
ARG RUNTIME_BASE=debian:12-slim

# The toolchain: a stage of its own, which scripts/image tags, so that it
# outlives the source-dependent layers it removes and the next build reuses it.
FROM ${BUILD_BASE} AS toolchain
# libdebuginfod-dev: elfutils' debuginfod client, for debuginfodUrls.
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        meson ninja-build pkg-config gcc libc6-dev binutils python3 \
        clang bpftool \
        libsystemd-dev libbpf-dev libcjson-dev libcurl4-openssl-dev libproc2-dev \
        libelf-dev zlib1g-dev libprotobuf-c-dev protobuf-c-compiler libyaml-dev libmicrohttpd-dev \
        libiberty-dev liblzma-dev libdebuginfod-dev \
    && rm -rf /var/lib/apt/lists/*

FROM toolchain AS build
WORKDIR /src
COPY . .
RUN scripts/image-build /out /tmp/build

FROM ${RUNTIME_BASE}
# The libraries cgprofd and cgprofctl link (and what they pull in). tar and
# coreutils, which kubectl cgprof download runs in the container, are in
# the base image already. libdebuginfod1 is the debuginfod client
# (debuginfodUrls); it brings libcurl3-gnutls, which it links.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libsystemd0 libbpf1 libcjson1 libcurl4 libproc2-0 libelf1 \
        libprotobuf-c1 zlib1g libyaml-0-2 liblzma5 libdebuginfod1 libmicrohttpd12 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/usr/sbin/cgprofd /usr/sbin/cgprofd
COPY --from=build /out/usr/bin/cgprofctl /usr/bin/cgprofctl
# No shell: nothing run in the container needs one. The probes exec
# cgprofctl, kubectl cgprof execs cgprofctl, test, tar and rm, each directly.
# Debian's Essential shells go last, in exec form (no RUN line can follow);
# the package database still lists them, so build on debian:12-slim, not on
# this image. A shell for debugging: kubectl debug --target=cgprofd.
RUN ["/usr/bin/rm", "-f", "/usr/bin/sh", "/usr/bin/dash", "/usr/bin/bash", "/usr/bin/rbash"]
# root, as the DaemonSet runs it (runAsUser: 0, with only the capabilities
# it adds back): the control socket and the host directories are root's.
USER 0:0
# cgprofd stays PID 1: SIGTERM reaches it, and it writes every session's
# report before it exits.
ENTRYPOINT ["/usr/sbin/cgprofd"]
