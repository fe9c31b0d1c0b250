"""One actor per cluster (rule S6): a flock the kernel drops when the process dies, so a pass
killed with -9 leaves no stale lock; and a deadline that ends a pass before max_runtime, in
whichever thread the pass runs."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import heapq
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType


class PassTimeout(Exception):
    """The pass reached max_runtime_ms and was cut short; nothing was loaded after that."""


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


@contextlib.contextmanager
def deadline(seconds: float, budget_ms: int | None = None) -> Iterator[None]:
    """Raise PassTimeout in this thread when `seconds` run out. `budget_ms`: run.max_runtime_ms,
    of which the pass spent all but `seconds` before this: the message then says how long the
    pass really ran (a late alarm included), not how long this deadline was.

    The main thread (a scheduler pass of one cluster) is interrupted by SIGALRM, which also
    ends a blocking read at once. Any other thread (one cluster's pass among several) gets the
    exception at its next bytecode: a read already blocked ends first, at its own timeout."""
    entered = time.monotonic()
    before_s = max(0.0, budget_ms / 1000 - seconds) if budget_ms is not None else 0.0

    def timeout() -> PassTimeout:
        spent = (before_s + time.monotonic() - entered) * 1000
        limit = f" {budget_ms}" if budget_ms is not None else ""
        return PassTimeout(f"pass cut short after {spent:.0f} ms (run.max_runtime_ms{limit})")

    if threading.current_thread() is threading.main_thread():
        with _alarm(seconds, timeout):
            yield
    else:
        with _async_raise(seconds, timeout):
            yield


@contextlib.contextmanager
def _alarm(seconds: float, timeout: Callable[[], PassTimeout]) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise timeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Expired(PassTimeout):
    """What a timer thread sets pending in a pass's thread; the message is made when raised."""

    def __init__(self) -> None:
        super().__init__(_pending_message.get(threading.get_ident(), "pass cut short"))


_pending_message: dict[int, str] = {}


class _Alarms:
    """One thread that raises every pass's deadline in its thread: a thread (a Timer) started
    and ended per pass cost the daemon more CPU than many of its passes."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, _Alarm]] = []
        self._wake = threading.Condition()
        self._count = 0
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, fire: Callable[[], None]) -> _Alarm:
        alarm = _Alarm(fire)
        with self._wake:
            self._count += 1
            heapq.heappush(self._due, (time.monotonic() + seconds, self._count, alarm))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="deadlines", daemon=True)
                self._thread.start()
            self._wake.notify()
        return alarm

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._due and self._due[0][2].disarmed:
                    heapq.heappop(self._due)  # ended in time: dropped unseen
                if not self._due:
                    self._wake.wait()
                    continue
                left = self._due[0][0] - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                _, _, alarm = heapq.heappop(self._due)
            alarm.ring()


class _Alarm:
    __slots__ = ("_fire", "_guard", "disarmed", "fired")

    def __init__(self, fire: Callable[[], None]) -> None:
        self._fire = fire
        self._guard = threading.Lock()
        self.disarmed = False
        self.fired = False

    def ring(self) -> None:
        with self._guard:
            if self.disarmed:
                return
            self.fired = True
            self._fire()

    def disarm(self) -> bool:
        """No ring after this; whether it rang before."""
        with self._guard:
            self.disarmed = True
            return self.fired


_alarms = _Alarms()


@contextlib.contextmanager
def _async_raise(seconds: float, timeout: Callable[[], PassTimeout]) -> Iterator[None]:
    target = threading.get_ident()

    def expire() -> None:
        _pending_message[target] = str(timeout())
        _set_async_exc(target, _Expired)

    alarm = _alarms.arm(seconds, expire)
    try:
        yield
    finally:
        if alarm.disarm():
            # set but maybe not yet raised: it must not surface after the pass
            _set_async_exc(target, None)
        _pending_message.pop(target, None)


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )
