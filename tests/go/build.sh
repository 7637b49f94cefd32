#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# build.sh GO SRCDIR OUTPUT WORKDIR [go build flags...]: builds the Go test
# workload in SRCDIR offline (no module downloads: it imports only the
# standard library), without cgo (with it when CGPROF_GO_CGO=1: the C
# compiler cgo finds), its build cache and GOPATH in WORKDIR (the build
# tree, never the source tree or $HOME).
set -eu
go=$1 src=$2 out=$3 work=$4
shift 4
case $out in /*) ;; *) out=$PWD/$out ;; esac
case $work in /*) ;; *) work=$PWD/$work ;; esac
mkdir -p "$work"
export GOCACHE="$work/cache" GOPATH="$work/path" GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local \
        GOWORK=off GOENV=off GO111MODULE=on CGO_ENABLED="${CGPROF_GO_CGO:-0}" HOME="$work"
cd "$src"
exec "$go" build -o "$out" "$@" .
