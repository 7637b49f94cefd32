# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/overhead's Python workload: a fixed amount of pure-Python work,
ITERATIONS rounds of <module> -> main -> work_cycle -> hot_alpha/beta/gamma
(5:3:2), like tests/python/py-hot.py. Prints "elapsed E cpu C" (seconds)
like cgprof-bench-work.

py-work.py ITERATIONS"""

import sys
import time


def spin(n):
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def hot_alpha(units):
    acc = 0
    for _ in range(units):
        acc ^= spin(100)
    return acc


def hot_beta(units):
    acc = 0
    for _ in range(units):
        acc ^= spin(100)
    return acc


def hot_gamma(units):
    acc = 0
    for _ in range(units):
        acc ^= spin(100)
    return acc


def work_cycle():
    return hot_alpha(5) ^ hot_beta(3) ^ hot_gamma(2)


def main():
    n = int(sys.argv[-1])
    t0, c0 = time.monotonic(), time.process_time()
    acc = 0
    for _ in range(n):
        acc ^= work_cycle()
    print(f"elapsed {time.monotonic() - t0:.6f} cpu {time.process_time() - c0:.6f}", flush=True)
    return 0 if acc >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
