"""ProxySQL admin client: read one hostgroup set's rows, make a plan live atomically.

ProxySQL's admin interface has no transactions (BEGIN/ROLLBACK are accepted and ignored), so
`mysql_servers` is a staging area: the client writes the complete wanted rows of the managed
hostgroups there, reads them back, and only when they are exactly what it wrote does it issue the
one `LOAD MYSQL SERVERS TO RUNTIME` that makes all of them live at once (rule S2).
"""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from checker_core.core.model import (
    COLUMNS,
    BadRow,
    ClusterRows,
    NodeAddress,
    Plan,
    ServerRow,
    sort_rows,
)
from checker_core.core.staging import (
    GuardedWrite,
)
from checker_core.core.statements import (
    ApplyResult,
    guarded_statement,
)
from checker_core.edges import driver
from checker_core.edges.admin_errors import (
    AdminBadEndpoint,
    AdminQueryFailed,
    AdminUnreachable,
    connect_failure,
    not_mysql,
    reason,
    timed_out,
)
from checker_core.edges.deadline import Deadline, PassTimeout
from checker_core.edges.proxysql_rows import all_rows_as_one_value, rows_as_one_value, unpacked

if TYPE_CHECKING:
    import pymysql

    from checker_core.core.settings import ProxySQLSettings

_COLUMN_LIST = ", ".join(COLUMNS)
_PLACEHOLDERS = ", ".join(["%s"] * len(COLUMNS))

# PyMySQL/MySQL client error numbers that mean "no server answered"
_UNREACHABLE_CODES = {2003, 2006, 2013, 2055}
# far more rows than any cluster's hostgroups hold, runtime and staging together
_PARSED_ROWS_KEPT = 4096


def _select(table: str, count: int, tag: str | None = None) -> str:
    """SELECT of the server columns of `table` for `count` hostgroup parameters.

    Table and column names are constants of this module; every value is a parameter.
    """
    marks = ", ".join(["%s"] * count)
    label = f"'{tag}', " if tag else ""
    return f"SELECT {label}{_COLUMN_LIST} FROM {table} WHERE hostgroup_id IN ({marks})"  # noqa: S608


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _runs_to_its_load(
    method: Callable[Concatenate[AdminClient, _P], _R],
) -> Callable[Concatenate[AdminClient, _P], _R]:
    """The method runs with no pass's deadline on the connection, each statement bounded by
    proxysql.read_timeout_ms alone: a pass stopped between its staging writes and its LOAD
    would leave a half-written plan staged for anyone's LOAD to make live."""

    def unbound(self: AdminClient, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        deadline, self._deadline = self._deadline, None
        try:
            return method(self, *args, **kwargs)
        finally:
            self._deadline = deadline

    return unbound


class AdminClient:
    """One admin connection. Values always travel as parameters, never inside SQL text.

    While a pass holds it (`bound_by`), each statement's read and write timeout is the
    configured one or what the pass has left, whichever is less, and a statement is never
    begun once the pass's time is up: a statement the deadline cut short, or one not begun for
    it, raises PassTimeout here, in the pass's own thread. The one exception is a plan's apply
    once its staging has begun (see apply)."""

    # a plan found already staged, and the staging it was found in: the same objects again (a
    # daemon's steady pass) are staged still, with no sorting or comparing
    _staged_already: tuple[Plan, Sequence[ServerRow]] | None = None
    # the deadline of the pass that holds this connection (None between passes)
    _deadline: Deadline | None = None
    # each statement's read and write timeout when no deadline bounds it (seconds)
    _timeout_s: float = 0.0
    # how long the last statement took to answer (seconds): what an apply's round trips cost;
    # and the deadline of the pass it was measured in
    round_trip_s: float = 0.0
    _measured_for: Deadline | None = None
    # False from a statement's first byte sent until its whole answer is read: a connection
    # left so (a timeout, a lost answer) cannot be asked again; one cut short between its
    # statements (a pass's deadline at a step) can
    in_step: bool = True

    def __init__(
        self, conn: pymysql.connections.Connection[Any], where: str, timeout_s: float = 0.0
    ) -> None:
        self._conn = conn
        self.where = where
        self._timeout_s = timeout_s
        # each distinct answer row parsed once: the daemon reads the same rows pass after pass
        self._parsed: dict[tuple[object, ...], ServerRow] = {}
        # read_packed's last answer (its bytes and text) and read_rows' rows made from that
        # text, by the hostgroups asked
        self._last_packed: dict[tuple[int, ...], tuple[bytes, str]] = {}
        self._last_rows: dict[tuple[int, ...], tuple[str, ClusterRows]] = {}
        self._packets: dict[tuple[str, tuple[object, ...]], bytes] = {}

    @classmethod
    def connect(cls, settings: ProxySQLSettings, deadline: Deadline | None = None) -> AdminClient:
        """A connection to the admin; `deadline`: the pass's, which bounds the connect and the
        login (the connection is then bound by it, see bound_by)."""
        from checker_core.edges import driver, tls

        pymysql = driver.load()

        endpoint = settings.endpoint
        where = f"ProxySQL admin {settings.host}:{settings.port}"
        connect_s = endpoint.connect_timeout_ms / 1000
        read_s = endpoint.read_timeout_ms / 1000
        if deadline is not None:
            if deadline.expired():
                raise deadline.cut_short(f"{where} not connected")
            connect_s, read_s = deadline.bound(connect_s), deadline.bound(read_s)
        try:
            conn = tls.connect(
                endpoint.tls,
                where,
                settings.host,
                settings.port,
                user=endpoint.user,
                password=endpoint.password.reveal(),
                connect_timeout=connect_s,
                read_timeout=read_s,
                write_timeout=read_s,
                autocommit=None,
            )
        except (tls.TlsError, tls.TlsFileError, pymysql.err.MySQLError, OSError) as exc:
            raise connect_failure(exc, where, endpoint, deadline) from None
        except (ValueError, IndexError, LookupError, struct.error) as exc:
            # PyMySQL parsing a greeting that is not MySQL's
            raise AdminBadEndpoint(not_mysql(where, exc)) from None
        client = cls(conn, where, timeout_s=endpoint.read_timeout_ms / 1000)
        client.bound_by(deadline)
        return client

    def bound_by(self, deadline: Deadline | None) -> None:
        """The pass that holds this connection from now on, or None once it is done: its
        statements are bounded by `deadline` (each one's read and write timeout)."""
        self._deadline = deadline

    def fresh_round_trip_s(self) -> float:
        """What a round trip costs now: the last statement's, when it was this pass's, else
        one timed here. A daemon's runner may not have asked anything for a while (its rows
        come from a shared read), and a round trip timed while the proxy was busy says nothing
        of the proxy now."""
        if self._deadline is None or self._measured_for is not self._deadline:
            self.execute("SELECT 1")
        return self.round_trip_s

    def _begin_statement(self) -> float | None:
        """Before a statement: PassTimeout when the pass's time is up, else the statement's
        timeout (None: the configured one, nothing to change)."""
        deadline = self._deadline
        if deadline is None:
            self.in_step = False
            return None
        if deadline.expired():
            raise deadline.cut_short()
        left = deadline.left()
        self.in_step = False
        return left if left < self._timeout_s else None

    def _statement_timeout(self, bounded: float | None) -> None:
        """The connection's read and write timeout for the next statement."""
        if self._timeout_s > 0:
            driver.set_timeouts(self._conn, self._timeout_s if bounded is None else bounded)

    def _cut_by_deadline(self, bounded: float | None, exc: BaseException) -> PassTimeout | None:
        """A statement whose timeout the deadline shortened, and that timed out: the pass's
        time was up, not the admin's (whose timeout this statement never had in full)."""
        if bounded is None or self._deadline is None or not timed_out(exc):
            return None
        return self._deadline.cut_short(f"{self.where} gave no answer in the time left")

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
        return self._run_statement(sql, params)[0]

    def changes(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run a statement that writes; how many rows it changed, as ProxySQL says."""
        return self._run_statement(sql, params)[1]

    def write_guarded(self, write: GuardedWrite) -> bool:
        """The write made as one statement that changes its row only while the row holds what
        the write expects; whether it went in (else it found someone's newer edit, and left
        it as it is)."""
        statement = guarded_statement(write)
        return self.changes(statement.sql, statement.params) > 0

    def _run_statement(
        self, sql: str, params: Sequence[object]
    ) -> tuple[list[tuple[Any, ...]], int]:
        from checker_core.edges import driver

        pymysql = driver.load()

        bounded = self._begin_statement()
        self._statement_timeout(bounded)
        began = time.monotonic()
        try:
            with self._conn.cursor() as cur:
                changed = cur.execute(sql, tuple(params) if params else None)
                found = list(cur.fetchall())
            self.round_trip_s = time.monotonic() - began
            self._measured_for = self._deadline
            self.in_step = True
            return found, changed
        except pymysql.err.OperationalError as exc:
            cut = self._cut_by_deadline(bounded, exc)
            if cut is not None:
                raise cut from None
            code = exc.args[0] if exc.args else 0
            if code in _UNREACHABLE_CODES:
                raise AdminUnreachable(f"{self.where}: connection lost ({reason(exc)})") from None
            raise AdminQueryFailed(f"{self.where}: {reason(exc)}") from None
        except pymysql.err.MySQLError as exc:
            raise AdminQueryFailed(f"{self.where}: {reason(exc)}") from None
        except OSError as exc:
            cut = self._cut_by_deadline(bounded, exc)
            if cut is not None:
                raise cut from None
            raise AdminUnreachable(f"{self.where}: connection lost ({exc})") from None

    # ------------------------------------------------------------ reads

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        """Live and staging rows of the given hostgroups, in one round trip and one value: the
        daemon reads the same rows pass after pass, and an answer byte for byte the last one
        is the rows it gave then, neither decoded nor parsed again."""
        wanted = tuple(sorted(set(hostgroups)))
        text = self.read_packed(wanted)
        last = self._last_rows.get(wanted)
        if last is not None and last[0] is text:
            return last[1]
        runtime: list[ServerRow] = []
        staging: list[ServerRow] = []
        for line in text.split("\n") if text else ():
            source, values = unpacked(line)
            row = self._row(values)
            (runtime if source == "r" else staging).append(row)
        rows = ClusterRows(runtime=sort_rows(runtime), staging=sort_rows(staging))
        self._last_rows[wanted] = (text, rows)
        return rows

    def read_packed(self, hostgroups: Iterable[int]) -> str:
        """The rows of `hostgroups` as rows_as_one_value packs them (proxysql_rows.unpacked
        reads a line): the very same str object again while the answer is byte for byte the
        last one, which is then not decoded."""
        wanted = tuple(sorted(set(hostgroups)))
        last = self._last_packed.get(wanted)
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
            self._last_packed[wanted] = (raw, last[1])
            return last[1]
        self._last_packed[wanted] = (raw, text)
        return text

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
        sock = driver.socket_of(conn)
        if sock is None:
            raise AdminUnreachable(f"{self.where}: connection lost (not connected)")
        key = (sql, tuple(params))
        packet = self._packets.get(key)
        if packet is None:
            # the same question every pass, on this one connection: escaped once
            packet = self._packets[key] = wire.statement(conn, sql, tuple(params))[1]
        bounded = self._begin_statement()
        self._statement_timeout(bounded)
        began = time.monotonic()
        try:
            buf, answer = answer_bytes(sock, packet, last)
        except OSError as exc:
            cut = self._cut_by_deadline(bounded, exc)
            if cut is not None:
                raise cut from None
            raise AdminUnreachable(f"{self.where}: connection lost ({exc})") from None
        except wire.ProtocolError as exc:
            raise AdminUnreachable(f"{self.where}: connection lost ({exc})") from None
        except Exception as exc:  # a lost connection, as PyMySQL says it
            raise AdminUnreachable(f"{self.where}: connection lost ({reason(exc)})") from None
        self.round_trip_s = time.monotonic() - began
        self._measured_for = self._deadline
        self.in_step = True
        if answer is None:
            return buf, None  # the answer of last time, whole: nothing to decode
        first = wire.decoded(conn, answer[0])
        if isinstance(first, Exception):
            raise AdminQueryFailed(f"{self.where}: {reason(first)}")
        return buf, first[0][0] if first and first[0] else None

    def _row(self, values: tuple[object, ...]) -> ServerRow:
        row = self._parsed.get(values)
        if row is None:
            if len(self._parsed) >= _PARSED_ROWS_KEPT:
                self._parsed.clear()
            row = self._parsed[values] = ServerRow.from_admin(values)
        return row

    def read_staging(
        self, hostgroups: Iterable[int], *, any_host: bool = False
    ) -> tuple[ServerRow, ...]:
        """The staged rows of `hostgroups`; `any_host`: every row taken as ProxySQL holds it,
        whatever its hostname (rows put back or set aside as read, never judged here)."""
        wanted = sorted(set(hostgroups))
        rows = self.execute(_select("mysql_servers", len(wanted)), wanted)
        return sort_rows(ServerRow.from_admin(values, any_host=any_host) for values in rows)

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
        from checker_core.edges.proxysql_apply import Writes, stage_rows

        return stage_rows(self, hostgroups, desired, writer, writes=Writes())

    @_runs_to_its_load
    def apply(
        self,
        plan: Plan,
        persist: bool,
        staging_seen: Sequence[ServerRow] | None = None,
        *,
        save_owed: bool = False,
        on_load: Callable[[], None] | None = None,
        warn: Callable[[str], None] | None = None,
        reconnect: Callable[[], AdminClient] | None = None,
    ) -> ApplyResult:
        """Stage the plan's rows, verify them, then LOAD (and SAVE) only when live rows change.
        Once begun it runs to its LOAD (and SAVE), each statement bounded by
        proxysql.read_timeout_ms alone (_runs_to_its_load); the runner begins it only with time
        enough left.

        A staging area left half-written by a pass that died is rewritten here even when the
        plan is empty; it is never loaded unless this call finished writing it, nor when the
        template hostgroups are not as this pass read them. Staged rows this pass does not
        manage that differ from what is live (an operator's edit in progress) are set aside
        for the LOAD, which then carries none of them, and written back after it.
        `staging_seen`: the staging rows this pass read; when they already match and nothing is
        to be loaded, there is nothing to write or verify (the steady state costs no round trip
        here). `save_owed`: an earlier SAVE failed, so disk is behind runtime: SAVE again.
        `on_load` is called the moment the LOAD returned, before anything else can fail.

        Whatever ends this call after its first staging write and before its LOAD went out
        (a refused statement, a lost connection, the pass's deadline) puts back the rows it
        wrote as they were read, on this connection when it is still in step, else on one from
        `reconnect`; what it could not put back is said through `warn`.
        """
        already = False
        if staging_seen is not None and not plan.needs_load:
            kept = self._staged_already
            if kept is None or kept[0] is not plan or kept[1] is not staging_seen:
                hostgroups = set(plan.hostgroups.managed)
                seen = sort_rows(r for r in staging_seen if r.hostgroup_id in hostgroups)
                kept = (plan, staging_seen) if seen == sort_rows(plan.desired) else None
                self._staged_already = kept
            already = kept is not None
        if already and not (persist and save_owed):
            # the steady pass: nothing to stage, load or save (its module is not even loaded)
            return ApplyResult(staged=0, loaded=False, saved=False)
        from checker_core.edges.proxysql_apply import PlanApply

        return PlanApply(self).run(
            plan,
            persist,
            staged_already=already,
            save_owed=save_owed,
            on_load=on_load,
            warn=warn,
            reconnect=reconnect,
        )

    def read_whole(self) -> ClusterRows:
        """Every row of runtime_mysql_servers and mysql_servers, in one round trip: what a LOAD
        would carry besides this pass's rows. A row of a hostgroup this tool does not manage
        is taken as ProxySQL holds it, whatever its hostname."""
        found = self.execute(all_rows_as_one_value())
        text = "" if not found or found[0][0] is None else str(found[0][0])
        runtime: list[ServerRow] = []
        staging: list[ServerRow] = []
        for line in text.split("\n") if text else ():
            source, values = unpacked(line)
            try:
                row = self._row(values)
            except BadRow:
                row = ServerRow.from_admin(values, any_host=True)
            (runtime if source == "r" else staging).append(row)
        return ClusterRows(runtime=sort_rows(runtime), staging=sort_rows(staging))
