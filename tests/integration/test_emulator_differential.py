"""The lab's emulator held to the real thing: the checkers' own admin traffic, sent to both.

One script of what the checkers do to ProxySQL (the reads of a pass, staging, LOAD and SAVE, the
native-manager and peer reads, the runtime variables, the scheduler row, and statements ProxySQL
refuses) runs through the checkers' own AdminClient against the emulator and against a real
ProxySQL, each endpoint fresh and empty. Every statement's answer is recorded as the driver sees
it (column names and type codes, the rows, or the error's code and text) and the two transcripts
must agree statement by statement. Row order is compared where ProxySQL promises one (ORDER BY);
values that are a clock or a hash are compared by their form. What the emulator cannot do is
listed in EMULATOR_CANNOT, never silently different.

Skips only on a machine without a real proxysql (PROXYSQL_BIN, PATH): nothing to hold it to.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest

from checker_core.core.leadership import ProxyAddress
from checker_core.core.model import (
    Change,
    ChangeKind,
    Hostgroups,
    NodeAddress,
    Plan,
    ServerRow,
    ServerStatus,
)
from checker_core.core.schema import Checker
from checker_core.core.statements import LOAD_SERVERS
from checker_core.edges import native, proxysql_peers, proxysql_sessions
from checker_core.edges.admin_errors import AdminError
from checker_core.edges.memory import StateStore
from checker_core.edges.proxysql import AdminClient
from checker_core.scheduler import (
    SchedulerRow,
    existing_row_ids,
    install_statements,
    retire_statements,
)
from tests.lab.process import free_port
from tests.lab.proxysql import ProxySQLLab, admin_cursor, find_proxysql_binary

pytestmark = pytest.mark.proxysql

# What the emulator does not do, and how this test keeps it out of the comparison.
EMULATOR_CANNOT = {
    "monitor": "ProxySQL's monitor SHUNs servers it cannot reach; the emulator has none, so the "
    "real one's is switched off here (mysql-monitor_enabled=false) and the servers are never "
    "reachable anyway. Tests that meet a real monitor assert what a SHUN may change.",
    "traffic": "the emulator routes no client: ConnUsed stays 0 unless a lab statement (LAB HOLD) "
    "plays a held connection; a held connection's OFFLINE_HARD row is covered by "
    "test_lab_proxysql and test_held_connections against both",
    "values": "a clock (epoch, updated_at, Uptime_s, strftime('%s','now')) and a checksum differ "
    "between any two proxies; they are compared by form (digits, 0x and hex digits)",
    "peers": "a listed peer is never reached: its stats rows are those of a peer not yet heard "
    "from (as on a real ProxySQL whose peers are down); the lab's harness writes what a check "
    "would learn (LAB STATS) where a test needs a cluster",
}

# (column name, what its value must look like) for values that are a clock or a hash
VOLATILE = {
    "epoch": re.compile(r"^\d+$"),
    "updated_at": re.compile(r"^\d+$"),
    "uptime_s": re.compile(r"^\d+$"),
    "last_check_ms": re.compile(r"^\d+$"),
    "variable_value": re.compile(r"^\d+$"),  # stats_mysql_global's ProxySQL_Uptime
    # ProxySQL prints its 64-bit hash as "0x%0X%0X" of two halves: 3 to 18 characters
    "checksum": re.compile(r"^(0x[0-9A-F]{1,16}|)$"),
    "strftime('%s','now')": re.compile(r"^\d+$"),
}
VOLATILE_STATEMENTS = (
    "runtime_checksums_values",
    "stats_mysql_global",
    "strftime(",
    "stats_proxysql_servers_",
)

HG = Hostgroups(
    writer=100, reader=101, backup_writer=102, offline=9100, config_writer=8100, config_reader=8101
)
NODES = (("127.0.0.1", 13306), ("127.0.0.1", 13307), ("127.0.0.1", 13308))


@dataclass(frozen=True)
class Answer:
    """One statement as the driver saw it."""

    sent: str
    columns: tuple[tuple[str, int], ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    error: tuple[int, str] | None = None


class _TapCursor:
    def __init__(self, cursor: Any, transcript: list[Answer]) -> None:
        self._cursor = cursor
        self._transcript = transcript
        self._rows: tuple[tuple[Any, ...], ...] = ()

    def __enter__(self) -> _TapCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cursor.close()

    def execute(self, sql: str, params: Any = None) -> int:
        sent = self._cursor.mogrify(sql, params)
        try:
            count = int(self._cursor.execute(sql, params))
        except pymysql.err.MySQLError as exc:
            code, text = (*exc.args, 0, "")[:2]
            self._transcript.append(Answer(sent, error=(int(code), str(text))))
            raise
        description = self._cursor.description or ()
        self._rows = tuple(tuple(row) for row in self._cursor.fetchall())
        columns = tuple((str(d[0]), int(d[1])) for d in description)
        self._transcript.append(Answer(sent, columns, self._rows))
        return count

    def fetchall(self) -> tuple[tuple[Any, ...], ...]:
        return self._rows

    def mogrify(self, sql: str, params: Any = None) -> str:
        return str(self._cursor.mogrify(sql, params))


class _Tap:
    """A PyMySQL connection that records every statement's answer. AdminClient asks through its
    cursor, or (the rows of a pass, one packed value) on its socket: _TapAdmin records those."""

    def __init__(self, conn: Any, transcript: list[Answer]) -> None:
        self._conn = conn
        self.transcript = transcript

    def cursor(self) -> _TapCursor:
        return _TapCursor(self._conn.cursor(), self.transcript)

    def close(self) -> None:
        self._conn.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)  # the socket, the encoding and the decoders


class _TapAdmin(AdminClient):
    """Records each one-value answer read on the socket, its packed rows one line a row (the
    order group_concat gives them is not ProxySQL's promise), always decoded."""

    def __init__(self, conn: _Tap) -> None:
        super().__init__(conn, "differential")  # type: ignore[arg-type]
        self._tap = conn

    def _one_value(
        self, sql: str, params: Sequence[object], last: bytes | None = None
    ) -> tuple[bytes, object]:
        sent = self._tap.cursor().mogrify(sql, tuple(params))
        try:
            raw, value = super()._one_value(sql, params, None)
        except AdminError as exc:
            self._tap.transcript.append(Answer(sent, error=(0, str(exc))))
            raise
        lines = sorted(str(value).split("\n")) if value is not None else []
        self._tap.transcript.append(Answer(sent, (("value", 0),), tuple((v,) for v in lines)))
        return raw, value


def tapped(lab: ProxySQLLab) -> tuple[AdminClient, list[Answer]]:
    transcript: list[Answer] = []
    client = _TapAdmin(_Tap(lab.connect(), transcript))
    return client, transcript


# ------------------------------------------------------------------------- the checkers' script


def _row(hostgroup: int, node: int, status: ServerStatus = ServerStatus.ONLINE) -> ServerRow:
    host, port = NODES[node]
    return ServerRow(hostgroup, host, port, status=status, weight=1000, comment="it's node " + host)


def _first_layout() -> Plan:
    desired = (
        _row(HG.writer, 0),
        _row(HG.reader, 1),
        _row(HG.reader, 2),
        _row(HG.backup_writer, 1),
    )
    roster = tuple(_row(hg, n) for hg in HG.templates for n in range(3))
    changes = tuple(Change(ChangeKind.ADD, None, row, "healthy") for row in desired)
    return Plan(HG, desired, changes, adopted=roster, templates=roster)


def _failover(before: Plan) -> Plan:
    """The writer drained, node 1 promoted, node 2 parked offline: deletes, updates, adds."""
    desired = (
        _row(HG.writer, 0, ServerStatus.OFFLINE_SOFT),
        _row(HG.writer, 1),
        _row(HG.reader, 1),
        _row(HG.offline, 2),
    )
    changes = (
        Change(ChangeKind.UPDATE, before.desired[0], desired[0], "down"),
        Change(ChangeKind.ADD, None, desired[1], "promoted"),
        Change(ChangeKind.REMOVE, before.desired[2], None, "offline"),
        Change(ChangeKind.ADD, None, desired[3], "offline"),
    )
    return Plan(HG, desired, changes, templates=before.adopted)


def _refused(admin: AdminClient) -> None:
    """Statements ProxySQL refuses: the error's code and text are part of the answer."""
    refused = (
        (
            "REPLACE INTO mysql_servers (hostgroup_id, hostname, port, weight) "
            "VALUES (%s, %s, %s, %s)",
            (HG.writer, "127.0.0.1", 13306, -1),
        ),
        (
            "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (%s, %s, %s)",
            (HG.config_writer, "127.0.0.1", 13306),
        ),
        ("SELECT * FROM nonexisting_table", ()),
        ("SELECT no_such_column FROM runtime_mysql_servers", ()),
        ("SELEC 1", ()),
        ("INSERT INTO scheduler (interval_ms, filename) VALUES (%s, %s)", (1, "/bin/true")),
        (
            "UPDATE mysql_servers SET status = %s WHERE hostgroup_id = %s",
            ("BROKEN", HG.config_writer),
        ),
    )
    for sql, params in refused:
        try:
            admin.execute(sql, params)
        except AdminError:
            continue
        raise AssertionError(f"accepted: {sql}")


def checkers_script(
    admin: AdminClient, operator: Callable[[str], None], config: Path, peers: tuple[int, int]
) -> None:
    """What the checkers send, in a pass's order and beside it (operator: statements a person
    runs between them, unrecorded)."""
    admin.read_rows(HG.all)
    admin.connections_in_use(HG.managed)
    first = _first_layout()
    admin.apply(first, persist=True)
    proxysql_peers.read_checksum(admin)
    admin.read_rows(HG.all)
    admin.connections_in_use(HG.all)
    admin.apply(_failover(first), persist=False)
    admin.read_rows(HG.all)
    admin.execute(LOAD_SERVERS.sql)  # an empty plan's LOAD: the checksum's version still grows
    proxysql_peers.read_checksum(admin)
    admin.execute("SELECT * FROM stats_mysql_connection_pool WHERE hostgroup = %s", (HG.writer,))

    native.read(admin)
    operator(
        "INSERT INTO mysql_galera_hostgroups (writer_hostgroup, backup_writer_hostgroup, "
        "reader_hostgroup, offline_hostgroup, active, max_writers, writer_is_also_reader, "
        "max_transactions_behind, comment) VALUES (700, 702, 701, 709, 1, 1, 0, 100, 'x')"
    )
    native.read(admin)
    operator("LOAD MYSQL SERVERS TO RUNTIME")
    native.read(admin)

    me = ProxyAddress("127.0.0.1", 6032)
    proxysql_peers.list_peers(admin)
    for port in peers:
        operator(f"INSERT INTO proxysql_servers (hostname, port) VALUES ('127.0.0.1', {port})")
    operator("LOAD PROXYSQL SERVERS TO RUNTIME")
    listed = proxysql_peers.list_peers(admin)
    proxysql_peers.read_cluster_view(admin, me, listed)

    admin.read_runtime_variables(
        ("mysql-connect_timeout_server_max", "mysql-monitor_enabled", "no-such-variable")
    )
    # a switchover: who holds the old writer; the delay an older version lowered, put back
    proxysql_sessions.attached_sessions(admin, HG.writer, NodeAddress("127.0.0.1", 3311))
    store = StateStore(config.parent / "state", Checker.GALERA)
    store.ensure_dir()
    record = proxysql_sessions.record_path(store, "lab")
    record.write_text('{"value": "5", "pid": 1}')
    operator(
        "UPDATE global_variables SET variable_value = '0' "
        "WHERE variable_name = 'mysql-auto_increment_delay_multiplex'"
    )
    operator("LOAD MYSQL VARIABLES TO RUNTIME")
    operator(  # monitoring stays off on both: a value whose runtime both agree on
        "UPDATE global_variables SET variable_value = 'true' "
        "WHERE variable_name = 'mysql-monitor_enabled'"
    )
    proxysql_sessions.put_back_leftover(admin, store, "lab")  # refused: it would load the edit
    operator("LOAD MYSQL VARIABLES TO MEMORY")  # the edit undone
    proxysql_sessions.put_back_leftover(admin, store, "lab")

    row = SchedulerRow(
        interval_ms=2000,
        filename="/usr/local/bin/galera-checker",
        arg1=f"--config={config}",
        arg2="run",
        comment="proxysql-checkers galera",
    )
    for existing in (None, *existing_row_ids(admin, Checker.GALERA, config)):
        for statement in install_statements(row, existing):
            admin.execute(statement.sql, statement.params)
    ids = existing_row_ids(admin, Checker.GALERA, config)
    for statement in retire_statements(ids):
        admin.execute(statement.sql, statement.params)
    admin.execute("SELECT * FROM runtime_scheduler ORDER BY id")

    _refused(admin)
    admin.read_rows(HG.all)  # nothing a refused statement touched was changed


# ------------------------------------------------------------------------------- the endpoints


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ProxySQLLab]]:
    binary = find_proxysql_binary()
    if binary is None:
        pytest.skip("no real proxysql (PROXYSQL_BIN, PATH): nothing to hold the emulator to")
    if importlib.util.find_spec("mysql_mimic") is None:
        pytest.skip("no mysql-mimic: no emulator to hold to the real thing")
    labs = {
        "real": ProxySQLLab(tmp_path_factory.mktemp("real"), binary=binary),
        "emulator": ProxySQLLab(tmp_path_factory.mktemp("emulator"), emulator=True),
    }
    try:
        for lab in labs.values():
            lab.up()
        for lab in labs.values():
            with admin_cursor(lab) as cur:
                cur.execute(
                    "UPDATE global_variables SET variable_value = 'false' "
                    "WHERE variable_name = 'mysql-monitor_enabled'"
                )
                cur.execute("LOAD MYSQL VARIABLES TO RUNTIME")
        yield labs
    finally:
        for lab in labs.values():
            lab.down()


def transcript_of(lab: ProxySQLLab, config: Path, peers: tuple[int, int]) -> list[Answer]:
    lab.reset()
    with admin_cursor(lab) as cur:
        cur.execute("DELETE FROM scheduler")
        cur.execute("DELETE FROM mysql_replication_hostgroups")

    def operator(sql: str) -> None:
        with admin_cursor(lab) as cur:
            cur.execute(sql)

    admin, transcript = tapped(lab)
    try:
        checkers_script(admin, operator, config, peers)
    finally:
        admin.close()
    return transcript


def _comparable(answer: Answer) -> tuple[Any, ...]:
    """The answer with clocks and hashes replaced by whether they have the right form, and rows
    sorted unless the statement orders them."""
    volatile = any(word in answer.sent for word in VOLATILE_STATEMENTS)
    names = [name.lower() for name, _ in answer.columns]
    rows = []
    for row in answer.rows:
        values: list[Any] = []
        for name, value in zip(names, row, strict=True):
            form = VOLATILE.get(name) if volatile or name in ("epoch", "checksum") else None
            if form is not None and value is not None:
                values.append(f"<{name}: {'ok' if form.match(str(value)) else repr(value)}>")
            else:
                values.append(value)
        rows.append(tuple(values))
    if " ORDER BY " not in answer.sent.upper():
        rows.sort(key=repr)
    return (answer.sent, answer.columns, tuple(rows), answer.error)


def test_the_emulator_answers_the_checkers_as_proxysql_does(
    endpoints: dict[str, ProxySQLLab], tmp_path: Path
) -> None:
    config = tmp_path / "galera.toml"
    peers = (free_port(), free_port())  # closed ports: listed, never reached
    real = transcript_of(endpoints["real"], config, peers)
    emulated = transcript_of(endpoints["emulator"], config, peers)
    assert len(real) >= 40, "the script reached too few statements"
    assert any(a.error for a in real), "no refused statement reached ProxySQL"
    differences = [
        f"{r.sent}\n    real:     {_comparable(r)[1:]}\n    emulator: {_comparable(e)[1:]}"
        for r, e in zip(real, emulated, strict=False)
        if _comparable(r) != _comparable(e)
    ]
    if len(real) != len(emulated):
        differences.append(f"{len(real)} statements on the real one, {len(emulated)} emulated")
    assert not differences, "\n".join(differences)
