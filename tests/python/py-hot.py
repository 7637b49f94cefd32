# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python frames fixture: pure Python with three hot functions whose CPU
time is in a 5:3:2 ratio, under a fixed call chain
<module> -> main -> work_cycle -> hot_alpha/hot_beta/hot_gamma.

py-hot.py [--seconds S] [--threads] [--linger L]: runs for S seconds of CPU time
(--linger: then waits L seconds at exit, <module> ended and freed); prints
"ready <pid>" once started. py-hot.py --iterations N (bench/overhead's Python
rows): N work cycles, then "elapsed E cpu C" in seconds, as
cgprof-bench-work prints. --threads: three threads each running one hot
function (thread_alpha -> hot_alpha, ...), and a fourth hashing a large
buffer with hashlib (the GIL released in OpenSSL's C code) under
thread_hash -> hash_loop."""

import atexit
import hashlib
import os
import sys
import threading
import time


# A work cycle is 10 spins of SPIN iterations: ~50 us, short against the
# sampling period, so that the samples cannot lock in step with the cycles
# (at 1000 iterations a cycle of ~0.5 ms did on some interpreters: 62 % in
# hot_alpha instead of 50).
SPIN = 100


def spin(n):
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def hot_alpha(units):
    acc = 0
    for _ in range(units):
        acc ^= spin(SPIN)
    return acc


def hot_beta(units):
    acc = 0
    for _ in range(units):
        acc ^= spin(SPIN)
    return acc


def hot_gamma(units):
    acc = 0
    for _ in range(units):
        acc ^= spin(SPIN)
    return acc


def work_cycle():
    return hot_alpha(5) ^ hot_beta(3) ^ hot_gamma(2)


def thread_alpha(end):
    while time.monotonic() < end:
        hot_alpha(5)


def thread_beta(end):
    while time.monotonic() < end:
        hot_beta(5)


def thread_gamma(end):
    while time.monotonic() < end:
        hot_gamma(5)


def hash_loop(end, data):
    while time.monotonic() < end:
        hashlib.sha256(data).digest()


def thread_hash(end):
    hash_loop(end, b"\x5a" * (64 << 20))


def linger(seconds):
    """At exit, once <module> has ended and its code object is freed: fills
    the freed memory with other objects, then waits, so that the agent
    drains the last samples while the process still exists."""
    with open(__file__) as f:
        # A code object like <module>'s, for its size: buffers of that size
        # take the freed blocks of its size class first.
        size = sys.getsizeof(compile(f.read(), __file__, "exec"))
    junk = [bytearray(size - 1) for _ in range(4096)] + [bytearray(n) for _ in range(64) for n in range(8, 520, 8)]
    time.sleep(seconds)
    return len(junk)


def main():
    seconds, threads, iterations = 5.0, False, None
    args = sys.argv[1:]
    while args:
        if args[0] == "--seconds" and len(args) > 1:
            seconds = float(args[1])
            args = args[2:]
        elif args[0] == "--iterations" and len(args) > 1:
            iterations = int(args[1])
            args = args[2:]
        elif args[0] == "--threads":
            threads = True
            args = args[1:]
        elif args[0] == "--linger" and len(args) > 1:
            atexit.register(linger, float(args[1]))
            args = args[2:]
        else:
            print(f"usage: {sys.argv[0]} [--seconds S] [--threads] [--linger L] | --iterations N", file=sys.stderr)
            sys.exit(2)
    if iterations is not None:
        t0, c0 = time.monotonic(), time.process_time()
        acc = 0
        for _ in range(iterations):
            acc ^= work_cycle()
        print(f"elapsed {time.monotonic() - t0:.6f} cpu {time.process_time() - c0:.6f}", flush=True)
        return 0 if acc >= 0 else 1
    print(f"ready {os.getpid()}", flush=True)
    if threads:
        end = time.monotonic() + seconds
        ts = [threading.Thread(target=f, args=(end,), name=f.__name__)
              for f in (thread_alpha, thread_beta, thread_gamma, thread_hash)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return 0
    # S seconds of CPU time, not wall time: a busy machine does not thin the
    # samples.
    end = time.process_time() + seconds
    acc = 0
    while time.process_time() < end:
        for _ in range(20):  # the clock read every ~1 ms, not every cycle
            acc ^= work_cycle()
    return 0 if acc >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
