"""Processes the lab starts: own session (setsid), tracked by pid file, always stopped by the lab.

Every wait here is a poll with a deadline; nothing sleeps blindly.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


_STARTED: list[subprocess.Popen[bytes]] = []


class LabError(RuntimeError):
    """A lab operation did not reach the state it promised."""


def wait_until(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.2,
) -> T:
    """Poll `probe` until it returns something truthy, or raise LabError naming `what`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise LabError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on path (its folder made if need be): one process at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def spawn(
    argv: Sequence[str],
    log_path: Path,
    pid_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start argv in its own session with output appended to log_path; record and return its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )
    # pids come round again (pid_max is often 32768): an ending kept for an earlier child of
    # the same number is not this one's
    _ENDINGS.pop(proc.pid, None)
    # our child, uncollected, so /proc/pid/stat is there even if it has already ended
    start = start_ticks(proc.pid)
    pid_path.parent.mkdir(parents=True, exist_ok=True)
    pid_path.write_text(f"{proc.pid} {start}\n" if start is not None else f"{proc.pid}\n")
    # keep the handle: the process outlives this call, and dropping a live Popen warns
    _STARTED.append(proc)
    return proc.pid


# how each child of ours that _reap collected ended, as waitpid gave it: kept for the message
_ENDINGS: dict[int, int] = {}


def _reap(pid: int) -> None:
    """Collect a dead child of ours so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        reaped, status = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            _ENDINGS[pid] = status


def ended(pid: int) -> str | None:
    """How a child of ours ended ('exit code N', 'killed by SIGNAME') once it is collected.

    None while it runs, and while a killed process's last threads are still ending: its /proc
    state may say dead well before it can be collected.
    """
    _reap(pid)
    status = _ENDINGS.get(pid)
    if status is None:
        return None
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _stat_after_name(pid: int) -> list[str] | None:
    """The fields of /proc/pid/stat after the command name (the state first), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name is parenthesised and may itself hold spaces and parentheses
    return stat.rsplit(")", 1)[1].split()


def start_ticks(pid: int) -> int | None:
    """When pid started, in clock ticks since boot: with the pid, it names one process."""
    fields = _stat_after_name(pid)
    # field 22 of stat; the state, field 3, is the first after the name
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def pid_alive(pid: int) -> bool:
    """True while pid runs (a zombie counts as dead)."""
    _reap(pid)
    fields = _stat_after_name(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def pid_frozen(pid: int) -> bool:
    """True when pid is stopped by a signal (SIGSTOP)."""
    fields = _stat_after_name(pid)
    return fields is not None and fields[0] == "T"


def tracked_pid(pid_path: Path, marker: str | None = None) -> int | None:
    """The live pid recorded in pid_path, or None.

    spawn records the process's start time beside its pid: a recycled pid of some other
    program starts later, and is not ours to signal. A pid file without it (written by an
    older lab) falls back to `marker`, which the process's command line must contain. The
    start time is read from /proc/pid/stat alone; a command line is read from the process's
    memory, and reads empty while it ends.
    """
    try:
        words = pid_path.read_text().split()
        pid = int(words[0])
        recorded_start = int(words[1]) if len(words) > 1 else None
    except (OSError, ValueError, IndexError):
        return None
    if not pid_alive(pid):
        return None
    if recorded_start is not None:
        return pid if start_ticks(pid) == recorded_start else None
    if marker is not None:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            return None
        if marker not in cmdline:
            return None
    return pid


def send(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def stop(pid: int, timeout: float = 60.0, sig: signal.Signals = signal.SIGTERM) -> None:
    """Ask pid to exit (thawing it first); SIGKILL it if it has not gone by the deadline."""
    send(pid, signal.SIGCONT)
    send(pid, sig)
    try:
        wait_until(lambda: not pid_alive(pid), timeout, f"pid {pid} to exit")
    except LabError:
        send(pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(pid), 10.0, f"pid {pid} to die after SIGKILL")


def kill9(pid: int) -> None:
    send(pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(pid), 10.0, f"pid {pid} to die after SIGKILL")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_ports(host: str, count: int) -> list[int]:
    """`count` distinct TCP ports nothing listens on right now (all bound at once while chosen)."""
    import socket

    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports
