"""Telling a cluster's hooks: its program run with the event on stdin, its URL POSTed the same
JSON, each within the hook's timeout. A daemon's cluster has a queue and a thread of its own
(HookQueue), so a hook that hangs delays no pass and no other cluster; a scheduler pass hands
its events to a detached process (send_detached) and exits at once."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from checker_core.core.settings import HookSettings, Secret

# what a hook's program gets of the checker's environment: never a CHECKER_* key (a password
# may be there), never anything else the checker was started with
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_KEPT_STDERR = 400  # bytes of a failed program's stderr said with its failure
FULL = "the hook queue is full"


@dataclass(frozen=True, slots=True)
class Told:
    """How one event's hooks went."""

    event: str
    cluster: str
    failures: tuple[str, ...]  # each failed hook, in words; empty: every hook was told
    duration_ms: float
    dropped: str | None = None  # why no hook was told (the queue full, the daemon stopping)

    @property
    def ok(self) -> bool:
        return not self.failures and self.dropped is None

    def describe(self) -> str:
        if self.dropped is not None:
            return f"{self.event}: dropped, {self.dropped}"
        if self.failures:
            return f"{self.event}: " + "; ".join(self.failures)
        return f"{self.event}: told in {self.duration_ms:.0f} ms"


def hook_environment() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH") or _DEFAULT_PATH,
        "LANG": "C.UTF-8",
        "HOME": os.environ.get("HOME") or "/",
    }


def tell(hooks: HookSettings, document: Mapping[str, object], cluster: str) -> Told:
    """Every hook of the cluster told one event, one after the other, each within
    hooks.timeout_ms; a failure is a value, never raised."""
    started = time.monotonic()
    body = (json.dumps(document, sort_keys=False) + "\n").encode()
    failures: list[str] = []
    timeout_s = hooks.timeout_ms / 1000
    if hooks.command:
        failures.extend(_run(hooks.command, body, timeout_s))
    if hooks.url is not None:
        failures.extend(_post(hooks.url, body, timeout_s))
    took = (time.monotonic() - started) * 1000
    return Told(str(document.get("event", "")), cluster, tuple(failures), took)


def _run(argv: Sequence[str], body: bytes, timeout_s: float) -> list[str]:
    """The program in a session of its own (so the whole group it starts can be killed), the
    event on its stdin, nothing of ours in its argv or environment."""
    name = Path(argv[0]).name
    try:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=hook_environment(),
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )
    except OSError as exc:
        return [f"hook_command {name} could not start: {exc.strerror or exc}"]
    try:
        _, err = child.communicate(body, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        return [f"hook_command {name} still ran after {timeout_s * 1000:.0f} ms: killed"]
    if child.returncode != 0:
        tail = err[-_KEPT_STDERR:].decode(errors="replace").strip()
        how = (
            f"killed by signal {-child.returncode}"
            if child.returncode < 0
            else f"exited {child.returncode}"
        )
        return [f"hook_command {name} {how}" + (f": {tail}" if tail else "")]
    return []


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.communicate(timeout=1)


def _post(url: Secret, body: bytes, timeout_s: float) -> list[str]:
    """The JSON POSTed; a failure names the URL's host only (its path may hold a token). The
    whole POST is bounded: it runs on a thread the caller stops waiting for at the timeout."""
    # loaded only when a URL is told: a switchover command or a pass pays nothing for it
    import urllib.error
    import urllib.request

    host = urlsplit(url.reveal()).hostname or "?"
    outcome: list[str] = []

    def post() -> None:
        request = urllib.request.Request(  # noqa: S310 (http or https, checked when loaded)
            url.reveal(),
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "proxysql-checkers"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310
                answer.read(65536)
            outcome.append("")
        except urllib.error.HTTPError as exc:
            outcome.append(f"hook_url (host {host}) answered {exc.code} {exc.reason}")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            outcome.append(f"hook_url (host {host}) failed: {reason}")

    poster = threading.Thread(target=post, name="hook-post", daemon=True)
    poster.start()
    poster.join(timeout_s)
    if not outcome:
        return [f"hook_url (host {host}) did not answer within {timeout_s * 1000:.0f} ms"]
    return [outcome[0]] if outcome[0] else []


class HookQueue:
    """One cluster's hooks in a daemon: events wait in a bounded queue and one thread of the
    cluster's own tells them in order. `offer` never waits; a full queue drops the event,
    counts it and says it (through `said`, as every outcome is)."""

    def __init__(self, hooks: HookSettings, cluster: str, said: Callable[[Told], None]) -> None:
        self.hooks = hooks
        self.cluster = cluster
        self.said = said
        self.dropped = 0
        self._queue: queue.Queue[Mapping[str, object] | None] = queue.Queue(hooks.queue)
        self._closing = False
        self._thread = threading.Thread(target=self._work, name=f"hooks-{cluster}", daemon=True)
        self._thread.start()

    def offer(self, document: Mapping[str, object]) -> bool:
        if not self._closing:
            try:
                self._queue.put_nowait(document)
                return True
            except queue.Full:
                pass
        self.dropped += 1
        why = "the daemon stopped before it was told" if self._closing else FULL
        self.said(Told(str(document.get("event", "")), self.cluster, (), 0.0, dropped=why))
        return False

    def close(self, wait_s: float) -> int:
        """No more events; those waiting are told for up to `wait_s`. Returns how many were
        still waiting then (dropped, and said)."""
        self._closing = True
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=wait_s)
        self._thread.join(wait_s)
        left = 0
        while True:
            try:
                document = self._queue.get_nowait()
            except queue.Empty:
                break
            if document is not None:
                left += 1
                self.offer(document)  # closing: counted and said as dropped
        return left

    def waiting(self) -> int:
        return self._queue.qsize()

    def _work(self) -> None:
        while True:
            document = self._queue.get()
            if document is None:
                return
            try:
                told = tell(self.hooks, document, self.cluster)
            except Exception as exc:  # the net: a hook's failure never ends its thread
                told = Told(str(document.get("event", "")), self.cluster, (repr(exc),), 0.0)
            self.said(told)


# ------------------------------------------------------------------ a scheduler pass's events


def send_detached(
    hooks: HookSettings,
    documents: Sequence[Mapping[str, object]],
    slots: Callable[[int], Path],
    outcomes: Path,
) -> str | None:
    """A scheduler pass's events handed to a process of their own, which tells them after the
    pass has exited. At most hooks.queue such processes run for a cluster at once (each holds
    a slot file's lock until it ends); with none free the events are dropped: said in the
    return value (None: handed over). `slots(k)`: the k-th slot file; `outcomes`: the file
    the process appends what it did to, for the next pass to say."""
    held = _free_slot(slots, hooks.queue)
    if held is None:
        return (
            f"{len(documents)} event(s) dropped: {hooks.queue} hook process(es) still run "
            "(cluster.hook_queue)"
        )
    order = {
        "hooks": {
            "command": list(hooks.command),
            "url": hooks.url.reveal() if hooks.url else None,
            "timeout_ms": hooks.timeout_ms,
        },
        "outcomes": str(outcomes),
        "documents": list(documents),
    }
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "checker_core.edges.hook_process"],
            stdin=subprocess.PIPE,
            # nothing of the caller's: whoever reads the pass's output would wait for it
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=hook_environment(),
            start_new_session=True,  # ProxySQL's end of the scheduler's run does not end it
            pass_fds=(held,),
            close_fds=True,
            cwd="/",
        )
        assert child.stdin is not None
        # what the process is given, secrets included, goes on a pipe: never its argv
        child.stdin.write(json.dumps(order).encode())
        child.stdin.close()
    except OSError as exc:
        return f"{len(documents)} event(s) not told: the hook process could not start: {exc}"
    finally:
        os.close(held)  # the process holds the slot now
    return None


def _free_slot(slots: Callable[[int], Path], count: int) -> int | None:
    for k in range(count):
        path = slots(k)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        os.set_inheritable(fd, True)
        return fd
    return None
