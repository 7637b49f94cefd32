#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Seed corpus for fuzz-unwind-table: make-corpus.py LIST DIR ELF...

Writes into DIR each ELF file whole, and its .eh_frame / .debug_frame in the
fuzzer's raw form (b'E' or b'D', the section address as 8 bytes little
endian, the section's bytes); LIST gets the seeds' paths, comma-separated,
for libFuzzer's -seed_inputs=@LIST (which reads seeds without writing new
inputs into the build tree).

make-corpus.py --minidebuginfo LIST DIR ELF...: the same for
fuzz-minidebuginfo, each file whole and its .gnu_debugdata as it is.

make-corpus.py --gopclntab LIST DIR ELF...: the same for fuzz-gopclntab,
each Go binary whole, its .go.buildinfo, and its .gopclntab in the
fuzzer's raw form: the table's address, go:func.*'s address (from the
.symtab of an unstripped binary, 0 otherwise), .rodata's address (8 bytes
little endian each), the table's size (4 bytes), the table, .rodata.

make-corpus.py --elf LIST DIR ELF...: the same for fuzz-elf-symtab, each
file whole, cut before its section headers, and cut in half (truncated
files, as a binary being written or a corrupted disk leaves them).

Any mode also takes --corpus CORPUS (repeatable, before the other
arguments): the files of a checked-in corpus directory are added to LIST as
they are; make-corpus.py --corpus CORPUS LIST lists only those (DIR and ELF
files may be left out)."""
import os
import shutil
import struct
import sys


def sections(data):
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    headers = []
    for i in range(shnum):
        name, stype, flags, addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        headers.append((name, stype, addr, offset, size))
    strtab = headers[shstrndx]
    for name, stype, addr, offset, size in headers:
        end = data.index(b"\0", strtab[3] + name)
        yield data[strtab[3] + name:end].decode(), stype, addr, data[offset:offset + size]


def symbol(data, wanted):
    """The value of the first .symtab symbol named one of wanted, or 0."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for _, stype, _, _, offset, size, link, _, _, entsize in headers:
        if stype != 2 or not entsize:  # SHT_SYMTAB
            continue
        stroff = headers[link][4]
        for k in range(size // entsize):
            name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", data, offset + k * entsize)
            end = data.index(b"\0", stroff + name)
            if data[stroff + name:end].decode(errors="replace") in wanted:
                return value
    return 0


def gopclntab_seeds(outdir, base, data, seeds):
    found = {name: (addr, contents) for name, _, addr, contents in sections(data)}
    if ".gopclntab" not in found or ".rodata" not in found:
        return
    table_addr, table = found[".gopclntab"]
    rodata_addr, rodata = found[".rodata"]
    gofunc = symbol(data, ("go.func.*", "go:func.*"))
    seed = os.path.join(outdir, "raw-" + base + ".gopclntab")
    with open(seed, "wb") as f:
        f.write(struct.pack("<QQQI", table_addr, gofunc, rodata_addr, len(table)) + table + rodata)
    seeds.append(seed)
    if ".go.buildinfo" in found:
        seed = os.path.join(outdir, "raw-" + base + ".go.buildinfo")
        with open(seed, "wb") as f:
            f.write(found[".go.buildinfo"][1])
        seeds.append(seed)


def main():
    args = sys.argv[1:]
    seeds = []
    while args[:1] == ["--corpus"]:
        corpus = args[1]
        seeds += [os.path.join(corpus, n) for n in sorted(os.listdir(corpus))
                  if os.path.isfile(os.path.join(corpus, n))]
        args = args[2:]
    mini = args[:1] == ["--minidebuginfo"]
    go = args[:1] == ["--gopclntab"]
    elf = args[:1] == ["--elf"]
    if mini or go or elf:
        args = args[1:]
    listfile, outdir, inputs = args[0], args[1] if len(args) > 1 else None, args[2:]
    if outdir:
        shutil.rmtree(outdir, ignore_errors=True)
        os.makedirs(outdir)
    for path in inputs:
        base = os.path.basename(path)
        with open(path, "rb") as f:
            data = f.read()
        seed = os.path.join(outdir, "elf-" + base)
        shutil.copyfile(path, seed)
        seeds.append(seed)
        if go:
            gopclntab_seeds(outdir, base, data, seeds)
            continue
        if elf:
            cuts = [len(data) // 2]
            if data[:4] == b"\x7fELF" and data[4] == 2 and len(data) >= 0x40:
                cuts.append(struct.unpack_from("<Q", data, 0x28)[0])
            for cut in sorted(set(c for c in cuts if 0 < c < len(data))):
                seed = os.path.join(outdir, "cut%d-" % cut + base)
                with open(seed, "wb") as f:
                    f.write(data[:cut])
                seeds.append(seed)
            continue
        for name, stype, addr, contents in sections(data):
            if mini:
                if name == ".gnu_debugdata" and contents:
                    seed = os.path.join(outdir, "raw-" + base + name)
                    with open(seed, "wb") as f:
                        f.write(contents)
                    seeds.append(seed)
                continue
            if name not in (".eh_frame", ".debug_frame") or stype == 8 or not contents:  # 8: SHT_NOBITS
                continue
            seed = os.path.join(outdir, "raw-" + base + name)
            with open(seed, "wb") as f:
                f.write((b"D" if name == ".debug_frame" else b"E") + struct.pack("<Q", addr) + contents)
            seeds.append(seed)
    with open(listfile, "w") as f:
        f.write(",".join(os.path.abspath(s) for s in seeds))


if __name__ == "__main__":
    main()
