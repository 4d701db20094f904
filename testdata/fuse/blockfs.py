#!/usr/bin/python3
"""A FUSE filesystem for tests: one file, blocked.so, whose reads never
return (a server that hangs). Usage: blockfs.py MOUNTPOINT; runs in the
foreground until killed. Needs Debian's python3-fusepy."""
import errno
import stat
import sys
import threading
import time

from fusepy import FUSE, FuseOSError, Operations

SIZE = 8192
T0 = time.time()


class Blocked(Operations):
    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2,
                        st_ctime=T0, st_mtime=T0, st_atime=T0)
        if path == "/blocked.so":
            return dict(st_mode=stat.S_IFREG | 0o755, st_nlink=1, st_size=SIZE,
                        st_ctime=T0, st_mtime=T0, st_atime=T0)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "blocked.so"]

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        threading.Event().wait()  # never answers


if __name__ == "__main__":
    FUSE(Blocked(), sys.argv[1], foreground=True, nothreads=False)
