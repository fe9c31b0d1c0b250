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
from dataclasses import dataclass
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
    NOTHING_ASIDE,
    GuardedWrite,
    SetAside,
    changed_while_aside,
    left_half_written,
    set_aside,
    undone,
    written_back,
)
from checker_core.core.statements import (
    LOAD_SERVERS,
    SAVE_SERVERS,
    ApplyResult,
    StagingRefused,
    guarded_statement,
    staging_statements,
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
    # how long the last statement took to answer (seconds): what an apply's round trips cost
    round_trip_s: float = 0.0

    def __init__(
        self, conn: pymysql.connections.Connection[Any], where: str, timeout_s: float = 0.0
    ) -> None:
        self._conn = conn
        self.where = where
        self._timeout_s = timeout_s
        # each distinct answer row parsed once: the daemon reads the same rows pass after pass
        self._parsed: dict[tuple[object, ...], ServerRow] = {}
        # read_rows' last answer and its rows, by the hostgroups asked
        self._last_rows: dict[tuple[int, ...], tuple[bytes, str, ClusterRows]] = {}
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
            if deadline is not None and deadline.expired() and _timed_out(exc):
                raise AdminUnreachable(
                    f"{where}: no answer before the pass's deadline (run.max_runtime_ms); "
                    "ProxySQL is hung or proxysql.connect_timeout_ms is too long"
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
            if deadline is not None and deadline.expired() and _timed_out(exc):
                raise AdminUnreachable(
                    f"{where}: no answer before the pass's deadline (run.max_runtime_ms); "
                    "ProxySQL is hung or proxysql.connect_timeout_ms is too long"
                ) from None
            raise AdminUnreachable(f"{where}: unreachable ({exc})") from None
        except (ValueError, IndexError, LookupError, struct.error) as exc:
            # PyMySQL parsing a greeting that is not MySQL's
            raise AdminBadEndpoint(_not_mysql(where, exc)) from None
        client = cls(conn, where, timeout_s=endpoint.read_timeout_ms / 1000)
        client.bound_by(deadline)
        return client

    def bound_by(self, deadline: Deadline | None) -> None:
        """The pass that holds this connection from now on, or None once it is done: its
        statements are bounded by `deadline` (each one's read and write timeout)."""
        self._deadline = deadline

    def _begin_statement(self) -> float | None:
        """Before a statement: PassTimeout when the pass's time is up, else the statement's
        timeout (None: the configured one, nothing to change)."""
        deadline = self._deadline
        if deadline is None:
            return None
        if deadline.expired():
            raise deadline.cut_short()
        left = deadline.left()
        return left if left < self._timeout_s else None

    def _statement_timeout(self, bounded: float | None) -> None:
        """The connection's read and write timeout for the next statement."""
        if self._timeout_s > 0:
            _set_timeouts(self._conn, self._timeout_s if bounded is None else bounded)

    def _cut_by_deadline(self, bounded: float | None, exc: BaseException) -> PassTimeout | None:
        """A statement whose timeout the deadline shortened, and that timed out: the pass's
        time was up, not the admin's (whose timeout this statement never had in full)."""
        if bounded is None or self._deadline is None or not _timed_out(exc):
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
            return found, changed
        except pymysql.err.OperationalError as exc:
            cut = self._cut_by_deadline(bounded, exc)
            if cut is not None:
                raise cut from None
            code = exc.args[0] if exc.args else 0
            if code in _UNREACHABLE_CODES:
                raise AdminUnreachable(f"{self.where}: connection lost ({_reason(exc)})") from None
            raise AdminQueryFailed(f"{self.where}: {_reason(exc)}") from None
        except pymysql.err.MySQLError as exc:
            raise AdminQueryFailed(f"{self.where}: {_reason(exc)}") from None
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
            raise AdminUnreachable(f"{self.where}: connection lost ({_reason(exc)})") from None
        self.round_trip_s = time.monotonic() - began
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
        return self._stage(hostgroups, desired, writer, _Writes())

    def _stage(
        self,
        hostgroups: Sequence[int],
        desired: Sequence[ServerRow],
        writer: int | None,
        writes: _Writes,
        current: Sequence[ServerRow] | None = None,
    ) -> int:
        """`current`: the staged rows of `hostgroups` as just read (else read here)."""
        if current is None:
            current = self.read_staging(hostgroups)
        statements = staging_statements(hostgroups, current, desired, writer=writer)
        # noted before the first statement goes out: a pass cut short anywhere after it puts
        # back what it wrote, and only that
        writes.note(hostgroups, current, desired)
        for statement in statements:
            self.execute(statement.sql, statement.params)
        return len(statements)

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
        hostgroups = list(plan.hostgroups.managed)
        said = warn or _say_nothing
        if staging_seen is not None and not plan.needs_load:
            kept = self._staged_already
            if kept is None or kept[0] is not plan or kept[1] is not staging_seen:
                seen = sort_rows(r for r in staging_seen if r.hostgroup_id in hostgroups)
                kept = (plan, staging_seen) if seen == sort_rows(plan.desired) else None
                self._staged_already = kept
            if kept is not None:
                return self._owed_save(plan, persist and save_owed, 0, said, reconnect)
        writes = _Writes()
        try:
            staged, aside, done = self._stage_plan(plan, writes)
        except BaseException as exc:
            self._put_back(plan, writes, exc, said, reconnect)
            if isinstance(exc, (AdminQueryFailed, BadRow)):
                raise ApplyFailed(f"staging failed, nothing loaded: {exc}") from None
            raise
        if not plan.needs_load:
            return self._owed_save(plan, persist and save_owed, staged, said, reconnect)
        try:
            self.execute(LOAD_SERVERS.sql)
        except AdminQueryFailed as exc:
            # refused: nothing went live. Any other failure may have come after ProxySQL ran
            # it; staging then stays as the pass wrote it, and live too, likely
            self._put_back(plan, writes, exc, said, reconnect)
            raise ApplyFailed(f"LOAD MYSQL SERVERS TO RUNTIME failed: {exc}") from None
        except BaseException as exc:
            # the answer lost (it may have run): the operator's rows set aside as live are his
            # again in staging either way, on a new connection; nothing of them went live
            self._write_back(aside, done, exc, said, reconnect)
            raise
        if on_load is not None:
            on_load()
        if aside:
            said(aside.describe())
        try:
            # before the write-back: disk is what is live, never an edit nobody loaded
            result = self._save(persist, staged=staged, loaded=True)
        except BaseException as exc:
            self._write_back(aside, done, exc, said, reconnect)
            raise
        self._write_back(aside, done, None, said, reconnect)
        return result

    def _stage_plan(self, plan: Plan, writes: _Writes) -> tuple[int, SetAside, _AsLive]:
        """The plan's rows staged and read back; before a LOAD, the rows of other hostgroups
        that differ from what is live staged as live (set aside). Raises ApplyFailed when the
        staging is not what this pass wrote."""
        hg = plan.hostgroups
        checked = [*hg.managed, *hg.templates]
        staged = self._stage(hg.managed, plan.desired, hg.writer, writes)
        if plan.adopted:
            staged += self._stage(hg.templates, plan.adopted, None, writes)
        wanted = sort_rows((*plan.desired, *plan.templates))
        if not plan.needs_load:
            self._verify(self.read_staging(checked), wanted)
            return staged, NOTHING_ASIDE, _AsLive()
        whole = self.read_whole()
        self._verify(whole.staged(checked), wanted)
        # templates nobody loaded yet are the roster this pass used, and templates this plan
        # adopts are its own: its LOAD carries them
        own = checked if plan.adopted or not whole.live(hg.templates) else list(hg.managed)
        ours = sort_rows(r for r in wanted if r.hostgroup_id in own)
        aside, done = self._set_aside(whole, own, ours, writes)
        return staged + len(done.tried), aside, done

    def _set_aside(
        self, whole: ClusterRows, own: Sequence[int], ours: Sequence[ServerRow], writes: _Writes
    ) -> tuple[SetAside, _AsLive]:
        """The staged rows outside `own` that differ from what is live (read in `whole`)
        staged as live, each only while it is still as read, and read back: `own` staged
        still as `ours`, every other row as live, else ApplyFailed (and neither LOAD nor SAVE
        goes out)."""
        aside = set_aside(whole, own)
        if not aside:
            return aside, _AsLive()
        writes.aside |= set(aside.hostgroups)
        # another cluster's or an operator's rows, taken as read: a row this pass could not
        # judge (a malformed hostname) is no reason to fail this cluster's LOAD
        writes.note(aside.hostgroups, whole.staged(aside.hostgroups), aside.live)
        tried = aside.as_live()
        done = _AsLive(tried, tuple(w for w in tried if self.write_guarded(w)))
        again = self.read_whole()
        self._verify(again.staged(own), ours, clean=not set_aside(again, own))
        return aside, done

    def _owed_save(
        self,
        plan: Plan,
        wanted: bool,
        staged: int,
        said: Callable[[str], None],
        reconnect: Callable[[], AdminClient] | None,
    ) -> ApplyResult:
        """The SAVE an earlier pass owes, with nothing to load. A SAVE writes the whole of
        mysql_servers to disk, so staged rows outside the managed hostgroups that differ from
        what is live (an operator's edit in progress) are set aside around it as around a
        LOAD: disk then holds what is live for every row this pass did not write, and a
        ProxySQL restart makes live nothing nobody loaded. When they cannot be set aside,
        nothing is saved and the SAVE stays owed."""
        if not wanted:
            return ApplyResult(staged=staged, loaded=False, saved=False)
        writes = _Writes()
        own = list(plan.hostgroups.managed)
        try:
            whole = self.read_whole()
            aside, done = self._set_aside(whole, own, whole.staged(own), writes)
        except BaseException as exc:
            self._put_back(plan, writes, exc, said, reconnect, held="a SAVE")
            if isinstance(exc, _IN_STEP):
                return ApplyResult(
                    staged=staged,
                    loaded=False,
                    saved=False,
                    save_error=(
                        "SAVE MYSQL SERVERS TO DISK still owed, not run: the staged rows of "
                        f"hostgroups this pass does not manage could not be set aside ({exc})"
                    ),
                )
            raise
        staged += len(done.tried)
        if aside:
            said(aside.describe(kept_from="saved to disk"))
        try:
            # before the write-back: disk is what is live, never an edit nobody loaded
            result = self._save(True, staged=staged, loaded=False)
        except BaseException as exc:
            self._write_back(aside, done, exc, said, reconnect, after="SAVE")
            raise
        # a SAVE that went out wrote what is live there, not the edit
        disk = "disk as runtime" if result.saved else "disk unchanged"
        unchanged = f"runtime unchanged, {disk}"
        self._write_back(aside, done, None, said, reconnect, after="SAVE", unchanged=unchanged)
        return result

    def _verify(
        self, readback: Sequence[ServerRow], wanted: Sequence[ServerRow], *, clean: bool = True
    ) -> None:
        if not clean or sort_rows(readback) != tuple(wanted):
            raise ApplyFailed(
                f"{self.where}: staging rows changed under us (another writer?), nothing loaded"
            )

    def _put_back(
        self,
        plan: Plan,
        writes: _Writes,
        failure: BaseException,
        said: Callable[[str], None],
        reconnect: Callable[[], AdminClient] | None,
        *,
        held: str = "a LOAD",
    ) -> None:
        """The rows this call wrote put back as it read them (never what is live: staging
        holds the operator's intent), so nobody's LOAD makes a plan live that this pass did
        not. A row someone else wrote since stays theirs. `held`: the statement that did not
        go out."""
        if not writes.wrote:
            return
        hostgroups = sorted(writes.hostgroups)

        def put_back(admin: AdminClient) -> None:
            current = admin.read_staging(hostgroups, any_host=True)
            wanted = undone(writes.before, writes.wrote, current)
            for statement in staging_statements(
                hostgroups, current, wanted, writer=plan.hostgroups.writer
            ):
                admin.execute(statement.sql, statement.params)

        problem = self._on_a_working_connection(put_back, failure, reconnect)
        if problem is None:
            return
        mine = {k: r for k, r in writes.wrote.items() if k[0] not in writes.aside}
        theirs = {k: r for k, r in writes.wrote.items() if k[0] in writes.aside}
        if mine:
            rows = "; ".join(left_half_written(writes.before, mine))
            said(
                f"staged rows left half-written: {rows} ({problem}); "
                "the next acting pass puts them back"
            )
        if theirs:
            groups = ", ".join(str(hg) for hg in sorted({k[0] for k in theirs}))
            unchanged = "runtime and disk unchanged" if "SAVE" in held else "runtime unchanged"
            said(
                f"an operator's staged edit of hostgroup {groups} was set aside as live for "
                f"{held} that did not go out, and could not be written back ({problem}): it "
                f"is gone from mysql_servers; {unchanged}"
            )

    def _write_back(
        self,
        aside: SetAside,
        done: _AsLive,
        failure: BaseException | None,
        said: Callable[[str], None],
        reconnect: Callable[[], AdminClient] | None,
        *,
        after: str = "LOAD",
        unchanged: str = "runtime unchanged",
    ) -> None:
        """The staged edit set aside for the LOAD (or SAVE), staged again as it was read (no
        LOAD): each row only while it still holds the live row this pass put there. A row
        someone wrote in between (before it was staged as live, or since) stays as they wrote
        it, and that is said once."""
        if not aside:
            return
        missed = [w for w in done.tried if w not in done.went_in]
        answered: set[GuardedWrite] = set()

        def write_back(admin: AdminClient) -> None:
            # a second connection's try skips the rows the first one's answers covered
            for write in written_back(done.went_in):
                if write not in answered:
                    if not admin.write_guarded(write):
                        missed.append(write)
                    answered.add(write)

        problem = self._on_a_working_connection(write_back, failure, reconnect)
        warning = changed_while_aside(missed)
        if warning is not None:
            said(warning)
        if problem is not None:
            groups = ", ".join(str(hg) for hg in aside.hostgroups)
            said(
                f"an operator's staged edit of hostgroup {groups} could not be staged again "
                f"after the {after} ({problem}): it is gone from mysql_servers; {unchanged}"
            )

    def _on_a_working_connection(
        self,
        work: Callable[[AdminClient], None],
        failure: BaseException | None,
        reconnect: Callable[[], AdminClient] | None,
    ) -> str | None:
        """`work` done on this connection when it is in step (no failure, or a statement
        ProxySQL refused), else, or when that fails, on one new connection, each bounded by
        the admin's own timeouts. None when done, else why not."""
        problem = f"{type(failure).__name__}: {failure}" if failure is not None else ""
        if failure is None or isinstance(failure, _IN_STEP):
            try:
                work(self)
                return None
            except Exception as exc:  # whatever it was, the new connection is the next try
                problem = f"{type(exc).__name__}: {exc}"
        if reconnect is None:
            return problem
        try:
            fresh = reconnect()
        except Exception as exc:
            return f"{problem}; a new admin connection failed too: {exc}"
        try:
            work(fresh)
        except Exception as exc:
            return f"{problem}; on a new admin connection: {type(exc).__name__}: {exc}"
        finally:
            fresh.close()
        return None

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


@dataclass(frozen=True, slots=True)
class _AsLive:
    """The writes that staged set-aside rows as live: all `tried`, and those that `went_in`
    (a row's write that found someone's newer edit did not)."""

    tried: tuple[GuardedWrite, ...] = ()
    went_in: tuple[GuardedWrite, ...] = ()


class _Writes:
    """What one apply() wrote to staging, row by row: the row it found first (None: none) and
    the row it wrote last (None: deleted). One call's own: never shared between passes."""

    def __init__(self) -> None:
        self.before: dict[tuple[int, str, int], ServerRow | None] = {}
        self.wrote: dict[tuple[int, str, int], ServerRow | None] = {}
        self.hostgroups: set[int] = set()
        # the hostgroups set aside for a LOAD or SAVE: the rows written there are others'
        self.aside: set[int] = set()

    def note(
        self, hostgroups: Sequence[int], current: Sequence[ServerRow], desired: Sequence[ServerRow]
    ) -> None:
        inside = set(hostgroups)
        have = {r.key: r for r in current if r.hostgroup_id in inside}
        want = {r.key: r for r in desired}
        for key in have.keys() | want.keys():
            if have.get(key) != want.get(key):
                self.before.setdefault(key, have.get(key))
                self.wrote[key] = want.get(key)
        self.hostgroups |= inside


# a failure after which the connection is still in step: ProxySQL answered, with a refusal, or
# the pass itself found the rows wrong
_IN_STEP = (AdminQueryFailed, BadRow, ApplyFailed, StagingRefused)


def _say_nothing(_text: str) -> None:
    return None


def _set_timeouts(conn: pymysql.connections.Connection[Any], seconds: float) -> None:
    """The read and write timeout of `conn`'s next statement. PyMySQL takes them only at
    connect and has no setter: it keeps them in `_read_timeout` / `_write_timeout` and sets its
    socket's timeout from them before each read or write (tracking what it set last in
    `_current_timeout`). The socket is set here too, for the answers this module reads on it
    itself (_one_value). The one place that touches these private attributes."""
    conn._read_timeout = seconds  # type: ignore[attr-defined]
    conn._write_timeout = seconds  # type: ignore[attr-defined]
    sock = getattr(conn, "_sock", None)
    if sock is not None and getattr(conn, "_current_timeout", None) != seconds:
        sock.settimeout(seconds)
        conn._current_timeout = seconds  # type: ignore[attr-defined]


def _timed_out(exc: BaseException) -> bool:
    """Whether a failure was a timeout: the socket's own, or PyMySQL's word for it (it wraps
    the socket's error in OperationalError, keeping it as the context)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError):
            return True
        current = current.__cause__ or current.__context__
    return "timed out" in str(exc)


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
