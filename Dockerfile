# SPDX-License-Identifier: LGPL-2.1-or-later
# cgprof's container image, for manifests/ (the DaemonSet runs
# /usr/sbin/cgprofd; its probes and kubectl cgprof run cgprofctl):
#
#   docker build -t cgprof:0.1.0 .
#
# Two stages on Debian 12. The build stage installs the toolchain and the
# -dev packages and runs scripts/image-build, which builds without the tests
# and benchmarks (-Dtests=false -Dbench=false) and meson-installs into
# /out. The runtime stage is debian:12-slim with the shared libraries of
# cgprofd and cgprofctl (from Debian's archive) and those two binaries:
# no compiler, no headers. tests/integration/test_image.py runs the same
# script and checks that every library the binaries load comes from a
# package this runtime stage installs.

FROM debian:12 AS build
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
WORKDIR /src
COPY . .
RUN scripts/image-build /out /tmp/build

FROM debian:12-slim
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
# cgprofd stays PID 1: SIGTERM reaches it, and it writes every session's
# report before it exits.
ENTRYPOINT ["/usr/sbin/cgprofd"]
