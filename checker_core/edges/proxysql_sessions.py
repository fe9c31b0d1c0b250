"""The client sessions a drain must move, and the one ProxySQL setting a planned move lowers.

A switchover reads which client sessions hold a connection to the writer it moves away from
(stats_mysql_processlist), and while that writer drains it lowers
mysql-auto_increment_delay_multiplex to 0, so a client that inserts without pause lets go of
its connection at its next statement and moves to the new writer without an error. The
operator's value is put back when the drain ends. The value it replaces is recorded in the state
directory first: a switchover that dies midway leaves the record, and the next pass (or
switchover) puts the value back. Nothing is ever saved to ProxySQL's disk, so a restarted
ProxySQL has the operator's value too.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.core.attached import AUTO_INCREMENT_DELAY, AttachedSession, session_of
from checker_core.edges.proxysql import AdminError

if TYPE_CHECKING:
    from pathlib import Path

    from checker_core.core.model import NodeAddress
    from checker_core.edges.memory import StateStore
    from checker_core.edges.proxysql import AdminClient

PROCESSLIST = (
    "SELECT SessionID, user, cli_host, cli_port, hostgroup, srv_host, srv_port, command, "
    "extended_info FROM stats_mysql_processlist "
    "WHERE hostgroup = %s AND srv_host = %s AND srv_port = %s ORDER BY SessionID"
)
LOWERED_TO = "0"


def attached_sessions(
    admin: AdminClient, hostgroup: int, server: NodeAddress
) -> tuple[AttachedSession, ...]:
    """The client sessions holding a connection to `server` in `hostgroup` now."""
    rows = admin.execute(PROCESSLIST, (hostgroup, server.host, server.port))
    found = (session_of(tuple(row)) for row in rows)
    return tuple(s for s in found if s is not None)


@dataclass(frozen=True, slots=True)
class Lowered:
    """The operator's value a switchover replaced, and the process that must put it back."""

    value: str
    pid: int


def _path(store: StateStore, cluster: str) -> Path:
    return store.state_dir / f"{store.checker.value}.{cluster}.auto_increment_delay"


def _recorded(store: StateStore, cluster: str) -> Lowered | None:
    try:
        data = json.loads(_path(store, cluster).read_text(encoding="utf-8"))
        return Lowered(str(data["value"]), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


STAGED_DIFFERS = (
    "SELECT staged.variable_name FROM global_variables staged "
    "JOIN runtime_global_variables live ON staged.variable_name = live.variable_name "
    "WHERE staged.variable_name LIKE %s AND staged.variable_value <> live.variable_value "
    "ORDER BY staged.variable_name"
)


def _staged_differs(admin: AdminClient) -> list[str]:
    """mysql-* variables whose staged value is not the runtime one: a LOAD MYSQL VARIABLES
    would make an operator's unfinished edit live."""
    return [str(row[0]) for row in admin.execute(STAGED_DIFFERS, ("mysql-%",))]


def _set(admin: AdminClient, value: str) -> None:
    admin.execute(
        "UPDATE global_variables SET variable_value = %s WHERE variable_name = %s",
        (value, AUTO_INCREMENT_DELAY),
    )
    admin.execute("LOAD MYSQL VARIABLES TO RUNTIME")


def lower_delay(admin: AdminClient, store: StateStore, cluster: str) -> str:
    """Lower the delay to 0 for a drain; the line says what was done, or why not."""
    current = admin.read_runtime_variables([AUTO_INCREMENT_DELAY]).get(AUTO_INCREMENT_DELAY)
    if current is None:
        return f"{AUTO_INCREMENT_DELAY} not found in this ProxySQL: left alone"
    if current == LOWERED_TO:
        return f"{AUTO_INCREMENT_DELAY} is {LOWERED_TO} already: every session lets go"
    pending = _staged_differs(admin)
    if pending:
        return (
            f"{AUTO_INCREMENT_DELAY} left at {current}: a LOAD MYSQL VARIABLES would also make "
            f"the staged, unloaded value of {', '.join(pending)} live"
        )
    path = _path(store, cluster)
    try:
        store.ensure_dir()
        path.write_text(json.dumps({"value": current, "pid": os.getpid()}), encoding="utf-8")
    except OSError as exc:
        # never lowered without a record: a command that died would leave it lowered for good
        return f"{AUTO_INCREMENT_DELAY} left at {current}: its value not recorded at {path} ({exc})"
    try:
        _set(admin, LOWERED_TO)
    except AdminError:
        path.unlink(missing_ok=True)  # nothing was lowered: nothing to put back
        raise
    return (
        f"{AUTO_INCREMENT_DELAY} lowered from {current} to {LOWERED_TO} while the old writer drains"
    )


def restore_delay(admin: AdminClient, store: StateStore, cluster: str) -> str | None:
    """Put back the value a switchover lowered (this process's, or a dead one's); None when
    there is nothing to put back."""
    lowered = _recorded(store, cluster)
    if lowered is None:
        return None
    if lowered.pid != os.getpid() and _alive(lowered.pid):
        return None  # a switchover still under way restores it itself
    current = admin.read_runtime_variables([AUTO_INCREMENT_DELAY]).get(AUTO_INCREMENT_DELAY)
    path = _path(store, cluster)
    if current != LOWERED_TO:
        path.unlink(missing_ok=True)
        return (
            f"{AUTO_INCREMENT_DELAY} is {current}, set by someone after the switchover lowered "
            f"it: left as it is (it was {lowered.value})"
        )
    if _staged_differs(admin):
        return (
            f"{AUTO_INCREMENT_DELAY} still {LOWERED_TO}: staged mysql variables differ from "
            f"runtime; put back {lowered.value} with LOAD MYSQL VARIABLES TO RUNTIME once they "
            "are settled"
        )
    _set(admin, lowered.value)
    path.unlink(missing_ok=True)
    whose = (
        ""
        if lowered.pid == os.getpid()
        else f" (the switchover that lowered it, pid {lowered.pid}, is gone)"
    )
    return f"{AUTO_INCREMENT_DELAY} put back to {lowered.value}{whose}"


def put_back_leftover(admin: AdminClient, store: StateStore, cluster: str) -> str | None:
    """A switchover that died midway left ProxySQL's auto-increment delay lowered: the acting
    pass puts the operator's value back. Returns what the pass line warns of, if anything."""
    if not leftover(store, cluster):
        return None
    try:
        return restore_delay(admin, store, cluster)
    except AdminError as exc:
        return f"a switchover's lowered auto-increment delay not put back yet ({exc})"


def leftover(store: StateStore, cluster: str) -> bool:
    """A lowered value recorded by a process that is gone: cheap enough for every pass."""
    lowered = _recorded(store, cluster)
    return lowered is not None and lowered.pid != os.getpid() and not _alive(lowered.pid)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False  # not a process: kill(0 or below) would ask about process groups
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
