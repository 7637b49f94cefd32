#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# make-minidebuginfo.sh IN OUT [VARIANT]
#
# Makes OUT from the unstripped binary IN the way Fedora's find-debuginfo
# (add_minidebug) does: the function symbols .dynsym lacks, kept in a debug
# file without debug sections, xz-compressed into a .gnu_debugdata section
# of IN stripped of its .symtab. VARIANT breaks the section, for the tests
# of the error paths: "truncated" (the first half of the .xz), "badmagic"
# (its first byte changed), "bomb" (200 MiB of zeros, far beyond the
# decompression bound).
set -eu

in=$1
out=$2
variant=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

objcopy --only-keep-debug "$in" "$tmp/debug"
# nm -D says "no symbols" (and exits 0 or 1) for a file without .dynsym.
{ nm -D "$in" --format=posix --defined-only 2>/dev/null || true; } | awk '{ print $1 }' | sort >"$tmp/dynsyms"
nm "$tmp/debug" --format=posix --defined-only |
        awk '{ if ($2 == "T" || $2 == "t" || $2 == "D") print $1 }' | sort >"$tmp/funcsyms"
comm -13 "$tmp/dynsyms" "$tmp/funcsyms" >"$tmp/keep_symbols"
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols="$tmp/keep_symbols" \
        "$tmp/debug" "$tmp/mini_debuginfo"
xz --threads=1 "$tmp/mini_debuginfo"
data=$tmp/mini_debuginfo.xz

case "$variant" in
"") ;;
truncated)
        size=$(stat -c %s "$data")
        head -c $((size / 2)) "$data" >"$tmp/broken.xz"
        data=$tmp/broken.xz
        ;;
badmagic)
        cp "$data" "$tmp/broken.xz"
        printf 'X' | dd of="$tmp/broken.xz" bs=1 count=1 conv=notrunc status=none
        data=$tmp/broken.xz
        ;;
bomb)
        head -c 200M /dev/zero | xz --threads=1 -0 >"$tmp/broken.xz"
        data=$tmp/broken.xz
        ;;
*)
        echo "unknown variant $variant" >&2
        exit 2
        ;;
esac

objcopy --strip-all "$in" "$tmp/stripped"
objcopy --add-section .gnu_debugdata="$data" "$tmp/stripped" "$out"

# What Fedora ships: .gnu_debugdata, no .symtab.
sections=$(readelf -SW "$out")
echo "$sections" | grep -q '\.gnu_debugdata' || {
        echo "$out has no .gnu_debugdata" >&2
        exit 1
}
if echo "$sections" | grep -q '\.symtab'; then
        echo "$out still has .symtab" >&2
        exit 1
fi
