"""One actor per cluster (rule S6): a flock the kernel drops when the process dies, so a pass
killed with -9 leaves no stale lock. (The pass's deadline is edges/deadline.py's.)"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def cluster_lock(path: Path) -> Iterator[bool]:
    """Yield True holding the lock, or False at once when another process holds it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    except FileNotFoundError:
        # its directory made only when missing: the daemon takes the lock every pass
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        holder = f"{os.getpid()}\n".encode()
        # the daemon takes the lock every pass: rewrite the holder's pid only when it changed
        if os.pread(fd, 32, 0) != holder:
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder, 0)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
