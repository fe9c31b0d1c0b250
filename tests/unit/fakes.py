"""The unit tests' fakes of the runner's ports: ProxySQL's admin in memory, probers that answer
as told, and the constructor arguments that give them to a PassRunner."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, cast

from checker_core.core.model import COLUMNS, ClusterRows, NodeAddress, ServerRow, sort_rows
from checker_core.core.statements import LOAD_SERVERS, SAVE_SERVERS
from checker_core.edges.admin_errors import AdminQueryFailed
from checker_core.edges.backend import Prober
from checker_core.edges.pending import PendingProbes
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.ports import Ports
from checker_core.passes.runner import PassRunner
from tests.unit.galera_cases import probe_down, probe_ok


class MemoryAdmin(AdminClient):
    """ProxySQL's three layers of mysql_servers in memory: statements edit staging, a LOAD
    copies it to runtime, a SAVE to disk. `meddle` runs after the first staging write (someone
    else's write)."""

    def __init__(self, staging: Iterable[ServerRow], *, failing_saves: int = 0) -> None:
        self.staging = {r.key: r for r in staging}
        self.runtime = dict(self.staging)
        self.disk = dict(self.staging)
        self.sent: list[str] = []
        self.failing_saves = failing_saves
        self.meddle: list[ServerRow] = []
        self.where = "memory admin"
        self._parsed = {}
        self._changed = 0

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        return self._rows_of(hostgroups)

    def _rows_of(self, hostgroups: Iterable[int]) -> ClusterRows:
        # every read of rows goes through here: a test that counts read_rows counts its own
        wanted = set(hostgroups)
        return ClusterRows(
            sort_rows(r for r in self.runtime.values() if r.hostgroup_id in wanted),
            sort_rows(r for r in self.staging.values() if r.hostgroup_id in wanted),
        )

    def fresh_round_trip_s(self) -> float:
        return self.round_trip_s  # in memory: the round trip it is given, never timed

    def read_packed(self, hostgroups: Iterable[int]) -> str:
        """read_rows' rows packed as ProxySQL answers rows_as_one_value: runtime's ('r'), then
        staging's ('m'), each column's text in hex ('x...') or 'n' for NULL."""
        rows = self._rows_of(hostgroups)
        return "\n".join(
            f"{tag}|" + "|".join("x" + str(value).encode().hex() for value in row.values())
            for tag, part in (("r", rows.runtime), ("m", rows.staging))
            for row in part
        )

    def read_staging(
        self, hostgroups: Iterable[int], *, any_host: bool = False
    ) -> tuple[ServerRow, ...]:
        return self._rows_of(hostgroups).staging

    def read_whole(self) -> ClusterRows:
        return ClusterRows(sort_rows(self.runtime.values()), sort_rows(self.staging.values()))

    def connections_in_use(self, hostgroups: Iterable[int]) -> dict[tuple[int, NodeAddress], int]:
        return {}

    def changes(self, sql: str, params: Sequence[object] = ()) -> int:
        self.execute(sql, params)
        return self._changed

    def _guarded(self, sql: str, params: Sequence[object]) -> int:
        """A write made only while its row holds what it expects (guarded_statement's forms)."""
        width = len(COLUMNS)
        if sql.startswith("INSERT INTO mysql_servers"):
            row = ServerRow.from_admin(params[:width], any_host=True)
            if row.key in self.staging:
                return 0
            self.staging[row.key] = row
            return 1
        expect = ServerRow.from_admin(params[-width:], any_host=True)
        if self.staging.get(expect.key) != expect:
            return 0
        if sql.startswith("DELETE"):
            del self.staging[expect.key]
        else:
            values = (*expect.values()[:3], *params[: width - 3])
            self.staging[expect.key] = ServerRow.from_admin(values, any_host=True)
        return 1

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        self.sent.append(sql)
        self._changed = 0
        if sql.startswith(("UPDATE mysql_servers", "INSERT INTO mysql_servers")) or (
            sql.startswith("DELETE FROM mysql_servers") and len(params) == len(COLUMNS)
        ):
            self._changed = self._guarded(sql, params)
        elif sql.startswith("DELETE FROM mysql_servers"):
            del self.staging[tuple(params)]  # type: ignore[arg-type]
        elif sql.startswith("REPLACE INTO mysql_servers"):
            row = ServerRow.from_admin(params)
            self.staging[row.key] = row
        elif sql == LOAD_SERVERS.sql:
            self.runtime = dict(self.staging)
        elif sql == SAVE_SERVERS.sql and self.failing_saves:
            self.failing_saves -= 1
            raise AdminQueryFailed("memory admin: disk full")
        elif sql == SAVE_SERVERS.sql:
            self.disk = dict(self.staging)
        if self.meddle and sql.startswith(("DELETE", "REPLACE", "UPDATE", "INSERT")):
            for row in self.meddle:
                self.staging[row.key] = row
            self.meddle = []
        return []

    def writes(self) -> list[str]:
        """What was sent besides reads (the proxy's peers list is asked every pass)."""
        return [sql for sql in self.sent if not sql.startswith("SELECT")]

    def close(self) -> None:
        pass


@contextlib.contextmanager
def hung_admin(timeout_s: float = 30.0) -> Iterator[AdminClient]:
    """A real AdminClient on a connection whose ProxySQL never answers (hung, or its answer
    stuck in a slow network): a read on it ends only by its timeout. `timeout_s`: its
    proxysql.read_timeout_ms."""
    import pymysql

    ours, theirs = socket.socketpair()
    conn = pymysql.connections.Connection(
        defer_connect=True, read_timeout=timeout_s, write_timeout=timeout_s
    )
    # what connect() would have set up on a socket of its own
    conn._sock = ours  # type: ignore[attr-defined]
    conn._rfile = ours.makefile("rb")  # type: ignore[attr-defined]
    conn._next_seq_id = 0  # type: ignore[attr-defined]
    conn._closed = False  # type: ignore[attr-defined]
    ours.settimeout(timeout_s)
    conn._current_timeout = timeout_s  # type: ignore[attr-defined]
    try:
        yield AdminClient(conn, "hung admin", timeout_s=timeout_s)
    finally:
        ours.close()
        theirs.close()


class HealthyProber:
    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        pending = PendingProbes(tuple(nodes), 0.0)
        for node in nodes:
            pending.results.put(probe_ok(node))
        return pending

    def probe_all(self, nodes: Sequence[NodeAddress], deadline: float) -> dict[NodeAddress, Any]:
        return self.start(nodes, deadline).collect(deadline)

    def close(self) -> None:
        pass


class ProberSaying(HealthyProber):
    def __init__(self, down: set[NodeAddress]) -> None:
        self.down = down

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        pending = PendingProbes(tuple(nodes), 0.0)
        for node in nodes:
            pending.results.put(probe_down(node) if node in self.down else probe_ok(node))
        return pending


def ports(
    admin: AdminClient | Callable[[], AdminClient] | None = None,
    prober: object | None = None,
    clock: Callable[[], float] | None = None,
    monotonic: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """PassRunner's (and Fleet's) `ports` argument for these fakes; what is not given stays the
    real one.
    `admin`: the admin every connect returns, or a function asked at each connect (a proxy
    that comes back as another connection)."""
    given: dict[str, Any] = {}
    if admin is not None:
        connect = admin if callable(admin) and not isinstance(admin, AdminClient) else None
        given["connect_admin"] = (
            (lambda _s, _d=None: connect()) if connect else (lambda _s, _d=None: admin)
        )
    if prober is not None:
        given["new_prober"] = lambda _s: cast(Prober, prober)
    if clock is not None:
        given["clock"] = clock
    if monotonic is not None:
        given["monotonic"] = monotonic
    return {"ports": Ports(**given)}


def retuned(runner: PassRunner, **changes: Any) -> PassRunner:
    """A runner with the same ports, store and clocks as `runner`, its cluster's settings
    changed by `changes` (what a daemon's reload of that cluster makes)."""
    cluster = replace(runner.cluster, **changes)
    return PassRunner(
        runner.settings.only(cluster),
        runner.kind,
        runner.persistent,
        ports=runner.ports,
        store=runner.store,
        write_gate=runner.write_gate,
    )
