# SPDX-License-Identifier: LGPL-2.1-or-later
"""Forked children doing Python work: the fixture of test_python.py's fork
case (a DataLoader's workers without torch).

py-fork.py [--seconds S] [--mode fork|mp] [--child-seconds C]: prints
"ready <pid>", then forks two children (os.fork(), or multiprocessing's
'fork' context with --mode mp) that each spin in child_work -> child_spin
for S seconds of wall time, while the parent spins in parent_work ->
parent_spin; waits for them and exits 0. With --child-seconds, the children
live C seconds each and are forked again in rounds for S seconds (a
DataLoader's workers, forked anew each epoch): most exit before the
profiler's next drain."""

import argparse
import multiprocessing
import os
import sys
import time


def child_spin(n):
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def child_work(end):
    acc = 0
    while time.monotonic() < end:
        acc ^= child_spin(200)
    return acc


def parent_spin(n):
    acc = 0
    for i in range(n):
        acc = (acc * 17 + i) & 0xFFFFFFFF
    return acc


def parent_work(end):
    acc = 0
    while time.monotonic() < end:
        acc ^= parent_spin(200)
    return acc


def mp_child(end):
    child_work(end)


def rounds(a, end):
    ctx = multiprocessing.get_context("fork")
    while time.monotonic() < end:
        child_end = time.monotonic() + a.child_seconds
        procs = [ctx.Process(target=mp_child, args=(child_end,)) for _ in range(a.children)]
        for p in procs:
            p.start()
        parent_work(child_end)
        for p in procs:
            p.join()
            if p.exitcode != 0:
                return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--mode", choices=("fork", "mp"), default="fork")
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--child-seconds", type=float, default=0)
    a = ap.parse_args()
    print(f"ready {os.getpid()}", flush=True)
    # Warm the code objects up in the parent first: the children inherit
    # them (and the parent's caches) at the fork, as a DataLoader's do.
    parent_work(time.monotonic() + 0.3)
    end = time.monotonic() + a.seconds
    if a.child_seconds:
        return rounds(a, end)
    if a.mode == "mp":
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=mp_child, args=(end,)) for _ in range(a.children)]
        for p in procs:
            p.start()
        parent_work(end)
        for p in procs:
            p.join()
        return 0 if all(p.exitcode == 0 for p in procs) else 1
    pids = []
    for _ in range(a.children):
        pid = os.fork()
        if pid == 0:
            child_work(end)
            os._exit(0)
        pids.append(pid)
    parent_work(end)
    ok = True
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        ok = ok and status == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
