# SPDX-License-Identifier: LGPL-2.1-or-later
"""The interpreter unwinding fixture: pure Python, run by Debian's own
/usr/bin/python3.11 (built without frame pointers). Recurses 50 Python
frames deep, then loops; the native stack under it is the interpreter's
(main -> Py_BytesMain -> Py_RunMain -> ... -> _PyEval_EvalFrameDefault).

py-workload.py [--seconds S]: runs for S seconds of CPU time; prints
"ready <pid>" once started."""

import os
import sys
import time


def spin(n):
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def recurse(depth, n):
    if depth == 0:
        return spin(n)
    return recurse(depth - 1, n) ^ depth


def main():
    seconds = 5.0
    args = sys.argv[1:]
    while args:
        if args[0] == "--seconds" and len(args) > 1:
            seconds = float(args[1])
            args = args[2:]
        else:
            print(f"usage: {sys.argv[0]} [--seconds S]", file=sys.stderr)
            sys.exit(2)
    print(f"ready {os.getpid()}", flush=True)
    # S seconds of CPU time, not wall time: a busy machine does not thin the
    # samples.
    end = time.process_time() + seconds
    acc = 0
    while time.process_time() < end:
        acc ^= recurse(50, 2000)
    return 0 if acc >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
