"""Client sessions ProxySQL keeps attached to a backend, and whether a drain can move them. Pure.

ProxySQL hands a backend connection back to its pool after each statement unless something ties
the client to it. Read from ProxySQL's source (MySQL_Session, MySQL_Connection; the same in 2.7.2
and 3.0.1):

- a connection on an OFFLINE_SOFT server that goes back to the pool is closed, so the client's
  next statement takes a connection to the new writer: nothing fails;
- a connection still attached when its server is removed (OFFLINE_HARD) fails the client's next
  statement before it is sent, unless ProxySQL may retry it elsewhere: no transaction open, and
  nothing that disables multiplexing (user variables, prepared statements, LOCK TABLES, a
  temporary table, GET_LOCK, a savepoint, SQL_LOG_BIN=0, FOUND_ROWS, warnings, and the
  auto-increment delay: after an INSERT that generated an id, the connection stays attached for
  mysql-auto_increment_delay_multiplex more statements, or until it has been idle for
  mysql-auto_increment_delay_multiplex_timeout_ms when that is not 0). A statement in flight at
  that moment fails with the connection (2013) after the server may have run it.

So a drain moves a session without an error only once it lets go: its transaction ends, its
auto-increment delay runs out (a client that inserts without pause re-arms it with every INSERT),
or it disconnects. Session state (variables, temporary tables, locks) never lets go by itself.
stats_mysql_processlist says which sessions are attached; what holds each one is in its
extended_info, which ProxySQL fills only with mysql-show_processlist_extended on. The checker
changes none of these settings: they are proxy-wide (checker_core.edges.proxysql_sessions).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from checker_core.core.model import NodeAddress

AUTO_INCREMENT_DELAY = "mysql-auto_increment_delay_multiplex"
AUTO_INCREMENT_DELAY_TIMEOUT = "mysql-auto_increment_delay_multiplex_timeout_ms"
PROCESSLIST_EXTENDED = "mysql-show_processlist_extended"
# MySQL's SERVER_STATUS_IN_TRANS bit of the backend's status
_IN_TRANSACTION = 0x1


class Hold(Enum):
    """What ties a client's session to its backend connection; the value says it to a DBA."""

    TRANSACTION = "a transaction open"
    AUTO_INCREMENT = "the auto-increment delay after an INSERT"
    SESSION_STATE = "session state"
    UNKNOWN = "not known (mysql-show_processlist_extended is off)"

    def __init__(self, reason: str) -> None:
        self.reason = reason


# ProxySQL's status flags (extended_info backends[].conn.status) that disable multiplexing
_STATE_FLAGS = {
    "user_variable": "user variables",
    "prepared_statement": "prepared statements",
    "lock_tables": "LOCK TABLES",
    "temporary_table": "a temporary table",
    "get_lock": "GET_LOCK",
    "has_savepoint": "a savepoint",
    "no_multiplex": "a statement that disables multiplexing",
    "no_multiplex_HG": "a hostgroup that disables multiplexing",
    "found_rows": "SQL_CALC_FOUND_ROWS",
    "has_warnings": "warnings kept for SHOW WARNINGS",
    "sql_log_bin0": "SQL_LOG_BIN=0",
}


@dataclass(frozen=True, slots=True)
class AttachedSession:
    """One client session holding a backend connection to `server` in `hostgroup`."""

    session_id: int
    user: str
    client: str  # cli_host:cli_port
    hostgroup: int
    server: NodeAddress
    command: str  # Query while a statement runs, Sleep between statements
    holds: tuple[Hold, ...]  # empty: ProxySQL would retry its next statement elsewhere
    details: tuple[str, ...] = ()  # the session state flags, the auto-increment token

    def describe(self) -> str:
        held = "; ".join(h.reason for h in self.holds) or "nothing holds it"
        extra = f" ({', '.join(self.details)})" if self.details else ""
        return f"session {self.session_id} ({self.user} from {self.client}): {held}{extra}"


def holds_of(extended_info: str | None) -> tuple[tuple[Hold, ...], tuple[str, ...]]:
    """What ProxySQL's extended_info says ties the session to its backend connections."""
    if not extended_info:
        return (Hold.UNKNOWN,), ()
    try:
        info = json.loads(extended_info)
    except ValueError:
        return (Hold.UNKNOWN,), ()
    holds: list[Hold] = []
    details: list[str] = []
    for backend in info.get("backends") or ():
        conn = backend.get("conn") or {}
        server_status = int((conn.get("mysql") or {}).get("server_status") or 0)
        if server_status & _IN_TRANSACTION:
            holds.append(Hold.TRANSACTION)
        token = int(conn.get("auto_increment_delay_token") or 0)
        if token > 0:
            holds.append(Hold.AUTO_INCREMENT)
            details.append(f"{token} statement(s) to go")
        flags = conn.get("status") or {}
        state = [label for flag, label in _STATE_FLAGS.items() if flags.get(flag)]
        if state:
            holds.append(Hold.SESSION_STATE)
            details.extend(state)
    return tuple(dict.fromkeys(holds)), tuple(details)


def session_of(row: tuple[object, ...]) -> AttachedSession | None:
    """A stats_mysql_processlist row (SessionID, user, cli_host, cli_port, hostgroup, srv_host,
    srv_port, command, extended_info) as a session attached to a backend; None when it holds
    no backend connection."""
    session_id, user, cli_host, cli_port, hostgroup, srv_host, srv_port, command, extended = row
    if srv_host in (None, "") or srv_port in (None, "", 0, "0") or hostgroup is None:
        return None
    holds, details = holds_of(None if extended is None else str(extended))
    return AttachedSession(
        session_id=int(str(session_id)),
        user=str(user),
        client=f"{cli_host}:{cli_port}",
        hostgroup=int(str(hostgroup)),
        server=NodeAddress(str(srv_host), int(str(srv_port))),
        command=str(command),
        holds=holds,
        details=details,
    )


def may_be_held_by_the_delay(sessions: tuple[AttachedSession, ...]) -> bool:
    """Whether one of these sessions may be held by the auto-increment delay: held by it, or by
    something ProxySQL does not show."""
    return any({Hold.AUTO_INCREMENT, Hold.UNKNOWN} & set(s.holds) for s in sessions)


def cannot_move(sessions: tuple[AttachedSession, ...]) -> tuple[AttachedSession, ...]:
    """Sessions that never let go by themselves: only a cut moves them, and it fails their next
    statement."""
    return tuple(s for s in sessions if Hold.SESSION_STATE in s.holds)


def what_clients_see(
    writer: NodeAddress,
    sessions: tuple[AttachedSession, ...],
    *,
    drain_timeout_ms: int,
    delay: Mapping[str, str] | None = None,
) -> list[str]:
    """Before a planned move: who holds a connection to the writer that drains, and what each
    client will see, so a session that cannot move without an error is known before the move.
    `delay`: ProxySQL's runtime values of the auto-increment delay's two variables, if read."""
    if not sessions:
        return [f"no client session holds a connection to the writer {writer} now"]
    lines = [f"{len(sessions)} client session(s) hold a connection to the writer {writer}:"]
    lines += [f"  {s.describe()}" for s in sessions]
    cut = f"cut when drain_timeout_ms ({drain_timeout_ms} ms) runs out: its next statement fails"
    if may_be_held_by_the_delay(sessions):
        known = delay or {}
        count, idle = known.get(AUTO_INCREMENT_DELAY), known.get(AUTO_INCREMENT_DELAY_TIMEOUT)
        statements = AUTO_INCREMENT_DELAY if count is None else f"{count} ({AUTO_INCREMENT_DELAY})"
        if idle == "0":
            idling = f" (never by idling: {AUTO_INCREMENT_DELAY_TIMEOUT} is 0)"
        else:
            idling = f", or once idle for {AUTO_INCREMENT_DELAY_TIMEOUT}"
            idling += "" if idle is None else f" ({idle} ms)"
        lines.append(
            f"  a session held by the auto-increment delay lets go after {statements} more "
            f"statement(s) without a new INSERT{idling}; a client that inserts without pause "
            f"never lets go, and is {cut}"
        )
    if any(Hold.TRANSACTION in s.holds for s in sessions):
        lines.append(f"  a transaction moves once it ends; one still open is {cut}")
    stuck = cannot_move(sessions)
    if stuck:
        ids = ", ".join(str(s.session_id) for s in stuck)
        lines.append(
            f"  cannot be moved without an error: session {ids} (session state never lets "
            f"go), {cut}"
        )
    if any(Hold.UNKNOWN in s.holds for s in sessions):
        lines.append(f"  ({PROCESSLIST_EXTENDED} = 1 shows what holds each session)")
    return lines
