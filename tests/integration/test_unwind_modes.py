#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The unwind modes as a user reads them in summary.json, and bad unwind
data from a profiled binary:
  - unwind: auto on a binary without frame pointers walks with tables
    (walks.tables), the stacks are whole, the mapping says where its table
    came from, and nothing is lost to stack storage (collisions, lost);
  - unwind: frame-pointer walks by frame pointer only: the same binary's
    stacks are flat, and likelyNoFramePointers says why;
  - a binary whose .eh_frame is garbage (the test corrupts a copy) is
    walked by frame pointer (it has them) with unwind: auto, its mapping
    says the table was unusable, and the agent carries on; with unwind:
    dwarf its stacks end there (tableWalkEnds.noTable)."""

import os
import shutil
import struct
import tempfile

from cgproflib import Agent, Cgroup, elf_section, folded, log, main, mapping_of, profile, run_in_cgroup

BUILD = os.environ.get("CGPROF_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
NOFP = os.environ.get("CGPROF_UNWIND_NOFP", os.path.join(BUILD, "tests", "cgprof-unwind-nofp"))
FP = os.environ.get("CGPROF_UNWIND_FP", os.path.join(BUILD, "tests", "cgprof-unwind-fp"))
CHAIN = ["main", "run_all", "stage_outer"] + ["descend"] * 7 + ["stage_inner"]
LEAVES = {"hot_alpha", "hot_beta", "hot_gamma"}


def run(tag, exe, unwind, seconds=2, config=None, status=None):
    cg = Cgroup(f"cgprof-test-unwind-modes-{tag}-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="p", unwind=unwind)],
        "targets": [{"name": "t", "profileRef": "p", "cgroupPatterns": [cg.rel]}],
        **(config or {}),
    })
    try:
        agent.start()
        p = run_in_cgroup(cg, [exe, "--seconds", str(seconds)])
        assert p.stdout.readline().decode().startswith("ready")
        assert p.wait(60) == 0
        cg.remove()
        r = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        stacks = folded(r)
        if status is not None:
            status.update(agent.status())
        # Still alive and well after whatever the binary held.
        assert agent.proc.poll() is None, agent.log()[-3000:]
        assert agent.stop() == 0
        return r, stacks
    finally:
        agent.cleanup()
        cg.remove()


def chain_share(stacks):
    """% of the leaf samples whose stack holds the whole chain in order."""
    leaf = {k: v for k, v in stacks.items() if k[-1] in LEAVES}
    total = sum(leaf.values())
    assert total > 500, f"only {total} samples in the leaves: {sorted(stacks.items(), key=lambda x: -x[1])[:5]}"
    n = len(CHAIN)
    whole = sum(v for k, v in leaf.items() if list(k[-1 - n:-1]) == CHAIN)
    return 100.0 * whole / total


def test_auto_walks_with_tables():
    r, stacks = run("auto", NOFP, "auto")
    u = r["unwind"]
    log("auto:", u, "chain", f"{chain_share(stacks):.1f}%")
    total = r["samples"]["total"]
    assert u["mode"] == "auto"
    assert u["walks"]["tables"] >= 0.95 * total, u
    assert u["walks"]["framePointer"] == 0, u
    assert u["tableWalkEnds"]["complete"] >= 0.95 * u["walks"]["tables"], u
    assert chain_share(stacks) >= 95.0
    m = mapping_of(r, NOFP)
    log("mapping:", m)
    assert m["unwind"]["table"] == ".eh_frame", m
    # Frame-pointer frames only from the walks made while its tables were
    # loading (pending).
    assert m["unwind"]["tableFrames"] > 0, m
    assert m["unwind"]["framePointerFrames"] <= 0.01 * m["unwind"]["tableFrames"], m
    assert m["likelyNoFramePointers"] is True, m
    # No sample lost to stack storage.
    assert r["collisions"] == 0 and r["samples"]["lost"] == 0, (r["collisions"], r["samples"])


def test_frame_pointer_mode_is_flat():
    r, stacks = run("fp", NOFP, "frame-pointer")
    u = r["unwind"]
    log("frame-pointer:", u, "chain", f"{chain_share(stacks):.1f}%")
    assert u["mode"] == "frame-pointer"
    # Every user stack (a sample in the middle of exec() has none).
    assert u["walks"]["tables"] == 0 and u["walks"]["framePointer"] >= 0.99 * r["samples"]["total"], u
    assert chain_share(stacks) < 5.0
    assert mapping_of(r, NOFP)["likelyNoFramePointers"] is True


def corrupt_copy(tmp, how):
    dst = os.path.join(tmp, f"cgprof-unwind-bad-{how}")
    shutil.copy(FP, dst)
    off, size = elf_section(dst, ".eh_frame")
    with open(dst, "r+b") as f:
        if how == "garbage":
            # Every length 0xffffffff: a 64-bit length running past the section.
            f.seek(off)
            f.write(b"\xff" * size)
        else:
            # The CIE stays; the FDEs' CIE pointers and ranges are noise.
            f.seek(off + 32)
            f.write(bytes((i * 37 + 11) & 0xFF for i in range(size - 40)))
    return dst


def test_corrupt_eh_frame():
    tmp = tempfile.mkdtemp(prefix="cgprof-unwind-bad-")
    try:
        for how in ("garbage", "fdes"):
            exe = corrupt_copy(tmp, how)
            r, stacks = run(f"bad-{how}", exe, "auto")
            m = mapping_of(r, exe)
            log(f"{how}: mapping", m["unwind"], "walks", r["unwind"]["walks"],
                f"chain {chain_share(stacks):.1f}%")
            table = m["unwind"]["table"]
            assert table.startswith("error: ") or "bad entries" in table, m
            # It has frame pointers: walked by them, stacks stay whole.
            assert m["unwind"]["framePointerFrames"] > 0, m
            assert chain_share(stacks) >= 90.0

        # Tables only: its frames end the walk, counted.
        r, stacks = run("bad-dwarf", corrupt_copy(tmp, "garbage"), "dwarf")
        log("dwarf on garbage:", r["unwind"])
        assert r["unwind"]["tableWalkEnds"]["noTable"] > 0.9 * r["samples"]["total"], r["unwind"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_rows_bound():
    """unwindTableRows bounds the tables: one that does not fit is counted,
    named in its mapping, and walked by frame pointer; the rest works."""
    st = {}
    r, stacks = run("rows", NOFP, "auto", config={"unwindTableRows": 4096}, status=st)
    u = st["unwindTables"]
    log("status:", u)
    assert u["rowsMax"] == 4096 and 0 < u["rowsUsed"] <= 4096, u
    assert u["tablesNotFitted"] >= 1, u  # libc's table has ~28k rows
    libc = [m for m in r["mappings"] if os.path.basename(m["file"]).startswith("libc.so")]
    assert libc and libc[0]["unwind"]["table"].startswith("not loaded: "), libc
    assert mapping_of(r, NOFP)["unwind"]["table"] == ".eh_frame"
    assert chain_share(stacks) >= 95.0


if __name__ == "__main__":
    main([test_auto_walks_with_tables, test_frame_pointer_mode_is_flat, test_corrupt_eh_frame, test_rows_bound])
