"""The Galera probe: a connection's first probe reads SHOW VARIABLES and learns which of the
variables its server has; later probes on it read just those with SELECT @@global and the status
in the same row, from the server's status table (SHOW STATUS where there is none, or where the
pairs may be cut short), and the facts come out the same every way."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from pymysql.err import ProgrammingError

from galera_checker import probe as galera_probe
from galera_checker.probe import (
    PROBE_SQL,
    STATUS_NAMES,
    STATUS_TABLES,
    VARIABLE_NAMES,
    one_row_sql,
)

STATUS = [
    ("wsrep_cluster_status", "Primary"),
    ("wsrep_ready", "ON"),
    ("wsrep_local_state", "4"),
]
# what a MariaDB node has of VARIABLE_NAMES (no super_read_only, no pxc_maint_mode)
MARIADB = {
    "read_only": ("ON", 1),
    "wsrep_reject_queries": ("NONE", "NONE"),
    "wsrep_sst_donor_rejects_queries": ("OFF", 0),
    "wsrep_desync": ("OFF", 0),
    "wsrep_provider_options": ("gmcast.segment = 2; pc.weight = 1", "gmcast.segment = 2; ..."),
    "wsrep_on": ("ON", 1),
}


class FakeServer:
    """Answers the probe's statements as a MariaDB Galera node, noting each query it got.
    `tables`: the status tables it has (`empty_table`: holding nothing); `longest`: its
    group_concat_max_len."""

    def __init__(
        self,
        variables: dict[str, tuple[str, object]],
        tables: tuple[str, ...] = STATUS_TABLES[:1],
        longest: int = 1 << 20,
        empty_table: bool = False,
    ) -> None:
        self.variables = variables
        self.tables = tables
        self.longest = longest
        self.empty_table = empty_table
        self.queries: list[str] = []

    def results(self, sql: str, args: Sequence[object] | None) -> list[list[tuple[Any, ...]]]:
        self.queries.append(sql)
        if sql == PROBE_SQL:
            assert args == STATUS_NAMES + VARIABLE_NAMES
            shown = [(n.upper(), shown) for n, (shown, _) in self.variables.items()]
            return [list(STATUS), shown]
        assert args is not None and set(args) <= set(STATUS_NAMES)
        if sql == galera_probe.STATUS_SQL:
            return [list(STATUS)]
        names = re.findall(r"@@global\.(\w+)", sql)
        unknown = [n for n in names if n not in self.variables]
        if unknown:
            raise AssertionError(f"Unknown system variable '{unknown[0]}'")
        values = tuple(self.variables[n][1] for n in names)
        table = re.search(r"GROUP_CONCAT\(.*\) FROM (\S+) WHERE", sql)
        if table is None:
            return [list(STATUS), [values]]
        if table.group(1) not in self.tables:
            raise ProgrammingError(1146, f"Table '{table.group(1)}' doesn't exist")
        held = () if self.empty_table else STATUS
        pairs = ";".join(f"{n.upper()}={v}" for n, v in held if n in args)
        return [[(*values, pairs[: self.longest] or None, self.longest)]]


class FakeCursor:
    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.sets: list[list[tuple[Any, ...]]] = []

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, args: Sequence[object] | None = None) -> None:
        self.sets = self.server.results(sql, args)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.sets[0]

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.sets[0][0] if self.sets[0] else None

    def nextset(self) -> bool:
        self.sets = self.sets[1:]
        return bool(self.sets)


class FakeConnection:
    def __init__(self, server: FakeServer) -> None:
        self.server = server

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.server)


def test_the_first_probe_learns_the_variables_and_later_ones_select_just_those() -> None:
    server = FakeServer(MARIADB)
    conn = FakeConnection(server)

    first = galera_probe.probe(conn)
    later = [galera_probe.probe(conn) for _ in range(2)]

    present = (
        "read_only",
        "wsrep_reject_queries",
        "wsrep_sst_donor_rejects_queries",
        "wsrep_desync",
        "wsrep_provider_options",
        "wsrep_on",
    )
    later_sql = one_row_sql(present, len(STATUS_NAMES), STATUS_TABLES[0])
    assert server.queries == [PROBE_SQL] + [later_sql] * 2
    assert "super_read_only" not in server.queries[1]
    assert first.values["read_only"] == "ON"
    assert later[0].values["read_only"] == "ON", "1 from @@global reads as SHOW's ON"
    assert later[0].values["wsrep_desync"] == "OFF"
    assert later[0].values["wsrep_cluster_status"] == "Primary"
    assert first.read_only and later[1].read_only


def test_a_new_connection_learns_again() -> None:
    """A reconnect may reach a server restarted as another flavour or version."""
    server = FakeServer(MARIADB)
    galera_probe.probe(FakeConnection(server))
    galera_probe.probe(FakeConnection(server))
    assert server.queries == [PROBE_SQL, PROBE_SQL]


def test_a_server_without_any_of_the_variables_is_asked_its_status_only() -> None:
    server = FakeServer({}, tables=())
    conn = FakeConnection(server)
    galera_probe.probe(conn)
    facts = galera_probe.probe(conn)
    assert server.queries[-1] == galera_probe.STATUS_SQL
    assert facts.values == {name: value for name, value in STATUS}


def facts_of(server: FakeServer) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """The facts of a connection's first probe and of its third."""
    conn = FakeConnection(server)
    first = galera_probe.probe(conn).values
    galera_probe.probe(conn)
    return first, galera_probe.probe(conn).values


@pytest.mark.parametrize(
    ("tables", "longest", "asked_last"),
    [
        (STATUS_TABLES[:1], 1 << 20, "information_schema.GLOBAL_STATUS"),
        (STATUS_TABLES[1:], 1 << 20, "performance_schema.global_status"),
        ((), 1 << 20, "SHOW GLOBAL STATUS"),
        (STATUS_TABLES, 40, "SHOW GLOBAL STATUS"),
    ],
    ids=["mariadb", "mysql", "no-status-table", "pairs-cut-short"],
)
def test_the_status_is_read_where_the_server_keeps_it_and_the_facts_are_the_same(
    tables: tuple[str, ...], longest: int, asked_last: str
) -> None:
    server = FakeServer(MARIADB, tables=tables, longest=longest)
    _, later = facts_of(server)
    _, by_show_status = facts_of(FakeServer(MARIADB, tables=()))
    assert later == by_show_status
    assert later["wsrep_cluster_status"] == "Primary" and later["read_only"] == "ON"
    assert asked_last in server.queries[-1]
    assert server.queries[-2] == server.queries[-1], "learnt once per connection"


def test_a_status_table_that_holds_no_status_is_not_believed() -> None:
    """A server answering NULL for the pairs (a status table it keeps empty) is asked with
    SHOW STATUS: its status is never taken for none."""
    server = FakeServer(MARIADB, empty_table=True)
    _, later = facts_of(server)
    assert later["wsrep_cluster_status"] == "Primary"
    assert "SHOW GLOBAL STATUS" in server.queries[-1]
