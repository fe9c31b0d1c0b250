"""One actor per cluster (rule S6): a flock the kernel drops when the process dies, so a pass
killed with -9 leaves no stale lock; and a deadline that ends a pass before max_runtime."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType


class PassTimeout(Exception):
    """The pass reached max_runtime_ms and was cut short; nothing was loaded after that."""


@contextlib.contextmanager
def cluster_lock(path: Path) -> Iterator[bool]:
    """Yield True holding the lock, or False at once when another process holds it."""
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


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise PassTimeout in this (main) thread when `seconds` run out."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise PassTimeout(f"pass cut short after {seconds * 1000:.0f} ms (run.max_runtime_ms)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
