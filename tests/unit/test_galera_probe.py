"""The Galera probe: a connection's first probe reads SHOW VARIABLES and learns which of the
variables its server has; later probes on it read just those with SELECT @@global, and the
facts come out the same either way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from galera_checker import probe as galera_probe
from galera_checker.probe import PROBE_SQL, STATUS_NAMES, VARIABLE_NAMES, later_probe_sql

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
    """Answers the probe's statements as a MariaDB Galera node, noting each query it got."""

    def __init__(self, variables: dict[str, tuple[str, object]]) -> None:
        self.variables = variables
        self.queries: list[str] = []

    def results(self, sql: str, args: Sequence[object] | None) -> list[list[tuple[Any, ...]]]:
        self.queries.append(sql)
        if sql == PROBE_SQL:
            assert args == STATUS_NAMES + VARIABLE_NAMES
            shown = [(n.upper(), shown) for n, (shown, _) in self.variables.items()]
            return [list(STATUS), shown]
        assert args == STATUS_NAMES
        if sql == galera_probe.STATUS_SQL:
            return [list(STATUS)]
        names = [part.removeprefix("@@global.") for part in sql.split("SELECT ")[1].split(", ")]
        unknown = [n for n in names if n not in self.variables]
        if unknown:
            raise AssertionError(f"Unknown system variable '{unknown[0]}'")
        return [list(STATUS), [tuple(self.variables[n][1] for n in names)]]


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
    assert server.queries == [PROBE_SQL] + [later_probe_sql(present)] * 2
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
    server = FakeServer({})
    conn = FakeConnection(server)
    galera_probe.probe(conn)
    facts = galera_probe.probe(conn)
    assert server.queries[1] == galera_probe.STATUS_SQL
    assert facts.values == {name: value for name, value in STATUS}


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("read_only", 1, "ON"),
        ("wsrep_on", 0, "OFF"),
        ("wsrep_reject_queries", "ALL", "ALL"),
        ("pxc_maint_mode", b"MAINTENANCE", "MAINTENANCE"),
        ("wsrep_provider_options", None, ""),
    ],
)
def test_a_selected_variable_reads_as_show_variables_spells_it(
    name: str, value: object, text: str
) -> None:
    assert galera_probe._variable_text(name, value) == text


def test_only_known_variable_names_reach_the_sql() -> None:
    with pytest.raises(ValueError, match="version"):
        later_probe_sql(("read_only", "version(); DROP TABLE t"))
