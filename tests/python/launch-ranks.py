# SPDX-License-Identifier: LGPL-2.1-or-later
"""Starts the ranks of a distributed job the way torchrun does (Debian's
torchrun 1.13 fails on Python 3.11 before it starts any worker): one
process per rank, each with RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK,
ROLE_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
TORCHELASTIC_RUN_ID in its environment, the launcher's own environment
passed on.

launch-ranks.py --nproc N [--run-id ID] [--cgroup-procs FILE]... --
PROGRAM ARGS...: prints "ready <pid>", starts the ranks, waits for all of
them and exits with the first non-zero exit status (0 when every rank
succeeded). With --cgroup-procs (once per rank: a cgroup's cgroup.procs),
rank N starts in the Nth cgroup, as the ranks of one job run in pods of
their own (a small shell moves itself there and execs the rank)."""

import argparse
import os
import socket
import subprocess
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--run-id", default="cgprof-test")
    ap.add_argument("--cgroup-procs", action="append", default=[])
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    port = free_port()
    print(f"ready {os.getpid()}", flush=True)
    procs = []
    for rank in range(a.nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(a.nproc),
                   LOCAL_WORLD_SIZE=str(a.nproc), GROUP_RANK="0", ROLE_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCHELASTIC_RUN_ID=a.run_id)
        rank_argv = argv
        if a.cgroup_procs:
            rank_argv = ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', a.cgroup_procs[rank]] + argv
        procs.append(subprocess.Popen(rank_argv, env=env))
    codes = [p.wait() for p in procs]
    print(f"exit codes {codes}", file=sys.stderr, flush=True)
    return next((c for c in codes if c != 0), 0)


if __name__ == "__main__":
    sys.exit(main())
