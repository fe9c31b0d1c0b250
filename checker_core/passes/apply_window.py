"""When a pass's apply may begin: the gates it passes (this process's and the other
processes') and the time its statements need. An apply, once begun, runs to its LOAD
(AdminClient.apply), so both are settled before its first statement."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from checker_core.edges.lock import write_lock
from checker_core.passes import gate

if TYPE_CHECKING:
    from checker_core.edges.deadline import Deadline
    from checker_core.edges.proxysql import AdminClient


@contextlib.contextmanager
def writes_allowed(
    write_gate: threading.Lock,
    lock_path: Path | None,
    deadline: Deadline,
    monotonic: Callable[[], float],
) -> Iterator[None]:
    """This ProxySQL's write gate (another cluster's apply in this process) and, when the
    plan writes anything (`lock_path` given), its write lock (another process's: the other
    checker, a command), each waited for no longer than the pass has left. A steady pass,
    with nothing to write, touches no lock file."""
    if not write_gate.acquire(timeout=deadline.left()):
        raise deadline.cut_short("another cluster's pass held this ProxySQL's write gate")
    try:
        if lock_path is None:
            yield
            return
        with write_lock(lock_path, deadline.left(), monotonic) as held:
            if not held:
                raise deadline.cut_short(
                    f"another process held this ProxySQL's write lock {lock_path}"
                )
            yield
    finally:
        write_gate.release()


def time_to_apply(deadline: Deadline, admin: AdminClient, statements: int) -> None:
    """An apply is begun only with time left for all its round trips at what one costs now
    (gate.apply_time_s, AdminClient.fresh_round_trip_s); one with nothing to write costs no
    round trip."""
    if not statements:
        return
    deadline.check()
    round_trip_s = admin.fresh_round_trip_s()
    needed = gate.apply_time_s(statements, round_trip_s)
    left = deadline.left()
    if left < needed:
        raise deadline.cut_short(
            f"{left * 1000:.0f} ms left, and its {statements} statement(s) need about "
            f"{needed * 1000:.0f} ms at {round_trip_s * 1000:.1f} ms a round trip"
        )
