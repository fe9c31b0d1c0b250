"""One actor per cluster (rule S6): a flock the kernel drops when the process dies, so a pass
killed with -9 leaves no stale lock. (The pass's deadline is edges/deadline.py's.)"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

# how often a wait for a lock asks again: a pass holds it well under a second in the steady case
WAIT_STEP_S = 0.02


@contextlib.contextmanager
def cluster_lock(path: Path) -> Iterator[bool]:
    """Yield True holding the lock, or False at once when another process holds it."""
    fd = _open(path)
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


@contextlib.contextmanager
def write_lock(
    path: Path,
    timeout_s: float,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[bool]:
    """One ProxySQL's write lock, shared by every checker process whose state dir holds it
    (galera-checker's, gr-checker's, a command's): held from a plan's first staging write to
    its write-back after the LOAD. ProxySQL's admin has no transactions and a LOAD carries the
    whole table, so without it one process's LOAD can fall between another's setting an
    operator's staged edit aside and its writing the edit back, and make the edit live.
    Waited for `timeout_s` at most; yields False when another process still holds it."""
    fd = _open(path)
    try:
        end = monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if monotonic() >= end:
                    yield False
                    return
                sleep(min(WAIT_STEP_S, max(0.0, end - monotonic())))
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def wait_free(
    path: Path,
    timeout_s: float,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Wait until nobody holds the lock at `path` (taking it for a moment, then letting it go,
    the file left as it was): None once it was free, else the pid its holder wrote, or "" when
    it wrote none. A missing lock file is a free lock (no pass ever ran here)."""
    end = monotonic() + timeout_s
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        while True:
            try:
                # asked, not held: the holder's pid in the file stays the last pass's
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
                return None
            if monotonic() >= end:
                return _holder(path)
            sleep(min(WAIT_STEP_S, max(0.0, end - monotonic())))
    finally:
        os.close(fd)


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    except FileNotFoundError:
        # its directory made only when missing: the daemon takes a lock every pass
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o640)


def _holder(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
