"""ProxySQL admin client: read one hostgroup set's rows, make a plan live atomically.

ProxySQL's admin interface has no transactions (BEGIN/ROLLBACK are accepted and ignored), so
`mysql_servers` is a staging area: the client writes the complete wanted rows of the managed
hostgroups there, reads them back, and only when they are exactly what it wrote does it issue the
one `LOAD MYSQL SERVERS TO RUNTIME` that makes all of them live at once (rule S2).
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checker_core.core.model import (
    COLUMNS,
    BadRow,
    ClusterRows,
    Hostgroups,
    NodeAddress,
    Plan,
    ServerRow,
    ServerStatus,
    sort_rows,
)
from checker_core.edges.proxysql_rows import rows_as_one_value, unpacked

if TYPE_CHECKING:
    import pymysql

    from checker_core.core.settings import ProxySQLSettings

_COLUMN_LIST = ", ".join(COLUMNS)
_PLACEHOLDERS = ", ".join(["%s"] * len(COLUMNS))

# PyMySQL/MySQL client error numbers that mean "no server answered"
_UNREACHABLE_CODES = {2003, 2006, 2013, 2055}
_ACCESS_DENIED = 1045
_LOST = 2013  # CR_SERVER_LOST: during connect, no greeting came
# far more rows than any cluster's hostgroups hold, runtime and staging together
_PARSED_ROWS_KEPT = 4096


class AdminError(Exception):
    """Talking to ProxySQL's admin interface failed; the message says what and where."""


class AdminUnreachable(AdminError):
    """No ProxySQL admin answered (exit code 1)."""


class AdminAccessDenied(AdminError):
    """ProxySQL refused the credentials (bad input: exit code 2)."""


class AdminBadEndpoint(AdminAccessDenied):
    """The settings cannot reach an admin interface at all, whatever ProxySQL does: the port
    names a service that is not MySQL, or a certificate or key file cannot be used. Bad input
    (exit code 2) as refused credentials are; nothing was changed."""


class AdminQueryFailed(AdminError):
    """ProxySQL rejected a statement."""


class ApplyFailed(AdminError):
    """A plan could not be made live; ProxySQL's live rows are as they were."""


@dataclass(frozen=True, slots=True)
class ApplyResult:
    staged: int  # statements written to the staging area
    loaded: bool
    saved: bool
    # the change is live but SAVE ... TO DISK failed: a ProxySQL restart would load the old rows
    # from disk until a later pass saves again
    save_error: str | None = None


def _select(table: str, count: int, tag: str | None = None) -> str:
    """SELECT of the server columns of `table` for `count` hostgroup parameters.

    Table and column names are constants of this module; every value is a parameter.
    """
    marks = ", ".join(["%s"] * count)
    label = f"'{tag}', " if tag else ""
    return f"SELECT {label}{_COLUMN_LIST} FROM {table} WHERE hostgroup_id IN ({marks})"  # noqa: S608


class AdminClient:
    """One admin connection. Values always travel as parameters, never inside SQL text."""

    # a plan found already staged, and the staging it was found in: the same objects again (a
    # daemon's steady pass) are staged still, with no sorting or comparing
    _staged_already: tuple[Plan, Sequence[ServerRow]] | None = None

    def __init__(self, conn: pymysql.connections.Connection[Any], where: str) -> None:
        self._conn = conn
        self.where = where
        # each distinct answer row parsed once: the daemon reads the same rows pass after pass
        self._parsed: dict[tuple[object, ...], ServerRow] = {}
        # read_rows' last answer and its rows, by the hostgroups asked
        self._last_rows: dict[tuple[int, ...], tuple[bytes, str, ClusterRows]] = {}
        self._packets: dict[tuple[str, tuple[object, ...]], bytes] = {}

    @classmethod
    def connect(cls, settings: ProxySQLSettings) -> AdminClient:
        from checker_core.edges import driver, tls

        pymysql = driver.load()

        from checker_core.edges.lock import PassTimeout

        endpoint = settings.endpoint
        where = f"ProxySQL admin {settings.host}:{settings.port}"
        try:
            conn = tls.connect(
                endpoint.tls,
                where,
                settings.host,
                settings.port,
                user=endpoint.user,
                password=endpoint.password.reveal(),
                connect_timeout=endpoint.connect_timeout_ms / 1000,
                read_timeout=endpoint.read_timeout_ms / 1000,
                write_timeout=endpoint.read_timeout_ms / 1000,
                autocommit=None,
            )
        except tls.TlsFileError as exc:
            raise AdminBadEndpoint(f"proxysql.{exc.key} {exc.path}: {exc.reason}") from None
        except tls.TlsError as exc:
            # nobody trustworthy answered: as unreachable (exit 1), and nothing was changed
            raise AdminUnreachable(f"{exc} (proxysql.ssl_mode, proxysql.ssl_ca)") from None
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else 0
            if code == _ACCESS_DENIED:
                raise AdminAccessDenied(
                    f"{where}: access denied for user {endpoint.user!r}"
                ) from None
            if code == _LOST and "timed out" in str(exc):
                raise AdminUnreachable(
                    f"{where}: connected, but no MySQL greeting within "
                    f"proxysql.connect_timeout_ms ({endpoint.connect_timeout_ms} ms): a hung "
                    "ProxySQL, or proxysql.port names a service that waits for the client "
                    "to speak first (not ProxySQL's admin port)"
                ) from None
            raise AdminUnreachable(f"{where}: unreachable ({_reason(exc)})") from None
        except pymysql.err.MySQLError as exc:
            raise AdminBadEndpoint(_not_mysql(where, exc)) from None
        except OSError as exc:
            raise AdminUnreachable(f"{where}: unreachable ({exc})") from None
        except PassTimeout:
            raise AdminUnreachable(
                f"{where}: no answer before the pass's deadline (run.max_runtime_ms); "
                "ProxySQL is hung or proxysql.connect_timeout_ms is too long"
            ) from None
        except (ValueError, IndexError, LookupError, struct.error) as exc:
            # PyMySQL parsing a greeting that is not MySQL's
            raise AdminBadEndpoint(_not_mysql(where, exc)) from None
        return cls(conn, where)

    def close(self) -> None:
        # closing a dead connection must not hide the outcome that made us close it
        with contextlib.suppress(Exception):
            self._conn.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ low level

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        from checker_core.edges import driver

        pymysql = driver.load()

        try:
            with self._conn.cursor() as cur:
                cur.execute(sql, tuple(params) if params else None)
                return list(cur.fetchall())
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else 0
            if code in _UNREACHABLE_CODES:
                raise AdminUnreachable(f"{self.where}: connection lost ({_reason(exc)})") from None
            raise AdminQueryFailed(f"{self.where}: {_reason(exc)}") from None
        except pymysql.err.MySQLError as exc:
            raise AdminQueryFailed(f"{self.where}: {_reason(exc)}") from None
        except OSError as exc:
            raise AdminUnreachable(f"{self.where}: connection lost ({exc})") from None

    # ------------------------------------------------------------ reads

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        """Live and staging rows of the given hostgroups, in one round trip and one value: the
        daemon reads the same rows pass after pass, and an answer byte for byte the last one
        is the rows it gave then, neither decoded nor parsed again."""
        wanted = tuple(sorted(set(hostgroups)))
        last = self._last_rows.get(wanted)
        sql = rows_as_one_value(len(wanted))
        if last is None:
            # a client's first read (a one-shot pass's only) goes through the cursor
            found = self.execute(sql, wanted + wanted)
            raw, value = b"", found[0][0] if found else None
        else:
            raw, value = self._one_value(sql, wanted + wanted, last[0])
        text = "" if value is None else str(value)
        if last is not None and (last[0] == raw or (value is not None and last[1] == text)):
            # the same answer; after a first read by cursor its bytes are learnt here
            self._last_rows[wanted] = (raw, last[1], last[2])
            return last[2]
        runtime: list[ServerRow] = []
        staging: list[ServerRow] = []
        for line in text.split("\n") if text else ():
            source, values = unpacked(line)
            row = self._row(values)
            (runtime if source == "r" else staging).append(row)
        rows = ClusterRows(runtime=sort_rows(runtime), staging=sort_rows(staging))
        self._last_rows[wanted] = (raw, text, rows)
        return rows

    def _one_value(
        self, sql: str, params: Sequence[object], last: bytes | None = None
    ) -> tuple[bytes, object]:
        """A one-row, one-column answer, written and read on PyMySQL's connection by this
        module: the answer's bytes (to tell it from the last one) and its value as PyMySQL
        would give it (None, not decoded, when the bytes are `last`'s). Failures are said as
        execute() says them."""
        from checker_core.edges import wire
        from checker_core.edges.proxysql_rows import answer_bytes

        conn = self._conn
        sock = getattr(conn, "_sock", None)
        if sock is None:
            raise AdminUnreachable(f"{self.where}: connection lost (not connected)")
        key = (sql, tuple(params))
        packet = self._packets.get(key)
        if packet is None:
            # the same question every pass, on this one connection: escaped once
            packet = self._packets[key] = wire.statement(conn, sql, tuple(params))[1]
        try:
            buf, answer = answer_bytes(sock, packet, last)
        except OSError as exc:
            raise AdminUnreachable(f"{self.where}: connection lost ({exc})") from None
        except wire.ProtocolError as exc:
            raise AdminUnreachable(f"{self.where}: connection lost ({exc})") from None
        except Exception as exc:  # a lost connection, as PyMySQL says it
            raise AdminUnreachable(f"{self.where}: connection lost ({_reason(exc)})") from None
        if answer is None:
            return buf, None  # the answer of last time, whole: nothing to decode
        first = wire.decoded(conn, answer[0])
        if isinstance(first, Exception):
            raise AdminQueryFailed(f"{self.where}: {_reason(first)}")
        return buf, first[0][0] if first and first[0] else None

    def _row(self, values: tuple[object, ...]) -> ServerRow:
        row = self._parsed.get(values)
        if row is None:
            if len(self._parsed) >= _PARSED_ROWS_KEPT:
                self._parsed.clear()
            row = self._parsed[values] = ServerRow.from_admin(values)
        return row

    def read_staging(self, hostgroups: Iterable[int]) -> tuple[ServerRow, ...]:
        wanted = sorted(set(hostgroups))
        rows = self.execute(_select("mysql_servers", len(wanted)), wanted)
        return sort_rows(ServerRow.from_admin(values) for values in rows)

    def connections_in_use(self, hostgroups: Iterable[int]) -> dict[tuple[int, NodeAddress], int]:
        """ConnUsed per (hostgroup, server): how far a drain has got, and what holds a removed
        server in ProxySQL's runtime."""
        wanted = sorted(set(hostgroups))
        if not wanted:
            return {}
        marks = ", ".join(["%s"] * len(wanted))
        columns = "hostgroup, srv_host, srv_port, ConnUsed"
        sql = f"SELECT {columns} FROM stats_mysql_connection_pool WHERE hostgroup IN ({marks})"  # noqa: S608
        rows = self.execute(sql, wanted)
        return {
            (int(hostgroup), NodeAddress(str(host), int(port))): int(used)
            for hostgroup, host, port, used in rows
        }

    def read_runtime_variables(self, names: Sequence[str]) -> dict[str, str]:
        """{name: value} of the named runtime_global_variables that exist."""
        marks = ", ".join(["%s"] * len(names))  # placeholders only: the names are params
        rows = self.execute(
            "SELECT variable_name, variable_value FROM runtime_global_variables "  # noqa: S608
            f"WHERE variable_name IN ({marks})",
            names,
        )
        return {str(name): str(value) for name, value in rows}

    # ------------------------------------------------------------ writes

    def stage(
        self, hostgroups: Sequence[int], desired: Sequence[ServerRow], writer: int | None = None
    ) -> int:
        """Make mysql_servers hold exactly `desired` in `hostgroups`; return statements issued.

        Only the differences are written, so a staging area that already matches costs one
        read and no write.
        """
        current = self.read_staging(hostgroups)
        statements = staging_statements(hostgroups, current, desired, writer=writer)
        for statement in statements:
            self.execute(statement.sql, statement.params)
        return len(statements)

    def apply(
        self,
        plan: Plan,
        persist: bool,
        staging_seen: Sequence[ServerRow] | None = None,
        *,
        save_owed: bool = False,
        on_load: Callable[[], None] | None = None,
    ) -> ApplyResult:
        """Stage the plan's rows, verify them, then LOAD (and SAVE) only when live rows change.

        A staging area left half-written by a pass that died is rewritten here even when the
        plan is empty; it is never loaded unless this call finished writing it, nor when the
        template hostgroups (which the LOAD carries too) are not as this pass read them.
        `staging_seen`: the staging rows this pass read; when they already match and nothing is
        to be loaded, there is nothing to write or verify (the steady state costs no round trip
        here). `save_owed`: an earlier SAVE failed, so disk is behind runtime: SAVE again.
        `on_load` is called the moment the LOAD returned, before anything else can fail.
        """
        hostgroups = list(plan.hostgroups.managed)
        if staging_seen is not None and not plan.needs_load:
            kept = self._staged_already
            if kept is None or kept[0] is not plan or kept[1] is not staging_seen:
                seen = sort_rows(r for r in staging_seen if r.hostgroup_id in hostgroups)
                kept = (plan, staging_seen) if seen == sort_rows(plan.desired) else None
                self._staged_already = kept
            if kept is not None:
                return self._save(persist and save_owed, staged=0, loaded=False)
        checked = hostgroups + list(plan.hostgroups.templates)
        try:
            staged = self.stage(hostgroups, plan.desired, writer=plan.hostgroups.writer)
            if plan.adopted:
                staged += self.stage(plan.hostgroups.templates, plan.adopted)
            readback = self.read_staging(checked)
        except (AdminQueryFailed, BadRow) as exc:
            self._restore_staging(plan)
            raise ApplyFailed(f"staging failed, nothing loaded: {exc}") from None
        if readback != sort_rows((*plan.desired, *plan.templates)):
            raise ApplyFailed(
                f"{self.where}: staging rows changed under us (another writer?), nothing loaded"
            )
        if not plan.needs_load:
            return self._save(persist and save_owed, staged=staged, loaded=False)
        try:
            self.execute(LOAD_SERVERS.sql)
        except AdminQueryFailed as exc:
            raise ApplyFailed(f"LOAD MYSQL SERVERS TO RUNTIME failed: {exc}") from None
        if on_load is not None:
            on_load()
        return self._save(persist, staged=staged, loaded=True)

    def _save(self, wanted: bool, *, staged: int, loaded: bool) -> ApplyResult:
        if not wanted:
            return ApplyResult(staged=staged, loaded=loaded, saved=False)
        try:
            self.execute(SAVE_SERVERS.sql)
        except AdminQueryFailed as exc:
            # not a failed apply: the rows are live, and saying otherwise would mislead
            done = "loaded" if loaded else "live"
            failure = f"{done}, but SAVE MYSQL SERVERS TO DISK failed: {exc}"
            return ApplyResult(staged=staged, loaded=loaded, saved=False, save_error=failure)
        return ApplyResult(staged=staged, loaded=loaded, saved=True)

    def repair_staging(self, rows: ClusterRows, hostgroups: Hostgroups) -> int:
        """Staging rows of the managed hostgroups that differ from what is live, as `rows` were
        read (a pass that died between its writes and its LOAD), put back to what is live,
        without a LOAD. Returns the statements written (0: staging was as live)."""
        from checker_core.core.roster import live_intent

        intent = live_intent(rows, hostgroups)
        if sort_rows(rows.staged(hostgroups.managed)) == intent:
            return 0
        return self.stage(hostgroups.managed, intent, writer=hostgroups.writer)

    def _restore_staging(self, plan: Plan) -> None:
        """Best effort: put what is live back into staging, as intent (never a status only
        ProxySQL set), so nobody LOADs our half-write.

        If this fails too, the next pass still repairs the staging area before any LOAD.
        """
        from checker_core.core.roster import live_intent

        hostgroups = plan.hostgroups
        with contextlib.suppress(AdminError, BadRow):
            rows = self.read_rows(hostgroups.managed)
            self.stage(hostgroups.managed, live_intent(rows, hostgroups), writer=hostgroups.writer)


def _not_mysql(where: str, exc: BaseException) -> str:
    return (
        f"{where}: the service on proxysql.port does not speak the MySQL protocol "
        f"({type(exc).__name__}: {exc}); is it ProxySQL's admin port (6032 by default)?"
    )


def _reason(exc: BaseException) -> str:
    """PyMySQL errors carry (code, message); say both."""
    args: tuple[object, ...] = exc.args
    if len(args) >= 2:
        return f"{args[1]} (error {args[0]})"
    return str(exc)


@dataclass(frozen=True, slots=True)
class Statement:
    """One admin statement with its parameters, kept apart until the driver binds them."""

    sql: str
    params: tuple[object, ...] = ()

    def render(self) -> str:
        """The statement as text a person can paste into the admin interface.

        ProxySQL's admin sessions run with NO_BACKSLASH_ESCAPES (PyMySQL then doubles quotes
        when it binds), so a quote is doubled and a backslash is an ordinary character.
        """
        if not self.params:
            return self.sql + ";"
        return (self.sql % tuple(_literal(p) for p in self.params)) + ";"


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


LOAD_SERVERS = Statement("LOAD MYSQL SERVERS TO RUNTIME")
SAVE_SERVERS = Statement("SAVE MYSQL SERVERS TO DISK")
_DELETE = "DELETE FROM mysql_servers WHERE hostgroup_id = %s AND hostname = %s AND port = %s"
# constant column names only; the values are parameters
_REPLACE = f"REPLACE INTO mysql_servers ({_COLUMN_LIST}) VALUES ({_PLACEHOLDERS})"  # noqa: S608


def staging_statements(
    hostgroups: Sequence[int],
    staging: Sequence[ServerRow],
    desired: Sequence[ServerRow],
    *,
    writer: int | None = None,
) -> tuple[Statement, ...]:
    """What turns the staging rows of `hostgroups` into exactly `desired` (pure).

    Removals and demotions come before additions, and ONLINE rows of the `writer` hostgroup
    last of all: anyone's LOAD between two of these statements (an operator, another tool, a
    ProxySQL Cluster pull) finds no more ONLINE writers staged than before or after them.
    """
    managed = set(hostgroups)
    for row in desired:
        if row.hostgroup_id not in managed:
            raise ApplyFailed(f"refusing to stage {row.describe()}: not a managed hostgroup")
    current = {row.key: row for row in staging if row.hostgroup_id in managed}
    wanted = {row.key: row for row in desired}
    deletes = [Statement(_DELETE, key) for key in sorted(current.keys() - wanted.keys())]

    def phase(row: ServerRow) -> int:
        if row.status is not ServerStatus.ONLINE:
            return 0
        return 2 if row.hostgroup_id == writer else 1

    changed = sorted(
        (row for key, row in wanted.items() if current.get(key) != row),
        key=lambda row: (phase(row), row.key),
    )
    return tuple(deletes + [Statement(_REPLACE, row.values()) for row in changed])


def plan_statements(
    plan: Plan, staging: Sequence[ServerRow], persist: bool, *, save_owed: bool = False
) -> tuple[Statement, ...]:
    """Every statement apply() issues for this plan, in order (what dry-run prints)."""
    hostgroups = plan.hostgroups
    statements = staging_statements(
        hostgroups.managed, staging, plan.desired, writer=hostgroups.writer
    )
    if plan.adopted:
        statements += staging_statements(hostgroups.templates, staging, plan.adopted)
    if plan.needs_load:
        statements += (LOAD_SERVERS, SAVE_SERVERS) if persist else (LOAD_SERVERS,)
    elif persist and save_owed:
        statements += (SAVE_SERVERS,)
    return statements
