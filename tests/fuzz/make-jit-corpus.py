#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Seed corpora for fuzz-perf-map and fuzz-jitdump:
make-jit-corpus.py perf-map|jitdump LIST DIR

Writes seeds into DIR (each prefixed with the byte the fuzzer takes as its
chunk step) and their paths, comma-separated, into LIST for libFuzzer's
-seed_inputs=@LIST: perf maps as node, the JVM and CPython write them, with
malformed lines; jitdump files in both byte orders with every record type."""
import os
import shutil
import struct
import sys


def perf_maps():
    node = "".join(f"{0x3a2b00000000 + i * 0x140:x} {0x100 + i:x} JS:*fn{i} /srv/app/m{i % 3}.js:{i}:{i % 7}\n"
                   for i in range(40))
    java = "".join(f"0x{0x7f7b14ed0000 + i * 0x300:016x} 0x{0xd8 + i:016x} long Hot.m{i}(long)\n"
                   for i in range(30))
    python = "".join(f"{0x7f0a1c2b3000 + i * 0x10:x} b py::f{i}:/app/w.py\n" for i in range(20))
    overlaps = "1000 100 a\n1040 20 b\n1000 100 c\n0800 2000 d\n1010 8 e\n"
    bad = ("garbage\n\n10\n10 20\n10 0 zero\nffffffffffffffff 2 over\n0x 1 x\n10 20 crlf\r\n"
           " 10 20 lead\n10\t20\ttab name\n" + "1 1 " + "x" * 5000 + "\n20 1 after long\npartial 1")
    return [node, java, python, overlaps, bad, node + overlaps + "7f0000 10 tail"]


def jitdump(swap):
    e = ">" if swap else "<"
    out = struct.pack(e + "IIIIIIQQ", 0x4A695444, 1, 40, 62, 0, 1, 0, 0)

    def load(addr, size, name, code=16):
        n = name.encode() + b"\0"
        return struct.pack(e + "IIQIIQQQQ", 0, 16 + 40 + len(n) + code, 1, 1, 1, addr, addr, size, 1) + n + \
            b"\xcc" * code

    def move(old, new, size):
        return struct.pack(e + "IIQIIQQQQQ", 1, 64, 2, 1, 1, new, old, new, size, 1)

    def debug(addr):
        entries = struct.pack(e + "QII", addr, 10, 0) + b"App.java\0" + struct.pack(e + "QII", addr + 4, 11, 0) + \
            b"\xff\0"
        return struct.pack(e + "IIQQQ", 2, 16 + 16 + len(entries), 3, addr, 2) + entries

    out += debug(0x7f0000001000)
    out += load(0x7f0000001000, 0x80, "Hot.hotAlpha(J)J")
    out += load(0x7f0000002000, 0x40, "Hot.hotBeta(J)J", 64)
    out += struct.pack(e + "IIQQQQ", 4, 16 + 24 + 8, 4, 8, 0, 8) + b"\0" * 8
    out += move(0x7f0000002000, 0x7f0000003000, 0x40)
    out += load(0x7f0000001020, 0x10, "recompiled", 0)
    out += struct.pack(e + "IIQ", 3, 16, 5)
    out += load(0x7f0000005000, 0x10, "after close")
    return out


def main():
    kind, listfile, outdir = sys.argv[1:4]
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    seeds = []
    if kind == "perf-map":
        inputs = [m.encode() for m in perf_maps()]
    else:
        inputs = [jitdump(False), jitdump(True), jitdump(False)[:200]]
    for i, data in enumerate(inputs):
        for step in (0, 7, 200):
            path = os.path.join(outdir, f"{kind}-{i}-{step}")
            with open(path, "wb") as f:
                f.write(bytes([step]) + data)
            seeds.append(path)
    with open(listfile, "w") as f:
        f.write(",".join(seeds))


if __name__ == "__main__":
    main()
