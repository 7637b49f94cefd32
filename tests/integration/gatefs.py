#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A disk that is slow on demand, for the tests: a FUSE file system
(Debian's python3-fusepy, on the kernel's FUSE) that passes everything
through to a backing directory, except that creating a file waits while a
gate file exists. While it waits, a marker file says so.

  gatefs.py BACKING MOUNTPOINT GATE BLOCKED

Runs in the foreground until unmounted (umount MOUNTPOINT). Run with
/usr/bin/python3 (the module comes with Debian's Python)."""

import errno
import os
import sys
import time

from fusepy import FUSE, FuseOSError, Operations

STAT_KEYS = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid")


class GateFS(Operations):
    def __init__(self, root, gate, blocked):
        self.root, self.gate, self.blocked = root, gate, blocked

    def _p(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def _wait_gate(self):
        if not os.path.exists(self.gate):
            return
        with open(self.blocked, "w"):
            pass
        while os.path.exists(self.gate):
            time.sleep(0.02)

    def __call__(self, op, *args):
        try:
            return super().__call__(op, *args)
        except OSError as e:
            raise FuseOSError(e.errno or errno.EIO)

    def access(self, path, mode):
        if not os.access(self._p(path), mode):
            raise FuseOSError(errno.EACCES)

    def chmod(self, path, mode):
        os.chmod(self._p(path), mode)

    def chown(self, path, uid, gid):
        os.lchown(self._p(path), uid, gid)

    def getattr(self, path, fh=None):
        st = os.lstat(self._p(path))
        return {k: getattr(st, k) for k in STAT_KEYS}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._p(path))

    def readlink(self, path):
        return os.readlink(self._p(path))

    def mkdir(self, path, mode):
        os.mkdir(self._p(path), mode)

    def rmdir(self, path):
        os.rmdir(self._p(path))

    def unlink(self, path):
        os.unlink(self._p(path))

    def symlink(self, target, source):
        os.symlink(source, self._p(target))

    def rename(self, old, new):
        os.rename(self._p(old), self._p(new))

    def link(self, target, source):
        os.link(self._p(source), self._p(target))

    def utimens(self, path, times=None):
        os.utime(self._p(path), times)

    def statfs(self, path):
        st = os.statvfs(self._p(path))
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                             "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def open(self, path, flags):
        return os.open(self._p(path), flags)

    def create(self, path, mode, fi=None):
        self._wait_gate()
        return os.open(self._p(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        with open(self._p(path), "r+") as f:
            f.truncate(length)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0

    def fsync(self, path, datasync, fh):
        os.fsync(fh)
        return 0

    def fsyncdir(self, path, datasync, fh):
        return 0

    def opendir(self, path):
        return 0

    def releasedir(self, path, fh):
        return 0


def main():
    backing, mountpoint, gate, blocked = sys.argv[1:5]
    FUSE(GateFS(os.path.abspath(backing), gate, blocked), mountpoint, foreground=True, nothreads=False,
         allow_other=True, default_permissions=True)


if __name__ == "__main__":
    main()
